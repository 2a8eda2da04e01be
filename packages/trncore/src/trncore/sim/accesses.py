"""The memory accesses of one instruction, recorded when it is traced (for the schedule).

:meth:`trncore.sim.program.TraceContext.emit` records each instruction's reads and writes as
:func:`record_access` does (building the same tuples in its own pass over the operands, once per
instruction); :func:`trncore.sim.schedule.schedule` later derives the instruction's dependencies
(RAW, WAR, WAW) from them. The recording sits below the program so that the program does not
import the schedule that analyses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Access", "record_access"]

# An access as recorded at trace time: (allocation, view dtype or None for "whole allocation",
# element offset, ((step, num), ...)). Only plain values and the allocation (which the program
# keeps anyway) are held, so recording never keeps a tile's views alive (storage recycling).
Access = tuple[Any, Any, int, tuple[tuple[int, int], ...]]


def record_access(reads: Sequence[Any], writes: Sequence[Any]) -> tuple[tuple[Access, ...], ...]:
    """The (reads, writes) accesses of one instruction (called by emit, read by the schedule).

    Operands that are not tensor views (no ``alloc``) carry no memory dependency and are skipped.
    The offset tensor of a dynamic view is read when the instruction runs: its access follows the
    reads (those of the reads' offsets, then the writes'). One pass per list (every instruction
    of a trace comes here).
    """
    r: list[Access] = []
    w: list[Access] = []
    offsets: list[Any] = []
    for operands, out in ((reads, r), (writes, w)):
        for t in operands:
            alloc = getattr(t, "alloc", None)
            if alloc is None:
                continue
            dynamic = getattr(t, "dynamic", None)
            if dynamic is None:
                out.append((alloc, t.dtype, t.offset, t.dims))
                continue
            out.append((alloc, None, 0, ()))  # a dynamic view: the whole allocation
            tensor = getattr(dynamic, "tensor", None)
            if tensor is not None:
                offsets.append(tensor)
    r.extend(_access(t) for t in offsets)
    return tuple(r), tuple(w)


def _access(t: Any) -> Access:
    """The access of one tensor view: its pattern, or the whole allocation for a dynamic view."""
    if getattr(t, "dynamic", None) is not None:
        return (t.alloc, None, 0, ())
    return (t.alloc, t.dtype, t.offset, t.dims)
