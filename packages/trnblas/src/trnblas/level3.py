"""BLAS level 3: matrix-matrix products, rank-k updates and triangular solves.

Argument names, defaults and the triangles read and written follow ``scipy.linalg.blas``
(``dgemm``, ``dsymm``, ``dsyrk``, ``dsyr2k``, ``dtrsm``, ``dtrmm``). Every function returns a new
tensor on the operands' device with their dtype; ``overwrite_*`` arguments are accepted for
compatibility and ignored (inputs are never written).
"""

from __future__ import annotations

from typing import Any

import torch

from trnblas import _ops
from trnblas import _validate as v
from trnblas._flags import (
    diag_flag,
    lower_flag,
    op,
    overwrite_flag,
    side_flag,
    trans_flag,
)

__all__ = ["batched_gemm", "gemm", "symm", "syr2k", "syrk", "trmm", "trsm"]


def _optional_c(c: object, expected: tuple[int, ...], why: str, **kind: torch.Tensor) -> torch.Tensor | None:
    if c is None:
        return None
    c = v.tensor("c", c, 2, dtypes=v.GEMM_DTYPES)
    v.same_kind(**kind, c=c)
    v.shape("c", c, expected, why)
    return c


def gemm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """General matrix product ``alpha * op(a) @ op(b) + beta * c``, as ``scipy.linalg.blas.dgemm``.

    The workhorse of the library: on Trainium it is the Tensor Engine's operation, and ``symm``,
    ``syrk``, ``syr2k`` build on it.

    Parameters
    ----------
    alpha : float or complex
        Scale of the product (complex only for complex operands).
    a, b : torch.Tensor
        Matrices with ``op(a)`` of shape ``(m, k)`` and ``op(b)`` of shape ``(k, n)``. float32,
        float64, complex64, complex128, and also bfloat16/float16 (the Tensor Engine's inputs).
    beta : float or complex, optional
        Scale of ``c``. When 0, ``c`` is not read (NaN in it does not propagate), as in BLAS.
    c : torch.Tensor, optional
        ``(m, n)`` matrix added to the product; absent means zero.
    trans_a, trans_b : {0, 1, 2}, optional
        ``op(x)`` is ``x`` (0), ``xᵀ`` (1) or ``xᴴ`` (2, the same as 1 for real data). Transposes are
        views, never copies.
    overwrite_c : bool, optional
        Accepted for SciPy compatibility and ignored: ``c`` is never written.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor with the operands' dtype and device.

    Raises
    ------
    TypeError
        Non-tensor, integer or mixed-dtype operands, or a complex scalar with real operands.
    ValueError
        Operands that are not matrices, on different devices, or with mismatched shapes; a flag
        outside its allowed values.
    """
    a = v.tensor("a", a, 2, dtypes=v.GEMM_DTYPES)
    b = v.tensor("b", b, 2, dtypes=v.GEMM_DTYPES)
    v.same_kind(a=a, b=b)
    ta, tb = trans_flag("trans_a", trans_a), trans_flag("trans_b", trans_b)
    overwrite_flag("overwrite_c", overwrite_c)
    alpha_ = v.scalar("alpha", alpha, a.dtype)
    beta_ = v.scalar("beta", beta, a.dtype)
    m, k = a.shape if ta == 0 else reversed(a.shape)
    kb, n = b.shape if tb == 0 else reversed(b.shape)
    if k != kb:
        raise ValueError(
            f"inner dimensions differ: op(a) has shape {(m, k)} (trans_a={ta}) but op(b) has shape "
            f"{(kb, n)} (trans_b={tb}); expected op(b) with {k} rows"
        )
    c_ = _optional_c(c, (m, n), "rows of op(a) by columns of op(b)", a=a)
    return _ops.call(_ops.gemm_op, alpha_, a, b, beta_, c_, ta, tb)


