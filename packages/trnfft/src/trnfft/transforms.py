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
from typing import Any, Protocol

import torch

from trncore.config import GENERATION as _GENERATION  # noqa: F401  (used by the templates below)
from trnfft import _ops, _validate
from trnfft._library import library as _LIB  # noqa: F401  (used by the templates below)
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


def _doc_text(summary: str, template: str, returns: str, n_extra: str = "", dim_default: str = "") -> str:
    """A transform's NumPy-style docstring: a summary, then the shared parameter text."""
    return summary + "\n" + template.format(n_extra=n_extra, returns=returns, dim_default=dim_default)


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


# --------------------------------------------------------------------------- the transforms
#
# Every transform is made by one of two factories (1-D, and 2-D/N-D) from one source text each, so
# the fast path is written once. The factory compiles its template in this module's namespace (as
# ``dataclasses`` builds methods): the made function is the code a hand-written copy would be,
# with the torch.fft signature, its own name and docstring, and it reaches the operation's reference
# through the module-level binding ``_ref_<name>`` (one global load, the cheapest lookup Python
# has; on a 16-point transform every 20 ns is half a percent of the call). Swapping that binding,
# as the tests and the overhead benchmark do, reroutes the fast path.

_SOURCE_1D = """
def {name}(input, n=None, dim=-1, norm=None, *, out=None):
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if n is None and norm is None and dim == -1:
                return _ref_{name}(input)
            return _ref_{name}(input, n, dim, norm)
        except _REJECTED as exc:
            _explain_1d({name!r}, exc, input, n, dim, norm, {half})
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_1d({name!r}, _ops.{name}, input, n, dim, norm, out, {half})
"""

_SOURCE_ND = """
def {name}(input, s=None, dim={default_dim}, norm=None, *, out=None):
    if out is None and _LIB.reference_at == _GENERATION[0]:
        try:
            if s is None and norm is None and {default_check}:
                return _ref_{name}(input)
            return _ref_{name}(input, s, dim, norm)
        except _REJECTED as exc:
            _explain_nd({name!r}, exc, input, s, dim, norm, {half})
            raise
        except TypeError:
            pass  # a ComplexTensor or not a tensor: the general path converts it or says so
    return _general_nd({name!r}, _ops.{name}, input, s, dim, norm, out, {half})
"""


class _Transform1D(Protocol):
    def __call__(
        self,
        input: TensorLike,
        n: int | None = None,
        dim: int = -1,
        norm: str | None = None,
        *,
        out: Any = None,
    ) -> TensorLike: ...


class _RealTransform1D(Protocol):
    def __call__(
        self,
        input: TensorLike,
        n: int | None = None,
        dim: int = -1,
        norm: str | None = None,
        *,
        out: Any = None,
    ) -> torch.Tensor: ...


class _TransformND(Protocol):
    def __call__(
        self,
        input: TensorLike,
        s: Sequence[int] | None = None,
        dim: int | Sequence[int] | None = ...,
        norm: str | None = None,
        *,
        out: Any = None,
    ) -> TensorLike: ...


class _RealTransformND(Protocol):
    def __call__(
        self,
        input: TensorLike,
        s: Sequence[int] | None = None,
        dim: int | Sequence[int] | None = ...,
        norm: str | None = None,
        *,
        out: Any = None,
    ) -> torch.Tensor: ...


def _made(source: str, name: str, half: bool, doc: str, annotations: dict[str, str]) -> Any:
    """Compile ``source`` (a transform's definition) here, with its reference bound as ``_ref_<name>``."""
    namespace = globals()
    namespace[f"_ref_{name}"] = getattr(_ops, name).reference
    made: dict[str, Any] = {}
    exec(source, namespace, made)  # a fixed template of this module, formatted with names only
    fn = made[name]
    fn.__doc__ = doc
    fn.__annotations__ = {**annotations, "return": "torch.Tensor" if half else "TensorLike"}
    return fn


_ANNOTATIONS_1D = {"input": "TensorLike", "n": "int | None", "dim": "int", "norm": "str | None", "out": "Any"}


def _transform_1d(name: str, half: bool, doc: str) -> Any:
    """The public 1-D transform ``name`` (``half``: its output is half-complex, a real result)."""
    return _made(_SOURCE_1D.format(name=name, half=half), name, half, doc, _ANNOTATIONS_1D)


def _transform_nd(name: str, half: bool, default_dim: tuple[int, int] | None, doc: str) -> Any:
    """The public 2-D or N-D transform ``name`` with ``default_dim`` as ``dim``'s default."""
    dim = "Sequence[int]" if default_dim is not None else "int | Sequence[int] | None"
    annotations = {
        "input": "TensorLike",
        "s": "Sequence[int] | None",
        "dim": dim,
        "norm": "str | None",
        "out": "Any",
    }
    check = "dim is None" if default_dim is None else f"dim == {default_dim!r}"
    source = _SOURCE_ND.format(name=name, half=half, default_dim=repr(default_dim), default_check=check)
    return _made(source, name, half, doc, annotations)


# --------------------------------------------------------------------------- one-dimensional


fft: _Transform1D = _transform_1d(
    "fft",
    False,
    _doc_text("One-dimensional discrete Fourier transform (``torch.fft.fft``).", _PARAMS_1D, _COMPLEX_RESULT),
)

