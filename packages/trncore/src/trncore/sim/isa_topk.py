"""``nisa.topk`` (NKI 0.6.0, AWS page ``nki.isa.topk``): the K largest bf16 values of a snake.

The page's layout: the source tile holds a "16-partition snake": element ``j`` of the ``n`` input
elements sits at partition ``j % 16``, free column ``j // 16`` of a group of 16 partitions. The
instruction writes the K largest values in ascending order (bfloat16) to ``val_dst`` and their
0-based snake indices (uint32) to ``idx_dst``; K is ``val_dst``'s free size. The page does not say
where in ``val_dst`` the K results land. Reading made here (docs/emulator.md, "Readings chosen"):
the group's K results are themselves a 16-partition snake, result ``r`` (ascending) at partition
``r % 16``, column ``r // 16`` of the group, as AWS's NKI Library of SDK 2.32 reads them (its
``gpsimd_topk``, whose API page says the results "are de-snaked", copies ``val_dst[:, :ceil(K/16)]``
out and reports ``nki.simulate`` writing an ascending snake) and as a public DSA indexer, measured
exact on a device, does. Only those ``K`` positions are written; the rest of ``val_dst`` keeps what
it held. Equal values are ranked by lower index first. Constraints checked as the page lists
them: bf16 source and values, uint32 indices, everything in SBUF, ``val_dst`` and ``idx_dst`` of
shape ``[par_dim, K]``, ``8 <= n < 65536``, ``1 <= K < 32768``, ``K <= n``, ``src`` free size
``>= ceil(n / 16)``, partition count a multiple of 16.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trncore.sim.checks import check_compute_operand
from trncore.sim.errors import DtypeError, ShapeError
from trncore.sim.isa_common import begin as _begin

__all__ = ["topk"]

SNAKE = 16


def topk(val_dst: Any, idx_dst: Any, src: Any, n: int, name: str | None = None) -> None:
    """Top-``K`` values (ascending) and their snake indices of each 16-partition group of ``src``."""
    ctx, site = _begin()
    src = check_compute_operand(src, "topk", "src", site, buffers=("sbuf",))
    val_dst = check_compute_operand(val_dst, "topk", "val_dst", site, buffers=("sbuf",))
    idx_dst = check_compute_operand(idx_dst, "topk", "idx_dst", site, buffers=("sbuf",))
    for t, what, want in ((src, "src", "bfloat16"), (val_dst, "val_dst", "bfloat16"),
                          (idx_dst, "idx_dst", "uint32")):  # fmt: skip
        if t.dtype != want:
            raise DtypeError("topk-dtype", f"topk {what} must be {want}, got {t.describe()}", site)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"nisa.topk: n must be an int, got {n!r}")
    p, k = src.partitions, val_dst.free_size
    problems = []
    if p % SNAKE:
        problems.append(f"the partition count {p} is not a multiple of {SNAKE}")
    if not 8 <= n < 65536:
        problems.append(f"n={n} is outside [8, 65536)")
    if not (1 <= k < 32768 and k <= n):
        problems.append(f"K={k} (val_dst free size) must satisfy 1 <= K < 32768 and K <= n")
    if src.free_size < math.ceil(n / SNAKE):
        problems.append(f"src holds {src.free_size} columns, n={n} needs {math.ceil(n / SNAKE)}")
    for t, what in ((val_dst, "val_dst"), (idx_dst, "idx_dst")):
        if t.partitions != p or t.free_size != k or len(t.shape) != 2 or t.dynamic is not None:
            problems.append(f"{what} must be [{p}, {k}] (a 2-D static view), got {t.describe()}")
    if problems:
        raise ShapeError("topk-shape", "nisa.topk: " + "; ".join(problems), site)
    groups = p // SNAKE
    cols = math.ceil(k / SNAKE)  # the result snake's columns
    last = k - SNAKE * (cols - 1)  # its partitions in the last column, per group
    # the written regions (partition range, column range): whole columns, then the last
    # column's first `last` partitions of each group
    regions: list[tuple[int, int, int, int]] = []
    if last == SNAKE:
        regions.append((0, p, 0, cols))
    else:
        if cols > 1:
            regions.append((0, p, 0, cols - 1))
        regions.extend((SNAKE * g, SNAKE * g + last, cols - 1, cols) for g in range(groups))
    v_views = [val_dst[a:b, c:d] for a, b, c, d in regions]
    i_views = [idx_dst[a:b, c:d] for a, b, c, d in regions]
    s_op = src.operand(site)
    v_ops = [v.operand(site) for v in v_views]
    i_ops = [v.operand(site) for v in i_views]

    def run() -> None:
        data = np.asarray(s_op.read(), dtype=np.float32).reshape(groups, SNAKE, -1)
        # snake order: element j = column j // 16, partition j % 16
        snake = data.transpose(0, 2, 1).reshape(groups, -1)[:, :n]
        order = np.argsort(-snake, axis=1, kind="stable")[:, :k]  # largest first, low index first
        idx = order[:, ::-1]  # ascending values
        vals = np.take_along_axis(snake, idx, axis=1)
        v_snake = _as_snake(vals, cols).astype(val_dst.alloc.flat.dtype)
        i_snake = _as_snake(idx, cols).astype(np.uint32)
        for (a, b, c, d), v_op, i_op in zip(regions, v_ops, i_ops):
            v_op.write(v_snake[a:b, c:d])
            i_op.write(i_snake[a:b, c:d])

    meta = {"partitions": p, "free": 4 * n + k}  # the page's estimate: 4n + K GpSimd cycles
    ctx.emit("topk", "gpsimd", site, [src], [*v_views, *i_views], run, meta)


def _as_snake(results: np.ndarray, cols: int) -> np.ndarray:
    """Each group's ``K`` results (a row of ``results``, one per group) laid out as a 16-partition
    snake of ``cols`` columns: result ``r`` of group ``g`` at partition ``16 g + r % 16``, column
    ``r // 16``; the positions past ``K`` hold zeros (not written)."""
    groups, k = results.shape
    padded = np.pad(results, ((0, 0), (0, SNAKE * cols - k)))
    return padded.reshape(groups, cols, SNAKE).transpose(0, 2, 1).reshape(groups * SNAKE, cols)
