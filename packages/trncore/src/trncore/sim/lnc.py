"""LNC=2: the two logical-core instances of a launch, and their exchanges (``sendrecv``,
``core_barrier``).

Under ``kernel[2]`` the same body runs once per NeuronCore of the logical core
(AWS NKI docs, Using Logical Neuron Cores (NKI 0.3.0)). Without exchanges the instances are traced one after
the other. With them, each
instance needs the other to have reached the matching point: instance 0 runs in the calling thread and
instance 1 in a second thread, and a baton lets exactly one run at a time, so the trace stays deterministic.
An instance that reaches an exchange before its partner hands the baton over and waits; the
instance that arrives last performs the exchange (its DMA instructions join the program at that
point) and carries on. The recorded program therefore replays in the same order.

AWS sources (nki.isa API reference, NKI 0.3.0 / SDK 2.29): ``sendrecv`` sends ``src`` to the
``dst`` of core ``send_to_rank`` while receiving into its own ``dst`` from ``recv_from_rank``;
ranks are 0 or 1; operations with the same ``pipe_id`` are one group; both tiles in SBUF with the
same dtype, shape and layout; ``dma_engine=gpsimd_dma`` needs partition counts that are multiples
of 16 and at most 1024/512/256 bytes per partition for 32/16/8-bit types. ``core_barrier`` makes
both cores wait until both reach it; ``data`` must be in shared HBM and ``cores=(0, 1)``. Both
need NeuronCore-v3 (trn2) and an LNC=2 launch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from trncore.sim import context, dtypes, lnc_control
from trncore.sim.checks import as_tensor
from trncore.sim.errors import BufferError, DtypeError, LanguageError, ShapeError, TargetError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import dma_engine, engine
from trncore.sim.tensor import SHARED_HBM

__all__ = ["core_barrier", "run_instances", "sendrecv"]


class _Abort(BaseException):
    """Raised in an instance whose partner failed: the trace is abandoned."""


class _Scheduler:
    """The baton between the instances of one LNC=2 trace and their meeting points."""

    def __init__(self, ctx: Any, lnc: int) -> None:
        self.ctx = ctx
        self.lnc = lnc
        self.cv = threading.Condition()
        self.turn = 0
        self.finished = [False] * lnc
        self.saved = [(pid, 0) for pid in range(lnc)]  # (program_id, shared_counter)
        self.counts: dict[tuple[int, str, Any], int] = {}
        self.meetings: dict[tuple[str, Any, int], dict[int, Any]] = {}
        self.complete: set[tuple[str, Any, int]] = set()
        self.error: BaseException | None = None

    # -------------------------------------------------------------- baton
    def _save(self, pid: int) -> None:
        self.saved[pid] = (self.ctx.program_id, self.ctx.shared_counter)

    def _restore(self, pid: int) -> None:
        self.ctx.program_id, self.ctx.shared_counter = self.saved[pid]

    def _wait_turn(self, pid: int) -> None:
        while self.turn != pid and self.error is None:
            self.cv.wait(0.1)
        if self.error is not None and self.turn != pid:
            raise _Abort
        self._restore(pid)

    def _pass(self, pid: int) -> None:
        """Hand the baton to the next unfinished instance (the caller keeps it if none)."""
        self._save(pid)
        for step in range(1, self.lnc + 1):
            other = (pid + step) % self.lnc
            if not self.finished[other] or other == pid:
                self.turn = other
                break
        self.cv.notify_all()

    def instance(self, pid: int, body: Callable[[int], Any], results: list[Any]) -> None:
        with self.cv:
            self._wait_turn(pid)
        try:
            results[pid] = body(pid)
        except _Abort:
            pass
        except BaseException as exc:  # handed to the launching thread
            with self.cv:
                if self.error is None:
                    self.error = exc
                self.cv.notify_all()
        finally:
            with self.cv:
                self.finished[pid] = True
                self._pass(pid)

    # -------------------------------------------------------------- meetings
    def meet(self, kind: str, key: Any, payload: Any, site: Any) -> dict[int, Any] | None:
        """Arrive at the next ``kind``/``key`` meeting; returns all payloads to the last arriver
        (which performs the exchange) and None to the others once it is done."""
        pid = self.ctx.program_id
        n = self.counts.get((pid, kind, key), 0)
        self.counts[(pid, kind, key)] = n + 1
        ident = (kind, key, n)
        with self.cv:
            arrived = self.meetings.setdefault(ident, {})
            arrived[pid] = payload
            if len(arrived) == self.lnc:
                self.complete.add(ident)
                return arrived
            while ident not in self.complete:
                others = [p for p in range(self.lnc) if p != pid and p not in arrived]
                if all(self.finished[p] for p in others):
                    raise LanguageError(
                        "lnc-unmatched-exchange",
                        f"{kind} ({key}) on core {pid} has no partner: core "
                        f"{others[0]} finished without reaching its matching {kind}",
                        site,
                    )
                self._pass(pid)
                self._wait_turn(pid)
        return None


def run_instances(ctx: Any, lnc: int, body: Callable[[int], Any]) -> list[Any]:
    """Trace ``body(pid)`` for every instance of the launch; returns their results.

    ``body`` sets up and runs one instance (``ctx.program_id`` is set to ``pid`` first).
    """
    if lnc == 1:
        ctx.program_id, ctx.shared_counter = 0, 0
        return [body(0)]
    sched = _Scheduler(ctx, lnc)
    ctx.engine_state["lnc"] = sched
    results: list[Any] = [None] * lnc

    inherited = context.thread_state()  # target release, known-issues and cast modes

    def worker(pid: int) -> None:
        context.adopt_thread_state(inherited)
        context.push(ctx)
        try:
            sched.instance(pid, body, results)
        finally:
            context.pop()

    threads = [threading.Thread(target=worker, args=(pid,), daemon=True) for pid in range(1, lnc)]
    for t in threads:
        t.start()
    try:
        sched.instance(0, body, results)
        for t in threads:
            while t.is_alive():
                t.join(0.1)
    except BaseException:
        with sched.cv:
            if sched.error is None:
                sched.error = _Abort()
            sched.cv.notify_all()
        raise
    finally:
        ctx.engine_state.pop("lnc", None)
        flows = lnc_control.take(ctx)
    if sched.error is not None and not isinstance(sched.error, _Abort):
        raise sched.error
    lnc_control.finish(flows, lnc)  # Known Issue lnc2-control-flow (NKI 0.3.0)
    return results


def _scheduler(op: str, site: Any) -> tuple[Any, _Scheduler]:
    ctx = context.current()
    if ctx.rules.nc_version < 3:
        raise TargetError(f"{op}-target", f"nisa.{op} needs NeuronCore-v3 (trn2) or newer", site)
    sched = ctx.engine_state.get("lnc")
    if sched is None:
        raise LanguageError(
            f"{op}-lnc", f"nisa.{op} exchanges between the cores of an LNC=2 launch "
            "(kernel[2]); this launch has one core", site,
        )  # fmt: skip
    return ctx, sched


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
        if src.partitions % 16 or nbytes > limit:
            raise ShapeError("sendrecv-gpsimd-dma", "sendrecv with dma_engine=gpsimd_dma needs a "
                             f"multiple of 16 partitions and at most {limit} bytes per partition: "
                             f"{src.describe()}", site)  # fmt: skip
    to_rank = _rank(send_to_rank, "send_to_rank", site)
    from_rank = _rank(recv_from_rank, "recv_from_rank", site)
    pid = ctx.program_id
    mine = {"src": src, "dst": dst, "to": to_rank, "from": from_rank, "site": site}
    arrived = sched.meet("sendrecv", f"pipe_id={pipe_id}", mine, site)
    if arrived is None:
        return  # the partner, arriving last, moved both directions
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
    arrived = sched.meet("core_barrier", "cores=(0, 1)", {"site": site}, site)
    if arrived is not None:
        ctx.emit("core_barrier", "gpsimd", site, [], [], lambda: None, {"cores": 2})
