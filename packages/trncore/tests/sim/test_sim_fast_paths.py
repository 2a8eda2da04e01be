"""The emulator's fast conversions give exactly what ml_dtypes' own conversions give."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import dtypes

BYTE_FLOATS = {
    "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
}


@pytest.mark.parametrize("name", sorted(BYTE_FLOATS))
def test_byte_float_casts_match_ml_dtypes(name: str) -> None:
    target = np.dtype(BYTE_FLOATS[name])
    # every top-16-bit pattern of float32 (signs, zeros, subnormals, inf, NaN, every rounding
    # position) with low halves that are zero, the smallest, a half and the largest
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    rng = np.random.default_rng(3)
    for low in (0, 1, 0x8000, 0xFFFF, *rng.integers(2, 0xFFFF, 4)):
        x = (hi | np.uint32(low)).view(np.float32)
        with np.errstate(all="ignore"):
            expected = x.astype(target).view(np.uint8)
        np.testing.assert_array_equal(dtypes.cast(x, name).view(np.uint8), expected)
    # reading: all 256 bit patterns, bit for bit (NaN payloads included)
    every = np.arange(256, dtype=np.uint8).view(target).reshape(16, 16)
    got = dtypes.to_f32(every)
    assert got.dtype == np.float32 and got.shape == (16, 16)
    np.testing.assert_array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))
    # a strided view reads the elements it shows
    np.testing.assert_array_equal(dtypes.to_f32(every[::2, 1::3]), every[::2, 1::3].astype(np.float32))


def test_to_f32_leaves_float32_alone() -> None:
    x = np.ones((4, 4), np.float32)
    assert dtypes.to_f32(x) is x
    b = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(dtypes.to_f32(b), x)


def _rows_kernel(pattern: list[int], offset: int):  # type: ignore[no-untyped-def]
    """Gather ``[step, num]`` elements at ``offset`` of the rows of ``a`` named by a per-partition
    row index (``vector_offset``), then scatter them to the same places in a copy of ``b``."""
    from trncore.sim import nisa, nl

    def k(a, rows, b):  # type: ignore[no-untyped-def]
        p = rows.shape[0]
        idx = nl.ndarray(rows.shape, rows.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        g = nl.ndarray((p, pattern[1]), a.dtype, buffer=nl.sbuf)
        src = a.ap([[a.shape[1], p], pattern], offset=offset, vector_offset=idx)
        nisa.dma_copy(dst=g, src=src)
        out = nl.ndarray(b.shape, b.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        dst = out.ap([[b.shape[1], p], pattern], offset=offset, vector_offset=idx)
        nisa.dma_copy(dst=dst, src=g)
        gout = nl.ndarray(g.shape, g.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=gout, src=g)
        return gout, out

    return k


@pytest.mark.parametrize(
    ("pattern", "offset"),
    [([1, 16], 0), ([1, 6], 5), ([2, 6], 3)],  # whole rows, a run inside rows, every other column
)
def test_vector_offset_rows_match_numpy(pattern: list[int], offset: int) -> None:
    """vector_offset gathers and scatters (AWS NKI Access Patterns deep dive, NKI 0.3.0) give
    NumPy's row indexing, whether a row's elements are one contiguous run or strided."""
    from trncore.sim import simulate

    rng = np.random.default_rng(5)
    a = rng.standard_normal((10, 16)).astype(np.float32)
    b = rng.standard_normal((10, 16)).astype(np.float32)
    rows = np.array([[7], [0], [3], [3], [9]], dtype=np.int32)  # a repeated row included
    step, n = pattern
    cols = offset + step * np.arange(n)
    kernel = _rows_kernel(pattern, offset)
    got, scattered = simulate(kernel)(a, rows, b)
    np.testing.assert_array_equal(got, a[rows[:, 0]][:, cols])
    expected = b.copy()
    for p, r in enumerate(rows[:, 0]):  # in partition order: a repeated row keeps the last write
        expected[r, cols] = got[p]
    np.testing.assert_array_equal(scattered, expected)


def test_vector_offset_row_out_of_range_still_refused() -> None:
    from trncore.sim import simulate
    from trncore.sim.errors import BoundsError

    a = np.zeros((10, 16), np.float32)
    kernel = _rows_kernel([1, 6], 5)
    with pytest.raises(BoundsError, match="vector_offset row index 10"):
        simulate(kernel)(a, np.array([[1], [10]], dtype=np.int32), a)
