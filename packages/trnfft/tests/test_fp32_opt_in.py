"""trnfft follows the suite's one dtype policy (trncore.precision), as its README promises.

float64 / complex128 inputs never run in float32 behind the caller's back: on the NKI route they
fall back to torch.fft with the reason, unless float32 compute is opted into with
TRNFFT_ALLOW_FP32_COMPUTE, TRNSCI_ALLOW_FP32_COMPUTE or a trncore.precision.fp32_compute() scope;
then the kernels run and the results come back in the wide dtype with float32 accuracy.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import trncore.sim as sim
import trnfft
from trncore import NkiFallbackWarning
from trncore.precision import fp32_compute

pytestmark = pytest.mark.simulator


@pytest.fixture
def kernel_route(monkeypatch):
    for name in ("TRNFFT_ALLOW_FP32_COMPUTE", "TRNSCI_ALLOW_FP32_COMPUTE", "TRNFFT_REQUIRE_NKI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    with trnfft.backend("nki"):
        yield monkeypatch


def _rel(got: torch.Tensor, want: np.ndarray) -> float:
    return float(np.linalg.norm(got.numpy() - want) / np.linalg.norm(want))


def test_float64_falls_back_with_the_opt_in_named(kernel_route):
    x = torch.randn(4, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with sim.count_keys() as keys, pytest.warns(NkiFallbackWarning, match="TRNFFT_ALLOW_FP32_COMPUTE"):
        got = trnfft.fft(x)
    assert keys == set()  # no kernel ran
    assert got.dtype == torch.complex128
    torch.testing.assert_close(got, torch.fft.fft(x), rtol=0, atol=0)  # the float64 reference


@pytest.mark.parametrize("how", ["TRNFFT_ALLOW_FP32_COMPUTE", "TRNSCI_ALLOW_FP32_COMPUTE", "scope"])
def test_the_opt_in_runs_the_kernel_and_keeps_the_wide_dtype(kernel_route, how):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 48, dtype=torch.float64, generator=gen)
    z = torch.randn(3, 40, dtype=torch.complex128, generator=gen)
    if how != "scope":
        kernel_route.setenv(how, "1")
    with fp32_compute() if how == "scope" else contextlib.nullcontext(), sim.count_keys() as keys:
        spectrum = trnfft.rfft(x)
        inverse = trnfft.ifft(z)
    assert keys  # the kernels ran: no fallback (a fallback warning would fail the test)
    assert spectrum.dtype == torch.complex128 and inverse.dtype == torch.complex128
    assert _rel(spectrum, np.fft.rfft(x.numpy())) < 1e-5  # float32 accuracy, not float64's
    assert _rel(inverse, np.fft.ifft(z.numpy())) < 1e-5


def test_the_complex_layers_follow_the_same_policy(kernel_route):
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(5, 7, dtype=torch.complex128, generator=gen)
    b = torch.randn(7, 3, dtype=torch.complex128, generator=gen)
    with pytest.warns(NkiFallbackWarning, match="TRNFFT_ALLOW_FP32_COMPUTE"):
        assert trnfft.complex_matmul(a, b).dtype == torch.complex128
    kernel_route.setenv("TRNFFT_ALLOW_FP32_COMPUTE", "1")
    with sim.count_keys() as keys:
        got = trnfft.complex_matmul(a, b)
    assert keys and got.dtype == torch.complex128
    assert _rel(got, a.numpy() @ b.numpy()) < 1e-5
