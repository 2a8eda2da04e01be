"""Vector Engine search and cross-partition shuffle: ``nc_find_index8``, ``nc_match_replace8``,
``nc_stream_shuffle`` (nki.isa API reference, NKI 0.3.0 / Neuron SDK 2.29).

Readings chosen where AWS's pages say more in later releases than in 2.29:

- ``nc_find_index8``: SDK 2.29 says "the first occurrence of each value" and leaves a value that
  is not present undefined. The SDK 2.32 page of the same 0.3-line API makes both precise, and
  that is what is emulated: duplicate ``vals`` take successive occurrences in ascending order
  (the first duplicate the first occurrence), and a missing value writes the all-ones sentinel
  (``0xFFFFFFFF`` for uint32, ``0xFFFF`` for uint16).
- ``nc_match_replace8``: duplicates of a value are processed in reverse order of ``vals``
  (``i = 7 .. 0``), so the highest duplicate slot gets the first occurrence (SDK 2.32 page);
  a value not present replaces nothing and leaves the sentinel in ``dst_idx``.

Values are compared in fp32, as the engines read their inputs (AWS NKI docs, nki.isa, NKI 0.3.0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.checks import check_compute_operand, read_f32
from trncore.sim.errors import BoundsError, DtypeError, PartitionError, ShapeError, site_suffix
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import float32_rows
from trncore.sim.isa_common import writer as _writer
from trncore.sim.release_rules import check_source_rank

__all__ = ["nc_find_index8", "nc_match_replace8", "nc_stream_shuffle"]

_INDEX_DTYPES = ("uint16", "uint32")


def _check_search(op: str, dst: Any, data: Any, vals: Any, site: Any) -> tuple[Any, Any, Any]:
    data = check_compute_operand(data, op, "data", site)
    vals = check_compute_operand(vals, op, "vals", site)
    dst = check_compute_operand(dst, op, "dst", site)
    if not 8 <= data.free_size <= 16384:
        raise ShapeError(f"{op}-data-size", f"{op} data needs 8..16384 elements per partition, "
                         f"got {data.free_size}: {data.describe()}", site)  # fmt: skip
    if vals.free_size != 8 or vals.partitions != data.partitions:
        raise ShapeError(f"{op}-vals-shape", f"{op} vals needs exactly 8 elements on each of the "
                         f"data's {data.partitions} partitions, got {vals.describe()}", site)  # fmt: skip
    return dst, data, vals


#: ``[i, j]``: value ``j`` of a row is taken before value ``i`` (order ``0 .. 7``; ``_LATER``:
#: ``7 .. 0``), for the ranks of duplicates in :func:`_occurrences`
_EARLIER = np.tril(np.ones((8, 8), dtype=bool), -1)
_LATER = np.triu(np.ones((8, 8), dtype=bool), 1)


def _occurrences(x: np.ndarray, v: np.ndarray, reverse: bool) -> np.ndarray:
    """For each row ``r`` and each of its 8 values ``v[r, i]``: the index in ``x[r]`` of the
    occurrence that value takes, or -1 when there is none. Duplicates of a value take successive
    occurrences, ascending, in the order ``i = 0 .. 7`` (``reverse``: ``7 .. 0``): the k-th
    duplicate in that order takes the k-th occurrence. Compared in fp32 (NaN matches nothing,
    -0.0 matches 0.0)."""
    # each row's values sorted (NaN last): a row holds a value twice where two neighbours are
    # equal (NaN equals nothing; 0.0 and -0.0 are equal and sort together), and its smallest
    # number comes first (NaN when every value is NaN: then nothing can match)
    ordered = np.sort(v, axis=1)
    rank: np.ndarray | None = None  # None: no row holds a value twice (every rank is 0)
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        same = v[:, :, None] == v[:, None, :]  # [r, i, j]: values i and j of row r are equal
        rank = (same & (_LATER if reverse else _EARLIER)).sum(axis=2)  # duplicates taken before
    # Only elements at or above a row's smallest value can match one. In a top-k round (max8,
    # then match_replace8 of those 8) that is a handful per row, and the matching runs on those
    # candidates instead of scanning the whole row once per value.
    lo = ordered[:, :1]
    flat = np.flatnonzero(x >= lo)  # row-major: each row's candidates in column order
    if flat.size > x.size // 8:
        return _occurrences_dense(x, v, np.zeros(v.shape, np.intp) if rank is None else rank)
    rows, cols = np.divmod(flat, x.shape[1])  # (2-D np.nonzero is ~20x slower here)
    hit = x[rows, cols][:, None] == v[rows]  # [candidate, i]: it equals value i of its row
    if rank is None:
        # each value takes its first match in its row: the smallest column of its matches
        at, slot = np.nonzero(hit)
        out = np.full(v.size, x.shape[1], dtype=np.int64)
        np.minimum.at(out, rows[at] * 8 + slot, cols[at])
        out[out == x.shape[1]] = -1
        return out.reshape(v.shape)
    seen = np.cumsum(hit, axis=0)  # matches of each value so far, over all rows
    first = np.searchsorted(rows, np.arange(x.shape[0]))  # each row's first candidate
    before = np.concatenate((np.zeros((1, 8), seen.dtype), seen))[first]  # matches in earlier rows
    take = hit & (seen - before[rows] == rank[rows] + 1)  # the (rank + 1)-th match of value i
    out = np.full(v.shape, -1, dtype=np.int64)
    at, slot = np.nonzero(take)
    out[rows[at], slot] = cols[at]
    return out


def _occurrences_dense(x: np.ndarray, v: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """``_occurrences`` by one scan of the rows per value (many candidates per row)."""
    p = x.shape[0]
    out = np.full((p, 8), -1, dtype=np.int64)
    rows = np.arange(p)
    for i in range(8):
        hit = x == v[:, i : i + 1]
        first = hit.argmax(axis=1)
        found = hit[rows, first]
        out[found, i] = first[found]
        for r in np.flatnonzero(found & (rank[:, i] > 0)):  # a duplicate: a later occurrence
            occ = np.flatnonzero(hit[r])
            out[r, i] = occ[rank[r, i]] if rank[r, i] < occ.size else -1
    return out


def nc_find_index8(dst: Any, data: Any, vals: Any, name: str | None = None) -> None:
    """Indices of the first occurrences of 8 values in each partition (uint16/uint32 ``dst``)."""
    ctx, site = _begin()
    dst, data, vals = _check_search("nc_find_index8", dst, data, vals, site)
    check_source_rank(data, "nc_find_index8", "data", site)  # 5 dims in 0.3.0, 3 from 0.4.0
    if dst.dtype not in _INDEX_DTYPES:
        raise DtypeError("nc_find_index8-dst-dtype", f"nc_find_index8 dst must be uint16 or "
                         f"uint32, got {dst.describe()}", site)  # fmt: skip
    if dst.free_size != 8 or dst.partitions != data.partitions:
        raise ShapeError("nc_find_index8-dst-shape", f"nc_find_index8 dst must be (P, 8) with "
                         f"P = {data.partitions}, got {dst.describe()}", site)  # fmt: skip
    d_op, v_op, p = data.operand(site), vals.operand(site), data.partitions
    sentinel = dtypes.int_range(dtypes.storage_dtype(dst.dtype))[1]
    write = _writer(dst, site)

    def run() -> None:
        x, v = read_f32(d_op.read(), p), read_f32(v_op.read(), p)
        out = _occurrences(x, v, reverse=False)  # duplicates: successive occurrences, ascending
        out[out < 0] = sentinel
        write(out)

    ctx.emit("nc_find_index8", "vector", site, [data, vals], [dst], run, _elementwise_meta(data))


def nc_match_replace8(
    dst: Any, data: Any, vals: Any, imm: float, dst_idx: Any = None, name: str | None = None
) -> None:
    """Replace the first occurrence of each of 8 values by ``imm``; indices into ``dst_idx``."""
    ctx, site = _begin()
    dst, data, vals = _check_search("nc_match_replace8", dst, data, vals, site)
    if dst.partitions != data.partitions or dst.free_size != data.free_size:
        raise ShapeError("nc_match_replace8-dst-shape", f"nc_match_replace8 dst must have the "
                         f"data's layout: {data.describe()} -> {dst.describe()}", site)  # fmt: skip
    if isinstance(imm, bool) or not isinstance(imm, (int, float, np.number)):
        raise TypeError(f"nc_match_replace8: imm must be a number, got {imm!r}{site_suffix(site)}")
    outs = [dst]
    idx_write = None
    sentinel = 0
    if dst_idx is not None:
        dst_idx = check_compute_operand(dst_idx, "nc_match_replace8", "dst_idx", site)
        if dst_idx.dtype not in _INDEX_DTYPES:
            raise DtypeError("nc_match_replace8-idx-dtype", "nc_match_replace8 dst_idx must be "
                             f"uint16 or uint32, got {dst_idx.describe()}", site)  # fmt: skip
        if dst_idx.free_size != 8 or dst_idx.partitions != data.partitions:
            raise ShapeError("nc_match_replace8-idx-shape", "nc_match_replace8 dst_idx must be "
                             f"(P, 8), got {dst_idx.describe()}", site)  # fmt: skip
        sentinel = dtypes.int_range(dtypes.storage_dtype(dst_idx.dtype))[1]
        idx_write = _writer(dst_idx, site)
        outs.append(dst_idx)
    d_op, v_op, p = data.operand(site), vals.operand(site), data.partitions
    write = _writer(dst, site)
    fill = np.float32(imm)
    tile = _same_float32_tile(d_op, dst.operand(site), p)
    if tile is not None:
        # in place (dst is data, AWS's top-k loop): only the matched elements change, so they are
        # written into the tile itself instead of copying the whole row out and back
        def run_in_place() -> None:
            v = read_f32(v_op.read(), p)
            idx = _occurrences(tile, v, reverse=True)
            rows, slots = np.nonzero(idx >= 0)
            tile[rows, idx[rows, slots]] = fill
            idx[idx < 0] = sentinel
            if idx_write is not None:
                idx_write(idx)

        ctx.emit("nc_match_replace8", "vector", site, [data, vals], outs, run_in_place,
                 _elementwise_meta(data))  # fmt: skip
        return

    def run() -> None:
        x = read_f32(d_op.read(), p).copy()
        v = read_f32(v_op.read(), p)
        # reverse order: duplicates fill slots 7, 6, ... with ascending occurrences
        idx = _occurrences(x, v, reverse=True)
        rows, slots = np.nonzero(idx >= 0)
        x[rows, idx[rows, slots]] = fill
        idx[idx < 0] = sentinel
        write(x)
        if idx_write is not None:
            idx_write(idx)

    ctx.emit("nc_match_replace8", "vector", site, [data, vals], outs, run, _elementwise_meta(data))


def _same_float32_tile(src: Any, dst: Any, p: int) -> np.ndarray | None:
    """The ``(p, free)`` float32 array both static operands name when ``dst`` is the same view
    as ``src`` (same storage, offset, shape and strides), else None."""
    a, b = float32_rows(src, p), float32_rows(dst, p)
    if a is None or b is None or a.shape != b.shape or a.strides != b.strides:
        return None
    if a.__array_interface__["data"][0] != b.__array_interface__["data"][0]:
        return None
    return a


def nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: str | None = None) -> None:
    """Copy partitions within each 32-partition quadrant: ``dst[q*32+i] = src[q*32+mask[i]]``.

    ``mask[i] == 255`` leaves ``dst`` partition ``i`` of every quadrant unmodified. In place
    (``dst`` is ``src``) is allowed: every source row is read before any is written.
    """
    ctx, site = _begin()
    src = check_compute_operand(src, "nc_stream_shuffle", "src", site)
    dst = check_compute_operand(dst, "nc_stream_shuffle", "dst", site)
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32 or any(not (0 <= m < 32 or m == 255) for m in mask):
        raise ShapeError("stream-shuffle-mask", "nc_stream_shuffle shuffle_mask must list 32 "
                         f"partitions in 0..31 (or 255: unmodified), got {mask}", site)  # fmt: skip
    if dst.dtype != src.dtype:
        raise DtypeError("stream-shuffle-dtype", "nc_stream_shuffle dst and src need the same "
                         f"dtype: {src.describe()} -> {dst.describe()}", site)  # fmt: skip
    if dst.free_size != src.free_size:
        raise ShapeError("element-count", "nc_stream_shuffle dst and src need the same elements "
                         f"per partition: {src.describe()} -> {dst.describe()}", site)  # fmt: skip
    active = math.ceil(max(src.partitions, dst.partitions) / 32) * 32
    # (no partition at all, or no element: an empty shuffle, which starts nowhere and writes
    # nothing, even when its views' offsets read as the next partition, t[:, n:n] of an n-row)
    allowed = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}.get(active, ())
    for t, what in ((src, "src"), (dst, "dst")):
        if active and t.dynamic is None and t.size and t.start_partition() not in allowed:
            raise PartitionError("stream-shuffle-start", f"nc_stream_shuffle with {active} "
                                 f"active partitions needs {what} to start at one of {allowed}: "
                                 f"{t.describe()}", site)  # fmt: skip
    rows: list[tuple[int, int]] = []
    for d in range(dst.partitions):
        q, i = divmod(d, 32)
        if mask[i] == 255:
            continue
        s = q * 32 + mask[i]
        if s >= src.partitions:
            raise BoundsError("stream-shuffle-source", f"nc_stream_shuffle mask[{i}] = {mask[i]} "
                              f"reads partition {s} of src, which has {src.partitions}: "
                              f"{src.describe()}", site)  # fmt: skip
        rows.append((d, s))
    s_op, d_op = src.operand(site), dst.operand(site)
    sp, dp = src.partitions, dst.partitions

    def run() -> None:
        x = np.array(s_op.read()).reshape(sp, -1)
        out = np.array(d_op.read()).reshape(dp, -1)
        for d, s in rows:
            out[d] = x[s]
        d_op.write(out)

    ctx.emit("nc_stream_shuffle", "vector", site, [src], [dst], run, _elementwise_meta(dst))
