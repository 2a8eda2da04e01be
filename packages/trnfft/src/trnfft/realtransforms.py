"""Discrete cosine and sine transforms (types 1-4) with ``scipy.fft``'s arguments, on torch tensors.

``dct``, ``idct``, ``dst``, ``idst`` and their n-D forms ``dctn``, ``idctn``, ``dstn``, ``idstn``
take scipy.fft's arguments with scipy.fft's meaning — ``type``, ``n`` (zero-pad or crop), ``axis``,
``norm`` (``None``/``"backward"``, ``"forward"``, ``"ortho"``), ``orthogonalize`` (default: true
exactly when ``norm="ortho"``), ``s``/``axes`` — and torch's ``dim`` as another name for
``axis``/``axes``. ``overwrite_x`` and ``workers`` are accepted for drop-in compatibility and have no
effect (the input is never written; torch's intra-op threads do the work).

Results have the input's precision and device (float32 stays float32, float64 stays float64);
integer and bool inputs are promoted to torch's default float dtype, as ``torch.fft`` promotes them.
A complex input has its real and imaginary parts transformed separately, as scipy.fft does; a
:class:`~trnfft.ComplexTensor` input gives a ``ComplexTensor``. Every function is differentiable.

The exact definitions, algorithms and scalings are in the trnfft guide (*DCT and DST*)
and :mod:`trnfft._r2r`. Each function is a trncore operation: the PyTorch route computes with
``torch.fft`` (FFT-based algorithms, ``O(N log N)``), the NKI route with the stage kernel.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from trnfft import _ops, _validate
from trnfft.complex_tensor import ComplexTensor, TensorLike
from trnfft.errors import FFTArgumentError

__all__ = ["dct", "dctn", "dst", "dstn", "idct", "idctn", "idst", "idstn"]

builtins_type = type  # the functions' argument ``type`` (scipy's name) shadows the builtin

_NORMS = (None, "backward", "forward", "ortho")


def _input(fn: str, x: Any) -> tuple[torch.Tensor, bool]:
    if isinstance(x, ComplexTensor):
        return x.to_torch(), True
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x must be a torch.Tensor or trnfft.ComplexTensor, got {type(x).__name__}")
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(torch.get_default_dtype())  # integers and bools, as torch.fft promotes them
    return x, False


def _check_common(fn: str, type: Any, norm: Any, orthogonalize: Any, workers: Any) -> None:
    if isinstance(type, bool) or not isinstance(type, int):
        raise TypeError(f"{fn}: type must be an int (1, 2, 3 or 4), got {builtins_type(type).__name__}")
    if type not in (1, 2, 3, 4):
        raise FFTArgumentError(f"{fn}: type must be 1, 2, 3 or 4, got {type}")
    if norm not in _NORMS:
        raise FFTArgumentError(f"{fn}: norm must be None, 'backward', 'forward' or 'ortho', got {norm!r}")
    if orthogonalize is not None and not isinstance(orthogonalize, bool):
        raise TypeError(
            f"{fn}: orthogonalize must be None or a bool, got {builtins_type(orthogonalize).__name__}"
        )
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"{fn}: workers must be None or an int, got {builtins_type(workers).__name__}")


def _length_ok(fn: str, kind: str, type: int, length: int, where: str) -> None:
    if length < 1:
        raise FFTArgumentError(f"{fn}: the transform length {where} is {length}; it must be positive")
    if kind == "dct" and type == 1 and length < 2:
        raise FFTArgumentError(f"{fn}: DCT-I needs at least 2 points, the length {where} is {length}")


def _pick_axis(fn: str, axis: Any, dim: Any) -> Any:
    if dim is None:
        return axis
    if axis != -1 and axis != dim:
        raise FFTArgumentError(f"{fn}: axis={axis!r} and dim={dim!r} disagree; give one of them")
    return dim


def _r2r_1d(
    fn: str,
    kind: str,
    op: Any,
    x: Any,
    type: Any,
    n: Any,
    axis: Any,
    norm: Any,
    orthogonalize: Any,
    workers: Any,
) -> TensorLike:
    t, was_ct = _input(fn, x)
    _check_common(fn, type, norm, orthogonalize, workers)
    axis = _validate.check_dim(fn, t.dim(), axis, "axis")
    if n is not None:
        if isinstance(n, bool) or _as_index(n) is None:
            raise TypeError(f"{fn}: n must be an int or None, got {builtins_type(n).__name__}")
        n = operator.index(n)
    length = t.shape[axis] if n is None else n
    _length_ok(fn, kind, type, length, f"along axis {axis}")
    y = op(t, type, n, axis, norm, orthogonalize)
    return ComplexTensor.from_torch(y) if was_ct and y.is_complex() else y


def _as_index(value: Any) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


def _normal_axes(fn: str, ndim: int, s: Any, axes: Any) -> tuple[list[int], list[int] | None]:
    """scipy's rules: ``axes`` default to the last ``len(s)`` dims, or all dims without ``s``."""
    if s is not None:
        if isinstance(s, (str, bytes)) or not isinstance(s, Sequence):
            raise TypeError(f"{fn}: s must be a sequence of ints or None, got {builtins_type(s).__name__}")
        sizes = []
        for i, v in enumerate(s):
            if isinstance(v, bool) or _as_index(v) is None:
                raise TypeError(f"{fn}: s[{i}] must be an int, got {builtins_type(v).__name__}")
            sizes.append(operator.index(v))
    if axes is None:
        if s is None:
            dims = list(range(ndim))
        else:
            if len(sizes) > ndim:
                raise FFTArgumentError(
                    f"{fn}: s has {len(sizes)} entries but the input has {ndim} dimensions"
                )
            dims = list(range(ndim - len(sizes), ndim))
    else:
        seq = [axes] if _as_index(axes) is not None and not isinstance(axes, Sequence) else axes
        if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence):
            raise TypeError(
                f"{fn}: axes must be an int or a sequence of ints, got {builtins_type(axes).__name__}"
            )
        dims = [_validate.check_dim(fn, ndim, a, "axes") for a in seq]
        if len(set(dims)) != len(dims):
            raise FFTArgumentError(f"{fn}: axes must not repeat a dimension, got {tuple(seq)}")
    if s is None:
        return dims, None
    if len(sizes) != len(dims):
        raise FFTArgumentError(
            f"{fn}: s has {len(sizes)} entries but axes names {len(dims)}; they must match"
        )
    return dims, sizes


