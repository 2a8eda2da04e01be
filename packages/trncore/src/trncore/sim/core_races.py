"""Races between the cores of an LNC=2 launch on shared HBM (rule ``lnc-race``).

Under ``kernel[2]`` the two cores of a logical NeuronCore run the kernel at the same time on
"two physical cores ... that have shared HBM memory" (AWS NKI docs, Using Logical Neuron Cores,
NKI 0.3.0 / SDK 2.29). The emulator traces them one after the other (core 0 first, interleaved
only at exchanges, :mod:`trncore.sim.lnc`), so without a check a kernel in which core 1 reads
what core 0 writes would see core 0's data, while on hardware which comes first is timing. No AWS
page states the race rule in words; the ``nki.isa.core_barrier`` page (NKI 0.3.0, unchanged
through 0.6.0) says what the barrier is for: two cores "write to disjoint portions of a shared HBM
tensor and they both need to consume the tensor after both cores have finished writing", so
"both cores can perform the write ... and then signal to each other when the write operation is
complete using nisa.core_barrier" ("Now both cores can safely read the complete tensor").

The rule: two accesses to overlapping bytes of one shared HBM allocation (``nl.shared_hbm``, or a
kernel argument, which is shared HBM under LNC=2) by the two cores of one launch (one rank), at
least one a write, with no meeting of both cores between them (``core_barrier``, ``sendrecv``,
or a chain of meetings through ``nki.collectives`` that orders them), are refused at the line of
the later access in trace order, naming the tensor, both cores and the other core's line.
Happens-before is a vector clock per instance (:class:`trncore.sim.lnc.Scheduler` advances it
at every completed meeting).

A race whose outcome does not depend on the order is accepted: a write that leaves the
overlapping bytes as they were (both cores writing the same values, as a kernel that computes
the same result on both cores does), judged on the traced run's data. Two cores that write the
same bytes without a meeting leave, in any order, one core's last value there; so a write
changing what the other core wrote is judged when the writing core reaches its next meeting or
the trace ends: accepted if its last write there restored the other core's value (a kernel that
zeroes an output and then scatters into it on both cores), refused at the first such write's line
otherwise. Private HBM
(``nl.private_hbm`` / ``nl.hbm``) is per core and never checked. Dynamic offsets
(``.ap(scalar_offset=/vector_offset=)``) are resolved to the rows the instruction touches when it
runs on the traced run (a replay with other offset data is not re-checked); a transfer skipped by
``oob_mode.skip`` touches nothing. Checked on executing traces only (a cost report traced from
shapes has no data).

Cost: the check is installed only on LNC=2 traces, and an instruction touching no shared HBM
never reaches it (``TraceContext.emit`` notes shared operands in its one pass over them).
Accesses are kept per allocation, core and kind in byte-range buckets, and compared exactly
only when their byte ranges meet: first by their bands within a row pitch
(column blocks of the same rows never meet), then, for a dynamic-row access (kept as its row
indices and one in-row pattern, never as a list of elements), row by row (only rows whose byte
ranges meet are compared, once per distinct shift between them), and otherwise element by
element (sorted byte starts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trncore.sim import context, dtypes
from trncore.sim.arrays import extent, pattern_indices, strided_view
from trncore.sim.dynamic import ScalarOffset, VectorOffset
from trncore.sim.errors import RaceError
from trncore.sim.tensor import SHARED_HBM

__all__ = ["RaceTracker"]

#: Byte-range buckets per allocation (a record spanning more than _WIDE buckets is kept apart).
_BUCKETS = 256
_WIDE = 32


class _Footprint:
    """The elements one access touches.

    Three forms, offsets in elements of the view's dtype (``isz`` bytes each):

    - a strided pattern: ``offset`` plus ``dims`` (``(step, num)`` pairs, outermost first);
    - rows (a dynamic-offset access): ``rows`` (row indices, in the access's order, repeats
      allowed) times ``pitch`` elements, each row plus the same in-row pattern ``offset``/``dims``;
    - explicit element indices ``elems`` (an access whose rows only partly lie in the tensor).

    A strided or row footprint may carry ``mask``, a bool per element of the full pattern (in
    :meth:`indices` order without the mask): the footprint is then that subset (what a write
    changed, or what is left once the other core rewrote some of it). ``lo``/``hi`` bound the
    touched bytes (half-open; for a masked footprint, those of the full pattern).
    """

    __slots__ = ("_starts", "dims", "elems", "hi", "isz", "lo", "mask", "offset", "pitch", "rows")

    def __init__(
        self, isz: int, offset: int = 0, dims: tuple[tuple[int, int], ...] = (),
        elems: np.ndarray | None = None, rows: np.ndarray | None = None, pitch: int = 0,
        mask: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        self.isz = isz
        self.offset = offset
        self.dims = dims
        self.elems = elems
        self.rows = rows
        self.pitch = pitch
        self.mask = mask
        self._starts: np.ndarray | None = None  # starts(), computed once (a record meets many)
        if elems is not None:
            self.lo = int(elems.min()) * isz
            self.hi = int(elems.max()) * isz + isz
            return
        below, above = extent(dims)
        self.lo = (offset + below) * isz
        self.hi = (offset + above) * isz + isz
        if rows is not None:
            first, last = int(rows.min()) * pitch, int(rows.max()) * pitch
            self.lo += min(first, last) * isz
            self.hi += max(first, last) * isz

    def inner(self) -> _Footprint:
        """The in-row pattern of a row footprint (the pattern itself otherwise), unmasked."""
        return _Footprint(self.isz, self.offset, self.dims)

    def full(self) -> np.ndarray:
        """Element indices of the whole pattern (mask not applied), in row-major order."""
        if self.elems is not None:
            return self.elems
        idx = pattern_indices(self.offset, self.dims)
        if self.rows is not None:
            idx = ((self.rows * self.pitch)[:, None] + idx[None, :]).reshape(-1)
        return idx

    def indices(self) -> np.ndarray:
        """Element indices in row-major order of the pattern (the order of its strided view)."""
        idx = self.full()
        return idx if self.mask is None else idx[self.mask]

    def pick(self, keep: np.ndarray) -> np.ndarray:
        """:meth:`indices` where ``keep`` (one bool per entry): for a strided pattern computed from
        the kept positions only, without listing every element (a whole-tensor access has millions)."""
        if self.elems is not None or self.rows is not None or self.mask is not None or not self.dims:
            return self.indices()[keep]
        coords = np.unravel_index(np.flatnonzero(keep), [n for _, n in self.dims])
        idx = np.full(coords[0].size, self.offset, dtype=np.int64)
        for c, (step, _) in zip(coords, self.dims):
            idx += c.astype(np.int64) * step
        return idx

    def subset(self, keep: np.ndarray) -> _Footprint:
        """The elements of this footprint where ``keep`` (one bool per :meth:`indices` entry)."""
        if self.elems is not None:
            return _Footprint(self.isz, elems=self.elems[keep])
        mask = keep
        if self.mask is not None:
            mask = self.mask.copy()
            mask[mask] = keep
        return _Footprint(self.isz, self.offset, self.dims, rows=self.rows, pitch=self.pitch, mask=mask)

    def dense(self) -> bool:
        """Whether the pattern covers every element between its first and last (one run)."""
        if self.elems is not None or self.rows is not None or self.mask is not None:
            return False
        extent = 1
        for step, num in sorted((abs(s), n) for s, n in self.dims if n > 1):
            if step != extent:
                return False
            extent *= num
        return True

    def canonical(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        """The same element set as ``offset``/``dims``: positive steps, largest outermost,
        broadcast (step 0) and single-element dims dropped (often row-major increasing)."""
        offset, dims = self.offset, []
        for step, num in self.dims:
            if num <= 1 or step == 0:
                continue  # a broadcast dim repeats elements: the set is the same without it
            if step < 0:
                offset, step = offset + (num - 1) * step, -step
            dims.append((step, num))
        return offset, tuple(sorted(dims, key=lambda d: -d[0]))

    def starts(self) -> np.ndarray:
        """Sorted distinct byte starts of the touched elements."""
        if self._starts is not None:
            return self._starts
        if self.elems is None and self.rows is None and self.mask is None:
            offset, canon = self.canonical()
            if _increasing(canon):
                self._starts = _Footprint(self.isz, offset, canon).full() * self.isz
                return self._starts
        idx = np.sort(self.indices())
        if idx.size > 1:
            idx = idx[np.concatenate(([True], idx[1:] != idx[:-1]))]
        self._starts = idx * self.isz
        return self._starts


def _increasing(dims: tuple[tuple[int, int], ...]) -> bool:
    """Whether a pattern's elements, in row-major order of its dims, strictly increase."""
    span = 0  # how far the inner dims reach past their first element
    for step, num in reversed(dims):
        if num <= 1:
            continue
        if step <= span:
            return False
        span += (num - 1) * step
    return True


