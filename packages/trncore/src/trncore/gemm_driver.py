"""The suite's one GEMM host driver and padding policy: ``op(a) @ op(b)`` on the GEMM kernel.

trnblas (``gemm``, ``batched_gemm`` and the routines built on them) and trntensor (every
GEMM-shaped einsum step) launch :func:`trncore.kernels.gemm.gemm_kernel` through
:func:`launch_gemm`, so the same operand shapes, layouts and dtype give the same kernel key
whichever library asks, and the suite needs one set of compiled kernels.

Padding (:data:`POLICY`): M and K to multiples of 128, N to multiples of 64. K is the contraction
on the partitions and M the stationary free size, both 128 wide on the PE array
(AWS NKI 0.3.0 documentation, "NKI Programming Model" / ``nki.isa.nc_matmul``); a ragged M or K
tile costs a whole pass anyway, so rounding them up costs no Tensor Engine time and merges
shapes into few keys. N is the moving free size, streamed in tiles up to 512 wide: rounding it to
64 rather than 128 keeps the padding waste of narrow products (einsum steps with small N) low.
The kernel itself handles any size with clipped tiles; the padding only buckets shapes. Zeros
leave the product unchanged.

Batches: a 2-D call is one unbatched launch. A 3-D call is one launch over the whole batch
(``batch_chunk=None``; an operand with a batch of one is broadcast by the kernel without a copy),
or launches of ``batch_chunk`` entries at most, the batch of each padded to a power of two
(``batch_chunk=16``: the unrolled trace of one launch stays bounded and short batches need few keys).
"""

from __future__ import annotations

from trncore import platform

try:
    import torch
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

from trncore.dispatch import KernelContext
from trncore.kernels.gemm import gemm_kernel
from trncore.padding import TilePolicy, pad_to

__all__ = ["POLICY", "batch_bucket", "launch_gemm", "padded_operand"]

#: M and K to whole 128 tiles, N to multiples of 64 (see the module docstring).
POLICY = TilePolicy({"M": 128, "K": 128, "N": 64})


def padded_operand(t: torch.Tensor, trans: bool, rows: str, cols: str) -> torch.Tensor:
    """``t`` (stored transposed when ``trans``) padded so ``op(t)`` has bucketed ``rows`` × ``cols``."""
    names = (cols, rows) if trans else (rows, cols)
    return POLICY.pad(t, [None] * (t.dim() - 2) + list(names))


def batch_bucket(batch: int, chunk: int) -> int:
    """Entries per launch for a batch of ``batch``: the next power of two, at most ``chunk``."""
    return min(chunk, 1 << (max(1, batch) - 1).bit_length())


def launch_gemm(
    ctx: KernelContext,
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    trans_a: bool,
    trans_b: bool,
    dtype: torch.dtype,
    batch_chunk: int | None = None,
) -> torch.Tensor:
    """``op(a) @ op(b)`` in float32, cropped to ``(m, n)`` or ``(batch, m, n)``.

    Parameters
    ----------
    ctx : KernelContext
        The calling operation's kernel context (route, target).
    a, b : torch.Tensor
        2-D, or 3-D with batches that are equal or one of them 1. ``a`` is stored ``(M, K)``, or
        ``(K, M)`` when ``trans_a`` (read through a transposed DMA pattern, never copied); ``b``
        is ``(K, N)``, or ``(N, K)`` when ``trans_b``. Non-empty.
    dtype : torch.dtype
        The kernel's input dtype (float32, bfloat16 or float16); operands are cast to it.
    batch_chunk : int, optional
        3-D only: launch at most this many entries at once (see the module docstring).
    """
    m = a.shape[-1] if trans_a else a.shape[-2]
    n = b.shape[-2] if trans_b else b.shape[-1]
    ta, tb = int(trans_a), int(trans_b)
    ap = padded_operand(a.to(dtype), trans_a, "M", "K")
    bp = padded_operand(b.to(dtype), trans_b, "K", "N")
    if a.dim() == 2 or batch_chunk is None:
        out = ctx.launch(gemm_kernel, ap.contiguous(), bp.contiguous(), trans_a=ta, trans_b=tb)
        return out[..., :m, :n]
    nb = max(ap.shape[0], bp.shape[0])
    chunk = batch_bucket(nb, batch_chunk)
    parts = []
    for b0 in range(0, nb, chunk):
        rows = min(chunk, nb - b0)
        pieces = []
        for t in (ap, bp):
            piece = t if t.shape[0] == 1 else t[b0 : b0 + rows]
            if piece.shape[0] != 1:
                piece = pad_to(piece, (chunk, *piece.shape[1:]))
            pieces.append(piece.contiguous())
        res = ctx.launch(gemm_kernel, *pieces, trans_a=ta, trans_b=tb)
        parts.append(res[:rows, :m, :n])
    return torch.cat(parts) if len(parts) > 1 else parts[0]
