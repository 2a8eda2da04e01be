"""DCT and DST on the NKI route (trncore.sim emulator) against scipy.fft in float64.

The kernel route is forced (backend ``nki``, simulator, ``TRNFFT_REQUIRE_NKI=1``): a silent fall
back to the PyTorch route fails, and ``count_keys`` shows the stage kernel ran. The stated float32
error bound of the route: relative L2 error <= 1e-6 (measured 5e-8 to 4e-7).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.fft as sf
import torch
from _trnfft_helpers import random_tensor, rel_err

import trncore.sim as sim
import trnfft
from trncore.dispatch import reset_fallback_warnings
from trncore.errors import NkiFallbackWarning

pytestmark = pytest.mark.simulator
TOL = 1e-6
# matrix path (<= 128: odd, prime, power of two, the bound) and FFT path (> 128: prime -> Bluestein,
# even -> half-length real FFT, 13-smooth)
LENGTHS = (2, 7, 16, 97, 128, 129, 131, 256, 360, 1000)


@pytest.fixture
def nki_route(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNFFT_REQUIRE_NKI", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    yield
    trnfft.set_backend(previous)


def _f64(x):
    return x.detach().numpy().astype(np.complex128 if x.is_complex() else np.float64)


@pytest.mark.parametrize("name", ["dct", "idct", "dst", "idst"])
def test_all_types_and_lengths_match_scipy(nki_route, name):
    for n in LENGTHS:
        x = random_tensor((3, n), torch.float32, seed=n)
        for t in (1, 2, 3, 4):
            norm = ("ortho", None, "forward", "backward")[t - 1]
            with sim.count_keys() as keys:
                got = getattr(trnfft, name)(x, t, norm=norm)
            assert keys, "the kernel did not run"
            assert got.dtype == torch.float32
            assert rel_err(got, getattr(sf, name)(_f64(x), t, norm=norm)) <= TOL, (n, t)


def test_axes_padding_orthogonalize_and_complex(nki_route):
    x = random_tensor((5, 40, 3), torch.float32, seed=2)
    for n, axis, ortho in ((None, 1, False), (33, 1, True), (150, 1, None), (7, 0, True)):
        got = trnfft.dst(x, 2, n, dim=axis, norm="ortho", orthogonalize=ortho)
        assert rel_err(got, sf.dst(_f64(x), 2, n, axis, "ortho", orthogonalize=ortho)) <= TOL
    z = random_tensor((4, 33), torch.complex64, seed=3)
    for n in (33, 140):
        got = trnfft.idct(z, 3, n)
        assert got.dtype == torch.complex64
        assert rel_err(got, sf.idct(_f64(z), 3, n)) <= TOL


@pytest.mark.parametrize("name", ["dctn", "idctn", "dstn", "idstn"])
def test_n_dimensional(nki_route, name):
    x = random_tensor((6, 130, 5), torch.float32, seed=5)
    with sim.count_keys() as keys:
        got = getattr(trnfft, name)(x, 2, s=(9, -1), axes=(0, 1), norm="ortho")
    assert len(keys) >= 2
    want = getattr(sf, name)(_f64(x), 2, s=(9, 130), axes=(0, 1), norm="ortho")
    assert rel_err(got, want) <= TOL


def test_gradients_run_on_the_kernel_route(nki_route):
    for n in (12, 300):  # matrix path (backward: transposed matrix) and FFT path
        x = random_tensor((2, n), torch.float32, seed=n).requires_grad_()
        weights = random_tensor((2, n), torch.float32, seed=n + 1)
        (trnfft.dct(x, 2, norm="ortho") * weights).sum().backward()
        # d/dx sum(w * D x) = D^T w; the orthonormal DCT-II's transpose is its inverse, DCT-III.
        want = sf.idct(_f64(weights), 2, norm="ortho")
        assert rel_err(x.grad, want) <= TOL


def test_float64_falls_back_with_one_warning(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    reset_fallback_warnings()
    try:
        x = random_tensor((2, 8), torch.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = trnfft.dct(x)
        assert got.dtype == torch.float64
        assert rel_err(got, sf.dct(x.numpy())) <= 1e-13
        assert any(issubclass(w.category, NkiFallbackWarning) for w in caught)
    finally:
        trnfft.set_backend(previous)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
def test_half_precision_inputs(nki_route, dtype):
    for n in (16, 97, 200):
        x = random_tensor((3, n), torch.float32, seed=n).to(dtype)
        got = trnfft.dst(x, 3, norm="ortho")
        assert got.dtype == torch.float32
        assert rel_err(got, sf.dst(x.double().numpy(), 3, norm="ortho")) <= TOL


def test_invalid_arguments_on_the_kernel_route_raise_the_references_error(nki_route):
    from trnfft import _ops
    from trnfft.errors import FFTArgumentError

    x = random_tensor((2, 8), torch.float32)
    with pytest.raises(FFTArgumentError, match="type must be 1, 2, 3 or 4"):
        _ops.dct(x, 7, None, -1, None, None)  # the operation itself, without the public checks
    with pytest.raises(FFTArgumentError, match="norm"):
        _ops.idstn(x, 2, None, None, "unitary", None)
