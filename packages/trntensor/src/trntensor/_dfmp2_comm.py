"""The collectives of the DF-MP2 driver (:mod:`trntensor.dfmp2`): failures become
:class:`RankFailure`, every wait has a timeout, and a fault can be injected for tests.

A distributed run must never end with an energy when one of its ranks died or hung, and it must
not hang itself. Every collective here is started asynchronously and waited for with the run's
timeout (``Work.wait(timeout)`` of ``torch.distributed``); an error or an expired wait raises
:class:`RankFailure` naming the stage, this rank, and the rank it was waiting for.

Fault injection (tests only): ``TRNTENSOR_DFMP2_FAULT=<action>:<rank>[:<stage>]`` makes rank
``<rank>`` fail when it is about to send its first data of ``<stage>`` (``integrals`` or
``pairs``, default ``pairs``): ``kill`` ends the process with SIGKILL, ``hang`` stops it without
ending it. The variable is read through :mod:`trncore.config` like every other.
"""

from __future__ import annotations

import datetime
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from trncore.config import read_library_text

__all__ = ["FAULT_VARIABLE", "Clock", "Comm", "Fault", "RankFailure", "StageTime", "read_fault"]

FAULT_VARIABLE = "TRNTENSOR_DFMP2_FAULT"
_FAULT_ACTIONS = ("kill", "hang")
_FAULT_STAGES = ("integrals", "pairs")


class RankFailure(RuntimeError):
    """A distributed DF-MP2 run lost a rank: it died, or it did not answer within the timeout.

    Attributes
    ----------
    stage : str
        The stage the run was in (``"metric"``, ``"integrals"``, ``"pairs"``, ``"sum"``).
    rank : int
        The rank that noticed (this process), in the process group.
    peer : int or None
        The rank it was waiting for, when one rank is (a broadcast's source); else None.
    ranks : int
        The size of the process group.
    reason : str
        What happened (the timeout, or the transport's error).
    """

    def __init__(self, stage: str, rank: int, peer: int | None, ranks: int, reason: str) -> None:
        self.stage, self.rank, self.peer, self.ranks, self.reason = stage, rank, peer, ranks, reason
        lost = f"rank {peer}" if peer is not None else "another rank"
        super().__init__(
            f"DF-MP2 stopped in stage '{stage}': rank {rank} of {ranks} lost {lost} ({reason}); "
            "no energy was computed"
        )


@dataclass(frozen=True)
class Fault:
    """An injected failure: ``action`` on rank ``rank`` at its first send of ``stage``."""

    action: str
    rank: int
    stage: str


def read_fault() -> Fault | None:
    """The fault of ``TRNTENSOR_DFMP2_FAULT`` (or ``TRNSCI_DFMP2_FAULT``), None when unset."""
    text = read_library_text("TRNTENSOR", "DFMP2_FAULT")
    if text is None:
        return None
    parts = text.split(":")
    ok = 2 <= len(parts) <= 3 and parts[0] in _FAULT_ACTIONS and parts[1].isdigit()
    if ok and len(parts) == 3:
        ok = parts[2] in _FAULT_STAGES
    if not ok:
        raise ValueError(
            f"{FAULT_VARIABLE}={text!r} is not a fault; expected <action>:<rank>[:<stage>] with action "
            f"{' or '.join(_FAULT_ACTIONS)} and stage {' or '.join(_FAULT_STAGES)} (e.g. kill:1:pairs)"
        )
    return Fault(parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "pairs")


@dataclass
class StageTime:
    """Where one rank's time went in one part of the run (seconds)."""

    wall: float = 0.0  #: elapsed time in the part
    cpu: float = 0.0  #: this process's CPU time in it (all its threads)
    wait: float = 0.0  #: elapsed time spent waiting for collectives to complete (part of ``wall``)
    collectives: int = 0  #: collectives waited for

    def as_dict(self) -> dict[str, float]:
        """The four numbers by name (for JSON)."""
        return {"wall": self.wall, "cpu": self.cpu, "wait": self.wait, "collectives": self.collectives}


