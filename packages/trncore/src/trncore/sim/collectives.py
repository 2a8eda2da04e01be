"""``nki.collectives``: communication between the ranks of a multi-rank launch.

AWS sources (the ``nki.collectives`` API reference of NKI 0.3.0 / SDK 2.29, unchanged in substance
through SDK 2.32; ``priority`` from SDK 2.30, ``name`` from SDK 2.31): collectives run across
*ranks* (each rank a logical NeuronCore running the kernel) on a ``ReplicaGroup``, a list of
rank lists that must not overlap. Every operation takes lists of source and destination tensors
("coalesced" when longer than one).

- ``all_reduce(srcs, dsts, replica_group, op)``: every rank of the group receives the reduction
  (``op`` is ``nl.add``, ``nl.minimum`` or ``nl.maximum``) of the group's sources.
- ``all_gather(srcs, dsts, replica_group, collective_dim)``: the sources concatenated along
  ``collective_dim`` in the order of the rank list; HBM: dim 0 only; SBUF: 2-D tiles, dim 0 or 1.
- ``reduce_scatter(srcs, dsts, replica_group, collective_dim, op)``: the reduction split along
  dim 0 (the only one supported) into one chunk per rank; the k-th rank of the list gets chunk k.
- ``all_to_all(srcs, dsts, replica_group, collective_dim)``: HBM only, dim 0 only: chunk j of
  rank i's source becomes chunk i of rank j's destination.
- ``collective_permute(srcs, dsts, source_target_pairs)``: HBM only, one tensor each: the source
  of each pair's first rank goes to the destination of its second.
- ``collective_permute_implicit`` / ``..._reduce``: a ring over each rank list: every rank sends
  (the ``op`` of its two sources, for ``_reduce``) to its successor and receives its
  predecessor's; one tensor per channel, ``channel_ids`` consecutive from 0, at most 4 channels.
  ``collective_permute_implicit_current_processing_rank_id(iteration_id, ...)`` is the rank whose
  data a rank holds after ``iteration_id`` ring steps (its own at 0).
- ``rank_id()``: the current rank (a register, usable as ``.ap(scalar_offset=)``).

Rules checked at the kernel's line: tensors are HBM or SBUF, never mixed in one call (PSUM is
refused); coalesced lists only on HBM; ``srcs`` and ``dsts`` of equal length; each source and
destination of one dtype (no conversion is documented, so none is emulated); the destination
shape each operation implies; the ``collective_dim`` and memory limits above; the ``op`` tokens;
replica groups (disjoint lists of launched ranks containing the caller); every rank of the group
calling the same operation with the same shapes; ``priority`` (0-3) needs NeuronCore-v4.

Emulation: ranks are traced in one process by :func:`trncore.sim.runner.run_ranks`, each rank
its own trace context (its own HBM tensors), instances one at a time under the scheduler of
:mod:`trncore.sim.lnc`. A collective is a meeting of the instance with the same logical-core id
(``nl.program_id``) on every rank of the group: under LNC=2 each core issues its own collectives
on its own tiles (AWS's NKI library splits tiles between the cores and gathers each). The last
rank to arrive computes every member's result from the sources as they are then and each rank's
program records the instruction writing its destinations. Reductions are computed in float32 in
rank-list order and rounded once to the destination dtype (the docs do not define the order or
precision). A launch without ranks (``kernel[...]`` / ``run_kernel``) is rank 0 of one: a group
``[[0]]`` works, a group naming other ranks is refused. A program holding a collective is
traced again on its next call (its values are computed when the ranks meet).

The variable-length ``all_to_all_v`` (NKI 0.3.0) and ``all_gather_v`` (NKI 0.6.0) exchange chunks
of flat buffers whose counts and displacements are data (a ``uint32`` metadata tensor), read when
the ranks meet; see :func:`all_to_all_v`, :func:`all_gather_v` and docs/emulator-multicore.md,
"Variable-length collectives".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trncore.sim import alu, context, dtypes
from trncore.sim.checks import as_tensor
from trncore.sim.errors import BufferError, DtypeError, LanguageError, ShapeError, TargetError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import op_token
from trncore.sim.nki_object import NKIObject
from trncore.sim.registers import VirtualRegister
from trncore.sim.tensor import NkiTensor

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_gather_v",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "reduce_scatter",
]

#: The reduction tokens the collectives accept (``op``: nl.add, nl.minimum or nl.maximum).
REDUCE_OPS = {name: alu.BINARY[name] for name in ("add", "minimum", "maximum")}
#: ``collective_permute_implicit``: at most 4 channels (replica groups of a whole node).
MAX_CHANNELS = 4


class ReplicaGroup(NKIObject):
    """A group of ranks taking part in a collective (``ReplicaGroup([[0, 1], [2, 3]])``)."""

    def __init__(self, groups: Any = None) -> None:
        self.groups = groups


class RankRegister(VirtualRegister):
    """A register holding a rank id (``rank_id()``, the ring's current rank): a scalar offset."""

    def __index__(self) -> int:
        return int(self.value or 0)

    def as_scalar_offset(self) -> int:
        """Its value as ``.ap(scalar_offset=...)`` (how AWS's NKI library uses ``rank_id()``)."""
        return int(self.value or 0)


# ---------------------------------------------------------------- the launch and its ranks


class _Launch:
    """The calling instance's place in the launch: context, scheduler, rank, number of ranks."""

    def __init__(self) -> None:
        self.ctx = context.current()
        self.sched = self.ctx.engine_state.get("lnc")
        self.rank = int(self.ctx.engine_state.get("rank", 0))
        self.ranks = self.sched.ranks if self.sched is not None else 1
        self.lnc = self.sched.lnc if self.sched is not None else 1

    def slot(self, rank: int) -> int:
        """The scheduler slot of ``rank``'s instance with this instance's core id."""
        return rank * self.lnc + int(self.ctx.program_id)

    def group(self, replica_group: Any, op: str, site: Any) -> tuple[int, ...]:
        """The caller's rank list of ``replica_group``, after the documented checks."""
        groups = replica_group.groups if isinstance(replica_group, ReplicaGroup) else None
        if (
            not isinstance(groups, (list, tuple))
            or not groups
            or not all(isinstance(g, (list, tuple)) and g for g in groups)
        ):
            raise LanguageError(
                "collective-replica-group",
                f"{op}: replica_group must be a ReplicaGroup of non-empty rank lists, got {replica_group!r}",
                site,
            )
        seen: set[int] = set()
        mine: tuple[int, ...] | None = None
        for g in groups:
            ranks = tuple(int(r) for r in g)
            for r in ranks:
                if r in seen:
                    raise LanguageError(
                        "collective-replica-group",
                        f"{op}: rank {r} is in more than one list of replica_group {groups} "
                        "(the lists must not overlap)",
                        site,
                    )
                if not 0 <= r < self.ranks:
                    raise LanguageError(
                        "collective-replica-group",
                        f"{op}: replica_group {groups} names rank {r}; the launch has "
                        f"{self.ranks} rank{'s' if self.ranks != 1 else ''}",
                        site,
                    )
                seen.add(r)
            if self.rank in ranks:
                mine = ranks
        if mine is None:
            raise LanguageError(
                "collective-replica-group",
                f"{op}: rank {self.rank} is in no list of replica_group {groups}",
                site,
            )
        return mine

    def meet(
        self, op: str, key: Any, payload: dict[str, Any], site: Any, ranks: Sequence[int]
    ) -> dict[int, Any] | None:
        """Meet the same core of ``ranks``; payloads by rank to the last arriver, else None."""
        if len(ranks) == 1:
            return {ranks[0]: payload}
        members = [self.slot(r) for r in sorted(ranks)]
        met = self.sched.meet("collective", key, payload, site, members, "collective-unmatched")
        if met is None:
            return None
        return {slot // self.lnc: part for slot, part in met.items()}


def _priority(priority: Any, op: str, site: Any) -> None:
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
        raise ValueError(f"{op}: priority must be an int 0-3 (lower is higher), got {priority!r}")
    if context.current().rules.nc_version < 4:
        raise TargetError(
            "collective-priority", f"{op}: priority (DMA quality of service) needs NeuronCore-v4", site
        )


def _tensors(values: Any, op: str, what: str, site: Any) -> list[NkiTensor]:
    if not isinstance(values, (list, tuple)) or not values:
        raise TypeError(f"{op}: {what} must be a non-empty list of tensors, got {values!r}")
    return [as_tensor(v, op, what, site) for v in values]


def _memory(op: str, site: Any, hbm_only: bool, single: bool, *lists: list[NkiTensor]) -> bool:
    """The memory rules shared by the collectives; True when the tensors are on HBM."""
    tensors = [t for lst in lists for t in lst]
    for t in tensors:
        if t.buffer.name == "psum":
            raise BufferError(
                "collective-memory", f"{op}: tensors must be on HBM or SBUF, not PSUM: {t.describe()}", site
            )
    on_hbm = {t.buffer.is_hbm for t in tensors}
    if len(on_hbm) > 1:
        raise BufferError(
            "collective-memory",
            f"{op}: all tensors must be on HBM or all on SBUF (mixing memory spaces is not "
            f"supported): {', '.join(t.describe() for t in tensors)}",
            site,
        )
    hbm = on_hbm.pop()
    if hbm_only and not hbm:
        raise BufferError("collective-memory", f"{op}: tensors must be on HBM (SBUF is not supported)", site)
    if single and any(len(lst) != 1 for lst in lists):
        raise ShapeError("collective-coalesced", f"{op}: each tensor list must hold exactly one tensor", site)
    if not hbm and any(len(lst) > 1 for lst in lists):
        raise ShapeError(
            "collective-coalesced",
            f"{op}: several tensors in one call (coalesced) are supported on HBM only",
            site,
        )
    return hbm


def _pairs(op: str, site: Any, srcs: list[NkiTensor], dsts: list[NkiTensor]) -> None:
    if len(srcs) != len(dsts):
        raise ShapeError("collective-lists", f"{op}: {len(srcs)} sources for {len(dsts)} destinations", site)
    for s, d in zip(srcs, dsts):
        if s.dtype != d.dtype:
            raise DtypeError(
                "collective-dtype",
                f"{op}: source and destination need the same dtype: {s.describe()} vs {d.describe()}",
                site,
            )


def _operands(
    op: str, site: Any, srcs: Any, dsts: Any, hbm_only: bool, single: bool
) -> tuple[list[NkiTensor], list[NkiTensor], bool]:
    """The source and destination lists of one collective, checked as :func:`_memory` and
    :func:`_pairs` check them; the flag says they are in HBM."""
    s, d = _tensors(srcs, op, "srcs", site), _tensors(dsts, op, "dsts", site)
    hbm = _memory(op, site, hbm_only, single, s, d)
    _pairs(op, site, s, d)
    return s, d, hbm


def _expect_shape(op: str, site: Any, dst: NkiTensor, shape: tuple[int, ...], why: str) -> None:
    if tuple(dst.shape) != tuple(shape):
        raise ShapeError(
            "collective-shape",
            f"{op}: destination {dst.describe()} must have shape {list(shape)} ({why})",
            site,
        )


def _dim(value: Any, op: str, site: Any, allowed: Sequence[int]) -> int:
    dim = int(value)
    if dim not in allowed:
        raise ShapeError(
            "collective-dim",
            f"{op}: collective_dim={value!r} is not supported here (supported: "
            f"{', '.join(map(str, allowed))})",
            site,
        )
    return dim


def _read(t_op: Any) -> np.ndarray:
    return np.array(t_op.read(), copy=True)


def _reduce(token: alu.Op, values: Sequence[np.ndarray]) -> np.ndarray:
    acc = dtypes.to_f32(values[0]).astype(np.float32)
    fn = {"add": np.add, "minimum": np.minimum, "maximum": np.maximum}[token.name]
    for v in values[1:]:
        acc = fn(acc, dtypes.to_f32(v).astype(np.float32))
    return acc


def _payload(site: Any, **lists: list[NkiTensor]) -> dict[str, Any]:
    """What a rank brings to a meeting: its tensors, their accessors (made in its own context)."""
    out: dict[str, Any] = {"site": site}
    for name, tensors in lists.items():
        out[name] = tensors
        out[name + "_ops"] = [t.operand(site) for t in tensors]
    return out


def _agree(op: str, arrived: dict[int, Any], fields: Sequence[str]) -> None:
    """Every rank called ``op`` with the same arguments, tensor shapes and dtypes as the first."""
    first_rank = min(arrived)
    first = arrived[first_rank]
    for rank, part in sorted(arrived.items()):
        if part["op"] != first["op"]:
            raise LanguageError(
                "collective-unmatched",
                f"rank {rank} calls {part['op']} where rank {first_rank} calls {first['op']} "
                "(the ranks of a group must call the same collectives in the same order)",
                part["site"],
            )
        for name in fields:
            mine, theirs = part[name], first[name]
            if isinstance(mine, list) and mine and isinstance(mine[0], NkiTensor):
                mine = [(tuple(t.shape), t.dtype) for t in mine]
                theirs = [(tuple(t.shape), t.dtype) for t in theirs]
            if mine != theirs:
                raise LanguageError(
                    "collective-unmatched",
                    f"{op}: rank {rank} passes {name}={mine} where rank {first_rank} passes {theirs}",
                    part["site"],
                )


def _emit(op: str, launch: _Launch, part: dict[str, Any], reads: list[NkiTensor], writes: list[Any]) -> None:
    """Record in the rank's own program the instruction writing ``writes`` ((tensor, values))."""
    ctx = launch.sched.ctxs[part["rank"]] if launch.sched is not None else launch.ctx
    site = part["site"]
    targets = [(t.operand(site), t.shape, t.dtype, values) for t, values in writes]

    def run() -> None:
        for operand, shape, name, values in targets:
            operand.write(dtypes.cast(np.asarray(values).reshape(shape), name))

    nbytes = sum(t.size * dtypes.itemsize(t.dtype) for t, _ in writes)
    meta = {"bytes": nbytes, "src": "collective", "dst": "collective", "rank": part["rank"]}
    ctx.emit(op, "dma", site, reads, [t for t, _ in writes], run, meta)


def _collective(
    op: str,
    key: Any,
    launch: _Launch,
    ranks: tuple[int, ...],
    payload: dict[str, Any],
    site: Any,
    agree: Sequence[str],
    compute: Callable[[dict[int, Any]], None],
) -> None:
    payload.update(op=op, rank=launch.rank)
    # The results are computed from the sources as they are when the ranks meet and recorded as
    # values: a program holding a collective is traced again on its next call (a launch of one
    # rank, ``run_kernel`` with a group ``[[0]]``, would otherwise replay the first call's data).
    launch.ctx.engine_state["data_dependent"] = True
    arrived = launch.meet(op, key, payload, site, ranks)
    if arrived is None:
        return  # the last rank to arrive performed the collective for every member
    _agree(op, arrived, agree)
    compute(arrived)


# ---------------------------------------------------------------- the operations


def rank_id(name: str | None = None) -> RankRegister:
    """The current rank (0 in a launch without ranks)."""
    _begin()
    return RankRegister(_Launch().rank)


def all_reduce(
    srcs: Any, dsts: Any, replica_group: Any, op: Any, priority: Any = None, name: str | None = None
) -> None:
    """Every rank of the group receives the ``op`` reduction of the group's sources."""
    _, site = _begin()
    what = "all_reduce"
    s, d, _ = _operands(what, site, srcs, dsts, hbm_only=False, single=False)
    token = op_token(op, "op", site, REDUCE_OPS)
    _priority(priority, what, site)
    for a, b in zip(s, d):
        _expect_shape(what, site, b, tuple(a.shape), "the source's shape")
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)

    def compute(arrived: dict[int, Any]) -> None:
        results = [_reduce(token, [_read(arrived[r]["srcs_ops"][i]) for r in ranks]) for i in range(len(s))]
        for r in ranks:
            part = arrived[r]
            _emit(what, launch, part, part["srcs"], list(zip(part["dsts"], results)))

    payload = _payload(site, srcs=s, dsts=d)
    payload["reduce"] = token.name
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts", "reduce"), compute)


def all_gather(
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    collective_dim: Any,
    priority: Any = None,
    name: str | None = None,
) -> None:
    """The group's sources concatenated along ``collective_dim`` (rank-list order), on every rank."""
    _, site = _begin()
    what = "all_gather"
    s, d, hbm = _operands(what, site, srcs, dsts, hbm_only=False, single=False)
    _priority(priority, what, site)
    dim = _dim(collective_dim, what, site, (0,) if hbm else (0, 1))
    if not hbm:
        for t in s + d:
            if len(t.shape) != 2:
                raise ShapeError(
                    "collective-sbuf-2d", f"{what}: SBUF collectives take 2-D tiles: {t.describe()}", site
                )
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)
    for a, b in zip(s, d):
        shape = list(a.shape)
        shape[dim] *= len(ranks)
        _expect_shape(what, site, b, tuple(shape), f"the source's with dim {dim} times {len(ranks)} ranks")

    def compute(arrived: dict[int, Any]) -> None:
        results = [
            np.concatenate([_read(arrived[r]["srcs_ops"][i]) for r in ranks], axis=dim) for i in range(len(s))
        ]
        for r in ranks:
            part = arrived[r]
            _emit(what, launch, part, part["srcs"], list(zip(part["dsts"], results)))

    payload = _payload(site, srcs=s, dsts=d)
    payload["dim"] = dim
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts", "dim"), compute)


