"""Complex BLAS on the emulator's kernels (the shared complex GEMM, trncore.kernels.complex_gemm):
complex64 gemm (every transpose), syrk, symm, hemm, herk and her2k against SciPy's c-prefixed BLAS
on aligned and ragged shapes, with NaN where BLAS must not read. REQUIRE_NKI is set: a call that
fell back to PyTorch would fail."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import blas as sb

import trnblas
from trncore import dispatch
from trncore.kernels.complex_gemm import use_gauss

pytestmark = pytest.mark.simulator

SHAPES = [(1, 1, 1), (7, 129, 130), (128, 128, 128), (130, 65, 257)]


@pytest.fixture
def nki_sim(monkeypatch: pytest.MonkeyPatch):
    for name in ("TRNBLAS_FORCE_BACKEND", "TRNSCI_FORCE_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRNBLAS_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNBLAS_REQUIRE_NKI", "1")
    dispatch.reset_fallback_warnings()
    launched: list[str] = []
    real_launch = dispatch.KernelContext.launch

    def counting(self, kernel, *tensors, **params):
        launched.append(kernel.__name__)
        return real_launch(self, kernel, *tensors, **params)

    monkeypatch.setattr(dispatch.KernelContext, "launch", counting)
    with trnblas.backend("nki"):
        yield launched


def _c64(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _close(got: torch.Tensor, want: np.ndarray, k: int) -> None:
    assert got.dtype == torch.complex64
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=2e-6 * np.sqrt(k) * scale)


@pytest.mark.parametrize("mkn", SHAPES, ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 2), (2, 1)], ids=str)
def test_complex64_gemm(nki_sim, mkn, trans):
    m, k, n = mkn
    ta, tb = trans
    rng = np.random.default_rng(m + 7 * k + 31 * n + 3 * ta + tb)
    a = _c64(rng, (k, m) if ta else (m, k))
    b = _c64(rng, (n, k) if tb else (k, n))
    c = _c64(rng, (m, n))
    alpha, beta = 0.5 - 1.25j, 2.0 + 0.5j
    got = trnblas.gemm(alpha, torch.from_numpy(a), torch.from_numpy(b), beta, torch.from_numpy(c), ta, tb)
    _close(got, sb.cgemm(alpha, a, b, beta=beta, c=c, trans_a=ta, trans_b=tb), k)
    assert nki_sim == ["complex_matmul_kernel"]


@pytest.mark.parametrize("nk", [(1, 1), (7, 129), (128, 128), (130, 65)], ids=str)
@pytest.mark.parametrize("trans", [0, 2])
@pytest.mark.parametrize("lower", [0, 1])
def test_complex64_herk_and_her2k(nki_sim, nk, trans, lower):
    n, k = nk
    rng = np.random.default_rng(n + 3 * k + 5 * trans + lower)
    shape = (k, n) if trans else (n, k)
    a, b, c = _c64(rng, shape), _c64(rng, shape), _c64(rng, (n, n))
    c[np.diag_indices(n)] = c[np.diag_indices(n)].real  # BLAS: a Hermitian c has a real diagonal
    ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
    got = trnblas.herk(0.75, ta, -1.5, tc, trans=trans, lower=lower)
    want = sb.cherk(0.75, a, beta=-1.5, c=c, trans=trans, lower=lower)
    _close(got, want, k)
    assert np.all(got.numpy()[np.diag_indices(n)].imag == 0)
    got = trnblas.her2k(0.5 + 2j, ta, tb, 0.25, tc, trans=trans, lower=lower)
    want = sb.cher2k(0.5 + 2j, a, b, beta=0.25, c=c, trans=trans, lower=lower)
    _close(got, want, 2 * k)
    other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    np.testing.assert_array_equal(got.numpy()[other], c[other])  # c's other triangle, as given
    assert set(nki_sim) == {"complex_matmul_kernel"} and len(nki_sim) == 2


@pytest.mark.parametrize("mn", [(1, 1), (7, 130), (129, 65)], ids=str)
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
def test_complex64_hemm_and_symm_read_one_triangle(h, nki_sim, mn, side, lower):
    m, n = mn
    rng = np.random.default_rng(m + 11 * n + 2 * side + lower)
    order = n if side else m
    a = _c64(rng, (order, order))
    unread = np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)
    a_nan = a.copy()
    a_nan[unread] = np.nan
    b, c = _c64(rng, (m, n)), _c64(rng, (m, n))
    ta, tb, tc = (torch.from_numpy(x) for x in (a_nan, b, c))
    got = trnblas.hemm(1.5 - 0.5j, ta, tb, 0.5j, tc, side=side, lower=lower)
    a_ref = h.as_referenced(a_nan, bool(lower), hermitian=True)
    _close(got, sb.chemm(1.5 - 0.5j, a_ref, b, beta=0.5j, c=c, side=side, lower=lower), order)
    got = trnblas.symm(1.5 - 0.5j, ta, tb, 0.5j, tc, side=side, lower=lower)
    a_ref = h.as_referenced(a_nan, bool(lower), symmetric=True)
    _close(got, sb.csymm(1.5 - 0.5j, a_ref, b, beta=0.5j, c=c, side=side, lower=lower), order)
    assert nki_sim == ["complex_matmul_kernel"] * 2


@pytest.mark.parametrize("trans", [0, 1])
def test_complex64_syrk_runs_the_complex_kernel(nki_sim, trans):
    rng = np.random.default_rng(trans)
    a = _c64(rng, (65, 130) if trans else (130, 65))
    got = trnblas.syrk(1.0 + 1j, torch.from_numpy(a), trans=trans, lower=1)
    _close(got, sb.csyrk(1.0 + 1j, a, trans=trans, lower=1), 65)
    assert nki_sim == ["complex_matmul_kernel"]


def test_three_multiplication_form_on_large_tiles(nki_sim):
    # 128 x 512 output tiles take Gauss's three products (trncore.kernels.complex_gemm.use_gauss).
    rng = np.random.default_rng(5)
    a, b = _c64(rng, (130, 70)), _c64(rng, (70, 520))
    got = trnblas.gemm(1.0, torch.from_numpy(a), torch.from_numpy(b))
    _close(got, a.astype(np.complex128) @ b.astype(np.complex128), 70)
    assert use_gauss(130, 520) and not use_gauss(127, 520)
