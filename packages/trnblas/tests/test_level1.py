"""Level 1 against scipy.linalg.blas on the same values: sizes around the tile, layouts, dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.linalg import blas as sb

import trnblas

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
SIZES = (1, 7, 127, 128, 129, 1000)
# SciPy's names for the reductions whose result is real for complex data.
NRM2 = {
    torch.float32: sb.snrm2,
    torch.float64: sb.dnrm2,
    torch.complex64: sb.scnrm2,
    torch.complex128: sb.dznrm2,
}
ASUM = {
    torch.float32: sb.sasum,
    torch.float64: sb.dasum,
    torch.complex64: sb.scasum,
    torch.complex128: sb.dzasum,
}
ROT = {torch.float32: sb.srot, torch.float64: sb.drot, torch.complex64: sb.csrot, torch.complex128: sb.zdrot}
DOTU = {torch.float32: sb.sdot, torch.float64: sb.ddot, torch.complex64: sb.cdotu, torch.complex128: sb.zdotu}
IAMAX = {
    torch.float32: sb.isamax,
    torch.float64: sb.idamax,
    torch.complex64: sb.icamax,
    torch.complex128: sb.izamax,
}
DOTC = {torch.float32: sb.sdot, torch.float64: sb.ddot, torch.complex64: sb.cdotc, torch.complex128: sb.zdotc}

cases = pytest.mark.parametrize(
    "dtype,n,order",
    [(d, n, ("C", "strided")[(i + j) % 2]) for i, d in enumerate(DTYPES) for j, n in enumerate(SIZES)],
    ids=lambda p: str(p),
)


def _real(dtype: torch.dtype) -> torch.dtype:
    return torch.empty((), dtype=dtype).real.dtype


@cases
def test_axpy_scal_copy_swap(h, rng, dtype, n, order):
    x, x_np = h.operand(rng, (n,), dtype, order)
    y, y_np = h.operand(rng, (n,), dtype, order)
    a = h.alpha_for(dtype, -1.25)
    h.check(trnblas.axpy(x, y, a=a), h.ref("axpy", dtype)(x_np, y_np.copy(), a=a), dtype, 1)
    h.check(trnblas.axpy(x, y), h.ref("axpy", dtype)(x_np, y_np.copy()), dtype, 1)
    h.check(trnblas.scal(a, x), h.ref("scal", dtype)(a, x_np.copy()), dtype)
    h.check(trnblas.copy(x, y), h.ref("copy", dtype)(x_np, y_np.copy()), dtype)
    h.check(trnblas.copy(x), x_np, dtype)
    new_x, new_y = trnblas.swap(x, y)
    want_x, want_y = h.ref("swap", dtype)(x_np.copy(), y_np.copy())
    h.check(new_x, want_x, dtype)
    h.check(new_y, want_y, dtype)


@cases
def test_reductions(h, rng, dtype, n, order):
    x, x_np = h.operand(rng, (n,), dtype, order)
    y, y_np = h.operand(rng, (n,), dtype, order)
    h.check(trnblas.dot(x, y), DOTU[dtype](x_np, y_np), dtype, n)
    h.check(trnblas.dotc(x, y), DOTC[dtype](x_np, y_np), dtype, n)
    h.check(trnblas.nrm2(x), NRM2[dtype](x_np), _real(dtype), n)
    h.check(trnblas.asum(x), ASUM[dtype](x_np), _real(dtype), n)
    got = trnblas.iamax(x)
    assert got.dtype == torch.int64 and got.dim() == 0 and got.device == x.device
    assert int(got) == int(IAMAX[dtype](x_np))


@cases
def test_rot(h, rng, dtype, n, order):
    x, x_np = h.operand(rng, (n,), dtype, order)
    y, y_np = h.operand(rng, (n,), dtype, order)
    c, s = np.cos(0.3), np.sin(0.3)
    got_x, got_y = trnblas.rot(x, y, c, s)
    want_x, want_y = ROT[dtype](x_np.copy(), y_np.copy(), c, s)
    h.check(got_x, want_x, dtype)
    h.check(got_y, want_y, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nrm2_does_not_overflow_or_underflow(dtype):
    # From the definition, not from the host BLAS: nrm2 = sqrt(sum |x_i|^2) = sqrt(3) * s for three
    # entries s, although s^2 overflows (or underflows to 0) in the input's precision. Reference BLAS
    # scales to get this; whether a host's OpenBLAS kernel does varies between builds and CPUs.
    big = 1e30 if dtype in (torch.float32, torch.complex64) else 1e200
    for scale in (big, 1.0 / big):
        x = torch.full((3,), scale, dtype=dtype)
        got = float(trnblas.nrm2(x))
        assert np.isfinite(got) and got > 0
        np.testing.assert_allclose(got, math.sqrt(3.0) * scale, rtol=1e-5)
    assert float(trnblas.nrm2(torch.zeros(4, dtype=dtype))) == 0.0
    assert np.isinf(float(trnblas.nrm2(torch.tensor([1.0, float("inf")], dtype=dtype))))
    assert np.isnan(float(trnblas.nrm2(torch.tensor([1.0, float("nan")], dtype=dtype))))


def test_iamax_measures_complex_by_real_plus_imaginary_and_takes_the_first_tie():
    x = torch.tensor([1 + 1j, -3 + 0j, 2 + 2j, 0 - 4j], dtype=torch.complex128)
    # |Re|+|Im| is 2, 3, 4, 4: the first of the two 4s (|x| would pick index 3 alone).
    assert int(trnblas.iamax(x)) == int(sb.izamax(x.numpy())) == 2
    assert int(trnblas.iamax(torch.tensor([1.0, -3.0, 3.0]))) == int(
        sb.isamax(np.array([1.0, -3.0, 3.0], np.float32))
    )


def test_iamax_nan_counts_as_largest():
    # Our documented choice (docs/trnblas.md): the first NaN's index. BLAS builds disagree here
    # (reference BLAS's `>` test skips a NaN after the first element; OpenBLAS kernels vary), so
    # the expectation is the documented index, not a host library's answer.
    for values, first_nan in (([1.0, np.nan, 5.0], 1), ([7.0, 5.0, np.nan, np.nan], 2), ([np.nan, 9.0], 0)):
        assert int(trnblas.iamax(torch.tensor(values, dtype=torch.float64))) == first_nan


def test_axpy_with_zero_scale_does_not_read_x():
    x = torch.full((3,), float("nan"), dtype=torch.float64)
    y = torch.arange(3, dtype=torch.float64)
    np.testing.assert_array_equal(trnblas.axpy(x, y, a=0.0).numpy(), y.numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_vectors(dtype):
    e = torch.zeros(0, dtype=dtype)
    real = _real(dtype)
    for value, want_dtype in ((trnblas.dot(e, e), dtype), (trnblas.dotc(e, e), dtype)):
        assert value.dtype == want_dtype and value.item() == 0
    assert trnblas.nrm2(e).dtype == real and trnblas.nrm2(e).item() == 0
    assert trnblas.asum(e).dtype == real and trnblas.asum(e).item() == 0
    assert int(trnblas.iamax(e)) == -1
    for result in (trnblas.axpy(e, e), trnblas.scal(2.0, e), trnblas.copy(e), *trnblas.swap(e, e)):
        assert result.shape == (0,) and result.dtype == dtype
    assert all(r.shape == (0,) for r in trnblas.rot(e, e, 0.6, 0.8))
