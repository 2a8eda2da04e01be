"""CP (CANDECOMP/PARAFAC) decomposition by alternating least squares."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trntensor._checks import check_int
from trntensor.decompositions._common import check_input, check_iterations, leading_left_vectors, unfold

__all__ = ["CPDecomposition", "cp_decompose", "cp_reconstruct"]

_MODE_LETTERS = string.ascii_lowercase[:25]  # "z" is the rank label
_INITS = ("svd", "random")


@dataclass
class CPDecomposition:
    """A rank-R CP decomposition ``X ≈ Σ_r w_r a_r ∘ b_r ∘ c_r ∘ …``.

    Attributes
    ----------
    weights : torch.Tensor
        ``(R,)`` component weights; the factor columns have unit norm.
    factors : list of torch.Tensor
        One ``(I_n, R)`` matrix per mode.
    rel_error : float
        ``‖X − X̂‖ / ‖X‖`` reached.
    n_iter : int
        ALS sweeps performed.
    converged : bool
        Whether the change of ``rel_error`` fell below ``tol`` within ``n_iter_max`` sweeps.
    """

    weights: torch.Tensor
    factors: list[torch.Tensor]
    rel_error: float
    n_iter: int
    converged: bool


def _mttkrp(tensor: torch.Tensor, factors: Sequence[torch.Tensor], mode: int) -> torch.Tensor:
    """``unfold(X, mode) @ khatri_rao(other factors)`` as one planned einsum (no Khatri–Rao product)."""
    from trntensor.contraction import einsum

    letters = _MODE_LETTERS[: tensor.dim()]
    terms = [letters] + [f"{c}z" for n, c in enumerate(letters) if n != mode]
    ops = [tensor] + [f for n, f in enumerate(factors) if n != mode]
    return einsum(",".join(terms) + f"->{letters[mode]}z", *ops)


def _initial_factors(
    tensor: torch.Tensor, rank: int, init: str, generator: torch.Generator
) -> list[torch.Tensor]:
    factors = []
    for mode, size in enumerate(tensor.shape):
        if init == "svd":
            u = leading_left_vectors(unfold(tensor, mode), min(rank, size))
            if rank > size:  # more components than the mode has directions: fill at random
                extra = torch.rand(size, rank - size, generator=generator, dtype=tensor.dtype)
                u = torch.cat([u, extra.to(tensor.device)], dim=1)
        else:
            u = torch.rand(size, rank, generator=generator, dtype=tensor.dtype).to(tensor.device)
        factors.append(u)
    return factors


def cp_decompose(
    tensor: torch.Tensor,
    rank: int,
    *,
    n_iter_max: int = 100,
    tol: float = 1e-8,
    init: str = "svd",
    seed: int = 0,
) -> CPDecomposition:
    """CP decomposition of ``tensor`` with ``rank`` components by alternating least squares.

    Each sweep solves, mode by mode, the linear least-squares problem for that mode's factor with
    the others fixed: the right-hand side is the MTTKRP (computed as one planned
    :func:`trntensor.einsum`) and the normal matrix the Hadamard product of the other factors'
    Gram matrices. Sweeps stop when the relative error changes by less than ``tol``.

    Parameters
    ----------
    tensor : torch.Tensor
        Real float32 or float64 tensor of order 2 to 25.
    rank : int
        Number of components R ≥ 1.
    n_iter_max : int
        Maximum number of ALS sweeps.
    tol : float
        Stop when ``|err_prev − err| < tol`` (relative errors).
    init : {"svd", "random"}
        Initial factors: leading left singular vectors of each unfolding (random columns beyond
        the mode size), or uniform random numbers.
    seed : int
        Seed of the random numbers an initialisation needs.

    Returns
    -------
    CPDecomposition
        Weights, unit-norm factors and the error reached, on the input's device and dtype.
    """
    tensor = check_input(tensor)
    if tensor.dim() > len(_MODE_LETTERS):
        raise ValueError(f"tensor order {tensor.dim()} exceeds the supported {len(_MODE_LETTERS)}")
    rank = check_int(rank, "rank", minimum=1)
    n_iter_max, tol = check_iterations(n_iter_max, tol)
    if init not in _INITS:
        raise ValueError(f"init must be one of {', '.join(_INITS)}; got {init!r}")
    generator = torch.Generator().manual_seed(check_int(seed, "seed"))
    factors = _initial_factors(tensor, rank, init, generator)
    norm2 = float(torch.sum(tensor * tensor))
    grams = [f.mT @ f for f in factors]
    error = prev = float("inf")
    converged = False
    n_iter = 0
    for sweep in range(1, n_iter_max + 1):
        n_iter = sweep
        for mode in range(tensor.dim()):
            v = torch.ones_like(grams[0])
            for m, g in enumerate(grams):
                if m != mode:
                    v = v * g
            mttkrp = _mttkrp(tensor, factors, mode)
            # Normal equations F V = M; the pseudo-inverse keeps rank-deficient V well defined.
            factors[mode] = mttkrp @ torch.linalg.pinv(v, hermitian=True)
            grams[mode] = factors[mode].mT @ factors[mode]
        # ‖X − X̂‖² = ‖X‖² − 2⟨X, X̂⟩ + ‖X̂‖², from quantities the last update already has.
        inner = float(torch.sum(mttkrp * factors[-1]))
        full = grams[0]
        for g in grams[1:]:
            full = full * g
        residual = max(norm2 - 2 * inner + float(full.sum()), 0.0)
        error = (residual / norm2) ** 0.5 if norm2 > 0 else 0.0
        if abs(prev - error) < tol:
            converged = True
            break
        prev = error
    norms = [f.norm(dim=0) for f in factors]
    weights = torch.ones(rank, dtype=tensor.dtype, device=tensor.device)
    for i, nrm in enumerate(norms):
        weights = weights * nrm
        factors[i] = factors[i] / torch.where(nrm > 0, nrm, torch.ones_like(nrm))
    return CPDecomposition(weights, factors, error, n_iter, converged)


def cp_reconstruct(decomposition: CPDecomposition) -> torch.Tensor:
    """The full tensor ``Σ_r w_r a_r ∘ b_r ∘ …`` of a CP decomposition.

    Parameters
    ----------
    decomposition : CPDecomposition
        From :func:`cp_decompose` (or built by hand with matching factor ranks).

    Returns
    -------
    torch.Tensor
        Tensor of shape ``(I_1, …, I_N)`` on the factors' device and dtype.
    """
    if not isinstance(decomposition, CPDecomposition):
        raise TypeError(f"decomposition must be a CPDecomposition, got {type(decomposition).__name__}")
    factors = decomposition.factors
    if not factors:
        raise ValueError("decomposition has no factors")
    rank = decomposition.weights.shape[0]
    for n, f in enumerate(factors):
        if f.dim() != 2 or f.shape[1] != rank:
            raise ValueError(f"factor {n} must be (I_{n}, {rank}), got shape {tuple(f.shape)}")
    # Grow a (I_1·…·I_n, R) Khatri–Rao product mode by mode, then sum the components.
    acc = factors[0] * decomposition.weights
    for f in factors[1:]:
        acc = (acc[:, None, :] * f[None, :, :]).reshape(-1, rank)
    return acc.sum(dim=1).reshape([f.shape[0] for f in factors])