class Clock:
    """Per-part timers of one rank: :meth:`enter` starts a part (ending the previous one), and
    :class:`Comm` adds the time it spends waiting in collectives to the current part.

    A few clock readings per part and per collective: cheap enough to be always on.
    """

    def __init__(self) -> None:
        self.parts: dict[str, StageTime] = {}
        self._current: StageTime | None = None
        self._wall = self._cpu = 0.0

    def enter(self, part: str | None) -> None:
        """End the current part and start ``part`` (None: stop timing)."""
        wall, cpu = time.perf_counter(), time.process_time()
        if self._current is not None:
            self._current.wall += wall - self._wall
            self._current.cpu += cpu - self._cpu
        self._current = None if part is None else self.parts.setdefault(part, StageTime())
        self._wall, self._cpu = wall, cpu

    def waited(self, seconds: float) -> None:
        """Count one collective's wait of ``seconds`` in the current part."""
        if self._current is not None:
            self._current.wait += seconds
            self._current.collectives += 1


def _reason(exc: BaseException, timeout: float | None) -> str:
    text = str(exc)
    if "timed out" in text.lower() or "timeout" in text.lower():
        limit = f"{timeout:g} s" if timeout is not None else "the process group's timeout"
        return f"no answer within {limit}: it hangs, died or is far behind"
    if any(w in text for w in ("Connection reset", "Connection closed", "Broken pipe", "EOF")):
        return "its connection closed: the process died or left the group"
    return text.splitlines()[0] if text else type(exc).__name__


class Comm:
    """The few collectives the driver needs, on a process group or on one process.

    ``stage`` names what the driver is doing (set by it), for :class:`RankFailure`'s message.
    """

    def __init__(self, group: Any, timeout: float | None) -> None:
        self.group = group
        self.timeout = timeout
        self.stage = "setup"
        self.fault = read_fault()
        self.clock = Clock()
        self._fired: set[str] = set()
        if group is None:
            self.rank, self.size = 0, 1
        else:
            import torch.distributed as dist

            self.dist = dist
            self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)

    # --------------------------------------------------------------------- faults

    def _maybe_fail(self) -> None:
        """Carry out the injected fault when this rank is about to send in its stage."""
        f = self.fault
        if f is None or f.rank != self.rank or f.stage != self.stage or self.stage in self._fired:
            return
        self._fired.add(self.stage)
        if f.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Event().wait()  # hang: never returns (the test or torchrun ends the process)

    # --------------------------------------------------------------------- collectives

    def _global(self, rank: int) -> int:
        return int(self.dist.get_global_rank(self.group, rank))

    def wait(self, work: Any, peer: int | None) -> None:
        """Wait for ``work`` (from :meth:`broadcast_async`; None: nothing to wait for)."""
        if work is None:
            return
        start = time.perf_counter()
        try:
            if self.timeout is None:
                work.wait()
            else:
                work.wait(timeout=datetime.timedelta(seconds=self.timeout))
        except RuntimeError as exc:
            raise RankFailure(self.stage, self.rank, peer, self.size, _reason(exc, self.timeout)) from exc
        finally:
            self.clock.waited(time.perf_counter() - start)

    def broadcast_async(self, t: torch.Tensor, src: int) -> tuple[Any, int | None]:
        """Start a broadcast of ``t`` from ``src``; pass the result to :meth:`wait_for`."""
        if src == self.rank:
            self._maybe_fail()
        if not t.is_contiguous():  # the transport sends and fills memory in storage order
            raise ValueError(f"broadcast needs a contiguous tensor, got strides {t.stride()}")
        if self.size == 1:
            return None, None
        work = self.dist.broadcast(t, src=self._global(src), group=self.group, async_op=True)
        return work, (src if src != self.rank else None)

    def wait_for(self, pending: tuple[Any, int | None]) -> None:
        """Wait for a broadcast started by :meth:`broadcast_async`."""
        self.wait(*pending)

    def broadcast(self, t: torch.Tensor, src: int) -> None:
        self.wait_for(self.broadcast_async(t, src))

    def sum_exact(self, t: torch.Tensor) -> None:
        """Element-wise sum over ranks of a tensor that at most one rank holds non-zero per entry
        (adding zeros is exact, so the result does not depend on the reduction order)."""
        if self.size > 1:
            self.wait(self.dist.all_reduce(t, group=self.group, async_op=True), None)
