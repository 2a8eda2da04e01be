"""Where a conformance case's time and memory go: the test's own data or the emulator.

nki-library's test cases build their inputs (often in float64 first, then cast), call the
simulator once, then compute their torch reference lazily. A case that passes the runner's
memory limit may do so while building its inputs, inside the emulator, or while computing its
reference; only the middle one is the emulator's fault. The harness's simulator entry point
(``nki.cpu_simulate(kernel)[lnc](**inputs)``, :mod:`trncore.sim.conform_stubs`) runs inside
:func:`emulator_call`, which moves the case's :class:`CaseMeter` from phase ``inputs`` to
``emulator`` and then ``reference``, and records the bytes of the inputs and outputs, the
resident memory at the kernel's entry and exit, the highest resident memory sampled inside the
emulator and the seconds spent there, split into data work (``data_seconds``: the NumPy
arithmetic and copies of the instructions, :mod:`trncore.sim.work_clock`) and tracing
(``tracing_seconds``: the rest, the kernel's Python and the emulator's bookkeeping).
:func:`memory_verdict` turns a crossed limit into an outcome: ``MEMORY`` (the emulator) or
``DATA`` (the test's own data alone passed the limit).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trncore.sim.work_clock import data_seconds

__all__ = [
    "CaseMeter", "emulator_call", "memory_verdict", "meter", "release_before_case", "release_memory",
    "reset", "rss_bytes",
]  # fmt: skip

GIB = 2**30

#: Memory the emulator may still hold after its call returned (beyond the output arrays it hands
#: back) for a limit crossed in the reference phase to be the test's: allocator slack, imports.
RETAINED_SLACK = 256 * 2**20

#: Growth of the resident memory at a case's start, over the level after the last full
#: collection, past which the next case starts with a full collection (see
#: :func:`release_before_case`).
DRIFT_BYTES = 512 * 2**20


def rss_bytes(pid: int | str = "self") -> int:
    """Resident bytes of process ``pid`` (``/proc/PID/statm``); 0 where unreadable."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class CaseMeter:
    """One case's phases, bytes and seconds (see the module docstring)."""

    phase: str = "inputs"  # "inputs" -> "emulator" -> "reference"
    calls: int = 0
    emulator_seconds: float = 0.0
    #: of emulator_seconds, the seconds of data work (instructions' NumPy work, fills, copies)
    data_seconds: float = 0.0
    input_bytes: int = 0  # arrays passed to the largest emulator call
    output_bytes: int = 0  # arrays the emulator returned (all calls)
    rss_start: int = 0  # resident bytes when the case started
    rss_entry: int = 0  # at the first emulator call
    rss_exit: int = 0  # after the last emulator call returned
    emulator_peak: int = 0  # highest resident bytes sampled during emulator calls
    peak: int = 0  # highest resident bytes sampled during the case
    entered: float = 0.0  # perf_counter() at the current emulator call's start
    data_entered: float = 0.0  # the data-work clock at the current emulator call's start
    #: True for a meter the runner rebuilt from a killed child's last record: the data work of
    #: the call it was killed in was counted in the child's own clock, which the runner cannot
    #: read (``perf_counter``, the other clock, is system-wide: the seconds inside still count)
    from_record: bool = False

    @property
    def tracing_seconds(self) -> float:
        """Of the seconds inside the emulator, those not spent in data work: the kernel's
        Python, views, checks, allocation and recording."""
        return self.emulator_seconds - self.data_seconds

    def seconds_inside(self) -> float:
        """Seconds spent inside the emulator so far (the current call included)."""
        running = time.perf_counter() - self.entered if self.phase == "emulator" else 0.0
        return self.emulator_seconds + running

    def data_seconds_inside(self) -> float:
        """Seconds of data work inside the emulator so far (the current call included)."""
        if self.phase != "emulator" or self.from_record:
            return self.data_seconds  # (from a record: the finished calls' only)
        return self.data_seconds + data_seconds() - self.data_entered

    def where(self) -> str:
        """Where the case is, in words: for TIMEOUT reasons."""
        place = {
            "inputs": "building the test's inputs",
            "emulator": "inside the emulator",
            "reference": "in the test's reference and comparison",
        }[self.phase]
        data = f"{self.data_seconds_inside():.1f} s of them data work"
        if self.from_record and self.phase == "emulator":
            data = f"{data} before the call it was killed in"
        return f"{place}; {self.seconds_inside():.1f} s inside the emulator ({data})"

    def sample(self, rss: int) -> None:
        """Record one resident-memory sample (the guard's watchdog calls this)."""
        self.peak = max(self.peak, rss)
        if self.phase == "emulator":
            self.emulator_peak = max(self.emulator_peak, rss)

    def record(self) -> dict[str, Any]:
        """The JSON-ready fields of the meter, and ``tracing_seconds``."""
        fields = asdict(self)
        fields["tracing_seconds"] = self.tracing_seconds
        return fields


_meter = CaseMeter()
_lock = threading.Lock()

#: Called with the meter when a case enters and leaves the emulator (the plugin writes a record,
#: so that the runner can judge a case it had to kill from outside).
on_phase: Callable[[CaseMeter], None] | None = None


def meter() -> CaseMeter:
    """The current case's meter (one case runs at a time in a conformance child)."""
    return _meter


