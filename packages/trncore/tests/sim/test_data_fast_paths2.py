"""Data-work fast paths of the fifth round (docs/emulator-speed.md, "Data work, fifth
round") against NumPy references written here.

- tensor_scalar (nki.isa.tensor_scalar, NKI 0.3.0): ``dst = (data op0 operand0) op1 operand1``
  in float32, cast to dst's dtype. ``minimum`` / ``maximum`` against a constant operand run
  against a row of that constant instead of a NumPy scalar; the reference here is NumPy's ufunc
  with the scalar. Every bfloat16 bit pattern (as float32 or bfloat16 data: NaN payloads,
  +-inf, -0.0, subnormals) against constants that include NaN, +-0.0, +-inf and a subnormal,
  in both operand orders, into float32 and bfloat16 dsts, on a strided view and a ragged shape.
- nc_matmul contracting one row (K = 1): one multiply plus the +0.0 the BLAS sum starts from;
  the reference is NumPy's matmul.
- scalar_tensor_tensor computed into its own buffer; the reference is NumPy's ufuncs on new
  arrays.
- activation_reduce with op=nl.square (NumPy's square ufunc, in place); the reference is
  ``y * y``.
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


def _strided_tile(x):
    """``x`` copied into an SBUF tile 8 elements wider, as a strided view (rows f + 8 apart)."""
    p, f = x.shape
    big = nl.ndarray((p, f + 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=big, value=0.0)
    d = big[:, 8 : 8 + f]
    nisa.dma_copy(dst=d, src=x)
    return d


def _to_hbm(sb):
    """A shared-HBM copy of the SBUF tile ``sb`` (the kernel's output)."""
    out = nl.ndarray(sb.shape, dtype=sb.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=sb)
    return out


#: every (data, dst) dtype pair the tests run: float32 and bfloat16 each way
DTYPE_PAIRS = pytest.mark.parametrize(
    ("data_dtype", "dst_dtype"),
    [("float32", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32"), ("bfloat16", "bfloat16")],
)


def _numpy_type(name: str) -> np.dtype:
    return np.dtype(np.float32) if name == "float32" else BF16


def _as_data(x: np.ndarray, data_dtype: str) -> np.ndarray:
    """Float32 values that bfloat16 holds exactly, as ``data_dtype`` (bfloat16: the same bit
    patterns, NaN payloads kept, which a cast would not)."""
    if data_dtype == "bfloat16":
        return (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(BF16)
    return x


def _tensor_scalar_kernel(x, op0, c0, rev0, op1, c1, dst_dtype):
    p, f = x.shape
    d = _strided_tile(x)
    out_sb = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.sbuf)
    if op1 is None:
        nisa.tensor_scalar(dst=out_sb, data=d, op0=op0, operand0=c0, reverse0=rev0)
    else:
        nisa.tensor_scalar(dst=out_sb, data=d, op0=op0, operand0=c0, reverse0=rev0, op1=op1, operand1=c1)
    return _to_hbm(out_sb)


@DTYPE_PAIRS
@pytest.mark.parametrize("op", ["minimum", "maximum"])
@pytest.mark.parametrize("rev", [False, True])
def test_tensor_scalar_min_max_against_a_constant_match_numpys_scalar_ufunc(
    data_dtype: str, dst_dtype: str, op: str, rev: bool
) -> None:
    x, out_np = _as_data(_all_bf16_patterns(), data_dtype), _numpy_type(dst_dtype)
    uf = getattr(np, op)
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
    out_np = _numpy_type(dst_dtype)
    for c0, c1, rev in ((0.7, -0.7, False), (-0.0, 0.0, True), (np.nan, 2.0, False)):
        got = simulate(_tensor_scalar_kernel)(x, nl.minimum, c0, rev, nl.maximum, c1, getattr(nl, dst_dtype))
        _same_bits(np.asarray(got), _reference(x, np.minimum, c0, rev, np.maximum, c1, out_np))
    # the reference itself sees NaN propagate and the clip act (so a no-op path would fail)
    want = _reference(x, np.minimum, 0.7, False, np.maximum, -0.7, np.float32)
    assert np.isnan(want[0, 0]) and np.nanmax(want) <= np.float32(0.7) and np.nanmin(want) >= np.float32(-0.7)


# nc_matmul (nki.isa.nc_matmul, NKI 0.3.0): ``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]``
# with float32 accumulation. A contraction of one row (K = 1, AWS's partition broadcast by a
# ones vector) runs as one multiply; the reference is NumPy's matmul of the float32 values,
# whose sum starts at +0.0 (a -0.0 product comes out +0.0).

#: stationary values: both zeros, +-1, +-inf, NaN, subnormals, a large value (overflow), 0.5
_STATIONARY = np.array(
    [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38, 0.5], np.float32
)


def _outer_kernel(s, v, w, accumulate):
    m, n = s.shape[1], v.shape[1]
    s_sb = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    v_sb = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_sb, src=v)
    w_sb = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s_sb, moving=v_sb)
    if accumulate:
        nisa.nc_matmul(dst=ps, stationary=s_sb, moving=w_sb, accumulate=True)
    sb = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    return _to_hbm(sb)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_one_row_matmul_matches_numpys_matmul_bit_for_bit(dtype: str, accumulate: bool) -> None:
    patterns = _all_bf16_patterns().reshape(-1)
    s = _STATIONARY.reshape(1, -1)
    for chunk in range(0, patterns.size, 8192):  # every bfloat16 pattern as a moving value
        v = patterns[chunk : chunk + 8192].reshape(16, 512)
        for r in range(0, 16, 4):
            vr, wr = v[r : r + 1], v[r + 1 : r + 2][:, ::-1].copy()
            sr, vr, wr = (_as_data(a, dtype) for a in (s, vr, wr))
            with np.errstate(all="ignore"):
                f = [a.astype(np.float32) for a in (sr, vr, wr)]
                want = np.matmul(f[0].T, f[1])
                if accumulate:
                    want = want + np.matmul(f[0].T, f[2])
            got = simulate(_outer_kernel)(sr, vr, wr, accumulate)
            _same_bits(np.asarray(got), want)
    # the reference holds the +0.0 of the sum: a -0.0 product (-0.0 x 1.0) is +0.0 there
    assert np.matmul(np.float32([[-0.0]]), np.float32([[1.0]])).view(np.uint32)[0, 0] == 0


# scalar_tensor_tensor (nki.isa.scalar_tensor_tensor, NKI 0.3.0): ``dst = (data op0 operand0)
# op1 operand1``, operand0 a scalar or (P, 1) tile, operand1 a full tile; reverse0 / reverse1
# swap each op's operands. Float32 arithmetic computed into the instruction's own buffer; the
# reference is NumPy's ufuncs on new arrays.


def _stt_kernel(x, col, other, op0, c0, rev0, op1, rev1, dst_dtype):
    p, f = x.shape
    d = _strided_tile(x)
    o = nl.ndarray(other.shape, dtype=other.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=other)
    c = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=col)
    out_sb = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=out_sb, data=d, op0=op0, operand0=c if c0 is None else c0,
                              reverse0=rev0, op1=op1, operand1=o, reverse1=rev1)  # fmt: skip
    return _to_hbm(out_sb)