ifft: _Transform1D = _transform_1d(
    "ifft", False, _doc_text("Inverse of :func:`fft` (``torch.fft.ifft``).", _PARAMS_1D, _COMPLEX_RESULT)
)

rfft: _Transform1D = _transform_1d(
    "rfft",
    False,
    _doc_text(
        "Fourier transform of a real signal, non-negative frequencies only (``torch.fft.rfft``).",
        _PARAMS_1D,
        "torch.Tensor or ComplexTensor\n    ``n // 2 + 1`` complex coefficients along ``dim``.",
    ),
)

irfft: _RealTransform1D = _transform_1d(
    "irfft",
    True,
    _doc_text(
        "Inverse of :func:`rfft`: a real signal from its one-sided spectrum (``torch.fft.irfft``).",
        _PARAMS_1D,
        _REAL_RESULT,
        n_extra=" of the real output (default ``2*(m-1)`` for an input of length m)",
    ),
)

hfft: _RealTransform1D = _transform_1d(
    "hfft",
    True,
    _doc_text(
        "Transform of a Hermitian-symmetric signal given by its first half (``torch.fft.hfft``).",
        _PARAMS_1D,
        _REAL_RESULT,
        n_extra=" of the real output (default ``2*(m-1)`` for an input of length m)",
    ),
)

ihfft: _Transform1D = _transform_1d(
    "ihfft",
    False,
    _doc_text(
        "Inverse of :func:`hfft`: the one-sided inverse transform of a real signal (``torch.fft.ihfft``).",
        _PARAMS_1D,
        "torch.Tensor or ComplexTensor\n    ``n // 2 + 1`` complex coefficients along ``dim``.",
    ),
)

# --------------------------------------------------------------------------- two-dimensional

_LAST_TWO = "(-2, -1)"
_HALF_S = " (the last entry is the real output length, default ``2*(m-1)``)"


fft2: _TransformND = _transform_nd(
    "fft2",
    False,
    (-2, -1),
    _doc_text(
        "Two-dimensional Fourier transform (``torch.fft.fft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO
    ),
)

ifft2: _TransformND = _transform_nd(
    "ifft2",
    False,
    (-2, -1),
    _doc_text("Inverse of :func:`fft2` (``torch.fft.ifft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO),
)

rfft2: _TransformND = _transform_nd(
    "rfft2",
    False,
    (-2, -1),
    _doc_text(
        "Two-dimensional FFT of a real input (``torch.fft.rfft2``).",
        _PARAMS_ND,
        _COMPLEX_RESULT,
        "",
        _LAST_TWO,
    ),
)

irfft2: _RealTransformND = _transform_nd(
    "irfft2",
    True,
    (-2, -1),
    _doc_text(
        "Inverse of :func:`rfft2` (``torch.fft.irfft2``).", _PARAMS_ND, _REAL_RESULT, _HALF_S, _LAST_TWO
    ),
)

hfft2: _RealTransformND = _transform_nd(
    "hfft2",
    True,
    (-2, -1),
    _doc_text(
        "Two-dimensional transform of a Hermitian-symmetric input (``torch.fft.hfft2``).",
        _PARAMS_ND,
        _REAL_RESULT,
        _HALF_S,
        _LAST_TWO,
    ),
)

ihfft2: _TransformND = _transform_nd(
    "ihfft2",
    False,
    (-2, -1),
    _doc_text("Inverse of :func:`hfft2` (``torch.fft.ihfft2``).", _PARAMS_ND, _COMPLEX_RESULT, "", _LAST_TWO),
)

# --------------------------------------------------------------------------- n-dimensional

_ALL_OR_S = "None (all dimensions, or the last ``len(s)`` when ``s`` is given)"


fftn: _TransformND = _transform_nd(
    "fftn",
    False,
    None,
    _doc_text(
        "N-dimensional Fourier transform (``torch.fft.fftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S
    ),
)

ifftn: _TransformND = _transform_nd(
    "ifftn",
    False,
    None,
    _doc_text("Inverse of :func:`fftn` (``torch.fft.ifftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S),
)

rfftn: _TransformND = _transform_nd(
    "rfftn",
    False,
    None,
    _doc_text(
        "N-dimensional FFT of a real input (``torch.fft.rfftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S
    ),
)

irfftn: _RealTransformND = _transform_nd(
    "irfftn",
    True,
    None,
    _doc_text(
        "Inverse of :func:`rfftn` (``torch.fft.irfftn``).", _PARAMS_ND, _REAL_RESULT, _HALF_S, _ALL_OR_S
    ),
)

hfftn: _RealTransformND = _transform_nd(
    "hfftn",
    True,
    None,
    _doc_text(
        "N-dimensional transform of a Hermitian-symmetric input (``torch.fft.hfftn``).",
        _PARAMS_ND,
        _REAL_RESULT,
        _HALF_S,
        _ALL_OR_S,
    ),
)

ihfftn: _TransformND = _transform_nd(
    "ihfftn",
    False,
    None,
    _doc_text("Inverse of :func:`hfftn` (``torch.fft.ihfftn``).", _PARAMS_ND, _COMPLEX_RESULT, "", _ALL_OR_S),
)

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