def release_memory(full: bool = False) -> None:
    """Return freed memory to the system before a case starts, so that its figures are its own.

    The emulator's program cache is emptied (each conformance case is a new kernel; a cached
    program would hold the previous case's HBM image), garbage collected (all generations when
    ``full``), and glibc's
    ``malloc_trim`` hands freed heap pages back (NumPy's mid-size arrays come from the heap,
    which otherwise keeps a previous case's peak resident).
    """
    import ctypes
    import ctypes.util
    import gc

    from trncore.sim.runner import clear_cache

    clear_cache()
    # the young generations: a full collection of the harness costs seconds; ``full`` after a
    # failed case, whose exception cycles (frames, tracebacks) may have reached the oldest one
    if full:
        gc.collect()
    else:
        gc.collect(1)
    libc = ctypes.util.find_library("c")
    if libc:
        try:
            ctypes.CDLL(libc).malloc_trim(0)
        except (OSError, AttributeError):
            pass


_baseline: int | None = None


def release_before_case() -> bool:
    """Release memory before a case; a full collection once the level has drifted up.

    A passing case leaves cyclic garbage (a trace's tiles and HBM arrays) that survives the
    young collections of :func:`release_memory` into the oldest generation, which Python
    collects rarely: in a run of 200 attention cases in one process every case started 20-60
    MB higher than the one before (0.6 -> 7.2 GiB), until a case was blamed for the memory
    (DATA). A full collection frees it but walks every object (~0.25 s there), so it runs
    only when the resident memory at a case's start exceeds the level after the last full
    collection by :data:`DRIFT_BYTES`. True when it ran.
    """
    global _baseline
    full = _baseline is not None and rss_bytes() > _baseline + DRIFT_BYTES
    release_memory(full=full)
    if _baseline is None or full:
        _baseline = rss_bytes()
    return full


def reset() -> CaseMeter:
    """Start a new case: a fresh meter in phase ``inputs``."""
    global _meter
    with _lock:
        _meter = CaseMeter(rss_start=rss_bytes())
        _meter.peak = _meter.rss_start
    return _meter


def _nbytes(values: Sequence[Any] | Mapping[str, Any]) -> int:
    items = values.values() if isinstance(values, Mapping) else values
    return sum(v.nbytes for v in items if isinstance(v, np.ndarray))


def _outputs_nbytes(result: Any) -> int:
    if isinstance(result, np.ndarray):
        return result.nbytes
    if isinstance(result, (tuple, list)):
        return _nbytes(result)
    return 0


@contextmanager
def emulator_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Iterator[Callable[[Any], None]]:
    """Meter one simulator call; yields a function to hand the call's result to."""
    m = _meter
    rss = rss_bytes()
    m.sample(rss)
    if m.calls == 0:
        m.rss_entry = rss
    m.calls += 1
    m.input_bytes = max(m.input_bytes, _nbytes(args) + _nbytes(kwargs))
    m.phase = "emulator"
    m.emulator_peak = max(m.emulator_peak, rss)
    if on_phase is not None:
        on_phase(m)
    m.data_entered = data_seconds()
    start = m.entered = time.perf_counter()

    def result(value: Any) -> None:
        m.output_bytes += _outputs_nbytes(value)

    try:
        yield result
    finally:
        m.emulator_seconds += time.perf_counter() - start
        m.data_seconds += data_seconds() - m.data_entered
        m.rss_exit = rss_bytes()
        m.sample(m.rss_exit)
        m.emulator_peak = max(m.emulator_peak, m.rss_exit)
        m.phase = "reference"
        if on_phase is not None:
            on_phase(m)


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def time_verdict(limit: float, m: CaseMeter | None = None) -> tuple[str, str]:
    """``(outcome, reason)`` for a case that ran past ``limit`` seconds.

    ``DATA`` when the case never reached the emulator: the time went to the test's own work
    (building its inputs), which no emulator speed changes; ``TIMEOUT`` otherwise, even when the
    limit fell during the test's reference: the emulator's seconds counted towards it. The
    reason says where the case was and its seconds inside the emulator either way.
    """
    m = m or _meter
    if m.phase == "inputs" and m.calls == 0:
        return "DATA", f"case ran longer than {limit:g} s building the test's inputs, before the kernel ran"
    return "TIMEOUT", f"case ran longer than {limit:g} s ({m.where()})"


def memory_verdict(limit: int, m: CaseMeter | None = None) -> tuple[str, str]:
    """``(outcome, reason)`` for a case whose resident memory passed ``limit`` bytes.

    ``DATA`` when the limit was passed before the emulator ran (the test's inputs) or after it
    returned while it held no more than its outputs plus :data:`RETAINED_SLACK` (the test's
    reference); ``MEMORY`` when it was passed inside the emulator or while the emulator still
    held memory. The reason states the measured figures either way.
    """
    m = m or _meter
    if m.phase == "inputs":
        return "DATA", (
            f"the test's own inputs passed {_gib(limit)} before the kernel ran "
            f"(started at {_gib(m.rss_start)})"
        )
    figures = (
        f"inputs {_gib(m.input_bytes)}, resident at kernel entry {_gib(m.rss_entry)}, "
        f"emulator peak {_gib(m.emulator_peak)}"
    )
    if m.phase == "emulator":
        return "MEMORY", f"resident memory passed {_gib(limit)} inside the emulator ({figures})"
    retained = m.rss_exit - m.rss_entry - m.output_bytes
    if retained <= RETAINED_SLACK:
        return "DATA", (
            f"the test's reference passed {_gib(limit)} after the kernel returned "
            f"({figures}, at exit {_gib(m.rss_exit)})"
        )
    return "MEMORY", (
        f"resident memory passed {_gib(limit)} after the kernel returned, the emulator still "
        f"holding {_gib(retained)} ({figures})"
    )