@DTYPE_PAIRS
def test_scalar_tensor_tensor_matches_numpy_on_new_arrays(data_dtype: str, dst_dtype: str) -> None:
    rng = np.random.default_rng(17)
    p, f = 19, 257
    x = (rng.standard_normal((p, f)) * 3).astype(np.float32)
    x[0, :6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-40]
    other = (rng.standard_normal((p, f)) * 2).astype(np.float32)
    other[1, :5] = [0.0, -0.0, np.nan, np.inf, 1e-39]
    col = rng.standard_normal((p, 1)).astype(np.float32)
    col[2, 0], col[3, 0] = -0.0, np.inf
    if data_dtype == "bfloat16":
        x = x.astype(BF16)
    out_np = _numpy_type(dst_dtype)
    cases = [
        ("multiply", None, False, "multiply", False),  # AWS's rmsnorm: x * inv_rms * gamma
        ("add", None, True, "subtract", True),
        ("power", None, True, "maximum", False),
        ("subtract", 0.7, False, "multiply", True),
        ("maximum", -0.0, True, "minimum", False),  # a constant min/max operand (a row of it)
        ("minimum", np.nan, False, "add", False),
    ]
    for op0, c0, rev0, op1, rev1 in cases:
        got = simulate(_stt_kernel)(x, col, other, getattr(nl, op0), c0, rev0, getattr(nl, op1),
                                    rev1, getattr(nl, dst_dtype))  # fmt: skip
        a = x.astype(np.float32)
        k = col if c0 is None else np.float32(c0)
        with np.errstate(all="ignore"):
            y = getattr(np, op0)(k, a) if rev0 else getattr(np, op0)(a, k)
            y = getattr(np, op1)(other, y) if rev1 else getattr(np, op1)(y, other)
        _same_bits(np.asarray(got), y.astype(out_np))


