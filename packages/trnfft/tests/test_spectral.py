"""stft / istft against torch.stft(return_complex=True) / torch.istft and a NumPy framing reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trnfft_helpers import random_tensor, rel_err

import trnfft
from trnfft import ComplexTensor


def _numpy_stft(x, n_fft, hop, window, center, pad_mode):
    """STFT by hand: pad, cut frames, window them, real FFT (float64)."""
    if center:
        x = np.pad(x, n_fft // 2, mode=pad_mode)
    frames = 1 + (len(x) - n_fft) // hop
    stacked = np.stack([x[t * hop : t * hop + n_fft] * window for t in range(frames)], axis=1)
    return np.fft.rfft(stacked, axis=0)


@pytest.mark.parametrize("n_fft,hop", [(16, 4), (31, 7), (128, 32), (129, 64)])
@pytest.mark.parametrize("center,pad_mode", [(True, "reflect"), (True, "constant"), (False, "reflect")])
def test_stft_against_numpy_framing(n_fft, hop, center, pad_mode):
    x = random_tensor((1000,), torch.float64)
    window = torch.hann_window(n_fft, dtype=torch.float64)
    got = trnfft.stft(x, n_fft, hop, window=window, center=center, pad_mode=pad_mode)
    assert got.dtype == torch.complex128
    want = _numpy_stft(x.numpy(), n_fft, hop, window.numpy(), center, pad_mode)
    assert rel_err(got, want) < 1e-12


CONFIGS = [
    {"n_fft": 64},
    {"n_fft": 64, "hop_length": 16, "window": "hann"},
    {"n_fft": 64, "hop_length": 10, "win_length": 40, "window": "hamming"},
    {"n_fft": 127, "hop_length": 32, "window": "hann", "normalized": True},
    {"n_fft": 64, "window": "hann", "onesided": False},
    {"n_fft": 64, "window": "hann", "center": False},
    {"n_fft": 128, "window": "hann", "pad_mode": "replicate"},
]


def _window(cfg, dtype):
    cfg = dict(cfg)
    kind = cfg.pop("window", None)
    if kind is not None:
        size = cfg.get("win_length", cfg["n_fft"])
        cfg["window"] = getattr(torch, f"{kind}_window")(size, dtype=dtype)
    return cfg


@pytest.mark.filterwarnings("ignore:A window was not provided")  # torch's own warning, kept as is
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(700,), (3, 1029)])
def test_stft_matches_torch(cfg, dtype, shape):
    cfg = _window(cfg, dtype)
    x = random_tensor(shape, dtype)
    got = trnfft.stft(x, **cfg)
    want = torch.stft(x, return_complex=True, **cfg)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


# Perfect reconstruction needs a window whose overlap-add is nonzero at every sample (centred frames).
INVERTIBLE = [cfg for cfg in CONFIGS if "window" in cfg and cfg.get("center", True)]


@pytest.mark.parametrize("cfg", INVERTIBLE)
@pytest.mark.parametrize("shape", [(700,), (3, 1029)])
def test_istft_matches_torch_and_round_trips(cfg, shape):
    cfg = _window(cfg, torch.float64)
    x = random_tensor(shape, torch.float64)
    spec = trnfft.stft(x, **cfg)
    inv_cfg = {k: v for k, v in cfg.items() if k != "pad_mode"}
    got = trnfft.istft(spec, length=shape[-1], **inv_cfg)
    want = torch.istft(spec, length=shape[-1], **inv_cfg)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got, x)


def test_complex_signal_and_complex_tensor_round_trip():
    z = random_tensor((2, 500), torch.complex128)
    window = torch.hann_window(64, dtype=torch.float64)
    spec = trnfft.stft(ComplexTensor.from_torch(z), 64, 16, window=window)
    assert isinstance(spec, ComplexTensor)
    torch.testing.assert_close(spec.to_torch(), torch.stft(z, 64, 16, window=window, return_complex=True))
    back = trnfft.istft(spec, 64, 16, window=window, onesided=False, length=500, return_complex=True)
    assert isinstance(back, ComplexTensor)
    torch.testing.assert_close(back.to_torch(), z)
    real_back = trnfft.istft(trnfft.stft(z.real, 64, 16, window=window), 64, 16, window=window, length=500)
    assert type(real_back) is torch.Tensor
    torch.testing.assert_close(real_back, z.real)


def test_legacy_real_layout():
    x = random_tensor((300,), torch.float32)
    got = trnfft.stft(x, 32, return_complex=False)
    assert got.shape[-1] == 2
    torch.testing.assert_close(got, torch.view_as_real(torch.stft(x, 32, return_complex=True)))


@pytest.mark.parametrize(
    "kwargs,clear,words",
    [
        ({"n_fft": 0}, ValueError, "n_fft must be positive"),
        ({"n_fft": 16, "hop_length": 0}, ValueError, "hop_length must be positive"),
        ({"n_fft": 16, "win_length": 20}, ValueError, "must not exceed n_fft"),
        ({"n_fft": 16, "window": torch.ones(5)}, ValueError, "window must be 1-D of length"),
        ({"n_fft": 100, "center": False}, ValueError, "exceeds the (padded) signal length"),
    ],
)
def test_stft_bad_arguments(kwargs, clear, words):
    x = random_tensor((64,), torch.float32)
    with pytest.raises(Exception) as torch_info:
        torch.stft(x, return_complex=True, **kwargs)
    with pytest.raises(type(torch_info.value)) as info:
        trnfft.stft(x, **kwargs)
    assert isinstance(info.value, clear)
    assert words in str(info.value)


def test_stft_integer_input_is_rejected_like_torch():
    x = torch.arange(64)
    with pytest.raises(RuntimeError):
        torch.stft(x, 16, return_complex=True)
    with pytest.raises(RuntimeError) as info:
        trnfft.stft(x, 16)
    assert isinstance(info.value, TypeError) and "int64" in str(info.value)


def test_stft_unknown_pad_mode_keeps_torch_error():
    with pytest.raises(NotImplementedError):
        trnfft.stft(random_tensor((64,), torch.float32), 16, pad_mode="mirror")


def test_istft_bad_arguments():
    spec = trnfft.stft(random_tensor((256,), torch.float32), 32, window=torch.hann_window(32))
    with pytest.raises(RuntimeError) as info:
        trnfft.istft(spec, 20, window=torch.hann_window(20))
    assert isinstance(info.value, ValueError) and "17 frequencies" in str(info.value)
    with pytest.raises(ValueError, match="hop_length must be positive"):
        trnfft.istft(spec, 32, hop_length=0, window=torch.hann_window(32))
    with pytest.raises(ValueError, match="length must be positive"):
        trnfft.istft(spec, 32, window=torch.hann_window(32), length=0)
    # torch raises RuntimeError for a real spectrogram up to 2.13 and TypeError from 2.14: ours is both.
    with pytest.raises(TypeError, match="complex spectrogram") as real_input:
        trnfft.istft(spec.real, 32, window=torch.hann_window(32))
    assert isinstance(real_input.value, RuntimeError)
    with pytest.raises(TypeError, match="input must be"):
        trnfft.istft(np.zeros((17, 5)), 32)
