"""Short-time Fourier transforms with ``torch.stft`` / ``torch.istft`` semantics.

:func:`stft` always returns the complex spectrogram (``torch.stft(..., return_complex=True)``);
``return_complex=False`` gives torch's legacy real layout (``torch.view_as_real`` of it).
:func:`istft` is ``torch.istft``. Both accept :class:`~trnfft.ComplexTensor` inputs and then return a
``ComplexTensor`` when the result is complex. Rejected arguments raise :mod:`trnfft.errors`
exceptions that keep torch's type and name the argument.
"""

from __future__ import annotations

from typing import Any

import torch

from trnfft import _ops, _validate
from trnfft.complex_tensor import ComplexTensor, TensorLike
from trnfft.errors import FFTArgumentError, FFTTypeError

__all__ = ["istft", "stft"]

_CLEAR = (_validate.FFTArgumentError, _validate.FFTTypeError, TypeError)


def _tensor(fn: str, name: str, value: Any, *, optional: bool = False) -> tuple[Any, bool]:
    if value is None and optional:
        return None, False
    if isinstance(value, torch.Tensor):
        return value, False
    if isinstance(value, ComplexTensor):
        return value.to_torch(), True
    raise TypeError(
        f"{fn}: {name} must be a torch.Tensor or trnfft.ComplexTensor, got {type(value).__name__}"
    )


def _positive(fn: str, name: str, value: Any) -> None:
    if value is not None and value <= 0:
        raise FFTArgumentError(f"{fn}: {name} must be positive, got {value}")


def _explain(
    fn: str,
    exc: BaseException,
    x: torch.Tensor,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    window: torch.Tensor | None,
    frames_length: int | None,
) -> None:
    """Re-raise a rejected (i)stft call's error as a clear one, if the arguments explain it."""
    try:
        _validate.explain_dtype(fn, x, str(exc))
        _positive(fn, "n_fft", n_fft)
        _positive(fn, "hop_length", hop_length)
        _positive(fn, "win_length", win_length)
        if win_length is not None and win_length > n_fft:
            raise FFTArgumentError(f"{fn}: win_length={win_length} must not exceed n_fft={n_fft}")
        expected = n_fft if win_length is None else win_length
        if window is not None and (window.dim() != 1 or window.shape[0] != expected):
            raise FFTArgumentError(
                f"{fn}: window must be 1-D of length win_length={expected}, got shape {tuple(window.shape)}"
            )
        if frames_length is not None and n_fft > frames_length:
            raise FFTArgumentError(f"{fn}: n_fft={n_fft} exceeds the (padded) signal length {frames_length}")
    except _CLEAR as clear:
        raise clear from exc


def stft(
    input: TensorLike,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: TensorLike | None = None,
    center: bool = True,
    pad_mode: str = "reflect",
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool = True,
    align_to_window: bool | None = None,
) -> TensorLike:
    """Short-time Fourier transform, as ``torch.stft(..., return_complex=True)``.

    Parameters
    ----------
    input : torch.Tensor or ComplexTensor
        Signal of shape ``(L,)`` or ``(B, L)``, floating point or complex, on any device.
    n_fft : int
        Frame (FFT) length.
    hop_length : int, optional
        Distance between frames (default ``n_fft // 4``).
    win_length : int, optional
        Window length, at most ``n_fft`` (default ``n_fft``); the window is centred in the frame.
    window : torch.Tensor, optional
        1-D window of length ``win_length`` (default all ones).
    center : bool, default True
        Pad the signal by ``n_fft // 2`` on both sides so frame ``t`` is centred on sample
        ``t * hop_length``.
    pad_mode : str, default "reflect"
        Padding mode when ``center`` (any mode ``torch.nn.functional.pad`` accepts).
    normalized : bool, default False
        Multiply by ``n_fft ** -0.5``.
    onesided : bool, optional
        Keep only ``n_fft // 2 + 1`` frequencies (default: True for real input and window).
    return_complex : bool, default True
        ``False`` returns ``torch.view_as_real`` of the result (torch's legacy layout).
    align_to_window : bool, optional
        As in ``torch.stft`` (only with ``center=False``; passed through when given).

    Returns
    -------
    torch.Tensor or ComplexTensor
        Shape ``(B?, freq, frames)``; a ``ComplexTensor`` when ``input`` is one.
    """
    x, was_ct = _tensor("stft", "input", input)
    win, _ = _tensor("stft", "window", window, optional=True)
    extra = {} if align_to_window is None else {"align_to_window": align_to_window}
    try:
        result = _ops.stft(
            x, n_fft, hop_length, win_length, win, center, pad_mode, normalized, onesided, True, **extra
        )
    except RuntimeError as exc:
        padded = x.shape[-1] + (2 * (n_fft // 2) if center else 0) if x.dim() else None
        _explain("stft", exc, x, n_fft, hop_length, win_length, win, padded)
        raise
    if not return_complex:
        return torch.view_as_real(result)
    return ComplexTensor.from_torch(result) if was_ct else result


def istft(
    input: TensorLike,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: TensorLike | None = None,
    center: bool = True,
    normalized: bool = False,
    onesided: bool | None = None,
    length: int | None = None,
    return_complex: bool = False,
) -> TensorLike:
    """Inverse short-time Fourier transform, as ``torch.istft``.

    Parameters
    ----------
    input : torch.Tensor or ComplexTensor
        Complex spectrogram ``(B?, freq, frames)`` as :func:`stft` returns it.
    n_fft, hop_length, win_length, window, center, normalized, onesided
        The values the spectrogram was made with (see :func:`stft`).
    length : int, optional
        Length of the output signal (trims or zero-pads the reconstruction).
    return_complex : bool, default False
        Return a complex signal (needed when the spectrogram is two-sided and not Hermitian).

    Returns
    -------
    torch.Tensor or ComplexTensor
        Signal ``(B?, length)``; real unless ``return_complex`` (then a ``ComplexTensor`` when
        ``input`` is one).
    """
    x, was_ct = _tensor("istft", "input", input)
    win, _ = _tensor("istft", "window", window, optional=True)
    if not x.is_complex():
        # torch raises RuntimeError here up to 2.13 and TypeError from 2.14; FFTTypeError is both.
        raise FFTTypeError(
            f"istft: input must be a complex spectrogram (stft with return_complex=True), got {x.dtype}"
        )
    try:
        if length is not None and length <= 0:
            raise FFTArgumentError(f"istft: length must be positive, got {length}")
        result = _ops.istft(
            x, n_fft, hop_length, win_length, win, center, normalized, onesided, length, return_complex
        )
    except RuntimeError as exc:
        if isinstance(exc, FFTArgumentError):
            raise
        _explain("istft", exc, x, n_fft, hop_length, win_length, win, None)
        freq = x.shape[-2] if x.dim() >= 2 else None
        if freq is not None and freq not in (n_fft // 2 + 1, n_fft):
            raise FFTArgumentError(
                f"istft: input has {freq} frequencies; n_fft={n_fft} needs {n_fft // 2 + 1} (onesided) "
                f"or {n_fft} (two-sided)"
            ) from exc
        raise
    if return_complex and was_ct:
        return ComplexTensor.from_torch(result)
    return result
