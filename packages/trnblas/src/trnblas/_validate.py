"""Up-front input checks shared by every trnblas function.

BLAS does not mix precisions or devices, so neither do we: operands must be strided torch tensors
of one floating or complex dtype on one device, with the ranks and shapes each routine documents.
Every error names the argument and says what was expected.
"""

from __future__ import annotations

import numbers
from typing import cast

import torch

#: The four BLAS precisions (s, d, c, z).
BLAS_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: GEMM-shaped routines also take the half-precision inputs the Tensor Engine is built for.
GEMM_DTYPES: tuple[torch.dtype, ...] = (*BLAS_DTYPES, torch.bfloat16, torch.float16)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor(
    name: str, value: object, ndim: int | None = None, *, dtypes: tuple[torch.dtype, ...] = BLAS_DTYPES
) -> torch.Tensor:
    """``value`` checked to be a strided tensor of an allowed dtype (and rank ``ndim`` if given)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.layout is not torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {value.layout}")
    if value.dtype not in dtypes:
        allowed = ", ".join(_dtype_name(d) for d in dtypes)
        kind = "integer or boolean" if not (value.is_floating_point() or value.is_complex()) else "this"
        raise TypeError(
            f"{name} has dtype {_dtype_name(value.dtype)}: {kind} dtype is not supported; "
            f"expected one of {allowed}"
        )
    if ndim is not None and value.dim() != ndim:
        what = {1: "a vector (1-D)", 2: "a matrix (2-D)"}.get(ndim, f"{ndim}-D")
        raise ValueError(f"{name} must be {what}, got a {value.dim()}-D tensor of shape {tuple(value.shape)}")
    return value


#: Where trnblas's argument order differs from the public trnsci ``trnblas`` package's (which put
#: the scalar first), a number in the first tensor's place gets this pointer instead of a bare
#: type error. See the docs page "Coming from the trnsci packages".
SUITE_ORDER = {
    "axpy": "axpy(x, y, a=alpha), as scipy.linalg.blas.daxpy; the trnsci package's axpy(alpha, x, y) "
    "order is not accepted",
    "batched_gemm": "batched_gemm(a, b, alpha=..., beta=..., c=...); the trnsci package's "
    "batched_gemm(alpha, A, B, ...) order is not accepted",
}


def not_a_scalar_first(fn: str, name: str, value: object) -> None:
    """Refuse a Python number passed where ``fn``'s first tensor goes, pointing at our order."""
    if isinstance(value, numbers.Number):
        raise TypeError(
            f"{fn}: {name} must be a torch.Tensor, got {type(value).__name__} {value!r}. "
            f"trnblas's order is {SUITE_ORDER[fn]}"
        )


def same_kind(**operands: torch.Tensor | None) -> torch.Tensor:
    """Check that the given (non-``None``) operands share one dtype and one device.

    Returns the first operand, whose dtype and device the result takes.
    """
    named = [(n, t) for n, t in operands.items() if t is not None]
    first_name, first = named[0]
    for name, t in named[1:]:
        if t.dtype != first.dtype:
            raise TypeError(
                f"{first_name} and {name} must have the same dtype (BLAS does not mix precisions): "
                f"{first_name} is {_dtype_name(first.dtype)}, {name} is {_dtype_name(t.dtype)}"
            )
        if t.device != first.device:
            raise ValueError(
                f"{first_name} and {name} must be on the same device: "
                f"{first_name} is on {first.device}, {name} is on {t.device}"
            )
    return first


def scalar(name: str, value: object, dtype: torch.dtype) -> float | complex:
    """A Python number usable as ``name`` with tensors of ``dtype`` (complex only for complex data)."""
    if type(value) is float or type(value) is int:  # the common case, without ABC checks
        return float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"{name} must be a real or complex number, got {type(value).__name__}")
    if isinstance(value, numbers.Real):
        return float(value)
    if not dtype.is_complex:
        raise TypeError(
            f"{name}={value!r} is complex but the operands are {_dtype_name(dtype)}; "
            "use complex64/complex128 operands or a real scalar"
        )
    return complex(cast(complex, value))


def real_scalar(name: str, value: object) -> float:
    """A real Python number for ``name`` (rotation cosines and sines, for example)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def shape(name: str, t: torch.Tensor, expected: tuple[int, ...], why: str = "") -> None:
    """Raise ``ValueError`` unless ``t`` has exactly ``expected`` shape."""
    if tuple(t.shape) != tuple(expected):
        reason = f" ({why})" if why else ""
        raise ValueError(f"{name} must have shape {tuple(expected)}{reason}, got {tuple(t.shape)}")


def square(name: str, t: torch.Tensor) -> int:
    """The order of the square matrix ``t``; ``ValueError`` if it is not square."""
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{name} must be a square matrix, got shape {tuple(t.shape)}")
    return int(t.shape[-1])
