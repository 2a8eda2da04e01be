"""Further reductions and selections: ``tensor_partition_reduce``, ``tensor_copy_predicated``,
``bn_stats``, ``bn_aggr``, ``max8`` (``tensor_scalar_reduce`` is in :mod:`trncore.sim.isa_reduce_chain`)
(AWS NKI docs, nki.isa, NKI 0.3.0: one page per instruction)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.alu import BINARY, TOKENS_0_5
from trncore.sim.checks import (
    F32,
    check_compute_operand,
    check_reduces_elements,
    check_same_layout,
    read_f32,
)
from trncore.sim.errors import BufferError, DtypeError, ShapeError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import writer as _writer
from trncore.sim.release_rules import check_source_rank
from trncore.sim.tensor import NkiTensor

__all__ = [
    "bn_aggr",
    "bn_stats",
    "max8",
    "tensor_copy_predicated",
    "tensor_partition_reduce",
]

_PARTITION_REDUCE = {"add": np.add, "maximum": np.maximum, "bitwise_or": np.bitwise_or,
                     "bitwise_and": np.bitwise_and}  # fmt: skip
#: The tokens tensor_partition_reduce takes: the 0.3.0 page's four, and ``nl.average`` (listed from
#: NKI 0.5.0; the token exists only in a 0.5.0+ kernel, its release gate is on ``nl.average``).
_PARTITION_TOKENS = {**{k: BINARY[k] for k in _PARTITION_REDUCE}, "average": TOKENS_0_5["average"]}


def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.tensor_partition_reduce (NKI 0.3.0): reduce across partitions on GpSimd: ``dst[0,
    f] = op over p of data[p, f]``; ``nl.average`` (NKI 0.5.0+) is the mean over p, in float32."""
    ctx, site = _begin()
    data = check_compute_operand(data, "tensor_partition_reduce", "data", site, buffers=("sbuf",))
    dst = check_compute_operand(dst, "tensor_partition_reduce", "dst", site, buffers=("sbuf",))
    token = _op_token(op, "op", site, _PARTITION_TOKENS)
    check_reduces_elements(data, data.partitions, "tensor_partition_reduce", "the partitions", site)
    if dst.partitions != 1 or dst.free_size != data.free_size:
        raise ShapeError(
            "partition-reduce-dst",
            f"tensor_partition_reduce dst must be (1, {data.free_size}), got {dst.describe()}",
            site,
        )
    bitvec = token.kind == "bitvec"
    if bitvec and not dtypes.is_int(data.dtype):
        raise DtypeError("bitvec-int", f"bitwise reduction needs integers: {data.describe()}", site)
    p = data.partitions
    reduce = token.fn if token.name == "average" else _PARTITION_REDUCE[token.name].reduce
    x_op, write = data.operand(site), _writer(dst, site)

    def run() -> None:
        x = np.asarray(x_op.read()).reshape(p, -1)
        write(reduce(x if bitvec else x.astype(F32), axis=0))

    ctx.emit("tensor_partition_reduce", "gpsimd", site, [data], [dst], run,
             _elementwise_meta(data))  # fmt: skip


