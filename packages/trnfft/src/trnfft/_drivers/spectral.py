"""Drivers of the NKI route for ``stft`` and ``istft``: torch framing, kernel transforms.

Framing, windowing, centre padding and overlap-add are bookkeeping and stay in torch on the
caller's device; the transform of the frames — one batched transform of ``n_fft`` points over
every frame of every signal — is :func:`trnfft._nki.c2c_along` (two-sided ``stft``, and
``istft`` with ``return_complex``) or the real forms ``r2c_along`` (one-sided ``stft``) and
``c2r_along`` (``istft``), which run even lengths as half-length complex transforms, i.e.
launches of the same stage kernel as ``fft``. The semantics are ``torch.stft(..., return_complex=True)`` and
``torch.istft``; arguments they reject go to torch through ``ctx.caller_error`` so that the caller
sees torch's own error.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trncore.dispatch import KernelContext, KernelUnsupported
from trnfft._drivers.fft import c2c_along, c2r_along, check_input, r2c_along

__all__ = ["istft_driver", "stft_driver", "work_stft"]

_WINDOW_DTYPES = (torch.float32, torch.complex64)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _lengths(n_fft: Any, hop_length: Any, win_length: Any) -> tuple[int, int] | None:
    """``(hop, win)`` with torch's defaults, or None when torch should judge them."""
    hop = n_fft // 4 if hop_length is None and _is_int(n_fft) else hop_length
    win = n_fft if win_length is None else win_length
    if not (_is_int(n_fft) and _is_int(hop) and _is_int(win)):
        return None
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        return None
    return hop, win


def _full_window(window: Any, win: int, n_fft: int, like: torch.Tensor) -> torch.Tensor | None:
    """The window centred in ``n_fft`` samples (ones when None), or None when torch should judge it."""
    if window is None:
        window = torch.ones(win, dtype=torch.float32, device=like.device)
    elif not isinstance(window, torch.Tensor) or window.dim() != 1 or window.shape[0] != win:
        return None
    elif window.dtype not in _WINDOW_DTYPES:
        raise KernelUnsupported(f"kernel takes a float32 or complex64 window, got {window.dtype}")
    left = (n_fft - win) // 2
    if win == n_fft:
        return window
    return torch.nn.functional.pad(window, (left, n_fft - win - left))


def stft_driver(
    ctx: KernelContext,
    input: Any,
    n_fft: Any,
    hop_length: Any = None,
    win_length: Any = None,
    window: Any = None,
    center: Any = True,
    pad_mode: Any = "reflect",
    normalized: Any = False,
    onesided: Any = None,
    return_complex: Any = None,
    align_to_window: Any = None,
) -> torch.Tensor:
    """NKI-route driver of ``stft``: frames framed and windowed in torch, transformed by the kernel."""
    args: tuple[Any, ...] = (input, n_fft, hop_length, win_length, window, center, pad_mode, normalized)
    args = (*args, onesided, return_complex)
    x = check_input(input)
    if align_to_window is not None:
        raise KernelUnsupported("align_to_window is not supported by the kernel route")
    if return_complex is not True:
        raise KernelUnsupported("the kernel route returns complex spectrograms only (return_complex=True)")
    lengths = _lengths(n_fft, hop_length, win_length)
    if lengths is None or x.dim() not in (1, 2):
        ctx.caller_error(*args)
    hop, win = lengths
    w = _full_window(window, win, n_fft, x)
    if w is None:
        ctx.caller_error(*args)
    complex_data = x.is_complex() or w.is_complex()
    if onesided is None:
        onesided = not complex_data
    elif onesided and complex_data:
        ctx.caller_error(*args)
    signal = x if x.dim() == 2 else x.unsqueeze(0)
    if center:
        pad = n_fft // 2
        try:  # torch pads a (1, B, L) view: reflect needs pad < L, the caller's to fix
            signal = torch.nn.functional.pad(signal.unsqueeze(0), (pad, pad), mode=pad_mode).squeeze(0)
        except (RuntimeError, NotImplementedError, ValueError):
            ctx.caller_error(*args)
    if signal.shape[-1] < n_fft:
        ctx.caller_error(*args)
    frames = signal.unfold(-1, n_fft, hop) * w  # (B, frames, n_fft)
    scale = n_fft**-0.5 if normalized else 1.0
    if onesided:  # real frames: the half-length transform
        spec = r2c_along(ctx, frames, 2, n_fft, scale, False)
    else:
        spec = c2c_along(ctx, frames, 2, scale, False)
    spec = spec.transpose(1, 2)
    return spec if x.dim() == 2 else spec.squeeze(0)


def istft_driver(
    ctx: KernelContext,
    input: Any,
    n_fft: Any,
    hop_length: Any = None,
    win_length: Any = None,
    window: Any = None,
    center: Any = True,
    normalized: Any = False,
    onesided: Any = None,
    length: Any = None,
    return_complex: Any = False,
) -> torch.Tensor:
    """NKI-route driver of ``istft``: kernel inverse transforms of the frames, overlap-add in torch."""
    args: tuple[Any, ...] = (input, n_fft, hop_length, win_length, window, center, normalized, onesided)
    args = (*args, length, return_complex)
    x = check_input(input)
    lengths = _lengths(n_fft, hop_length, win_length)
    if lengths is None or not x.is_complex() or x.dim() not in (2, 3) or x.numel() == 0:
        ctx.caller_error(*args)
    hop, win = lengths
    if hop > win or (length is not None and (not _is_int(length) or length <= 0)):
        ctx.caller_error(*args)
    w = _full_window(window, win, n_fft, x)
    if w is None:
        ctx.caller_error(*args)
    freq, count = x.shape[-2], x.shape[-1]
    if onesided is None:
        onesided = freq != n_fft
    if freq != (n_fft // 2 + 1 if onesided else n_fft):
        ctx.caller_error(*args)
    if (return_complex and onesided) or (not return_complex and w.is_complex()):
        ctx.caller_error(*args)
    spec = (x if x.dim() == 3 else x.unsqueeze(0)).transpose(1, 2)  # (B, frames, freq)
    scale = n_fft**-0.5 if normalized else 1.0 / n_fft
    if return_complex:
        frames = c2c_along(ctx, spec, 2, scale, True)
    else:
        frames = c2r_along(ctx, spec.narrow(2, 0, n_fft // 2 + 1), 2, n_fft, scale, True)
    frames = frames * w
    total = n_fft + hop * (count - 1)
    starts = torch.arange(count, device=x.device)[:, None] * hop
    index = (starts + torch.arange(n_fft, device=x.device)).reshape(-1)
    batch = frames.shape[0]
    y = frames.new_zeros(batch, total).index_add(1, index, frames.reshape(batch, -1))
    square = (w * w).expand(count, n_fft).reshape(-1)
    envelope = square.new_zeros(total).index_add(0, index, square)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    y, envelope = y[:, start:end], envelope[start:end]
    if bool((envelope.abs() < 1e-11).any()):  # torch's NOLA check, torch's error
        ctx.caller_error(*args)
    y = y / envelope
    if end > total:
        y = torch.nn.functional.pad(y, (0, end - total))
    return y if x.dim() == 3 else y.squeeze(0)


def work_stft(input: Any, n_fft: Any, hop_length: Any = None, *args: Any, **kwargs: Any) -> int:
    """Flops of the frame transforms (``5 n log2 n`` per frame), 0 when the arguments are unusual."""
    try:
        n = int(n_fft)
        frames = max(1, int(input.numel()) // max(1, int(hop_length or n // 4)))
    except Exception:
        return 0
    return int(5 * frames * n * max(1.0, math.log2(max(n, 2))))
