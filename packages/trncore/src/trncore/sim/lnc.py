"""LNC=2: the two logical-core instances of a launch, and their exchanges (``sendrecv``,
``core_barrier``).

Under ``kernel[2]`` the same body runs once per NeuronCore of the logical core
(AWS NKI docs, Using Logical Neuron Cores (NKI 0.3.0)). Without exchanges the instances are traced one after
the other. With them, each
instance needs the other to have reached the matching point: instance 0 runs in the calling thread and
instance 1 in a second thread, and a baton lets exactly one run at a time, so the trace stays deterministic.
An instance that reaches an exchange before its partner hands the baton over and waits; the
instance that arrives last performs the exchange (its DMA instructions join the program at that
point) and carries on. The recorded program therefore replays in the same order. Because the
trace order is not the hardware's (the cores run at the same time), every executing LNC=2 trace
checks the cores' shared-HBM accesses for races (:mod:`trncore.sim.core_races`, rule
``lnc-race``): the scheduler keeps a vector clock per instance, advanced at each completed meeting.

AWS sources (nki.isa API reference, NKI 0.3.0 / SDK 2.29): ``sendrecv`` sends ``src`` to the
``dst`` of core ``send_to_rank`` while receiving into its own ``dst`` from ``recv_from_rank``;
ranks are 0 or 1; operations with the same ``pipe_id`` are one group; both tiles in SBUF with the
same dtype, shape and layout; ``dma_engine=gpsimd_dma`` needs at most 1024/512/256 bytes per
partition for 32/16/8-bit types and, in the NKI 0.3.0 page only, a multiple of 16 partitions.
``core_barrier`` makes both cores wait until both reach it; ``data`` must be in shared HBM and
``cores=(0, 1)``. Both need NeuronCore-v3 (trn2) and an LNC=2 launch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trncore.sim import context, dtypes, lnc_control, versions
from trncore.sim.checks import as_tensor
from trncore.sim.core_races import RaceTracker
from trncore.sim.errors import BufferError, DtypeError, LanguageError, ShapeError, TargetError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import dma_engine, engine
from trncore.sim.tensor import SHARED_HBM

__all__ = ["Scheduler", "core_barrier", "run_instances", "run_world", "sendrecv"]


class _Abort(BaseException):
    """Raised in an instance whose partner failed: the trace is abandoned."""


class Scheduler:
    """The baton between the instances of one launch and their meeting points.

    A launch has ``len(ctxs)`` ranks (one trace context each: its own HBM tensors and program)
    of ``lnc`` logical-core instances each; instance ``pid`` of rank ``r`` is slot ``r * lnc +
    pid``. Exactly one slot runs at a time; a slot that reaches a meeting before the others
    hands the baton to the next unfinished slot (in slot order) and waits, so every run of a
    launch interleaves the same way. LNC=2 exchanges (``sendrecv``, ``core_barrier``) meet the
    slots of one rank; ``nki.collectives`` (:mod:`trncore.sim.collectives`) meet the slots of one
    logical core across the ranks of a replica group.
    """

    def __init__(self, ctxs: Sequence[Any], lnc: int) -> None:
        self.ctxs = list(ctxs)
        self.lnc = lnc
        self.size = len(self.ctxs) * lnc
        self.cv = threading.Condition()
        self.turn = 0
        self.finished = [False] * self.size
        self.saved = [(slot % lnc, 0) for slot in range(self.size)]  # (program_id, shared_counter)
        self.counts: dict[tuple[Any, ...], int] = {}
        self.meetings: dict[tuple[Any, ...], dict[int, Any]] = {}
        self.complete: set[tuple[Any, ...]] = set()
        self.waiting: dict[int, tuple[Any, ...]] = {}
        self.error: BaseException | None = None
        #: vector clocks: ``clock[s][t]`` counts the meetings of slot ``t`` that slot ``s`` is
        #: ordered after (happens-before for the shared-HBM race check, trncore.sim.core_races)
        self.clock = [[0] * self.size for _ in range(self.size)]
        self.meetings_done = 0

    @property
    def ranks(self) -> int:
        """Ranks of the launch (1 unless launched by :func:`run_world` with several)."""
        return len(self.ctxs)

    def slot(self, ctx: Any) -> int:
        """The slot of the instance ``ctx`` is tracing now."""
        return int(ctx.engine_state.get("rank", 0)) * self.lnc + int(ctx.program_id)

    def describe(self, slot: int) -> str:
        """``core 1``, ``rank 3`` or ``rank 3 core 1``: a slot in words."""
        rank, pid = divmod(slot, self.lnc)
        if self.ranks == 1:
            return f"core {pid}"
        return f"rank {rank}" if self.lnc == 1 else f"rank {rank} core {pid}"

    # -------------------------------------------------------------- baton
    def _save(self, slot: int) -> None:
        ctx = self.ctxs[slot // self.lnc]
        self.saved[slot] = (ctx.program_id, ctx.shared_counter)

    def _restore(self, slot: int) -> None:
        ctx = self.ctxs[slot // self.lnc]
        ctx.program_id, ctx.shared_counter = self.saved[slot]

    def _wait_turn(self, slot: int) -> None:
        while self.turn != slot and self.error is None:
            self.cv.wait(0.1)
        if self.error is not None and self.turn != slot:
            raise _Abort
        self._restore(slot)

    def _pass(self, slot: int) -> None:
        """Hand the baton to the next unfinished slot (the caller keeps it if none)."""
        self._save(slot)
        for step in range(1, self.size + 1):
            other = (slot + step) % self.size
            if not self.finished[other] or other == slot:
                self.turn = other
                break
        self.cv.notify_all()

    def instance(self, slot: int, body: Callable[[int], Any], results: list[Any]) -> None:
        """Run ``body(pid)`` as ``slot`` when the baton reaches it; its result into ``results``."""
        with self.cv:
            self._wait_turn(slot)
        try:
            results[slot] = body(slot % self.lnc)
        except _Abort:
            pass
        except BaseException as exc:  # handed to the launching thread
            with self.cv:
                if self.error is None:
                    self.error = exc
                self.cv.notify_all()
        finally:
            with self.cv:
                self.finished[slot] = True
                self._pass(slot)

    # -------------------------------------------------------------- meetings
    def meet(
        self, kind: str, key: Any, payload: Any, site: Any, members: Sequence[int], rule: str
    ) -> dict[int, Any] | None:
        """Arrive at the next ``kind``/``key`` meeting of the slots ``members``.

        Returns every member's payload (by slot) to the last arriver, which performs the
        exchange, and None to the others once it is done. A member that finished without
        arriving, or a launch in which every unfinished slot waits at a meeting that cannot
        complete (the ranks or cores called different exchanges), is a LanguageError ``rule``.
        """
        slot = self.slot(context.current())
        group = tuple(members)
        n = self.counts.get((slot, kind, key, group), 0)
        self.counts[(slot, kind, key, group)] = n + 1
        ident = (kind, key, group, n)
        with self.cv:
            arrived = self.meetings.setdefault(ident, {})
            arrived[slot] = payload
            if len(arrived) == len(group):
                self._synchronise(group)
                self.complete.add(ident)
                del self.meetings[ident]
                return arrived
            self.waiting[slot] = ident
            try:
                while ident not in self.complete:
                    missing = [m for m in group if m not in arrived]
                    if all(self.finished[m] for m in missing):
                        raise LanguageError(
                            rule,
                            f"{kind} ({key}) on {self.describe(slot)} has no partner: "
                            f"{self.describe(missing[0])} finished without reaching its "
                            f"matching {kind}",
                            site,
                        )
                    self._check_deadlock(slot, kind, key, site, rule)
                    self._pass(slot)
                    self._wait_turn(slot)
            finally:
                self.waiting.pop(slot, None)
        return None

    def _synchronise(self, group: Sequence[int]) -> None:
        """A completed meeting: every member is now ordered after everything each member did
        before arriving (each member's own count advances, then the clocks join)."""
        for m in group:
            self.clock[m][m] += 1
        joined = [max(col) for col in zip(*(self.clock[m] for m in group))]
        for m in group:
            self.clock[m] = list(joined)
        self.meetings_done += 1

    def _check_deadlock(self, slot: int, kind: str, key: Any, site: Any, rule: str) -> None:
        stuck = {s: w for s, w in self.waiting.items() if w not in self.complete}
        running = [s for s in range(self.size) if not self.finished[s] and s not in stuck]
        if running or len(stuck) < 2:
            return
        other = next(s for s in sorted(stuck) if s != slot)
        o_kind, o_key = stuck[other][0], stuck[other][1]
        raise LanguageError(
            rule,
            f"{kind} ({key}) on {self.describe(slot)} cannot complete: {self.describe(other)} "
            f"waits at {o_kind} ({o_key}) instead (every instance of the launch must reach the "
            "same exchanges in the same order)",
            site,
        )


def run_world(ctxs: Sequence[Any], lnc: int, bodies: Sequence[Callable[[int], Any]]) -> list[list[Any]]:
    """Trace ``bodies[r](pid)`` for every rank ``r`` and instance ``pid``; results by rank.

    The caller has pushed ``ctxs[0]``; slot 0 runs in the calling thread, every other slot in a
    thread of its own (with its rank's context), one at a time (:class:`Scheduler`).
    """
    if len(ctxs) == 1 and lnc == 1:
        ctx = ctxs[0]
        ctx.program_id, ctx.shared_counter = 0, 0
        return [[bodies[0](0)]]
    sched = Scheduler(ctxs, lnc)
    for rank, ctx in enumerate(ctxs):
        ctx.engine_state["lnc"] = sched
        if len(ctxs) > 1:
            ctx.engine_state["rank"] = rank
        if lnc > 1 and ctx.execute:
            ctx.on_emit = RaceTracker(sched, rank)  # rule lnc-race (trncore.sim.core_races)
    results: list[Any] = [None] * sched.size

    inherited = context.thread_state()  # target release, known-issues and cast modes

    def worker(slot: int) -> None:
        context.adopt_thread_state(inherited)
        context.push(ctxs[slot // lnc])
        try:
            with dtypes.ieee_arithmetic():  # per thread, as in the launching thread
                sched.instance(slot, bodies[slot // lnc], results)
        except _Abort:
            pass  # stopped outside its body (another instance failed)
        finally:
            context.pop()
            with sched.cv:
                sched.finished[slot] = True
                sched.cv.notify_all()

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(1, sched.size)]
    for t in threads:
        t.start()
    flows = []
    try:
        sched.instance(0, bodies[0], results)
        if sched.error is not None:
            _stop(sched, threads)  # the trace is abandoned: no instance goes on tracing
        for t in threads:
            while t.is_alive():
                t.join(0.1)
        for ctx in ctxs:  # write/write races judged on each core's last values (core_races)
            if sched.error is None and isinstance(ctx.on_emit, RaceTracker):
                ctx.on_emit.settle()
    except BaseException:
        with sched.cv:
            if sched.error is None:
                sched.error = _Abort()
            sched.cv.notify_all()
        _stop(sched, threads)
        raise
    finally:
        for ctx in ctxs:
            ctx.engine_state.pop("lnc", None)
            if isinstance(ctx.on_emit, RaceTracker) and ctx.on_emit.depends_on_data():
                ctx.engine_state["data_dependent"] = True  # re-checked on the next call's offsets
            ctx.on_emit = None
            flows.append(lnc_control.take(ctx))
    if sched.error is not None and not isinstance(sched.error, _Abort):
        raise sched.error
    if lnc > 1:
        for flow in flows:
            lnc_control.finish(flow, lnc)  # Known Issue lnc2-control-flow (NKI 0.3.0)
    return [results[r * lnc : (r + 1) * lnc] for r in range(len(ctxs))]


def _stop(sched: Scheduler, threads: Sequence[threading.Thread], wait: float = 5.0) -> None:
    """End instances still tracing after the launching thread was interrupted.

    The launching thread leaves by an exception (an emulator rule, or a caller's time or memory
    limit raised asynchronously, as the conformance runner does) while another instance may hold
    the baton and trace on, keeping its rank's tensors alive and the interpreter busy. Each
    unfinished worker gets :class:`_Abort` raised in it (``PyThreadState_SetAsyncExc``, delivered
    at its next bytecode; the worker swallows it) and is waited for up to ``wait`` seconds. The
    scheduler's own ``finished`` flags decide, not ``Thread.is_alive()``: a ``join`` interrupted
    by an exception can leave a running thread marked as stopped.
    """
    import ctypes
    import time

    for slot, t in enumerate(threads, start=1):
        if not sched.finished[slot] and t.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(_Abort))
    deadline = time.monotonic() + wait
    with sched.cv:
        while not all(sched.finished) and time.monotonic() < deadline:
            sched.cv.notify_all()
            sched.cv.wait(0.05)


def run_instances(ctx: Any, lnc: int, body: Callable[[int], Any]) -> list[Any]:
    """Trace ``body(pid)`` for every instance of a one-rank launch; returns their results.

    ``body`` sets up and runs one instance (``ctx.program_id`` is set to ``pid`` first).
    """
    return run_world([ctx], lnc, [body])[0]


def _scheduler(op: str, site: Any) -> tuple[Any, Scheduler]:
    ctx = context.current()
    if ctx.rules.nc_version < 3:
        raise TargetError(f"{op}-target", f"nisa.{op} needs NeuronCore-v3 (trn2) or newer", site)
    sched = ctx.engine_state.get("lnc")
    if sched is None or ctx.lnc < 2:
        raise LanguageError(
            f"{op}-lnc", f"nisa.{op} exchanges between the cores of an LNC=2 launch "
            "(kernel[2]); this launch has one core", site,
        )  # fmt: skip
    return ctx, sched


def _core_slots(ctx: Any, sched: Scheduler) -> tuple[int, list[int]]:
    """The first slot of ``ctx``'s rank and the slots of its cores."""
    base = int(ctx.engine_state.get("rank", 0)) * sched.lnc
    return base, [base + p for p in range(sched.lnc)]


def _rank(value: Any, what: str, site: Any) -> int:
    rank = int(value)
    if rank not in (0, 1):
        raise ShapeError("sendrecv-rank", f"sendrecv {what}={value!r}: ranks are 0 or 1", site)
    return rank


def sendrecv(
    src: Any,
    dst: Any,
    send_to_rank: Any,
    recv_from_rank: Any,
    pipe_id: Any,
    dma_engine: Any = dma_engine.dma,
    name: str | None = None,
) -> None:
    """Send ``src`` to core ``send_to_rank``'s ``dst``; receive core ``recv_from_rank``'s ``src``."""
    _, site = _begin()
    ctx, sched = _scheduler("sendrecv", site)
    src = as_tensor(src, "sendrecv", "src", site)
    dst = as_tensor(dst, "sendrecv", "dst", site)
    for t, what in ((src, "src"), (dst, "dst")):
        if t.buffer.name != "sbuf":
            raise BufferError("sendrecv-sbuf", f"sendrecv {what} must be in SBUF: {t.describe()}", site)
    if src.dtype != dst.dtype:
        raise DtypeError("sendrecv-dtype", f"sendrecv src and dst need the same dtype: "
                         f"{src.describe()} vs {dst.describe()}", site)  # fmt: skip
    if src.partitions != dst.partitions or src.free_size != dst.free_size:
        raise ShapeError("sendrecv-shape", f"sendrecv src and dst need the same partitions and "
                         f"elements per partition: {src.describe()} vs {dst.describe()}", site)  # fmt: skip
    if int(dma_engine) == 2:  # gpsimd_dma
        limit = {4: 1024, 2: 512, 1: 256}.get(dtypes.itemsize(src.dtype), 1024)
        nbytes = src.free_size * dtypes.itemsize(src.dtype)
        # the multiple-of-16 partition rule is in the NKI 0.3.0 page only; the 0.4.0-0.6.0
        # pages (SDK 2.30-2.32) keep just the bytes per partition (versions.CHANGES)
        rows16 = not versions.has_change("nisa.sendrecv gpsimd_dma partitions")
        if (rows16 and src.partitions % 16) or nbytes > limit:
            need = "a multiple of 16 partitions and " if rows16 else ""
            raise ShapeError("sendrecv-gpsimd-dma", f"sendrecv src with dma_engine=gpsimd_dma "
                             f"needs {need}at most {limit} bytes per partition under "
                             f"{versions.release(versions.current()).label}: "
                             f"{src.describe()}", site)  # fmt: skip
    to_rank = _rank(send_to_rank, "send_to_rank", site)
    from_rank = _rank(recv_from_rank, "recv_from_rank", site)
    pid = ctx.program_id
    mine = {"src": src, "dst": dst, "to": to_rank, "from": from_rank, "site": site}
    base, cores = _core_slots(ctx, sched)
    met = sched.meet("sendrecv", f"pipe_id={pipe_id}", mine, site, cores, "lnc-unmatched-exchange")
    if met is None:
        return  # the partner, arriving last, moved both directions
    arrived = {slot - base: part for slot, part in met.items()}
    for receiver, part in arrived.items():
        sender = arrived[part["from"]]
        if sender["to"] != receiver:
            raise LanguageError(
                "sendrecv-pairing",
                f"core {receiver} receives from core {part['from']}, which sends to core "
                f"{sender['to']} (pipe_id={pipe_id})",
                part["site"],
            )
        s, d = sender["src"], part["dst"]
        if s.dtype != d.dtype or s.partitions != d.partitions or s.free_size != d.free_size:
            raise ShapeError("sendrecv-shape", f"core {part['from']} sends {s.describe()} into "
                             f"core {receiver}'s {d.describe()}", part["site"])  # fmt: skip
        s_op, d_op = s.operand(part["site"]), d.operand(part["site"])
        shape = d.shape

        def run(s_op: Any = s_op, d_op: Any = d_op, shape: Any = shape) -> None:
            d_op.write(np.array(s_op.read()).reshape(shape))

        meta = {"bytes": s.size * dtypes.itemsize(s.dtype), "src": "sbuf", "dst": "sbuf",
                "sender": part["from"], "receiver": receiver}  # fmt: skip
        ctx.emit("sendrecv", "dma", part["site"] if receiver == pid else site, [s], [d], run, meta)


def core_barrier(data: Any, cores: Any, engine: Any = engine.gpsimd, name: str | None = None) -> None:
    """Wait until both cores of the LNC=2 launch reach this barrier on ``data`` (shared HBM)."""
    _, site = _begin()
    ctx, sched = _scheduler("core_barrier", site)
    data = as_tensor(data, "core_barrier", "data", site)
    if data.alloc.buffer is not SHARED_HBM:
        raise BufferError("core-barrier-data", "core_barrier data must be a shared HBM tensor: "
                          f"{data.describe()}", site)  # fmt: skip
    if tuple(int(c) for c in cores) != (0, 1):
        raise ShapeError("core-barrier-cores", f"core_barrier cores={tuple(cores)}: only (0, 1) "
                         "is supported", site)  # fmt: skip
    _, cores = _core_slots(ctx, sched)
    arrived = sched.meet(
        "core_barrier", "cores=(0, 1)", {"site": site}, site, cores, "lnc-unmatched-exchange"
    )
    if arrived is not None:
        ctx.emit("core_barrier", "gpsimd", site, [], [], lambda: None, {"cores": 2})
