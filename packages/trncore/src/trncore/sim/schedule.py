"""A dependency-aware schedule of a traced program: when each instruction would run (a MODEL).

The report's bounds (:mod:`trncore.sim.report`) say what perfect overlap (the busiest engine) and
no overlap (the sum) would cost. Real kernels land in between, and where exactly depends on the
dependencies between instructions and on buffer rotation. This module places every instruction
of a program on a time line with the report's own per-instruction costs:

* **Lanes.** Each compute engine (``tensor``, ``vector``, ``scalar``, ``gpsimd``) runs its
  instructions in program order, one at a time (the engines' instruction queues are in order:
  NKI architecture guide, NeuronCore-v2 page). DMA runs on the core's 16 DMA engines
  (``dma0`` … ``dma15``), each processing one transfer at a time ("Each DMA engine can process
  one DMA transfer at a time", NKI 0.3.0 architecture guide, trn1 page). A transfer is spread
  over the engines that serve its SBUF partitions, eight partitions per engine ("each DMA engine
  is typically responsible for moving data for eight SBUF partitions", NKI DMA overview page,
  Neuron SDK 2.29+); HBM→HBM transfers use all 16. A transfer occupies all its engines from its
  start to its end, and its bytes split evenly between them.
* **DMA queues.** Transfers of one queue run in order on each DMA engine; queues share an engine
  round-robin (NKI DMA overview page, "DMA Queues"). The queue follows the trigger engine, which
  the emulator does not know, so it queues by direction (:func:`dma_queue`): a load never waits
  behind a store that waits for its data, and a transfer may use a gap an engine left earlier.
* **Dependencies.** An instruction starts when all its lanes are free and, for every byte range
  it touches, the previous writers of overlapping bytes have finished (read after write), and for
  a write also the previous readers and writers (write after read, write after write). Byte
  ranges are rectangles — rows (partitions on chip, the first dimension in HBM) by byte columns —
  over the *storage* a tensor lives in, so a tile whose storage the emulator recycled
  (docs/emulator.md, Trace once, replay many times) waits for the last reader of the tile that held it before:
  buffer rotation.
  AWS's spectral-DNS sample measured exactly this wait on trn1 ("DMA issue waits 2.3 to 2.5 us for the
  previous matmul to release the slot", docs/neuron-rules.md section 3 of
  aws-samples/sample-spectral-dns-on-aws-neuron, NKI 0.6 / SDK 2.32).
* **Costs.** Those of the report: TensorE ``max(N, 64)·f`` cycles, Vector/Scalar/GpSimd
  ``60 + max(64, e·F)`` cycles, DMA ``0.6 µs + bytes / (E · per-engine bandwidth)`` on each of
  its E engines (see :mod:`trncore.sim.report` and docs/emulator-cost.md for the sources: the NKI
  architecture guide's NeuronCore-v2 page for TensorE ``max(N, 64)``, fp32 ×4, VectorE ``N`` /
  ``2N`` and the ~60-cycle access overhead, 16 DMA engines of 27 GiB/s each).

* **Order.** A first pass in program order finds each instruction's predecessors (its engine's or
  queue's previous instruction, and the accesses its bytes depend on); a list scheduler then
  starts the ready instruction with the earliest ready time, so DMA transfers run in the order
  they become ready.

Because every instruction starts at time 0 or when another one ends, and no lane runs two
instructions at once, the modelled time is never below the busiest lane's total (the lower bound)
nor above the sum of all durations (the upper bound); :func:`schedule` asserts both. Each access
is checked only against the live accesses of the same storage (in the same row buckets for tall
HBM tensors), a write drops the accesses it fully covers, the ready instructions sit in a heap and
each DMA engine keeps its busy intervals sorted (bisection), so the cost stays O(n log n)-ish in
the trace size.

Not modelled: semaphore latency between engines (the DMA bandwidth guide quotes ~1300 ns
cross-engine semaphore-to-start), engine pipelining across dependent instructions, the 100-cycle
static overhead of dependent tiny VectorE instructions, bandwidth shared by transfers that
overlap on one DMA engine (the model runs them one after the other), HBM contention, descriptor
generation on GpSimd (software DGE), and LNC=2 (both programs are scheduled as if on one core).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trncore.sim import dtypes
from trncore.sim.accesses import Access
from trncore.sim.rules import TargetRules

if TYPE_CHECKING:
    from trncore.sim.program import Instr, Program

__all__ = [
    "COMPUTE_LANES",
    "DMA_ENGINES",
    "PARTITIONS_PER_DMA_ENGINE",
    "Schedule",
    "ScheduledInstr",
    "dma_engines",
    "dma_queue",
    "dma_seconds",
    "instr_seconds",
    "schedule",
]

#: The four compute engines, each an in-order lane.
COMPUTE_LANES = ("tensor", "vector", "scalar", "gpsimd")
#: DMA engines per NeuronCore, v2 and v3 ("Each NeuronCore (v2-v4) is paired with 16 DMA
#: engines", NKI DMA overview page; NKI architecture guide trn1/trn2 pages).
DMA_ENGINES = 16
#: SBUF partitions served by one DMA engine (128 partitions / 16 engines, NKI DMA overview page).
PARTITIONS_PER_DMA_ENGINE = 8
#: Fixed cost of one DMA instruction on each engine it uses: the hardware-DGE figure, "approximately
#: 600 ns to execute" (NKI DGE deep dive, Neuron SDK 2.29 / NKI 0.3.0); applied to every DMA.
DMA_FIXED_S = 0.6e-6

# ---------------------------------------------------------------------------------------- costs
def dma_engines(ins: Instr) -> tuple[int, int]:
    """The DMA engines ``[first, last]`` a transfer uses: those of its SBUF partitions (8 each)."""
    access = getattr(ins, "access", None)
    if access:
        for acc in (*access[1], *access[0]):  # the destination's partitions first
            alloc = acc[0]
            if alloc.buffer.on_chip:
                p0, parts = _partitions(acc)
                return p0 // PARTITIONS_PER_DMA_ENGINE, (p0 + parts - 1) // PARTITIONS_PER_DMA_ENGINE
    return 0, DMA_ENGINES - 1


def _partitions(acc: Access) -> tuple[int, int]:
    alloc, dtype, offset, dims = acc
    rows = alloc.shape[0] if alloc.shape else 1
    if dtype is None or not dims:
        return 0, max(1, rows)
    row_bytes = _row_bytes(alloc)
    p0 = (offset * dtypes.itemsize(dtype)) // row_bytes if row_bytes else 0
    parts = max(1, dims[0][1])
    p0 = min(p0, max(0, rows - 1))
    return p0, min(parts, max(1, rows - p0))


def dma_seconds(ins: Instr, rules: TargetRules) -> float:
    """One DMA's duration on each of its engines: fixed cost + its share of bytes / engine rate."""
    first, last = dma_engines(ins)
    # trn1: 27 GiB/s per engine ("Each DMA engine can process one DMA transfer at a time driving a
    # peak bandwidth of 27 GiB/s", NKI architecture guide, NeuronCore-v2 page, SDK 2.29/NKI 0.3.0);
    # trn2: the chip's 3.5 TB/s of DMA over 8 cores (Trainium2 architecture page), per engine.
    per_engine = rules.dma_bytes_per_s / DMA_ENGINES
    return DMA_FIXED_S + ins.meta.get("bytes", 0) / ((last - first + 1) * per_engine)


