"""Trace a kernel once into a flat instruction list, then replay that list on new data.

NKI 0.3.0 specializes every loop and ``if`` at compile time (AWS NKI Language Guide (NKI 0.3.0)) and has no
registers in the emulated subset, so a kernel's instruction sequence depends only on its key (source, argument
shapes/dtypes, compile-time parameters, target). The first call runs the Python body: every ISA
call is checked, turned into a closure over pre-resolved NumPy views of the program's memory,
executed at once and recorded. Later calls with the same key copy the inputs in and run the
recorded closures (allocation markers refill each new tensor with its NaN/4 sentinel at its
allocation point, unless the tensor's first instruction overwrites all of it): no Python kernel
code runs, and the result is bit-identical to the traced run
because the same closures execute on the same storage. On-chip storage is recycled once the kernel
drops every reference to a tensor, so a program's memory is its working set, not the sum of every
tile an unrolled loop allocated.
"""

from __future__ import annotations

import functools
import heapq
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np

from trncore.sim import context, dtypes, heap, hooks, lending
from trncore.sim.accesses import Access
from trncore.sim.blas import blas_threads
from trncore.sim.errors import CapacityError, LanguageError, UninitializedReadError, warn_at
from trncore.sim.isa_instruction import ran_dynamic_loop
from trncore.sim.liveness import deferred_starts
from trncore.sim.psum_ranges import psum_live_ranges
from trncore.sim.rules import TargetRules
from trncore.sim.tensor import (
    PSUM,
    SBUF,
    SENTINEL_INT,
    SHARED_HBM,
    Allocation,
    Buffer,
    Layout,
    NkiTensor,
    layout,
)
from trncore.sim.work_clock import CLOCK, run_timed, timed

#: an object's identity without ``id()`` (which raises an audit event: see trncore.sim.context)
_identity = object.__hash__

__all__ = ["RECORD_BYTES", "Instr", "Program", "TraceContext"]


#: Memory of one recorded instruction-list entry, estimated from measurement: the process's
#: resident memory grew by 0.49 GB while the public trnfft's Bluestein FFT of 1 009 points traced
#: 355 030 entries over 0.4 MB of tensor storage (1 380 B each: the Instr, its closure and cells,
#: the views it binds, its access record and its allocation). :attr:`Program.footprint`.
RECORD_BYTES = 1400


@dataclass(slots=True)
class Instr:
    """One recorded instruction (slots: a large trace records hundreds of thousands)."""

    op: str
    engine: str
    site: tuple[str, int] | None
    run: Callable[[], None]
    meta: dict[str, Any] = field(default_factory=dict)
    #: (reads, writes) as recorded by :func:`trncore.sim.accesses.record_access`, for the schedule
    access: tuple[Any, ...] | None = None


