"""trnblas's NKI kernels on the emulator (simulator route, REQUIRE_NKI set) against SciPy/torch.

Every call here must really run its kernel: REQUIRE_NKI turns a fallback into an error, and the
suite treats an unexpected NkiFallbackWarning as a failure. Shapes are small but ragged (1, 7,
127, 128, 129, 200); big shapes live in benchmarks/trnblas_nki_report.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import blas as sb

import trnblas
import trnblas.nki as tn
import trncore.sim as sim
from trnblas import _drivers
from trnblas.kernels import gemm_kernel, syrk_kernel
from trncore import NkiDispatchError, NkiFallbackWarning, dispatch

pytestmark = pytest.mark.simulator

SHAPES = [(1, 1, 1), (7, 127, 129), (128, 128, 128), (129, 200, 7), (1000, 1000, 1000)]
FLAGS = [(0, 0), (1, 0), (0, 1), (1, 1)]


@pytest.fixture
def nki_sim(monkeypatch: pytest.MonkeyPatch):
    """The simulator route with REQUIRE_NKI: a kernel that cannot run fails the test."""
    for name in ("TRNBLAS_FORCE_BACKEND", "TRNSCI_FORCE_BACKEND", "TRNBLAS_ALLOW_FP32_COMPUTE",
                 "TRNSCI_ALLOW_FP32_COMPUTE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRNBLAS_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNBLAS_REQUIRE_NKI", "1")
    previous = trnblas.get_backend()
    trnblas.set_backend("nki")
    dispatch.reset_fallback_warnings()
    yield monkeypatch
    trnblas.set_backend(previous)


@pytest.fixture(params=["trn1", "trn2"])
def target(request: pytest.FixtureRequest, nki_sim: pytest.MonkeyPatch) -> str:
    nki_sim.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", request.param)
    return request.param


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[tuple[int, ...]], dict]]:
    """Every kernel launch of the test: (kernel name, tensor shapes, compile-time parameters)."""
    seen: list[tuple[str, list[tuple[int, ...]], dict]] = []
    real_launch = dispatch.KernelContext.launch

    def counting(self, kernel, *tensors, **params):
        seen.append((kernel.__name__, [tuple(t.shape) for t in tensors], params))
        return real_launch(self, kernel, *tensors, **params)

    monkeypatch.setattr(dispatch.KernelContext, "launch", counting)
    return seen


def _f32(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def _close(got: torch.Tensor, want: np.ndarray, k: int = 1, dtype: torch.dtype = torch.float32) -> None:
    assert got.dtype == dtype
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.float().numpy(), want, rtol=2e-5, atol=2e-5 * max(1.0, np.sqrt(k)))


# ----------------------------------------------------------------------------- GEMM


@pytest.mark.parametrize(("trans_a", "trans_b"), FLAGS)
@pytest.mark.parametrize("mkn", SHAPES, ids=str)
def test_gemm_kernel_matches_scipy(target, mkn, trans_a, trans_b):
    m, k, n = mkn
    rng = np.random.default_rng(m + 3 * k + 7 * n + trans_a + 2 * trans_b)
    a = _f32(rng, *((k, m) if trans_a else (m, k)))
    b = _f32(rng, *((n, k) if trans_b else (k, n)))
    c = _f32(rng, m, n)
    want = sb.sgemm(0.75, a.numpy(), b.numpy(), beta=-0.5, c=c.numpy(), trans_a=trans_a, trans_b=trans_b)
    # Public BLAS function under backend "nki" and the direct entry point: both run the kernel.
    _close(trnblas.gemm(0.75, a, b, beta=-0.5, c=c, trans_a=trans_a, trans_b=trans_b), want, k)
    _close(tn.nki_gemm(a, b, trans_a, trans_b, alpha=0.75, beta=-0.5, c=c), want, k)


def test_gemm_kernel_transposes_are_not_materialised_on_the_host(nki_sim, launches):
    rng = np.random.default_rng(1)
    a, b = _f32(rng, 200, 129), _f32(rng, 7, 200)  # op(a) = aᵀ, op(b) = bᵀ
    got = tn.nki_gemm(a, b, trans_a=1, trans_b=1)
    _close(got, a.numpy().T @ b.numpy().T, 200)
    # The kernel got the stored (K, M) and (N, K) layouts with the flags, padded by the suite's
    # GEMM policy (trncore.gemm_driver: M and K to 128-multiples, N to 64-multiples).
    assert launches == [("gemm_kernel", [(256, 256), (64, 256)], {"trans_a": 1, "trans_b": 1})]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_kernel_half_inputs_accumulate_in_float32(target, dtype):
    rng = np.random.default_rng(2)
    a = _f32(rng, 129, 300).to(dtype)
    b = _f32(rng, 300, 127).to(dtype)
    got = tn.nki_gemm(a, b)
    want = a.double().numpy() @ b.double().numpy()  # exact products of the rounded inputs
    assert got.dtype == dtype
    # float32 accumulation: the only error left is the final rounding to the half type.
    np.testing.assert_allclose(got.double().numpy(), want, rtol=2 ** -7, atol=1e-2)


def test_gemm_empty_dimensions_need_no_kernel(nki_sim):
    c = torch.ones(3, 4)
    got = trnblas.gemm(1.0, torch.ones(3, 0), torch.ones(0, 4), beta=2.0, c=c)
    assert torch.equal(got, 2 * c)
    assert trnblas.gemm(1.0, torch.ones(0, 5), torch.ones(5, 4)).shape == (0, 4)


def test_symm_trmm_syr2k_route_through_the_gemm_kernel(target, launches):
    rng = np.random.default_rng(4)
    a, b, c = _f32(rng, 129, 129), _f32(rng, 129, 7), _f32(rng, 129, 129)
    if True:
        for lower in (0, 1):
            want = sb.ssymm(0.5, a.numpy(), b.numpy(), lower=lower)
            _close(trnblas.symm(0.5, a, b, lower=lower), want, 129)
            want = sb.strmm(0.5, a.numpy(), b.numpy(), lower=lower, trans_a=1, diag=lower)
            _close(trnblas.trmm(0.5, a, b, lower=lower, trans_a=1, diag=lower), want, 129)
            bt = b.mT.contiguous()
            want = sb.strmm(0.5, a.numpy(), bt.numpy(), side=1, lower=lower)
            _close(trnblas.trmm(0.5, a, bt, side=1, lower=lower), want, 129)
            for trans in (0, 1):
                x, y = (b, b * 2) if trans == 0 else (b.mT.contiguous(), 2 * b.mT.contiguous())
                want = sb.ssyr2k(0.5, x.numpy(), y.numpy(), beta=2.0, c=c.numpy(), trans=trans, lower=lower)
                _close(trnblas.syr2k(0.5, x, y, beta=2.0, c=c, trans=trans, lower=lower), want, 14)
    assert len(launches) == 2 * (1 + 2 + 2) and {name for name, _, _ in launches} == {"gemm_kernel"}


# ----------------------------------------------------------------------------- batched GEMM


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "trans_a", "trans_b"),
    [
        ((3, 7, 129), (3, 129, 5), 0, 0),
        ((2, 1, 128, 7), (4, 200, 128), 1, 1),  # partial broadcast (2,1) x (4,)
        ((5, 127, 33), (33, 1), 0, 0),  # b shared by the whole batch
        ((1, 9, 20), (6, 20, 129), 0, 0),  # a shared
    ],
    ids=str,
)
def test_batched_gemm_is_one_kernel_launch(target, launches, a_shape, b_shape, trans_a, trans_b):
    rng = np.random.default_rng(len(a_shape) + a_shape[-1])
    a, b = _f32(rng, *a_shape), _f32(rng, *b_shape)
    got = tn.nki_batched_gemm(a, b, trans_a, trans_b, alpha=2.0)
    opa = a.mT if trans_a else a
    opb = b.mT if trans_b else b
    want = 2.0 * torch.matmul(opa.double(), opb.double()).numpy()
    _close(got, want, opa.shape[-1])
    assert len(launches) == 1
    if all(d == 1 for d in b_shape[:-2]):
        assert launches[0][1][1][0] == 1  # the shared operand is not copied per batch entry


def test_batched_gemm_with_c_broadcast(nki_sim):
    rng = np.random.default_rng(8)
    a, b, c = _f32(rng, 4, 7, 129), _f32(rng, 4, 129, 9), _f32(rng, 9)
    got = trnblas.batched_gemm(a, b, alpha=0.5, beta=3.0, c=c)
    _close(got, 0.5 * (a.numpy() @ b.numpy()) + 3.0 * c.numpy(), 129)


# ----------------------------------------------------------------------------- SYRK


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("nk", [(1, 1), (7, 129), (129, 7), (200, 128), (1000, 129)], ids=str)
def test_syrk_kernel_matches_scipy(target, nk, trans, lower):
    n, k = nk
    rng = np.random.default_rng(n + k + trans)
    a = _f32(rng, *((k, n) if trans else (n, k)))
    c = _f32(rng, n, n)
    want = sb.ssyrk(1.5, a.numpy(), beta=0.5, c=c.numpy(), trans=trans, lower=lower)
    got = tn.nki_syrk(a, trans, lower, alpha=1.5, beta=0.5, c=c)
    _close(got, want, k)
    # The other triangle is c's, untouched (not symmetrised).
    other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    assert np.array_equal(got.numpy()[other], c.numpy()[other])


def test_syrk_reads_a_once_and_computes_one_triangle():
    rep = sim.report(syrk_kernel, ((384, 256), "float32"), target="trn1", trans=0, lower=1)
    assert rep.dma_bytes_in == 384 * 256 * 4  # every element of a, once
    gemm = sim.report(gemm_kernel, ((384, 256), "float32"), ((384, 256), "float32"), target="trn1",
                      trans_b=1)
    assert rep.useful_flops < 0.75 * gemm.useful_flops  # triangle tiles only


def test_syrk_too_big_for_sbuf_uses_the_gemm_kernel(target, monkeypatch, launches):
    rng = np.random.default_rng(9)
    a = _f32(rng, 129, 200)
    _close(tn.nki_syrk(a, 0, 1), sb.ssyrk(1.0, a.numpy(), lower=1), 200)
    monkeypatch.setattr(_drivers, "SYRK_BUDGET", 1024)
    _close(tn.nki_syrk(a, 0, 1), sb.ssyrk(1.0, a.numpy(), lower=1), 200)
    assert [name for name, _, _ in launches] == ["syrk_kernel", "gemm_kernel"]


# ----------------------------------------------------------------------------- TRSM


def _triangular(rng: np.random.Generator, n: int, lower: int, diag: int) -> np.ndarray:
    """Well conditioned, with NaN where BLAS must not read."""
    a = rng.standard_normal((n, n)) / n
    a[np.diag_indices(n)] = 2.0 + np.abs(rng.standard_normal(n))
    a[np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)] = np.nan
    if diag:
        a[np.diag_indices(n)] = np.nan
    return a.astype(np.float32)


@pytest.mark.parametrize("diag", [0, 1])
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("order", [1, 7, 129, 1000])
def test_trsm_kernel_matches_scipy(h, target, order, side, lower, trans_a, diag):
    rng = np.random.default_rng(order + 2 * side + 4 * lower + 8 * trans_a + 16 * diag)
    a = _triangular(rng, order, lower, diag)
    b = rng.standard_normal((order, 5) if side == 0 else (5, order)).astype(np.float32)
    a_ref = h.as_referenced(a, bool(lower), diag)  # SciPy gets no NaN: see conftest.as_referenced
    want = sb.strsm(0.7, a_ref, b, side=side, lower=lower, trans_a=trans_a, diag=diag)
    got = tn.nki_trsm(torch.from_numpy(a), torch.from_numpy(b), side, lower, trans_a, diag, alpha=0.7)
    _close(got, want, order)


def test_trsm_uses_a_constant_number_of_kernel_keys(h, nki_sim):
    counts = {}
    for panels in (2, 5):
        m = 128 * panels - 3
        rng = np.random.default_rng(panels)
        a = torch.from_numpy(_triangular(rng, m, 1, 0))
        b = _f32(rng, m, 7)
        with sim.count_keys() as keys:
            got = trnblas.trsm(1.0, a, b, lower=1)
        _close(got, sb.strsm(1.0, h.as_referenced(a.numpy(), True), b.numpy(), lower=1), m)
        counts[panels] = len(keys)
    assert counts[2] == counts[5] == 2


# ----------------------------------------------------------------------------- float64 policy


def test_float64_falls_back_with_the_reason_unless_opted_in(nki_sim):
    rng = np.random.default_rng(12)
    a, b = _f32(rng, 7, 129).double(), _f32(rng, 129, 5).double()
    want = a.numpy() @ b.numpy()
    with pytest.raises(NkiDispatchError, match="float64"):
        tn.nki_gemm(a, b)
    nki_sim.delenv("TRNBLAS_REQUIRE_NKI")
    with pytest.warns(NkiFallbackWarning, match="float64.*TRNBLAS_ALLOW_FP32_COMPUTE"):
        got = trnblas.gemm(1.0, a, b)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)  # full precision from PyTorch
    nki_sim.setenv("TRNBLAS_REQUIRE_NKI", "1")
    # Opting in: computed in float32 on the kernel, returned as float64.
    got = tn.nki_gemm(a, b, allow_fp32=True)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(got.numpy(), want, rtol=1e-12, atol=0)  # really float32 compute
    nki_sim.setenv("TRNBLAS_ALLOW_FP32_COMPUTE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = trnblas.gemm(1.0, a, b)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_batched_complex_input_falls_back_with_a_warning(nki_sim):
    nki_sim.delenv("TRNBLAS_REQUIRE_NKI")
    a = torch.ones(2, 3, 3, dtype=torch.complex64)
    with pytest.warns(NkiFallbackWarning, match="batched complex"):
        got = trnblas.batched_gemm(a, a)
    assert torch.allclose(got, a @ a)


# ----------------------------------------------------------------------------- cost model


def test_gemm_4096_bfloat16_on_trn1_is_compute_bound_at_full_tensore_utilisation():
    rep = sim.report(gemm_kernel, ((4096, 4096), "bfloat16"), ((4096, 4096), "bfloat16"), target="trn1")
    assert rep.useful_flops == 2 * 4096**3
    assert rep.tensor_utilisation >= 0.90
    assert rep.busy_seconds["tensor"] > rep.busy_seconds["dma"]
    assert rep.sbuf_peak_bytes <= 180224 and rep.psum_peak_banks <= 8


# ----------------------------------------------------------------------------- property-based


@settings(max_examples=25)
@given(
    m=st.integers(1, 260),
    k=st.integers(1, 260),
    n=st.integers(1, 600),
    trans_a=st.sampled_from([0, 1, 2]),
    trans_b=st.sampled_from([0, 1, 2]),
    fortran=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_gemm_kernel_any_shape_property(m, k, n, trans_a, trans_b, fortran, seed):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRNBLAS_USE_SIMULATOR", "1")
        mp.setenv("TRNBLAS_REQUIRE_NKI", "1")
        rng = np.random.default_rng(seed)
        a = _f32(rng, *((m, k) if trans_a == 0 else (k, m)))
        b = _f32(rng, *((k, n) if trans_b == 0 else (n, k)))
        if fortran:  # non-contiguous operands reach the kernel too
            a, b = a.mT.contiguous().mT, b.mT.contiguous().mT
        want = sb.sgemm(1.0, a.numpy(), b.numpy(), trans_a=trans_a, trans_b=trans_b)
        _close(tn.nki_gemm(a, b, trans_a, trans_b), want, k)


# ----------------------------------------------------------------------------- routing and strictness


def test_auto_backend_runs_the_kernel_only_for_large_calls(nki_sim, launches):
    nki_sim.delenv("TRNBLAS_REQUIRE_NKI")
    trnblas.set_backend("auto")
    rng = np.random.default_rng(13)
    small = _f32(rng, 7, 7)
    _close(trnblas.gemm(1.0, small, small), small.numpy() @ small.numpy(), 7)
    assert launches == []  # below 2·256³ flops: PyTorch
    a, b = _f32(rng, 256, 256), _f32(rng, 256, 257)
    _close(trnblas.gemm(1.0, a, b), a.numpy() @ b.numpy(), 256)
    assert [name for name, _, _ in launches] == ["gemm_kernel"]


def test_kernels_read_only_memory_they_wrote(target):
    """Strict mode: no instruction of a ragged GEMM or SYRK kernel reads unwritten memory."""
    rng = np.random.default_rng(14)
    a = rng.standard_normal((129, 200)).astype(np.float32)
    with sim.strict_mode():
        sim.simulate(gemm_kernel)(a, a, 0, 1)
        sim.simulate(trnblas.kernels.gemm_update_kernel)(a, a, np.ones((200, 200), np.float32), 1, 0)
        sim.simulate(syrk_kernel)(a, 1, 0)
