"""trntensor's drivers: the host side of each kernel-backed operation of :mod:`trntensor._ops`.

``contract_gemm`` (every GEMM-shaped einsum step, ``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` or the
unbatched form)
    pads the operands to shape buckets and launches the suite's GEMM kernel,
    :func:`trncore.kernels.gemm_kernel` through the suite's one GEMM host driver
    (:func:`trncore.gemm_driver.launch_gemm`, the one trnblas.gemm uses: the same operands give
    the same kernel key), once per batch chunk; transposed operands arrive as transposed views and
    are read through a transposed DMA pattern.
``ao_to_mo``
    walks the auxiliary index in chunks (unpacking PySCF's triangle layout chunk by chunk, as the
    reference does) and the occupied index in blocks of at most 128, pads every piece to one
    bucketed shape and launches :func:`trntensor.kernels.ao_to_mo_kernel` on it, so a whole
    transform is one kernel key.
``mp2_energy``
    lays the factors out as ``bt[i, P, a]``, splits the occupied orbitals into blocks of
    ``_OCC_BLOCK`` and the virtual ones into chunks that fit SBUF, and launches
    :func:`trntensor.kernels.mp2_energy_block_kernel` once per block pair ``I ≤ J`` (off-diagonal
    pairs count twice). Every launch has the same shapes: one kernel key for any number of
    occupied orbitals. Block energies are added in float64.

DF-MP2 padding is chosen so that it contributes nothing: zero integrals, zero coefficients and
zero factors, and ``d = −1`` on padded orbitals so that no denominator vanishes. Inputs the kernels
do not take raise :class:`~trncore.dispatch.KernelUnsupported` (the reference then runs).
"""

from __future__ import annotations

import math

import torch

from trncore.dispatch import KernelContext, KernelUnsupported
from trncore.gemm_driver import POLICY, launch_gemm
from trncore.keys import bucket_dim
from trncore.padding import TilePolicy, pad_to
from trntensor import _pytorch
from trntensor._precision import kernel_dtype
from trntensor.kernels import ao_to_mo_kernel, mp2_energy_block_kernel

__all__ = [
    "AO_TO_MO_POLICY",
    "GEMM_POLICY",
    "ao_to_mo_driver",
    "ao_to_mo_work",
    "energy_layout",
    "gemm_driver",
    "gemm_work",
    "mp2_driver",
    "mp2_work",
]

# --------------------------------------------------------------------------- GEMM

#: Batches longer than this go out in launches of this many entries (one kernel key), so the
#: unrolled trace of one launch stays bounded however long the batch is.
_BATCH_CHUNK = 16
#: The suite's GEMM padding policy (M, K to 128, N to 64), shared with trnblas.gemm.
GEMM_POLICY = POLICY