def _r2r_nd(
    fn: str,
    kind: str,
    op: Any,
    x: Any,
    type: Any,
    s: Any,
    axes: Any,
    norm: Any,
    orthogonalize: Any,
    workers: Any,
) -> TensorLike:
    t, was_ct = _input(fn, x)
    _check_common(fn, type, norm, orthogonalize, workers)
    dims, sizes = _normal_axes(fn, t.dim(), s, axes)
    for i, d in enumerate(dims):
        given = sizes is not None and sizes[i] != -1
        _length_ok(fn, kind, type, sizes[i] if given else t.shape[d], f"along axis {d}")  # type: ignore[index]
    y = op(t, type, sizes, dims, norm, orthogonalize)
    return ComplexTensor.from_torch(y) if was_ct and y.is_complex() else y


def dct(
    x: TensorLike,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    orthogonalize: bool | None = None,
    *,
    dim: int | None = None,
) -> TensorLike:
    """Discrete cosine transform of type 1-4 along one axis (``scipy.fft.dct``).

    Parameters
    ----------
    x : torch.Tensor or ComplexTensor
        Input on any device: float32 or float64 (complex: real and imaginary parts transformed
        separately; integers promoted to the default float dtype).
    type : {1, 2, 3, 4}, default 2
        Transform type.
    n : int, optional
        Transform length; ``x`` is zero-padded or cropped along ``axis`` to it.
    axis : int, default -1
        Axis to transform (``dim`` is the same argument under torch's name).
    norm : {None, "backward", "forward", "ortho"}, optional
        Normalisation, as in ``scipy.fft``.
    overwrite_x : bool, default False
        Accepted for scipy compatibility; the input is never written.
    workers : int, optional
        Accepted for scipy compatibility; torch's intra-op threads are used.
    orthogonalize : bool, optional
        Use the orthogonalised variant (boundary weights); default ``norm == "ortho"``.
    dim : int, optional
        torch's name for ``axis``.

    Returns
    -------
    torch.Tensor or ComplexTensor
        Same dtype and device as ``x`` (a ``ComplexTensor`` for a ``ComplexTensor`` input).

    Raises
    ------
    FFTArgumentError
        ``type`` not 1-4, a non-positive length (DCT-I: fewer than 2 points), a bad ``norm``.
    FFTDimError
        ``axis`` out of range.
    FFTTypeError, TypeError
        An unsupported dtype (float16/bfloat16 on the PyTorch route) or an argument of the wrong type.
    """
    return _r2r_1d(
        "dct", "dct", _ops.dct, x, type, n, _pick_axis("dct", axis, dim), norm, orthogonalize, workers
    )


def idct(
    x: TensorLike,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    orthogonalize: bool | None = None,
    *,
    dim: int | None = None,
) -> TensorLike:
    """Inverse of :func:`dct` of the same type (``scipy.fft.idct``).

    Parameters, returns and errors as :func:`dct`. ``norm``: ``None``/``"backward"`` scale the
    inverse by ``1/M``, ``"forward"`` leaves it unscaled and ``"ortho"`` scales by ``1/sqrt(M)``,
    so that it undoes the forward transform of the same ``norm`` and ``orthogonalize``.
    """
    return _r2r_1d(
        "idct", "dct", _ops.idct, x, type, n, _pick_axis("idct", axis, dim), norm, orthogonalize, workers
    )


def dst(
    x: TensorLike,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    orthogonalize: bool | None = None,
    *,
    dim: int | None = None,
) -> TensorLike:
    """Discrete sine transform of type 1-4 along one axis (``scipy.fft.dst``).

    Parameters, returns and errors as :func:`dct`.
    """
    return _r2r_1d(
        "dst", "dst", _ops.dst, x, type, n, _pick_axis("dst", axis, dim), norm, orthogonalize, workers
    )


