"""One output tile of a matrix product, K-blocked to fit SBUF, built from trncore's shared blocks."""

from __future__ import annotations

from typing import Any

from trncore.kernels.matmul import k_tiles_per_block, matmul_tile
from trncore.kernels.tiles import ceil_div, load_block
from trncore.lang import nl

__all__ = ["product_tile"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def product_tile(
    acc: Any,
    lhs: Any,
    rhs: Any,
    k_total: Any,
    m0: Any,
    ms: Any,
    n0: Any,
    ns: Any,
    lhs_batch: Any = 0,
    rhs_batch: Any = 0,
    transpose_lhs: Any = False,
    transpose_rhs: Any = False,
    tile_k: Any = 128,
) -> Any:
    """``acc[0:ms, 0:ns] = Σ_k L[k, m0 + m] · R[k, n0 + n]`` with ``L``/``R`` whole HBM arguments.

    ``L`` is ``lhs`` (or ``lhs[lhs_batch]`` for a 3-D argument) with the contraction along its
    rows, or its transpose when ``transpose_lhs``; ``R`` likewise. The contraction is loaded in
    blocks of K tiles that fit SBUF (:func:`trncore.kernels.k_tiles_per_block`) with
    :func:`trncore.kernels.load_block`, and each block is chained into the one PSUM accumulation
    group of ``acc`` by :func:`trncore.kernels.matmul_tile` (a fresh group for the first block).
    ``ms ≤ 128``, ``ns ≤ 512`` and ``acc`` a float32 PSUM tile (AWS NKI docs, nki.isa.nc_matmul (NKI
    0.3.0)).
    """
    kt = ceil_div(k_total, tile_k)
    # float32 pairs only with float32 on the Tensor Engine (nki.isa.nc_matmul, NKI 0.3.0): operands of
    # different dtypes are both loaded as float32 (the DMA casts, AWS NKI docs, nki.isa.dma_copy (NKI
    # 0.3.0)).
    lhs_dt = lhs.dtype if lhs.dtype == rhs.dtype else nl.float32
    rhs_dt = rhs.dtype if lhs.dtype == rhs.dtype else nl.float32
    per_block = k_tiles_per_block(k_total, (ms + ns) * 4, tile_k=tile_k)
    for blk, t0 in enumerate(range(0, kt, per_block)):
        nt = min(per_block, kt - t0)
        k0 = t0 * tile_k
        rows = min(nt * tile_k, k_total - k0)
        st = nl.ndarray((tile_k, nt, ms), lhs_dt, buffer=nl.sbuf)
        load_block(st, lhs, k0, rows, m0, ms, transposed=transpose_lhs, batch=lhs_batch, tile=tile_k)
        mv = nl.ndarray((tile_k, nt, ns), rhs_dt, buffer=nl.sbuf)
        load_block(mv, rhs, k0, rows, n0, ns, transposed=transpose_rhs, batch=rhs_batch, tile=tile_k)
        matmul_tile(acc, st, mv, rows, m=ms, n=ns, tile_k=tile_k, start=blk == 0)
