"""Level 2 against scipy.linalg.blas on the same arguments: every flag, ragged shapes, layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import blas as sb

import trnblas

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
ORDERS = ("C", "F", "strided")
MN_SHAPES = [(1, 1), (7, 129), (127, 128), (128, 7), (129, 1), (1000, 129)]
ORDERS_N = [1, 7, 127, 128, 129, 1000]
GERU = {torch.float32: sb.sger, torch.float64: sb.dger, torch.complex64: sb.cgeru, torch.complex128: sb.zgeru}
GERC = {torch.float32: sb.sger, torch.float64: sb.dger, torch.complex64: sb.cgerc, torch.complex128: sb.zgerc}


def rotate(*parts: int) -> str:
    """One memory layout per case, cycling so that every layout meets every flag and shape."""
    return ORDERS[sum(parts) % len(ORDERS)]


def vector_order(order: str) -> str:
    return "strided" if order == "strided" else "C"


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("mn", MN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_matches_scipy(h, rng, dtype, mn, trans):
    m, n = mn
    order = rotate(trans, MN_SHAPES.index(mn), DTYPES.index(dtype))
    a, a_np = h.operand(rng, (m, n), dtype, order)
    rows, cols = (m, n) if trans == 0 else (n, m)
    x, x_np = h.operand(rng, (cols,), dtype, vector_order(order))
    y, y_np = h.operand(rng, (rows,), dtype, vector_order(order))
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, -0.5)
    gemv = h.ref("gemv", dtype)
    got = trnblas.gemv(alpha, a, x, beta=beta, y=y, trans=trans)
    h.check(got, gemv(alpha, a_np, x_np, beta=beta, y=y_np.copy(), trans=trans), dtype, cols)
    h.check(trnblas.gemv(alpha, a, x, trans=trans), gemv(alpha, a_np, x_np, trans=trans), dtype, cols)


def test_gemv_beta_zero_does_not_read_y(h, rng):
    a, a_np = h.operand(rng, (7, 5), torch.float64)
    x, x_np = h.operand(rng, (5,), torch.float64)
    y = torch.full((7,), float("nan"), dtype=torch.float64)
    # Reference BLAS: with beta = 0, y need not be set on input; the expectation is a x alone.
    h.check(trnblas.gemv(1.0, a, x, beta=0.0, y=y), a_np @ x_np, torch.float64, 5)


def _symmetric_reference(alpha, a_np, x_np, beta, y_np, lower):
    """NumPy: the symmetric (not Hermitian) matrix from one triangle, then alpha a x + beta y."""
    tri = np.tril(a_np) if lower else np.triu(a_np)
    full = tri + tri.T - np.diag(np.diag(a_np))
    return alpha * full @ x_np + beta * y_np


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("n", ORDERS_N)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_symv_reads_one_triangle(h, rng, dtype, n, lower):
    order = rotate(lower, ORDERS_N.index(n), DTYPES.index(dtype))
    a_np = h.values(rng, (n, n), dtype)
    unread = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    a_nan = a_np.copy()
    a_nan[unread] = np.nan
    a = h.layout(a_nan, order)
    x, x_np = h.operand(rng, (n,), dtype, vector_order(order))
    y, y_np = h.operand(rng, (n,), dtype, vector_order(order))
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, 2.0)
    got = trnblas.symv(alpha, a, x, beta=beta, y=y, lower=lower)
    if dtype.is_complex:  # SciPy's BLAS has no complex symv (only the Hermitian hemv)
        want = _symmetric_reference(alpha, a_np, x_np, beta, y_np, lower)
    else:
        a_ref = h.as_referenced(a_nan, bool(lower), symmetric=True)
        want = h.ref("symv", dtype)(alpha, a_ref, x_np, beta=beta, y=y_np.copy(), lower=lower)
    h.check(got, want, dtype, n)


TRI_FLAGS = [(lower, trans, diag) for lower in (0, 1) for trans in (0, 1, 2) for diag in (0, 1)]


@pytest.mark.parametrize("flags", TRI_FLAGS, ids=lambda f: "lower{}-trans{}-diag{}".format(*f))
@pytest.mark.parametrize("n", ORDERS_N)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_trmv_and_trsv_match_scipy(h, rng, dtype, n, flags):
    lower, trans, diag = flags
    order = rotate(TRI_FLAGS.index(flags), ORDERS_N.index(n))
    a_np = h.triangular(rng, n, dtype, bool(lower), diag)
    a = h.layout(a_np, order)
    x, x_np = h.operand(rng, (n,), dtype, vector_order(order))
    kwargs = dict(lower=lower, trans=trans, diag=diag)
    a_ref = h.as_referenced(a_np, bool(lower), diag)
    h.check(trnblas.trmv(a, x, **kwargs), h.ref("trmv", dtype)(a_ref, x_np.copy(), **kwargs), dtype, n)
    h.check(trnblas.trsv(a, x, **kwargs), h.ref("trsv", dtype)(a_ref, x_np.copy(), **kwargs), dtype, n)


@pytest.mark.parametrize("mn", MN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ger_and_gerc_match_scipy(h, rng, dtype, mn):
    m, n = mn
    order = rotate(MN_SHAPES.index(mn), DTYPES.index(dtype))
    x, x_np = h.operand(rng, (m,), dtype, vector_order(order))
    y, y_np = h.operand(rng, (n,), dtype, vector_order(order))
    a, a_np = h.operand(rng, (m, n), dtype, order)
    alpha = h.alpha_for(dtype)
    h.check(trnblas.ger(alpha, x, y, a=a), GERU[dtype](alpha, x_np, y_np, a=a_np.copy()), dtype, 2)
    h.check(trnblas.gerc(alpha, x, y, a=a), GERC[dtype](alpha, x_np, y_np, a=a_np.copy()), dtype, 2)
    h.check(trnblas.ger(alpha, x, y), GERU[dtype](alpha, x_np, y_np), dtype, 2)
    h.check(trnblas.gerc(1.0, x, y), GERC[dtype](1.0, x_np, y_np), dtype, 2)


def test_level2_empty_dimensions():
    f64 = torch.float64
    a = torch.ones(0, 3, dtype=f64)
    assert trnblas.gemv(1.0, a, torch.ones(3, dtype=f64)).shape == (0,)
    got = trnblas.gemv(1.0, a, torch.ones(0, dtype=f64), trans=1, beta=2.0, y=torch.ones(3, dtype=f64))
    np.testing.assert_array_equal(got.numpy(), np.full(3, 2.0))
    e = torch.ones(0, 0, dtype=f64)
    v = torch.ones(0, dtype=f64)
    for result in (trnblas.symv(1.0, e, v), trnblas.trmv(e, v), trnblas.trsv(e, v)):
        assert result.shape == (0,) and result.dtype == f64
    assert trnblas.ger(1.0, v, torch.ones(4, dtype=f64)).shape == (0, 4)
    np.testing.assert_array_equal(
        trnblas.ger(1.0, torch.ones(2, dtype=f64), v, a=torch.ones(2, 0, dtype=f64)), np.ones((2, 0))
    )
