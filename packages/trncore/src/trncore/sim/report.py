"""A cost model of a traced program on trn1/trn2 — a model, not a measurement.

What it does: sums a per-instruction cost for each engine, from the documented engine clocks and
rates (AWS Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI (NKI 0.3.0); docs/hardware.md) and a
fixed per-instruction overhead, and reports the per-engine busy time, its max (lower bound: perfect overlap of
engines) and its sum (upper bound: no overlap).

Per-instruction costs (cycles of the engine's clock):

* TensorE ``nc_matmul``: ``max(N, 64) * f`` where N is the moving free size (columns streamed),
  f = 1 for bf16/fp16/tf32, 4 for fp32 (architecture guides, NKI 0.3.0: "≈¼ of bf16"), 1/2 for fp8 pairs on
  trn2. A matmul costs its columns however few of the 128 PE rows (K) or columns (M) it uses; the 64-cycle
  floor is the documented minimum matmul initiation interval. A full 128x128x512 bf16 pass therefore runs
  at the documented peak (2*128*128 flops per cycle).
* VectorE / ScalarE / GpSimd: ``60 + max(64, e * F)`` with F elements per partition, e = 2 for
  ``tensor_tensor``/scans (AWS NKI docs, nki.isa.tensor_tensor (NKI 0.3.0): "≈ 2N cycles"), else 1; 60 cycles
  of SRAM access overhead and a 64-cycle minimum initiation interval (architecture guides, NKI 0.3.0).
* DMA: ``0.6 µs + bytes / (E · b)`` on each of the E DMA engines the transfer uses (those of its
  SBUF partitions, 8 partitions per engine, all 16 for a full-height tile or HBM→HBM), b the rate
  of one engine; 0.6 µs is the documented hardware-DGE per-instruction cost
  (AWS NKI DGE reference, NKI 0.3.0), used for every DMA (:mod:`trncore.sim.schedule`).

Bounds and schedule: the lower bound is the busiest lane (an engine, or one DMA engine), the upper
bound the sum of all durations; :func:`trncore.sim.schedule.schedule` places the instructions in
dependency order and gives the modelled time between them, its critical path, per-lane idle time
and what each lane waited for.

Not modelled (what only hardware can tell): engine concurrency limits on shared SBUF/PSUM ports,
descriptor costs, HBM contention, cache effects, instruction fetch, semaphore latency between
engines, LNC=2 (instances are scheduled as if on one core), and the compiler's own
transformations. Use it to compare variants of a kernel, not to predict wall time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trncore.sim import dtypes, hooks
from trncore.sim.arrays import extent, pattern_indices, strided_view
from trncore.sim.program import Program
from trncore.sim.rules import rules_for
from trncore.sim.schedule import instr_seconds, schedule

__all__ = ["Report", "instr_seconds", "minimum_traffic", "program_report", "report"]

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


@dataclass
class Report:
    """Resource and modelled-cost summary of one traced program."""

    kernel: str
    target: str
    instructions: dict[str, int]
    total_instructions: int
    dma_bytes_in: int
    dma_bytes_out: int
    dma_bytes_other: int
    min_traffic_bytes: int
    traffic_over_min: float
    sbuf_peak_bytes: int
    psum_peak_bytes: int
    psum_peak_banks: int
    busy_seconds: dict[str, float]
    lower_bound_s: float
    upper_bound_s: float
    useful_flops: int
    tensor_utilisation: float
    tensor_utilisation_dtype: float
    notes: list[str] = field(default_factory=list)
    #: the dependency-aware schedule's length (trncore.sim.schedule), within [lower, upper]
    modelled_s: float = 0.0
    #: achieved overlap: 0 at the upper bound (nothing overlaps), 1 at the lower bound
    overlap: float = 0.0
    #: idle seconds per lane (engine or DMA engine) over the modelled time
    idle_seconds: dict[str, float] = field(default_factory=dict)
    #: per lane, idle seconds by what it waited for ("RAW on dma", "WAR on tensor", ...)
    waits_seconds: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the critical path, consecutive instructions of one engine/op/kernel line merged
    critical_path: list[dict[str, Any]] = field(default_factory=list)
    #: the NKI release the kernel was checked against (trncore.sim.versions)
    nki_version: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The report as plain dicts/lists/numbers (JSON-serializable), e.g. for ``--json`` output."""
        return asdict(self)

    def __str__(self) -> str:
        us = 1e6
        lines = [
            f"kernel {self.kernel} on {self.target}{_release_label(self.nki_version)} "
            "(cost MODEL, not a measurement)",
            "instructions: "
            + ", ".join(f"{k}={v}" for k, v in self.instructions.items())
            + f"; total={self.total_instructions}",
            f"DMA bytes: HBM->chip {self.dma_bytes_in}, chip->HBM {self.dma_bytes_out}, "
            f"other {self.dma_bytes_other}; minimum {self.min_traffic_bytes} "
            f"(traffic / minimum = {self.traffic_over_min:.2f})",
            f"SBUF peak {self.sbuf_peak_bytes} B/partition; PSUM peak {self.psum_peak_bytes} "
            f"B/partition ({self.psum_peak_banks} banks)",
            "busy (us): " + ", ".join(f"{k}={v * us:.2f}" for k, v in self.busy_seconds.items()),
            f"bounds (us): lower {self.lower_bound_s * us:.2f} (max over engines), upper "
            f"{self.upper_bound_s * us:.2f} (sum)",
            f"TensorE utilisation {self.tensor_utilisation:.1%} of the bf16 peak, "
            f"{self.tensor_utilisation_dtype:.1%} of the peak for the operand dtypes "
            f"({self.useful_flops} useful flops)",
        ]
        lines += _schedule_lines(self)
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _schedule_lines(rep: Report) -> list[str]:
    """The schedule's part of the printed report: modelled time, critical path, idle lanes."""
    us = 1e6
    lines = [
        f"modelled (us): {rep.modelled_s * us:.2f} (dependency-aware schedule, within "
        f"[{rep.lower_bound_s * us:.2f}, {rep.upper_bound_s * us:.2f}]); achieved overlap "
        f"{rep.overlap:.0%}"
    ]
    if rep.critical_path:
        by_engine: dict[str, float] = {}
        for seg in rep.critical_path:
            by_engine[seg["engine"]] = by_engine.get(seg["engine"], 0.0) + seg["seconds"]
        count = sum(seg["count"] for seg in rep.critical_path)
        lines.append(
            f"critical path: {count} instructions; "
            + ", ".join(f"{k} {v * us:.2f} us" for k, v in sorted(by_engine.items(), key=lambda kv: -kv[1]))
        )
        top = sorted(rep.critical_path, key=lambda seg: -seg["seconds"])[:5]
        for seg in top:
            lines.append(
                f"  {seg['seconds'] * us:10.2f} us  {seg['engine']:<6} {seg['op']:<20} "
                f"{seg['line']} (x{seg['count']}, from {seg['start_s'] * us:.2f} us)"
            )
    compute = [lane for lane in rep.idle_seconds if not lane.startswith("dma")]
    dma = [lane for lane in rep.idle_seconds if lane.startswith("dma")]
    for lane in compute + dma[:1]:
        waits = rep.waits_seconds.get(lane, {})
        what = ", ".join(
            f"{k} {v * us:.2f}" for k, v in sorted(waits.items(), key=lambda kv: -kv[1])[:3]
        )
        name = lane if lane in compute else f"{lane} (of {len(dma)} DMA engines used)"
        lines.append(f"idle (us) {name}: {rep.idle_seconds[lane] * us:.2f}; waited for: {what or '-'}")
    return lines