def batched_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    alpha: float | complex = 1.0,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
) -> torch.Tensor:
    """Batched ``alpha * op(a) @ op(b) + beta * c`` with batch dimensions broadcast like ``torch.matmul``.

    One call for the whole batch (not a loop of 2-D products): the shape that becomes a single
    NKI kernel over the batch.

    Parameters
    ----------
    a, b : torch.Tensor
        Tensors of rank ≥ 2 with ``op(a)`` of shape ``(..., m, k)`` and ``op(b)`` of shape
        ``(..., k, n)``; the leading (batch) dimensions broadcast against each other. Same dtypes
        as :func:`gemm`.
    alpha, beta : float or complex, optional
        Scales of the product (default 1) and of ``c`` (default 0; when 0, ``c`` is not read).
    c : torch.Tensor, optional
        Added term, broadcastable to the result shape ``(..., m, n)``.
    trans_a, trans_b : {0, 1, 2}, optional
        Transpose (1) or conjugate-transpose (2) the last two dimensions of ``a`` / ``b``.

    Returns
    -------
    torch.Tensor
        A new tensor of shape ``broadcast(batch_a, batch_b) + (m, n)``.

    Raises
    ------
    TypeError
        As :func:`gemm`.
    ValueError
        Rank below 2, inner dimensions that differ, batch dimensions (or ``c``) that do not
        broadcast, different devices, or an invalid flag.
    """
    v.not_a_scalar_first("batched_gemm", "a", a)
    for name, t in (("a", a), ("b", b)):
        v.tensor(name, t, dtypes=v.GEMM_DTYPES)
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., rows, cols), got shape {tuple(t.shape)}"
            )
    v.same_kind(a=a, b=b)
    ta, tb = trans_flag("trans_a", trans_a), trans_flag("trans_b", trans_b)
    alpha_ = v.scalar("alpha", alpha, a.dtype)
    beta_ = v.scalar("beta", beta, a.dtype)
    opa, opb = op(a, ta), op(b, tb)
    if opa.shape[-1] != opb.shape[-2]:
        raise ValueError(
            f"inner dimensions differ: op(a) has shape {tuple(opa.shape)} but op(b) has shape "
            f"{tuple(opb.shape)}; expected op(b) with {opa.shape[-1]} rows"
        )
    try:
        batch = torch.broadcast_shapes(opa.shape[:-2], opb.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"batch dimensions of a {tuple(a.shape[:-2])} and b {tuple(b.shape[:-2])} do not broadcast"
        ) from None
    out_shape = (*batch, opa.shape[-2], opb.shape[-1])
    if c is not None:
        c = v.tensor("c", c, dtypes=v.GEMM_DTYPES)
        v.same_kind(a=a, c=c)
        try:
            if torch.broadcast_shapes(c.shape, out_shape) != out_shape:
                raise RuntimeError
        except RuntimeError:
            raise ValueError(
                f"c of shape {tuple(c.shape)} must broadcast to the result shape {out_shape}"
            ) from None
    return _ops.call(_ops.batched_gemm_op, alpha_, a, b, beta_, c, ta, tb)


def _one_triangle_product(
    alpha: object, a: object, b: object, beta: object, c: object, side: object, lower: object,
    overwrite_c: object,
) -> tuple[Any, ...]:
    """Checked arguments of ``symm``/``hemm``: ``(alpha, a, b, beta, c, right, lower)``."""
    a = v.tensor("a", a, 2)
    b = v.tensor("b", b, 2)
    v.same_kind(a=a, b=b)
    right, low = side_flag(side), lower_flag(lower)
    overwrite_flag("overwrite_c", overwrite_c)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.scalar("beta", beta, a.dtype)
    order = v.square("a", a)
    m, n = b.shape
    needed = n if right else m
    if order != needed:
        raise ValueError(
            f"a must have shape {(needed, needed)} to multiply b of shape {(m, n)} from the "
            f"{'right' if right else 'left'} (side={int(right)}), got {tuple(a.shape)}"
        )
    c_ = _optional_c(c, (m, n), "the shape of b", a=a)
    return alpha_, a, b, beta_, c_, right, low


