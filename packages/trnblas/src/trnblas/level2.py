"""BLAS level 2: matrix-vector products, triangular solves and rank-1 updates.

Argument names, defaults and the triangles read follow ``scipy.linalg.blas`` (``dgemv``,
``dsymv``, ``dtrmv``, ``dtrsv``, ``dger``, ``zgerc``). Vectors are 1-D tensors: where SciPy takes
``offx``/``incx`` strides, pass a view instead (``x[off::inc]``). Every function returns a new
tensor on the operands' device with their dtype; inputs are never written.
"""

from __future__ import annotations

import torch

from trnblas import _validate as v
from trnblas._flags import (
    diag_flag,
    lower_flag,
    op,
    overwrite_flag,
    symmetric_from_triangle,
    trans_flag,
    triangle,
)
from trnblas._pytorch import scaled_or_zeros

__all__ = ["gemv", "ger", "gerc", "symv", "trmv", "trsv"]


def _matvec(
    alpha: float | complex,
    matrix: torch.Tensor,
    x: torch.Tensor,
    beta: float | complex,
    y: torch.Tensor | None,
) -> torch.Tensor:
    """``alpha * matrix @ x + beta * y``; ``y`` unread when ``beta`` is 0, ``matrix`` when ``alpha`` is."""
    if alpha == 0:
        return scaled_or_zeros(beta, y, (matrix.shape[0],), x)
    if y is None or beta == 0:
        out = torch.mv(matrix, x)
        return out if alpha == 1 else out.mul_(alpha)
    return torch.addmv(y, matrix, x, beta=beta, alpha=alpha)


def _optional_y(y: object, length: int, x: torch.Tensor, why: str) -> torch.Tensor | None:
    if y is None:
        return None
    y = v.tensor("y", y, 1)
    v.same_kind(x=x, y=y)
    v.shape("y", y, (length,), why)
    return y


def gemv(
    alpha: float | complex,
    a: torch.Tensor,
    x: torch.Tensor,
    beta: float | complex = 0.0,
    y: torch.Tensor | None = None,
    trans: int = 0,
    overwrite_y: bool = False,
) -> torch.Tensor:
    """General matrix-vector product ``alpha * op(a) @ x + beta * y``, as ``scipy.linalg.blas.dgemv``.

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the product and of ``y`` (``y`` is not read when ``beta`` is 0).
    a : torch.Tensor
        ``(m, n)`` matrix.
    x : torch.Tensor
        Vector of length ``n`` (``trans=0``) or ``m`` (``trans`` 1 or 2).
    y : torch.Tensor, optional
        Vector of the result's length; absent means zero.
    trans : {0, 1, 2}, optional
        ``op(a)`` is ``a``, ``aᵀ`` or ``aᴴ``.
    overwrite_y : bool, optional
        Accepted for SciPy compatibility and ignored.

    Returns
    -------
    torch.Tensor
        A new vector of length ``m`` (``trans=0``) or ``n``.
    """
    a = v.tensor("a", a, 2)
    x = v.tensor("x", x, 1)
    v.same_kind(a=a, x=x)
    t = trans_flag("trans", trans)
    overwrite_flag("overwrite_y", overwrite_y)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.scalar("beta", beta, a.dtype)
    opa = op(a, t)
    v.shape("x", x, (opa.shape[1],), f"columns of op(a), a is {tuple(a.shape)} with trans={t}")
    y_ = _optional_y(y, opa.shape[0], x, "rows of op(a)")
    return _matvec(alpha_, opa, x, beta_, y_)


def symv(
    alpha: float | complex,
    a: torch.Tensor,
    x: torch.Tensor,
    beta: float | complex = 0.0,
    y: torch.Tensor | None = None,
    lower: int = 0,
    overwrite_y: bool = False,
) -> torch.Tensor:
    """Symmetric matrix-vector product ``alpha * a @ x + beta * y``, as ``scipy.linalg.blas.dsymv``.

    Only the ``lower`` (1) or upper (0) triangle of the symmetric ``a`` is read. Complex data is
    taken as symmetric, not Hermitian (as LAPACK's ``csymv``; SciPy's BLAS has only ``chemv``).

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the product and of ``y`` (``y`` is not read when ``beta`` is 0).
    a : torch.Tensor
        ``(n, n)`` matrix.
    x : torch.Tensor
        Vector of length ``n``.
    y : torch.Tensor, optional
        Vector of length ``n``; absent means zero.
    lower : {0, 1}, optional
        Triangle of ``a`` that is read.
    overwrite_y : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new vector of length ``n``.
    """
    a = v.tensor("a", a, 2)
    x = v.tensor("x", x, 1)
    v.same_kind(a=a, x=x)
    low = lower_flag(lower)
    overwrite_flag("overwrite_y", overwrite_y)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.scalar("beta", beta, a.dtype)
    n = v.square("a", a)
    v.shape("x", x, (n,), "the order of a")
    y_ = _optional_y(y, n, x, "the order of a")
    return _matvec(alpha_, symmetric_from_triangle(a, low), x, beta_, y_)


def _triangular_vector_checks(
    a: object, x: object, lower: object, trans: object, diag: object, overwrite_x: object
) -> tuple[torch.Tensor, torch.Tensor, bool, int, bool]:
    a = v.tensor("a", a, 2)
    x = v.tensor("x", x, 1)
    v.same_kind(a=a, x=x)
    low, t, unit = lower_flag(lower), trans_flag("trans", trans), diag_flag(diag)
    overwrite_flag("overwrite_x", overwrite_x)
    n = v.square("a", a)
    v.shape("x", x, (n,), "the order of a")
    return a, x, low, t, unit


