"""``nisa.local_gather``: gather within groups of 16 partitions on GpSimd.

AWS NKI docs, nki.isa.local_gather (NKI 0.3.0 / SDK 2.29; same signature and text through NKI
0.6.0 / SDK 2.32): each of GpSimd's eight cores serves 16 contiguous SBUF partitions. Core ``c``
reads the 16-partition slice of ``index`` (uint16), flattens it partition dimension first, keeps
the first ``num_valid_indices`` (default: all ``16 * index.free_size``), and every partition ``p``
of its slice gathers, for each index ``i``, the ``num_elem_per_idx`` contiguous elements of its
own row of ``src_buffer`` starting at element ``i``. The page's NumPy reference
(``test_nki_isa_local_gather.py``) passes indices pre-multiplied by ``num_elem_per_idx``: an
index is an element offset. ``dst`` keeps ``src_buffer``'s dtype and takes the
``num_valid_indices * num_elem_per_idx`` gathered elements per partition, in index order.

Rules (the page's constraints): all three tiles in SBUF (GpSimd cannot access PSUM); index
uint16; ``dst`` dtype equal to ``src_buffer``'s (no casting); ``src_buffer`` and ``index`` with
the same partition count, a multiple of 16, and ``dst`` with it too; ``num_elem_per_idx`` in
1, 2, 4, 8, 16, 32; ``num_valid_indices`` at most the indices of one core's slice and at most
4096; ``dst`` large enough for the gathered elements (ours: the page sizes ``dst`` as exactly
that; a larger ``dst`` keeps its other elements). Out-of-bound indices are undefined on the
hardware: refused when the instruction runs (traced run and every replay), like nc_n_gather.

Known issue of NKI 0.6.0 (release notes, Known Issues; :mod:`trncore.sim.known_issues`, rule
``local-gather-elem-per-idx``): ``num_elem_per_idx`` is ignored unless
``num_valid_indices * num_elem_per_idx == dst.size / dst.shape[0]``. Refused at the kernel's
line under 0.6.0 when ``num_elem_per_idx`` is not 1 and the sizes differ; in the ``warn`` /
``off`` modes it is computed as the note says the hardware does (one element per index).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import known_issues
from trncore.sim.checks import check_compute_operand
from trncore.sim.context import current, user_site
from trncore.sim.errors import BoundsError, DtypeError, ShapeError, site_suffix
from trncore.sim.isa_common import require_sbuf

__all__ = ["local_gather"]

#: GpSimd cores and the SBUF partitions each serves (nki.isa.local_gather, NKI 0.3.0)
PARTITIONS_PER_CORE = 16
ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)
MAX_INDICES_PER_CORE = 4096


def local_gather(
    dst: Any,
    src_buffer: Any,
    index: Any,
    num_elem_per_idx: int = 1,
    num_valid_indices: int | None = None,
    name: str | None = None,
) -> None:
    """Gather elements of ``src_buffer`` within each core's 16 partitions by ``index``."""
    ctx, site = current(), user_site()
    src = check_compute_operand(src_buffer, "local_gather", "src_buffer", site)
    idx = check_compute_operand(index, "local_gather", "index", site)
    dst = check_compute_operand(dst, "local_gather", "dst", site)
    require_sbuf("local_gather", "local-gather-sbuf", site, src_buffer=src, index=idx, dst=dst)
    if idx.dtype != "uint16":
        raise DtypeError("local-gather-index-dtype", "local_gather indices must be uint16, got "
                         f"{idx.describe()}", site)  # fmt: skip
    if dst.dtype != src.dtype:
        raise DtypeError("local-gather-dtype", "local_gather keeps src_buffer's dtype (no "
                         f"casting): {src.describe()} -> {dst.describe()}", site)  # fmt: skip
    p = src.partitions
    if idx.partitions != p or dst.partitions != p or p % PARTITIONS_PER_CORE:
        raise ShapeError("local-gather-partitions", "local_gather needs src_buffer, index and dst "
                         "on the same partitions, a multiple of 16: "
                         f"{src.describe()}, {idx.describe()}, {dst.describe()}", site)  # fmt: skip
    if isinstance(num_elem_per_idx, bool) or num_elem_per_idx not in ELEMS_PER_INDEX:
        raise ValueError(f"local_gather: num_elem_per_idx must be one of {ELEMS_PER_INDEX}, got "
                         f"{num_elem_per_idx!r}{site_suffix(site)}")  # fmt: skip
    per_core = PARTITIONS_PER_CORE * idx.free_size
    valid = per_core if num_valid_indices is None else num_valid_indices
    if isinstance(valid, bool) or not isinstance(valid, (int, np.integer)) or valid < 1:
        raise ValueError(f"local_gather: num_valid_indices must be a positive int, got "
                         f"{num_valid_indices!r}{site_suffix(site)}")  # fmt: skip
    valid = int(valid)
    if valid > min(per_core, MAX_INDICES_PER_CORE):
        raise ShapeError("local-gather-indices", f"local_gather num_valid_indices {valid} exceeds "
                         f"the {per_core} indices of one core's 16 partitions of "
                         f"{idx.describe()} or the limit of {MAX_INDICES_PER_CORE}", site)  # fmt: skip
    elems = num_elem_per_idx
    free = dst.free_size
    if elems != 1 and valid * elems != free:
        detail = (f"num_valid_indices {valid} x num_elem_per_idx {elems} = {valid * elems}, "
                  f"dst holds {free} per partition")  # fmt: skip
        if known_issues.check("local-gather-elem-per-idx", detail, site):
            elems = 1  # the hardware, per the note: one element per index
    n = valid * elems
    if n > free:
        raise ShapeError("local-gather-dst", f"local_gather gathers {valid} x {elems} = {n} "
                         f"elements per partition; dst {dst.describe()} holds {free}", site)  # fmt: skip
    f = src.free_size
    s_op, i_op, d_op = src.operand(site), idx.operand(site), dst.operand(site)
    offsets = np.arange(elems)

    def run() -> None:
        x = np.asarray(s_op.read()).reshape(p, f)
        k = np.asarray(i_op.read()).reshape(p, -1).astype(np.int64)
        out = np.asarray(d_op.read()).reshape(p, free).copy()
        for c in range(0, p, PARTITIONS_PER_CORE):
            rows = slice(c, c + PARTITIONS_PER_CORE)
            starts = k[rows].flatten(order="F")[:valid]  # partition dimension first
            if starts.size and (starts.max() + elems > f):
                raise BoundsError("local-gather-index-range", f"local_gather index "
                                  f"{int(starts.max())} (+{elems} elements) is outside [0, {f}) "
                                  f"of partitions {c}..{c + 15} of {src.describe()}", site)  # fmt: skip
            cols = (starts[:, None] + offsets[None, :]).reshape(-1)
            out[rows, :n] = x[rows][:, cols]
        d_op.write(out.reshape(dst.shape))

    reads = [src, idx] + ([dst] if n < free else [])
    meta = {"partitions": p, "free": n}
    ctx.emit("local_gather", "gpsimd", site, reads, [dst], run, meta)