def symm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    side: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Symmetric matrix product ``alpha * a @ b + beta * c`` (or ``alpha * b @ a`` with ``side=1``).

    As ``scipy.linalg.blas.dsymm``/``zsymm``: ``a`` is symmetric (not Hermitian, also for complex
    data) and only its ``lower`` (1) or upper (0) triangle is read.

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the product and of ``c`` (``c`` is not read when ``beta`` is 0).
    a : torch.Tensor
        Square symmetric matrix, ``(m, m)`` for ``side=0`` or ``(n, n)`` for ``side=1``.
    b : torch.Tensor
        ``(m, n)`` matrix.
    c : torch.Tensor, optional
        ``(m, n)`` matrix; absent means zero.
    side : {0, 1}, optional
        0: ``a @ b``; 1: ``b @ a``.
    lower : {0, 1}, optional
        Which triangle of ``a`` holds the matrix.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor.
    """
    return _ops.call(_ops.symm_op, *_one_triangle_product(alpha, a, b, beta, c, side, lower, overwrite_c))


def _rank_k_checks(
    name: str, a: torch.Tensor, trans: object, lower: object, overwrite_c: object
) -> tuple[int, bool, int]:
    t = trans_flag("trans", trans)
    if t == 2 and a.is_complex():
        raise ValueError(
            f"{name} with complex operands takes trans 0 or 1; the conjugate transpose (trans=2) is "
            f"the Hermitian update her{name[3:]}, not {name}"
        )
    overwrite_flag("overwrite_c", overwrite_c)
    n = a.shape[1] if t else a.shape[0]
    return t, lower_flag(lower), int(n)


def syrk(
    alpha: float | complex,
    a: torch.Tensor,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Symmetric rank-k update of one triangle, as ``scipy.linalg.blas.dsyrk``/``zsyrk``.

    Computes ``alpha * a @ aᵀ + beta * c`` (``trans=0``, ``a`` is ``(n, k)``) or
    ``alpha * aᵀ @ a + beta * c`` (``trans=1``, ``a`` is ``(k, n)``) in the ``lower`` (1) or upper
    (0) triangle only. The other triangle of the result is ``c``'s, returned as given (zero when
    ``c`` is absent); it is not symmetrised. Complex data uses the plain transpose (``herk`` is the
    conjugated update).

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the product and of ``c`` (``c``'s selected triangle is not read when ``beta``
        is 0).
    a : torch.Tensor
        ``(n, k)`` for ``trans=0``, ``(k, n)`` for ``trans=1``.
    c : torch.Tensor, optional
        ``(n, n)`` matrix.
    trans : {0, 1, 2}, optional
        2 means 1 for real data and is rejected for complex data.
    lower : {0, 1}, optional
        Triangle that is computed.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(n, n)`` tensor.
    """
    a = v.tensor("a", a, 2)
    t, low, n = _rank_k_checks("syrk", a, trans, lower, overwrite_c)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.scalar("beta", beta, a.dtype)
    c_ = _optional_c(c, (n, n), "n by n, n = columns of op(a)ᵀ", a=a)
    return _ops.call(_ops.syrk_op, alpha_, a, beta_, c_, t, low)


