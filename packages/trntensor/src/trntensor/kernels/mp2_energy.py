"""Closed-shell DF-MP2 energy of one block of occupied pairs as one NKI kernel.

For occupied blocks ``I``, ``J`` and virtual chunks ``A``, ``B`` the kernel forms, tile by tile,

    T[a, b]  = Σ_P B[i, a, P] B[j, b, P]      (T_ij^ab)
    Tt[a, b] = Σ_P B[j, a, P] B[i, b, P]      (T_ij^ba, the exchange partner)

in PSUM with trncore's shared matmul block and reduces ``T (2T − Tt) / (d[i, a] + d[j, b])``
with trncore's shared MP2 energy block (:func:`trncore.kernels.mp2_energy_tile`),
``d[i, a] = ε_i − ε_a``; T never leaves the chip. The factors arrive as ``bt[i, P, a]`` (the
auxiliary index, the contraction, is what the Tensor Engine wants on the partitions, AWS NKI docs,
nki.isa.nc_matmul (NKI 0.3.0)). The output is the block's energy, summed across partitions on the Tensor
Engine (:func:`trncore.kernels.partition_sum`).

Which orbitals a block holds is data, not part of the kernel: every launch of a run has the same
shapes, so one compiled kernel serves any number of occupied orbitals.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import ceil_div, evict, load_block, matmul_tile, mp2_energy_tile, partition_sum, spans
from trncore.lang import nisa, nl

__all__ = ["mp2_energy_block_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def _factor_block(
    bt: Any,
    i: Any,
    naux: Any,
    width: Any,
    tile_k: Any,
) -> Any:
    """``bt[i]`` (``(naux, width)``) in SBUF as ``(tile_k, naux tiles, width)``."""
    blk = nl.ndarray((tile_k, ceil_div(naux, tile_k), width), nl.float32, buffer=nl.sbuf)
    load_block(blk, bt, 0, naux, 0, width, batch=i, tile=tile_k)
    return blk


def mp2_energy_block_kernel(
    bt_ia: Any,
    bt_jb: Any,
    bt_ja: Any,
    bt_ib: Any,
    d_ia: Any,
    d_jb: Any,
    tile_k: Any = 128,
    tile_m: Any = 128,
    tile_n: Any = 512,
) -> Any:
    """The energy of one block of pairs, a ``(1, 1)`` float32 tensor.

    ``bt_ia[i, P, a]`` / ``bt_ib[i, P, b]`` hold the factors of the ``I`` block over the virtual
    chunks ``A`` and ``B``, ``bt_jb`` / ``bt_ja`` those of the ``J`` block; ``d_ia[i, a]`` and
    ``d_jb[j, b]`` are ``ε_i − ε_a`` (padding entries must be nonzero). The result is
    Σ_{i∈I, j∈J, a∈A, b∈B} T (2T − Tt) / (d_ia + d_jb).

    SBUF holds the J block's factors for the whole launch and one ``i``'s at a time,
    ``(2·|J| + 2) × naux × chunk`` float32 in all; the driver sizes the chunks to fit. Every DMA
    is hoisted out of the pair loop: a DMA costs a fixed ~0.6 µs however small (AWS NKI DGE reference,
    ~600 ns per DMA instruction (NKI 0.3.0)).
    """
    n_i, naux, n_a = bt_ia.shape
    n_j, _, n_b = bt_jb.shape
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((tile_m, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    jb = []
    for j in range(n_j):
        jb.append(_factor_block(bt_jb, j, naux, n_b, tile_k))
    ja = []
    for j in range(n_j):
        ja.append(_factor_block(bt_ja, j, naux, n_a, tile_k))
    # ε_j − ε_b along the free dim, the same rows on every partition: one DMA whose source
    # repeats with partition step 0 (the AWS NKI Access Patterns deep dive, NKI 0.3.0, reads element
    # flat[offset + Σ index·step], so a step of 0 repeats a row).
    vir_rows = nl.ndarray((tile_m, n_j, n_b), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vir_rows, src=d_jb.ap([[0, tile_m], [n_b, n_j], [1, n_b]], offset=0))
    # ε_i − ε_a with a on the partitions and i along the free dim: a transposed DMA pattern.
    shifts = []
    for a0, asz in spans(n_a, tile_m):
        col = nl.ndarray((asz, n_i), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=col, src=d_ia.ap([[1, asz], [n_a, n_i]], offset=a0))
        shifts.append(col)
    # Several j side by side along the free dim when a virtual chunk is narrower than one PSUM
    # bank: each energy-block instruction then covers up to 512 elements per partition, which
    # amortises the fixed cost of every VectorE/ScalarE instruction (AWS Trainium/Inferentia2
    # Architecture Guide for NKI (NKI 0.3.0)).
    group = max(1, min(n_j, tile_n // n_b)) if n_b <= tile_n else 1
    for i in range(n_i):
        ia = _factor_block(bt_ia, i, naux, n_a, tile_k)
        ib = _factor_block(bt_ib, i, naux, n_b, tile_k)
        for a_tile, (a0, asz) in enumerate(spans(n_a, tile_m)):
            for j0, gs in spans(n_j, group):
                for b0, bsz in spans(n_b, tile_n):
                    # One PSUM bank each (gs·bsz ≤ 512 float32); every j fills its own slice as a
                    # separate accumulation group. Slicing a slice follows the 0.3.0 language
                    # guide's example (AWS NKI Language Guide (NKI 0.3.0), Tensor Indexing); no access
                    # pattern is applied to a view.
                    t = nl.ndarray((asz, gs, bsz), nl.float32, buffer=nl.psum)
                    t_psum = nl.ndarray((asz, gs, bsz), nl.float32, buffer=nl.psum)
                    for q in range(gs):
                        j = j0 + q
                        matmul_tile(t[:, q, :], ia, jb[j], naux, m0=a0, m=asz, n0=b0, n=bsz, tile_k=tile_k)
                        matmul_tile(
                            t_psum[:, q, :], ja[j], ib, naux, m0=a0, m=asz, n0=b0, n=bsz, tile_k=tile_k
                        )
                    # The block reads T from PSUM but the exchange partner from SBUF (AWS NKI docs,
                    # nki.isa.tensor_tensor, NKI 0.3.0).
                    t_swap = nl.ndarray((asz, gs, bsz), nl.float32, buffer=nl.sbuf)
                    evict(t_swap, t_psum, on_scalar=True)
                    scratch = nl.ndarray((asz, 2, gs * bsz), nl.float32, buffer=nl.sbuf)
                    mp2_energy_tile(
                        acc[0:asz, :],
                        t,
                        t_swap,
                        vir_rows[0:asz, j0 : j0 + gs, b0 : b0 + bsz],
                        shifts[a_tile][:, i : i + 1],
                        scratch,
                    )
    ones = nl.ndarray((tile_m, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    total = nl.ndarray((1, 1), nl.float32, buffer=nl.psum)
    partition_sum(total, acc, ones)
    res = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    evict(res, total)
    nisa.dma_copy(dst=out, src=res)
    return out
