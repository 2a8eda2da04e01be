"""What a workload launched on the emulator, and what the cost model says those launches cost.

A library call may launch several kernels, some many times (one per chunk or batch bucket).
:func:`record_launches` collects, inside a block, every kernel launch with its key, and
:meth:`LaunchRecord.model` applies the cost model of :mod:`trncore.sim.report` to each distinct
program on any target and multiplies by its launch count. This is how the benchmarks report the
number of distinct kernel keys of a whole DF-MP2 run and the modelled time of its energy step.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LaunchRecord", "StepModel", "record_launches"]


@dataclass
class _Launch:
    fn: Callable[..., Any]
    specs: tuple[tuple[tuple[int, ...], str], ...]
    params: dict[str, Any]
    lnc: int | tuple[int, ...] | None  #: the launch grid: LNC cores, or an N-D grid's shape
    count: int = 0


@dataclass(frozen=True)
class StepModel:
    """Modelled cost of a set of launches on one target (a model, not a measurement)."""

    target: str
    lower_s: float  #: engines overlap perfectly: the busiest engine's total
    upper_s: float  #: nothing overlaps: the sum over engines
    busy_s: dict[str, float]  #: modelled busy seconds per engine, summed over launches
    bound: str  #: the engine with the most busy time ("-" when nothing ran)
    #: the dependency-aware schedule of each launch (trncore.sim.schedule), summed: launches run
    #: one after another, so this lies within [lower_s, upper_s]
    modelled_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {"target": self.target, "lower_s": self.lower_s, "upper_s": self.upper_s,
                "modelled_s": self.modelled_s, "busy_s": dict(self.busy_s), "bound": self.bound}


@dataclass
class LaunchRecord:
    """Every kernel launch inside a :func:`record_launches` block, keyed by kernel-key digest."""

    _launches: dict[str, _Launch] = field(default_factory=dict)

    def add(
        self,
        digest: str,
        fn: Callable[..., Any],
        arrays: Sequence[np.ndarray],
        params: Mapping[str, Any],
        lnc: int | tuple[int, ...] | None,
    ) -> None:
        """Count one launch (called by the emulator's runner)."""
        entry = self._launches.get(digest)
        if entry is None:
            specs = tuple((tuple(a.shape), str(a.dtype)) for a in arrays)
            entry = self._launches[digest] = _Launch(fn, specs, dict(params), lnc)
        entry.count += 1

    @property
    def keys(self) -> set[str]:
        """The distinct kernel keys launched."""
        return set(self._launches)

    def programs(self, target: str) -> list[tuple[Any, int]]:
        """Each distinct launched program traced for ``target``, with its launch count.

        ``(program, count)`` pairs: ``trncore.sim.timeline(program)`` draws one launch,
        ``program.report()`` models it.
        """
        from trncore.sim.runner import trace

        return [
            (trace(e.fn, *e.specs, target=target, lnc=e.lnc, **e.params), e.count)
            for e in self._launches.values()
        ]

    def counts(self) -> dict[str, int]:
        """Launches per kernel (by function name)."""
        total: Counter[str] = Counter()
        for entry in self._launches.values():
            total[entry.fn.__name__] += entry.count
        return dict(total)

    def model(self, target: str, kernels: Sequence[Callable[..., Any]] | None = None) -> StepModel:
        """The cost model of the recorded launches (only of ``kernels`` if given) on ``target``."""
        from trncore.sim.report import report

        wanted = None if kernels is None else {getattr(k, "func", k) for k in kernels}
        busy: Counter[str] = Counter()
        lower = upper = modelled = 0.0
        for entry in self._launches.values():
            if wanted is not None and entry.fn not in wanted:
                continue
            rep = report(entry.fn, *entry.specs, target=target, lnc=entry.lnc, **entry.params)
            lower += entry.count * rep.lower_bound_s
            upper += entry.count * rep.upper_bound_s
            modelled += entry.count * rep.modelled_s
            for engine, seconds in rep.busy_seconds.items():
                busy[engine] += entry.count * seconds  # type: ignore[assignment]
        bound = max(busy, key=busy.__getitem__) if any(busy.values()) else "-"
        return StepModel(target, lower, upper, dict(busy), bound, modelled)


@contextlib.contextmanager
def record_launches() -> Iterator[LaunchRecord]:
    """Record every kernel the emulator runs (traced or replayed) inside the block."""
    from trncore.sim.runner import recording

    record = LaunchRecord()
    with recording(record):
        yield record