# activation / activation_reduce with op=nl.square (nki.isa.activation, NKI 0.3.0:
# ``op(data * scale + bias)`` in float32; the reduce sums the results per partition): square is
# NumPy's square ufunc, computed in place; the reference is ``y * y`` on a new array.


def _square_kernel(x, bias, scale, dst_dtype):
    p, f = x.shape
    d = _strided_tile(x)
    b = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=bias)
    out_sb = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.sbuf)
    red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=out_sb, op=nl.square, data=d, reduce_op=nl.add, reduce_res=red,
                           bias=b, scale=scale)  # fmt: skip
    return _to_hbm(out_sb), _to_hbm(red)


@DTYPE_PAIRS
def test_activation_square_matches_a_product_on_every_bf16_pattern(data_dtype: str, dst_dtype: str) -> None:
    x, out_np = _as_data(_all_bf16_patterns(), data_dtype), _numpy_type(dst_dtype)
    bias = np.zeros((128, 1), np.float32)
    bias[1::3, 0] = -0.0
    bias[2::3, 0] = 0.5
    for scale in (1.0, -3.0):
        got, got_red = simulate(_square_kernel)(x, bias, scale, getattr(nl, dst_dtype))
        with np.errstate(all="ignore"):
            a = x.astype(np.float32) * np.float32(scale) + bias
            y = a * a
        _same_bits(np.asarray(got), y.astype(out_np))
        np.testing.assert_array_equal(np.asarray(got_red)[:, 0], y.sum(axis=1, dtype=np.float32))


def _relu_kernel(x, dst_dtype):
    p, f = x.shape
    d = _strided_tile(x)
    out_sb = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.sbuf)
    nisa.activation(dst=out_sb, op=nl.relu, data=d)
    return _to_hbm(out_sb)


@DTYPE_PAIRS
def test_activation_relu_matches_numpys_scalar_maximum(data_dtype: str, dst_dtype: str) -> None:
    # nki.isa.activation(op=nl.relu): max(x, 0) in float32 (scale 1.0, no bias); the reference
    # is NumPy's maximum against the scalar 0.0, on every bfloat16 pattern
    x, out_np = _as_data(_all_bf16_patterns(), data_dtype), _numpy_type(dst_dtype)
    got = simulate(_relu_kernel)(x, getattr(nl, dst_dtype))
    with np.errstate(all="ignore"):
        want = np.maximum(x.astype(np.float32) * np.float32(1.0), np.float32(0.0)).astype(out_np)
    _same_bits(np.asarray(got), want)
