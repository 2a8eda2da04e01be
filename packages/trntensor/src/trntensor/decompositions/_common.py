"""Unfolding, mode products and shared argument checks for the decompositions."""

from __future__ import annotations

import torch

from trntensor._checks import check_int, check_tensor

__all__ = ["check_input", "check_iterations", "leading_left_vectors", "mode_dot", "unfold"]


def unfold(tensor: torch.Tensor, mode: int) -> torch.Tensor:
    """Mode-``mode`` unfolding: that mode's index becomes the rows, the others (in order) columns."""
    return tensor.movedim(mode, 0).reshape(tensor.shape[mode], -1)


def mode_dot(tensor: torch.Tensor, matrix: torch.Tensor, mode: int) -> torch.Tensor:
    """``tensor ×_mode matrix``: contracts the mode with the matrix's columns (a GEMM)."""
    return torch.tensordot(matrix, tensor, dims=([1], [mode])).movedim(0, mode)


def leading_left_vectors(matrix: torch.Tensor, rank: int) -> torch.Tensor:
    """The ``rank`` leading left singular vectors of ``matrix`` (``rank`` ≤ its row count)."""
    u, _, _ = torch.linalg.svd(matrix, full_matrices=False)
    return u[:, :rank]


def check_input(tensor: object, name: str = "tensor", *, min_ndim: int = 2) -> torch.Tensor:
    """A real floating tensor of at least ``min_ndim`` dimensions and no empty dimension."""
    tensor = check_tensor(tensor, name)
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a real floating-point tensor, got {tensor.dtype}")
    if tensor.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        raise ValueError(f"{name} has an empty dimension (shape {tuple(tensor.shape)})")
    return tensor


def check_iterations(n_iter_max: object, tol: object) -> tuple[int, float]:
    """Validated iteration limit (≥ 1) and convergence tolerance (≥ 0)."""
    n_iter_max = check_int(n_iter_max, "n_iter_max", minimum=1)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    return n_iter_max, float(tol)
