"""NKI route of the real and Hermitian transforms (1-D, 2-D, n-D) and stft/istft on the emulator.

Every test forces the kernel route (backend ``nki``, simulator, ``TRNFFT_REQUIRE_NKI=1``) so that a
silent fall back to torch fails, checks with ``count_keys`` that the stage kernel ran, and compares
against numpy.fft or torch in float64 (relative L2 error <= 1e-5 for float32 data).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.fft
import torch
from _trnfft_helpers import random_tensor, rel_err

import trncore.sim as sim
import trnfft

pytestmark = pytest.mark.simulator
TOL = 1e-5


@pytest.fixture
def nki_route(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNFFT_REQUIRE_NKI", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    yield
    trnfft.set_backend(previous)


def _np(x):
    return x.numpy().astype(np.complex128 if x.is_complex() else np.float64)


def _f64(x):
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


@pytest.mark.parametrize("norm", (None, "ortho", "forward"))
def test_rfft2_and_irfft2_match_numpy(nki_route, norm):
    x = random_tensor((2, 7, 13), torch.float32, seed=21)
    spec = random_tensor((2, 9, 6), torch.complex64, seed=22)
    with sim.count_keys() as keys:
        y = trnfft.rfft2(x, norm=norm)
        z = trnfft.irfft2(spec, norm=norm)
        z_s = trnfft.irfft2(spec, s=(5, 11), dim=(0, 2), norm=norm)
    assert keys, "the kernel did not run"
    assert y.dtype == torch.complex64 and z.dtype == torch.float32
    assert rel_err(y, np.fft.rfft2(_np(x), norm=norm)) <= TOL
    assert rel_err(z, np.fft.irfft2(_np(spec), norm=norm)) <= TOL
    assert rel_err(z_s, np.fft.irfft2(_np(spec), s=(5, 11), axes=(0, 2), norm=norm)) <= TOL


def test_rfftn_and_irfftn_match_numpy(nki_route):
    x = random_tensor((3, 5, 129), torch.float32, seed=23)
    with sim.count_keys() as keys:
        y = trnfft.rfftn(x)
        y_dims = trnfft.rfftn(x, s=(4, 200), dim=(2, 0))  # the halved dim is the last listed: 0
        back = trnfft.irfftn(y, s=x.shape)
    assert keys
    assert rel_err(y, np.fft.rfftn(_np(x))) <= TOL
    assert rel_err(y_dims, np.fft.rfftn(_np(x), s=(4, 200), axes=(2, 0))) <= TOL
    assert rel_err(back, _np(x)) <= TOL
    spec = random_tensor((4, 6, 10), torch.complex64, seed=24)
    ref = np.fft.irfftn(_np(spec), s=(6, 17), axes=(1, 2), norm="ortho")
    assert rel_err(trnfft.irfftn(spec, s=(-1, 17), dim=(1, 2), norm="ortho"), ref) <= TOL
    # the default length of the halved dim, 2 * (m - 1), on the dim listed last
    assert rel_err(trnfft.irfftn(spec, dim=(2, 0)), np.fft.irfftn(_np(spec), axes=(2, 0))) <= TOL


@pytest.mark.parametrize("n", (None, 1, 9, 128, 129))
def test_hfft_and_ihfft_match_numpy(nki_route, n):
    half = random_tensor((3, 65), torch.complex64, seed=25)
    real = random_tensor((3, 100), torch.float32, seed=26)
    with sim.count_keys() as keys:
        y = trnfft.hfft(half, n=n)
        z = trnfft.ihfft(real, n=n)
    assert keys
    assert y.dtype == torch.float32 and z.dtype == torch.complex64
    assert rel_err(y, np.fft.hfft(_np(half), n=n)) <= TOL
    assert rel_err(z, np.fft.ihfft(_np(real), n=n)) <= TOL


@pytest.mark.parametrize("norm", ("backward", "ortho", "forward"))
def test_hfft_ihfft_norms_and_dims(nki_route, norm):
    half = random_tensor((7, 4, 3), torch.complex64, seed=27)
    real = random_tensor((5, 31), torch.float32, seed=28)
    assert rel_err(trnfft.hfft(half, n=12, dim=0, norm=norm), np.fft.hfft(_np(half), 12, 0, norm)) <= TOL
    assert rel_err(trnfft.ihfft(real, dim=-2, norm=norm), np.fft.ihfft(_np(real), None, -2, norm)) <= TOL


@pytest.mark.parametrize("n", (2, 4, 6, 34, 256, 1000, 4094, 4096))
@pytest.mark.parametrize("norm", (None, "ortho", "forward"))
def test_even_real_transforms_run_at_half_length(nki_route, n, norm):
    """rfft/ihfft/irfft/hfft of even length n transform n/2 complex points (the plan of n/2 runs,
    the plan of n never does) and agree with numpy.fft in float64."""
    from trnfft.plan import clear_plan_cache, create_plan

    real = random_tensor((3, n), torch.float32, seed=n)
    half = random_tensor((3, n // 2 + 1), torch.complex64, seed=n + 1)
    clear_plan_cache()
    results = {
        "rfft": (trnfft.rfft(real, norm=norm), np.fft.rfft(_np(real), norm=norm)),
        "ihfft": (trnfft.ihfft(real, norm=norm), np.fft.ihfft(_np(real), norm=norm)),
        "irfft": (trnfft.irfft(half, n, norm=norm), np.fft.irfft(_np(half), n, norm=norm)),
        "hfft": (trnfft.hfft(half, n, norm=norm), np.fft.hfft(_np(half), n, norm=norm)),
    }
    if n >= 4:
        assert create_plan(n // 2).kernel_keys and not create_plan(n).kernel_keys
    for name, (got, ref) in results.items():
        assert got.shape == ref.shape, name
        assert rel_err(got, ref) <= TOL, name


HERMITIAN_ND_CASES = [
    # function, input shape, kwargs (numpy's names: s, axes, norm)
    ("hfft2", (6, 9), {}),
    ("hfft2", (3, 5, 8), {"s": (4, 7), "norm": "ortho"}),
    ("hfftn", (4, 6, 5), {"axes": (2, 0), "norm": "forward"}),
    ("hfftn", (5, 17), {"s": (-1, 40)}),
    ("ihfft2", (7, 12), {"norm": "forward"}),
    ("ihfft2", (2, 9, 11), {"s": (5, 16), "axes": (0, 2)}),
    ("ihfftn", (3, 4, 129), {"norm": "ortho"}),
    ("ihfftn", (6, 10), {"axes": (1, 0)}),
]


@pytest.mark.parametrize(("name", "shape", "kwargs"), HERMITIAN_ND_CASES)
def test_hermitian_2d_and_nd_match_scipy(nki_route, name, shape, kwargs):
    """hfft2/hfftn and ihfft2/ihfftn run on the stage kernels and agree with scipy.fft in float64."""
    real_input = name.startswith("ih")
    x = random_tensor(shape, torch.float32 if real_input else torch.complex64, seed=len(shape) + shape[-1])
    s = kwargs.get("s")
    if s is not None and -1 in s:  # torch's "keep this length", which scipy spells as the length
        axes = kwargs.get("axes", range(-len(s), 0))
        s = tuple(shape[a] if v == -1 else v for v, a in zip(s, axes))
    ref = getattr(scipy.fft, name)(_np(x), s=s, axes=kwargs.get("axes"), norm=kwargs.get("norm"))
    with sim.count_keys() as keys:
        y = getattr(trnfft, name)(x, **{{"axes": "dim"}.get(k, k): v for k, v in kwargs.items()})
    assert keys, "the kernel did not run"
    assert y.dtype == (torch.complex64 if real_input else torch.float32)
    assert tuple(y.shape) == ref.shape
    assert rel_err(y, ref) <= TOL


STFT_CASES = [
    # n_fft, hop, win_length, window, center, pad_mode, normalized, onesided, complex input
    (16, 4, None, "hann", True, "reflect", False, None, False),
    (31, 7, 20, "hann", True, "constant", True, None, False),
    (12, 5, None, None, False, "reflect", False, False, False),
    (20, 6, 16, "hann", True, "reflect", False, False, True),
]


@pytest.mark.filterwarnings("ignore:A window was not provided")  # torch's advice, for window=None
@pytest.mark.parametrize("case", STFT_CASES)
def test_stft_matches_torch_in_float64(nki_route, case):
    n_fft, hop, win_length, window, center, pad_mode, normalized, onesided, complex_input = case
    signal = random_tensor((2, 157), torch.complex64 if complex_input else torch.float32, seed=n_fft)
    win = torch.hann_window(win_length or n_fft) if window == "hann" else None
    kwargs = dict(
        n_fft=n_fft, hop_length=hop, win_length=win_length, center=center, pad_mode=pad_mode,
        normalized=normalized, onesided=onesided,
    )
    with sim.count_keys() as keys:
        spec = trnfft.stft(signal, window=win, **kwargs)
        single = trnfft.stft(signal[1], window=win, **kwargs)
    assert keys, "the kernel did not run"
    ref = torch.stft(
        _f64(signal), window=None if win is None else win.double(), return_complex=True, **kwargs
    )
    assert spec.dtype == torch.complex64 and spec.shape == ref.shape
    assert rel_err(spec, ref.numpy()) <= TOL
    assert rel_err(single, ref[1].numpy()) <= TOL


@pytest.mark.parametrize(
    ("n_fft", "hop", "win_length", "center", "length", "onesided"),
    [(16, 4, None, True, None, None), (30, 7, 25, True, 150, None), (12, 3, None, True, None, False)],
)
def test_istft_matches_torch_in_float64(nki_route, n_fft, hop, win_length, center, length, onesided):
    win = torch.hann_window(win_length or n_fft)
    frames = 1 + 140 // hop
    freq = n_fft if onesided is False else n_fft // 2 + 1
    signal = random_tensor((2, 140), torch.float32, seed=n_fft)
    spec = trnfft.stft(signal, n_fft, hop, win_length, win, center=center, onesided=onesided)
    kwargs = dict(n_fft=n_fft, hop_length=hop, win_length=win_length, center=center, length=length)
    with sim.count_keys() as keys:
        out = trnfft.istft(spec, window=win, onesided=onesided, **kwargs)
    assert keys
    ref = torch.istft(_f64(spec), window=win.double(), onesided=onesided, **kwargs)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert rel_err(out, ref.numpy()) <= TOL
    # an arbitrary (non-Hermitian) spectrogram, as a complex signal, and unbatched
    other = random_tensor((n_fft, frames), torch.complex64, seed=n_fft + 1)
    got = trnfft.istft(other, window=win, onesided=False, return_complex=True, **kwargs)
    ref = torch.istft(_f64(other), window=win.double(), onesided=False, return_complex=True, **kwargs)
    assert got.shape == ref.shape and rel_err(got, ref.numpy()) <= TOL
    assert freq == spec.shape[-2]


def test_stft_istft_round_trip_on_trn1(nki_route, monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    signal = random_tensor((3, 257), torch.float32, seed=29)
    win = torch.hann_window(64)
    with sim.count_keys() as keys:
        spec = trnfft.stft(signal, 64, 16, window=win)
        back = trnfft.istft(spec, 64, 16, window=win, length=257)
        y = trnfft.rfft2(signal)
    assert rel_err(back, _np(signal)) <= TOL
    assert rel_err(y, np.fft.rfft2(_np(signal))) <= TOL
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    with sim.count_keys() as keys_trn2:
        trnfft.stft(signal, 64, 16, window=win)
    assert keys and keys_trn2 and keys.isdisjoint(keys_trn2)  # trn1's own kernels ran


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("rfft2", (random_tensor((4, 8), torch.complex64),), {}),  # complex input
        ("irfftn", (random_tensor((4, 8), torch.complex64),), {"s": (4, 0)}),
        ("irfft2", (random_tensor((4, 1), torch.complex64),), {}),  # default length 0
        ("ihfft", (random_tensor((4, 8), torch.complex64),), {}),  # complex input
        ("hfft", (random_tensor((4, 8), torch.complex64),), {"dim": 2}),
        ("ihfft2", (random_tensor((4, 8), torch.complex64),), {}),  # complex input
        ("hfftn", (random_tensor((4, 8), torch.complex64),), {"dim": (0, 0)}),  # repeated dim
        # frames beyond the signal
        ("stft", (random_tensor((10,), torch.float32), 16), {"center": False, "window": torch.ones(16)}),
        ("stft", (random_tensor((10,), torch.float32), 8), {"hop_length": 0, "window": torch.ones(8)}),
        ("istft", (random_tensor((5, 3), torch.complex64), 16), {"window": torch.ones(16)}),  # 5 bins
    ],
)
def test_bad_arguments_on_the_kernel_route_give_torchs_error(nki_route, monkeypatch, name, args, kwargs):
    call = getattr(trnfft, name)
    with monkeypatch.context() as m:  # the same call on the PyTorch route
        m.setenv("TRNFFT_FORCE_BACKEND", "pytorch")
        with pytest.raises(Exception) as on_pytorch:
            call(*args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a fallback warning nor a dispatch error
        with pytest.raises(type(on_pytorch.value)) as on_kernel:
            call(*args, **kwargs)
    assert not isinstance(on_kernel.value, trnfft.NkiDispatchError)
    assert str(on_kernel.value) == str(on_pytorch.value)