def syr2k(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Symmetric rank-2k update of one triangle, as ``scipy.linalg.blas.dsyr2k``/``zsyr2k``.

    Computes ``alpha * (a @ bᵀ + b @ aᵀ) + beta * c`` (``trans=0``; ``a``, ``b`` are ``(n, k)``) or
    ``alpha * (aᵀ @ b + bᵀ @ a) + beta * c`` (``trans=1``; ``(k, n)``) in the selected triangle; the
    other triangle is ``c``'s as given (zero when ``c`` is absent).

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the update and of ``c``.
    a, b : torch.Tensor
        Matrices of the same shape.
    c : torch.Tensor, optional
        ``(n, n)`` matrix.
    trans : {0, 1, 2}, optional
        2 means 1 for real data and is rejected for complex data.
    lower : {0, 1}, optional
        Triangle that is computed.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(n, n)`` tensor.
    """
    a = v.tensor("a", a, 2)
    b = v.tensor("b", b, 2)
    v.same_kind(a=a, b=b)
    v.shape("b", b, tuple(a.shape), "the shape of a")
    t, low, n = _rank_k_checks("syr2k", a, trans, lower, overwrite_c)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.scalar("beta", beta, a.dtype)
    c_ = _optional_c(c, (n, n), "n by n", a=a)
    return _ops.call(_ops.syr2k_op, alpha_, a, b, beta_, c_, t, low)


def _triangular_checks(
    a: object, b: object, side: object, lower: object, trans_a: object, diag: object, overwrite_b: object
) -> tuple[torch.Tensor, torch.Tensor, bool, bool, int, bool]:
    a = v.tensor("a", a, 2)
    b = v.tensor("b", b, 2)
    v.same_kind(a=a, b=b)
    right, low = side_flag(side), lower_flag(lower)
    t, unit = trans_flag("trans_a", trans_a), diag_flag(diag)
    overwrite_flag("overwrite_b", overwrite_b)
    order = v.square("a", a)
    m, n = b.shape
    needed = n if right else m
    if order != needed:
        raise ValueError(
            f"a must have shape {(needed, needed)} for b of shape {(m, n)} with side={int(right)} "
            f"({'columns' if right else 'rows'} of b), got {tuple(a.shape)}"
        )
    return a, b, right, low, t, unit


def trsm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    side: int = 0,
    lower: int = 0,
    trans_a: int = 0,
    diag: int = 0,
    overwrite_b: bool = False,
) -> torch.Tensor:
    """Triangular solve with many right-hand sides, as ``scipy.linalg.blas.dtrsm``.

    Returns ``x`` with ``op(a) @ x = alpha * b`` (``side=0``) or ``x @ op(a) = alpha * b``
    (``side=1``), reading only the ``lower`` (1) or upper (0) triangle of ``a``.

    Parameters
    ----------
    alpha : float or complex
        Scale of the right-hand side.
    a : torch.Tensor
        Square triangular matrix, ``(m, m)`` for ``side=0``, ``(n, n)`` for ``side=1``.
    b : torch.Tensor
        ``(m, n)`` right-hand sides.
    side : {0, 1}, optional
        0: ``a`` acts from the left; 1: from the right.
    lower : {0, 1}, optional
        Triangle of ``a`` that is read.
    trans_a : {0, 1, 2}, optional
        ``op(a)`` is ``a``, ``aᵀ`` or ``aᴴ``.
    diag : {0, 1}, optional
        1: the diagonal of ``a`` is taken as ones and not read.
    overwrite_b : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor. A singular ``a`` gives inf/NaN, as in BLAS (no check is made).
    """
    a, b, right, low, t, unit = _triangular_checks(a, b, side, lower, trans_a, diag, overwrite_b)
    alpha_ = v.scalar("alpha", alpha, a.dtype)
    return _ops.call(_ops.trsm_op, alpha_, a, b, right, low, t, unit)


def trmm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    side: int = 0,
    lower: int = 0,
    trans_a: int = 0,
    diag: int = 0,
    overwrite_b: bool = False,
) -> torch.Tensor:
    """Triangular matrix product ``alpha * op(a) @ b`` (or ``alpha * b @ op(a)``), as ``dtrmm``.

    Only the ``lower`` (1) or upper (0) triangle of ``a`` is read.

    Parameters
    ----------
    alpha : float or complex
        Scale of the product.
    a : torch.Tensor
        Square triangular matrix, ``(m, m)`` for ``side=0``, ``(n, n)`` for ``side=1``.
    b : torch.Tensor
        ``(m, n)`` matrix.
    side : {0, 1}, optional
        0: ``op(a) @ b``; 1: ``b @ op(a)``.
    lower : {0, 1}, optional
        Triangle of ``a`` that is read.
    trans_a : {0, 1, 2}, optional
        ``op(a)`` is ``a``, ``aᵀ`` or ``aᴴ``.
    diag : {0, 1}, optional
        1: the diagonal of ``a`` is taken as ones and not read.
    overwrite_b : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor.
    """
    a, b, right, low, t, unit = _triangular_checks(a, b, side, lower, trans_a, diag, overwrite_b)
    alpha_ = v.scalar("alpha", alpha, a.dtype)
    return _ops.call(_ops.trmm_op, alpha_, a, b, right, low, t, unit)


# ----------------------------------------------------------------------------- Hermitian


def hemm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex = 0.0,
    c: torch.Tensor | None = None,
    side: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Hermitian matrix product ``alpha * a @ b + beta * c`` (or ``alpha * b @ a`` with ``side=1``).

    As ``scipy.linalg.blas.chemm``/``zhemm``: ``a`` is Hermitian, only its ``lower`` (1) or upper
    (0) triangle is read and the imaginary parts of its diagonal are taken as zero. Real data is
    accepted too (a real Hermitian matrix is symmetric: the result is :func:`symm`'s).

    Parameters
    ----------
    alpha, beta : float or complex
        Scales of the product and of ``c`` (``c`` is not read when ``beta`` is 0).
    a : torch.Tensor
        Square Hermitian matrix, ``(m, m)`` for ``side=0`` or ``(n, n)`` for ``side=1``.
    b : torch.Tensor
        ``(m, n)`` matrix.
    c : torch.Tensor, optional
        ``(m, n)`` matrix; absent means zero.
    side : {0, 1}, optional
        0: ``a @ b``; 1: ``b @ a``.
    lower : {0, 1}, optional
        Which triangle of ``a`` holds the matrix.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(m, n)`` tensor.
    """
    return _ops.call(_ops.hemm_op, *_one_triangle_product(alpha, a, b, beta, c, side, lower, overwrite_c))


def _hermitian_rank_checks(
    name: str, a: torch.Tensor, trans: object, lower: object, overwrite_c: object
) -> tuple[int, bool, int]:
    t = trans_flag("trans", trans)
    if t == 1 and a.is_complex():
        raise ValueError(
            f"{name} with complex operands takes trans 0 or 2 (conjugate transpose), as BLAS; the "
            f"plain transpose (trans=1) is the symmetric update syr{name[3:]}, not {name}"
        )
    overwrite_flag("overwrite_c", overwrite_c)
    n = a.shape[1] if t else a.shape[0]
    return t, lower_flag(lower), int(n)


def herk(
    alpha: float,
    a: torch.Tensor,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Hermitian rank-k update of one triangle, as ``scipy.linalg.blas.cherk``/``zherk``.

    Computes ``alpha * a @ aᴴ + beta * c`` (``trans=0``, ``a`` is ``(n, k)``) or
    ``alpha * aᴴ @ a + beta * c`` (``trans=2``, ``a`` is ``(k, n)``) in the ``lower`` (1) or upper
    (0) triangle, with a real diagonal (BLAS sets the diagonal's imaginary parts to zero). The other
    triangle is ``c``'s as given (zero when ``c`` is absent).

    Parameters
    ----------
    alpha, beta : float
        Real scales of the product and of ``c`` (BLAS takes them real here).
    a : torch.Tensor
        ``(n, k)`` for ``trans=0``, ``(k, n)`` for ``trans=2``.
    c : torch.Tensor, optional
        ``(n, n)`` matrix.
    trans : {0, 2}, optional
        2: the conjugate transpose. For real data 1 and 2 both mean the transpose.
    lower : {0, 1}, optional
        Triangle that is computed.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(n, n)`` tensor.
    """
    a = v.tensor("a", a, 2)
    t, low, n = _hermitian_rank_checks("herk", a, trans, lower, overwrite_c)
    alpha_, beta_ = v.real_scalar("alpha", alpha), v.real_scalar("beta", beta)
    c_ = _optional_c(c, (n, n), "n by n, n = rows of op(a)", a=a)
    return _ops.call(_ops.herk_op, alpha_, a, beta_, c_, t, low)


def her2k(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: bool = False,
) -> torch.Tensor:
    """Hermitian rank-2k update of one triangle, as ``scipy.linalg.blas.cher2k``/``zher2k``.

    Computes ``alpha * a @ bᴴ + conj(alpha) * b @ aᴴ + beta * c`` (``trans=0``; ``a``, ``b`` are
    ``(n, k)``) or ``alpha * aᴴ @ b + conj(alpha) * bᴴ @ a + beta * c`` (``trans=2``; ``(k, n)``) in
    the selected triangle with a real diagonal; the other triangle is ``c``'s as given (zero when
    ``c`` is absent).

    Parameters
    ----------
    alpha : float or complex
        Scale of the update.
    beta : float
        Real scale of ``c`` (real in BLAS).
    a, b : torch.Tensor
        Matrices of the same shape.
    c : torch.Tensor, optional
        ``(n, n)`` matrix.
    trans : {0, 2}, optional
        2: the conjugate transpose. For real data 1 and 2 both mean the transpose.
    lower : {0, 1}, optional
        Triangle that is computed.
    overwrite_c : bool, optional
        Accepted and ignored.

    Returns
    -------
    torch.Tensor
        A new ``(n, n)`` tensor.
    """
    a = v.tensor("a", a, 2)
    b = v.tensor("b", b, 2)
    v.same_kind(a=a, b=b)
    v.shape("b", b, tuple(a.shape), "the shape of a")
    t, low, n = _hermitian_rank_checks("her2k", a, trans, lower, overwrite_c)
    alpha_, beta_ = v.scalar("alpha", alpha, a.dtype), v.real_scalar("beta", beta)
    c_ = _optional_c(c, (n, n), "n by n", a=a)
    return _ops.call(_ops.her2k_op, alpha_, a, b, beta_, c_, t, low)