#: The row-by-row comparison gives up (and lists elements) past this many row pairs whose byte
#: ranges meet, per row of the two footprints, or past this many distinct row shifts.
_PAIRS_PER_ROW = 8
_SHIFTS = 64


def _meets(a: _Footprint, b: _Footprint) -> np.ndarray | None:
    """Per element of ``b`` (in :meth:`_Footprint.indices` order): whether it shares a byte with
    an element of ``a`` (None: their byte ranges do not even meet)."""
    if a.hi <= b.lo or b.hi <= a.lo or _apart(a, b):
        return None
    if not a.dense() and (a.rows is not None or b.rows is not None) and a.elems is None and b.elems is None:
        hit = _meets_by_rows(a, b)
        if hit is not None:
            return hit
    if b.dense() and not a.dense():
        hit = _hits_in_run(a, b)
        if hit is not None:
            return hit
    return _hits(a, b.indices() * b.isz, b.isz)


def _hits_in_run(a: _Footprint, b: _Footprint) -> np.ndarray | None:
    """:func:`_meets` where ``b`` is one run of elements (a whole tensor or whole rows, as a
    kernel's final copy of its output is) and ``a`` lies on the same element grid: mark ``a``'s
    elements in the run, one store each, instead of a search per element of ``b`` (None: the
    widths differ)."""
    if a.isz != b.isz:
        return None
    # both count in elements of one width from the allocation's start, so they lie on one grid
    # and two elements meet only if they coincide
    rel = (a.starts() - b.lo) // b.isz
    n = (b.hi - b.lo) // b.isz
    run = np.zeros(n, dtype=bool)
    run[rel[(rel >= 0) & (rel < n)]] = True
    if _increasing(b.dims):
        return run  # b lists its elements in increasing order: the run as it is
    return run[b.indices() - b.lo // b.isz]


def _hits(a: _Footprint, sb: np.ndarray, isz: int) -> np.ndarray:
    """Per byte start in ``sb`` (elements of ``isz`` bytes): whether the element meets ``a``."""
    if a.dense():  # one byte run: b's elements inside it
        return (sb < a.hi) & (sb + isz > a.lo)
    sa = a.starts()
    # a's elements have one width: among a's starts before the end of b's element, the last one
    # reaches furthest; b's element meets a iff that one ends after b's element starts
    k = np.searchsorted(sa, sb + isz, side="left") - 1
    hit = k >= 0
    hit[hit] = sa[k[hit]] + a.isz > sb[hit]
    return hit


def _split(fp: _Footprint, canonical: bool) -> tuple[np.ndarray, _Footprint]:
    """``fp`` as rows: the byte address of each row's base (in :meth:`indices` order) and the
    pattern every row repeats from its base. A strided pattern's rows are its outermost dim
    (``canonical``: of its element set in canonical order, when that order does not matter)."""
    if fp.rows is not None:
        return fp.rows * (fp.pitch * fp.isz), fp.inner()
    offset, dims = fp.canonical() if canonical else (fp.offset, fp.dims)
    if not dims:
        return np.array([offset * fp.isz], dtype=np.int64), _Footprint(fp.isz)
    step, num = dims[0]
    bases = (offset + np.arange(num, dtype=np.int64) * step) * fp.isz
    return bases, _Footprint(fp.isz, 0, dims[1:])


def _meets_by_rows(a: _Footprint, b: _Footprint) -> np.ndarray | None:
    """:func:`_meets` row by row (None: too irregular, list the elements instead).

    Pairs of rows (one of ``a``, one of ``b``) whose byte ranges meet are found by a search on
    the sorted row bases; each pair is one shift between the two in-row patterns, and each
    distinct shift is compared once. Two accesses through one dynamic-row view whose rows stay
    within their pitch meet only on shared rows (shift 0), so two gathers of 128 rows cost a
    search over 128 row indices and at most one row-sized comparison, not a sort of every
    element. A masked ``a`` (part of its elements) is compared this way only when both in-row
    patterns are the same elements (then element ``k`` of a row meets element ``k`` of the same
    row and nothing else).
    """
    base_a, in_a = _split(a, canonical=a.mask is None)
    base_b, in_b = _split(b, canonical=False)
    order = np.argsort(base_a, kind="stable")
    sorted_a = base_a[order]
    # a's row i meets b's row j iff base_a[i] + in_a.lo < base_b[j] + in_b.hi and
    # base_b[j] + in_b.lo < base_a[i] + in_a.hi
    first = np.searchsorted(sorted_a, base_b + (in_b.lo - in_a.hi), side="right")
    stop = np.searchsorted(sorted_a, base_b + (in_b.hi - in_a.lo), side="left")
    counts = np.maximum(stop - first, 0)
    total = int(counts.sum())
    n_inner = in_b.full().size
    hit2d = np.zeros((base_b.size, n_inner), dtype=bool)
    if total:
        if total > _PAIRS_PER_ROW * (base_a.size + base_b.size):
            return None
        j = np.repeat(np.arange(base_b.size), counts)
        i = order[np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(first, counts)]
        shift = base_a[i] - base_b[j]
        if a.mask is not None:
            same = a.isz == b.isz and in_a.offset == in_b.offset and in_a.dims == in_b.dims
            if not (same and _distinct(in_a) and not shift.any()):
                return None
            np.logical_or.at(hit2d, j, a.mask.reshape(base_a.size, -1)[i])
        else:
            shifts, which = np.unique(shift, return_inverse=True)
            if shifts.size > _SHIFTS:
                return None
            sb = in_b.full() * b.isz
            for k, d in enumerate(shifts.tolist()):
                # b's element at base_b + s meets a's row at base_a = base_b + d iff s - d meets in_a
                m = _hits(in_a, sb - d, b.isz)
                if m.any():
                    hit2d[j[which == k]] |= m
    hit = hit2d.reshape(-1)
    return hit if b.mask is None else hit[b.mask]


def _distinct(fp: _Footprint) -> bool:
    """Whether a strided pattern lists no element twice (no broadcast dim, no overlapping steps)."""
    if any(n > 1 and s == 0 for s, n in fp.dims):
        return False
    return _increasing(fp.canonical()[1])


def _band(fp: _Footprint, period: int) -> tuple[int, int] | None:
    """``(start, width)`` in bytes modulo ``period`` of the residues ``fp`` can touch, when its
    dims (and rows) split into steps that are multiples of the period and a rest spanning at
    most one period (None otherwise)."""
    if fp.elems is not None:
        return None
    width = fp.isz
    for step, num in fp.dims:
        if num > 1 and (step * fp.isz) % period:
            width += (num - 1) * abs(step) * fp.isz
    if fp.rows is not None and (fp.pitch * fp.isz) % period:
        width += (int(fp.rows.max()) - int(fp.rows.min())) * abs(fp.pitch) * fp.isz
    return (fp.lo % period, width) if width <= period else None


def _apart(a: _Footprint, b: _Footprint) -> bool:
    """Whether two patterns provably share no byte without listing their elements: both lie in
    bands of one period (a row pitch) that do not meet, as columns of the same rows do."""
    periods = {abs(s) * f.isz for f in (a, b) if f.elems is None for s, n in f.dims if n > 1 and s}
    periods.update(abs(f.pitch) * f.isz for f in (a, b) if f.rows is not None and f.pitch)
    for period in periods:
        ba, bb = _band(a, period), _band(b, period)
        if ba is None or bb is None:
            continue
        (ra, wa), (rb, wb) = ba, bb
        if all(not (ra < rb + k + wb and rb + k < ra + wa) for k in (-period, 0, period)):
            return True
    return False


def _overlap(a: _Footprint, b: _Footprint) -> np.ndarray:
    """Byte starts of ``b``'s elements that share a byte with an element of ``a``."""
    hit = _meets(a, b)
    if hit is None or not hit.any():
        return np.empty(0, dtype=np.int64)
    return b.pick(hit) * b.isz


def _without(fp: _Footprint, other: _Footprint) -> _Footprint | None:
    """``fp`` minus its elements meeting ``other`` (None when nothing is left)."""
    hit = _meets(other, fp)
    if hit is None or not hit.any():
        return fp
    if hit.all():
        return None
    return fp.subset(~hit)


class _Record:
    """One access of one core to a shared allocation."""

    __slots__ = ("changed", "fp", "old", "op", "site", "slot", "time", "write")

    def __init__(self, slot: int, time: int, write: bool, fp: _Footprint, op: str, site: Any) -> None:
        self.slot = slot
        self.time = time  # the core's own clock when it made the access
        self.write = write
        self.fp = fp
        #: for a write: the elements whose bytes it changed (None: it changed none)
        self.changed: _Footprint | None = fp
        #: for a write while it is checked: the bytes it overwrote, in ``fp.indices()`` order
        self.old: np.ndarray | None = None
        self.op = op
        self.site = site


class _Store:
    """The records of one allocation by one core and one kind, filed by the byte-range bucket
    they start in.

    A record is filed once, in its first bucket (a loop's accesses each span tens of buckets,
    and filing one in every bucket it spans cost a list append per bucket on every shared-HBM
    access); ``reach`` is the most buckets past its first that a filed record spans, so the
    records meeting a range start at most ``reach`` buckets before it. Records spanning
    ``_WIDE`` buckets or more are kept apart (``wide``).
    """

    __slots__ = ("bsize", "buckets", "count", "reach", "wide")

    def __init__(self, nbytes: int) -> None:
        self.bsize = max(64, -(-nbytes // _BUCKETS))
        #: by first bucket: (filing number, record), in filing order
        self.buckets: dict[int, list[tuple[int, _Record]]] = {}
        self.wide: list[_Record] = []
        self.count = 0  # records filed so far (their filing numbers)
        self.reach = 0

    def add(self, rec: _Record) -> None:
        first = rec.fp.lo // self.bsize
        span = (rec.fp.hi - 1) // self.bsize - first
        self.count += 1
        if span >= _WIDE:
            self.wide.append(rec)
            return
        if span > self.reach:
            self.reach = span
        filed = self.buckets.get(first)
        if filed is None:
            self.buckets[first] = [(self.count, rec)]
        else:
            filed.append((self.count, rec))

    def near(self, fp: _Footprint) -> list[_Record]:
        """Records whose byte range meets ``fp``'s (each once): the wide ones in filing order,
        then the others by the first bucket of ``fp``'s range they cover, then filing order
        (the order of a scan of every bucket each record spans, which names the same record
        first in a refusal)."""
        first, last = fp.lo // self.bsize, (fp.hi - 1) // self.bsize
        lo, hi = fp.lo, fp.hi
        out = [r for r in self.wide if r.fp.lo < hi and lo < r.fp.hi]
        found: list[tuple[int, int, _Record]] = []
        get = self.buckets.get
        for b in range(first - self.reach, min(last, first + 4 * _BUCKETS) + 1):
            for seq, rec in get(b, ()):
                if rec.fp.lo < hi and lo < rec.fp.hi:
                    found.append((b if b > first else first, seq, rec))
        if found:
            if len(found) > 1:
                found.sort(key=_scan_order)
            out.extend(rec for _, _, rec in found)
        return out

    def prune(self, keep: Any) -> None:
        """Drop the records ``keep`` rejects (ordered before every later access of the others)."""
        self.wide = [r for r in self.wide if keep(r)]
        for b in list(self.buckets):
            kept = [e for e in self.buckets[b] if keep(e[1])]
            if kept:
                self.buckets[b] = kept
            else:
                del self.buckets[b]


def _scan_order(entry: tuple[int, int, _Record]) -> tuple[int, int]:
    return entry[0], entry[1]


def _footprint(t: Any) -> _Footprint | None:
    """What view ``t`` touches now (dynamic offsets read from their tensors; None: nothing)."""
    isz = dtypes.storage_dtype(t.dtype).itemsize
    dyn = t.dynamic
    if dyn is None:
        if 0 in t._shape:  # (the dims' counts)
            return None
        return _Footprint(isz, t.offset, t.dims)
    size = t.alloc.storage.nbytes // isz
    if isinstance(dyn, ScalarOffset):
        value = int(dyn.tensor.array().item(0))  # (the offset tensor holds one element)
        fp = _Footprint(isz, t.offset + value * dyn.row, t.dims)
        if fp.lo < 0 or fp.hi > size * isz:
            return None  # out of bounds: skipped (oob_mode.skip) or refused by the instruction
        return fp
    if isinstance(dyn, VectorOffset):
        rows = np.asarray(dyn.tensor.array()).reshape(-1)[: t.shape[0]].astype(np.int64)
        if not rows.size or any(n == 0 for _, n in t.dims[1:]):
            return None
        fp = _Footprint(isz, t.offset, t.dims[1:], rows=rows, pitch=dyn.row)
        if fp.lo >= 0 and fp.hi <= size * isz:
            return fp  # every row inside the tensor: kept as rows
        # rows partly outside: the elements inside (an oob_mode.skip transfer skips the others)
        inner = fp.inner().indices()
        elems = (rows[:, None] * dyn.row + inner[None, :]).reshape(-1)
        elems = elems[(elems >= 0) & (elems < size)]
        return _Footprint(isz, elems=elems) if elems.size else None
    return _Footprint(isz, 0, ((1, size),))  # an offset kind not known here: the whole tensor


def _values(t: Any, fp: _Footprint) -> np.ndarray:
    """The bytes of ``fp``'s elements now, one row per element (in :meth:`indices` order; one
    unsigned integer per row where the width allows)."""
    flat = t.alloc.flat_as(t.dtype)
    shape, steps = [n for _, n in fp.dims], [s for s, _ in fp.dims]
    if fp.elems is not None or fp.mask is not None or any(s < 0 for s in steps):
        arr = flat[fp.indices()]
    elif fp.rows is None:
        arr = np.array(strided_view(flat, fp.offset, shape, steps))
    elif fp.pitch >= 0 and fp.offset >= 0 and int(fp.rows.min()) >= 0:
        # every row is a row of one strided view: gather rows, not elements
        top = int(fp.rows.max()) + 1
        arr = strided_view(flat, fp.offset, [top, *shape], [fp.pitch, *steps])[fp.rows]
    else:
        arr = flat[fp.indices()]
    raw = arr.reshape(-1).view(np.uint8)
    if fp.isz in (1, 2, 4, 8):
        return raw.view(f"u{fp.isz}").reshape(-1, 1)
    return raw.reshape(-1, fp.isz)


class RaceTracker:
    """The shared-HBM accesses of one rank's LNC=2 trace, checked as they are traced.

    Installed as the trace context's ``on_emit`` by :func:`trncore.sim.lnc.run_world`: it runs
    each instruction itself, reading the bytes a shared-HBM write is about to overwrite first.
    """

    def __init__(self, sched: Any, rank: int) -> None:
        self.sched = sched
        #: the rule a race raises: ``lnc-race``, or the scheduler's own (``grid-race``, trncore.sim.grid)
        self.rule: str = getattr(sched, "race_rule", "lnc-race")
        self.base = rank * sched.lnc
        self.stores: dict[tuple[int, int, bool], _Store] = {}  # (alloc id, slot, write)
        self.meetings = 0
        #: per shared allocation: the cores that touched it, whether any wrote it, whether any
        #: access had a dynamic offset (see :meth:`depends_on_data`)
        self.touched: dict[int, tuple[frozenset[int], bool, bool]] = {}
        #: write/write races judged at the writer's next meeting (see :meth:`_defer`): the view
        #: written, its record, the other core's record, element indices, their bytes before
        self.pending: list[tuple[Any, _Record, _Record, np.ndarray, np.ndarray]] = []
        #: (alloc id, item size, writer slot): the elements already pending for that writer, whose
        #: first overwrite holds the value it replaced. Per writer, so that in a grid of three or
        #: more programs each one's overwrite is judged (A, B, A: program 1's B is refused)
        self.pending_elems: dict[tuple[int, int, int], np.ndarray] = {}
        self._view: Any = None

    # ------------------------------------------------------------------ the hook
    def __call__(self, ins: Any, reads: Sequence[Any], writes: Sequence[Any]) -> None:
        """Run ``ins``; record and check its shared-HBM accesses."""
        # (emit sends only instructions with a shared-HBM operand here; operands are tensors)
        shared_r = [t for t in reads if t.alloc.buffer is SHARED_HBM]
        shared_w = [t for t in writes if t.alloc.buffer is SHARED_HBM]
        if not shared_r and not shared_w:
            ins.run()
            return
        if self.meetings != self.sched.meetings_done:
            self._prune()
        slot = self.base + int(context.current().program_id)
        time = self.sched.clock[slot][slot]
        reads_fp = [(t, _footprint(t)) for t in shared_r]
        writes_fp = [(t, _footprint(t)) for t in shared_w]
        before = [(t, fp, _values(t, fp)) for t, fp in writes_fp if fp is not None]
        ins.run()
        new: list[tuple[Any, _Record]] = []
        for t, fp in reads_fp:
            if fp is not None:
                rec = _Record(slot, time, False, fp, ins.op, ins.site)
                self._check(t.alloc, rec)
                new.append((t.alloc, rec))
        for t, fp, old in before:
            rec = _Record(slot, time, True, fp, ins.op, ins.site)
            rec.old, self._view = old, t
            now = _values(t, fp)
            diff = (now != old)[:, 0] if now.shape[1] == 1 else (now != old).any(axis=1)
            if not diff.any():
                rec.changed = None
            elif not diff.all():
                rec.changed = fp.subset(diff)
            self._check(t.alloc, rec)
            rec.old = None
            new.append((t.alloc, rec))
        touched = self.touched
        for t, _ in (*reads_fp, *writes_fp):
            seen = touched.get(t.alloc.id)
            write = any(t is w for w in shared_w)
            dyn = t.dynamic is not None
            if seen is not None and slot in seen[0] and (seen[1] or not write) and (seen[2] or not dyn):
                continue  # (nothing new: the usual case of a loop's accesses)
            cores, written, dynamic = seen if seen is not None else (frozenset(), False, False)
            touched[t.alloc.id] = (cores | {slot}, written or write, dynamic or dyn)
        for alloc, rec in new:
            self._store(alloc, slot, rec.write).add(rec)

    def depends_on_data(self) -> bool:
        """Whether the verdict rests on offset data: a shared allocation both cores touched, one
        writing, through a dynamic offset (such a program is traced, and checked, on every call)."""
        return any(len(c) > 1 and w and d for c, w, d in self.touched.values())

    # ------------------------------------------------------------------ records
    def _store(self, alloc: Any, slot: int, write: bool) -> _Store:
        key = (alloc.id, slot, write)
        store = self.stores.get(key)
        if store is None:
            store = self.stores[key] = _Store(alloc.storage.nbytes)
        return store

    def _ordered(self, rec: _Record, slot: int) -> bool:
        """Whether ``rec`` happens before every access ``slot`` makes from now on."""
        return self.sched.clock[slot][rec.slot] > rec.time

    def _prune(self) -> None:
        """After a meeting: drop the records every other core of the rank is now ordered after."""
        self.meetings = self.sched.meetings_done
        self.settle(lambda rec: self.sched.clock[rec.slot][rec.slot] > rec.time)
        cores = range(self.base, self.base + self.sched.lnc)
        for (_, owner, _), store in self.stores.items():
            others = [s for s in cores if s != owner]
            store.prune(lambda r, others=others: not all(self._ordered(r, s) for s in others))

    def _check(self, alloc: Any, rec: _Record) -> None:
        for other in range(self.base, self.base + self.sched.lnc):
            if other == rec.slot:
                continue
            for write in (True, False) if rec.write else (True,):
                store = self.stores.get((alloc.id, other, write))
                if store is None:
                    continue
                for prev in store.near(rec.fp):
                    if not self._ordered(prev, rec.slot):
                        self._pair(alloc, prev, rec)

    def _pair(self, alloc: Any, prev: _Record, rec: _Record) -> None:
        """Refuse the concurrent pair ``prev`` (other core, earlier) / ``rec`` unless benign."""
        if rec.write and prev.write:
            both = _overlap(prev.fp, rec.fp)
            if not both.size:
                return
            if rec.changed is rec.fp:
                hit = both
            else:
                hit = _overlap(prev.fp, rec.changed) if rec.changed is not None else both[:0]
            if not hit.size:
                # the same bytes as the other core wrote: either order leaves them; what the other
                # core's write changed there no longer differs from this core's view of it
                if prev.changed is not None:
                    prev.changed = _without(prev.changed, rec.fp)
                return
            self._defer(prev, rec, hit)
            return
        elif rec.write:  # this write against the other core's read
            if rec.changed is None:
                return
            hit = _overlap(prev.fp, rec.changed)
        else:  # this read against the other core's write
            if prev.changed is None:
                return
            hit = _overlap(prev.changed, rec.fp)
        if hit.size:
            raise RaceError(self.rule, self._message(alloc, prev, rec, int(hit.min())), rec.site)

    def _defer(self, prev: _Record, rec: _Record, hit: np.ndarray) -> None:
        """Keep write ``rec``'s change of bytes ``prev`` (the other core's write) wrote, with the
        values it overwrote (the other core's last ones), for :meth:`settle`."""
        t, isz = self._view, rec.fp.isz
        elems = np.unique(hit // isz)
        key = (t.alloc.id, isz, rec.slot)
        done = self.pending_elems.get(key)
        if done is not None:
            elems = elems[~np.isin(elems, done)]
        if not elems.size or rec.old is None:
            return
        self.pending_elems[key] = elems if done is None else np.concatenate([done, elems])
        idx = rec.fp.indices()
        order = np.argsort(idx, kind="stable")
        pos = order[np.searchsorted(idx[order], elems)]
        self.pending.append((t, rec, prev, elems, rec.old[pos]))

    def settle(self, due: Any = None) -> None:
        """Judge the deferred write/write races whose writer's window ended (``due(record)``;
        all when None, at the end of the trace): refused where the bytes now differ from the
        other core's last value, since the other order would leave that value."""
        keep = []
        for t, rec, prev, elems, old in self.pending:
            if due is not None and not due(rec):
                keep.append((t, rec, prev, elems, old))
                continue
            now = _values(t, _Footprint(rec.fp.isz, elems=elems))
            diff = (now != old).any(axis=1)
            if diff.any():
                byte = int(elems[diff].min()) * rec.fp.isz
                msg = self._message(t.alloc, prev, rec, byte)
                raise RaceError(self.rule, msg + self._LAST, rec.site)
        self.pending = keep
        self.pending_elems = {}
        for t, rec, _, elems, _ in keep:
            key = (t.alloc.id, rec.fp.isz, rec.slot)
            done = self.pending_elems.get(key)
            self.pending_elems[key] = elems if done is None else np.concatenate([done, elems])

    _LAST = (
        "; its last write there in the same window leaves a value the other core's last write "
        "does not, so the result depends on the order"
    )

    def _message(self, alloc: Any, prev: _Record, rec: _Record, byte: int) -> str:
        isz = dtypes.storage_dtype(alloc.dtype).itemsize
        index = tuple(int(i) for i in np.unravel_index(byte // isz, alloc.shape)) if alloc.shape else ()
        where = f"{prev.site[0].rsplit('/', 1)[-1]}:{prev.site[1]}" if prev.site else "an unknown line"
        me, other = self.sched.describe(rec.slot), self.sched.describe(prev.slot)
        verb = "writes" if rec.write else "reads"
        was = "wrote" if prev.write else "read"
        what = "different values into " if rec.write and prev.write else ""
        if hasattr(self.sched, "race_reason"):  # the programs of an N-D grid (trncore.sim.grid)
            return (f"{me} {verb} {what}{alloc.label()} (element {list(index)}) that {other} {was} "
                    f"at {where} ({prev.op}): {self.sched.race_reason()}")  # fmt: skip
        return (
            f"{me} {verb} {what}{alloc.label()} (element {list(index)}) that {other} {was} at "
            f"{where} ({prev.op}) with no core_barrier, sendrecv or collective of both cores "
            "between them: the two cores of an LNC=2 launch run at the same time and share HBM, "
            "so which access comes first is timing (nki.isa.core_barrier, NKI 0.3.0: write, then "
            "core_barrier, then read)"
        )
