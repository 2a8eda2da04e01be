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
