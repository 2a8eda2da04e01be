"""When an SBUF tile must start to hold memory: loads a compiler may defer (the capacity model).

:meth:`trncore.sim.program.TraceContext.check_capacity` counts each SBUF tile live over a range
of the traced instruction list. In program order that range starts at the first instruction that
touches the tile. The compiler does not run instructions in program order: "the compiler
scheduler is free to reorder independent operations" unless the kernel asks otherwise
(``nki.language.no_reorder``, NKI 0.3.0 API reference), and compilation "performs instruction
scheduling, register allocation, and memory layout" (NKI Language Guide, "Compilation Model",
NKI 0.4.0 / SDK 2.30). A transfer from HBM into a tile depends on nothing on chip: a scheduler
can issue it as late as just before the tile's first other use, and the tile needs its memory
only from then. Kernels of AWS's library load many tiles in one loop and use them in a later
one, leaving the prefetch distance to the compiler (nki-library's ``output_projection_tkg``).

:func:`deferred_starts` gives that later start, and keeps the program-order start wherever
moving the transfer could change what it reads or what the tile holds:

* every instruction touching the tile before the new start is a DMA transfer (engine ``dma``)
  that reads only HBM (no on-chip source, not even an index tile) and writes the tile;
* no instruction between a transfer and the new start writes HBM bytes that transfer reads
  (compared by allocation and byte span, conservatively: the span from the lowest to the highest
  byte the access pattern can touch);
* no meeting of the cores of an LNC=2 launch (``core_barrier``, ``sendrecv``, a collective) lies
  in between: the other core may write the source after it, and that write is not in between in
  the traced list, which runs the instances one at a time;
* the transfer reads through no dynamic offset (a register may change before the new start) and
  lies in no ``nl.no_reorder()`` block (which keeps its operations in program order); a transfer
  before such a block moves at most to the block's start.

A tile only transferred into and never used again starts at its last transfer. The symmetric
move, a store to HBM hoisted to just after the tile's last other use, is not modelled: a range
ends at the tile's last use in program order (hoisting stores and deferring loads of the same
HBM bytes would have to be checked against each other). Tiles placed at
explicit addresses and kernel arguments in SBUF are not deferred. The model accepts a kernel
when program order fits or the deferred ranges fit (each is a schedule a compiler may choose);
it does not move any other instruction, so what cannot fit with every load as late as possible
is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trncore.sim import dtypes

__all__ = ["MEETING_OPS", "deferred_starts", "is_meeting"]

#: Instructions at which the cores of an LNC=2 launch meet (trncore.sim.lnc, trncore.sim.collectives).
MEETING_OPS = frozenset({"core_barrier", "sendrecv"})

_Span = tuple[Any, int, int]  # (HBM allocation, first byte, end byte)


def is_meeting(ins: Any) -> bool:
    """Whether ``ins`` is a meeting of the cores (a barrier, a send/receive or a collective)."""
    return ins.op in MEETING_OPS or ins.meta.get("src") == "collective"


def _span(acc: Any) -> _Span:
    """The bytes an access can touch, as one span of its allocation (a superset for strided ones)."""
    alloc, dtype, offset, dims = acc
    if dtype is None:  # a dynamic view: the whole allocation
        return alloc, 0, alloc.size * dtypes.itemsize(alloc.dtype)
    isz = dtypes.itemsize(dtype)
    lo = hi = offset
    for step, num in dims:
        if num <= 0:
            return alloc, 0, 0
        reach = (num - 1) * step
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return alloc, lo * isz, (hi + 1) * isz


def deferred_starts(
    instrs: Sequence[Any], tiles: Sequence[Any], in_order: Sequence[tuple[int, int]] = ()
) -> list[int]:
    """For each of ``tiles`` (SBUF allocations), the instruction position its live range may start at.

    ``instrs`` is the traced program (each with ``op``, ``engine``, ``meta`` and ``access``, the
    ``(reads, writes)`` of :func:`trncore.sim.accesses.record_access`); ``in_order`` lists the
    ``(first, end)`` positions of ``nl.no_reorder()`` blocks. A tile that no rule of the module
    docstring lets start later gets its program-order start (its first use, or its allocation
    when never used).
    """
    pinned = np.zeros(len(instrs), dtype=bool)  # inside a no_reorder block
    floor = np.arange(len(instrs))  # how late a load may move to run before position p
    for first, end in in_order:
        pinned[first:end] = True
        floor[first:end] = np.minimum(floor[first:end], first)  # not into the block
    starts = [a.position if a.first_use is None else a.first_use for a in tiles]
    index = {
        a.id: i
        for i, a in enumerate(tiles)
        if a.first_use is not None and a.address_bytes is None and not a.is_input
    }
    if not index:
        return starts
    done: set[int] = set()  # tiles whose start is settled
    pending: dict[int, list[_Span]] = {}  # tile -> the HBM spans its transfers so far read
    last_load: dict[int, int] = {}
    by_source: dict[int, set[int]] = {}  # HBM allocation id -> pending tiles reading it

    def settle(i: int, position: int | None) -> None:
        """Fix tile ``i``'s start at ``position`` (None: keep its program-order start)."""
        done.add(i)
        spans = pending.pop(i, ())
        for alloc, _, _ in spans:
            users = by_source.get(alloc.id)
            if users is not None:
                users.discard(i)
        if position is not None:
            starts[i] = int(floor[position])

    for pos, ins in enumerate(instrs):
        access = ins.access
        if access is None:
            continue
        if pending and is_meeting(ins):
            for i in list(pending):
                settle(i, None)
        reads, writes = access
        if by_source:
            for acc in writes:
                alloc = acc[0]
                if alloc.buffer.on_chip or alloc.id not in by_source:
                    continue
                _, lo, hi = _span(acc)
                for i in [i for i in by_source[alloc.id] if any(
                    s[0] is alloc and s[1] < hi and lo < s[2] for s in pending[i]
                )]:  # fmt: skip
                    settle(i, None)  # its source changes before its first use: not movable
        load = (
            ins.engine == "dma"
            and not pinned[pos]
            and not is_meeting(ins)
            and all(not acc[0].buffer.on_chip and acc[1] is not None for acc in reads)
        )
        read_tiles = {index[acc[0].id] for acc in reads if acc[0].id in index}
        for acc in writes:
            tile = index.get(acc[0].id)
            if tile is None or tile in done or tile in read_tiles:
                continue
            if not load:  # computed on chip: the range starts here (or at its first use)
                settle(tile, None if tile not in pending else pos)
                continue
            spans = pending.setdefault(tile, [])
            for r in reads:
                span = _span(r)
                spans.append(span)
                by_source.setdefault(span[0].id, set()).add(tile)
            last_load[tile] = pos
        for i in read_tiles:
            if i not in done:
                settle(i, None if i not in pending else pos)
    for i in list(pending):
        settle(i, last_load[i])
    return starts