def reduce_scatter(
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    collective_dim: Any,
    op: Any,
    priority: Any = None,
    name: str | None = None,
) -> None:
    """The ``op`` reduction of the group's sources, split along dim 0: chunk k to the k-th rank."""
    _, site = _begin()
    what = "reduce_scatter"
    s, d, _ = _operands(what, site, srcs, dsts, hbm_only=False, single=False)
    token = op_token(op, "op", site, REDUCE_OPS)
    _priority(priority, what, site)
    _dim(collective_dim, what, site, (0,))
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)
    n = len(ranks)
    for a, b in zip(s, d):
        if a.shape[0] % n:
            raise ShapeError(
                "collective-shape",
                f"{what}: dim 0 of source {a.describe()} does not split into {n} equal chunks",
                site,
            )
        _expect_shape(what, site, b, (a.shape[0] // n, *a.shape[1:]), f"the source's dim 0 / {n} ranks")

    def compute(arrived: dict[int, Any]) -> None:
        sums = [_reduce(token, [_read(arrived[r]["srcs_ops"][i]) for r in ranks]) for i in range(len(s))]
        for k, r in enumerate(ranks):
            part = arrived[r]
            chunks = [np.split(total, n, axis=0)[k] for total in sums]
            _emit(what, launch, part, part["srcs"], list(zip(part["dsts"], chunks)))

    payload = _payload(site, srcs=s, dsts=d)
    payload["reduce"] = token.name
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts", "reduce"), compute)


def all_to_all(
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    collective_dim: Any,
    priority: Any = None,
    name: str | None = None,
) -> None:
    """Chunk j (along dim 0) of the i-th rank's source becomes chunk i of the j-th rank's destination."""
    _, site = _begin()
    what = "all_to_all"
    s, d, _ = _operands(what, site, srcs, dsts, hbm_only=True, single=False)
    _priority(priority, what, site)
    _dim(collective_dim, what, site, (0,))
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)
    n = len(ranks)
    for a, b in zip(s, d):
        if a.shape[0] % n:
            raise ShapeError(
                "collective-shape",
                f"{what}: dim 0 of source {a.describe()} does not split into {n} equal chunks",
                site,
            )
        _expect_shape(what, site, b, tuple(a.shape), "the source's shape")

    def compute(arrived: dict[int, Any]) -> None:
        split = {r: [np.split(_read(op_), n, axis=0) for op_ in arrived[r]["srcs_ops"]] for r in ranks}
        for j, r in enumerate(ranks):
            part = arrived[r]
            outs = [np.concatenate([split[q][i][j] for q in ranks], axis=0) for i in range(len(s))]
            _emit(what, launch, part, part["srcs"], list(zip(part["dsts"], outs)))

    payload = _payload(site, srcs=s, dsts=d)
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts"), compute)


def collective_permute(
    srcs: Any, dsts: Any, source_target_pairs: Any, priority: Any = None, name: str | None = None
) -> None:
    """The source of each pair's first rank goes to the destination of its second."""
    _, site = _begin()
    what = "collective_permute"
    s, d, _ = _operands(what, site, srcs, dsts, hbm_only=True, single=True)
    _priority(priority, what, site)
    launch = _Launch()
    try:
        pairs = [(int(a), int(b)) for a, b in source_target_pairs]
    except (TypeError, ValueError):
        raise TypeError(
            f"{what}: source_target_pairs must be a list of (source, target) rank pairs, got "
            f"{source_target_pairs!r}"
        ) from None
    targets = [t for _, t in pairs]
    for a, b in pairs:
        for r in (a, b):
            if not 0 <= r < launch.ranks:
                raise LanguageError(
                    "collective-replica-group",
                    f"{what}: pair ({a}, {b}) names rank {r}; the launch has {launch.ranks} rank(s)",
                    site,
                )
        if targets.count(b) > 1:
            raise LanguageError(
                "collective-permute-pairs", f"{what}: rank {b} is the target of more than one pair", site
            )
    if all(launch.rank not in p for p in pairs):
        return  # this rank neither sends nor receives
    ranks = tuple(sorted({r for p in pairs for r in p}))
    _expect_shape(what, site, d[0], tuple(s[0].shape), "the source's shape")

    def compute(arrived: dict[int, Any]) -> None:
        values = {r: _read(arrived[r]["srcs_ops"][0]) for r in ranks}
        for a, b in pairs:
            part = arrived[b]
            _emit(what, launch, part, part["srcs"], [(part["dsts"][0], values[a])])

    payload = _payload(site, srcs=s, dsts=d)
    payload["pairs"] = pairs
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts", "pairs"), compute)


def _channels(what: str, site: Any, channel_ids: Any, *lists: Any) -> list[int]:
    ids = [int(c) for c in channel_ids]
    if ids != list(range(len(ids))) or not ids:
        raise LanguageError(
            "collective-channels",
            f"{what}: channel_ids={list(channel_ids)} must be consecutive integers from 0",
            site,
        )
    if len(ids) > MAX_CHANNELS:
        raise LanguageError(
            "collective-channels", f"{what}: {len(ids)} channels; at most {MAX_CHANNELS}", site
        )
    for lst in lists:
        if not isinstance(lst, (list, tuple)) or len(lst) != len(ids):
            raise ShapeError(
                "collective-channels",
                f"{what}: one tensor list per channel ({len(ids)} channels), got {lst!r}",
                site,
            )
    return ids


def _ring(
    what: str,
    srcs0_by_channel: Any,
    srcs1_by_channel: Any,
    dsts_by_channel: Any,
    replica_group: Any,
    op: Any,
    channel_ids: Any,
    priority: Any,
) -> None:
    _, site = _begin()
    lists = [x for x in (srcs0_by_channel, srcs1_by_channel, dsts_by_channel) if x is not None]
    ids = _channels(what, site, channel_ids, *lists)
    s0 = [_tensors(c, what, "srcs", site) for c in srcs0_by_channel]
    s1 = [_tensors(c, what, "srcs", site) for c in srcs1_by_channel] if srcs1_by_channel is not None else None
    d = [_tensors(c, what, "dsts", site) for c in dsts_by_channel]
    for i in range(len(ids)):
        ins = [s0[i]] + ([s1[i]] if s1 is not None else [])
        _memory(what, site, False, True, *ins, d[i])
        for src in ins:
            _pairs(what, site, src, d[i])
            _expect_shape(what, site, d[i][0], tuple(src[0].shape), "the source's shape")
    token = op_token(op, "op", site, REDUCE_OPS) if s1 is not None else None
    _priority(priority, what, site)
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)
    n = len(ranks)

    def compute(arrived: dict[int, Any]) -> None:
        sent = {}
        for r in ranks:
            part = arrived[r]
            for i in range(len(ids)):
                a = _read(part["s0_ops"][i])
                sent[r, i] = a if token is None else _reduce(token, [a, _read(part["s1_ops"][i])])
        for k, r in enumerate(ranks):
            part = arrived[r]
            prev = ranks[(k - 1) % n]
            reads = [t for c in part["s0"] for t in c] + [t for c in (part["s1"] or []) for t in c]
            writes = [(part["d"][i][0], sent[prev, i]) for i in range(len(ids))]
            _emit(what, launch, part, reads, writes)

    payload: dict[str, Any] = {
        "site": site,
        "s0": s0,
        "s1": s1,
        "d": d,
        "s0_ops": [c[0].operand(site) for c in s0],
        "s1_ops": [c[0].operand(site) for c in s1] if s1 is not None else None,
        "shapes": [(tuple(c[0].shape), c[0].dtype) for c in s0],
        "reduce": token.name if token is not None else None,
    }
    _collective(what, (ranks, tuple(ids)), launch, ranks, payload, site, ("shapes", "reduce"), compute)


