"""The ``torch.fft`` transforms, with ``torch.fft``'s signatures and results.

Every function takes the same arguments as its ``torch.fft`` namesake (``n``, ``s``, ``dim``,
``norm``, ``out``) and returns the same values, dtypes and devices. While trncore reports the
library on its reference route (the fast path of :class:`trncore.Library`), a call goes straight
to the operation's reference, ``torch.fft`` itself, with no checks in front (``torch.fft``
validates, and a check in Python would cost more than a 16-point transform) and only non-default
arguments passed (torch's argument parser charges for each one); a ``ComplexTensor``, which torch
refuses with a ``TypeError``, and every call off that route go to the operation in
:mod:`trnfft._ops`, which routes them. When the call is rejected, the error is
re-raised as a :mod:`trnfft.errors` exception that names the argument and keeps torch's type. A
:class:`~trnfft.ComplexTensor` input is converted losslessly and a complex result is returned as a
``ComplexTensor``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from trncore.config import GENERATION as _GENERATION
from trnfft import _ops, _validate
from trnfft._library import library as _LIB
from trnfft.complex_tensor import ComplexTensor, TensorLike

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

# What torch.fft raises for arguments it rejects: RuntimeError/IndexError, and in newer releases
# (2.14+) NotImplementedError for a dtype without a CPU kernel (float16). A TypeError (a complex
# input to rfft in 2.14+) is explained on the general path, where the input is known to be a tensor.
_REJECTED = (RuntimeError, IndexError, NotImplementedError)
# The operations' references, bound once for the fast path (a module global is cheaper to reach
# than an attribute of an operation, and on a 16-point transform every 20 ns is half a percent).
_ref_fft = _ops.fft.reference
_ref_ifft = _ops.ifft.reference
_ref_rfft = _ops.rfft.reference
_ref_irfft = _ops.irfft.reference
_ref_hfft = _ops.hfft.reference
_ref_ihfft = _ops.ihfft.reference
_ref_fft2 = _ops.fft2.reference
_ref_ifft2 = _ops.ifft2.reference
_ref_rfft2 = _ops.rfft2.reference
_ref_irfft2 = _ops.irfft2.reference
_ref_hfft2 = _ops.hfft2.reference
_ref_ihfft2 = _ops.ihfft2.reference
_ref_fftn = _ops.fftn.reference
_ref_ifftn = _ops.ifftn.reference
_ref_rfftn = _ops.rfftn.reference
_ref_irfftn = _ops.irfftn.reference
_ref_hfftn = _ops.hfftn.reference
_ref_ihfftn = _ops.ihfftn.reference

_CLEAR = (_validate.FFTArgumentError, _validate.FFTDimError, _validate.FFTTypeError, TypeError)

_PARAMS_1D = """
Parameters
----------
input : torch.Tensor or ComplexTensor
    Input on any device; float64/complex128 inputs give float64/complex128 results.
n : int, optional
    Transform length{n_extra}; the input is zero-padded or cropped along ``dim`` to it.
dim : int, default -1
    Dimension to transform (negative counts from the end).
norm : {{None, "backward", "forward", "ortho"}}, optional
    Normalisation mode, as in ``torch.fft``.
