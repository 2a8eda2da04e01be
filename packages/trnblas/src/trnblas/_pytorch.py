"""PyTorch implementations of the kernel-worthy trnblas operations.

Each function here takes already-validated arguments (plain Python scalars and flags, tensors of
one dtype on one device) and is the PyTorch route of a trncore operation declared in
:mod:`trnblas._ops` (the drivers of :mod:`trnblas._drivers` also answer calls that need no kernel
with it); the public functions in :mod:`trnblas.level3` and :mod:`trnblas.level2` validate and
then call the operations.

BLAS rules kept here: when ``beta`` is 0, ``c`` is not read (NaN in it does not propagate); when
``alpha`` is 0, ``a`` and ``b`` are not read. Results are always new tensors, allocated on the
operands' device with their dtype.
"""

from __future__ import annotations

from typing import Any

import torch

from trnblas._flags import hermitian_from_triangle, op, symmetric_from_triangle, triangle, triangle_mask


def scaled_or_zeros(
    beta: float | complex, c: torch.Tensor | None, shape: tuple[int, ...], like: torch.Tensor
) -> torch.Tensor:
    """``beta * c`` as a new tensor, or zeros of ``shape`` when ``c`` is absent or ``beta`` is 0."""
    if c is None or beta == 0:
        return torch.zeros(shape, dtype=like.dtype, device=like.device)
    return c.clone() if beta == 1 else c * beta


def gemm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex,
    c: torch.Tensor | None,
    trans_a: int,
    trans_b: int,
) -> torch.Tensor:
    """``alpha * op(a) @ op(b) + beta * c`` for matrices, with transposes folded in as views."""
    opa, opb = op(a, trans_a), op(b, trans_b)
    shape = (opa.shape[0], opb.shape[1])
    if alpha == 0:
        return scaled_or_zeros(beta, c, shape, a)
    if c is None or beta == 0:
        out = torch.mm(opa, opb)  # a fresh tensor: scale it in place, no second allocation
        return out if alpha == 1 else out.mul_(alpha)
    return torch.addmm(c, opa, opb, beta=beta, alpha=alpha)


def batched_gemm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex,
    c: torch.Tensor | None,
    trans_a: int,
    trans_b: int,
) -> torch.Tensor:
    """``alpha * op(a) @ op(b) + beta * c`` over broadcast batch dimensions (``torch.matmul`` rules)."""
    opa, opb = op(a, trans_a), op(b, trans_b)
    shape = (*torch.broadcast_shapes(opa.shape[:-2], opb.shape[:-2]), opa.shape[-2], opb.shape[-1])
    if alpha == 0:
        out = torch.zeros(shape, dtype=a.dtype, device=a.device)
        return out if c is None or beta == 0 else out.add_(c, alpha=beta)
    out = torch.matmul(opa, opb)
    if alpha != 1:
        out.mul_(alpha)
    if c is not None and beta != 0:
        out.add_(c, alpha=beta)
    return out


def syrk(
    alpha: float | complex,
    a: torch.Tensor,
    beta: float | complex,
    c: torch.Tensor | None,
    trans: int,
    lower: bool,
) -> torch.Tensor:
    """Symmetric rank-k update of one triangle; the other triangle is ``c``'s as given (or zero).

    ``alpha * a @ aᵀ + beta * c`` (``trans`` 0) or ``alpha * aᵀ @ a + beta * c`` (``trans`` 1); never
    conjugated (that is ``herk``).
    """
    full = gemm(alpha, a, a, beta, c, 1 if trans else 0, 0 if trans else 1)
    return _keep_triangle(full, c, lower)


def syr2k(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float | complex,
    c: torch.Tensor | None,
    trans: int,
    lower: bool,
) -> torch.Tensor:
    """Symmetric rank-2k update ``alpha (op(a) op(b)ᵀ + op(b) op(a)ᵀ) + beta c`` of one triangle."""
    ta, tb = (1, 0) if trans else (0, 1)
    full = gemm(alpha, a, b, beta, c, ta, tb)
    if alpha != 0:
        full = torch.addmm(full, op(b, ta), op(a, tb), alpha=alpha)
    return _keep_triangle(full, c, lower)


