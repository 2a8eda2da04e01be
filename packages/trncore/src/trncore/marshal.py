"""Torch ↔ NumPy marshalling for the simulator route, in one place.

Kernels on the simulator take and return NumPy arrays. This module converts a torch tensor from
any device, layout and supported dtype into the array a kernel expects, and converts results back
onto the caller's device. bfloat16 travels through ``ml_dtypes`` (NumPy has no bfloat16); complex
tensors travel as separate real and imaginary planes, the layout NKI kernels use.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trncore import platform

try:
    import torch
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

__all__ = [
    "complex_from_planes",
    "complex_to_planes",
    "numpy_dtype",
    "to_numpy",
    "to_torch",
    "torch_dtype",
]

_TORCH_TO_NUMPY: dict[torch.dtype, Any] = {
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.float16: np.float16,
    torch.bfloat16: ml_dtypes.bfloat16,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.uint8: np.uint8,
    torch.bool: np.bool_,
}
_NUMPY_TO_TORCH = {np.dtype(v): k for k, v in _TORCH_TO_NUMPY.items()}

# Same-width integer views used to move 16-bit floats NumPy cannot name across the boundary.
_BIT_VIEWS = {torch.bfloat16: torch.int16}

_COMPLEX_PARTS = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype that holds ``dtype`` exactly."""
    try:
        return np.dtype(_TORCH_TO_NUMPY[dtype])
    except KeyError:
        raise TypeError(
            f"dtype {dtype} has no NumPy equivalent for kernels; complex tensors travel as planes "
            "(see complex_to_planes)"
        ) from None


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype that holds NumPy ``dtype`` exactly."""
    try:
        return _NUMPY_TO_TORCH[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"NumPy dtype {dtype!r} has no torch equivalent") from None


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A C-contiguous NumPy copy of a real tensor from any device, dtype preserved exactly."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_complex():
        raise TypeError(
            f"complex tensor ({tensor.dtype}) must be split into real/imaginary planes first "
            "(complex_to_planes)"
        )
    target = numpy_dtype(tensor.dtype)
    host = tensor.detach()
    if host.device.type != "cpu":
        host = host.cpu()
    host = host.contiguous()
    view = _BIT_VIEWS.get(host.dtype)
    if view is not None:
        return host.view(view).numpy().view(target).copy()
    return host.numpy().copy()


def to_torch(
    array: np.ndarray, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> torch.Tensor:
    """A tensor on ``device`` holding ``array`` (cast to ``dtype`` if given)."""
    array = np.ascontiguousarray(array)
    source = torch_dtype(array.dtype)
    view = _BIT_VIEWS.get(source)
    if view is not None:
        tensor = torch.from_numpy(array.view(np.dtype(_TORCH_TO_NUMPY[view]))).view(source)
    else:
        tensor = torch.from_numpy(array)
    if dtype is not None and dtype != tensor.dtype:
        tensor = tensor.to(dtype)
    return tensor.to(device)


def complex_to_planes(tensor: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Real and imaginary planes of a complex tensor as NumPy arrays of the matching real dtype."""
    if tensor.dtype not in _COMPLEX_PARTS:
        raise TypeError(f"expected complex64 or complex128, got {tensor.dtype}")
    return to_numpy(tensor.real), to_numpy(tensor.imag)


def complex_from_planes(
    real: np.ndarray,
    imag: np.ndarray,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.complex64,
) -> torch.Tensor:
    """A complex tensor on ``device`` from real and imaginary planes."""
    if real.shape != imag.shape:
        raise ValueError(f"real plane {real.shape} and imaginary plane {imag.shape} differ in shape")
    if dtype not in _COMPLEX_PARTS:
        raise TypeError(f"dtype must be complex64 or complex128, got {dtype}")
    part = _COMPLEX_PARTS[dtype]
    re = to_torch(real, dtype=part)
    im = to_torch(imag, dtype=part)
    return torch.complex(re, im).to(device)