def gemm_work(a: torch.Tensor, b: torch.Tensor) -> int:
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def gemm_driver(ctx: KernelContext, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
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
    # The kernel wants each operand with K on the partitions. An operand whose memory is the
    # other way round is handed over as it is and read through a transposed DMA pattern
    # (a compile-time flag), so no transposed copy is made here.
    lhs, t_lhs = (a3.mT, False) if a3.mT.is_contiguous() else (a3, True)  # (b, K, M) or (b, M, K)
    rhs, t_rhs = (b3.mT, True) if b3.mT.is_contiguous() and not b3.is_contiguous() else (b3, False)
    if a.dim() == 2:  # one unbatched launch, as trnblas.gemm makes for the same operands
        lhs, rhs = lhs[0], rhs[0]
    # gemm_kernel computes op(a) @ op(b) with a = (M, K) unless trans_a: lhs is (K, M) when not
    # t_lhs, so trans_a = not t_lhs; rhs is (N, K) exactly when t_rhs.
    out = launch_gemm(
        ctx, lhs, rhs, trans_a=not t_lhs, trans_b=t_rhs, dtype=dtype, batch_chunk=_BATCH_CHUNK
    )
    return out.to(a.dtype)


# --------------------------------------------------------------------------- DF-MP2

#: DF-MP2 dimensions are padded to multiples of this (shape buckets: nearby sizes share a kernel key).
_ALIGN = 32


#: Occupied orbitals per launch of the energy kernel (its trace holds _OCC_BLOCK² pairs).
_OCC_BLOCK = 8


#: Most occupied orbitals per launch of the transform (the stationary free size, AWS NKI docs,
#: nki.isa.nc_matmul (NKI 0.3.0)).
_AO_OCC_BLOCK = 128


#: Float32 elements of factor slices per partition the energy kernel may hold in SBUF: the J
#: block's and one i's slices of (naux tiles × chunk), 128 KiB, leaving room for its work tiles
#: under trn1's 176 KiB usable SBUF per partition (docs/hardware.md).
_SBUF_FACTOR_ELEMENTS = 32 * 1024


_TILE_K = 128


def _pow2_at_most(n: int, cap: int) -> int:
    return min(cap, 1 << (max(1, n) - 1).bit_length())


def ao_to_mo_work(eri3c: torch.Tensor, c_occ: torch.Tensor, c_vir: torch.Tensor) -> int:
    n, nocc, nvir = c_occ.shape[0], c_occ.shape[1], c_vir.shape[1]
    naux = eri3c.shape[2] if eri3c.dim() == 3 else eri3c.shape[0]
    return 2 * nocc * n * naux * (n + nvir)


def ao_to_mo_driver(
    ctx: KernelContext, eri3c: torch.Tensor, c_occ: torch.Tensor, c_vir: torch.Tensor
) -> torch.Tensor:
    dtype = kernel_dtype(eri3c.dtype, "ao_to_mo")
    n, nocc, nvir = c_occ.shape[0], c_occ.shape[1], c_vir.shape[1]
    packed = eri3c.dim() == 2
    naux = eri3c.shape[0] if packed else eri3c.shape[2]
    out = torch.zeros(nocc, nvir, naux, dtype=eri3c.dtype, device=eri3c.device)
    if min(n, nocc, nvir, naux) == 0:
        return out
    n_p, nvir_p = bucket_dim(n, _ALIGN), bucket_dim(nvir, _ALIGN)
    # Pass 2 of the kernel costs in proportion to the occupied block: pad it to a multiple of 8
    # only (linear bucketing), not to a power of two.
    occ_block = min(bucket_dim(nocc, 8), _AO_OCC_BLOCK)
    # Auxiliary chunk: all of it when the dense chunk fits the unpacking budget, else the
    # largest aligned chunk that does; the last chunk is padded to the same size (one key).
    fit = max(_ALIGN, _pytorch.UNPACK_BUDGET // (n_p * n_p * 4) // _ALIGN * _ALIGN)
    chunk = min(bucket_dim(naux, _ALIGN), fit)
    index = _pytorch.tril_pair_index(n, eri3c.device) if packed else None
    c_vir_p = pad_to(c_vir.to(dtype), (n_p, nvir_p)).contiguous()
    for p0 in range(0, naux, chunk):
        pc = min(chunk, naux - p0)
        if index is not None:  # packed
            dense = _pytorch.unpack_tril(eri3c[p0 : p0 + pc], index, n)
        else:
            dense = eri3c[:, :, p0 : p0 + pc]
        rows = pad_to(dense.to(dtype), (n_p, n_p, chunk)).contiguous().reshape(n_p, n_p * chunk)
        for o0 in range(0, nocc, occ_block):
            oc = min(occ_block, nocc - o0)
            c_occ_p = pad_to(c_occ[:, o0 : o0 + oc].to(dtype), (n_p, occ_block)).contiguous()
            res = ctx.launch(ao_to_mo_kernel, rows, c_occ_p, c_vir_p)
            out[o0 : o0 + oc, :, p0 : p0 + pc] = res[:oc, :nvir, :pc].to(out.dtype)
    return out


def mp2_work(b: torch.Tensor, d: torch.Tensor, budget: int) -> int:
    n, nvir, naux = b.shape
    return 2 * n * n * nvir * nvir * naux


def energy_layout(nocc: int, nvir: int, naux: int) -> tuple[int, int, int, int]:
    """``(occupied block, padded naux, virtual chunk, padded nvir)`` of the energy kernel.

    The virtual chunk is the largest aligned width (≤ 512, one PSUM bank) for which the factor
    slices the kernel keeps in SBUF (``2·block + 2`` of them) fit its share; nvir is padded to a
    whole number of chunks.
    """
    naux_p = bucket_dim(naux, _ALIGN)
    nvir_p = bucket_dim(nvir, _ALIGN)
    block = _pow2_at_most(nocc, _OCC_BLOCK)
    k_tiles = math.ceil(naux_p / _TILE_K)
    fit = _SBUF_FACTOR_ELEMENTS // ((2 * block + 2) * k_tiles) // _ALIGN * _ALIGN
    if fit < _ALIGN:
        raise KernelUnsupported(
            f"naux={naux} needs {k_tiles} contraction tiles, more than the energy kernel keeps in SBUF"
        )
    chunk = min(nvir_p, 512, fit)
    return block, naux_p, chunk, math.ceil(nvir_p / chunk) * chunk


def mp2_driver(ctx: KernelContext, b: torch.Tensor, d: torch.Tensor, budget: int) -> torch.Tensor:
    dtype = kernel_dtype(b.dtype, "mp2_energy")
    n, nvir, naux = b.shape
    ob, naux_p, chunk, nvir_p = energy_layout(n, nvir, naux)
    n_p = math.ceil(n / ob) * ob
    bt = torch.zeros(n_p, naux_p, nvir_p, dtype=dtype, device=b.device)
    bt[:n, :naux, :nvir] = b.transpose(1, 2).to(dtype)
    dd = torch.full((n_p, nvir_p), -1.0, dtype=torch.float32, device=b.device)
    dd[:n, :nvir] = d.to(torch.float32)
    occ = range(0, n_p, ob)
    vir = range(0, nvir_p, chunk)
    # Contiguous pieces, made once: every launch takes whole tensors of one shape.
    bt_blocks = {(i, a): bt[i : i + ob, :, a : a + chunk].contiguous() for i in occ for a in vir}
    d_blocks = {(i, a): dd[i : i + ob, a : a + chunk].contiguous() for i in occ for a in vir}
    del bt, dd  # the blocks are copies: keep one copy of B alive, not two
    total = torch.zeros((), dtype=torch.float64, device=b.device)
    for i in occ:
        for j in occ:
            if j < i:
                continue
            for a in vir:
                for c in vir:
                    # Within a diagonal block pair, chunk pairs (A, B) and (B, A) are equal.
                    if i == j and c < a:
                        continue
                    weight = (1 if i == j else 2) * (1 if (i != j or a == c) else 2)
                    part = ctx.launch(
                        mp2_energy_block_kernel,
                        bt_blocks[i, a], bt_blocks[j, c], bt_blocks[j, a], bt_blocks[i, c],
                        d_blocks[i, a], d_blocks[j, c],
                    )
                    total = total + weight * part.reshape(()).to(torch.float64)
    return total  # float64, like the reference for single-precision inputs


#: The AO→MO transform's padding (its driver buckets with the same alignment).
AO_TO_MO_POLICY = TilePolicy({"N": _ALIGN, "V": _ALIGN, "P": _ALIGN})
