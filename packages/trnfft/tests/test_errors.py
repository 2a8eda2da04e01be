"""Bad arguments raise what torch.fft raises (same exception type), with a message naming the argument."""

from __future__ import annotations

import pytest
import torch
from _trnfft_helpers import random_tensor

import trnfft


def _torch_error(fn, *args, **kwargs) -> type[BaseException]:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value)


X = random_tensor((4, 8), torch.float32)
Z = random_tensor((4, 8), torch.complex64)

# (function name, input, kwargs, expected clear type, words the message must contain)
CASES = [
    ("fft", X, {"n": 0}, ValueError, "n must be a positive"),
    ("ifft", X, {"n": -3}, ValueError, "n must be a positive"),
    ("rfft", X, {"n": 0}, ValueError, "n must be a positive"),
    ("irfft", Z, {"n": -1}, ValueError, "n must be a positive"),
    ("hfft", Z[:, :1], {}, ValueError, "pass a positive n"),
    ("irfft", Z[:, :1], {}, ValueError, "pass a positive n"),
    ("fft", X, {"dim": 2}, ValueError, "dim=2 is out of range"),
    ("ihfft", X, {"dim": -3}, ValueError, "dim=-3 is out of range"),
    ("fft", torch.tensor(1.0), {}, ValueError, "0-dimensional"),
    ("fft", X, {"norm": "unitary"}, ValueError, "norm must be"),
    ("irfft", Z, {"norm": "FORWARD"}, ValueError, "norm must be"),
    ("fft2", X, {"dim": (0, 0)}, ValueError, "must not repeat"),
    ("fftn", X, {"s": (3, 0)}, ValueError, "s[1] must be a positive"),
    ("fftn", X, {"s": (3, 4, 5)}, ValueError, "only 2 dimensions"),
    ("rfftn", X, {"s": (3,), "dim": (0, 1)}, ValueError, "must match"),
    ("ifftn", X, {"dim": (0, 5)}, ValueError, "dim=5 is out of range"),
    ("irfftn", Z[:, :1], {}, ValueError, "pass a positive last entry"),
    ("fft2", X, {"norm": "none"}, ValueError, "norm must be"),
    ("rfft", Z, {}, TypeError, "must be real"),
    ("fft", random_tensor((8,), torch.float32).half(), {}, TypeError, "float16 is not supported"),
    ("fftshift", X, {"dim": 3}, ValueError, "dim=3 is out of range"),
]


@pytest.mark.parametrize("name,x,kwargs,clear,words", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_bad_arguments_are_torch_compatible_and_clear(name, x, kwargs, clear, words):
    torch_type = _torch_error(getattr(torch.fft, name), x, **kwargs)
    with pytest.raises(torch_type) as info:
        getattr(trnfft, name)(x, **kwargs)
    assert isinstance(info.value, clear)
    assert words in str(info.value)
    assert name in str(info.value)


@pytest.mark.parametrize("name", ["fft", "rfft", "fft2", "fftn", "irfftn", "fftshift"])
def test_non_tensor_input_is_a_type_error(name):
    with pytest.raises(TypeError, match="input"):
        getattr(trnfft, name)([1.0, 2.0, 3.0, 4.0])


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError):
        trnfft.fft(X, n=2.5)
    with pytest.raises(TypeError):
        trnfft.fft(X, norm=3)
    with pytest.raises(TypeError):
        trnfft.fftfreq(4.0)


def test_complex_tensor_input_errors_are_clear_too():
    ct = trnfft.ComplexTensor.from_torch(Z)
    with pytest.raises(IndexError, match="dim=4 is out of range"):
        trnfft.fft(ct, dim=4)
    with pytest.raises(RuntimeError, match="n must be a positive"):
        trnfft.ifft(ct, n=0)


def test_negative_frequency_count():
    with pytest.raises(ValueError, match="non-negative"):
        trnfft.rfftfreq(-1)