def collective_permute_implicit(
    srcs_by_channel: Any,
    dsts_by_channel: Any,
    replica_group: Any,
    channel_ids: Any = (0,),
    priority: Any = None,
    name: str | None = None,
) -> None:
    """Ring step: each rank sends to its successor in its rank list, receives its predecessor's."""
    _ring("collective_permute_implicit", srcs_by_channel, None, dsts_by_channel, replica_group,
          None, channel_ids, priority)  # fmt: skip


def collective_permute_implicit_reduce(
    srcs0_by_channel: Any,
    srcs1_by_channel: Any,
    dsts_by_channel: Any,
    replica_group: Any,
    op: Any,
    channel_ids: Any = (0,),
    priority: Any = None,
    name: str | None = None,
) -> None:
    """Ring step with reduction: each rank sends ``op(srcs0, srcs1)`` to its successor."""
    _ring("collective_permute_implicit_reduce", srcs0_by_channel, srcs1_by_channel,
          dsts_by_channel, replica_group, op, channel_ids, priority)  # fmt: skip


def collective_permute_implicit_current_processing_rank_id(
    iteration_id: Any, replica_group: Any, channel_id: Any = 0, name: str | None = None
) -> RankRegister:
    """The rank whose data this rank holds after ``iteration_id`` ring steps (itself at 0)."""
    _, site = _begin()
    what = "collective_permute_implicit_current_processing_rank_id"
    if not 0 <= int(channel_id) < MAX_CHANNELS:
        raise LanguageError(
            "collective-channels", f"{what}: channel_id={channel_id!r} is not in 0-{MAX_CHANNELS - 1}", site
        )
    step = iteration_id.read(site) if isinstance(iteration_id, VirtualRegister) else iteration_id
    launch = _Launch()
    ranks = launch.group(replica_group, what, site)
    k = ranks.index(launch.rank)
    return RankRegister(ranks[(k - int(step)) % len(ranks)])


