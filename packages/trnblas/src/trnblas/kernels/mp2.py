"""The closed-shell MP2 energy on chip, from amplitudes or fused with their DF construction.

``E = Σ_{i∈chunk, j, a, b} T[i,j,a,b] (2 T[i,j,a,b] − T[i,j,b,a]) / (εi + εj − εa − εb)``. Both
kernels reduce tiles with :func:`trncore.kernels.mp2_energy_tile` (``a`` on partitions) into a
per-partition running sum, and finish with :func:`trncore.kernels.partition_sum` on the Tensor
Engine; the output is a ``(1, 1)`` float32 tensor. Sizes are arbitrary (``nvir`` prime included):
every tile is clipped with ``spans``.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import (
    ceil_div,
    dtype_bytes,
    evict,
    load_block,
    matmul_tile,
    mp2_energy_tile,
    partition_sum,
    spans,
)
from trncore.lang import nisa, nl

__all__ = ["mp2_energy_df_kernel", "mp2_energy_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def _start(out_shape: tuple[int, int]) -> tuple[Any, Any, Any]:
    out = nl.ndarray(out_shape, nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    ones = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    return out, acc, ones


def _finish(out: Any, acc: Any, ones: Any) -> None:
    ps = nl.ndarray((1, 1), nl.float32, buffer=nl.psum)
    partition_sum(ps, acc, ones)
    res = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)


def _broadcast(vec: Any, parts: int, offset: int, pattern: list[list[int]]) -> Any:
    """A view of a 1-D HBM vector repeated on ``parts`` partitions (partition step 0)."""
    return vec.ap(pattern=[[0, parts], *pattern], offset=offset)


def _shifts(eps_occ_chunk: Any, eps_vir: Any, a0: int, asz: int, ni: int) -> Any:
    """``shift[a, i] = εi − εa`` for the virtual orbitals ``a0 .. a0+asz`` (SBUF, float32)."""
    ea = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ea[0:asz], src=eps_vir.ap(pattern=[[1, asz], [1, 1]], offset=a0))
    ei = nl.ndarray((128, ni), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ei[0:asz], src=_broadcast(eps_occ_chunk, asz, 0, [[1, ni]]))
    shift = nl.ndarray((128, ni), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=shift[0:asz], data=ei[0:asz], op0=nl.subtract, operand0=ea[0:asz])
    return shift


def mp2_energy_kernel(
    t_flat: Any, eps_occ_chunk: Any, eps_occ_full: Any, eps_vir: Any, free_max: int = 2048
) -> Any:
    """MP2 energy of a chunk of amplitudes ``T[i,j,a,b] = t_flat[i·nvir + a, j·nvir + b]``.

    ``t_flat`` is ``(ni·nvir, nocc·nvir)`` (float32 or bfloat16), the energies are 1-D float32
    vectors of lengths ``ni``, ``nocc``, ``nvir``. Per virtual block of ≤ 128 ``a`` and per chunk
    of ``(j, b)`` of at most ``free_max`` elements, ``T`` and the swapped ``T[i,j,b,a]`` are read
    with one DMA each — the swap is an access pattern of that DMA (element-strided), not a copy —
    and reduced by :func:`trncore.kernels.mp2_energy_tile`. Returns ``(1, 1)`` float32.
    """
    ni, nocc, nvir = eps_occ_chunk.shape[0], eps_occ_full.shape[0], eps_vir.shape[0]
    cols = t_flat.shape[1]
    if nvir <= free_max:
        jb = max(1, free_max // nvir)
        chunks = [(j0, js, 0, nvir) for j0, js in spans(nocc, jb)]
    else:
        chunks = [(j0, 1, b0, bs) for j0 in range(nocc) for b0, bs in spans(nvir, free_max)]
    out, acc, ones = _start((1, 1))
    for a0, asz in spans(nvir, 128):
        shift = _shifts(eps_occ_chunk, eps_vir, a0, asz, ni)
        for j0, js, b0, bs in chunks:
            ej = nl.ndarray((128, js, bs), nl.float32, buffer=nl.sbuf)
            eb = nl.ndarray((128, js, bs), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=ej[0:asz], src=_broadcast(eps_occ_full, asz, j0, [[1, js], [0, bs]]))
            nisa.dma_copy(dst=eb[0:asz], src=_broadcast(eps_vir, asz, b0, [[0, js], [1, bs]]))
            row = nl.ndarray((128, js, bs), nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=row[0:asz], data1=ej[0:asz], data2=eb[0:asz], op=nl.subtract)
            for i in range(ni):
                t = nl.ndarray((128, js, bs), t_flat.dtype, buffer=nl.sbuf)
                ts = nl.ndarray((128, js, bs), t_flat.dtype, buffer=nl.sbuf)
                # t[a, j, b] = T_flat[i·nvir + a, j·nvir + b]
                nisa.dma_copy(
                    dst=t[0:asz],
                    src=t_flat.ap(pattern=[[cols, asz], [nvir, js], [1, bs]],
                                  offset=(i * nvir + a0) * cols + j0 * nvir + b0),
                )
                # ts[a, j, b] = T_flat[i·nvir + b, j·nvir + a]: the swap folded into the DMA.
                nisa.dma_copy(
                    dst=ts[0:asz],
                    src=t_flat.ap(pattern=[[1, asz], [nvir, js], [cols, bs]],
                                  offset=(i * nvir + b0) * cols + j0 * nvir + a0),
                )
                scratch = nl.ndarray((128, 2, js * bs), nl.float32, buffer=nl.sbuf)
                mp2_energy_tile(acc[0:asz], t[0:asz], ts[0:asz], row[0:asz], shift[0:asz, i : i + 1],
                                scratch[0:asz])
    _finish(out, acc, ones)
    return out


def mp2_energy_df_kernel(
    b_chunk: Any,
    b_full: Any,
    eps_occ_chunk: Any,
    eps_occ_full: Any,
    eps_vir: Any,
    tile_b: int = 512,
    sbuf_budget: int = 96 * 1024,
) -> Any:
    """MP2 energy with ``T[i,j,a,b] = Σ_Q B[i·nvir + a, Q] · B[j·nvir + b, Q]`` formed in PSUM.

    ``b_chunk`` is ``(ni·nvir, naux)`` (the chunk's occupied orbitals) and ``b_full``
    ``(nocc·nvir, naux)``, float32 or bfloat16; the energies as in :func:`mp2_energy_kernel`. The
    factors are loaded transposed (Q on partitions, the transpose folded into the DMA) — all of
    them once when ``ceil(naux/128)·(ni + nocc)·nvir`` elements per partition fit
    ``sbuf_budget`` bytes, else ``Bⱼᵀ`` per ``j``. Each ``T`` tile and its swap
    ``T[i,j,b,a] = Σ_Q B[j·nvir+a, Q] B[i·nvir+b, Q]`` come from two matmul chains into PSUM and
    are reduced there: ``T`` never goes to HBM. Returns ``(1, 1)`` float32.
    """
    ni, nocc, nvir = eps_occ_chunk.shape[0], eps_occ_full.shape[0], eps_vir.shape[0]
    naux = b_full.shape[1]
    kq = ceil_div(naux, 128)
    tb = min(tile_b, nvir)
    isz = dtype_bytes(b_full.dtype)
    resident = kq * (ni + nocc) * nvir * isz <= sbuf_budget
    out, acc, ones = _start((1, 1))
    eb = nl.ndarray((128, nvir), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=eb, src=_broadcast(eps_vir, 128, 0, [[1, nvir]]))
    ej = nl.ndarray((128, nocc), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ej, src=_broadcast(eps_occ_full, 128, 0, [[1, nocc]]))
    a_blocks = spans(nvir, 128)
    shifts = [_shifts(eps_occ_chunk, eps_vir, a0, asz, ni) for a0, asz in a_blocks]
    if resident:
        bi_all = nl.ndarray((128, kq, ni * nvir), b_chunk.dtype, buffer=nl.sbuf)
        load_block(bi_all, b_chunk, 0, naux, 0, ni * nvir, transposed=True)
        bj_all = nl.ndarray((128, kq, nocc * nvir), b_full.dtype, buffer=nl.sbuf)
        load_block(bj_all, b_full, 0, naux, 0, nocc * nvir, transposed=True)
    for i in range(ni):
        if resident:
            bi, oi = bi_all, i * nvir
        else:
            bi, oi = nl.ndarray((128, kq, nvir), b_chunk.dtype, buffer=nl.sbuf), 0
            load_block(bi, b_chunk, 0, naux, i * nvir, nvir, transposed=True)
        for j in range(nocc):
            if resident:
                bj, oj = bj_all, j * nvir
            else:
                bj, oj = nl.ndarray((128, kq, nvir), b_full.dtype, buffer=nl.sbuf), 0
                load_block(bj, b_full, 0, naux, j * nvir, nvir, transposed=True)
            row = nl.ndarray((128, nvir), nl.float32, buffer=nl.sbuf)
            # row[p, b] = εj − εb
            nisa.tensor_scalar(dst=row, data=eb, op0=nl.subtract, operand0=ej[:, j : j + 1], reverse0=True)
            for (a0, asz), shift in zip(a_blocks, shifts):
                for b0, bs in spans(nvir, tb):
                    pt = nl.ndarray((128, tb), nl.float32, buffer=nl.psum)
                    matmul_tile(pt, bi, bj, naux, m0=oi + a0, m=asz, n0=oj + b0, n=bs)
                    pw = nl.ndarray((128, tb), nl.float32, buffer=nl.psum)
                    matmul_tile(pw, bj, bi, naux, m0=oj + a0, m=asz, n0=oi + b0, n=bs)
                    tsw = nl.ndarray((128, tb), nl.float32, buffer=nl.sbuf)
                    evict(tsw[0:asz, 0:bs], pw[0:asz, 0:bs], on_scalar=True)
                    scratch = nl.ndarray((128, 2, tb), nl.float32, buffer=nl.sbuf)
                    mp2_energy_tile(acc[0:asz], pt[0:asz, 0:bs], tsw[0:asz, 0:bs], row[0:asz, b0 : b0 + bs],
                                    shift[0:asz, i : i + 1], scratch[0:asz, :, 0:bs])
    _finish(out, acc, ones)
    return out
