"""BLAS option flags (``trans``, ``lower``, ``side``, ``diag``) as ``scipy.linalg.blas`` spells them.

``trans`` is 0 (no transpose), 1 (transpose) or 2 (conjugate transpose; the same as 1 for real
data); ``lower``, ``side`` and ``diag`` are 0 or 1 (any integer type, ``bool`` included).
Anything else is a ``ValueError`` rather than being read as truthy, because a mistyped flag
silently picking a triangle is a wrong answer.
"""

from __future__ import annotations

import numbers

import torch


def trans_flag(name: str, value: object) -> int:
    """``value`` checked as a transpose flag: 0, 1 or 2."""
    if type(value) is int and 0 <= value <= 2:  # the common case, without ABC checks
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1, 2):
        return int(value)
    raise ValueError(f"{name} must be 0 (none), 1 (transpose) or 2 (conjugate transpose), got {value!r}")


def binary_flag(name: str, value: object, meaning: str) -> bool:
    """``value`` checked as a 0/1 flag (``bool`` accepted); ``meaning`` describes the 1 case."""
    if type(value) is int and 0 <= value <= 1:
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    hint = ""
    if isinstance(value, str):  # the public trnsci package's side="left", uplo="upper", diag="unit"
        hint = (
            "; trnblas spells flags as scipy.linalg.blas does (0/1), not as strings like the "
            "trnsci package's side/uplo/diag"
        )
    raise ValueError(f"{name} must be 0 or 1 (1 = {meaning}), got {value!r}{hint}")


def lower_flag(value: object) -> bool:
    """The ``lower`` flag: True reads (and writes) the lower triangle, False the upper one."""
    return binary_flag("lower", value, "lower triangle")


def side_flag(value: object) -> bool:
    """The ``side`` flag: True when the triangular/symmetric matrix multiplies from the right."""
    return binary_flag("side", value, "the matrix a acts from the right")


def diag_flag(value: object) -> bool:
    """The ``diag`` flag: True when the triangular matrix has an implicit unit diagonal."""
    return binary_flag("diag", value, "unit diagonal, not read")


def overwrite_flag(name: str, value: object) -> None:
    """Accept scipy's ``overwrite_*`` hints; trnblas always returns new tensors and ignores them."""
    if type(value) is bool or type(value) is int:
        return
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a bool or 0/1, got {type(value).__name__}")


def op(t: torch.Tensor, trans: int) -> torch.Tensor:
    """op(t) of the last two dimensions as a view: t, tᵀ or tᴴ (tᴴ = tᵀ for real t)."""
    if trans == 0:
        return t
    if trans == 2 and t.is_complex():
        return t.mH
    return t.mT


def triangle(a: torch.Tensor, lower: bool, unit_diagonal: bool = False) -> torch.Tensor:
    """A new tensor with the selected triangle of ``a`` and zeros elsewhere.

    With ``unit_diagonal`` the diagonal is 1 and the stored diagonal is not read.
    """
    if unit_diagonal:
        t = torch.tril(a, -1) if lower else torch.triu(a, 1)
        t.diagonal(dim1=-2, dim2=-1).fill_(1)
        return t
    return torch.tril(a) if lower else torch.triu(a)


def symmetric_from_triangle(a: torch.Tensor, lower: bool) -> torch.Tensor:
    """The symmetric (not Hermitian) matrix whose selected triangle is that of ``a``.

    The other triangle of ``a`` is never read, as in BLAS ``symm``/``symv``.
    """
    if lower:
        return torch.tril(a) + torch.tril(a, -1).mT
    return torch.triu(a) + torch.triu(a, 1).mT


def hermitian_from_triangle(a: torch.Tensor, lower: bool) -> torch.Tensor:
    """The Hermitian matrix whose selected triangle is that of ``a``.

    As BLAS ``hemm``/``hemv``: the other triangle is never read and the imaginary parts of the
    diagonal are taken as zero. For real ``a`` this is :func:`symmetric_from_triangle`.
    """
    if not a.is_complex():
        return symmetric_from_triangle(a, lower)
    strict = torch.tril(a, -1) if lower else torch.triu(a, 1)
    return strict + strict.mH + torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1).real.to(a.dtype))


def triangle_mask(n: int, lower: bool, device: torch.device) -> torch.Tensor:
    """Boolean ``(n, n)`` mask of the lower or upper triangle, diagonal included."""
    full = torch.ones((n, n), dtype=torch.bool, device=device)
    return torch.tril(full) if lower else torch.triu(full)
