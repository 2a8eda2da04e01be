"""BLAS level 1: vector operations.

Names and argument order follow ``scipy.linalg.blas`` (``daxpy``, ``ddot``, ``dnrm2``, ``dscal``,
``dasum``, ``idamax``, ``dswap``, ``dcopy``, ``drot``). Vectors are 1-D tensors; where SciPy takes
``n``/``offx``/``incx``, pass a view instead (``x[off:off + n * inc:inc]``). Results are new
tensors on the input's device; reductions (``dot``, ``nrm2``, ``asum``, ``iamax``) return 0-dim
tensors rather than Python numbers so that they stay on the device without a synchronisation.
"""

from __future__ import annotations

import torch

from trnblas import _validate as v
from trnblas._flags import overwrite_flag

__all__ = ["asum", "axpy", "copy", "dot", "dotc", "iamax", "nrm2", "rot", "scal", "swap"]


def _vector_pair(x: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
    x = v.tensor("x", x, 1)
    y = v.tensor("y", y, 1)
    v.same_kind(x=x, y=y)
    v.shape("y", y, tuple(x.shape), "the length of x")
    return x, y


def axpy(x: torch.Tensor, y: torch.Tensor, a: float | complex = 1.0) -> torch.Tensor:
    """``a * x + y``, as ``scipy.linalg.blas.daxpy``.

    Parameters
    ----------
    x, y : torch.Tensor
        Vectors of one length.
    a : float or complex, optional
        Scale of ``x``. When 0, ``x`` is not read (the result is a copy of ``y``), as in BLAS.

    Returns
    -------
    torch.Tensor
        A new vector; ``y`` is not written.
    """
    v.not_a_scalar_first("axpy", "x", x)
    x, y = _vector_pair(x, y)
    a_ = v.scalar("a", a, x.dtype)
    if a_ == 0:
        return y.clone()
    return torch.add(y, x, alpha=a_)


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Dot product ``Σ x_i y_i`` without conjugation, as ``ddot`` (``zdotu`` for complex data).

    Parameters
    ----------
    x, y : torch.Tensor
        Vectors of one length (empty gives 0).

    Returns
    -------
    torch.Tensor
        A 0-dim tensor of the inputs' dtype and device.
    """
    x, y = _vector_pair(x, y)
    return torch.dot(x, y)


def dotc(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Conjugated dot product ``Σ conj(x_i) y_i``, as ``zdotc`` (equal to :func:`dot` for real data).

    Parameters
    ----------
    x, y : torch.Tensor
        Vectors of one length (empty gives 0).

    Returns
    -------
    torch.Tensor
        A 0-dim tensor of the inputs' dtype and device.
    """
    x, y = _vector_pair(x, y)
    return torch.vdot(x, y)


def nrm2(x: torch.Tensor) -> torch.Tensor:
    """Euclidean norm ``sqrt(Σ |x_i|²)``, as ``dnrm2``/``dznrm2``, without overflow or underflow.

    The vector is scaled by its largest magnitude first, as BLAS does, so that 1e200 or 1e-200
    entries give their true norm instead of inf or 0.

    Parameters
    ----------
    x : torch.Tensor
        Vector (empty gives 0).

    Returns
    -------
    torch.Tensor
        A real 0-dim tensor (float32 for float32/complex64, float64 otherwise) on ``x``'s device.
    """
    x = v.tensor("x", x, 1)
    real = x.real.dtype if x.is_complex() else x.dtype
    if x.numel() == 0:
        return torch.zeros((), dtype=real, device=x.device)
    scale = x.abs().amax()
    # Scale only by a positive finite maximum: a zero vector stays 0, inf/NaN stay inf/NaN.
    usable = (scale > 0) & torch.isfinite(scale)
    scale = torch.where(usable, scale, torch.ones((), dtype=real, device=x.device))
    return torch.linalg.vector_norm(x / scale) * scale


def scal(a: float | complex, x: torch.Tensor) -> torch.Tensor:
    """``a * x``, as ``scipy.linalg.blas.dscal`` (``zdscal``/``zscal`` for complex data).

    Parameters
    ----------
    a : float or complex
        Scale (complex only for complex ``x``).
    x : torch.Tensor
        Vector.

    Returns
    -------
    torch.Tensor
        A new vector; ``x`` is not written.
    """
    x = v.tensor("x", x, 1)
    a_ = v.scalar("a", a, x.dtype)
    return torch.mul(x, a_)


def _magnitudes(x: torch.Tensor) -> torch.Tensor:
    """|x_i| for real data; |Re x_i| + |Im x_i| for complex data (the BLAS ``asum``/``iamax`` measure)."""
    if x.is_complex():
        return x.real.abs() + x.imag.abs()
    return x.abs()


def asum(x: torch.Tensor) -> torch.Tensor:
    """Sum of magnitudes, as ``dasum`` (``dzasum``: ``Σ |Re x_i| + |Im x_i|`` for complex data).

    Parameters
    ----------
    x : torch.Tensor
        Vector (empty gives 0).

    Returns
    -------
    torch.Tensor
        A real 0-dim tensor on ``x``'s device.
    """
    x = v.tensor("x", x, 1)
    return _magnitudes(x).sum()


def iamax(x: torch.Tensor) -> torch.Tensor:
    """0-based index of the first entry of largest magnitude, as ``scipy.linalg.blas.idamax``.

    Magnitude is ``|x_i|`` for real and ``|Re x_i| + |Im x_i|`` for complex data (the BLAS measure).
    A NaN counts as the largest (the first NaN's index is returned). An empty vector gives -1:
    BLAS returns 0 in its 1-based numbering, which SciPy's 0-based numbering would make -1.

    Parameters
    ----------
    x : torch.Tensor
        Vector.

    Returns
    -------
    torch.Tensor
        A 0-dim int64 tensor on ``x``'s device.
    """
    x = v.tensor("x", x, 1)
    if x.numel() == 0:
        return torch.full((), -1, dtype=torch.int64, device=x.device)
    return torch.argmax(_magnitudes(x))


def swap(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair ``(y, x)`` as new tensors, as ``scipy.linalg.blas.dswap`` returns it.

    Parameters
    ----------
    x, y : torch.Tensor
        Vectors of one length, dtype and device.

    Returns
    -------
    tuple of torch.Tensor
        New copies ``(y, x)``; neither input is written.
    """
    x, y = _vector_pair(x, y)
    return y.clone(), x.clone()


def copy(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    """A copy of ``x``, as ``scipy.linalg.blas.dcopy``.

    Parameters
    ----------
    x : torch.Tensor
        Vector to copy.
    y : torch.Tensor, optional
        The destination SciPy requires; here it is only checked (same length, dtype and device as
        ``x``) and never written.

    Returns
    -------
    torch.Tensor
        A new vector equal to ``x``.
    """
    if y is not None:
        x, _ = _vector_pair(x, y)
    x = v.tensor("x", x, 1)
    return x.clone()


def rot(
    x: torch.Tensor,
    y: torch.Tensor,
    c: float,
    s: float,
    overwrite_x: bool = False,
    overwrite_y: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plane rotation ``(c x + s y, c y − s x)``, as ``drot`` (``zdrot``/``csrot`` for complex data).

    Parameters
    ----------
    x, y : torch.Tensor
        Vectors of one length.
    c, s : float
        Real cosine and sine of the rotation.
    overwrite_x, overwrite_y : bool, optional
        Accepted for SciPy compatibility and ignored.

    Returns
    -------
    tuple of torch.Tensor
        The rotated ``(x, y)`` as new tensors.
    """
    x, y = _vector_pair(x, y)
    overwrite_flag("overwrite_x", overwrite_x)
    overwrite_flag("overwrite_y", overwrite_y)
    c_, s_ = v.real_scalar("c", c), v.real_scalar("s", s)
    return torch.add(x * c_, y, alpha=s_), torch.add(y * c_, x, alpha=-s_)
