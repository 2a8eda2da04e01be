"""The einsum GEMM step as one NKI kernel: ``out[b] = L[b] @ R[b]`` for every batch entry.

The Tensor Engine contracts over the partition dimension of both operands
(``nc_matmul``: ``dst[M, N] = stationary[K, M].T @ moving[K, N]``, nki-0.3.md §3.1), so each
operand is loaded with its contraction index on the partitions. Which of an operand's two
layouts is in memory is a compile-time flag: a transposed operand is read through a strided DMA
access pattern (:func:`trncore.kernels.block_view`) instead of being copied on the host.
"""

from __future__ import annotations

from trncore.kernels import evict, spans
from trncore.lang import nisa, nl
from trntensor.kernels._product import product_tile

__all__ = ["contract_gemm_kernel"]


def contract_gemm_kernel(lhs, rhs, transpose_lhs=False, transpose_rhs=False, tile_m=128, tile_n=512):
    """``out[b, M, N]`` (float32) ``= Σ_K L[b, K, M] R[b, K, N]``.

    ``lhs`` is ``(batch, K, M)``, or ``(batch, M, K)`` when ``transpose_lhs``; ``rhs`` is
    ``(batch, K, N)``, or ``(batch, N, K)`` when ``transpose_rhs``. ``tile_m ≤ 128`` and
    ``tile_n ≤ 512`` (one PSUM bank of float32); edge tiles are clipped, so any sizes work.
    """
    nbatch = lhs.shape[0]
    m_total, k_total = (lhs.shape[1], lhs.shape[2]) if transpose_lhs else (lhs.shape[2], lhs.shape[1])
    n_total = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    out = nl.ndarray((nbatch, m_total, n_total), nl.float32, buffer=nl.shared_hbm)
    for b in range(nbatch):
        for m0, ms in spans(m_total, tile_m):
            for n0, ns in spans(n_total, tile_n):
                acc = nl.ndarray((ms, ns), nl.float32, buffer=nl.psum)
                product_tile(
                    acc, lhs, rhs, k_total, m0, ms, n0, ns, lhs_batch=b, rhs_batch=b,
                    transpose_lhs=transpose_lhs, transpose_rhs=transpose_rhs,
                )
                res = nl.ndarray((ms, ns), nl.float32, buffer=nl.sbuf)
                evict(res, acc)
                nisa.dma_copy(dst=out[b, m0 : m0 + ms, n0 : n0 + ns], src=res)
    return out
