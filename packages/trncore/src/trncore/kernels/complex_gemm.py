"""Complex GEMM on split planes: ``C = op(A) @ op(B) (+ bias)`` for any shape, on the Tensor Engine.

``complex_matmul_kernel(ar, ai, br, bi, [bias_r, bias_i], trans_a=..., trans_b=..., gauss=...)``
returns ``(cr, ci)``, float32 ``(M, N)``. ``op(A)`` is ``A`` ``(M, K)`` or, with ``trans_a``, the
transpose of an ``(K, M)`` argument; likewise ``B`` ``(K, N)``. Transposes are DMA access patterns
(:func:`trncore.kernels.load_block`), never copies. Tiling is trncore's shared block: M in tiles of
128 (the stationary's free size and PSUM partitions), N in tiles of 512 (one PSUM bank of fp32),
K in tiles of 128 chained into PSUM by :func:`trncore.kernels.matmul_tile`, K blocks sized by
:func:`trncore.kernels.k_tiles_per_block`; ragged edges are clipped tiles (no shape is assumed a
multiple of a tile).

Products per output tile:

* four multiplications (``gauss=False``): ``Cr = Ar Br + (-Ai) Bi`` and ``Ci = Ar Bi + Ai Br``, each
  a chain accumulated in one PSUM tile; ``-Ai`` is negated once per stationary block on GpSimd;
* three (``gauss=True``): ``k1 = (Ar + Ai) Br``, ``k2 = Ar (Bi - Br)``, ``k3 = Ai (Br + Bi)``,
  ``Cr = k1 - k3``, ``Ci = k1 + k2``: a quarter less Tensor Engine time for three block additions
  (GpSimd) and two PSUM combines (Vector Engine).

The optional bias ``(N,)`` planes are added in the epilogue (broadcast over rows by a stride-0
partition pattern of the DMA, AWS NKI Access Patterns deep dive (NKI 0.3.0)).
"""

from __future__ import annotations

from typing import Any

from trncore.kernels.matmul import evict, k_tiles_per_block, matmul_tile
from trncore.kernels.tiles import load_block, spans
from trncore.lang import nisa, nl

__all__ = ["complex_matmul_kernel", "use_gauss"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def use_gauss(m: int, n: int) -> bool:
    """Whether a launch of ``(m, n)`` output should take the three-multiplication form: it pays
    once the block additions are amortised over whole tiles (the rule every driver shares)."""
    return m >= _TILE_M and n >= _TILE_N

_TILE_M = 128
_TILE_K = 128
_TILE_N = 512


def _combine(dst: Any, a: Any, b: Any, op: Any) -> None:
    nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=op, engine=nisa.gpsimd_engine)


