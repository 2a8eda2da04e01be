"""Forms that a tenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: where ``nisa.topk`` puts a group's K results."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode
from trncore.sim.errors import ShapeError, UninitializedReadError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2101)
BF16 = ml_dtypes.bfloat16
SNAKE = 16

# ---------------------------------------------------------------------- nisa.topk result layout
# nki.isa.topk (NKI 0.6.0): the source is a 16-partition snake (element j at partition j % 16,
# column j // 16 of a group); K is val_dst's free size; the K largest values come out in
# ascending order with their snake indices. Two public kernels read the K results as a snake too,
# result r at partition r % 16, column r // 16 of the group, so only the first ceil(K / 16)
# columns hold results (docs/emulator.md, "Readings chosen").


def topk_desnaked(src_h, k: int):
    """Snake rows of ``src_h`` ([16 g, x] bf16); per group, the K results read back as a snake:
    ``out[g, r] = result r`` (the ``.ap`` store walks column c of partition q to ``q + 16 c``)."""
    p, x = src_h.shape
    groups, cols = p // SNAKE, -(-k // SNAKE)
    src = nl.ndarray((p, x), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_h)
    vals = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=SNAKE * x)
    out_v = nl.ndarray((groups, SNAKE * cols), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    out_i = nl.ndarray((groups, SNAKE * cols), dtype=nl.uint32, buffer=nl.shared_hbm)
    for g in range(groups):
        rows = slice(SNAKE * g, SNAKE * g + SNAKE)
        full = k // SNAKE  # whole result columns
        if full:
            pattern = [[1, SNAKE], [SNAKE, full]]
            nisa.dma_copy(dst=out_v.ap(pattern=pattern, offset=g * SNAKE * cols), src=vals[rows, 0:full])
            nisa.dma_copy(dst=out_i.ap(pattern=pattern, offset=g * SNAKE * cols), src=idx[rows, 0:full])
        rest = k - SNAKE * full  # results in a last, partly filled column
        if rest:
            part = slice(SNAKE * g, SNAKE * g + rest)
            at = g * SNAKE * cols + SNAKE * full
            nisa.dma_copy(dst=out_v.ap(pattern=[[1, rest], [1, 1]], offset=at), src=vals[part, full:cols])
            nisa.dma_copy(dst=out_i.ap(pattern=[[1, rest], [1, 1]], offset=at), src=idx[part, full:cols])
    return out_v, out_i


def topk_per_partition(src_h, k: int):
    """The neighbour: reads K results on every partition (columns past ceil(K / 16) hold none)."""
    p, x = src_h.shape
    src = nl.ndarray((p, x), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_h)
    vals = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=SNAKE * x)
    out = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=vals)  # HERE
    return out


def topk_3d_values(src_h, k: int):
    """The neighbour: the page gives val_dst the shape [par_dim, k]."""
    p, x = src_h.shape
    src = nl.ndarray((p, x), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_h)
    vals = nl.ndarray((p, 2, k // 2), dtype=nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=SNAKE * x)  # HERE
    out = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=idx)
    return out


def _snakes(groups: int, x: int) -> np.ndarray:
    """Distinct values, exact in bf16 (multiples of 1/4 within +-64), in the snake layout."""
    vals = np.stack([rng.permutation(SNAKE * x) for _ in range(groups)]).astype(np.float32) / 4 - 64
    return vals.reshape(groups, x, SNAKE).transpose(0, 2, 1).reshape(groups * SNAKE, x).astype(BF16)


@pytest.mark.parametrize(("groups", "x", "k"), [(1, 8, 16), (2, 10, 40), (8, 4, 7), (3, 32, 64)])
def test_topk_results_are_a_snake(target: str, groups: int, x: int, k: int) -> None:
    src = _snakes(groups, x)
    out_v, out_i = run_kernel(topk_desnaked, [src, k], target=target)
    for g in range(groups):
        snake = src[SNAKE * g : SNAKE * (g + 1)].astype(np.float32).T.reshape(-1)
        order = np.argsort(snake)[-k:]  # ascending values (all distinct)
        np.testing.assert_array_equal(out_i[g, :k], order.astype(np.uint32))
        np.testing.assert_array_equal(out_v[g, :k].astype(np.float32), snake[order])


def test_topk_per_partition_read_is_unwritten(target: str) -> None:
    src = _snakes(1, 8)
    with strict_mode(), pytest.raises(UninitializedReadError) as info:
        run_kernel(topk_per_partition, [src, 40], target=target)
    assert_reported_at(info.value, topk_per_partition)
    # outside strict mode the unwritten columns read as the sentinel fill (NaN), as nki.simulate
    out = run_kernel(topk_per_partition, [src, 40], target=target).astype(np.float32)
    assert np.isnan(out[:, 3:]).all() and np.isnan(out[8:, 2]).all()
    assert not np.isnan(out[:, :2]).any() and not np.isnan(out[:8, 2]).any()


def test_topk_values_of_three_dims_are_refused(target: str) -> None:
    with pytest.raises(ShapeError, match=r"val_dst must be") as info:
        run_kernel(topk_3d_values, [_snakes(1, 4), 8], target=target)
    assert_reported_at(info.value, topk_3d_values)
