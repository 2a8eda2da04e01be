"""Input validation shared by the public functions: clear errors naming the argument."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import cast

import torch

__all__ = [
    "check_int",
    "check_same_device",
    "check_scalar",
    "check_tensor",
    "floating_dtype",
]


def check_tensor(value: object, name: str, *, ndim: int | None = None) -> torch.Tensor:
    """``value`` as a tensor, or a TypeError/ValueError naming ``name`` and what was expected."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
    return value


def floating_dtype(tensor: torch.Tensor, name: str, *, complex_ok: bool = False) -> torch.dtype:
    """The dtype of ``tensor`` if it is floating point (or complex when allowed), else TypeError."""
    if tensor.is_floating_point() or (complex_ok and tensor.is_complex()):
        return tensor.dtype
    kinds = "a floating-point or complex" if complex_ok else "a floating-point"
    raise TypeError(f"{name} must have {kinds} dtype, got {str(tensor.dtype).removeprefix('torch.')}")


def check_same_device(tensors: Sequence[torch.Tensor], names: Sequence[str]) -> torch.device:
    """The common device of ``tensors``; ValueError naming the first one that differs."""
    device = tensors[0].device
    for t, n in zip(tensors[1:], names[1:]):
        if t.device != device:
            raise ValueError(f"{n} is on {t.device} but {names[0]} is on {device}; move them to one device")
    return device


def check_int(value: object, name: str, *, minimum: int | None = None) -> int:
    """``value`` as an int (bool rejected) not below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_scalar(value: object, name: str) -> complex | float | int:
    """``value`` as a Python number (int, float or complex; bool and tensors rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"{name} must be a number (int, float or complex), got {type(value).__name__}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return complex(cast(complex, value))
