"""AO→MO transform of 3-index integrals as one NKI kernel, in two Tensor Engine passes.

``B[i, a, P] = Σ_ν C_vir[ν, a] Σ_μ C_occ[μ, i] (μν|P)``:

1. ``H[i, (ν, P)] = Σ_μ C_occ[μ, i] X[μ, (ν, P)]`` — the integrals as a matrix with ``μ`` on the
   partitions and ``(ν, P)`` along the free dimension, so every DMA reads contiguous rows;
2. ``B[i, a, P] = Σ_ν C_vir[ν, a] H[i, ν, P]`` for each occupied ``i``, with ``ν`` on the
   partitions.

Between the passes ``H`` lives in an HBM scratch tensor: pass 2 needs ``ν`` on the partitions
while pass 1 leaves ``i`` there, and only a trip through memory (or a Tensor Engine transpose
per tile) moves an index across partitions. Both passes use trncore's shared blocks
(``load_block``, ``matmul_tile``, ``evict``): each loads its coefficients once, then streams the
other operand and its results in wide blocks of many 512-column tiles, since every DMA carries a
fixed cost (AWS NKI DGE reference, ~600 ns per DMA instruction (NKI 0.3.0)). For a contraction too long
to keep in SBUF (n beyond ~6000) the kernel falls back to K-blocked tiles. Every tile is clipped at the
edges, so any ``nbasis``, ``nocc``, ``nvir`` and ``naux`` work.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import ceil_div, evict, load_block, matmul_tile, product_tile, spans
from trncore.lang import nisa, nl

__all__ = ["ao_to_mo_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"

#: SBUF bytes per partition for one wide moving block (all K tiles) and its wide result. A DMA
#: has a fixed cost of about 0.6 µs however small (AWS NKI DGE reference, NKI 0.3.0), so the kernel
#: moves integrals and results in blocks of many PSUM-bank-wide column tiles instead of one tile at a
#: time.
_WIDE_BYTES = 96 * 1024


def _wide_pass(
    dst: Any,
    dst_offset: Any,
    dst_row: Any,
    stationary: Any,
    moving: Any,
    batch: Any,
    k_total: Any,
    msz: Any,
    width: Any,
    tile_k: Any,
    tile_n: Any,
    wide: Any,
) -> Any:
    """``dst`` rows ``= Σ_k S[k, 0:msz]ᵀ M[k, 0:width]``, moving and storing wide blocks.

    ``stationary`` is an SBUF block holding every K tile of ``S``; ``moving`` an HBM argument
    (entry ``batch`` of a 3-D one) whose rows are the ``k_total`` contraction rows. Row ``r``,
    column ``c`` of the product goes to flat element ``dst_offset + r·dst_row + c`` of the whole
    HBM tensor ``dst`` (an access pattern on the base tensor, never on a view, AWS NKI Access Patterns
    deep dive (NKI 0.3.0)).
    """
    kt = ceil_div(k_total, tile_k)
    for w0, ws in spans(width, wide):
        mv = nl.ndarray((tile_k, kt, ws), moving.dtype, buffer=nl.sbuf)
        load_block(mv, moving, 0, k_total, w0, ws, batch=batch, tile=tile_k)
        res = nl.ndarray((msz, ws), nl.float32, buffer=nl.sbuf)
        for c0, cs in spans(ws, tile_n):
            acc = nl.ndarray((msz, cs), nl.float32, buffer=nl.psum)
            matmul_tile(acc, stationary, mv, k_total, m=msz, n0=c0, n=cs, tile_k=tile_k)
            # Alternate the evictions between VectorE and ScalarE so neither engine queues them all.
            evict(res[:, c0 : c0 + cs], acc, on_scalar=(c0 // tile_n) % 2 == 1)
        nisa.dma_copy(dst=dst.ap([[dst_row, msz], [1, ws]], offset=dst_offset + w0), src=res)


def ao_to_mo_kernel(
    eri_rows: Any,
    c_occ: Any,
    c_vir: Any,
    tile_k: Any = 128,
    tile_m: Any = 128,
    tile_n: Any = 512,
) -> Any:
    """``B[i, a, P]`` (float32) from ``eri_rows[μ, ν·naux + P] = (μν|P)``, ``c_occ``, ``c_vir``.

    ``eri_rows`` is the dense ``(n, n, naux)`` integral tensor viewed as ``(n, n·naux)``;
    ``c_occ`` is ``(n, nocc)`` and ``c_vir`` is ``(n, nvir)``.
    """
    n, width = eri_rows.shape
    naux = width // n
    nocc = c_occ.shape[1]
    nvir = c_vir.shape[1]
    out = nl.ndarray((nocc, nvir, naux), nl.float32, buffer=nl.shared_hbm)
    half = nl.ndarray((nocc, n, naux), nl.float32, buffer=nl.hbm)
    kt = ceil_div(n, tile_k)
    wide = _WIDE_BYTES // ((kt + 1) * 4) // tile_n * tile_n
    if wide >= tile_n:
        # Coefficients loaded once per tile of orbitals; integrals and results in wide blocks.
        for i0, isz in spans(nocc, tile_m):
            occ = nl.ndarray((tile_k, kt, isz), c_occ.dtype, buffer=nl.sbuf)
            load_block(occ, c_occ, 0, n, i0, isz, tile=tile_k)
            _wide_pass(half, i0 * width, width, occ, eri_rows, 0, n, isz, width, tile_k, tile_n, wide)
        for a0, asz in spans(nvir, tile_m):
            # H is float32, and the Tensor Engine pairs float32 only with float32 (nki.isa.nc_matmul,
            # NKI 0.3.0): the coefficients are cast to float32 by the DMA (nki.isa.dma_copy, NKI 0.3.0)
            # whatever their dtype.
            vir = nl.ndarray((tile_k, kt, asz), nl.float32, buffer=nl.sbuf)
            load_block(vir, c_vir, 0, n, a0, asz, tile=tile_k)
            for i in range(nocc):
                base = (i * nvir + a0) * naux
                _wide_pass(out, base, naux, vir, half, i, n, asz, naux, tile_k, tile_n, wide)
        return out
    # A contraction too long for a whole K column in SBUF (n beyond ~6000 basis functions):
    # K-blocked tiles, one PSUM tile at a time.
    for i0, isz in spans(nocc, tile_m):
        for c0, cs in spans(width, tile_n):
            acc = nl.ndarray((isz, cs), nl.float32, buffer=nl.psum)
            product_tile(acc, c_occ, eri_rows, n, i0, isz, c0, cs, tile_k=tile_k)
            res = nl.ndarray((isz, cs), nl.float32, buffer=nl.sbuf)
            evict(res, acc)
            nisa.dma_copy(dst=half.ap([[width, isz], [1, cs]], offset=i0 * width + c0), src=res)
    for a0, asz in spans(nvir, tile_m):
        for i in range(nocc):
            for p0, ps in spans(naux, tile_n):
                acc = nl.ndarray((asz, ps), nl.float32, buffer=nl.psum)
                product_tile(acc, c_vir, half, n, a0, asz, p0, ps, rhs_batch=i, tile_k=tile_k)
                res = nl.ndarray((asz, ps), nl.float32, buffer=nl.sbuf)
                evict(res, acc, on_scalar=True)
                nisa.dma_copy(dst=out[i, a0 : a0 + asz, p0 : p0 + ps], src=res)
    return out