def _hbm_bytes(ins: Any) -> tuple[int, int]:
    """The bytes a DMA instruction reads from and writes to HBM, each at the HBM side's dtype.

    The DMA emitters record them (``hbm_read`` / ``hbm_write``, :func:`trncore.sim.isa_common.
    hbm_bytes_meta`): a converting store (a float32 tile to a bfloat16 tensor) writes the
    bfloat16 bytes, and a ``dma_compute`` of on-chip sources writes only its destination. Other
    DMAs (collectives, constants, loads of the ``nl`` wrappers) move one dtype: their ``bytes``
    on whichever side is HBM."""
    nbytes = ins.meta.get("bytes", 0)
    read = ins.meta.get("hbm_read", nbytes if ins.meta.get("src", "").endswith("hbm") else 0)
    write = ins.meta.get("hbm_write", nbytes if ins.meta.get("dst", "").endswith("hbm") else 0)
    return read, write


def _mark(mask: np.ndarray, unit: int, access: Any) -> None:
    """Mark in ``mask`` (one flag per storage element of ``unit`` bytes) what a static access touches.

    A view of the storage's element size with non-negative steps is marked through a strided view
    of the mask (no index array: a GEMM's operand loads are millions of elements); a bitcast view
    or a reversed one through its indices, marking the storage elements its bytes fall in."""
    _, dtype, offset, dims = access
    isz = dtypes.itemsize(dtype)
    nums = tuple(n for _, n in dims)
    if 0 in nums:
        return
    steps = tuple(st for st, _ in dims)
    if isz == unit and offset >= 0 and min(steps, default=0) >= 0 and offset + extent(dims)[1] < mask.size:
        strided_view(mask, offset, nums, steps)[...] = True
        return
    idx = pattern_indices(offset, dims)
    if isz == unit:
        units = idx
    elif isz > unit:
        k = isz // unit
        units = (idx[:, None] * k + np.arange(k, dtype=np.int64)).ravel()
    else:
        units = idx * isz // unit
    units = units[(units >= 0) & (units < mask.size)]
    mask[units] = True


