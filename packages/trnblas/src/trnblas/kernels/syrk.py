"""SYRK on the Tensor Engine: one triangle of ``alpha · op(a) @ op(a)ᵀ``, reading ``a`` once.

``op(a)`` is ``(n, k)``. Both matmul operands are blocks of the same matrix ``op(a)ᵀ`` (K on
partitions, AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0)), so the kernel loads ``op(a)ᵀ`` into SBUF once,
with one DMA per 128 rows of K at most two (whole tiles and a ragged tail), and takes every stationary
and moving tile from it. Only output tiles that meet the selected triangle are computed: about half the
flops of a GEMM. The other triangle of the output is not written (the driver keeps ``c``'s there, as
BLAS does). The driver sends inputs whose ``op(a)ᵀ`` does not fit the SBUF budget to the GEMM kernel.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import ceil_div, evict, load_block, matmul_tile, spans, store_block
from trncore.lang import nl

__all__ = ["syrk_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def syrk_kernel(a: Any, trans: int = 0, lower: int = 1, alpha: float = 1.0, tile_n: int = 512) -> Any:
    """The ``lower`` (1) or upper (0) triangle of ``alpha · op(a) op(a)ᵀ`` in float32.

    ``a`` is ``(n, k)`` (``trans=0``) or ``(k, n)`` (``trans=1``), float32 or bfloat16/float16.
    Returns ``(n, n)`` float32 in ``shared_hbm`` whose tiles outside the triangle are not
    written. Needs ``ceil(k/128) · n · itemsize`` bytes of SBUF per partition.
    """
    shape = tuple(a.shape)
    n, k = (shape[1], shape[0]) if trans else (shape[0], shape[1])
    kt = ceil_div(k, 128)
    out = nl.ndarray((n, n), nl.float32, buffer=nl.shared_hbm)
    # op(a)ᵀ[q + 128 t, col] = op(a)[col, q + 128 t]: a transposed read when trans=0.
    at = nl.ndarray((128, kt, n), a.dtype, buffer=nl.sbuf)
    load_block(at, a, 0, k, 0, n, transposed=not trans)
    for i, (r0, rs) in enumerate(spans(n, 128)):
        # Columns of row block [r0, r0+rs) that meet the triangle.
        c_lo, c_hi = (0, r0 + rs) if lower else (r0, n)
        res = nl.ndarray((128, 1, c_hi - c_lo), nl.float32, buffer=nl.sbuf)
        for j, (c0, cs) in enumerate(spans(c_hi - c_lo, tile_n, start=c_lo)):
            ps = nl.ndarray((128, tile_n), nl.float32, buffer=nl.psum)
            matmul_tile(ps, at, at, k, m0=r0, m=rs, n0=c0, n=cs)
            evict(res[0:rs, 0, c0 - c_lo : c0 - c_lo + cs], ps[0:rs, 0:cs], scale=alpha,
                  on_scalar=(i + j) % 2 == 1)
        store_block(out, res, r0, rs, c_lo, c_hi - c_lo)
    return out
