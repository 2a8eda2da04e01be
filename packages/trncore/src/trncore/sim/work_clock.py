"""Seconds the emulator spends on data work: the NumPy arithmetic and copies of its programs.

A traced kernel's time has two parts. The *data work* is what a replay of the recorded program
does: each instruction's ``run`` closure (the ISA op's arithmetic and copies on NumPy views of
the program's memory), the sentinel fills of new tiles, the copies of the arguments in and of
the outputs out. Everything else is *tracing*: the kernel's own Python, building views, the rule
checks, allocation and recording. Data work is a floor no faster tracer goes under (short of
faster NumPy); tracing is the interpreter's overhead. The conformance meter
(:mod:`trncore.sim.conform_meter`) reports both per case.

:data:`CLOCK` accumulates data-work seconds for the whole process (all threads): two
``perf_counter`` calls around each closure, ~0.1 us beside ~30 us of tracing per instruction. A
reader takes the difference of :func:`data_seconds` before and after the span it measures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from time import perf_counter
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["CLOCK", "DataClock", "data_seconds", "run_timed", "timed"]


class DataClock:
    """A running total of data-work seconds (see the module docstring)."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


#: The process's data-work clock (:mod:`trncore.sim.program` adds to it).
CLOCK = DataClock()


def data_seconds() -> float:
    """Data-work seconds accumulated by this process so far."""
    return CLOCK.seconds


def run_timed(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, its seconds added to :data:`CLOCK` (whether it returns or raises)."""
    start = perf_counter()
    try:
        return fn(*args)
    finally:
        CLOCK.seconds += perf_counter() - start


def timed(run: Callable[[], None]) -> Callable[[], None]:
    """``run`` with its seconds added to :data:`CLOCK` (for a closure another module calls)."""
    return functools.partial(run_timed, run)
