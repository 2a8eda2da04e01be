"""Level 3 against scipy.linalg.blas on the same arguments: every flag, ragged shapes, layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
ORDERS = ("C", "F", "strided")
# (m, k, n) around the 128-wide tile: 1, 7, 127, 128, 129 in every position.
GEMM_SHAPES = [(1, 1, 1), (7, 129, 1), (127, 128, 129), (128, 7, 127), (129, 1, 128), (1, 127, 7)]
MN_SHAPES = [(1, 1), (7, 129), (128, 127), (129, 7)]


def rotate(*parts: int) -> str:
    """One memory layout per case, cycling so that every layout meets every flag and shape."""
    return ORDERS[sum(parts) % len(ORDERS)]


@pytest.mark.parametrize("trans_b", [0, 1, 2])
@pytest.mark.parametrize("trans_a", [0, 1, 2])
@pytest.mark.parametrize("mkn", GEMM_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_matches_scipy(h, rng, dtype, mkn, trans_a, trans_b):
    m, k, n = mkn
    order = rotate(trans_a, 2 * trans_b, GEMM_SHAPES.index(mkn))
    a, a_np = h.operand(rng, (m, k) if trans_a == 0 else (k, m), dtype, order)
    b, b_np = h.operand(rng, (k, n) if trans_b == 0 else (n, k), dtype, order)
    c, c_np = h.operand(rng, (m, n), dtype, order)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, -0.3)
    got = trnblas.gemm(alpha, a, b, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b)
    want = h.ref("gemm", dtype)(alpha, a_np, b_np, beta=beta, c=c_np, trans_a=trans_a, trans_b=trans_b)
    h.check(got, want, dtype, k)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_defaults_and_unit_alpha(h, rng, dtype):
    a, a_np = h.operand(rng, (129, 127), dtype)
    b, b_np = h.operand(rng, (127, 7), dtype, "F")
    h.check(trnblas.gemm(1.0, a, b), h.ref("gemm", dtype)(1.0, a_np, b_np), dtype, 127)
    h.check(trnblas.gemm(2, a, b), h.ref("gemm", dtype)(2.0, a_np, b_np), dtype, 127)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_beta_zero_does_not_read_c_and_alpha_zero_does_not_read_a_b(h, rng, dtype):
    # Reference BLAS (xGEMM, netlib): "When BETA is supplied as zero then C need not be set on
    # input" and, with ALPHA = 0, A and B are not referenced. The expectations are written from
    # that definition, not from the host BLAS: OpenBLAS kernels differ on NaN inputs here (some
    # return NaN for 0 * NaN), so a library call cannot be the reference for these two cases.
    a, a_np = h.operand(rng, (7, 128), dtype)
    b, b_np = h.operand(rng, (128, 129), dtype)
    nan_c = torch.full((7, 129), float("nan"), dtype=dtype)
    wide = np.promote_types(a_np.dtype, np.float64)  # float64 or complex128
    want = 0.5 * (a_np.astype(wide) @ b_np.astype(wide))
    got = trnblas.gemm(0.5, a, b, beta=0.0, c=nan_c)
    assert not torch.isnan(got).any()
    h.check(got, want, dtype, 128)
    c, c_np = h.operand(rng, (7, 129), dtype)
    nan_a = torch.full((7, 128), float("nan"), dtype=dtype)
    got = trnblas.gemm(0.0, nan_a, b, beta=2.0, c=c)
    np.testing.assert_array_equal(got.numpy(), 2.0 * c_np)  # 2·c is exact in binary floating point


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_gemm_large_ragged(h, rng, dtype):
    a, a_np = h.operand(rng, (1000, 129), dtype, "F")
    b, b_np = h.operand(rng, (1000, 1000), dtype)
    c, c_np = h.operand(rng, (129, 1000), dtype)
    got = trnblas.gemm(-1.5, a, b, beta=0.25, c=c, trans_a=1, trans_b=1)
    want = h.ref("gemm", dtype)(-1.5, a_np, b_np, beta=0.25, c=c_np, trans_a=1, trans_b=1)
    h.check(got, want, dtype, 1000)


@pytest.mark.parametrize("mkn", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)], ids=str)
def test_gemm_empty_dimensions(mkn):
    m, k, n = mkn
    a, b = torch.ones(m, k, dtype=torch.float64), torch.ones(k, n, dtype=torch.float64)
    c = torch.full((m, n), 3.0, dtype=torch.float64)
    got = trnblas.gemm(2.0, a, b, beta=0.5, c=c)
    np.testing.assert_array_equal(got.numpy(), 2.0 * a.numpy() @ b.numpy() + 0.5 * c.numpy())
    assert got.shape == (m, n)
    np.testing.assert_array_equal(trnblas.gemm(1.0, a, b).numpy(), np.zeros((m, n)))


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16], ids=str)
def test_gemm_half_precision_inputs(rng, half):
    a64, b64 = (
        torch.from_numpy(rng.standard_normal((129, 64))),
        torch.from_numpy(rng.standard_normal((64, 7))),
    )
    a, b = a64.to(half), b64.to(half)
    got = trnblas.gemm(1.0, a, b, trans_b=0)
    assert got.dtype == half
    exact = a.double() @ b.double()
    np.testing.assert_allclose(got.double().numpy(), exact.numpy(), rtol=2e-2, atol=0.1)


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("mn", MN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_symm_matches_scipy_reading_one_triangle(h, rng, dtype, mn, side, lower):
    m, n = mn
    order = rotate(side, 2 * lower, MN_SHAPES.index(mn), DTYPES.index(dtype))
    order_a = n if side else m
    a_np = h.values(rng, (order_a, order_a), dtype)
    a_np[np.triu_indices(order_a, 1) if lower else np.tril_indices(order_a, -1)] = np.nan
    a = h.layout(a_np, order)
    b, b_np = h.operand(rng, (m, n), dtype, order)
    c, c_np = h.operand(rng, (m, n), dtype, order)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, 1.25)
    got = trnblas.symm(alpha, a, b, beta=beta, c=c, side=side, lower=lower)
    a_ref = h.as_referenced(a_np, bool(lower), symmetric=True)
    want = h.ref("symm", dtype)(alpha, a_ref, b_np, beta=beta, c=c_np, side=side, lower=lower)
    h.check(got, want, dtype, order_a)
    got = trnblas.symm(alpha, a, b, side=side, lower=lower)
    h.check(got, h.ref("symm", dtype)(alpha, a_ref, b_np, side=side, lower=lower), dtype, order_a)


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("nk", [(1, 1), (7, 129), (128, 7), (129, 128), (127, 1)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_syrk_updates_one_triangle_like_scipy(h, rng, dtype, nk, trans, lower):
    n, k = nk
    order = rotate(trans, lower, n, DTYPES.index(dtype))
    a, a_np = h.operand(rng, (n, k) if trans == 0 else (k, n), dtype, order)
    c, c_np = h.operand(rng, (n, n), dtype, order)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, -2.0)
    if trans == 2 and dtype.is_complex:
        with pytest.raises(ValueError, match="trans"):
            trnblas.syrk(alpha, a, beta=beta, c=c, trans=trans, lower=lower)
        return
    got = trnblas.syrk(alpha, a, beta=beta, c=c, trans=trans, lower=lower)
    want = h.ref("syrk", dtype)(alpha, a_np, beta=beta, c=c_np, trans=trans, lower=lower)
    h.check(got, want, dtype, k)
    # The other triangle is c's, exactly as given: not symmetrised, not scaled.
    other = np.tril_indices(n, -1) if not lower else np.triu_indices(n, 1)
    np.testing.assert_array_equal(got.numpy()[other], c_np[other])
    got = trnblas.syrk(alpha, a, trans=trans, lower=lower)
    h.check(got, h.ref("syrk", dtype)(alpha, a_np, trans=trans, lower=lower), dtype, k)


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("nk", [(1, 1), (7, 129), (129, 128), (127, 7)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_syr2k_matches_scipy(h, rng, dtype, nk, trans, lower):
    n, k = nk
    order = rotate(trans, 2 * lower, n, DTYPES.index(dtype))
    shape = (n, k) if trans == 0 else (k, n)
    a, a_np = h.operand(rng, shape, dtype, order)
    b, b_np = h.operand(rng, shape, dtype, order)
    c, c_np = h.operand(rng, (n, n), dtype, order)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, 0.5)
    got = trnblas.syr2k(alpha, a, b, beta=beta, c=c, trans=trans, lower=lower)
    want = h.ref("syr2k", dtype)(alpha, a_np, b_np, beta=beta, c=c_np, trans=trans, lower=lower)
    h.check(got, want, dtype, 2 * k)
    got = trnblas.syr2k(alpha, a, b, trans=trans, lower=lower)
    h.check(got, h.ref("syr2k", dtype)(alpha, a_np, b_np, trans=trans, lower=lower), dtype, 2 * k)


def test_syrk_with_beta_zero_keeps_the_other_triangle_of_c():
    a = torch.ones(3, 2, dtype=torch.float64)
    c = torch.full((3, 3), float("nan"), dtype=torch.float64)
    got = trnblas.syrk(1.0, a, beta=0.0, c=c, lower=1)
    np.testing.assert_array_equal(np.tril(got.numpy()), np.tril(np.full((3, 3), 2.0)))
    assert torch.isnan(got[np.triu_indices(3, 1)]).all()


TRIANGULAR_FLAGS = [
    (side, lower, trans, diag)
    for side in (0, 1)
    for lower in (0, 1)
    for trans in (0, 1, 2)
    for diag in (0, 1)
]


@pytest.mark.parametrize("flags", TRIANGULAR_FLAGS, ids=lambda f: "side{}-lower{}-trans{}-diag{}".format(*f))
@pytest.mark.parametrize("mn", MN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_trsm_and_trmm_match_scipy_reading_one_triangle(h, rng, dtype, mn, flags):
    side, lower, trans, diag = flags
    order = rotate(TRIANGULAR_FLAGS.index(flags), MN_SHAPES.index(mn))
    m, n = mn
    a_np = h.triangular(rng, n if side else m, dtype, bool(lower), diag)
    a = h.layout(a_np, order)
    b, b_np = h.operand(rng, (m, n), dtype, order)
    alpha = h.alpha_for(dtype, 1.5)
    kwargs = dict(side=side, lower=lower, trans_a=trans, diag=diag)
    a_ref = h.as_referenced(a_np, bool(lower), diag)
    got = trnblas.trsm(alpha, a, b, **kwargs)
    h.check(got, h.ref("trsm", dtype)(alpha, a_ref, b_np, **kwargs), dtype, max(m, n))
    got = trnblas.trmm(alpha, a, b, **kwargs)
    h.check(got, h.ref("trmm", dtype)(alpha, a_ref, b_np, **kwargs), dtype, max(m, n))


@pytest.mark.parametrize("side", [0, 1])
def test_trsm_large_solves_the_system(h, rng, side):
    a_np = h.triangular(rng, 1000, torch.float64, True, 0)
    b, b_np = h.operand(rng, (1000, 129) if side == 0 else (129, 1000), torch.float64)
    got = trnblas.trsm(2.0, torch.from_numpy(a_np), b, side=side, lower=1)
    want = h.ref("trsm", torch.float64)(2.0, h.as_referenced(a_np, True), b_np, side=side, lower=1)
    h.check(got, want, torch.float64, 1000)


@pytest.mark.parametrize("fn", ["trsm", "trmm"])
def test_triangular_empty_and_zero_alpha(fn):
    f = getattr(trnblas, fn)
    a = torch.eye(3, dtype=torch.float64)
    assert f(1.0, a, torch.ones(3, 0, dtype=torch.float64)).shape == (3, 0)
    assert f(1.0, torch.ones(0, 0, dtype=torch.float64), torch.ones(0, 4, dtype=torch.float64)).shape == (
        0,
        4,
    )
    nan_a = torch.full((3, 3), float("nan"), dtype=torch.float64)
    got = f(0.0, nan_a, torch.ones(3, 2, dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), np.zeros((3, 2)))


def test_rank_k_empty_dimensions():
    a = torch.ones(4, 0, dtype=torch.float64)
    c = torch.arange(16, dtype=torch.float64).reshape(4, 4)
    got = trnblas.syrk(1.0, a, beta=2.0, c=c, lower=1)
    want = np.where(np.tril(np.ones((4, 4))) > 0, 2.0 * c.numpy(), c.numpy())
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(trnblas.syr2k(1.0, a, a).numpy(), np.zeros((4, 4)))
    assert trnblas.syrk(1.0, torch.ones(0, 3, dtype=torch.float64)).shape == (0, 0)