@dataclass
class Program:
    """A traced kernel: its instructions, its memory and how arguments map onto it."""

    key: Any
    target: str
    lnc: int
    instrs: list[Instr]
    allocs: list[Allocation]
    inputs: list[Allocation]
    outputs: list[NkiTensor]
    single_output: bool
    written_inputs: list[int]
    sbuf_peak: int = 0
    psum_peak: int = 0
    psum_banks_peak: int = 0
    #: per-engine accumulator registers (AWS NKI docs, nki.isa.activation (NKI 0.3.0), reduce_cmd), zeroed at
    #: the start of every run
    registers: list[np.ndarray] = field(default_factory=list)
    #: control flow read device data (register_load): valid only for the traced data, not cached
    data_dependent: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the NKI release the program was traced for (trncore.sim.versions)
    nki_version: str | None = None
    #: float->int casts truncate (releases before 0.6.0, see dtypes.float_to_int_truncation)
    cast_truncate: bool = False
    #: indices of the arguments whose caller's arrays are the inputs' storage (a one-shot
    #: program, trncore.sim.lending): written in place, nothing to write back
    lent_inputs: frozenset[int] = frozenset()
    #: the runs a replay calls, in order: the instructions' and the kept sentinel fills', without
    #: the markers that do nothing (:func:`_no_fill`: a tile first overwritten whole, never
    #: touched, or sharing an earlier tile's storage); made at the first replay, after the
    #: trace settled every marker
    _runs: tuple[Callable[[], None], ...] | None = field(default=None, init=False, repr=False)

    def run(self, arrays: Sequence[np.ndarray]) -> Any:
        """Replay on ``arrays`` (one per tensor argument); returns the output array(s)."""
        truncate = dtypes.float_to_int_truncation(self.cast_truncate)
        with self.lock, blas_threads(), truncate, dtypes.ieee_arithmetic():
            return run_timed(self._replay, arrays)  # a replay is all data work (work_clock)

    def _replay(self, arrays: Sequence[np.ndarray]) -> Any:
        for reg in self.registers:
            reg[...] = 0
        for alloc, arr in zip(self.inputs, arrays):
            dtypes.assign(alloc.flat, np.asarray(arr).reshape(-1))
        runs = self._runs
        if runs is None:
            runs = self._runs = tuple(ins.run for ins in self.instrs if ins.run is not _no_fill)
        for run in runs:
            run()
        return self._outputs(arrays)

    def collect(self, arrays: Sequence[np.ndarray] | None, hand_over: bool = False) -> Any:
        """Write modified inputs back to the caller's arrays; copies of the outputs.

        ``hand_over`` (a program that will never run again, trncore.sim.lending): an output that
        is a whole allocation of its own is returned as a view of the program's storage instead
        of a copy. The program must not be run after that: its run would write the caller's
        outputs.
        """
        return run_timed(self._outputs, arrays, hand_over)

    def _outputs(self, arrays: Sequence[np.ndarray] | None, hand_over: bool = False) -> Any:
        if arrays is not None:
            for i in self.written_inputs:
                target = arrays[i]
                if i not in self.lent_inputs and isinstance(target, np.ndarray) and target.flags.writeable:
                    dtypes.assign(target, self.inputs[i].flat.reshape(target.shape))
        if hand_over:
            outs = self._handed_over()
        else:
            outs = tuple(np.array(t.array(), copy=True) for t in self.outputs)
        if self.single_output:
            return outs[0]
        return outs if outs else None

    def _handed_over(self) -> tuple[np.ndarray, ...]:
        """The outputs for :meth:`collect` with ``hand_over``: views of storage where they can be."""
        outs = []
        # a storage goes to one output, another output of it is copied (the same tensor returned
        # twice; on-chip tiles at one explicit address share their storage)
        given: set[int] = set()
        for t in self.outputs:
            alloc = t.alloc
            arr = t.array()
            view = None
            if not alloc.is_input and _identity(alloc.storage) not in given:
                view = lending.handed_over(arr, alloc.storage)
            if view is None:
                view = np.array(arr, copy=True)
            else:
                given.add(_identity(alloc.storage))
            outs.append(view)
        return tuple(outs)

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes of tensor storage the program holds (each buffer once, masks included)."""
        seen: dict[int, int] = {}
        for alloc in self.allocs:
            # (Allocation.arrays inlined: tiles at one explicit address share one storage, and
            # AWS's modular allocator makes tens of thousands of them)
            for arr in (alloc.storage, alloc._mask, alloc._mm_flags):
                if arr is not None:
                    base = arr.base if isinstance(arr.base, np.ndarray) else arr
                    seen[object.__hash__(base)] = base.nbytes  # (its identity: id() is audited)
        return sum(seen.values())

    @property
    def footprint(self) -> int:
        """Bytes the program holds: its tensor storage (:attr:`nbytes`) and its recorded
        instruction list, estimated at :data:`RECORD_BYTES` per entry (markers included).

        The cache's byte budget counts this. A kernel looping over narrow tiles records hundreds
        of thousands of instructions over kilobytes of storage (a Bluestein FFT of 1 009 points:
        355 030 entries over 0.4 MB), so counting storage alone let a session keep gigabytes.
        """
        return self.nbytes + RECORD_BYTES * len(self.instrs)

    def engine_counts(self) -> dict[str, int]:
        """Instructions per engine (allocation markers excluded)."""
        counts: dict[str, int] = {}
        for ins in self.instrs:
            if ins.engine != "alloc":
                counts[ins.engine] = counts.get(ins.engine, 0) + 1
        return counts

    def listing(self, limit: int | None = None) -> str:
        """The instruction list, one line per instruction with its engine and kernel line."""
        lines: list[str] = []
        for ins in self.instrs:
            if ins.engine == "alloc":
                continue
            where = f"{ins.site[0].rsplit('/', 1)[-1]}:{ins.site[1]}" if ins.site else "?"
            shape = {k: v for k, v in ins.meta.items() if k in ("K", "M", "N", "free", "bytes")}
            lines.append(f"{len(lines):6d}  {ins.engine:<7} {ins.op:<22} {where:<28} {shape}")
            if limit is not None and len(lines) >= limit:
                lines.append("   ...")
                break
        return "\n".join(lines)

    def report(self) -> Any:
        """The cost report of this program (:func:`trncore.sim.report.program_report`)."""
        return hooks.program_report(self)  # the cost model is above: trncore.sim.report

    def __len__(self) -> int:
        """The trace size: instructions, not counting allocation markers."""
        return sum(1 for ins in self.instrs if ins.engine != "alloc")


class TraceContext:
    """State of one kernel trace: memory, recorded instructions, the checks' bookkeeping."""

    def __init__(self, rules: TargetRules, *, strict: bool, execute: bool, lnc: int = 1) -> None:
        self.rules = rules
        self.target = rules.name
        self.strict = strict
        self.execute = execute
        self.lnc = lnc
        #: instances of the launch sharing its shared_hbm allocations: the LNC cores, or the
        #: programs of an N-D SPMD grid (set by trncore.sim.grid.run_grid)
        self.instances = lnc
        self.program_id = 0
        self.grid = False
        self.instrs: list[Instr] = []
        self.allocs: list[Allocation] = []
        self.shared_allocs: list[Allocation] = []
        self.shared_counter = 0
        self.inputs: list[Allocation] = []
        #: the kernel arguments written (their allocation ids), saving lent ones' bytes
        self.written = lending.WrittenArguments()
        self.engine_state: dict[str, Any] = {}
        #: the results of instructions' static checks, by instruction, kernel line, operand
        #: signatures and static keyword values (trncore.sim.checks.static_lookup): a loop
        #: body's later iterations skip the checks its first one passed
        self.static_checks: dict[tuple[Any, ...], Any] = {}
        #: the strided views made of each on-chip storage, by the storage's identity (kept with
        #: it, so an identity is never a dead array's): shared by the tiles that hold it
        self.storage_arrays: dict[int, tuple[np.ndarray, dict[tuple[Any, ...], np.ndarray]]] = {}
        self.free_storage: dict[int, list[np.ndarray]] = {}
        #: storage of on-chip tiles placed at an explicit address, by (instance, buffer,
        #: partition, byte, nbytes): tiles at one address share it (see :meth:`allocate`)
        self.address_storage: dict[tuple[int, str, int, int, int], np.ndarray] = {}
        #: the instance (core) of each on-chip allocation made by an instance other than 0, by id:
        #: each core of an LNC=2 launch has its own SBUF and PSUM (:meth:`check_capacity`)
        self.alloc_core: dict[int, int] = {}
        #: the NKI release this trace is checked against (set by the runner)
        self.nki_version: str | None = None
        #: runs each instruction with an operand in shared HBM instead of :meth:`emit` when set
        #: (an executing LNC=2 trace: :class:`trncore.sim.core_races.RaceTracker`, installed by
        #: trncore.sim.lnc); an instruction touching no shared HBM has nothing to check there
        #: and runs as on any trace
        self.on_emit: Callable[[Instr, Sequence[NkiTensor], Sequence[NkiTensor]], None] | None = None
        heap.configure()  # keep freed scratch memory unless TRNSCI_SIM_HEAP=system (trncore.sim.heap)

    # ------------------------------------------------------------------ memory
    def allocate(
        self,
        shape: tuple[int, ...],
        dtype: str,
        buffer: Buffer,
        name: str,
        init: Any,
        site: tuple[str, int] | None,
        address: tuple[int, int] | None = None,
        sizes: Layout | None = None,
    ) -> NkiTensor:
        """A new tensor (``nl.ndarray`` and friends): records an allocation marker instruction.

        ``sizes`` is :func:`trncore.sim.tensor.layout` of ``shape`` and ``dtype`` when the caller
        has it (computed here otherwise).

        On-chip storage of dead tensors is reused; under LNC=2 instance 1 gets instance 0's
        k-th ``shared_hbm`` allocation, as the instances share that memory
        (AWS NKI docs, Using Logical Neuron Cores (NKI 0.3.0)).

        On-chip tiles given the same explicit ``address=(partition, byte)`` and the same size
        share one storage, as they share those bytes on the chip (nl.ndarray, NKI 0.3.0:
        ``address`` places the tile): nkilib's modular allocator builds lists of tiles of which
        only a few are physically distinct (rotating buffers), and storage per logical tile
        multiplied a kernel's memory by its loop counts. Such a tile is not filled with the
        sentinel when allocated (the chip's bytes hold what the last tile there wrote) and is
        never recycled for other tensors.
        """
        if buffer is SHARED_HBM and self.instances > 1:
            # AWS NKI docs, Using Logical Neuron Cores (NKI 0.3.0): under LNC=2 the instances share
            # shared_hbm; the k-th shared_hbm allocation of instance 1 is the same tensor as instance 0's
            # k-th.
            k = self.shared_counter
            self.shared_counter += 1
            # (whichever instance gets there first allocates: instances interleave at exchanges)
            if k < len(self.shared_allocs):
                alloc = self.shared_allocs[k]
                if alloc.shape != shape or alloc.dtype != dtype:
                    raise LanguageError(
                        "lnc-identical-control-flow",
                        f"instance {self.program_id} allocated shared_hbm {list(shape)} {dtype} "
                        f"where instance 0 allocated {alloc.label()}",
                        site,
                    )
                return NkiTensor.whole(alloc)
        if sizes is None:
            sizes = layout(shape, dtype)
        nbytes = sizes[0]
        storage = None
        placed = address is not None and buffer.on_chip
        aliased = False
        if placed:
            assert address is not None
            where = (self.program_id, buffer.name, int(address[0]), int(address[1]), nbytes)
            storage = self.address_storage.get(where)
            aliased = storage is not None
            if storage is None:
                storage = np.empty(nbytes, dtype=np.uint8)
                self.address_storage[where] = storage
        elif buffer.on_chip:
            free = self.free_storage.get(nbytes)
            if free:
                storage = free.pop()
        alloc = Allocation(
            len(self.allocs),
            buffer,
            dtype,
            shape,
            name,
            site,
            init,
            len(self.instrs),
            self.strict,
            storage,
            sizes,
        )
        self.allocs.append(alloc)
        if buffer.on_chip:
            # the strided views made of these bytes, shared by every tile that holds them (a
            # recycled or address-placed storage): the same (dtype, offset, pattern) of the same
            # bytes is the same NumPy view (NkiTensor.array), so a loop's new tile of a
            # recycled storage reuses the views its predecessors made instead of making them again
            entry = self.storage_arrays.get(_identity(alloc.storage))
            if entry is None or entry[0] is not alloc.storage:
                entry = self.storage_arrays[_identity(alloc.storage)] = (alloc.storage, {})
            alloc._arrays = entry[1]
            if self.program_id:
                self.alloc_core[alloc.id] = self.program_id
        if buffer is SHARED_HBM and self.instances > 1:
            self.shared_allocs.append(alloc)
        self._emit_alloc(alloc, site, fill=not aliased, lazy=buffer.on_chip and not placed)
        view = NkiTensor.whole(alloc)
        if buffer.on_chip and not placed:
            # Recycle the storage once no Python object can name this tensor any more: every
            # later instruction comes after every use, so replays stay correct
            # (docs/emulator.md, Trace once, replay many times).
            alloc.die_with_views(view, self._recycle)
        return view

    def _emit_alloc(
        self, alloc: Allocation, site: tuple[str, int] | None, fill: bool = True, lazy: bool = False
    ) -> None:
        """An allocation marker: fills the tensor with its sentinel at this point of the program
        (unless ``fill`` is false: a tile sharing the storage of an earlier one).

        ``lazy`` (on-chip tiles with storage of their own): whether the fill is needed is decided
        by the first instruction touching the tile (:meth:`_settle_fills`); until then nothing
        can observe it, so the traced run fills there, and the program keeps the fill at its
        marker only if that instruction does not overwrite every element first.
        """
        if fill and lazy:
            # the fill is made when the first instruction touching the tile keeps it
            # (_settle_fills): most such tiles are overwritten first or never touched
            marker = Instr("alloc", "alloc", site, _no_fill, {"alloc": alloc.id})
            alloc.fill_marker = marker
            self.instrs.append(marker)
            return
        run = _sentinel_fill(alloc) if fill else _no_fill
        self.instrs.append(Instr("alloc", "alloc", site, run, {"alloc": alloc.id}))
        if self.execute and fill:
            run_timed(run)

    def _settle_fills(
        self,
        op: str,
        reads: Sequence[NkiTensor],
        writes: Sequence[NkiTensor],
        whole_or_fails: bool = False,
    ) -> None:
        """Decide the sentinel fills still waiting on the tiles this instruction touches.

        A fill is dropped when the instruction writes every element of the tile, unconditionally
        (:data:`OVERWRITING_OPS`, static views only), without reading the tile: nothing can
        have observed the sentinel, and every replay overwrites it at the same point. A dynamic
        read keeps the fill unless ``whole_or_fails`` (see :meth:`emit`): with it, every replay
        either writes the whole view or raises, so the sentinel is never observed either.
        Otherwise the traced run fills now, before the instruction runs, and the marker keeps
        its fill: between a tile's allocation and its first instruction nothing else uses its
        storage (recycled storage comes from tiles that no Python object names any more).
        """
        offsets: list[NkiTensor] = []
        overwrite = op in OVERWRITING_OPS
        for t in reads:
            if t.dynamic is not None:
                overwrite = overwrite and whole_or_fails
                tensor = getattr(t.dynamic, "tensor", None)
                if tensor is not None:
                    offsets.append(tensor)
        for t in writes:
            if t.dynamic is not None:
                overwrite = False
                tensor = getattr(t.dynamic, "tensor", None)
                if tensor is not None:
                    offsets.append(tensor)
        for t in writes:
            alloc = t.alloc
            marker = alloc.fill_marker
            if marker is None:
                continue
            alloc.fill_marker = None
            if (
                overwrite
                and _covers(t)
                and all(r.alloc is not alloc for r in reads)
                and all(o.alloc is not alloc for o in offsets)
            ):
                continue  # (the marker's run stays _no_fill)
            marker.run = _sentinel_fill(alloc)
            if self.execute:
                run_timed(marker.run)
        for t in (*reads, *offsets):
            alloc = t.alloc
            marker = alloc.fill_marker
            if marker is not None:
                alloc.fill_marker = None
                marker.run = _sentinel_fill(alloc)
                if self.execute:
                    run_timed(marker.run)

    def close_fills(self) -> None:
        """At the end of the trace: the fills of tiles no instruction touched are not needed
        (their markers' runs are still :func:`_no_fill`); the tiles' shared view arrays
        (:meth:`NkiTensor.array`) are let go (the instructions hold the ones they use)."""
        for alloc in self.allocs:
            alloc.fill_marker = None
            alloc.forget_arrays()
        self.storage_arrays.clear()

    def _recycle(self, alloc: Allocation) -> None:
        alloc.fill_marker = None  # never touched: nothing reads its fill (the marker stays _no_fill)
        alloc.stop_tracking()
        self.free_storage.setdefault(alloc.storage.nbytes, []).append(alloc.storage)

    def add_input(self, array: np.ndarray, buffer: Buffer, name: str = "", lend: bool = False) -> NkiTensor:
        """Copy a kernel argument into a new ``buffer`` allocation (always initialized) and return it.

        ``lend``: the caller's ``array`` itself is the allocation's storage, no copy (a one-shot
        program, see trncore.sim.lending; the caller checked :func:`~trncore.sim.lending.lendable`).
        """
        dtype = dtypes.dtype_name(array.dtype)
        alloc = Allocation(
            len(self.allocs),
            buffer,
            dtype,
            tuple(int(d) for d in array.shape),
            name,
            None,
            "input",
            0,
            self.strict,
            array.reshape(-1).view(np.uint8) if lend else None,
        )
        if lend:
            self.written.lent[alloc.id] = array
        else:
            run_timed(_copy_in, alloc.flat, array)
        alloc.is_input = True
        if alloc.mask is not None:
            alloc.mask[:] = True
        self.allocs.append(alloc)
        self.inputs.append(alloc)
        return NkiTensor.whole(alloc)

    # ------------------------------------------------------------------ instructions
    def emit(
        self,
        op: str,
        engine: str,
        site: tuple[str, int] | None,
        reads: Sequence[NkiTensor],
        writes: Sequence[NkiTensor],
        run: Callable[[], None],
        meta: dict[str, Any] | None = None,
        *,
        matmul_write: bool = False,
        writes_whole_or_fails: bool = False,
    ) -> None:
        """Record (and, on an executing trace, run) one instruction after its checks passed.

        ``writes_whole_or_fails``: the instruction writes every element of each static write
        view or raises, whatever its dynamic reads' offsets (``dma_copy`` with
        ``oob_mode=error``: a register- or vector-offset source out of bounds is an error, not a
        skipped transfer), so a dynamic read does not keep a written tile's sentinel fill.

        One pass over the operands does what every instruction needs (this runs ~150 000 times
        in a large nkilib trace): each tile's use range, the sentinel fills waiting on it, the
        strict-mode written masks, the PSUM matmul flags, whether a kernel argument was written,
        and whether any operand is in shared HBM (only such an instruction goes through an LNC=2
        trace's race check, :class:`trncore.sim.core_races.RaceTracker`, which lets every other
        instruction simply run).
        """
        position = len(self.instrs)
        settle = False  # a tile's sentinel fill waits for this instruction
        shared = False  # an operand in shared HBM (the LNC=2 race check)
        strict = self.strict
        # the accesses for the schedule, as trncore.sim.accesses.record_access records them
        # (built here, in the one pass over the operands): a static view's pattern, the whole
        # allocation for a dynamic view, and after the reads the offset tensors of the dynamic
        # views (the reads' first, then the writes')
        r_acc: list[Access] = []
        w_acc: list[Access] = []
        offsets: list[NkiTensor] | None = None
        for t in reads:
            alloc = t.alloc
            if alloc.first_use is None:
                alloc.first_use = position
            alloc.last_use = position
            dynamic = t.dynamic
            if dynamic is not None:
                dynamic.tensor.alloc.last_use = position
                settle = True
                r_acc.append((alloc, None, 0, ()))
                if offsets is None:
                    offsets = []
                offsets.append(dynamic.tensor)
            else:
                r_acc.append((alloc, t.dtype, t.offset, t.dims))
                if alloc.fill_marker is not None:
                    settle = True
            if strict:
                mask = t.mask_array()
                if mask is not None and not mask.all():
                    raise UninitializedReadError(
                        "read-before-write",
                        f"{op} reads elements of {t.describe()} that no instruction wrote "
                        f"({int((~mask).sum())} of {mask.size} elements unwritten)",
                        site,
                    )
            buffer = alloc.buffer
            if buffer is PSUM:
                if not matmul_write:
                    alloc.read_since_matmul = True
            elif buffer is SHARED_HBM:
                shared = True
        for t in writes:
            alloc = t.alloc
            if alloc.first_use is None:
                alloc.first_use = position
            alloc.last_use = position
            dynamic = t.dynamic
            if dynamic is not None:
                dynamic.tensor.alloc.last_use = position
                settle = True
                w_acc.append((alloc, None, 0, ()))
                if offsets is None:
                    offsets = []
                offsets.append(dynamic.tensor)
            else:
                w_acc.append((alloc, t.dtype, t.offset, t.dims))
                if alloc.fill_marker is not None:
                    settle = True
            if alloc.tracks_mask:
                mask = t.mask_array()
                if mask is not None:
                    mask[...] = True
                elif alloc.mask is not None:
                    # dynamic or reinterpreting writes: the written elements are not known
                    # statically, so strict mode conservatively treats the whole tensor as written
                    alloc.mask[...] = True
            if alloc.is_input:
                self.written.add(alloc.id)
            buffer = alloc.buffer
            if buffer is PSUM:
                if not matmul_write and dynamic is None and alloc.flags_summary is not False:
                    t.set_matmul_flags(False)  # (flags not made yet are all clear: summary False)
            elif buffer is SHARED_HBM:
                shared = True
        if settle:
            self._settle_fills(op, reads, writes, writes_whole_or_fails)
        if offsets is not None:
            r_acc.extend(
                (o.alloc, None, 0, ()) if o.dynamic is not None else (o.alloc, o.dtype, o.offset, o.dims)
                for o in offsets
            )
        access = (tuple(r_acc), tuple(w_acc))
        if writes and not writes[0].size and all(t.size == 0 for t in writes):  # (hot path: one test)
            run = _write_nothing  # every output empty (a program owning no rows/columns): a no-op
        ins = Instr(op, engine, site, run, meta or {}, access)
        self.instrs.append(ins)
        if shared and self.on_emit is not None:  # an LNC=2 trace: the race check runs it (core_races)
            ins.run = timed(run)  # its data work still counted (trncore.sim.work_clock)
            try:
                self.on_emit(ins, reads, writes)
            finally:
                ins.run = run
        elif self.execute:
            start = perf_counter()  # work_clock.run_timed inlined: once per instruction
            run()
            CLOCK.seconds += perf_counter() - start

    # ------------------------------------------------------------------ end of trace
    def check_capacity(self) -> tuple[int, int, int]:
        """Sweep allocation lifetimes (first use to last use, docs/emulator.md) for SBUF and PSUM limits.

        Returns (SBUF peak bytes per partition, PSUM peak bytes, PSUM peak banks), the highest of
        any core. Each core of an LNC=2 launch has its own SBUF and PSUM (AWS NKI docs, Using
        Logical Neuron Cores, NKI 0.3.0: two physical cores): the instances are traced into one
        instruction list, interleaved where they meet, and each core's tiles are swept alone.
        """
        by_core: dict[int, list[Allocation]] = {}
        for a in self.allocs:
            if a.buffer.on_chip:
                by_core.setdefault(self.alloc_core.get(a.id, 0), []).append(a)
        peaks = [self._core_capacity(by_core[core], core) for core in sorted(by_core)]
        sbuf_peak, psum_bytes, psum_banks = (max((p[k] for p in peaks), default=0) for k in range(3))
        return sbuf_peak, psum_bytes, psum_banks

    def _core_capacity(self, allocs: list[Allocation], core: int) -> tuple[int, int, int]:
        """One core's (SBUF peak, PSUM bytes peak, PSUM banks peak) of its on-chip ``allocs``.

        SBUF is swept twice when needed: in program order, and, if that exceeds the limit, with
        every transfer from HBM deferred to just before the tile's first other use
        (trncore.sim.liveness): either is a schedule the compiler may choose, so the kernel is
        refused only when both exceed.
        """
        rules = self.rules
        where = f" on core {core} of the LNC={self.lnc} launch" if self.lnc > 1 else ""
        sbuf = [a for a in allocs if a.buffer is SBUF]
        # live from the first instruction that touches the tile (a tile allocated early but
        # first written later holds no memory before: the compiler allocates live ranges)
        # to its last use
        in_order = [a.position if a.first_use is None else a.first_use for a in sbuf]
        try:
            sbuf_peak = self._sweep(sbuf, in_order, rules.sbuf_bytes, "bytes", where)
        except CapacityError:
            deferred = deferred_starts(self.instrs, sbuf, self.engine_state.get("no_reorder", ()))
            if deferred == in_order:
                raise
            sbuf_peak = self._sweep(
                sbuf, deferred, rules.sbuf_bytes, "bytes",
                f"{where} (with every load from HBM deferred to just before its tile's first use)",
            )  # fmt: skip
        psum = [a for a in allocs if a.buffer is PSUM]
        psum_starts = [a.position if a.first_use is None else a.first_use for a in psum]
        try:
            psum_banks = self._sweep(psum, psum_starts, rules.psum_banks, "banks", where)
        except CapacityError as whole_life:
            psum_banks = self._psum_by_values(psum, psum_starts, where, whole_life)
        return sbuf_peak, self._psum_bytes_peak(psum), psum_banks

    def _psum_by_values(
        self, psum: list[Allocation], starts: list[int], where: str, whole_life: CapacityError
    ) -> int:
        """PSUM banks swept again with each auto-placed tile live only while a value it holds is
        (trncore.sim.psum_ranges): a ring of PSUM tiles, each written afresh and read back, needs a
        bank only around each use. Fitting so, the kernel runs with a warning at the allocation the
        whole-lifetime sweep refused (it relies on the compiler laying PSUM out by live ranges), an
        error in strict mode; not fitting so either, it is refused as before. Not for a kernel
        that ran a dynamic loop: there "the compiler must keep all live tensors in on-chip memory
        (SBUF/PSUM) for the entire duration of the loop" (Dynamic Loops deep dive, NKI 0.6.0), and
        the trace holds the loop unrolled."""
        if self.strict or ran_dynamic_loop(self.engine_state):
            raise whole_life
        ranges = psum_live_ranges(self.instrs, psum)
        if all(len(ranges.get(a.id, ())) < 2 for a in psum):
            raise whole_life
        tiles: list[Allocation] = []
        begins: list[int] = []
        ends: list[int] = []
        for a, start in zip(psum, starts):
            for first, last in ranges.get(a.id, [(start, a.last_use)]):
                tiles.append(a)
                begins.append(first)
                ends.append(last)
        try:
            banks = self._sweep(tiles, begins, self.rules.psum_banks, "banks", where, last_uses=ends)
        except CapacityError:
            raise whole_life from None
        file, line = whole_life.filename, whole_life.lineno
        site = (file, line) if file is not None and line is not None else None
        warn_at(
            f"{whole_life.detail}: the kernel fits only if "
            "each PSUM tile holds its bank just while a value written to it is still to be read "
            "(a ring of PSUM tiles reused across a pipeline); the compiler lays memory out by "
            "live ranges (NKI Language Guide, Compilation Model), so it runs, and strict mode "
            "refuses it",
            site,
        )
        return banks

    def _sweep(
        self, tiles: list[Allocation], starts: list[int], limit: int, unit: str, note: str = "",
        last_uses: list[int] | None = None,
    ) -> int:  # fmt: skip
        """The peak of one buffer's live tiles (from ``starts`` to their last uses, or to
        ``last_uses``: a tile may come several times, once per live range): SBUF bytes per partition
        (``unit`` "bytes") or PSUM banks; a CapacityError past ``limit`` (its message ends with
        ``note``, which says which schedule was swept)."""
        rules = self.rules
        order = _event_order(starts, [a.last_use for a in tiles] if last_uses is None else last_uses)
        if unit == "bytes":
            amounts = [a.partition_bytes for a in tiles]
        else:  # the banks an auto-placed PSUM tensor takes (it starts at a bank)
            amounts = [max(1, -(-a.partition_bytes // rules.psum_bank_bytes)) for a in tiles]
        # (first row, end row, end byte) of the tiles placed at explicit addresses
        wheres = [
            None if a.address_bytes is None
            else (a.partition_start, a.partition_start + (a.shape[0] if a.shape else 1),
                  a.address_bytes + amount)
            for a, amount in zip(tiles, amounts)
        ]  # fmt: skip
        if tiles and None not in wheres:
            # every tile placed at an explicit address (AWS's modular allocators): no event
            # loop (the same peak and the same first refusal, see _placed_peak)
            return self._placed_peak(tiles, order, wheres, limit, unit, note)
        live, peak = 0, 0
        pmax = rules.pmax
        # SBUF bytes are counted per partition: a tile on partitions 64..127 does not add to
        # one on 0..63 (the budget, nl.tile_size.total_available_sbuf_size, is per partition).
        # Every tile covers whole segments between the row bounds any tile can have (its own,
        # or those of each start an auto-placed tile may be given): the bytes are counted per
        # segment, each standing for its partitions, which all hold the same bytes.
        edges, choices = _segments(tiles, wheres, pmax) if unit == "bytes" else ([0, pmax], {})
        per_segment = [0] * (len(edges) - 1)
        # Tiles placed at explicit addresses (nl.ndarray address=) occupy their byte range;
        # AWS's allocators deliberately place several tiles at one address, so those count
        # by the highest end address live on each partition, not by their sum.
        # ... counted by distinct (first row, end row, end byte): hundreds of live logical
        # tiles of a modular allocator share a few such places (the sweep's cost)
        places: dict[tuple[int, int, int], int] = {}
        # the highest placed end per partition depends only on which places are live: kept
        # until that set changes, and remembered per set (a rotating allocator cycles
        # through a few sets tens of thousands of times)
        ends: list[int] | None = None  # per segment
        ends_by_set: dict[frozenset[tuple[int, int, int]], list[int]] = {}
        auto_live = 0  # auto-placed tiles live now
        # While no auto-placed tile is live every partition's auto-placed bytes are 0, and the
        # fullest partition holds the highest end byte of any live place (on at least one
        # row): kept up as places come (a max) and go (recomputed only if it was the
        # highest), with no per-partition arrays at all. The live places' ends are counted by
        # value, with a heap of the values (stale entries dropped when met): recomputing the
        # highest is a pop, not a pass over every live place.
        placed_max: int | None = 0
        end_counts: dict[int, int] = {}
        end_heap: list[int] = []  # negated end values
        # the fullest partition's bytes, valid while neither the auto-placed bytes nor the
        # placed ends change (tiles joining a live place change neither)
        usage: int | None = None
        usage_ends: list[int] | None = None
        # PSUM: live tiles per bank of the placed tiles (their distinct banks are in use)
        bank_users: dict[int, int] = {}
        bank_bytes = rules.psum_bank_bytes

        auto_banks = 0
        auto_rows: dict[int, tuple[int, int]] = {}  # the segments [lo, hi) of a live auto tile
        for n, event in enumerate(order):
            i = event >> 1
            is_start = not event & 1
            a, amount, where = tiles[i], amounts[i], wheres[i]
            if where is not None:
                if is_start:
                    count = places.get(where, 0)
                    places[where] = count + 1
                    if not count:
                        ends = None
                        end = _place_end(where, pmax)
                        n_end = end_counts.get(end, 0)
                        end_counts[end] = n_end + 1
                        if not n_end:
                            heapq.heappush(end_heap, -end)
                        if placed_max is not None and end > placed_max:
                            placed_max = end
                    if unit != "bytes":
                        for bank in _banks(a, bank_bytes):
                            bank_users[bank] = bank_users.get(bank, 0) + 1
                else:  # (a tile's end always follows its start: _event_order)
                    places[where] -= 1
                    if not places[where]:
                        del places[where]
                        ends = None
                        end = _place_end(where, pmax)
                        end_counts[end] -= 1
                        if not end_counts[end]:
                            del end_counts[end]
                        if placed_max is not None and end >= placed_max:
                            placed_max = None
                    if unit != "bytes":
                        for bank in _banks(a, bank_bytes):
                            bank_users[bank] -= 1
                            if not bank_users[bank]:
                                del bank_users[bank]
            elif unit == "bytes":
                if is_start:
                    lo, hi = auto_rows[i] = _auto_segments(per_segment, choices[i])
                    for k in range(lo, hi):
                        per_segment[k] += amount
                    auto_live += 1
                else:
                    lo, hi = auto_rows.pop(i)
                    for k in range(lo, hi):
                        per_segment[k] -= amount
                    auto_live -= 1
                usage = None
            else:
                auto_banks += amount if is_start else -amount
            if is_start:
                if unit == "bytes" and not auto_live:
                    if placed_max is None:
                        while end_heap and -end_heap[0] not in end_counts:
                            heapq.heappop(end_heap)
                        placed_max = -end_heap[0] if end_heap else 0
                    live = placed_max
                elif unit == "bytes":
                    if ends is None:
                        key = frozenset(places)
                        ends = ends_by_set.get(key)
                        if ends is None:
                            if len(ends_by_set) > 4096:
                                ends_by_set.clear()  # bound the memory (128 ints per set)
                            by_row = _placed_ends(places, pmax)
                            ends = ends_by_set[key] = [int(by_row[e]) for e in edges[:-1]]
                    if usage is None or ends is not usage_ends:
                        usage, usage_ends = max(map(operator.add, per_segment, ends)), ends
                    live = usage
                else:
                    live = auto_banks + len(bank_users)
                if live > limit:
                    raise self._capacity_error(live, limit, unit, note, order, n, tiles)
                if live > peak:
                    peak = live
        return peak

    def _capacity_error(
        self, live: int, limit: int, unit: str, note: str, order: list[int], n: int,
        tiles: list[Allocation],
    ) -> CapacityError:  # fmt: skip
        """The refusal at the ``n``-th event of ``order`` (a tile's start), ``live`` in use."""
        a = tiles[order[n] >> 1]
        biggest = sorted(_live_at(order, n, tiles), key=lambda x: -x.partition_bytes)[:4]
        names = "; ".join(x.label() for x in biggest)
        what = "SBUF bytes per partition" if unit == "bytes" else "PSUM banks"
        return CapacityError(
            "sbuf-capacity" if unit == "bytes" else "psum-banks",
            f"{live} live {what} exceed the {self.target} limit of {limit} when "
            f"{a.label()} is allocated{note} (largest live: {names})",
            a.site,
        )

    def _placed_peak(
        self, tiles: list[Allocation], order: list[int], wheres: list[Any], limit: int,
        unit: str, note: str,
    ) -> int:  # fmt: skip
        """:meth:`_sweep` when every tile is placed at an explicit address.

        SBUF bytes: with no auto-placed tile the fullest partition holds the highest end byte
        of a live place, so the peak over the tiles' starts is the highest end of any tile
        (each is live at its own start, and every live end is some tile's), and the first
        start past ``limit`` is that of the first tile, in event order, whose end is past it
        (the tiles live before end within it). PSUM banks: the distinct banks in use after
        each event, from per-bank running counts of the events in order (NumPy), read at the
        starts."""
        if unit == "bytes":
            pmax = self.rules.pmax
            ends = [_place_end(w, pmax) for w in wheres]
            peak = max(ends)
            if peak > limit:
                n = next(k for k, e in enumerate(order) if not e & 1 and ends[e >> 1] > limit)
                raise self._capacity_error(ends[order[n] >> 1], limit, unit, note, order, n, tiles)
            return peak
        bank_bytes = self.rules.psum_bank_bytes
        spans = [_banks(a, bank_bytes) for a in tiles]
        first = np.array([r.start for r in spans], dtype=np.int64)
        last = np.array([r.stop - 1 for r in spans], dtype=np.int64)
        events = np.asarray(order, dtype=np.int64)
        tile = events >> 1
        span = (last - first + 1)[tile]  # banks per event (_banks)
        total = int(span.sum())
        position = np.repeat(np.arange(events.size), span)
        bank = np.repeat(first[tile], span) + (np.arange(total) - np.repeat(np.cumsum(span) - span, span))
        banks, row = np.unique(bank, return_inverse=True)
        delta = np.zeros((banks.size, events.size), dtype=np.int64)
        np.add.at(delta, (row, position), np.repeat(np.where(events & 1, -1, 1), span))
        in_use = (np.cumsum(delta, axis=1) > 0).sum(axis=0)
        at_start = np.where(events & 1, -1, in_use)
        peak = max(0, int(at_start.max()))
        if peak > limit:
            n = int(np.argmax(at_start > limit))
            raise self._capacity_error(int(in_use[n]), limit, unit, note, order, n, tiles)
        return peak

    def _psum_bytes_peak(self, tiles: list[Allocation]) -> int:
        """The peak of PSUM bytes per partition live at once among ``tiles`` (one core's)."""
        if not tiles:
            return 0
        order = np.asarray(_event_order([a.position for a in tiles], [a.last_use for a in tiles]))
        amounts = np.array([a.partition_bytes for a in tiles], dtype=np.int64)
        change = np.where(order & 1, -amounts[order >> 1], amounts[order >> 1])
        return max(0, int(np.cumsum(change).max()))


def _event_order(starts: list[int], last_uses: list[int]) -> list[int]:
    """The capacity sweep's events in time order: event ``2 * i`` is tile ``i``'s start (at
    ``starts[i]``), ``2 * i + 1`` its end (after ``max(last_uses[i], starts[i])``); at one time
    ends come before starts, and ties keep allocation order (a stable sort of one int key)."""
    begin = np.asarray(starts, dtype=np.int64)
    finish = np.maximum(np.asarray(last_uses, dtype=np.int64), begin) + 1
    keys = np.empty(2 * len(starts), dtype=np.int64)
    keys[0::2] = 2 * begin + 1
    keys[1::2] = 2 * finish
    order: list[int] = np.argsort(keys, kind="stable").tolist()
    return order


def _live_at(order: list[int], n: int, tiles: list[Allocation]) -> list[Allocation]:
    """The tiles live after the ``n``-th event of ``order`` (for a capacity error's message:
    the sweep itself keeps no set of live tiles), in the order they started."""
    live: dict[int, Allocation] = {}
    for event in order[: n + 1]:
        if event & 1:
            live.pop(event >> 1, None)
        else:
            live[event >> 1] = tiles[event >> 1]
    return list(live.values())


def _banks(a: Any, bank_bytes: int) -> range:
    """The PSUM banks a tile placed at an explicit address spans."""
    first = a.address_bytes // bank_bytes
    last = (a.address_bytes + max(a.partition_bytes, 1) - 1) // bank_bytes
    return range(first, last + 1)


#: Instructions that write every element of each of their outputs, whatever the data (each
#: page's semantics: dst = a function of the inputs, element by element; a matmul that
#: overwrites, since one that accumulates reads its dst). A tile first touched by one of these,
#: as a whole and not read, needs no sentinel fill (TraceContext._settle_fills).
OVERWRITING_OPS = frozenset(
    {
        "activation",
        "activation_reduce",
        "dma_copy",
        "dma_transpose",
        "iota",
        "memset",
        "nc_matmul",
        "nc_transpose",
        "tensor_copy",
        "tensor_scalar",
        "tensor_tensor",
    }
)


def _covers(t: NkiTensor) -> bool:
    """Whether the static view ``t`` names every element of its allocation exactly once
    (:meth:`NkiTensor.covers_allocation`)."""
    return t.covers_allocation()


@functools.cache
def _sentinel_word(dtype: str) -> tuple[np.dtype, int]:
    """(unsigned word dtype of the element's width, the word a new tensor of NKI ``dtype`` is
    filled with): NaN for floats, :data:`SENTINEL_INT` for integers, as NumPy assigns them
    (AWS NKI docs, NKI CPU Simulator (NKI 0.3.0): the vendor simulator's fill)."""
    one = np.empty(1, dtype=dtypes.storage_dtype(dtype))
    one[...] = np.nan if dtypes.is_float(dtype) else SENTINEL_INT
    word = np.dtype(f"u{one.itemsize}")
    return word, int(one.view(word)[0])


def _sentinel_fill(alloc: Allocation) -> Callable[[], None]:
    """The run of ``alloc``'s allocation marker that fills it with its sentinel: the bit pattern
    written as unsigned words of the element's width, the same bytes as assigning NaN/4 element
    by element, several times cheaper for ml_dtypes' bfloat16/fp8 (whose scalar assignment NumPy
    does not vectorise)."""
    word, pattern = _sentinel_word(alloc.dtype)
    return functools.partial(alloc.storage.view(word).fill, pattern)


def _copy_in(flat: np.ndarray, array: np.ndarray) -> None:
    dtypes.assign(flat, np.asarray(array).reshape(-1).astype(flat.dtype, copy=False))


def _no_fill() -> None:
    """The marker of a tile that shares an earlier tile's storage: nothing to fill."""


def _place_end(where: tuple[int, int, int], pmax: int) -> int:
    """What a place (first row, end row, end byte) adds to the fullest partition's bytes when no
    auto-placed tile is live: its end byte if it covers a partition, else 0 (as
    :func:`_placed_ends`, whose maximum over partitions this is)."""
    first, end, end_byte = where
    return end_byte if min(end, pmax) > max(first, 0) and end_byte > 0 else 0


def _placed_ends(places: dict[tuple[int, int, int], int], pmax: int) -> np.ndarray:
    """The highest end address per partition of the tiles placed at explicit addresses
    (``places``: the live placed tiles' (first row, end row, end byte)); a partition's bytes in
    use are these plus its auto-placed tiles' bytes summed. End bytes are never negative
    (nl.ndarray's address is checked at allocation), so a partition no place covers ends at 0."""
    ends = np.zeros(pmax, dtype=np.int64)
    # the highest end byte of each row range first: an allocator's places span a few row
    # ranges (nkilib's attention: two, over up to ~60 live places), so a few slice maxima
    # replace a (places x partitions) comparison (the sweep computes this thousands of times)
    highest: dict[tuple[int, int], int] = {}
    for first, end, end_byte in places:
        if end_byte > highest.get((first, end), 0):
            highest[(first, end)] = end_byte
    for (first, end), end_byte in highest.items():
        rows = ends[max(first, 0) : max(end, 0)]
        np.maximum(rows, end_byte, out=rows)
    return ends


def _row_choices(a: Any) -> list[tuple[int, int]]:
    """The rows [start, end) an auto-placed tile may occupy in the capacity model, in the order
    they are tried.

    The compiler places on-chip tiles itself; a tile of at most 64 (32) partitions may sit at
    any start a compute engine accepts for it (0/64; 0/32/64/96, the start-partition rule), so the
    model puts it where the fullest partition it would occupy is emptiest (first such start:
    :func:`_auto_segments`).
    """
    p = a.shape[0] if a.shape else 1
    if a.partition_start or p > 64:
        return [(a.partition_start, a.partition_start + p)]
    return [(s, s + p) for s in ((0, 64) if p > 32 else (0, 32, 64, 96))]


def _segments(
    tiles: list[Allocation], wheres: list[tuple[int, int, int] | None], pmax: int
) -> tuple[list[int], dict[int, list[tuple[int, int]]]]:
    """The capacity sweep's row segments: the sorted row bounds (0, ``pmax`` and every bound a
    tile can have, clipped to the partitions), and per auto-placed tile (by position in
    ``tiles``) its row choices as segment ranges [lo, hi)."""
    by_rows: dict[tuple[int, int], list[tuple[int, int]]] = {}
    rows_of: dict[int, tuple[int, int]] = {}
    bounds = {0, pmax}
    for i, (a, where) in enumerate(zip(tiles, wheres)):
        if where is not None:
            bounds.add(min(max(where[0], 0), pmax))
            bounds.add(min(max(where[1], 0), pmax))
            continue
        key = (a.partition_start, a.shape[0] if a.shape else 1)
        rows = by_rows.get(key)
        if rows is None:
            rows = by_rows[key] = [(min(lo, pmax), min(hi, pmax)) for lo, hi in _row_choices(a)]
            for lo, hi in rows:
                bounds.update((lo, hi))
        rows_of[i] = key
    edges = sorted(bounds)
    index = {b: k for k, b in enumerate(edges)}
    ranges = {key: [(index[lo], index[hi]) for lo, hi in rows] for key, rows in by_rows.items()}
    return edges, {i: ranges[key] for i, key in rows_of.items()}


def _auto_segments(per_segment: list[int], choices: list[tuple[int, int]]) -> tuple[int, int]:
    """The segments an auto-placed tile occupies: of its choices, the first whose fullest
    segment is emptiest (:func:`_row_choices`)."""
    if len(choices) == 1:
        return choices[0]
    return min(choices, key=lambda c: max(per_segment[c[0] : c[1]], default=0))


def current() -> TraceContext:
    return context.current()


def _write_nothing() -> None:
    """The work of an instruction whose every output is empty: none. Its checks ran; its data
    work would only reshape empty arrays (NumPy cannot infer a row length from 0 rows)."""
