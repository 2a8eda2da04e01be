"""Data-work fast paths of the fifth round (docs/emulator.md, Benchmark, "Data work, fifth
round") against NumPy references written here.

- tensor_scalar (nki.isa.tensor_scalar, NKI 0.3.0): ``dst = (data op0 operand0) op1 operand1``
  in float32, cast to dst's dtype. ``minimum`` / ``maximum`` against a constant operand run
  against a row of that constant instead of a NumPy scalar; the reference here is NumPy's ufunc
  with the scalar. Every bfloat16 bit pattern (as float32 or bfloat16 data: NaN payloads,
  +-inf, -0.0, subnormals) against constants that include NaN, +-0.0, +-inf and a subnormal,
  in both operand orders, into float32 and bfloat16 dsts, on a strided view and a ragged shape.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate

pytestmark = pytest.mark.simulator

BF16 = np.dtype(ml_dtypes.bfloat16)

#: constants of the operands: plain, both zeros, both infinities, NaN, a float32 subnormal,
#: and a value that bfloat16 does not hold (0.7)
CONSTANTS = (0.7, -0.7, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3.0)


def _all_bf16_patterns() -> np.ndarray:
    """Every bfloat16 bit pattern as float32, shaped (128, 512)."""
    return (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32).reshape(128, 512)


def _reference(x: np.ndarray, uf0, c0, rev0, uf1, c1, dst_dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        a = x.astype(np.float32)
        c0, c1 = np.float32(c0), np.float32(c1)
        y = uf0(c0, a) if rev0 else uf0(a, c0)
        if uf1 is not None:
            y = uf1(y, c1)
        return y.astype(dst_dtype)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    raw = np.dtype(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(raw), want.view(raw))


def _tensor_scalar_kernel(x, op0, c0, rev0, op1, c1, dst_dtype):
    p, f = x.shape
    big = nl.ndarray((p, f + 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=big, value=0.0)
    d = big[:, 8 : 8 + f]  # a strided view (rows f + 8 apart)
    nisa.dma_copy(dst=d, src=x)
    out_sb = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.sbuf)
    if op1 is None:
        nisa.tensor_scalar(dst=out_sb, data=d, op0=op0, operand0=c0, reverse0=rev0)
    else:
        nisa.tensor_scalar(dst=out_sb, data=d, op0=op0, operand0=c0, reverse0=rev0, op1=op1, operand1=c1)
    out = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_sb)
    return out


@pytest.mark.parametrize("data_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("op", ["minimum", "maximum"])
@pytest.mark.parametrize("rev", [False, True])
def test_tensor_scalar_min_max_against_a_constant_match_numpys_scalar_ufunc(
    data_dtype: str, dst_dtype: str, op: str, rev: bool
) -> None:
    x = _all_bf16_patterns()
    if data_dtype == "bfloat16":
        x = x.view(np.uint32) >> np.uint32(16)  # the same patterns, NaN payloads kept
        x = x.astype(np.uint16).view(BF16)
    uf = getattr(np, op)
    out_np = np.float32 if dst_dtype == "float32" else BF16
    for c in CONSTANTS:
        got = simulate(_tensor_scalar_kernel)(x, getattr(nl, op), c, rev, None, None, getattr(nl, dst_dtype))
        _same_bits(np.asarray(got), _reference(x, uf, c, rev, None, None, out_np))


@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16"])
def test_tensor_scalar_clip_pair_on_a_ragged_tile_matches_numpy(dst_dtype: str) -> None:
    # AWS's rmsnorm-quant clip: minimum then maximum against constants, on a ragged tile
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((37, 301)) * 2).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, 0.0, np.inf]
    x[1, :3] = [-np.inf, 1e-41, -1e-41]
    x = x.astype(BF16)
    out_np = np.float32 if dst_dtype == "float32" else BF16
    for c0, c1, rev in ((0.7, -0.7, False), (-0.0, 0.0, True), (np.nan, 2.0, False)):
        got = simulate(_tensor_scalar_kernel)(x, nl.minimum, c0, rev, nl.maximum, c1, getattr(nl, dst_dtype))
        _same_bits(np.asarray(got), _reference(x, np.minimum, c0, rev, np.maximum, c1, out_np))
    # the reference itself sees NaN propagate and the clip act (so a no-op path would fail)
    want = _reference(x, np.minimum, 0.7, False, np.maximum, -0.7, np.float32)
    assert np.isnan(want[0, 0]) and np.nanmax(want) <= np.float32(0.7) and np.nanmin(want) >= np.float32(-0.7)