def minimum_traffic(prog: Program) -> int:
    """The compulsory HBM traffic of ``prog``: each byte of an input its DMAs read and of an
    output they write, counted once.

    An input the kernel never reads (a mask "kept for call compatibility") and the part of an
    output it leaves alone (a cache or rolling buffer updated in place and returned) are not
    traffic the kernel must make; counting whole inputs and outputs gave public kernels a
    "traffic / minimum" below 1 (twenty-seventh third-party batch, docs/emulator-cost.md "Cost
    report"). A DMA through a runtime offset (``.ap(scalar_offset=...)``, ``vector_offset``)
    has no static pattern: its HBM bytes on that side count in full, at most the tensor's size.
    The actual traffic counts the same DMAs' bytes, so it is never below this minimum.
    """
    groups = ({id(a): a for a in prog.inputs}, {id(t.alloc): t.alloc for t in prog.outputs})
    masks: dict[tuple[int, int], np.ndarray] = {}
    dynamic: dict[tuple[int, int], int] = {}
    for ins in prog.instrs:
        if ins.engine != "dma" or not ins.access:
            continue
        moved = _hbm_bytes(ins)
        for side in (0, 1):
            accesses = [a for a in ins.access[side] if a[0].buffer.name.endswith("hbm")]
            static = sum(
                math.prod(n for _, n in a[3]) * dtypes.itemsize(a[1]) for a in accesses if a[1] is not None
            )
            runtime = [a for a in accesses if a[1] is None]
            for acc in accesses:
                alloc = groups[side].get(id(acc[0]))
                if alloc is None:
                    continue
                key = (side, id(alloc))
                if acc[1] is None:
                    share = max(0, moved[side] - static) // len(runtime)
                    dynamic[key] = dynamic.get(key, 0) + share
                    continue
                if key not in masks:
                    masks[key] = np.zeros(alloc.flat.size, dtype=bool)
                _mark(masks[key], alloc.flat.itemsize, acc)
    total = 0
    for side in (0, 1):
        for ident, alloc in groups[side].items():
            key = (side, ident)
            mask = masks.get(key)
            marked = int(np.count_nonzero(mask)) * alloc.flat.itemsize if mask is not None else 0
            total += min(alloc.flat.nbytes, marked + dynamic.get(key, 0))
    return total