def tensor_copy_predicated(
    dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: str | None = None
) -> None:
    """AWS NKI docs, nki.isa.tensor_copy_predicated (NKI 0.3.0): copy ``src`` into ``dst`` where ``predicate``
    is nonzero (zero if ``reverse_pred``)."""
    ctx, site = _begin()
    dst = check_compute_operand(dst, "tensor_copy_predicated", "dst", site)
    pred = check_compute_operand(predicate, "tensor_copy_predicated", "predicate", site)
    check_same_layout(pred, dst, "tensor_copy_predicated", "predicate and dst", site)
    if pred.dtype not in ("uint8", "uint16", "uint32", "bool_"):
        raise DtypeError("predicate-dtype", f"predicate must be uint8/16/32, got {pred.dtype}",
                         site)  # fmt: skip
    reads = [pred, dst]  # dst elements outside the predicate keep their old values
    if isinstance(src, NkiTensor):
        src = check_compute_operand(src, "tensor_copy_predicated", "src", site)
        check_same_layout(src, dst, "tensor_copy_predicated", "src and dst", site)
        if src.dtype != dst.dtype:
            raise DtypeError("predicated-copy-dtype", f"src {src.dtype} and dst {dst.dtype} "
                             "must have the same dtype", site)  # fmt: skip
        if src.buffer.name == "psum" and pred.buffer.name == "psum":
            raise BufferError("predicated-two-psum", "src and predicate cannot both be in PSUM",
                              site)  # fmt: skip
        s_op, s_shape = src.operand(site), tuple(dst.shape)
        reads.append(src)

        def source() -> np.ndarray:
            # src may have another rank than dst with the same elements per partition (a 2-d
            # src, a 4-d dst): NKI 0.6.0 release notes (SDK 2.32), nki.simulate bug fixes
            return np.asarray(s_op.read()).reshape(s_shape)
    else:
        value = dtypes.cast(np.float32(src), dst.dtype)

        def source() -> np.ndarray:
            return value

    # dst through its operand: a dynamic (tensor- or register-indexed) dst is resolved when the
    # instruction runs, as every instruction's (an .array() is the storage view without the index)
    p_op, d_op, dshape = pred.operand(site), dst.operand(site), dst.shape

    def run() -> None:
        old = np.asarray(d_op.read())
        mask = np.asarray(p_op.read()).reshape(old.shape) != 0
        if reverse_pred:
            mask = ~mask
        d_op.write(np.where(mask, np.broadcast_to(source(), old.shape), old).reshape(dshape))

    ctx.emit("tensor_copy_predicated", "vector", site, reads, [dst], run, _elementwise_meta(dst))