#: SBUF/PSUM access overhead of a compute instruction, ~60 cycles ("Tensor access overhead", NKI
#: architecture guide, Trainium/Inferentia2 = NeuronCore-v2 page, Neuron SDK 2.29 / NKI 0.3.0).
_FIXED_CYCLES = 60
#: Minimum initiation interval, 64 cycles: TensorE ``MM_INIT_LATENCY`` ("max(N, MM_INIT_LATENCY)",
#: same page, Tensor Engine cost model; fp32 "roughly 4x higher"), also used for the other engines.
_MIN_II = 64


def instr_seconds(ins: Any, rules: TargetRules) -> float:
    """Modelled duration of one instruction on its engine (a DMA: on each of its DMA engines)."""
    meta = ins.meta
    if ins.engine == "tensor":
        factor = meta.get("factor", 1.0)
        if meta.get("fp8"):
            factor /= rules.fp8_speedup
        return max(meta.get("N", 1), _MIN_II) * factor / rules.tensor_hz
    if ins.engine == "dma":
        return dma_seconds(ins, rules)
    hz = {"vector": rules.vector_hz, "scalar": rules.scalar_hz, "gpsimd": rules.gpsimd_hz}.get(
        ins.engine
    )
    if hz is None:
        return 0.0
    cycles = _FIXED_CYCLES + max(_MIN_II, meta.get("per_elem", 1.0) * meta.get("free", 1))
    return cycles / hz