def complex_matmul_kernel(
    ar: Any,
    ai: Any,
    br: Any,
    bi: Any,
    bias_r: Any = None,
    bias_i: Any = None,
    trans_a: bool = False,
    trans_b: bool = False,
    gauss: bool = False,
) -> Any:
    """``(cr, ci) = op(A) @ op(B) (+ bias)`` in float32 for float32 planes of any shape."""
    f32 = nl.float32
    m_dim, k_dim = (ar.shape[1], ar.shape[0]) if trans_a else (ar.shape[0], ar.shape[1])
    n_dim = br.shape[0] if trans_b else br.shape[1]
    cr = nl.ndarray((m_dim, n_dim), dtype=f32, buffer=nl.shared_hbm)
    ci = nl.ndarray((m_dim, n_dim), dtype=f32, buffer=nl.shared_hbm)
    planes_a = 2  # stationary planes resident per K row: (Ar, -Ai) or (Ar + Ai, Ai)
    planes_b = 3 if gauss else 2
    per_row = 4 * (planes_a * _TILE_M + planes_b * _TILE_N) * 2  # and their raw loads
    kb = k_tiles_per_block(k_dim, per_row, tile_k=_TILE_K)
    k_blocks = spans(k_dim, kb * _TILE_K)
    for m0, msz in spans(m_dim, _TILE_M):
        for n0, nsz in spans(n_dim, _TILE_N):
            acc = []
            for _ in range(3 if gauss else 2):
                acc.append(nl.ndarray((_TILE_M, _TILE_N), dtype=f32, buffer=nl.psum))
            for kbi, (k0, ksz) in enumerate(k_blocks):
                tiles = -(-ksz // _TILE_K)
                sa_r = nl.ndarray((_TILE_K, tiles, _TILE_M), dtype=f32, buffer=nl.sbuf)
                sa_i = nl.ndarray((_TILE_K, tiles, _TILE_M), dtype=f32, buffer=nl.sbuf)
                mb_r = nl.ndarray((_TILE_K, tiles, _TILE_N), dtype=f32, buffer=nl.sbuf)
                mb_i = nl.ndarray((_TILE_K, tiles, _TILE_N), dtype=f32, buffer=nl.sbuf)
                # A block as stationary (K on partitions): A^T rows; B block as moving.
                load_block(sa_r, ar, k0, ksz, m0, msz, transposed=not trans_a)
                load_block(sa_i, ai, k0, ksz, m0, msz, transposed=not trans_a)
                load_block(mb_r, br, k0, ksz, n0, nsz, transposed=trans_b)
                load_block(mb_i, bi, k0, ksz, n0, nsz, transposed=trans_b)
                start = kbi == 0
                if gauss:
                    s_a = nl.ndarray((_TILE_K, tiles, _TILE_M), dtype=f32, buffer=nl.sbuf)
                    d_b = nl.ndarray((_TILE_K, tiles, _TILE_N), dtype=f32, buffer=nl.sbuf)
                    s_b = nl.ndarray((_TILE_K, tiles, _TILE_N), dtype=f32, buffer=nl.sbuf)
                    for t, (_o, rows) in enumerate(spans(ksz, _TILE_K)):
                        _combine(
                            s_a[0:rows, t, 0:msz], sa_r[0:rows, t, 0:msz], sa_i[0:rows, t, 0:msz], nl.add
                        )
                        _combine(
                            d_b[0:rows, t, 0:nsz], mb_i[0:rows, t, 0:nsz], mb_r[0:rows, t, 0:nsz], nl.subtract
                        )
                        _combine(
                            s_b[0:rows, t, 0:nsz], mb_r[0:rows, t, 0:nsz], mb_i[0:rows, t, 0:nsz], nl.add
                        )
                    matmul_tile(acc[0], s_a, mb_r, ksz, m=msz, n=nsz, start=start)
                    matmul_tile(acc[1], sa_r, d_b, ksz, m=msz, n=nsz, start=start)
                    matmul_tile(acc[2], sa_i, s_b, ksz, m=msz, n=nsz, start=start)
                else:
                    neg_i = nl.ndarray((_TILE_K, tiles, _TILE_M), dtype=f32, buffer=nl.sbuf)
                    for t, (_o, rows) in enumerate(spans(ksz, _TILE_K)):
                        nisa.tensor_scalar(
                            dst=neg_i[0:rows, t, 0:msz],
                            data=sa_i[0:rows, t, 0:msz],
                            op0=nl.multiply,
                            operand0=-1.0,
                        )
                    matmul_tile(acc[0], sa_r, mb_r, ksz, m=msz, n=nsz, start=start)
                    matmul_tile(acc[0], neg_i, mb_i, ksz, m=msz, n=nsz, start=False)
                    matmul_tile(acc[1], sa_r, mb_i, ksz, m=msz, n=nsz, start=start)
                    matmul_tile(acc[1], sa_i, mb_r, ksz, m=msz, n=nsz, start=False)
            out_r = nl.ndarray((_TILE_M, _TILE_N), dtype=f32, buffer=nl.sbuf)
            out_i = nl.ndarray((_TILE_M, _TILE_N), dtype=f32, buffer=nl.sbuf)
            if gauss:
                k1 = nl.ndarray((_TILE_M, _TILE_N), dtype=f32, buffer=nl.sbuf)
                evict(k1[0:msz, 0:nsz], acc[0][0:msz, 0:nsz], on_scalar=True)
                nisa.tensor_tensor(
                    dst=out_r[0:msz, 0:nsz],
                    data1=k1[0:msz, 0:nsz],
                    data2=acc[2][0:msz, 0:nsz],
                    op=nl.subtract,
                )
                nisa.tensor_tensor(
                    dst=out_i[0:msz, 0:nsz], data1=k1[0:msz, 0:nsz], data2=acc[1][0:msz, 0:nsz], op=nl.add
                )
            else:
                evict(out_r[0:msz, 0:nsz], acc[0][0:msz, 0:nsz], on_scalar=True)
                evict(out_i[0:msz, 0:nsz], acc[1][0:msz, 0:nsz])
            if bias_r is not None:
                for out, bias in ((out_r, bias_r), (out_i, bias_i)):
                    row = nl.ndarray((_TILE_M, _TILE_N), dtype=f32, buffer=nl.sbuf)
                    # every partition reads the same bias slice: partition step 0 on the HBM side
                    nisa.dma_copy(dst=row[0:msz, 0:nsz], src=bias.ap([[0, msz], [1, nsz]], offset=n0))
                    nisa.tensor_tensor(
                        dst=out[0:msz, 0:nsz], data1=out[0:msz, 0:nsz], data2=row[0:msz, 0:nsz], op=nl.add
                    )
            nisa.dma_copy(dst=cr[m0 : m0 + msz, n0 : n0 + nsz], src=out_r[0:msz, 0:nsz])
            nisa.dma_copy(dst=ci[m0 : m0 + msz, n0 : n0 + nsz], src=out_i[0:msz, 0:nsz])
    return cr, ci
