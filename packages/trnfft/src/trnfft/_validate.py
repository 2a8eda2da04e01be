"""Clear errors for bad transform arguments, computed only after torch has rejected a call.

The PyTorch route hands arguments straight to ``torch.fft`` (validation up front would cost more
than a small transform). When torch raises, these functions look at the arguments and raise an
:mod:`trnfft.errors` exception that names the argument, is of the type torch raised and chains
torch's error; when they find nothing to say, the caller re-raises torch's error unchanged.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from trnfft.errors import FFTArgumentError, FFTDimError, FFTDtypeUnsupportedError, FFTTypeError

NORMS = (None, "backward", "forward", "ortho")


def check_norm(fn: str, norm: Any) -> None:
    """Raise if ``norm`` is not one of torch.fft's modes."""
    if norm not in NORMS:
        raise FFTArgumentError(f"{fn}: norm must be None, 'backward', 'forward' or 'ortho', got {norm!r}")


def _as_index(value: Any) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_dim(fn: str, ndim: int, dim: Any, name: str = "dim") -> int:
    """The non-negative form of ``dim``; raise if it is out of range for a rank-``ndim`` input."""
    index = _as_index(dim)
    if index is None:
        raise TypeError(f"{fn}: {name} must be an int, got {type(dim).__name__}")
    if ndim == 0:
        raise FFTDimError(f"{fn}: {name}={index} cannot index a 0-dimensional input (a scalar)")
    if not -ndim <= index < ndim:
        raise FFTDimError(
            f"{fn}: {name}={index} is out of range for a {ndim}-D input (expected {-ndim}..{ndim - 1})"
        )
    return index % ndim


def check_length(fn: str, value: Any, name: str) -> None:
    """Raise if a transform length is not a positive int."""
    if value is None:
        return
    index = _as_index(value)
    if index is None:
        raise TypeError(f"{fn}: {name} must be an int or None, got {type(value).__name__}")
    if index <= 0:
        raise FFTArgumentError(f"{fn}: {name} must be a positive transform length, got {index}")


def explain_1d(fn: str, x: torch.Tensor, n: Any, dim: Any, norm: Any, *, halfcomplex_out: bool) -> None:
    """Raise a clear error for a rejected one-dimensional transform call, if one applies.

    ``halfcomplex_out`` marks ``irfft``/``hfft``, whose default output length is ``2*(m-1)``.
    """
    check_norm(fn, norm)
    axis = check_dim(fn, x.dim(), dim)
    check_length(fn, n, "n")
    if n is None and halfcomplex_out and x.shape[axis] < 2:
        raise FFTArgumentError(
            f"{fn}: the default output length 2*(m-1) is {2 * (x.shape[axis] - 1)} for an input of "
            f"length m={x.shape[axis]} along dim {dim}; pass a positive n"
        )
    if n is None and x.shape[axis] == 0:
        raise FFTArgumentError(f"{fn}: input has length 0 along dim {dim}; pass a positive n")


def explain_nd(fn: str, x: torch.Tensor, s: Any, dim: Any, norm: Any, *, halfcomplex_out: bool) -> None:
    """Raise a clear error for a rejected n-dimensional transform call, if one applies."""
    check_norm(fn, norm)
    ndim = x.dim()
    if s is not None and not isinstance(s, Sequence):
        raise TypeError(f"{fn}: s must be a sequence of ints or None, got {type(s).__name__}")
    if dim is not None and not isinstance(dim, Sequence):
        dims: list[int] = [check_dim(fn, ndim, dim)]
    elif dim is not None:
        dims = [check_dim(fn, ndim, d) for d in dim]
    elif s is not None:
        if len(s) > ndim:
            raise FFTArgumentError(f"{fn}: s has {len(s)} entries but the input has only {ndim} dimensions")
        dims = list(range(ndim - len(s), ndim))
    else:
        dims = list(range(ndim))
    if len(set(dims)) != len(dims):
        raise FFTArgumentError(f"{fn}: dim must not repeat a dimension, got {tuple(dim)}")
    if s is not None:
        if len(s) != len(dims):
            raise FFTArgumentError(
                f"{fn}: s has {len(s)} entries but dim names {len(dims)} dimensions; they must match"
            )
        for i, v in enumerate(s):
            if _as_index(v) == -1:  # torch: -1 keeps the input's length
                continue
            check_length(fn, v, f"s[{i}]")
    for i, d in enumerate(dims):
        given = s is not None and _as_index(s[i]) != -1
        if halfcomplex_out and i == len(dims) - 1 and not given and x.shape[d] < 2:
            raise FFTArgumentError(
                f"{fn}: the default output length 2*(m-1) along the last transformed dim {d} is "
                f"{2 * (x.shape[d] - 1)} for m={x.shape[d]}; pass a positive last entry in s"
            )
        if not given and x.shape[d] == 0:
            raise FFTArgumentError(f"{fn}: input has length 0 along dim {d}; pass a positive size in s")


def explain_dtype(fn: str, x: torch.Tensor, message: str) -> None:
    """Raise a clear error when torch rejected the input's dtype."""
    lowered = message.lower()
    if "floating point or complex" in lowered or "unsupported dtype" in lowered:
        raise FFTDtypeUnsupportedError(
            f"{fn}: input dtype {str(x.dtype).removeprefix('torch.')} is not supported on "
            f"{x.device.type}; use float32, float64, complex64 or complex128"
        )
    if "expects a real" in lowered:
        raise FFTTypeError(f"{fn}: input must be real, got {str(x.dtype).removeprefix('torch.')}")
