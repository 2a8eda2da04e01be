"""The GEMM every GEMM-shaped einsum step goes through.

Each pairwise contraction that sums over at least one label reaches this module as
``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` (or the unbatched form), with transposed operands passed
as transposed views rather than copies. Keeping that single entry point is what lets the step be
declared later as a trncore operation (``_library.operation("contract_gemm",
reference=_gemm_reference, kernel=..., driver=...)``) without touching :mod:`trntensor.einsum`.
"""

from __future__ import annotations

import torch

__all__: list[str] = []


def _gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: ``a @ b`` for ``(m, k) @ (k, n)`` or ``(b, m, k) @ (b, k, n)``."""
    return torch.matmul(a, b)


# The dispatched entry point: today the reference itself, later the trncore operation.
_contract_gemm = _gemm_reference