def herk(
    alpha: float, a: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int, lower: bool
) -> torch.Tensor:
    """Hermitian rank-k update ``alpha op(a) op(a)ᴴ + beta c`` of one triangle (``op`` is the
    identity for ``trans`` 0, the conjugate transpose for 2); the diagonal is left real, the other
    triangle is ``c``'s as given (or zero)."""
    ta, tb = (2, 0) if trans else (0, 2)
    full = _keep_triangle(gemm(alpha, a, a, beta, c, ta, tb), c, lower)
    if full.is_complex():
        full.diagonal().imag.zero_()
    return full


def her2k(
    alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int,
    lower: bool,
) -> torch.Tensor:
    """Hermitian rank-2k update ``alpha op(a) op(b)ᴴ + conj(alpha) op(b) op(a)ᴴ + beta c`` of one
    triangle, diagonal left real."""
    ta, tb = (2, 0) if trans else (0, 2)
    full = gemm(alpha, a, b, beta, c, ta, tb)
    if alpha != 0:
        conj_alpha = alpha.conjugate() if isinstance(alpha, complex) else alpha
        full = torch.addmm(full, op(b, ta), op(a, tb), alpha=conj_alpha)
    full = _keep_triangle(full, c, lower)
    if full.is_complex():
        full.diagonal().imag.zero_()
    return full


def _keep_triangle(full: torch.Tensor, c: torch.Tensor | None, lower: bool) -> torch.Tensor:
    """``full`` in the selected triangle, ``c`` (or zero) in the other one, as BLAS writes it."""
    mask = triangle_mask(full.shape[-1], lower, full.device)
    other = c if c is not None else torch.zeros((), dtype=full.dtype, device=full.device)
    return torch.where(mask, full, other)


def trsm(
    alpha: float | complex,
    a: torch.Tensor,
    b: torch.Tensor,
    right: bool,
    lower: bool,
    trans_a: int,
    unit_diagonal: bool,
) -> torch.Tensor:
    """Solve ``op(a) x = alpha b`` (left) or ``x op(a) = alpha b`` (right) reading one triangle of ``a``."""
    if alpha == 0 or b.numel() == 0:
        return torch.zeros(b.shape, dtype=b.dtype, device=b.device)
    # op(a) of a lower triangle is upper and vice versa: the transpose is a view, not a copy.
    upper = lower if trans_a else not lower
    rhs = b if alpha == 1 else b * alpha
    return torch.linalg.solve_triangular(
        op(a, trans_a), rhs, upper=upper, left=not right, unitriangular=unit_diagonal
    )


def triangle_product(
    build: Any, gemm: Any, alpha: Any, a: torch.Tensor, b: torch.Tensor, beta: Any,
    c: torch.Tensor | None, right: bool, lower: bool, *extra: Any,
) -> torch.Tensor:
    """``alpha·full·b`` (or ``alpha·b·full``) ``+ beta·c`` with ``full = build(a, lower)`` (the
    symmetric or Hermitian matrix from one triangle), through ``gemm`` (reference or driver)."""
    full = build(a, lower)
    if right:
        return gemm(alpha, b, full, beta, c, 0, 0, *extra)
    return gemm(alpha, full, b, beta, c, 0, 0, *extra)


def symm(
    alpha: float | complex, a: torch.Tensor, b: torch.Tensor, beta: float | complex,
    c: torch.Tensor | None, right: bool, lower: bool,
) -> torch.Tensor:
    """SYMM: the symmetric matrix built from one triangle of ``a``, then one GEMM."""
    return triangle_product(symmetric_from_triangle, gemm, alpha, a, b, beta, c, right, lower)


def hemm(
    alpha: float | complex, a: torch.Tensor, b: torch.Tensor, beta: float | complex,
    c: torch.Tensor | None, right: bool, lower: bool,
) -> torch.Tensor:
    """HEMM: the Hermitian matrix built from one triangle of ``a``, then one GEMM."""
    return triangle_product(hermitian_from_triangle, gemm, alpha, a, b, beta, c, right, lower)


def trmm(
    alpha: float | complex, a: torch.Tensor, b: torch.Tensor, right: bool, lower: bool, trans_a: int,
    unit_diagonal: bool,
) -> torch.Tensor:
    """TRMM: the selected triangle of ``a`` (zeros elsewhere) times ``b``."""
    tri = triangle(a, lower, unit_diagonal)
    if right:
        return gemm(alpha, b, tri, 0.0, None, 0, trans_a)
    return gemm(alpha, tri, b, 0.0, None, trans_a, 0)