# ---------------------------------------------------------------- variable-length (``_v``) forms
#: Logical ranks of one trn2 chip at LNC=2: all_gather_v's "exactly 4 ranks (intra-chip)"
#: (nki.collectives.all_gather_v, NKI 0.6.0). A Trainium2 chip has 8 physical NeuronCores, 4
#: logical ones at LNC=2 (AWS's Trainium2 architecture and Logical NeuronCore configuration
#: pages; docs/hardware.md); ranks 4c..4c+3 are taken as chip c.
CHIP_RANKS_LNC2 = 4


def _metadata(
    what: str, site: Any, metadata_tensor: Any, n: int, recv_counts_known: bool, has_rdispls: bool
) -> tuple[NkiTensor, int]:
    """The checked ``metadata_tensor`` of a ``_v`` collective and its number of rows.

    The pages (NKI 0.4.0-0.6.0): uint32, ``(rows, n)`` in HBM or ``(1, rows, n)`` in SBUF (one
    partition), rows 3, or 4 with ``has_rdispls``. The NKI 0.3.0 page gives "(2-4, world_size)"
    with row 2 present when ``recv_counts_known``: under 0.3.0 two rows are accepted when neither
    flag is set (nothing is written back then).
    """
    from trncore.sim import versions

    meta = as_tensor(metadata_tensor, what, "metadata_tensor", site)
    if meta.dtype != "uint32":
        raise DtypeError("collective-v-metadata", f"{what}: metadata_tensor must be uint32, got "
                         f"{meta.describe()}", site)  # fmt: skip
    rows = 4 if has_rdispls else 3
    allowed = {rows}
    if not versions.at_least("0.4.0") and not has_rdispls and not recv_counts_known:
        allowed.add(2)
    shapes: dict[tuple[int, ...], int]
    if meta.buffer.is_hbm:
        shapes = {(r, n): r for r in allowed}
    elif meta.buffer.name == "sbuf":
        shapes = {(1, r, n): r for r in allowed}
    else:
        raise BufferError("collective-v-metadata", f"{what}: metadata_tensor must be in HBM or "
                          f"SBUF, got {meta.describe()}", site)  # fmt: skip
    if tuple(meta.shape) not in shapes:
        want = " or ".join(str(list(x)) for x in shapes)
        raise ShapeError("collective-v-metadata", f"{what}: metadata_tensor must have shape {want} "
                         f"(rows x {n} ranks of the list), got {meta.describe()}", site)  # fmt: skip
    return meta, shapes[tuple(meta.shape)]