def _row_bytes(alloc: Any) -> int:
    return math.prod(alloc.shape[1:]) * dtypes.itemsize(alloc.dtype)


def _geometry(alloc: Any) -> tuple[int, int]:
    """Rows × byte columns of an allocation for dependency tracking.

    On chip the rows are the partitions. In HBM a tensor of two or more dimensions is a matrix of
    its last dimension by all the others, so a tile of a batched tensor is an exact rectangle; a
    1-D tensor is a column of elements (row buckets keep element-wise passes linear).
    """
    shape = alloc.shape
    isz = dtypes.itemsize(alloc.dtype)
    if not shape:
        return 1, isz
    if alloc.buffer.on_chip or len(shape) == 1:
        return max(1, shape[0]), max(1, math.prod(shape[1:]) * isz)
    return max(1, math.prod(shape[:-1])), max(1, shape[-1] * isz)


# ----------------------------------------------------------------------------------- footprints
_Record = tuple[int, int, int, int, int]  # r0, r1, c0, c1 (half-open), instruction index


class _Space:
    """The live accesses of one storage: rectangles (rows × byte columns) and who made them.

    Records are filed in buckets of ``bsize`` rows (one bucket for on-chip tiles, whose rows are
    partitions; up to 256 for tall HBM tensors), so a tile-by-tile pass over a large HBM tensor
    checks only the records of the rows it touches.
    """

    __slots__ = ("bsize", "cols", "reads", "rows", "writes")

    def __init__(self, rows: int, cols: int) -> None:
        self.rows = rows
        self.cols = cols
        self.bsize = rows if rows <= 128 else max(32, -(-rows // 256))
        self.reads: dict[int, list[_Record]] = {}
        self.writes: dict[int, list[_Record]] = {}

    def add(self, table: dict[int, list[_Record]], rec: _Record) -> None:
        for b in range(rec[0] // self.bsize, (rec[1] - 1) // self.bsize + 1):
            table.setdefault(b, []).append(rec)

    def prune(self, table: dict[int, list[_Record]], r0: int, r1: int, c0: int, c1: int) -> None:
        """Drop the records inside the rectangle (they lie only in its buckets)."""
        for b in range(r0 // self.bsize, (r1 - 1) // self.bsize + 1):
            lst = table.get(b)
            if lst:
                table[b] = [a for a in lst if not (r0 <= a[0] and a[1] <= r1 and c0 <= a[2] and a[3] <= c1)]


def _rect(acc: Access, rows: int, cols: int) -> tuple[int, int, int, int]:
    """The rectangle ``(r0, r1, c0, c1)`` (half-open) covering every byte the access touches.

    ``rows × cols`` is the storage's geometry (its first allocation's first dimension by the bytes
    of the others). The rectangle is exact for the usual views (a row range times a column range)
    and a conservative superset otherwise.
    """
    _, dtype, offset, dims = acc
    if dtype is None:
        return 0, rows, 0, cols
    isz = dtypes.itemsize(dtype)
    o = offset * isz
    if not dims:
        r = o // cols
        return r, r + 1, o % cols, o % cols + isz
    s0, n0 = dims[0]
    inner = isz + sum((n - 1) * s * isz for s, n in dims[1:] if n > 0)
    r0, c0 = divmod(o, cols)
    step = s0 * isz
    if (n0 == 1 or (step > 0 and step % cols == 0)) and c0 + inner <= cols:
        rstep = step // cols if n0 > 1 else 0
        return r0, r0 + (n0 - 1) * rstep + 1, c0, c0 + inner
    hi = o + inner + max(0, (n0 - 1) * step)
    r1 = (hi - 1) // cols + 1
    if r1 == r0 + 1:
        return r0, r1, c0, (hi - 1) % cols + 1
    return r0, r1, 0, cols


# ------------------------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class ScheduledInstr:
    """One instruction on the time line."""

    index: int  #: position in the program's instruction list (allocation markers skipped)
    op: str
    engine: str  #: tensor, vector, scalar, gpsimd or dma
    lanes: tuple[str, ...]  #: the lanes it occupies (one engine, or its DMA engines)
    start_s: float
    end_s: float
    site: tuple[str, int] | None  #: (kernel file, line)
    #: what set its start: "queue" (its engine or DMA queue), "DMA engine busy", "RAW", "WAR",
    #: "WAW" (a dependency on ``after``), "depends_on" (an ``NkiInstruction.depends_on`` edge)
    #: or "start"
    waited_for: str
    after: int | None  #: the instruction whose end set its start (None at time 0)


@dataclass
class Schedule:
    """A program's modelled schedule: every instruction's start and end, per lane."""

    target: str
    instrs: list[ScheduledInstr]
    makespan_s: float
    lower_bound_s: float
    upper_bound_s: float
    lane_busy_s: dict[str, float]
    lane_waits_s: dict[str, dict[str, float]]
    critical: list[int] = field(default_factory=list)

    @property
    def overlap(self) -> float:
        """Achieved overlap: 0 when the schedule is as long as the upper bound, 1 at the lower."""
        span = self.upper_bound_s - self.lower_bound_s
        if span <= 0:
            return 1.0
        return min(1.0, max(0.0, (self.upper_bound_s - self.makespan_s) / span))

    def lane_idle_s(self) -> dict[str, float]:
        """Idle seconds per lane over the modelled time (never below 0: a lane busy for the whole
        modelled time sums its durations in another order than the schedule's ends, and the
        difference of the two sums can round to -1e-16 s, printed as "-0.00" us)."""
        return {lane: max(0.0, self.makespan_s - busy) for lane, busy in self.lane_busy_s.items()}

    def critical_path(self) -> list[ScheduledInstr]:
        """The chain of instructions, first to last, whose ends set the modelled time."""
        return [self.instrs[i] for i in self.critical]


def _lanes_of(ins: Instr) -> tuple[str, ...]:
    if ins.engine == "dma":
        first, last = dma_engines(ins)
        return tuple(f"dma{e}" for e in range(first, last + 1))
    return (ins.engine,)


def dma_queue(ins: Instr) -> str:
    """The queue a DMA is modelled on: ``load`` (HBM→chip), ``store`` (chip→HBM) or ``copy``.

    AWS: "The queue ID is typically tied to the trigger engine and the method of descriptor
    generation" and "DMA transfers within a queue on the same DMA engine are executed in order.
    DMA transfers from different DMA queues are scheduled in a round robin fashion" (NKI DMA
    overview page). The emulator does not know the trigger engine, so the direction stands in for
    it: loads queue behind loads, stores behind stores, and a store waiting for its data does not
    hold back the next tile's load.
    """
    src = ins.meta.get("src", "")
    dst = ins.meta.get("dst", "")
    if src.endswith("hbm") and not dst.endswith("hbm"):
        return "load"
    if dst.endswith("hbm") and not src.endswith("hbm"):
        return "store"
    return "copy"


class _EngineSlots:
    """Busy intervals of one DMA engine, sorted by start; a transfer may fill an earlier gap."""

    __slots__ = ("ends", "owners", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.owners: list[int] = []

    def conflict(self, t: float, d: float) -> int:
        """Index of an interval overlapping ``[t, t + d)``, or -1."""
        k = bisect.bisect_right(self.starts, t) - 1
        if k >= 0 and self.ends[k] > t:
            return k
        if k + 1 < len(self.starts) and self.starts[k + 1] < t + d:
            return k + 1
        return -1

    def add(self, t: float, end: float, owner: int) -> None:
        k = bisect.bisect_right(self.starts, t)
        self.starts.insert(k, t)
        self.ends.insert(k, end)
        self.owners.insert(k, owner)


def schedule(prog: Program, rules: TargetRules | None = None) -> Schedule:
    """Place every instruction of ``prog`` on the time line (see the module docstring).

    Two passes. The first, in program order, finds each instruction's predecessors: the previous
    instruction of its engine (of its queue on each of its DMA engines) and the earlier accesses
    its bytes depend on (RAW, WAR, WAW). The second is a list scheduler: it takes the ready
    instruction with the earliest ready time, starts it then (a DMA at the first time all its DMA
    engines are free for its duration), and releases its successors.
    """
    from trncore.sim.rules import rules_for

    rules = rules or rules_for(prog.target)
    spaces: dict[int, _Space] = {}
    last_on: dict[str, int] = {}  # compute lanes and (queue, DMA engine) pairs: in order
    durations: list[float] = []
    lanes_of: list[tuple[str, ...]] = []
    kept: list[Instr] = []
    preds: list[dict[int, str]] = []
    kept_at: dict[int, int] = {}  # program position -> index in kept (for depends_on edges)
    for position, ins in enumerate(prog.instrs):
        engine = ins.engine
        if engine != "dma" and engine not in COMPUTE_LANES:
            continue  # allocation markers and debug prints take no engine time
        index = len(kept)
        kept_at[position] = index
        kept.append(ins)
        durations.append(instr_seconds(ins, rules))
        lanes = _lanes_of(ins)
        lanes_of.append(lanes)
        deps: dict[int, str] = {}
        for pos in ins.meta.get("after", ()):  # NkiInstruction.depends_on (NKI 0.6.0)
            if pos in kept_at:
                deps[kept_at[pos]] = "depends_on"
        order = [f"{dma_queue(ins)}:{lane}" for lane in lanes] if engine == "dma" else list(lanes)
        for lane_key in order:
            j = last_on.get(lane_key)
            if j is not None:
                deps[j] = "queue"
            last_on[lane_key] = index
        access = getattr(ins, "access", None) or ((), ())
        rects = []
        for kind, accs in ((0, access[0]), (1, access[1])):
            for acc in accs:
                alloc = acc[0]
                storage = id(alloc.storage)
                space = spaces.get(storage)
                rows, cols = _geometry(alloc)
                if space is None:
                    space = spaces[storage] = _Space(rows, cols)
                if rows == space.rows and cols == space.cols:
                    r0, r1, c0, c1 = _rect(acc, space.rows, space.cols)
                else:  # recycled storage seen through another shape: the whole storage
                    r0, r1, c0, c1 = 0, space.rows, 0, space.cols
                rects.append((kind, space, r0, r1, c0, c1))
                checks = (space.writes,) if kind == 0 else (space.writes, space.reads)
                buckets = range(r0 // space.bsize, (r1 - 1) // space.bsize + 1)
                for table in checks:
                    label = "RAW" if kind == 0 else ("WAW" if table is space.writes else "WAR")
                    for bk in buckets:
                        for a0, a1, b0, b1, j in table.get(bk, ()):
                            if a0 < r1 and r0 < a1 and b0 < c1 and c0 < b1 and j != index:
                                deps[j] = label
        for kind, space, r0, r1, c0, c1 in rects:
            if kind == 0:
                space.add(space.reads, (r0, r1, c0, c1, index))
            else:
                # A write supersedes every access it covers: later accesses depend on the write,
                # which depends on every one of them (the dependency stays, transitively).
                space.prune(space.reads, r0, r1, c0, c1)
                space.prune(space.writes, r0, r1, c0, c1)
                space.add(space.writes, (r0, r1, c0, c1, index))
        preds.append(deps)

    n = len(kept)
    succs: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in preds]
    for i, deps in enumerate(preds):
        for j in deps:
            succs[j].append(i)
    ready = [0.0] * n
    binding: list[int | None] = [None] * n
    starts = [0.0] * n
    ends = [0.0] * n
    after: list[int | None] = [None] * n
    reasons = ["start"] * n
    slots: dict[str, _EngineSlots] = {}
    heap = [(0.0, i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(heap)
    while heap:
        t, i = heapq.heappop(heap)
        who = binding[i]
        start, why = t, ("start" if who is None else preds[i][who])
        duration = durations[i]
        if kept[i].engine == "dma":
            # Each DMA engine moves one transfer at a time; queues share it round-robin, so a
            # transfer takes the first time all its engines are free for its duration.
            moved = True
            while moved:
                moved = False
                for lane in lanes_of[i]:
                    sl = slots.get(lane)
                    if sl is None:
                        continue
                    k = sl.conflict(start, duration)
                    if k >= 0:
                        start, why, who = sl.ends[k], "DMA engine busy", sl.owners[k]
                        moved = True
            for lane in lanes_of[i]:
                slots.setdefault(lane, _EngineSlots()).add(start, start + duration, i)
        starts[i], ends[i], reasons[i], after[i] = start, start + duration, why, who
        for k in succs[i]:
            if binding[k] is None or ends[i] > ready[k]:
                ready[k], binding[k] = ends[i], i
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(heap, (ready[k], k))

    out = [
        ScheduledInstr(i, kept[i].op, kept[i].engine, lanes_of[i], starts[i], ends[i],
                       kept[i].site, reasons[i], after[i])
        for i in range(n)
    ]
    lane_busy: dict[str, float] = {}
    for i in range(n):
        for lane in lanes_of[i]:
            lane_busy[lane] = lane_busy.get(lane, 0.0) + durations[i]
    total = sum(durations)
    makespan = max(ends, default=0.0)
    lower = max(lane_busy.values(), default=0.0)
    tol = 1e-9 * max(1e-12, total)
    assert lower - tol <= makespan <= total + tol, (lower, makespan, total)
    critical: list[int] = []
    if out:
        c: int | None = max(range(n), key=ends.__getitem__)
        while c is not None:
            critical.append(c)
            c = after[c]
        critical.reverse()
    return Schedule(
        target=prog.target,
        instrs=out,
        makespan_s=makespan,
        lower_bound_s=lower,
        upper_bound_s=total,
        lane_busy_s=lane_busy,
        lane_waits_s=_waits(out, makespan),
        critical=critical,
    )


def _waits(out: list[ScheduledInstr], makespan: float) -> dict[str, dict[str, float]]:
    """Per lane, its idle time by what the instruction after each gap waited for."""
    by_lane: dict[str, list[ScheduledInstr]] = {}
    for item in out:
        for lane in item.lanes:
            by_lane.setdefault(lane, []).append(item)
    waits: dict[str, dict[str, float]] = {}
    for lane, items in by_lane.items():
        items.sort(key=lambda x: x.start_s)
        w = waits[lane] = {}
        free = 0.0
        for item in items:
            gap = item.start_s - free
            if gap > 0:
                label = _wait_label(item, out)
                w[label] = w.get(label, 0.0) + gap
            free = max(free, item.end_s)
        if makespan > free:
            w["done (idle to the end)"] = w.get("done (idle to the end)", 0.0) + makespan - free
    return waits


def _wait_label(item: ScheduledInstr, out: list[ScheduledInstr]) -> str:
    if item.after is None:
        return "start"
    other = out[item.after].engine
    if item.waited_for in ("queue", "DMA engine busy"):
        return f"{item.waited_for} ({other})"
    return f"{item.waited_for} on {other}"
