"""The GEMM every GEMM-shaped einsum step goes through: the trncore operation ``contract_gemm``.

Each pairwise contraction that sums over at least one label reaches :data:`_contract_gemm` as
``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` (or the unbatched form), with transposed operands passed
as transposed views rather than copies. ``_contract_gemm`` is a trncore operation: on the
PyTorch route it is ``torch.matmul``; on the NKI route (device or simulator) its driver pads the
operands to shape buckets and launches the suite's GEMM kernel,
:func:`trncore.kernels.gemm_kernel` (the one trnblas launches), once per batch chunk.
"""

from __future__ import annotations

import torch

from trncore.dispatch import KernelContext, KernelUnsupported, Operation
from trncore.kernels import gemm_kernel
from trncore.padding import TilePolicy, pad_to
from trntensor import _library
from trntensor._precision import kernel_dtype

__all__: list[str] = []

#: Sizes are padded to multiples of these (zeros leave the product unchanged), so nearby shapes
#: share one compiled kernel; the kernel's own tiles (128×128×512, §3.1) clip at the edges.
_POLICY = TilePolicy({"M": 32, "K": 32, "N": 32})
#: Batches longer than this go out in launches of this many entries (one kernel key), so the
#: unrolled trace of one launch stays bounded however long the batch is.
_BATCH_CHUNK = 16


def _gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: ``a @ b`` for ``(m, k) @ (k, n)`` or ``(b, m, k) @ (b, k, n)``."""
    return torch.matmul(a, b)


def _gemm_work(a: torch.Tensor, b: torch.Tensor) -> int:
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def _batch_bucket(nb: int) -> int:
    """Power-of-two batch sizes up to the chunk, so short batches need few kernel keys."""
    return min(_BATCH_CHUNK, 1 << (max(1, nb) - 1).bit_length())


def _gemm_driver(ctx: KernelContext, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pad to buckets, launch the kernel over the batch in chunks, crop, restore the dtype."""
    if a.dim() != b.dim() or a.dim() not in (2, 3):
        raise KernelUnsupported(f"contract_gemm takes 2-D or 3-D operands, got {a.dim()}-D and {b.dim()}-D")
    dtype = kernel_dtype(a.dtype, "contract_gemm")
    a3 = a if a.dim() == 3 else a[None]
    b3 = b if b.dim() == 3 else b[None]
    nb, m, k = a3.shape
    n = b3.shape[2]
    if nb == 0 or m == 0 or n == 0 or k == 0:  # nothing to launch: an empty or an all-zero product
        out = torch.zeros(nb, m, n, dtype=a.dtype, device=a.device)
        return out if a.dim() == 3 else out[0]
    mp, kp, np_ = _POLICY.padded("M", m), _POLICY.padded("K", k), _POLICY.padded("N", n)
    chunk = _batch_bucket(nb)
    # The kernel wants each operand with K on the partitions. An operand whose memory is the
    # other way round is handed over as it is and read through a transposed DMA pattern
    # (a compile-time flag), so no transposed copy is made here.
    lhs, t_lhs = (a3.mT, False) if a3.mT.is_contiguous() else (a3, True)  # (b, K, M) or (b, M, K)
    rhs, t_rhs = (b3.mT, True) if b3.mT.is_contiguous() and not b3.is_contiguous() else (b3, False)
    lhs_shape = (chunk, mp, kp) if t_lhs else (chunk, kp, mp)
    rhs_shape = (chunk, np_, kp) if t_rhs else (chunk, kp, np_)
    parts = []
    for b0 in range(0, nb, chunk):
        rows = min(chunk, nb - b0)
        lhs_p = pad_to(lhs[b0 : b0 + rows].to(dtype), lhs_shape).contiguous()
        rhs_p = pad_to(rhs[b0 : b0 + rows].to(dtype), rhs_shape).contiguous()
        # gemm_kernel computes op(a) @ op(b) with a = (M, K) unless trans_a: lhs is (K, M) when not
        # t_lhs, so trans_a = not t_lhs; rhs is (N, K) exactly when t_rhs.
        res = ctx.launch(gemm_kernel, lhs_p, rhs_p, trans_a=int(not t_lhs), trans_b=int(t_rhs))
        parts.append(res[:rows, :m, :n])
    out = torch.cat(parts) if len(parts) > 1 else parts[0]
    out = out.to(a.dtype)
    return out if a.dim() == 3 else out[0]


_contract_gemm: Operation = _library.operation(
    "contract_gemm",
    reference=_gemm_reference,
    kernel=gemm_kernel,
    driver=_gemm_driver,
    policy=_POLICY,
    work=_gemm_work,
    min_work=2 * 128**3,
    dtypes=None,  # checked by the driver (kernel_dtype), which knows the float32 opt-in
)
"""Dispatched ``a @ b`` of one einsum step (2-D or batched 3-D)."""
