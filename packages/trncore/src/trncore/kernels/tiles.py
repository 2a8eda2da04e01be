"""Tile arithmetic and HBM block loads for NKI kernels.

Kernels here never assume sizes are multiples of a tile: :func:`spans` yields clipped tiles, and
:func:`load_block` issues one DMA for the whole tiles of a block and one for its ragged tail.
Transposed operands and batch offsets are folded into the DMA's access pattern
(:func:`block_view`), so no transposed copy is ever made on the host.
"""

from __future__ import annotations

from typing import Any

from trncore.lang import nisa

__all__ = ["block_view", "ceil_div", "dtype_bytes", "load_block", "spans", "store_block"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"

_BYTES = {"float32": 4, "tfloat32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2,
          "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1}


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of an NKI dtype (a name such as ``"bfloat16"``; fp8 types are 1 byte)."""
    name = str(dtype).removeprefix("torch.").removeprefix("nl.")
    if name.startswith("float8"):
        return 1
    assert name in _BYTES, f"unknown NKI dtype {dtype!r}"
    return _BYTES[name]



def ceil_div(n: int, d: int) -> int:
    """``ceil(n / d)`` for non-negative ``n`` and positive ``d`` (number of tiles covering ``n``)."""
    return -(-int(n) // int(d))


def spans(n: int, tile: int, start: int = 0) -> list[tuple[int, int]]:
    """``(offset, size)`` of the tiles covering ``[start, start + n)``; the last one is clipped.

    Compile-time Python (the loops it feeds are unrolled, AWS NKI Language Guide (NKI 0.3.0),
    Compilation Model).
    """
    assert tile > 0, f"tile must be positive, got {tile}"
    out = []
    for s in range(0, int(n), int(tile)):
        out.append((start + s, min(tile, n - s)))
    return out


def block_view(
    x: Any,
    row0: int,
    rows: int,
    tiles: int,
    col0: int,
    cols: int,
    *,
    transposed: bool = False,
    batch: int = 0,
    row_step: int | None = None,
) -> Any:
    """An access-pattern view ``V[q, t, f] = M[row0 + t*row_step + q, col0 + f]`` of an HBM matrix.

    Contract:

    * ``x`` is a **whole** HBM kernel argument (not an indexed view: ``.ap()`` on an indexed tensor
      is an error, AWS NKI Access Patterns deep dive (NKI 0.3.0)), of shape ``(R, C)`` or ``(B, R, C)``;
      ``M`` is ``x`` (or ``x[batch]``), or its transpose when ``transposed`` — the transpose is the
      access pattern (element strides), never a copy.
    * The view has shape ``(rows, tiles, cols)``: ``rows`` (≤ 128 when the destination is on chip)
      becomes the partition dim of an SBUF destination, ``tiles`` blocks of rows ``row_step``
      apart (default ``rows``) follow, then ``cols`` contiguous (or, transposed, strided) columns.
    * All indices must stay inside ``M``; the emulator checks it (AWS NKI Access Patterns deep dive (NKI
      0.3.0)).
    """
    shape = tuple(x.shape)
    if len(shape) == 3:
        base = int(batch) * shape[1] * shape[2]
        c_len = shape[2]
    else:
        assert len(shape) == 2, f"block_view takes a 2-D or 3-D tensor, got shape {shape}"
        assert not batch, f"batch={batch} for a 2-D tensor of shape {shape}"
        base, c_len = 0, shape[1]
    step = rows if row_step is None else row_step
    if transposed:
        # M[r, c] = X[c, r]: rows of M are columns of X (stride 1), columns of M are rows (stride C).
        offset = base + col0 * c_len + row0
        pattern = [[1, rows], [step, tiles], [c_len, cols]]
    else:
        offset = base + row0 * c_len + col0
        pattern = [[c_len, rows], [step * c_len, tiles], [1, cols]]
    return x.ap(pattern=pattern, offset=offset)


def load_block(
    dst: Any,
    x: Any,
    row0: int,
    nrows: int,
    col0: int,
    ncols: int,
    *,
    transposed: bool = False,
    batch: int = 0,
    tile: int = 128,
    tile0: int = 0,
) -> None:
    """DMA rows ``[row0, row0+nrows)`` × cols ``[col0, col0+ncols)`` of ``M`` into a tiled SBUF block.

    Contract:

    * ``dst`` is an SBUF tensor of shape ``(tile, T, W)`` with ``tile ≤ 128`` partitions (AWS
      Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0)), ``T ≥ tile0 + ceil(nrows / tile)``
      and ``W ≥ ncols``. Row ``row0 + t*tile + q`` of ``M`` lands in ``dst[q, tile0 + t, 0:ncols]``: the
      contraction (or output-row) index sits on partitions, as ``nc_matmul`` wants its operands (AWS NKI
      docs, nki.isa.nc_matmul (NKI 0.3.0)).
    * ``M`` is ``x`` / ``x[batch]`` or its transpose (see :func:`block_view`); a transposed load
      is an element-strided DMA pattern (on trn2 ``dma_transpose`` could replace it; it does not
      exist on trn1, AWS NKI docs, nki.isa.dma_transpose, NKI 0.3.0).
    * At most two DMAs: one for all whole tiles (few large DMAs amortise the fixed per-DMA cost,
      AWS NKI DGE reference, ~600 ns per DMA instruction (NKI 0.3.0)) and one for the ragged tail; the
      unloaded part of ``dst`` is left as it was (the caller only reads the loaded region). Dtypes may
      differ: the DMA casts (AWS NKI docs, nki.isa.dma_copy (NKI 0.3.0)).
    """
    full, rem = divmod(int(nrows), int(tile))
    if full:
        src = block_view(x, row0, tile, full, col0, ncols, transposed=transposed, batch=batch)
        nisa.dma_copy(dst=dst[0:tile, tile0 : tile0 + full, 0:ncols], src=src)
    if rem:
        src = block_view(
            x, row0 + full * tile, rem, 1, col0, ncols, transposed=transposed, batch=batch
        )
        nisa.dma_copy(dst=dst[0:rem, tile0 + full : tile0 + full + 1, 0:ncols], src=src)



def store_block(
    x: Any,
    src: Any,
    row0: int,
    nrows: int,
    col0: int,
    ncols: int,
    *,
    batch: int = 0,
    tile: int = 128,
    tile0: int = 0,
) -> None:
    """DMA a tiled SBUF block back to rows ``[row0, row0+nrows)`` × cols ``[col0, col0+ncols)`` of ``x``.

    The mirror of :func:`load_block` (not transposed): ``src[q, tile0 + t, 0:ncols]`` goes to row
    ``row0 + t*tile + q`` of ``x`` (or ``x[batch]``), a whole HBM kernel argument (typically the
    ``shared_hbm`` output, AWS NKI docs, nki.language.shared_hbm, NKI 0.3.0). At most two DMAs: the
    whole tiles, then the ragged tail.
    """
    full, rem = divmod(int(nrows), int(tile))
    if full:
        dst = block_view(x, row0, tile, full, col0, ncols, batch=batch)
        nisa.dma_copy(dst=dst, src=src[0:tile, tile0 : tile0 + full, 0:ncols])
    if rem:
        dst = block_view(x, row0 + full * tile, rem, 1, col0, ncols, batch=batch)
        nisa.dma_copy(dst=dst, src=src[0:rem, tile0 + full : tile0 + full + 1, 0:ncols])