def idst(
    x: TensorLike,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    orthogonalize: bool | None = None,
    *,
    dim: int | None = None,
) -> TensorLike:
    """Inverse of :func:`dst` of the same type (``scipy.fft.idst``).

    Parameters, returns and errors as :func:`dct`. ``norm``: ``None``/``"backward"`` scale the
    inverse by ``1/M``, ``"forward"`` leaves it unscaled and ``"ortho"`` scales by ``1/sqrt(M)``,
    so that it undoes the forward transform of the same ``norm`` and ``orthogonalize``.
    """
    return _r2r_1d(
        "idst", "dst", _ops.idst, x, type, n, _pick_axis("idst", axis, dim), norm, orthogonalize, workers
    )


def _pick_axes(fn: str, axes: Any, dim: Any) -> Any:
    if dim is None:
        return axes
    if axes is not None and axes != dim:
        raise FFTArgumentError(f"{fn}: axes={axes!r} and dim={dim!r} disagree; give one of them")
    return dim


def dctn(
    x: TensorLike,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    *,
    orthogonalize: bool | None = None,
    dim: int | Sequence[int] | None = None,
) -> TensorLike:
    """N-dimensional discrete cosine transform (``scipy.fft.dctn``).

    Parameters
    ----------
    x : torch.Tensor or ComplexTensor
        Input on any device: float32 or float64 (complex: real and imaginary parts transformed
        separately; integers promoted to the default float dtype).
    type : {1, 2, 3, 4}, default 2
        Transform type (the same along every axis).
    s : sequence of int, optional
        Shape of the transformed axes (zero-pad or crop; ``-1`` keeps an axis's length).
    axes : int or sequence of int, optional
        Axes to transform: default the last ``len(s)`` axes, or every axis when ``s`` is not given
        (``dim`` is the same argument under torch's name).
    norm : {None, "backward", "forward", "ortho"}, optional
        Normalisation, as in ``scipy.fft``.
    overwrite_x : bool, default False
        Accepted for scipy compatibility; the input is never written.
    workers : int, optional
        Accepted for scipy compatibility; torch's intra-op threads are used.
    orthogonalize : bool, optional
        Use the orthogonalised variant (boundary weights); default ``norm == "ortho"``.
    dim : int or sequence of int, optional
        torch's name for ``axes``.

    Returns
    -------
    torch.Tensor or ComplexTensor
        Same dtype and device as ``x`` (a ``ComplexTensor`` for a ``ComplexTensor`` input).

    Raises
    ------
    FFTArgumentError
        ``type`` not 1-4, a non-positive length (DCT-I: fewer than 2 points), repeated axes, ``s`` and
        ``axes`` of different lengths, a bad ``norm``.
    FFTDimError
        An axis out of range.
    FFTTypeError, TypeError
        An unsupported dtype or an argument of the wrong type.
    """
    return _r2r_nd(
        "dctn", "dct", _ops.dctn, x, type, s, _pick_axes("dctn", axes, dim), norm, orthogonalize, workers
    )


def idctn(
    x: TensorLike,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    *,
    orthogonalize: bool | None = None,
    dim: int | Sequence[int] | None = None,
) -> TensorLike:
    """Inverse of :func:`dctn` of the same type (``scipy.fft.idctn``).

    Parameters, returns and errors as :func:`dctn`. ``norm``: ``None``/``"backward"`` scale the
    inverse by ``1/M``, ``"forward"`` leaves it unscaled and ``"ortho"`` scales by ``1/sqrt(M)``,
    so that it undoes the forward transform of the same ``norm`` and ``orthogonalize``.
    """
    return _r2r_nd(
        "idctn", "dct", _ops.idctn, x, type, s, _pick_axes("idctn", axes, dim), norm, orthogonalize, workers
    )


def dstn(
    x: TensorLike,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    *,
    orthogonalize: bool | None = None,
    dim: int | Sequence[int] | None = None,
) -> TensorLike:
    """N-dimensional discrete sine transform (``scipy.fft.dstn``).

    Parameters, returns and errors as :func:`dctn`.
    """
    return _r2r_nd(
        "dstn", "dst", _ops.dstn, x, type, s, _pick_axes("dstn", axes, dim), norm, orthogonalize, workers
    )


def idstn(
    x: TensorLike,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
    norm: str | None = None,
    overwrite_x: bool = False,
    workers: int | None = None,
    *,
    orthogonalize: bool | None = None,
    dim: int | Sequence[int] | None = None,
) -> TensorLike:
    """Inverse of :func:`dstn` of the same type (``scipy.fft.idstn``).

    Parameters, returns and errors as :func:`dctn`. ``norm``: ``None``/``"backward"`` scale the
    inverse by ``1/M``, ``"forward"`` leaves it unscaled and ``"ortho"`` scales by ``1/sqrt(M)``,
    so that it undoes the forward transform of the same ``norm`` and ``orthogonalize``.
    """
    return _r2r_nd(
        "idstn", "dst", _ops.idstn, x, type, s, _pick_axes("idstn", axes, dim), norm, orthogonalize, workers
    )
