"""Tensor-train (matrix product state) decomposition by TT-SVD."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trntensor._checks import check_int
from trntensor.decompositions._common import check_input

__all__ = ["TTDecomposition", "tt_decompose", "tt_reconstruct"]


@dataclass
class TTDecomposition:
    """``X[i_1, …, i_N] ≈ G_1[:, i_1, :] G_2[:, i_2, :] … G_N[:, i_N, :]``.

    Attributes
    ----------
    cores : list of torch.Tensor
        ``G_n`` of shape ``(r_{n-1}, I_n, r_n)`` with ``r_0 = r_N = 1``.
    rel_error : float
        ``‖X − X̂‖ / ‖X‖`` reached.
    """

    cores: list[torch.Tensor]
    rel_error: float

    @property
    def ranks(self) -> tuple[int, ...]:
        """The TT ranks ``(1, r_1, …, r_{N-1}, 1)``."""
        return (1, *(int(c.shape[2]) for c in self.cores))


def _max_ranks(rank: int | Sequence[int], order: int) -> list[int]:
    """Internal rank caps ``r_1 … r_{N-1}`` from an int, N−1 values, or N+1 values with 1 at the ends."""
    if isinstance(rank, Sequence) and not isinstance(rank, str):
        values = [check_int(r, f"rank[{n}]", minimum=1) for n, r in enumerate(rank)]
        if len(values) == order + 1:
            if values[0] != 1 or values[-1] != 1:
                raise ValueError(f"rank of length {order + 1} must start and end with 1, got {values}")
            return values[1:-1]
        if len(values) == order - 1:
            return values
        raise ValueError(
            f"rank must have {order - 1} internal or {order + 1} boundary values, got {len(values)}"
        )
    return [check_int(rank, "rank", minimum=1)] * (order - 1)


def tt_decompose(tensor: torch.Tensor, rank: int | Sequence[int], *, tol: float = 0.0) -> TTDecomposition:
    """Tensor-train decomposition by sequential truncated SVDs (TT-SVD).

    TT-SVD is not iterative: each of the N−1 SVDs is truncated to the rank cap and, when ``tol`` is
    positive, further to the smallest rank whose discarded singular values stay below
    ``tol·‖X‖/√(N−1)``, which bounds the total relative error by ``tol``.

    Parameters
    ----------
    tensor : torch.Tensor
        Real float32 or float64 tensor of order ≥ 2.
    rank : int or sequence of int
        Maximum TT ranks: one int for every bond, N−1 internal values, or N+1 values starting and
        ending with 1 (tensorly's convention).
    tol : float
        Relative accuracy target (0 keeps the full rank caps).

    Returns
    -------
    TTDecomposition
        Cores and the error reached, on the input's device and dtype.
    """
    tensor = check_input(tensor)
    caps = _max_ranks(rank, tensor.dim())
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    norm = float(tensor.norm())
    threshold2 = (tol * norm) ** 2 / (tensor.dim() - 1)
    cores = []
    rest = tensor
    r_prev = 1
    for n, cap in enumerate(caps):
        u, s, vh = torch.linalg.svd(rest.reshape(r_prev * tensor.shape[n], -1), full_matrices=False)
        r = min(cap, s.shape[0])
        if tol > 0:
            # tail[k] = Σ_{j ≥ k} s_j²: keep the fewest values whose discarded tail fits the threshold.
            tail = torch.flip(torch.cumsum(torch.flip(s * s, [0]), 0), [0])
            fits = (tail <= threshold2).nonzero()
            r = max(1, min(r, int(fits[0]) if fits.numel() else r))
        cores.append(u[:, :r].reshape(r_prev, tensor.shape[n], r))
        rest = s[:r, None] * vh[:r]
        r_prev = r
    cores.append(rest.reshape(r_prev, tensor.shape[-1], 1))
    decomposition = TTDecomposition(cores, 0.0)
    if norm > 0:
        decomposition.rel_error = float((tensor - tt_reconstruct(decomposition)).norm()) / norm
    return decomposition


def tt_reconstruct(decomposition: TTDecomposition) -> torch.Tensor:
    """The full tensor of a tensor-train decomposition.

    Parameters
    ----------
    decomposition : TTDecomposition
        From :func:`tt_decompose` (or built by hand with chained ranks).

    Returns
    -------
    torch.Tensor
        Tensor of shape ``(I_1, …, I_N)`` on the cores' device and dtype.
    """
    if not isinstance(decomposition, TTDecomposition):
        raise TypeError(f"decomposition must be a TTDecomposition, got {type(decomposition).__name__}")
    cores = decomposition.cores
    if not cores:
        raise ValueError("decomposition has no cores")
    for n, c in enumerate(cores):
        if c.dim() != 3:
            raise ValueError(f"core {n} must be (r_prev, I_n, r_next), got shape {tuple(c.shape)}")
    if cores[0].shape[0] != 1 or cores[-1].shape[2] != 1:
        raise ValueError("the first core must start and the last core end with rank 1")
    result = cores[0].reshape(cores[0].shape[1], cores[0].shape[2])
    for n, c in enumerate(cores[1:], start=1):
        if c.shape[0] != result.shape[-1]:
            raise ValueError(
                f"core {n} starts with rank {c.shape[0]}, core {n - 1} ends with {result.shape[-1]}"
            )
        result = (result @ c.reshape(c.shape[0], -1)).reshape(-1, c.shape[2])
    return result.reshape([int(c.shape[1]) for c in cores])
