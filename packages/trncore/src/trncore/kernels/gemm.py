"""GEMM on the Tensor Engine: ``out = alpha · op(a) @ op(b) (+ c)`` for any M, K, N, batched.

The one GEMM kernel of the suite: trnblas launches it for gemm, batched_gemm, symm, trmm, syr2k
and TRSM's trailing updates, trntensor for every GEMM-shaped einsum step. Tile sizes are
parameters, so one source serves every shape.

Layout (AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0)): ``nc_matmul`` contracts over partitions, so both
operands are loaded with K on partitions — the stationary block is ``op(a)ᵀ`` (K × block_m), the moving
block ``op(b)`` (K × tile_n). Whether that is a plain or a transposed read of the HBM tensor depends on
the ``trans_*`` flags and is decided in the DMA access pattern, never by a host transpose.

Blocking, sized for the cost model (one DMA costs 0.6 µs plus its bytes; AWS NKI DGE reference, NKI
0.3.0):

* per batch and M block (``block_m`` rows, at most ``block_m/128`` PSUM banks live; eight 2 KiB banks
  per partition, AWS Trainium/Inferentia2 Architecture Guide for NKI, NKI 0.3.0), the stationary block
  for all of K is loaded **once** when K fits the SBUF budget and reused by every N tile (stationary
  reuse); otherwise K is split into blocks and both operands stream per block;
* each N tile loads one moving block with one DMA (plus one for a ragged K tail) and accumulates
  ``block_m/128`` PSUM tiles over K with :func:`trncore.kernels.matmul_tile`;
* results are evicted alternately by VectorE and ScalarE (``alpha`` folded into the copy) and
  stored with one DMA per M block and N tile.

Ragged edges use clipped tiles (``spans``): no size has to be a multiple of 128, and the drivers
pad only to bucket shapes (fewer kernel keys), not for correctness. Inputs: float32 pairs or
bfloat16/float16 pairs (the pairing rule of nki.isa.nc_matmul, AWS NKI docs, NKI 0.3.0); accumulation
and output are float32.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels.matmul import evict, k_tiles_per_block, matmul_tile
from trncore.kernels.tiles import ceil_div, dtype_bytes, load_block, spans, store_block
from trncore.lang import nisa, nl

__all__ = ["gemm_kernel", "gemm_update_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def _dims(x: Any, trans: int) -> tuple[int, int, int]:
    """(batch, rows of op(x), cols of op(x)) of a 2-D or 3-D operand."""
    shape = tuple(x.shape)
    batch = shape[0] if len(shape) == 3 else 1
    r, c = shape[-2], shape[-1]
    return (batch, c, r) if trans else (batch, r, c)


def _gemm_body(
    out: Any,
    a: Any,
    b: Any,
    c: Any,
    trans_a: int,
    trans_b: int,
    alpha: float,
    tile_n: int,
    block_m: int,
    sbuf_budget: int,
) -> None:
    ba, m_dim, k_dim = _dims(a, trans_a)
    bb, _, n_dim = _dims(b, trans_b)
    batch = max(ba, bb)
    bm = min(block_m, ceil_div(m_dim, 128) * 128)
    tn = min(tile_n, n_dim)
    isz = max(dtype_bytes(a.dtype), dtype_bytes(b.dtype))
    kb = k_tiles_per_block(k_dim, (bm + tn) * isz, budget=sbuf_budget)
    k_blocks = spans(k_dim, kb * 128)
    resident = len(k_blocks) == 1
    out3 = len(out.shape) == 3
    for bi in range(batch):
        ia = bi if ba > 1 else 0
        ib = bi if bb > 1 else 0
        io = bi if out3 else 0
        for m0, msz in spans(m_dim, bm):
            m_tiles = spans(msz, 128)
            st = None
            if resident:
                # Stationary reuse: op(a)ᵀ for this M block and all of K, loaded once.
                st = nl.ndarray((128, kb, bm), a.dtype, buffer=nl.sbuf)
                load_block(st, a, 0, k_dim, m0, msz, transposed=not trans_a, batch=ia)
            for n0, nsz in spans(n_dim, tn):
                psums = []
                for _ in m_tiles:
                    psums.append(nl.ndarray((128, tn), nl.float32, buffer=nl.psum))
                for kbi, (k0, ksz) in enumerate(k_blocks):
                    if not resident:
                        st = nl.ndarray((128, kb, bm), a.dtype, buffer=nl.sbuf)
                        load_block(st, a, k0, ksz, m0, msz, transposed=not trans_a, batch=ia)
                    mv = nl.ndarray((128, kb, tn), b.dtype, buffer=nl.sbuf)
                    load_block(mv, b, k0, ksz, n0, nsz, transposed=bool(trans_b), batch=ib)
                    for (mo, ms), ps in zip(m_tiles, psums):
                        matmul_tile(ps, st, mv, ksz, m0=mo, m=ms, n=nsz, start=kbi == 0)
                res = nl.ndarray((128, len(m_tiles), tn), nl.float32, buffer=nl.sbuf)
                if c is not None:
                    ct = nl.ndarray((128, len(m_tiles), tn), nl.float32, buffer=nl.sbuf)
                    load_block(ct, c, m0, msz, n0, nsz, batch=io)
                for t, ((_mo, ms), ps) in enumerate(zip(m_tiles, psums)):
                    dst = res[0:ms, t, 0:nsz]
                    if c is None:
                        evict(dst, ps[0:ms, 0:nsz], scale=alpha, on_scalar=t % 2 == 1)
                    else:
                        # alpha·(AB) + c in the eviction itself (VectorE reads PSUM and SBUF).
                        nisa.scalar_tensor_tensor(
                            dst=dst, data=ps[0:ms, 0:nsz], op0=nl.multiply, operand0=float(alpha),
                            op1=nl.add, operand1=ct[0:ms, t, 0:nsz],
                        )
                store_block(out, res, m0, msz, n0, nsz, batch=io)


def _out_shape(a: Any, b: Any, trans_a: int, trans_b: int) -> tuple[int, ...]:
    ba, m_dim, _ = _dims(a, trans_a)
    bb, _, n_dim = _dims(b, trans_b)
    if len(a.shape) == 3 or len(b.shape) == 3:
        return (max(ba, bb), m_dim, n_dim)
    return (m_dim, n_dim)


def gemm_kernel(
    a: Any,
    b: Any,
    trans_a: int = 0,
    trans_b: int = 0,
    alpha: float = 1.0,
    tile_n: int = 512,
    block_m: int = 512,
    sbuf_budget: int = 144 * 1024,
) -> Any:
    """``alpha · op(a) @ op(b)`` in float32, over a batch when ``a`` or ``b`` is 3-D.

    ``a`` is ``(M, K)`` (``(K, M)`` with ``trans_a``), ``b`` is ``(K, N)`` (``(N, K)`` with
    ``trans_b``), each optionally with a leading batch dimension; a batch of 1 broadcasts against
    the other operand's batch without being copied. Returns ``(M, N)`` or ``(batch, M, N)``
    float32 in ``shared_hbm``. ``tile_n`` ≤ 512 and ``block_m`` (a multiple of 128, ≤ 1024) are
    tile parameters; ``sbuf_budget`` bounds the operand blocks' bytes per partition.
    """
    out = nl.ndarray(_out_shape(a, b, trans_a, trans_b), nl.float32, buffer=nl.shared_hbm)
    _gemm_body(out, a, b, None, trans_a, trans_b, alpha, tile_n, block_m, sbuf_budget)
    return out


def gemm_update_kernel(
    a: Any,
    b: Any,
    c: Any,
    trans_a: int = 0,
    trans_b: int = 0,
    alpha: float = 1.0,
    tile_n: int = 512,
    block_m: int = 512,
    sbuf_budget: int = 128 * 1024,
) -> Any:
    """``alpha · op(a) @ op(b) + c`` in float32 (the fused update of blocked TRSM and ``beta·c``).

    As :func:`gemm_kernel`, with ``c`` of the output's shape (any float dtype; the DMA casts it
    to float32). The addition happens in the PSUM eviction, so ``c`` costs one extra load and no
    extra pass over the result.
    """
    out = nl.ndarray(_out_shape(a, b, trans_a, trans_b), nl.float32, buffer=nl.shared_hbm)
    _gemm_body(out, a, b, c, trans_a, trans_b, alpha, tile_n, block_m, sbuf_budget)
    return out