def bn_stats(dst: Any, data: Any, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.bn_stats (NKI 0.3.0): per partition ``(count, mean, variance*count)`` of the even
    and of the odd elements.

    [INF] Layout: the even-element triple first, then the odd-element triple; ``bn_aggr``
    combines any number of such 6-value groups. Input free size at most 512.
    """
    ctx, site = _begin()
    data = check_compute_operand(data, "bn_stats", "data", site)
    dst = check_compute_operand(dst, "bn_stats", "dst", site)
    f = data.free_size
    if f > 512:
        raise ShapeError("bn-stats-fmax", f"bn_stats input has {f} > 512 elements per partition",
                         site)  # fmt: skip
    if dst.partitions != data.partitions or dst.free_size != 6:
        raise ShapeError("bn-stats-dst", f"bn_stats dst must be ({data.partitions}, 6), got "
                         f"{dst.describe()}", site)  # fmt: skip
    x_op, write, p = data.operand(site), _writer(dst, site), data.partitions

    def run() -> None:
        x = read_f32(x_op.read(), p)
        parts = []
        for half in (x[:, 0::2], x[:, 1::2]):
            n = half.shape[1]
            mean = half.mean(axis=1, dtype=F32) if n else np.zeros(p, F32)
            m2 = ((half - mean[:, None]) ** 2).sum(axis=1, dtype=F32) if n else np.zeros(p, F32)
            parts += [np.full(p, n, F32), mean, m2]
        write(np.stack(parts, axis=1))

    ctx.emit("bn_stats", "vector", site, [data], [dst], run, _elementwise_meta(data))


def bn_aggr(dst: Any, data: Any, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.bn_aggr (NKI 0.3.0): combine ``bn_stats`` groups into ``(mean, variance)`` per
    partition."""
    ctx, site = _begin()
    data = check_compute_operand(data, "bn_aggr", "data", site)
    dst = check_compute_operand(dst, "bn_aggr", "dst", site)
    if data.free_size % 3 or dst.partitions != data.partitions or dst.free_size != 2:
        raise ShapeError("bn-aggr-shape", f"bn_aggr needs (P, 6k) stats and a (P, 2) dst: "
                         f"{data.describe()} -> {dst.describe()}", site)  # fmt: skip
    x_op, write, p = data.operand(site), _writer(dst, site), data.partitions

    def run() -> None:
        s = read_f32(x_op.read(), p).astype(np.float64).reshape(p, -1, 3)
        count, mean, m2 = s[..., 0], s[..., 1], s[..., 2]
        total = count.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        grand = (count * mean).sum(axis=1) / safe
        var = (m2 + count * (mean - grand[:, None]) ** 2).sum(axis=1) / safe
        write(np.stack([grand, var], axis=1).astype(F32))

    ctx.emit("bn_aggr", "vector", site, [data], [dst], run, _elementwise_meta(data))


def _top8(x: np.ndarray) -> np.ndarray:
    """The 8 largest values of each row, descending; NaN ranks below every number."""
    if x.shape[1] >= _GROUPED_MIN:
        grouped = _top8_grouped(x)
        if grouped is not None:
            return grouped
    return _top8_scan(x)


#: Rows at least this wide take :func:`_top8_grouped` first (on shorter rows its fixed steps
#: cost more than the eight scans of :func:`_top8_scan`).
_GROUPED_MIN = 512


def _top8_grouped(x: np.ndarray) -> np.ndarray | None:
    """:func:`_top8_scan`'s result from a few candidates per row, or None where that is not
    certain to be the same bits (then the caller scans).

    Each row is split into groups of 8 elements (group ``j`` holds columns ``j, j + g, ...,
    j + 7g``, so each group's maximum is an elementwise maximum of 8 contiguous slices; columns
    beyond ``8g`` are candidates outright). The row's 8 largest values lie in the 8 groups of
    largest maxima: an element outside them sits in a group whose maximum at most equals each
    of 8 chosen maxima, which are 8 distinct elements at least as large. Sorting the 64 (+ tail)
    candidates gives the same values in the same descending order, and the same bits, except
    that 0.0 and -0.0 are equal to the sort and to argmax alike but not in bits: a row whose
    result holds a zero is scanned. NaN (a NaN group maximum) and a row with fewer than 8
    groups above -inf (the selection below could pick a group twice) are scanned too.
    """
    p, f = x.shape
    g = f // 8
    groups = x[:, : 8 * g].reshape(p, 8, g)  # (a view: x is a C-contiguous float32 array)
    gmax = np.maximum.reduce(groups, axis=1)  # NaN propagates into its group's maximum
    if np.isnan(gmax).any():
        return None
    rows = np.arange(p)
    chosen = np.empty((p, 8), dtype=np.intp)
    # the 8 largest group maxima (eight scans of the short gmax rows), each taken out through
    # flat indices into the (contiguous) gmax: a 1-D index costs less than a 2-D one
    flat, at = gmax.reshape(-1), rows * g
    for i in range(7):
        j = gmax.argmax(axis=1, out=chosen[:, i])
        flat[at + j] = -np.inf
    last = flat[at + gmax.argmax(axis=1, out=chosen[:, 7])]
    if (last == -np.inf).any():
        return None
    cand = groups[rows[:, None], :, chosen].reshape(p, 64)
    if f > 8 * g:
        cand = np.concatenate((cand, x[:, 8 * g :]), axis=1)
    out = np.sort(cand, axis=1)[:, :-9:-1]
    if not out.all():  # a zero: its sign may differ from the scan's pick
        return None
    return out


def _top8_scan(x: np.ndarray) -> np.ndarray:
    """The 8 largest values of each row, descending, by eight argmax scans of the row."""
    if np.isnan(x).any():
        return -np.sort(-x, axis=1)[:, :8]  # the sort puts NaN last
    # eight passes of argmax: a sort or a partition of a 16 384-wide row costs 5-20x more
    rest, rows = x.copy(), np.arange(x.shape[0])
    out = np.empty((x.shape[0], 8), dtype=x.dtype)
    for i in range(8):
        j = rest.argmax(axis=1)
        out[:, i] = rest[rows, j]
        rest[rows, j] = -np.inf
    return out


def max8(dst: Any, src: Any, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.max8 (NKI 0.3.0): the 8 largest values of each partition, in descending order."""
    ctx, site = _begin()
    src = check_compute_operand(src, "max8", "src", site)
    dst = check_compute_operand(dst, "max8", "dst", site)
    check_source_rank(src, "max8", "src", site)  # 5 dims in NKI 0.3.0, 3 from 0.4.0
    f = src.free_size
    if not 8 <= f <= 16384 or dst.partitions != src.partitions or dst.free_size != 8:
        raise ShapeError("max8-shape", f"max8 src needs 8..16384 elements per partition and dst "
                         f"must be (P, 8): {src.describe()} -> {dst.describe()}", site)  # fmt: skip
    x_op, write, p = src.operand(site), _writer(dst, site), src.partitions

    def run() -> None:
        write(_top8(read_f32(x_op.read(), p)))

    ctx.emit("max8", "vector", site, [src], [dst], run, _elementwise_meta(src))