def trmv(
    a: torch.Tensor,
    x: torch.Tensor,
    lower: int = 0,
    trans: int = 0,
    diag: int = 0,
    overwrite_x: bool = False,
) -> torch.Tensor:
    """Triangular matrix-vector product ``op(a) @ x``, as ``scipy.linalg.blas.dtrmv``.

    Parameters
    ----------
    a : torch.Tensor
        ``(n, n)`` matrix of which only the ``lower`` (1) or upper (0) triangle is read.
    x : torch.Tensor
        Vector of length ``n``.
    lower : {0, 1}, optional
        Triangle of ``a`` that is read.
    trans : {0, 1, 2}, optional
        ``op(a)`` is ``a``, ``aᵀ`` or ``aᴴ``.
    diag : {0, 1}, optional
        1: the diagonal of ``a`` is taken as ones and not read.
    overwrite_x : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new vector of length ``n``.
    """
    a, x, low, t, unit = _triangular_vector_checks(a, x, lower, trans, diag, overwrite_x)
    return torch.mv(op(triangle(a, low, unit), t), x)


def trsv(
    a: torch.Tensor,
    x: torch.Tensor,
    lower: int = 0,
    trans: int = 0,
    diag: int = 0,
    overwrite_x: bool = False,
) -> torch.Tensor:
    """Triangular solve ``op(a) @ result = x``, as ``scipy.linalg.blas.dtrsv``.

    Parameters
    ----------
    a : torch.Tensor
        ``(n, n)`` matrix of which only the ``lower`` (1) or upper (0) triangle is read.
    x : torch.Tensor
        Right-hand side of length ``n``.
    lower : {0, 1}, optional
        Triangle of ``a`` that is read.
    trans : {0, 1, 2}, optional
        ``op(a)`` is ``a``, ``aᵀ`` or ``aᴴ``.
    diag : {0, 1}, optional
        1: the diagonal of ``a`` is taken as ones and not read.
    overwrite_x : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new vector of length ``n``. A singular ``a`` gives inf/NaN as in BLAS (no check).
    """
    a, x, low, t, unit = _triangular_vector_checks(a, x, lower, trans, diag, overwrite_x)
    if x.numel() == 0:
        return torch.zeros_like(x, memory_format=torch.contiguous_format)
    upper = low if t else not low  # op(a) of a lower triangle is upper
    solution = torch.linalg.solve_triangular(op(a, t), x.unsqueeze(-1), upper=upper, unitriangular=unit)
    return solution.squeeze(-1)


def _rank_one(
    alpha: object, x: object, y: object, a: object, conjugate: bool, overwrites: tuple[object, ...]
) -> torch.Tensor:
    x = v.tensor("x", x, 1)
    y = v.tensor("y", y, 1)
    v.same_kind(x=x, y=y)
    for name, flag in zip(("overwrite_x", "overwrite_y", "overwrite_a"), overwrites):
        overwrite_flag(name, flag)
    alpha_ = v.scalar("alpha", alpha, x.dtype)
    shape = (x.shape[0], y.shape[0])
    if a is not None:
        a = v.tensor("a", a, 2)
        v.same_kind(x=x, a=a)
        v.shape("a", a, shape, "len(x) by len(y)")
    yy = y.conj() if conjugate else y
    if alpha_ == 0:
        return scaled_or_zeros(1.0, a, shape, x)
    if a is None:
        out = torch.outer(x, yy)
        return out if alpha_ == 1 else out.mul_(alpha_)
    return torch.addr(a, x, yy, alpha=alpha_)


def ger(
    alpha: float | complex,
    x: torch.Tensor,
    y: torch.Tensor,
    a: torch.Tensor | None = None,
    overwrite_x: bool = False,
    overwrite_y: bool = False,
    overwrite_a: bool = False,
) -> torch.Tensor:
    """Rank-1 update ``a + alpha * x yᵀ``, as ``scipy.linalg.blas.dger`` (``zgeru`` for complex).

    ``y`` is not conjugated; :func:`gerc` is the conjugated update.

    Parameters
    ----------
    alpha : float or complex
        Scale of the outer product.
    x, y : torch.Tensor
        Vectors of lengths ``m`` and ``n``.
    a : torch.Tensor, optional
        ``(m, n)`` matrix to update; absent means zero.
    overwrite_x, overwrite_y, overwrite_a : bool, optional
        Accepted for SciPy compatibility and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor.
    """
    return _rank_one(alpha, x, y, a, False, (overwrite_x, overwrite_y, overwrite_a))


def gerc(
    alpha: float | complex,
    x: torch.Tensor,
    y: torch.Tensor,
    a: torch.Tensor | None = None,
    overwrite_x: bool = False,
    overwrite_y: bool = False,
    overwrite_a: bool = False,
) -> torch.Tensor:
    """Conjugated rank-1 update ``a + alpha * x yᴴ``, as ``scipy.linalg.blas.zgerc``.

    For real data it equals :func:`ger`.

    Parameters
    ----------
    alpha : float or complex
        Scale of the outer product.
    x, y : torch.Tensor
        Vectors of lengths ``m`` and ``n``.
    a : torch.Tensor, optional
        ``(m, n)`` matrix to update; absent means zero.
    overwrite_x, overwrite_y, overwrite_a : bool, optional
        Accepted for SciPy compatibility and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor.
    """
    return _rank_one(alpha, x, y, a, True, (overwrite_x, overwrite_y, overwrite_a))
