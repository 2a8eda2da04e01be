"""LNC=2: the two cores' dynamic control flow compared (Known Issue ``lnc2-control-flow``).

The NKI 0.3.0 release notes (Known Issues, "Multi-Core (LNC2)") say the compiler expects each
physical NeuronCore of an LNC=2 launch to execute identical control flow: "Programs with dynamic
control flow that differs across cores may deadlock or produce incorrect results. This constraint
is not enforced at compile time." AWS's LNC overview (Using Logical Neuron Cores, NKI 0.3.0)
says the same and adds that the compiler satisfies the requirement itself "most of the time":
what it cannot align is *dynamic* control flow. The 0.4.0 notes no longer list the issue, but
the overview (SDK 2.32, NKI 0.6.0) still says it: "if you use dynamic control flow, and this
control-flow is different on the different cores, then the behavior is undefined, and you will
likely receive an error at runtime", and a public DeepSeek-V4 indexer kernel reports its two cores
stalling on Trn2 when their ``nl.fori_loop`` trip counts differ. So under the releases whose notes
do not list the issue the divergence is still reported at the same line: a warning quoting the
overview (an error, ``lnc-control-flow``, in strict mode), and each core then runs its own way.

What counts as dynamic control flow here is what runs on the engine sequencers at run time, not
what Python decides while tracing (a branch on ``nl.program_id`` is resolved at trace time, as the
overview's own ``program_id`` example relies on):

- an ``nl.dynamic_range`` loop: its trip count (bounds may be registers or plain ints);
- a ``while reg:`` / ``if reg:`` test of a register: its outcome, one event per test;
- ``nl.fori_loop`` / ``nl.while_loop`` (0.6.0, where the issue is no longer listed): their trip
  counts and condition tests, recorded the same way.

Each core's events form a sequence (kind, outcome). The two cores are traced one at a time
(:mod:`trncore.sim.lnc`); when a core records an event that differs from the other core's event
at the same position, or has no counterpart because the other core finished without it, the
issue is reported at that event's line (:func:`trncore.sim.known_issues.check`). When the last
core finishes with fewer events than the first, the first core's next event is the divergence.
Equal sequences are identical dynamic control flow even if the induction values differ (a core
loops over its own half: that is data, not control flow).
"""

from __future__ import annotations

from typing import Any

from trncore.sim import context, known_issues
from trncore.sim.errors import LanguageError, warn_unless_strict

__all__ = ["finish", "record", "take"]

_RULE = "lnc2-control-flow"
_OVERVIEW_RULE = "lnc-control-flow"  # the LNC overview's requirement, under releases not listing _RULE
_KEY = "lnc_flow"  # engine_state entry: {program_id: [(kind, outcome, site), ...]}
_DONE = "lnc_flow_reported"


def _describe(event: tuple[str, Any, Any]) -> str:
    kind, outcome, site = event
    where = f" at line {site[1]}" if site else ""
    if kind == "test":
        return f"a register test{where} that is {'true' if outcome else 'false'}"
    return f"{kind} with {outcome} iteration{'s' if outcome != 1 else ''}{where}"


def _report(pid: int, mine: tuple[str, Any, Any] | None, other: int,
            theirs: tuple[str, Any, Any] | None, site: Any) -> None:
    here = _describe(mine) if mine is not None else "no more dynamic control flow"
    there = _describe(theirs) if theirs is not None else "no more dynamic control flow"
    detail = (f"core {pid} runs {here}; at the same point of its dynamic control flow, core "
              f"{other} runs {there}")  # fmt: skip
    if known_issues.listed(_RULE):
        known_issues.check(_RULE, detail, site)
        return
    text = (f"LNC=2 dynamic control flow differs between the cores: {detail}. AWS's LNC overview "
            "(Using Logical Neuron Cores, NKI 0.3.0-0.6.0): when dynamic control flow differs on "
            "the cores 'the behavior is undefined, and you will likely receive an error at "
            "runtime'; keep register-driven trip counts and tests identical on both cores")  # fmt: skip
    ctx = context.maybe_current()
    warn_unless_strict(ctx is not None and ctx.strict, LanguageError, _OVERVIEW_RULE, text, site,
                       instead="; each core runs its own way here", stacklevel=3)


def record(kind: str, outcome: Any, site: Any) -> None:
    """Record one dynamic control-flow event of the running core of an LNC=2 launch.

    ``kind``: ``nl.dynamic_range``, ``nl.fori_loop`` (``outcome``: the trip count) or ``test``
    (a register condition; ``outcome``: its truth). A no-op outside LNC=2 launches.
    """
    ctx = context.maybe_current()
    if ctx is None:
        return
    state = ctx.engine_state
    sched = state.get("lnc")
    if sched is None or state.get(_DONE):
        return
    flows: dict[int, list[tuple[str, Any, Any]]] = state.setdefault(_KEY, {})
    pid = ctx.program_id
    mine = flows.setdefault(pid, [])
    n = len(mine)
    event = (kind, outcome, site)
    mine.append(event)
    for other in range(sched.lnc):
        if other == pid:
            continue
        theirs = flows.get(other, [])
        if n < len(theirs):
            differs = theirs[n][:2] != event[:2]
            counterpart: tuple[str, Any, Any] | None = theirs[n]
        else:  # diverged if the other core finished without this event
            differs, counterpart = bool(sched.finished[other]), None
        if differs:
            state[_DONE] = True  # one report per launch
            _report(pid, event, other, counterpart, site)
            return


def take(ctx: Any) -> dict[int, list[tuple[str, Any, Any]]] | None:
    """Remove the launch's recorded events from ``ctx`` (None if a divergence was reported)."""
    flows = ctx.engine_state.pop(_KEY, None)
    if ctx.engine_state.pop(_DONE, False):
        return None
    return flows


def finish(flows: dict[int, list[tuple[str, Any, Any]]] | None, lnc: int) -> None:
    """After every core finished: a core that stopped short of another's events diverged at the
    first event it lacks (reported at that event's line)."""
    if not flows:
        return
    seqs = [flows.get(pid, []) for pid in range(lnc)]
    longest = max(range(lnc), key=lambda pid: len(seqs[pid]))
    for pid, seq in enumerate(seqs):
        if len(seq) < len(seqs[longest]):
            event = seqs[longest][len(seq)]
            _report(longest, event, pid, None, event[2])
            return
