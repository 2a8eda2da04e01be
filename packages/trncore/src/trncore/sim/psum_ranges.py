"""When a PSUM tile must hold its bank: between a write and the reads of what it wrote.

:meth:`trncore.sim.program.TraceContext.check_capacity` counts each auto-placed PSUM tile as
taking a whole bank from the first instruction that touches it to the last. A tile used as a ring
entry (one ``nl.ndarray`` written afresh and read back again and again, a slot of a software
pipeline) then holds a bank for the whole kernel, although between its last read of one value and
the write of the next it holds nothing anyone reads. Compilation "performs instruction
scheduling, register allocation, and memory layout" (NKI Language Guide, "Compilation Model",
NKI 0.4.0 / SDK 2.30): memory is laid out by what is live, and a public kernel that keeps twelve
sub-bank PSUM ring entries (foxl-ai/kiln ``kiln/kernels/kda_decode.py``: six ``[1, 3, 128]`` and
six ``[128, 128]`` float32 tiles, a head's values in one entry while five other heads are in
flight) runs in its authors' trn1 and trn2 deployments at 128 to 512 (row, head) units per
call.

:func:`psum_live_ranges` gives each auto-placed PSUM tile's live ranges from the recorded
accesses: an element's value is live from the instruction that wrote it to the last one that
reads it (an accumulating ``nc_matmul`` reads its ``dst``), and a tile holds its bank while any
of its values is live, or during a write. A read through a dynamic offset or another element
width, or of an element no instruction wrote, counts from the tile's first access (as the whole
lifetime does), and such a write starts no new value. Tiles placed at explicit addresses keep
their whole lifetime: the kernel chose where they live. The capacity check asks for these ranges
only when the whole-lifetime count refuses, and not for a kernel that runs a dynamic loop (whose
live tensors hold their memory for the whole loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.arrays import strided_view
from trncore.sim.tensor import PSUM, Allocation, dims_cover


class _Values:
    """One PSUM tile's last-write position per element, and the live ranges found so far."""

    __slots__ = ("alloc", "first", "last_write", "whole", "ranges")

    def __init__(self, alloc: Allocation, position: int) -> None:
        self.alloc = alloc
        self.first = position  # the tile's first access
        self.whole: int | None = None  # every element last written here (no per-element array)
        self.last_write: np.ndarray | None = None  # per element, -1 never written
        self.ranges: list[list[int]] = []

    def add(self, start: int, end: int) -> None:
        """Add the range [start, end], merged with the ranges it meets."""
        ranges = self.ranges
        while ranges and ranges[-1][1] >= start:
            start = min(start, ranges[-1][0])
            ranges.pop()
        ranges.append([start, end])

    def view(self, access: Any) -> np.ndarray | None:
        """The per-element last-write view of a static access of the tile's element width."""
        _, dtype, offset, dims = access
        alloc = self.alloc
        if dtype is None or dtypes.itemsize(dtype) != dtypes.itemsize(alloc.dtype):
            return None
        if self.last_write is None:
            self.last_write = np.full(alloc.size, -1 if self.whole is None else self.whole, np.int64)
        return strided_view(self.last_write, offset, [c for _, c in dims], [s for s, _ in dims])

    def read(self, access: Any, position: int) -> None:
        dtype = access[1]
        if self.last_write is None and dtype is not None:
            start = self.first if self.whole is None else self.whole
        else:
            view = self.view(access)
            if view is None or not view.size:
                start = self.first
            else:
                start = int(view.min())
                if start < 0:
                    start = self.first
        self.add(start, position)

    def write(self, access: Any, position: int) -> None:
        self.add(position, position)
        _, dtype, offset, dims = access
        alloc = self.alloc
        if (
            dtype is not None
            and offset == 0
            and dtypes.itemsize(dtype) == dtypes.itemsize(alloc.dtype)
            and dims_cover(dims, alloc.size)  # every element once (NkiTensor.covers_allocation's test)
        ):
            self.whole, self.last_write = position, None
            return
        view = self.view(access)
        if view is not None:
            view[...] = position


def psum_live_ranges(instrs: Sequence[Any], allocs: Iterable[Allocation]) -> dict[int, list[tuple[int, int]]]:
    """The live ranges (first, last instruction index, inclusive) of each auto-placed PSUM tile
    of ``allocs`` that ``instrs`` (each with ``access = (reads, writes)``) touch, by tile id."""
    wanted = {a.id for a in allocs if a.buffer is PSUM and a.address_bytes is None}
    values: dict[int, _Values] = {}
    for position, ins in enumerate(instrs):
        access = ins.access
        if not access:
            continue
        reads, writes = access
        # reads first: an instruction that reads and writes a tile (an accumulating matmul)
        # reads the value before its write starts the next one
        for is_write, accesses in ((False, reads), (True, writes)):
            for acc in accesses:
                alloc = acc[0]
                if alloc.id not in wanted:
                    continue
                state = values.get(alloc.id)
                if state is None:
                    state = values[alloc.id] = _Values(alloc, position)
                if is_write:
                    state.write(acc, position)
                else:
                    state.read(acc, position)
    return {i: [(s, e) for s, e in v.ranges] for i, v in values.items()}