def _flag(value: Any, what: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be a bool, got {value!r}")
    return bool(value)


def _v_bounds(what: str, site: Any, rank: int, text: str) -> None:
    from trncore.sim.errors import BoundsError

    raise BoundsError("collective-v-bounds", f"{what}: rank {rank}'s metadata {text}", site)


def _v_exchange(
    what: str,
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    metadata_tensor: Any,
    recv_counts_known: Any,
    has_rdispls: Any,
    priority: Any,
    gather: bool,
) -> None:
    """all_to_all_v (``gather`` False) and all_gather_v (True): flat element buffers, counts and
    displacements read from each rank's metadata when the ranks meet."""
    _, site = _begin()
    known = _flag(recv_counts_known, what, "recv_counts_known")
    rdispls = _flag(has_rdispls, what, "has_rdispls")
    s, d, _ = _operands(what, site, srcs, dsts, hbm_only=True, single=True)
    _priority(priority, what, site)
    launch = _Launch()
    ctx = launch.ctx
    if rdispls:
        if gather:
            raise LanguageError("collective-v-rdispls", f"{what}: has_rdispls=True is not "
                                "supported (the page's current limitations)", site)  # fmt: skip
        raise TargetError("collective-v-rdispls", f"{what}: has_rdispls=True needs a NeuronSwitch "
                          "system (trn3); trn1/trn2 place each chunk at its equal slot", site)  # fmt: skip
    ranks = launch.group(replica_group, what, site)
    n = len(ranks)
    if gather:
        if ctx.rules.nc_version < 3:
            raise TargetError("collective-v-lnc", f"{what} supports LNC=2 only, which NeuronCore-v2 "
                              "(trn1) does not have", site)  # fmt: skip
        if launch.lnc != 2:
            raise LanguageError("collective-v-lnc", f"{what} supports LNC=2 launches only; this "
                                f"launch has LNC={launch.lnc}", site)  # fmt: skip
        if n != CHIP_RANKS_LNC2 or len({r // CHIP_RANKS_LNC2 for r in ranks}) != 1:
            raise LanguageError("collective-v-group", f"{what}: each rank list must be the "
                                f"{CHIP_RANKS_LNC2} ranks of one chip (intra-chip), got "
                                f"{list(ranks)}", site)  # fmt: skip
    else:
        per_node = int(ctx.engine_state.get("ranks_per_node") or launch.ranks)
        nodes = [r // per_node for r in ranks]
        if len(set(nodes)) != n or len({r % per_node for r in ranks}) != 1:
            raise LanguageError("collective-v-group", f"{what}: on trn1/trn2 each rank list must "
                                "hold same-indexed ranks of different nodes (inter-node); "
                                f"{list(ranks)} with {per_node} rank(s) per node", site)  # fmt: skip
    meta, rows = _metadata(what, site, metadata_tensor, n, known, rdispls)
    dst = d[0]
    if dst.size % n:
        raise ShapeError("collective-v-slots", f"{what}: destination {dst.describe()} does not "
                         f"split into {n} equal slots, one per rank of the list", site)  # fmt: skip
    slot = dst.size // n

    def compute(arrived: dict[int, Any]) -> None:
        tables = {r: _read(arrived[r]["meta_ops"][0]).reshape(-1, n).astype(np.int64) for r in ranks}
        flats = {r: _read(arrived[r]["srcs_ops"][0]).reshape(-1) for r in ranks}
        chunks: dict[tuple[int, int], np.ndarray] = {}  # (sender, receiver) -> elements
        for i, r in enumerate(ranks):
            site_r = arrived[r]["site"]
            for j in range(n):
                col = 0 if gather else j
                count, displ = int(tables[r][0, col]), int(tables[r][1, col])
                if displ + count > flats[r].size:
                    _v_bounds(what, site_r, r, f"sends elements {displ}..{displ + count} of a "
                              f"{flats[r].size}-element source")  # fmt: skip
                if count > slot:
                    _v_bounds(what, site_r, r, f"sends {count} elements to a slot of {slot} "
                              f"(destination {dst.size} elements / {n} ranks)")  # fmt: skip
                chunks[i, j] = flats[r][displ : displ + count]
        for j, r in enumerate(ranks):
            part = arrived[r]
            out = _read(part["dsts_ops"][0]).reshape(-1)
            received = np.array([chunks[i, j].size for i in range(n)], dtype=np.uint32)
            for i in range(n):
                piece = chunks[i, j]
                out[i * slot : i * slot + piece.size] = piece
            # the accesses the schedule and the LNC=2 race rule see: rows 0-1 (counts,
            # displacements) read, row 2 (counts received) written back unless recv_counts_known
            m = part["meta"][0]
            hbm = m.buffer.is_hbm
            writes = [(part["dsts"][0], out)]
            if not known and rows > 2:
                row2 = m[2:3] if hbm else m[:, 2:3]
                writes.append((row2, received.reshape(row2.shape)))
            _emit(what, launch, part, part["srcs"] + [m[0:2] if hbm else m[:, 0:2]], writes)

    payload = _payload(site, srcs=s, dsts=d, meta=[meta])
    payload["flags"] = (known, rdispls)
    _collective(what, ranks, launch, ranks, payload, site, ("srcs", "dsts", "meta", "flags"), compute)


def all_to_all_v(
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    metadata_tensor: Any,
    recv_counts_known: Any = False,
    has_rdispls: Any = False,
    priority: Any = None,
    name: str | None = None,
) -> None:
    """Variable-length all-to-all over flat element buffers (nki.collectives.all_to_all_v, NKI
    0.3.0; layout and limits from the SDK 2.30-2.32 pages).

    Rank i of the list sends ``src[send_displs[j] : send_displs[j] + send_counts[j]]`` (metadata
    rows 0 and 1, column j) to rank j, which writes it at its slot ``i * dst.size / n``; row 2 of
    the receiver's metadata gets the counts received, unless ``recv_counts_known``. On trn1/trn2
    a rank list holds same-indexed ranks of different nodes (``run_ranks(ranks_per_node=)``);
    ``has_rdispls=True`` needs a NeuronSwitch system (trn3).
    """
    _v_exchange("all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
                has_rdispls, priority, gather=False)  # fmt: skip


def all_gather_v(
    srcs: Any,
    dsts: Any,
    replica_group: Any,
    metadata_tensor: Any,
    recv_counts_known: Any = False,
    has_rdispls: Any = False,
    priority: Any = None,
    name: str | None = None,
) -> None:
    """Variable-length all-gather over flat element buffers (nki.collectives.all_gather_v, NKI
    0.6.0): each rank broadcasts ``src[send_displ : send_displ + send_count]`` (column 0 of
    metadata rows 0 and 1) to every rank of its list, which writes sender i's chunk at slot
    ``i * dst.size / n``; row 2 gets the counts received unless ``recv_counts_known``. The page's
    limits: LNC=2 launches, rank lists of the 4 ranks of one chip, ``has_rdispls=False``.
    """
    from trncore.sim import versions

    versions.require("nki.collectives.all_gather_v")
    _v_exchange("all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
                has_rdispls, priority, gather=True)  # fmt: skip
