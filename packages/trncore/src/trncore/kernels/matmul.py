"""Tensor Engine building blocks: a PSUM tile accumulated over K, and its eviction.

``nc_matmul`` computes ``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` with K, M ≤ 128 and
N ≤ 512 on trn1/trn2, both operands in SBUF and ``dst`` a float32 PSUM tile of at most one 2 KiB
bank per partition (AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0); AWS Trainium/Inferentia2 Architecture
Guide for NKI (NKI 0.3.0)). A product with a longer contraction is a chain of such matmuls into one PSUM
tile: :func:`matmul_tile` issues the chain, :func:`evict` copies the finished tile to SBUF, and
:func:`k_tiles_per_block` sizes K blocks to fit SBUF.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels.tiles import spans
from trncore.lang import nisa, nl

__all__ = ["evict", "k_tiles_per_block", "matmul_tile"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def matmul_tile(
    psum: Any,
    stationary: Any,
    moving: Any,
    k: int,
    *,
    m0: int = 0,
    m: int | None = None,
    n0: int = 0,
    n: int | None = None,
    tile_k: int = 128,
    kt0: int = 0,
    start: bool = True,
) -> None:
    """``psum[0:m, 0:n] (+)= Σ_t stationary[0:k_t, kt0+t, m0:m0+m].T @ moving[0:k_t, kt0+t, n0:n0+n]``.

    Contract:

    * ``stationary`` is an SBUF block ``(tile_k, T, ≥ m0+m)`` and ``moving`` an SBUF block
      ``(tile_k, T, ≥ n0+n)`` laid out as :func:`trncore.kernels.tiles.load_block` writes them:
      partition ``q`` of tile ``t`` holds contraction index ``t*tile_k + q``. ``k`` is the number of
      valid contraction rows counted from tile ``kt0``; the last tile is clipped to ``k % tile_k``
      rows (a matmul with K < 128 is legal; it uses fewer PE rows).
    * ``tile_k ≤ 128``, ``m ≤ 128``, ``n ≤ 512`` (limits of nki.isa.nc_matmul, NKI 0.3.0; checked by the
      emulator); ``psum`` is a float32 PSUM tile with at least ``(m, n)`` elements (nki.isa.nc_matmul,
      NKI 0.3.0: dst fp32 on v2/v3).
    * Operand dtypes: bfloat16/float16/fp8 with each other, float32/tfloat32 with each other
      (nki.isa.nc_matmul pairing rule, NKI 0.3.0); accumulation is float32.
    * ``start=True`` overwrites ``psum`` with the first product (``accumulate=False``) and adds the
      rest: a fresh accumulation group, never an add onto uninitialised PSUM (nki.isa.nc_matmul, NKI
      0.6.0 clarification). ``start=False`` continues a group begun by an earlier call (a K block).
    """
    m = stationary.shape[2] - m0 if m is None else m
    n = moving.shape[2] - n0 if n is None else n
    dst = psum[0:m, 0:n]
    for t, (_k_off, k_sz) in enumerate(spans(k, tile_k)):
        nisa.nc_matmul(
            dst=dst,
            stationary=stationary[0:k_sz, kt0 + t, m0 : m0 + m],
            moving=moving[0:k_sz, kt0 + t, n0 : n0 + n],
            accumulate=not (start and t == 0),
        )


def evict(dst: Any, psum: Any, *, scale: float = 1.0, on_scalar: bool = False) -> None:
    """Copy a finished PSUM tile to SBUF (casting to ``dst.dtype``), optionally times ``scale``.

    Contract: ``dst`` (SBUF) and ``psum`` have the same partition count and elements per
    partition. PSUM cannot be DMA'd out directly (AWS NKI 0.3.0 Update Guide), hence this step.
    ``on_scalar`` puts the copy on ScalarE (``activation(op=copy)``, since ``tensor_copy`` is not
    available on ScalarE on trn1, AWS NKI docs, nki.isa.tensor_copy, NKI 0.3.0) so that a kernel can
    alternate engines; otherwise VectorE copies (and scales with ``tensor_scalar``). ``scale`` is a
    compile-time float.
    """
    if on_scalar:
        nisa.activation(dst=dst, op=nl.copy, data=psum, scale=float(scale))
    elif scale == 1.0:
        nisa.tensor_copy(dst=dst, src=psum)
    else:
        nisa.tensor_scalar(dst=dst, data=psum, op0=nl.multiply, operand0=float(scale))


def k_tiles_per_block(
    k: int, bytes_per_k_row: int, *, tile_k: int = 128, budget: int = 144 * 1024
) -> int:
    """How many K tiles of SBUF operands fit ``budget`` bytes per partition (at least 1).

    ``bytes_per_k_row`` is what one contraction row of all resident operands takes per partition
    (e.g. ``(block_m + tile_n) * itemsize`` for a stationary block and a moving block). The
    default budget leaves room for result tiles under the smaller SBUF of trn1 (180224 usable
    bytes per partition, nl.tile_size.total_available_sbuf_size; see docs/hardware.md). Compile-time
    Python.
    """
    tiles = -(-int(k) // int(tile_k))
    fit = max(1, int(budget) // max(1, int(bytes_per_k_row)))
    return max(1, min(tiles, fit))
