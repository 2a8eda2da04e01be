"""nc_find_index8, nc_match_replace8, nc_stream_shuffle against the nki.isa API pages.

Expectations come from the pages' own statements and examples (nki.isa.nc_match_replace8,
SDK 2.32 page: data [1, 2, 3, 4, 8 x 7], vals [3, 8 x 7] give dst_idx [2, 10, 9, 8, 7, 6, 5, 4]).
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import BoundsError, DtypeError, PartitionError, ShapeError

pytestmark = pytest.mark.simulator


def _find_kernel(data, vals, idx_dtype=nl.uint32):
    p, f = data.shape
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=data)
    v = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=vals)
    idx = nl.ndarray((p, 8), dtype=idx_dtype, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=d, vals=v)
    out = nl.ndarray((p, 8), dtype=idx_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=idx)
    return out


def test_find_index8_first_occurrences_duplicates_ascending_and_sentinel(target: str) -> None:
    rng = np.random.default_rng(3)
    data = rng.permutation(64 * 3).reshape(3, 64).astype(np.float32)
    pos = np.array([[5, 0, 63, 17, 2, 40, 9, 33]] * 3)
    vals = np.take_along_axis(data, pos, axis=1)
    np.testing.assert_array_equal(simulate(_find_kernel)(data, vals), pos)
    # duplicates in vals take successive occurrences; a value not present gives all ones
    row = np.array([[7, 1, 7, 2, 7, 3, 4, 5, 6, 8]], np.float32)
    vals = np.array([[7, 7, 7, 1, 99, 8, 6, 5]], np.float32)
    got = simulate(_find_kernel)(row, vals)
    np.testing.assert_array_equal(got, [[0, 2, 4, 1, 0xFFFFFFFF, 9, 8, 7]])
    got16 = simulate(lambda d, v: _find_kernel(d, v, nl.uint16))(row, vals)
    assert got16[0, 4] == 0xFFFF


def test_find_index8_invalid_neighbours(target: str) -> None:
    data = np.zeros((2, 16), np.float32)
    with pytest.raises(DtypeError, match=r"nc_find_index8-dst-dtype.*test_isa_select"):
        simulate(lambda d, v: _find_kernel(d, v, nl.int32))(data, np.zeros((2, 8), np.float32))
    with pytest.raises(ShapeError, match="nc_find_index8-data-size"):
        simulate(_find_kernel)(np.zeros((2, 7), np.float32), np.zeros((2, 8), np.float32))


def _replace_kernel(data, vals, imm):
    p, f = data.shape
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=data)
    v = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=vals)
    r = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=r, data=d, vals=v, imm=imm, dst_idx=idx)
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    out_idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_idx, src=idx)
    return out, out_idx


def test_match_replace8_the_pages_example_and_top8_loop(target: str) -> None:
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = simulate(_replace_kernel)(data, vals, -1.0)
    np.testing.assert_array_equal(idx, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(out, [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])
    # max8 + match_replace8 rounds give the top 16 of a row, as nkilib's top-k does
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 100)).astype(np.float32)

    def top16(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        m = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m[:, 0:8], src=t)
        nisa.nc_match_replace8(dst=t, data=t, vals=m[:, 0:8], imm=-3.0e38)
        nisa.max8(dst=m[:, 8:16], src=t)
        out = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=m)
        return out

    np.testing.assert_array_equal(simulate(top16)(x), -np.sort(-x, axis=1)[:, :16])


def _page_reference(x, v, order, sentinel):
    """The pages' rule element by element: each value in ``order`` takes the first occurrence
    in its row not yet taken (fp32 equality: NaN matches nothing, -0.0 matches 0.0)."""
    idx = np.full(v.shape, sentinel, dtype=np.int64)
    for r in range(x.shape[0]):
        taken: set[int] = set()
        for i in order:
            for j in range(x.shape[1]):
                if x[r, j] == v[r, i] and j not in taken:
                    taken.add(j)
                    idx[r, i] = j
                    break
    return idx


def test_search_instructions_on_many_duplicates_nan_and_signed_zero(target: str) -> None:
    rng = np.random.default_rng(11)
    pool = np.array([0.0, -0.0, 1.0, 2.0, np.nan, 3.5], np.float32)
    x = rng.choice(pool, size=(32, 40)).astype(np.float32)
    v = rng.choice(pool, size=(32, 8)).astype(np.float32)
    found = simulate(_find_kernel)(x, v)
    np.testing.assert_array_equal(found, _page_reference(x, v, range(8), 0xFFFFFFFF))
    out, idx = simulate(_replace_kernel)(x, v, -7.0)
    want_idx = _page_reference(x, v, range(7, -1, -1), 0xFFFFFFFF)
    np.testing.assert_array_equal(idx, want_idx)
    want = x.copy()
    for r, i in zip(*np.nonzero(want_idx != 0xFFFFFFFF)):
        want[r, want_idx[r, i]] = -7.0
    np.testing.assert_array_equal(out, want)


def test_search_instructions_on_wide_rows_with_few_candidates(target: str) -> None:
    # The top-k shape of the search: wide rows, the 8 values among the row's largest, so only a
    # few elements per row can match (the emulator then matches those alone). Duplicates beyond
    # the occurrences, a missing value, NaN and both zeros, against the pages' element rule.
    rng = np.random.default_rng(13)
    x = (-np.abs(rng.standard_normal((6, 300))) - 1.0).astype(np.float32)
    for r in range(6):
        cols = rng.choice(300, size=6, replace=False)
        x[r, cols] = [5.0, 6.0, 5.0, 0.0, -0.0, 5.0]
    v = np.array([6.0, 5.0, 5.0, 5.0, 5.0, np.nan, 7.0, -0.0], np.float32)
    v = np.stack([rng.permutation(v) for _ in range(6)])
    found = simulate(_find_kernel)(x, v)
    np.testing.assert_array_equal(found, _page_reference(x, v, range(8), 0xFFFFFFFF))
    out, idx = simulate(_replace_kernel)(x, v, -9.0)
    want_idx = _page_reference(x, v, range(7, -1, -1), 0xFFFFFFFF)
    np.testing.assert_array_equal(idx, want_idx)
    want = x.copy()
    for r, i in zip(*np.nonzero(want_idx != 0xFFFFFFFF)):
        want[r, want_idx[r, i]] = -9.0
    np.testing.assert_array_equal(out, want)


def test_max8_duplicates_infinities_nan_and_wide_rows(target: str) -> None:
    # nki.isa.max8: the 8 largest values of each partition, descending (duplicates kept); NaN
    # taken as below every number. Reference: NumPy's full sort.
    def top8(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        m = nl.ndarray((a.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m, src=t)
        out = nl.ndarray((a.shape[0], 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=m)
        return out

    rng = np.random.default_rng(12)
    pool = np.array([1.0, 2.0, 2.0, -1.0, np.inf, -np.inf, 0.5], np.float32)
    tied = rng.choice(pool, size=(16, 30)).astype(np.float32)
    wide = rng.standard_normal((8, 16384)).astype(np.float32)
    with_nan = tied.copy()
    with_nan[3, ::2] = np.nan
    with_nan[5, 5:] = np.nan  # fewer than 8 numbers: NaN fills the last slots
    for a in (tied, wide, with_nan):
        np.testing.assert_array_equal(simulate(top8)(a), -np.sort(-a, axis=1)[:, :8])


def test_match_replace8_invalid_neighbour(target: str) -> None:
    def four_vals(a):
        t = nl.ndarray((2, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.nc_match_replace8(dst=t, data=t, vals=t[:, 0:4], imm=0.0)  # 4 vals, not 8
        return a

    with pytest.raises(ShapeError, match=r"nc_match_replace8-vals-shape.*test_isa_select"):
        simulate(four_vals)(np.zeros((2, 16), np.float32))


def _shuffle_kernel(x, mask, src_rows, dst_start):
    p, f = x.shape
    t = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=-1)
    nisa.dma_copy(dst=t[0:p, :], src=x)
    nisa.nc_stream_shuffle(dst=t[dst_start : dst_start + 32, :], src=t[0:src_rows, :], shuffle_mask=mask)
    out = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_stream_shuffle_broadcast_and_permute(target: str) -> None:
    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    # broadcast partition 0 into partitions 64..95 (nkilib's bias broadcast)
    got = simulate(_shuffle_kernel)(x[:1], (0,) * 32, 1, 64)
    expected = np.full((128, 4), -1, np.float32)
    expected[0] = x[0]
    expected[64:96] = x[0]
    np.testing.assert_array_equal(got, expected)
    # a reversal with 255 (unmodified) slots, in place
    mask = [31 - i if i % 4 else 255 for i in range(32)]

    def in_place(a):
        t = nl.ndarray((32, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=mask)
        out = nl.ndarray((32, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    expected = x.copy()
    for i, m in enumerate(mask):
        if m != 255:
            expected[i] = x[m]
    np.testing.assert_array_equal(simulate(in_place)(x), expected)


def test_stream_shuffle_invalid_neighbours(target: str) -> None:
    x = np.zeros((32, 4), np.float32)
    with pytest.raises(BoundsError, match=r"stream-shuffle-source.*test_isa_select"):
        simulate(_shuffle_kernel)(x[:1], (1,) * 32, 1, 0)  # reads partition 1 of a 1-row src
    with pytest.raises(PartitionError, match="start-partition|stream-shuffle-start"):
        simulate(_shuffle_kernel)(x[:1], (0,) * 32, 1, 16)  # 32 active partitions start at 16
    with pytest.raises(ShapeError, match="stream-shuffle-mask"):
        simulate(_shuffle_kernel)(x[:1], (0,) * 16, 1, 0)


def _range_kernel(x, lo, hi, start, false_value):
    p, f = x.shape
    t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    b0 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b0, src=lo)
    b1 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b1, src=hi)
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=d, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=b0, bound1=b1, reduce_res=m, reduce_op=nl.maximum,
                      range_start=start, on_false_value=false_value)  # fmt: skip
    out = nl.ndarray((p, f + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, 0:f], src=d)
    nisa.dma_copy(dst=out[:, f : f + 1], src=m)
    return out


def test_range_select_matches_the_pages_numpy_equivalent() -> None:
    from trncore.sim.runner import run_kernel

    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    lo = rng.integers(100, 116, (8, 1)).astype(np.float32)
    hi = lo + rng.integers(1, 12, (8, 1)).astype(np.float32)
    fmin = float(np.finfo(np.float32).min)
    got = run_kernel(_range_kernel, [x, lo, hi, 100, fmin], target="trn2")
    idx = (100 + np.arange(32, dtype=np.float32))[None, :]
    sel = np.where((idx >= lo) & (idx < hi), x, np.float32(fmin))
    np.testing.assert_array_equal(got[:, :32], sel)
    np.testing.assert_array_equal(got[:, 32:], sel.max(axis=1, keepdims=True))


def test_range_select_invalid_neighbours() -> None:
    from trncore.sim.errors import TargetError
    from trncore.sim.runner import run_kernel

    x = np.zeros((8, 32), np.float32)
    b = np.zeros((8, 1), np.float32)
    fmin = float(np.finfo(np.float32).min)
    with pytest.raises(TargetError, match=r"range-select-target.*test_isa_select"):
        run_kernel(_range_kernel, [x, b, b, 0, fmin], target="trn1")
    with pytest.raises(DtypeError, match="range-select-false-value"):
        run_kernel(_range_kernel, [x, b, b, 0, 0.0], target="trn2")  # hardware needs FP32_MIN


def _gather_kernel(x, idx, idx_dtype=nl.uint32):
    p, f = x.shape
    n = idx.shape[1]
    d = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=x)
    i = nl.ndarray((p, n), dtype=idx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    g = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=g, data=d, indices=i)
    out = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_n_gather_within_partitions_and_its_index_range(target: str) -> None:
    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    idx = rng.integers(0, 40, (16, 7)).astype(np.uint32)
    np.testing.assert_array_equal(
        simulate(_gather_kernel)(x, idx), np.take_along_axis(x, idx.astype(np.int64), 1)
    )
    bad = idx.copy()
    bad[3, 2] = 40  # the invalid neighbour: an index past the partition's 40 elements
    with pytest.raises(BoundsError, match=r"n-gather-index-range.*test_isa_select"):
        simulate(_gather_kernel)(x, bad)
    with pytest.raises(DtypeError, match="n-gather-index-dtype"):
        simulate(_gather_kernel)(x, idx, nl.int32)


def test_dma_compute_adds_sources_in_fp32_and_its_rules(target: str) -> None:
    # nkilib's fused residual add: dma_compute(dst, (hidden, attn, mlp), scales=(1.0,)*3, nl.add)
    def residual(h, a, m, scale):
        out = nl.ndarray(h.shape, dtype=h.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(out, (h, a, m), scales=(1.0, 1.0, scale), reduce_op=nl.add)
        return out

    import ml_dtypes

    rng = np.random.default_rng(13)
    h, a, m = (rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    expected = (h.astype(np.float32) + a.astype(np.float32) + m.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(simulate(residual)(h, a, m, 1.0), expected)
    with pytest.raises(ShapeError, match=r"dma-compute-scales.*test_isa_select"):
        simulate(residual)(h, a, m, 0.5)  # the invalid neighbour: scales other than 1.0