out : torch.Tensor, optional
    Output tensor (torch's ``out=`` semantics).

Returns
-------
{returns}
"""

_PARAMS_ND = """
Parameters
----------
input : torch.Tensor or ComplexTensor
    Input on any device; float64/complex128 inputs give float64/complex128 results.
s : sequence of int, optional
    Signal size per transformed dimension{n_extra}; zero-padding or cropping as in ``torch.fft``
    (``-1`` keeps a dimension's length).
dim : int or sequence of int, default {dim_default}
    Dimensions to transform (negative counts from the end).
norm : {{None, "backward", "forward", "ortho"}}, optional
    Normalisation mode, as in ``torch.fft``.
out : torch.Tensor, optional
    Output tensor (torch's ``out=`` semantics).

Returns
-------
{returns}
"""

_COMPLEX_RESULT = (
    "torch.Tensor or ComplexTensor\n    Complex result; a ``ComplexTensor`` when ``input`` is one."
)
_REAL_RESULT = "torch.Tensor\n    Real result (also for a ``ComplexTensor`` input)."


def _doc(summary: str, template: str, returns: str, n_extra: str = "", dim_default: str = "") -> Any:
    """Give a transform its NumPy-style docstring: a summary, then the shared parameter text."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__doc__ = (
            summary + "\n" + template.format(n_extra=n_extra, returns=returns, dim_default=dim_default)
        )
        return fn

    return apply


def _as_tensor(fn: str, input: Any) -> tuple[torch.Tensor, bool]:
    """The torch tensor behind ``input`` and whether it was a ComplexTensor."""
    if isinstance(input, torch.Tensor):
        return input, False
    if isinstance(input, ComplexTensor):
        return input.to_torch(), True
    raise TypeError(f"{fn}: input must be a torch.Tensor or trnfft.ComplexTensor, got {type(input).__name__}")


def _wrap(result: torch.Tensor, was_complex_tensor: bool) -> TensorLike:
    if was_complex_tensor and result.is_complex():
        return ComplexTensor.from_torch(result)
    return result


def _explain_1d(fn: str, exc: BaseException, x: Any, n: Any, dim: Any, norm: Any, half: bool) -> None:
    """Re-raise a rejected call's error as a clear one, if the arguments explain it."""
    try:
        _validate.explain_1d(fn, x, n, dim, norm, halfcomplex_out=half)
        _validate.explain_dtype(fn, x, str(exc))
    except _CLEAR as clear:
        raise clear from exc


def _explain_nd(fn: str, exc: BaseException, x: Any, s: Any, dim: Any, norm: Any, half: bool) -> None:
    try:
        _validate.explain_nd(fn, x, s, dim, norm, halfcomplex_out=half)
        _validate.explain_dtype(fn, x, str(exc))
    except _CLEAR as clear:
        raise clear from exc


def _explain_type(fn: str, exc: TypeError, x: torch.Tensor) -> None:
    """A TypeError from torch about the input's dtype, re-raised as a clear FFTTypeError (still a
    TypeError); one about another argument (``norm=3``) stays torch's own."""
    try:
        _validate.explain_dtype(fn, x, str(exc))
    except _validate.FFTTypeError as clear:
        raise clear from exc


def _general_1d(
    fn: str, op: Callable[..., torch.Tensor], input: Any, n: Any, dim: Any, norm: Any, out: Any, half: bool
) -> TensorLike:
    """The path for ComplexTensor inputs, tensor subclasses and ``out=``."""
    x, was_ct = _as_tensor(fn, input)
    try:
        if out is None:
            return _wrap(op(x, n, dim, norm), was_ct)
        return op(x, n, dim, norm, out=out)
    except _REJECTED as exc:
        _explain_1d(fn, exc, x, n, dim, norm, half)
        raise
    except TypeError as exc:
        _explain_type(fn, exc, x)
        raise


def _general_nd(
    fn: str, op: Callable[..., torch.Tensor], input: Any, s: Any, dim: Any, norm: Any, out: Any, half: bool
) -> TensorLike:
    x, was_ct = _as_tensor(fn, input)
    try:
        if out is None:
            return _wrap(op(x, s, dim, norm), was_ct)
        return op(x, s, dim, norm, out=out)
    except _REJECTED as exc:
        _explain_nd(fn, exc, x, s, dim, norm, half)
        raise
    except TypeError as exc:
        _explain_type(fn, exc, x)
        raise


# --------------------------------------------------------------------------- one-dimensional


@_doc("One-dimensional discrete Fourier transform (``torch.fft.fft``).", _PARAMS_1D, _COMPLEX_RESULT)
def fft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_fft(input)
            return _ref_fft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("fft", exc, input, n, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_1d("fft", _ops.fft, input, n, dim, norm, out, False)


@_doc("Inverse of :func:`fft` (``torch.fft.ifft``).", _PARAMS_1D, _COMPLEX_RESULT)
def ifft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_ifft(input)
            return _ref_ifft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("ifft", exc, input, n, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_1d("ifft", _ops.ifft, input, n, dim, norm, out, False)


@_doc(
    "Fourier transform of a real signal, non-negative frequencies only (``torch.fft.rfft``).",
    _PARAMS_1D,
    "torch.Tensor or ComplexTensor\n    ``n // 2 + 1`` complex coefficients along ``dim``.",
)
def rfft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_rfft(input)
            return _ref_rfft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("rfft", exc, input, n, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_1d("rfft", _ops.rfft, input, n, dim, norm, out, False)


@_doc(
    "Inverse of :func:`rfft`: a real signal from its one-sided spectrum (``torch.fft.irfft``).",
    _PARAMS_1D,
    _REAL_RESULT,
    n_extra=" of the real output (default ``2*(m-1)`` for an input of length m)",
)
def irfft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_irfft(input)
            return _ref_irfft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("irfft", exc, input, n, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_1d("irfft", _ops.irfft, input, n, dim, norm, out, True))


@_doc(
    "Transform of a Hermitian-symmetric signal given by its first half (``torch.fft.hfft``).",
    _PARAMS_1D,
    _REAL_RESULT,
    n_extra=" of the real output (default ``2*(m-1)`` for an input of length m)",
)
def hfft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_hfft(input)
            return _ref_hfft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("hfft", exc, input, n, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_1d("hfft", _ops.hfft, input, n, dim, norm, out, True))


@_doc(
    "Inverse of :func:`hfft`: the one-sided inverse transform of a real signal (``torch.fft.ihfft``).",
    _PARAMS_1D,
    "torch.Tensor or ComplexTensor\n    ``n // 2 + 1`` complex coefficients along ``dim``.",
)
def ihfft(
    input: TensorLike, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_ihfft(input)
            return _ref_ihfft(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d("ihfft", exc, input, n, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_1d("ihfft", _ops.ihfft, input, n, dim, norm, out, False)


# --------------------------------------------------------------------------- two-dimensional

_LAST_TWO = "(-2, -1)"
_HALF_S = " (the last entry is the real output length, default ``2*(m-1)``)"


@_doc("Two-dimensional Fourier transform (``torch.fft.fft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO)
def fft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_fft2(input)
            return _ref_fft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("fft2", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("fft2", _ops.fft2, input, s, dim, norm, out, False)


@_doc("Inverse of :func:`fft2` (``torch.fft.ifft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO)
def ifft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_ifft2(input)
            return _ref_ifft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("ifft2", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("ifft2", _ops.ifft2, input, s, dim, norm, out, False)


@_doc(
    "Two-dimensional FFT of a real input (``torch.fft.rfft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO
)
def rfft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_rfft2(input)
            return _ref_rfft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("rfft2", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("rfft2", _ops.rfft2, input, s, dim, norm, out, False)


@_doc("Inverse of :func:`rfft2` (``torch.fft.irfft2``).", _PARAMS_ND, _REAL_RESULT, _HALF_S, _LAST_TWO)
def irfft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_irfft2(input)
            return _ref_irfft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("irfft2", exc, input, s, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_nd("irfft2", _ops.irfft2, input, s, dim, norm, out, True))


@_doc(
    "Two-dimensional transform of a Hermitian-symmetric input (``torch.fft.hfft2``).",
    _PARAMS_ND,
    _REAL_RESULT,
    _HALF_S,
    _LAST_TWO,
)
def hfft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_hfft2(input)
            return _ref_hfft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("hfft2", exc, input, s, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_nd("hfft2", _ops.hfft2, input, s, dim, norm, out, True))


@_doc("Inverse of :func:`hfft2` (``torch.fft.ihfft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO)
def ihfft2(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim == (-2, -1):
                return _ref_ihfft2(input)
            return _ref_ihfft2(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("ihfft2", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("ihfft2", _ops.ihfft2, input, s, dim, norm, out, False)


# --------------------------------------------------------------------------- n-dimensional

_ALL_OR_S = "None (all dimensions, or the last ``len(s)`` when ``s`` is given)"


@_doc("N-dimensional Fourier transform (``torch.fft.fftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S)
def fftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_fftn(input)
            return _ref_fftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("fftn", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("fftn", _ops.fftn, input, s, dim, norm, out, False)


@_doc("Inverse of :func:`fftn` (``torch.fft.ifftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S)
def ifftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_ifftn(input)
            return _ref_ifftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("ifftn", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("ifftn", _ops.ifftn, input, s, dim, norm, out, False)


@_doc("N-dimensional FFT of a real input (``torch.fft.rfftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S)
def rfftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_rfftn(input)
            return _ref_rfftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("rfftn", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("rfftn", _ops.rfftn, input, s, dim, norm, out, False)


@_doc("Inverse of :func:`rfftn` (``torch.fft.irfftn``).", _PARAMS_ND, _REAL_RESULT, _HALF_S, _ALL_OR_S)
def irfftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_irfftn(input)
            return _ref_irfftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("irfftn", exc, input, s, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_nd("irfftn", _ops.irfftn, input, s, dim, norm, out, True))


@_doc(
    "N-dimensional transform of a Hermitian-symmetric input (``torch.fft.hfftn``).",
    _PARAMS_ND,
    _REAL_RESULT,
    _HALF_S,
    _ALL_OR_S,
)
def hfftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> torch.Tensor:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_hfftn(input)
            return _ref_hfftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("hfftn", exc, input, s, dim, norm, True)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return cast(torch.Tensor, _general_nd("hfftn", _ops.hfftn, input, s, dim, norm, out, True))


@_doc("Inverse of :func:`hfftn` (``torch.fft.ihfftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S)
def ihfftn(
    input: TensorLike,
    s: Sequence[int] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    out: Any = None,
) -> TensorLike:
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and dim is None:
                return _ref_ihfftn(input)
            return _ref_ihfftn(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd("ihfftn", exc, input, s, dim, norm, False)
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd("ihfftn", _ops.ihfftn, input, s, dim, norm, out, False)


# --------------------------------------------------------------------------- helpers


def fftfreq(
    n: int,
    d: float = 1.0,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    requires_grad: bool = False,
) -> torch.Tensor:
    """Sample frequencies of an ``n``-point :func:`fft` (``torch.fft.fftfreq``).

    Parameters
    ----------
    n : int
        Transform length (non-negative).
    d : float, default 1.0
        Sample spacing; frequencies are in cycles per unit of ``d``.
    dtype, device, requires_grad
        As in ``torch.fft.fftfreq`` (default dtype: torch's default float dtype).

    Returns
    -------
    torch.Tensor
        ``[0, 1, …, ceil(n/2)-1, -floor(n/2), …, -1] / (d*n)``.
    """
    _check_count("fftfreq", n)
    return torch.fft.fftfreq(n, d, dtype=dtype, device=device, requires_grad=requires_grad)


def rfftfreq(
    n: int,
    d: float = 1.0,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    requires_grad: bool = False,
) -> torch.Tensor:
    """Sample frequencies of an ``n``-point :func:`rfft` (``torch.fft.rfftfreq``).

    Parameters
    ----------
    n : int
        Real signal length (non-negative).
    d : float, default 1.0
        Sample spacing.
    dtype, device, requires_grad
        As in ``torch.fft.rfftfreq``.

    Returns
    -------
    torch.Tensor
        ``[0, 1, …, n//2] / (d*n)``.
    """
    _check_count("rfftfreq", n)
    return torch.fft.rfftfreq(n, d, dtype=dtype, device=device, requires_grad=requires_grad)


def _check_count(fn: str, n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{fn}: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise _validate.FFTArgumentError(f"{fn}: n must be non-negative, got {n}")


def fftshift(input: TensorLike, dim: int | Sequence[int] | None = None) -> TensorLike:
    """Move the zero-frequency term to the centre (``torch.fft.fftshift``).

    Parameters
    ----------
    input : torch.Tensor or ComplexTensor
        A spectrum laid out as :func:`fft` returns it.
    dim : int or sequence of int, optional
        Dimensions to shift (default all).

    Returns
    -------
    torch.Tensor or ComplexTensor
        Same type as ``input``.
    """
    return _shift("fftshift", torch.fft.fftshift, input, dim)


def ifftshift(input: TensorLike, dim: int | Sequence[int] | None = None) -> TensorLike:
    """Undo :func:`fftshift` (``torch.fft.ifftshift``).

    Parameters
    ----------
    input : torch.Tensor or ComplexTensor
        A centred spectrum.
    dim : int or sequence of int, optional
        Dimensions to shift (default all).

    Returns
    -------
    torch.Tensor or ComplexTensor
        Same type as ``input``.
    """
    return _shift("ifftshift", torch.fft.ifftshift, input, dim)


def _shift(fn: str, op: Callable[..., torch.Tensor], input: Any, dim: Any) -> TensorLike:
    if isinstance(input, ComplexTensor):
        try:
            return ComplexTensor(op(input.real, dim), op(input.imag, dim))
        except IndexError as exc:
            _explain_shift(fn, exc, input.real, dim)
            raise
    if not isinstance(input, torch.Tensor):
        raise TypeError(
            f"{fn}: input must be a torch.Tensor or trnfft.ComplexTensor, got {type(input).__name__}"
        )
    try:
        return op(input, dim)
    except IndexError as exc:
        _explain_shift(fn, exc, input, dim)
        raise


def _explain_shift(fn: str, exc: BaseException, x: torch.Tensor, dim: Any) -> None:
    dims = dim if isinstance(dim, Sequence) else [dim]
    try:
        for d in dims:
            _validate.check_dim(fn, x.dim(), d)
    except _CLEAR as clear:
        raise clear from exc