@hooks.program_report.register
def program_report(prog: Program) -> Report:
    """The cost model applied to ``prog`` (see the module docstring for the model)."""
    rules = rules_for(prog.target)
    counts = {e: 0 for e in ENGINES}
    busy = {e: 0.0 for e in ENGINES}
    dma_in = dma_out = dma_other = hbm_traffic = 0
    flops = 0
    for ins in prog.instrs:
        if ins.engine not in counts:
            continue
        counts[ins.engine] += 1
        seconds = instr_seconds(ins, rules)
        busy[ins.engine] += seconds
        if ins.engine == "tensor":
            flops += ins.meta.get("flops", 0)
        if ins.engine == "dma":
            read, write = _hbm_bytes(ins)
            hbm_traffic += read + write
            if read and not write:
                dma_in += read
            elif write and not read:
                dma_out += write
            else:
                dma_other += ins.meta.get("bytes", 0)
    # TensorE peak for the operand dtypes actually used: each matmul's own peak rate.
    dtype_capacity = 0.0
    for ins in prog.instrs:
        if ins.engine == "tensor":
            factor = ins.meta.get("factor", 1.0)
            rate = (
                rules.tensor_peak_bf16
                / factor
                * (rules.fp8_speedup if ins.meta.get("fp8") else 1.0)
            )
            dtype_capacity += rate * instr_seconds(ins, rules)
    minimum = minimum_traffic(prog)
    tensor_busy = busy["tensor"]
    util = flops / (rules.tensor_peak_bf16 * tensor_busy) if tensor_busy else 0.0
    util_dtype = flops / dtype_capacity if dtype_capacity else 0.0
    notes = []
    if prog.lnc > 1:
        notes.append(
            f"LNC={prog.lnc}: both instances' instructions are summed and scheduled as if on one core"
        )
    sched = schedule(prog, rules)
    compute_busy = [v for k, v in busy.items() if k != "dma"]
    lower = max([*compute_busy, *(v for k, v in sched.lane_busy_s.items() if k.startswith("dma"))])
    upper = sum(busy.values())
    # The schedule never beats the busiest lane nor exceeds running everything back to back.
    tol = 1e-9 * max(upper, 1e-12)
    assert lower - tol <= sched.makespan_s <= upper + tol, (lower, sched.makespan_s, upper)
    overlap = 1.0 if upper - lower <= 0 else (upper - sched.makespan_s) / (upper - lower)
    return Report(
        kernel=str(prog.key.kernel),
        target=prog.target,
        instructions=counts,
        total_instructions=sum(counts.values()),
        dma_bytes_in=dma_in,
        dma_bytes_out=dma_out,
        dma_bytes_other=dma_other,
        min_traffic_bytes=minimum,
        traffic_over_min=hbm_traffic / minimum if minimum else 0.0,
        sbuf_peak_bytes=prog.sbuf_peak,
        psum_peak_bytes=prog.psum_peak,
        psum_peak_banks=prog.psum_banks_peak,
        busy_seconds=busy,
        lower_bound_s=lower,
        upper_bound_s=upper,
        useful_flops=flops,
        tensor_utilisation=util,
        tensor_utilisation_dtype=util_dtype,
        notes=notes,
        modelled_s=sched.makespan_s,
        overlap=min(1.0, max(0.0, overlap)),
        idle_seconds=sched.lane_idle_s(),
        waits_seconds=sched.lane_waits_s,
        critical_path=_critical_segments(sched),
        nki_version=prog.nki_version or "",
    )


def _release_label(version: str) -> str:
    if not version:
        return ""
    from trncore.sim.versions import release

    return f", {release(version).label}"


def _critical_segments(sched: Any) -> list[dict[str, Any]]:
    """The critical path as segments: runs of consecutive instructions of one engine, op and line."""
    segments: list[dict[str, Any]] = []
    for item in sched.critical_path():
        line = f"{item.site[0].rsplit('/', 1)[-1]}:{item.site[1]}" if item.site else "?"
        last = segments[-1] if segments else None
        if last and (last["engine"], last["op"], last["line"]) == (item.engine, item.op, line):
            last["count"] += 1
            last["seconds"] += item.end_s - item.start_s
            last["end_s"] = item.end_s
            last["last_index"] = item.index
            continue
        segments.append({
            "engine": item.engine, "op": item.op, "line": line, "count": 1,
            "seconds": item.end_s - item.start_s, "start_s": item.start_s, "end_s": item.end_s,
            "waited_for": item.waited_for, "first_index": item.index, "last_index": item.index,
        })
    return segments



def report(
    kernel: Any,
    *arg_specs: Any,
    target: str | None = None,
    lnc: int | tuple[int, ...] | None = None,
    nki_version: str | None = None,
    **params: Any,
) -> Report:
    """Trace ``kernel`` for ``arg_specs`` (``((shape), "dtype")`` or arrays) and report its cost
    under NKI release ``nki_version`` (default: the current one, trncore.sim.versions)."""
    from trncore.sim.runner import trace

    prog = trace(kernel, *arg_specs, target=target, lnc=lnc, nki_version=nki_version, **params)
    return program_report(prog)
