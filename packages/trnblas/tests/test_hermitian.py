"""hemm, herk and her2k on the PyTorch route against SciPy's c/z BLAS (and, for real data, the
symmetric routines they reduce to), reading one triangle, with a real diagonal on output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas

COMPLEX = [torch.complex64, torch.complex128]


@pytest.mark.parametrize("mn", [(1, 1), (7, 129), (128, 128), (130, 65)], ids=str)
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_hemm_reads_one_triangle_and_a_real_diagonal(h, rng, dtype, mn, side, lower):
    m, n = mn
    order = n if side else m
    a = h.values(rng, (order, order), dtype)
    a[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] = np.nan
    b, b_np = h.operand(rng, (m, n), dtype, "F" if side else "C")
    c, c_np = h.operand(rng, (m, n), dtype)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, 0.5)
    got = trnblas.hemm(alpha, torch.from_numpy(a), b, beta, c, side=side, lower=lower)
    # The diagonal's imaginary parts are not read (taken as zero): the reference gets them zeroed.
    a_ref = h.as_referenced(a, bool(lower), hermitian=True)
    want = h.ref("hemm", dtype)(alpha, a_ref, b_np, beta=beta, c=c_np, side=side, lower=lower)
    h.check(got, want, dtype, order)


@pytest.mark.parametrize("nk", [(1, 1), (7, 129), (129, 128), (127, 7)], ids=str)
@pytest.mark.parametrize("trans", [0, 2])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_herk_and_her2k_match_scipy(h, rng, dtype, nk, trans, lower):
    n, k = nk
    shape = (k, n) if trans else (n, k)
    a, a_np = h.operand(rng, shape, dtype)
    b, b_np = h.operand(rng, shape, dtype, "F")
    c, c_np = h.operand(rng, (n, n), dtype)
    c_np[np.diag_indices(n)] = c_np[np.diag_indices(n)].real
    c = torch.from_numpy(c_np.copy())
    got = trnblas.herk(0.75, a, -2.0, c, trans=trans, lower=lower)
    h.check(got, h.ref("herk", dtype)(0.75, a_np, beta=-2.0, c=c_np, trans=trans, lower=lower), dtype, k)
    assert torch.all(got.diagonal().imag == 0)
    alpha = h.alpha_for(dtype)
    got = trnblas.her2k(alpha, a, b, 0.5, c, trans=trans, lower=lower)
    want = h.ref("her2k", dtype)(alpha, a_np, b_np, beta=0.5, c=c_np, trans=trans, lower=lower)
    h.check(got, want, dtype, 2 * k)
    other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    np.testing.assert_array_equal(got.numpy()[other], c_np[other])
    got = trnblas.herk(1.0, a, trans=trans, lower=lower)  # no c: zeros in the other triangle
    np.testing.assert_array_equal(got.numpy()[other], 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_real_data_reduces_to_the_symmetric_routines(h, rng, dtype):
    a, a_np = h.operand(rng, (9, 9), dtype)
    b, b_np = h.operand(rng, (9, 4), dtype)
    h.check(trnblas.hemm(1.5, a, b, lower=1), h.ref("symm", dtype)(1.5, a_np, b_np, lower=1), dtype, 9)
    h.check(trnblas.herk(2.0, b, trans=1), h.ref("syrk", dtype)(2.0, b_np, trans=1), dtype, 9)
    h.check(trnblas.her2k(0.5, a, a), h.ref("syr2k", dtype)(0.5, a_np, a_np), dtype, 18)


def test_errors_name_the_argument():
    z = torch.ones(3, 3, dtype=torch.complex64)
    with pytest.raises(ValueError, match="trans 0 or 2.*syrk"):
        trnblas.herk(1.0, z, trans=1)
    with pytest.raises(ValueError, match="trans 0 or 2.*syr2k"):
        trnblas.her2k(1.0, z, z, trans=1)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        trnblas.herk(1j, z)
    with pytest.raises(TypeError, match="beta must be a real number"):
        trnblas.her2k(1j, z, z, beta=1j)
    with pytest.raises(ValueError, match=r"a must have shape \(2, 2\)"):
        trnblas.hemm(1.0, z, torch.ones(2, 3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="same dtype"):
        trnblas.hemm(1.0, z, torch.ones(3, 3, dtype=torch.complex128))
