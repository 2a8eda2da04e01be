"""Tucker decomposition: truncated HOSVD and its refinement by HOOI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trntensor._checks import check_int
from trntensor.decompositions._common import (
    check_input,
    check_iterations,
    leading_left_vectors,
    mode_dot,
    unfold,
)

__all__ = ["TuckerDecomposition", "tucker_decompose", "tucker_reconstruct"]

_METHODS = ("hooi", "hosvd")


@dataclass
class TuckerDecomposition:
    """``X ≈ G ×_1 U_1 ×_2 U_2 … ×_N U_N`` with orthonormal factor columns.

    Attributes
    ----------
    core : torch.Tensor
        ``G`` of shape ``(R_1, …, R_N)``.
    factors : list of torch.Tensor
        ``U_n`` of shape ``(I_n, R_n)`` with orthonormal columns.
    rel_error : float
        ``‖X − X̂‖ / ‖X‖`` reached.
    n_iter : int
        HOOI sweeps performed (0 for HOSVD).
    converged : bool
        Whether HOOI's error change fell below ``tol`` (always True for HOSVD).
    """

    core: torch.Tensor
    factors: list[torch.Tensor]
    rel_error: float
    n_iter: int
    converged: bool


def _ranks(rank: int | Sequence[int], shape: Sequence[int]) -> list[int]:
    if isinstance(rank, Sequence) and not isinstance(rank, str):
        if len(rank) != len(shape):
            raise ValueError(f"rank must give one value per mode ({len(shape)}), got {len(rank)}")
        ranks = [check_int(r, f"rank[{n}]", minimum=1) for n, r in enumerate(rank)]
        for n, (r, size) in enumerate(zip(ranks, shape)):
            if r > size:
                raise ValueError(f"rank[{n}]={r} exceeds mode {n}'s size {size}")
        return ranks
    r = check_int(rank, "rank", minimum=1)
    return [min(r, size) for size in shape]  # one int is capped by each mode's size


def _error(norm2: float, core: torch.Tensor) -> float:
    # With orthonormal factors ‖X − X̂‖² = ‖X‖² − ‖G‖².
    if norm2 == 0:
        return 0.0
    return (max(norm2 - float(torch.sum(core * core)), 0.0) / norm2) ** 0.5


def tucker_decompose(
    tensor: torch.Tensor,
    rank: int | Sequence[int],
    *,
    method: str = "hooi",
    n_iter_max: int = 100,
    tol: float = 1e-8,
) -> TuckerDecomposition:
    """Tucker decomposition by truncated HOSVD, optionally refined by HOOI.

    HOSVD takes each factor as the leading left singular vectors of the tensor's unfolding.
    HOOI (higher-order orthogonal iteration) then alternates: each factor becomes the leading
    singular vectors of the tensor projected on all the other factors, which never increases the
    error; sweeps stop when the relative error changes by less than ``tol``.

    Parameters
    ----------
    tensor : torch.Tensor
        Real float32 or float64 tensor of order ≥ 2.
    rank : int or sequence of int
        Core size per mode; one int applies to every mode, capped by each mode's size.
    method : {"hooi", "hosvd"}
        Refine with HOOI (default) or stop after HOSVD.
    n_iter_max : int
        Maximum number of HOOI sweeps.
    tol : float
        HOOI stops when the relative error changes by less than this.

    Returns
    -------
    TuckerDecomposition
        Core, orthonormal factors and the error reached, on the input's device and dtype.
    """
    tensor = check_input(tensor)
    ranks = _ranks(rank, tensor.shape)
    n_iter_max, tol = check_iterations(n_iter_max, tol)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
    factors = [leading_left_vectors(unfold(tensor, n), r) for n, r in enumerate(ranks)]
    core = tensor
    for n, u in enumerate(factors):
        core = mode_dot(core, u.mT, n)
    norm2 = float(torch.sum(tensor * tensor))
    error = _error(norm2, core)
    if method == "hosvd":
        return TuckerDecomposition(core, factors, error, 0, True)
    converged = False
    n_iter = 0
    for sweep in range(1, n_iter_max + 1):
        n_iter = sweep
        prev = error
        for n in range(tensor.dim()):
            projected = tensor
            for m, u in enumerate(factors):
                if m != n:
                    projected = mode_dot(projected, u.mT, m)
            factors[n] = leading_left_vectors(unfold(projected, n), ranks[n])
        core = mode_dot(projected, factors[-1].mT, tensor.dim() - 1)
        error = _error(norm2, core)
        if abs(prev - error) < tol:
            converged = True
            break
    return TuckerDecomposition(core, factors, error, n_iter, converged)


def tucker_reconstruct(decomposition: TuckerDecomposition) -> torch.Tensor:
    """The full tensor ``G ×_1 U_1 … ×_N U_N`` of a Tucker decomposition.

    Parameters
    ----------
    decomposition : TuckerDecomposition
        From :func:`tucker_decompose` (or built by hand with matching shapes).

    Returns
    -------
    torch.Tensor
        Tensor of shape ``(I_1, …, I_N)`` on the core's device and dtype.
    """
    if not isinstance(decomposition, TuckerDecomposition):
        raise TypeError(f"decomposition must be a TuckerDecomposition, got {type(decomposition).__name__}")
    core, factors = decomposition.core, decomposition.factors
    if len(factors) != core.dim():
        raise ValueError(f"a core of order {core.dim()} needs {core.dim()} factors, got {len(factors)}")
    result = core
    for n, u in enumerate(factors):
        if u.dim() != 2 or u.shape[1] != core.shape[n]:
            raise ValueError(f"factor {n} must be (I_{n}, {core.shape[n]}), got shape {tuple(u.shape)}")
        result = mode_dot(result, u, n)
    return result
