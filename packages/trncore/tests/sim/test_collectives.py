"""Multi-rank ``nki.collectives`` on trncore.sim: our own kernels in the NKI library's styles.

Semantics from AWS's ``nki.collectives`` API reference (NKI 0.3.0 / SDK 2.29; ``priority`` from
SDK 2.30): all_reduce, all_gather (HBM dim 0; SBUF 2-D, dim 0 or 1), reduce_scatter (dim 0),
all_to_all (HBM, dim 0), collective_permute (HBM, one tensor), the implicit ring permutes and
rank_id, on ReplicaGroups of disjoint rank lists. Each kernel runs as several ranks
(``run_ranks``), at LNC=1 and LNC=2, against NumPy references computed from the inputs; each
documented rule's invalid neighbour is caught at the kernel's line.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim import nisa, nl
from trncore.sim.collectives import ReplicaGroup
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    LanguageError,
    ShapeError,
    TargetError,
)
from trncore.sim.runner import run_kernel, run_ranks
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator


# ---------------------------------------------------------------- kernels (HBM, nkilib's style)


def reduce_hbm(x, group, op_name="add"):
    """Copy the input to shared HBM, reduce it across the group, return the result."""
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="src")
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
    nisa.dma_copy(dst=src, src=x)
    ncc.all_reduce(dsts=[dst], srcs=[src], op=getattr(nl, op_name), replica_group=group)  # HERE
    return dst


def gather_hbm(x, group, ranks):
    rows, cols = x.shape
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray((rows * ranks, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_gather(dsts=[dst], srcs=[src], replica_group=group, collective_dim=0)  # HERE
    return dst


def scatter_hbm(x, group, ranks):
    rows, cols = x.shape
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray((rows // ranks, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.reduce_scatter(dsts=[dst], srcs=[src], op=nl.add, replica_group=group, collective_dim=0)
    return dst


def exchange_hbm(x, group):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_to_all(dsts=[dst], srcs=[src], replica_group=group, collective_dim=0)
    return dst


def coalesced_reduce(x, y, group):
    """Two tensors reduced in one call (coalesced, HBM)."""
    outs = []
    for t in (x, y):
        outs.append(nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm))
    srcs = [nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm) for t in (x, y)]
    for s, t in zip(srcs, (x, y)):
        nisa.dma_copy(dst=s, src=t)
    ncc.all_reduce(dsts=outs, srcs=srcs, op=nl.maximum, replica_group=group)
    return outs[0], outs[1]


def pick_by_rank(table):
    """rank_id() as the scalar offset of an indirect DMA: each rank copies its own slice."""
    _, rows, cols = table.shape
    out = nl.ndarray((rows, cols), dtype=table.dtype, buffer=nl.shared_hbm)
    me = ncc.rank_id()
    nisa.dma_copy(dst=out, src=table.ap(pattern=[[cols, rows], [1, cols]], scalar_offset=me, indirect_dim=0))
    return out


# ---------------------------------------------------------------- kernels (SBUF tiles, LNC split)


def gather_tiles(x, group, ranks):
    """Each logical core gathers its own row tiles along the free dim (SBUF to SBUF)."""
    rows, cols = x.shape
    tile = 32
    cores = nl.num_programs(axes=0) if nl.program_ndim() != 0 else 1
    me = nl.program_id(axis=0) if nl.program_ndim() != 0 else 0
    per_core = rows // tile // cores
    out = nl.ndarray((rows, cols * ranks), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(per_core):
        t = me * per_core + i
        mine = nl.ndarray((tile, cols), dtype=x.dtype, buffer=nl.sbuf)
        got = nl.ndarray((tile, cols * ranks), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[t * tile : (t + 1) * tile, :])
        ncc.all_gather(dsts=[got], srcs=[mine], replica_group=group, collective_dim=1)
        nisa.dma_copy(dst=out[t * tile : (t + 1) * tile, :], src=got)
    return out


def ring_pass(x, group, steps):
    """``steps`` implicit ring permutes of the input (each rank receives its predecessor's)."""
    cur = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nxt = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=cur, src=x)
    for _ in range(steps):
        ncc.collective_permute_implicit(srcs_by_channel=[[cur]], dsts_by_channel=[[nxt]], replica_group=group)
        nisa.dma_copy(dst=cur, src=nxt)
    return cur


def swap_pairs(x, pairs):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    nisa.dma_copy(dst=dst, src=x)
    ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=pairs)
    return dst


def _inputs(ranks: int, shape=(8, 16), dtype=np.float32, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(ranks)]


# ---------------------------------------------------------------- the operations


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("op_name", ["add", "maximum", "minimum"])
def test_all_reduce_matches_numpy(lnc: int, op_name: str) -> None:
    xs = _inputs(4)
    group = ReplicaGroup([[0, 1, 2, 3]])
    outs = run_ranks(
        reduce_hbm, [{"x": x, "group": group, "op_name": op_name} for x in xs], lnc=lnc, target="trn2"
    )
    want = getattr(np, op_name).reduce(np.stack(xs), axis=0)
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_all_reduce_bf16_rounds_once() -> None:
    xs = _inputs(2, dtype=ml_dtypes.bfloat16)
    group = ReplicaGroup([[0, 1]])
    outs = run_ranks(reduce_hbm, [{"x": x, "group": group} for x in xs], lnc=1, target="trn2")
    want = (xs[0].astype(np.float32) + xs[1].astype(np.float32)).astype(ml_dtypes.bfloat16)
    for out in outs:
        assert out.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_replica_subgroups_reduce_separately() -> None:
    xs = _inputs(4)
    group = ReplicaGroup([[0, 2], [1, 3]])
    outs = run_ranks(reduce_hbm, [{"x": x, "group": group} for x in xs], lnc=2, target="trn2")
    np.testing.assert_allclose(outs[0], xs[0] + xs[2], rtol=1e-6)
    np.testing.assert_allclose(outs[2], xs[0] + xs[2], rtol=1e-6)
    np.testing.assert_allclose(outs[1], xs[1] + xs[3], rtol=1e-6)
    np.testing.assert_allclose(outs[3], xs[1] + xs[3], rtol=1e-6)


@pytest.mark.parametrize("lnc", [1, 2])
def test_all_gather_reduce_scatter_all_to_all(lnc: int) -> None:
    ranks = 4
    xs = _inputs(ranks)
    group = ReplicaGroup([list(range(ranks))])
    gathered = run_ranks(gather_hbm, [{"x": x, "group": group, "ranks": ranks} for x in xs], lnc=lnc)
    for out in gathered:
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=0))
    scattered = run_ranks(scatter_hbm, [{"x": x, "group": group, "ranks": ranks} for x in xs], lnc=lnc)
    total = np.sum(np.stack(xs).astype(np.float64), axis=0)
    for r, out in enumerate(scattered):
        np.testing.assert_allclose(out, total[r * 2 : (r + 1) * 2], rtol=1e-5, atol=1e-6)
    exchanged = run_ranks(exchange_hbm, [{"x": x, "group": group} for x in xs], lnc=lnc)
    for j, out in enumerate(exchanged):
        np.testing.assert_array_equal(out, np.concatenate([xs[i][2 * j : 2 * j + 2] for i in range(ranks)]))


def test_gather_order_follows_the_rank_list() -> None:
    xs = _inputs(2)
    group = ReplicaGroup([[1, 0]])
    outs = run_ranks(gather_hbm, [{"x": x, "group": group, "ranks": 2} for x in xs], lnc=1)
    np.testing.assert_array_equal(outs[0], np.concatenate([xs[1], xs[0]]))


def test_coalesced_hbm_reduce() -> None:
    xs, ys = _inputs(2, seed=1), _inputs(2, shape=(4, 4), seed=2)
    group = ReplicaGroup([[0, 1]])
    outs = run_ranks(coalesced_reduce, [{"x": x, "y": y, "group": group} for x, y in zip(xs, ys)], lnc=1)
    for a, b in outs:
        np.testing.assert_array_equal(a, np.maximum(xs[0], xs[1]))
        np.testing.assert_array_equal(b, np.maximum(ys[0], ys[1]))


@pytest.mark.parametrize("lnc", [1, 2])
def test_sbuf_gather_split_between_the_cores(lnc: int) -> None:
    ranks = 2
    xs = _inputs(ranks, shape=(128, 8))
    group = ReplicaGroup([[0, 1]])
    outs = run_ranks(gather_tiles, [{"x": x, "group": group, "ranks": ranks} for x in xs], lnc=lnc)
    for out in outs:
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


@pytest.mark.parametrize("lnc", [1, 2])
def test_rank_id_selects_each_ranks_slice(lnc: int) -> None:
    table = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
    outs = run_ranks(pick_by_rank, [{"table": table}] * 2, lnc=lnc)
    for r, out in enumerate(outs):
        np.testing.assert_array_equal(out, table[r])
    # a launch without ranks is rank 0 of one
    np.testing.assert_array_equal(run_kernel(pick_by_rank, [table]), table[0])


def test_permutes_and_ring() -> None:
    xs = _inputs(4)
    swapped = run_ranks(swap_pairs, [{"x": x, "pairs": ((0, 1), (1, 0), (2, 3))} for x in xs], lnc=1)
    np.testing.assert_array_equal(swapped[0], xs[1])
    np.testing.assert_array_equal(swapped[1], xs[0])
    np.testing.assert_array_equal(swapped[3], xs[2])
    np.testing.assert_array_equal(swapped[2], xs[2])  # not a target: keeps its own copy
    group = ReplicaGroup([[0, 1, 2, 3]])
    passed = run_ranks(ring_pass, [{"x": x, "group": group, "steps": 3} for x in xs], lnc=1)
    for r, out in enumerate(passed):  # three steps forward: the data of rank r - 3 = r + 1
        np.testing.assert_array_equal(out, xs[(r + 1) % 4])


def whose_data(x, group, step):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    table = nl.ndarray((1, 4), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=table, src=x)
    r = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=step, replica_group=group)
    nisa.dma_copy(dst=out, src=table.ap(pattern=[[1, 1], [1, 1]], scalar_offset=r, indirect_dim=1))
    return out


def test_current_processing_rank_id_walks_back_the_ring() -> None:
    ident = np.arange(4, dtype=np.int32).reshape(1, 4)
    group = ReplicaGroup([[0, 1, 2, 3]])
    for step in range(4):
        outs = run_ranks(whose_data, [{"x": ident, "group": group, "step": step}] * 4, lnc=1)
        assert [int(o[0, 0]) for o in outs] == [(r - step) % 4 for r in range(4)]


def reduce_then_ring(x, group):
    """all_reduce then implicit_reduce: src0 + src1 goes to the successor."""
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.collective_permute_implicit_reduce(
        srcs0_by_channel=[[src]],
        srcs1_by_channel=[[x]],
        dsts_by_channel=[[dst]],
        replica_group=group,
        op=nl.add,
    )
    return dst


def test_implicit_reduce_sends_the_reduction_to_the_successor() -> None:
    xs = _inputs(3)
    group = ReplicaGroup([[0, 1, 2]])
    outs = run_ranks(reduce_then_ring, [{"x": x, "group": group} for x in xs], lnc=2)
    for r, out in enumerate(outs):
        np.testing.assert_allclose(out, 2 * xs[(r - 1) % 3], rtol=1e-6)


def swap_then_gather(x, group):
    """LNC=2 in each rank: the cores swap halves (sendrecv), then each core gathers its half
    across the ranks (all_gather on SBUF, dim 0): both kinds of meeting in one launch."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    other = 1 - me
    mine = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[me * half : (me + 1) * half, :])
    nisa.sendrecv(src=mine, dst=got, send_to_rank=other, recv_from_rank=other, pipe_id=0)
    every = nl.ndarray((half * 2, cols), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather(dsts=[every], srcs=[got], replica_group=group, collective_dim=0)
    out = nl.ndarray((2, rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in range(2):
        nisa.dma_copy(dst=out[r, me * half : (me + 1) * half, :], src=every[r * half : (r + 1) * half, :])
    return out


def test_lnc2_exchanges_and_collectives_in_one_launch() -> None:
    xs = _inputs(2, shape=(16, 8))
    group = ReplicaGroup([[0, 1]])
    outs = run_ranks(swap_then_gather, [{"x": x, "group": group} for x in xs], lnc=2, target="trn2")
    # core c of each rank holds the other core's half; its gather puts rank r's at out[r] rows of c
    want = np.stack([np.concatenate([x[8:], x[:8]]) for x in xs])
    for out in outs:
        np.testing.assert_array_equal(out, want)


def test_runs_are_deterministic() -> None:
    xs = _inputs(4, shape=(16, 16), seed=5)
    group = ReplicaGroup([[0, 1, 2, 3]])
    a = run_ranks(reduce_hbm, [{"x": x, "group": group} for x in xs], lnc=2)
    b = run_ranks(reduce_hbm, [{"x": x, "group": group} for x in xs], lnc=2)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u.view(np.uint32), v.view(np.uint32))


# ---------------------------------------------------------------- invalid neighbours


def gather_bad(x, group, kind):
    rows, cols = x.shape
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    psum = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    big = nl.ndarray((rows * 2, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    wide = nl.ndarray((rows, cols * 2), dtype=x.dtype, buffer=nl.shared_hbm)
    half = nl.ndarray((rows * 2, cols), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t2 = nl.ndarray((rows, cols * 2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    nisa.dma_copy(dst=tile, src=x)
    if kind == "dim1-hbm":
        ncc.all_gather(dsts=[wide], srcs=[src], replica_group=group, collective_dim=1)  # HERE
    elif kind == "mixed":
        ncc.all_gather(dsts=[big], srcs=[tile], replica_group=group, collective_dim=0)  # HERE
    elif kind == "psum":
        ncc.all_gather(dsts=[big], srcs=[psum], replica_group=group, collective_dim=0)  # HERE
    elif kind == "shape":
        ncc.all_gather(dsts=[wide], srcs=[src], replica_group=group, collective_dim=0)  # HERE
    elif kind == "dtype":
        ncc.all_gather(dsts=[half], srcs=[src], replica_group=group, collective_dim=0)  # HERE
    elif kind == "coalesced-sbuf":
        ncc.all_gather(dsts=[t2, t2], srcs=[tile, tile], replica_group=group, collective_dim=1)  # HERE
    elif kind == "sbuf-3d":
        cube = nl.ndarray((rows, 2, cols), dtype=x.dtype, buffer=nl.sbuf)
        cubes = nl.ndarray((rows, 4, cols), dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_gather(dsts=[cubes], srcs=[cube], replica_group=group, collective_dim=1)  # HERE
    elif kind == "priority":
        ncc.all_gather(dsts=[big], srcs=[src], replica_group=group, collective_dim=0, priority=0)  # HERE
    else:
        ncc.all_gather(dsts=[big], srcs=[src], replica_group=group, collective_dim=0)  # HERE
    return big


@pytest.mark.parametrize(
    "kind,error,rule",
    [
        ("dim1-hbm", ShapeError, "collective-dim"),
        ("mixed", BufferError, "collective-memory"),
        ("psum", BufferError, "collective-memory"),
        ("shape", ShapeError, "collective-shape"),
        ("dtype", DtypeError, "collective-dtype"),
        ("coalesced-sbuf", ShapeError, "collective-coalesced"),
        ("sbuf-3d", ShapeError, "collective-sbuf-2d"),
        ("priority", TargetError, "collective-priority"),
    ],
)
def test_gather_rules_at_the_kernel_line(kind: str, error: type, rule: str) -> None:
    xs = _inputs(2)
    group = ReplicaGroup([[0, 1]])
    valid = run_ranks(
        gather_bad, [{"x": x, "group": group, "kind": "valid"} for x in xs], lnc=1, target="trn2"
    )
    np.testing.assert_array_equal(valid[1], np.concatenate(xs))
    with pytest.raises(error) as exc:
        run_ranks(gather_bad, [{"x": x, "group": group, "kind": kind} for x in xs], lnc=1, target="trn2")
    assert exc.value.rule == rule
    after = 3 if kind == "sbuf-3d" else 1  # the call below the test of `kind`
    assert_reported_at(exc.value, gather_bad, f'kind == "{kind}"', below=after)


def other_ops_bad(x, group, kind):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    nisa.dma_copy(dst=tile, src=x)
    if kind == "op":
        ncc.all_reduce(dsts=[dst], srcs=[src], op=nl.multiply, replica_group=group)  # HERE
    elif kind == "a2a-sbuf":
        ncc.all_to_all(dsts=[tile], srcs=[tile], replica_group=group, collective_dim=0)  # HERE
    elif kind == "rs-dim":
        ncc.reduce_scatter(dsts=[dst], srcs=[src], op=nl.add, replica_group=group, collective_dim=1)  # HERE
    elif kind == "permute-sbuf":
        ncc.collective_permute(srcs=[tile], dsts=[tile], source_target_pairs=[(0, 1), (1, 0)])  # HERE
    elif kind == "pairs":
        ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=[(0, 1), (1, 1)])  # HERE
    elif kind == "channels":
        ncc.collective_permute_implicit(
            srcs_by_channel=[[src]], dsts_by_channel=[[dst]], replica_group=group, channel_ids=[1]
        )  # HERE
    return dst


@pytest.mark.parametrize(
    "kind,error,rule",
    [
        ("op", LanguageError, "op-token"),
        ("a2a-sbuf", BufferError, "collective-memory"),
        ("rs-dim", ShapeError, "collective-dim"),
        ("permute-sbuf", BufferError, "collective-memory"),
        ("channels", LanguageError, "collective-channels"),
        ("pairs", LanguageError, "collective-permute-pairs"),
    ],
)
def test_operation_rules_at_the_kernel_line(kind: str, error: type, rule: str) -> None:
    xs = _inputs(2)
    group = ReplicaGroup([[0, 1]])
    with pytest.raises(error) as exc:
        run_ranks(other_ops_bad, [{"x": x, "group": group, "kind": kind} for x in xs], lnc=1)
    assert exc.value.rule == rule
    assert_reported_at(exc.value, other_ops_bad, f'kind == "{kind}"', below=1)


@pytest.mark.parametrize(
    "groups,detail",
    [
        ([[0, 1], [1]], "more than one list"),
        ([[0, 1, 2]], "names rank 2; the launch has 2 ranks"),
        ([[0]], "rank 1 is in no list"),
        ([], "non-empty rank lists"),
    ],
)
def test_replica_group_rules(groups: list[list[int]], detail: str) -> None:
    xs = _inputs(2)
    with pytest.raises(LanguageError, match=detail) as exc:
        run_ranks(reduce_hbm, [{"x": x, "group": ReplicaGroup(groups)} for x in xs], lnc=1)
    assert exc.value.rule == "collective-replica-group"
    assert_reported_at(exc.value, reduce_hbm)


def test_a_launch_without_ranks_is_rank_0_of_one() -> None:
    (x,) = _inputs(1)
    np.testing.assert_array_equal(run_kernel(reduce_hbm, [x, ReplicaGroup([[0]])]), x)
    with pytest.raises(LanguageError, match="names rank 1; the launch has 1 rank") as exc:
        run_kernel(reduce_hbm, [x, ReplicaGroup([[0, 1]])])
    assert_reported_at(exc.value, reduce_hbm)


def reduce_on_some_ranks(x, group, reduce):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    if reduce:
        ncc.all_reduce(dsts=[src], srcs=[src], op=nl.add, replica_group=group)  # HERE
    return src


def test_unmatched_collectives_are_refused() -> None:
    xs = _inputs(2)
    group = ReplicaGroup([[0, 1]])
    calls = [{"x": x, "group": group, "op_name": op} for x, op in zip(xs, ("add", "maximum"))]
    with pytest.raises(LanguageError, match="rank 1 passes reduce=maximum where rank 0 passes add") as exc:
        run_ranks(reduce_hbm, calls, lnc=1)
    assert_reported_at(exc.value, reduce_hbm)
    with pytest.raises(LanguageError, match="has no partner: rank 1 finished") as exc:
        run_ranks(
            reduce_on_some_ranks, [{"x": x, "group": group, "reduce": r == 0} for r, x in enumerate(xs)]
        )
    assert exc.value.rule == "collective-unmatched"
    assert_reported_at(exc.value, reduce_on_some_ranks)


# ---------------------------------------------------------------- the conform harness's per-rank step


class _PerRank:
    """A per-rank generator as nki-library's harness passes one (``for_rank(r)``)."""

    def __init__(self, make):
        self.make = make

    def for_rank(self, rank_id: int) -> dict:
        return self.make(rank_id=rank_id)


def test_conform_step_runs_a_collective_test_as_ranks(tmp_path) -> None:
    from types import SimpleNamespace

    from trncore.sim import conform_plugin

    def golden_for(golden, rank_id=0):  # the harness's normalize_golden_output, for these kinds
        return golden.for_rank(rank_id) if hasattr(golden, "for_rank") else golden

    module = SimpleNamespace(
        INF_ARTIFACT_DIR_NAME="infer", InferenceException=RuntimeError, normalize_golden_output=golden_for
    )

    class Harness:  # dumps a dict of arrays as NAME.bin under the inference folder, as nkilib's
        fs_config = SimpleNamespace(artifacts_output_directory_path=str(tmp_path))

        def _dump_output_tensors(self, tensors):
            for name, value in tensors.items():
                (tmp_path / "infer" / f"{name}.bin").write_bytes(value.tobytes())
            return str(tmp_path / "infer")

    xs = _inputs(2, shape=(128, 8))
    group = ReplicaGroup([[0, 1]])
    case = SimpleNamespace(
        inference_args=SimpleNamespace(collective_ranks=2),
        compiler_input=SimpleNamespace(logical_nc_config=2),
        kernel_func=gather_tiles,
        kernel_input=_PerRank(lambda rank_id: {"x": xs[rank_id], "group": group, "ranks": 2}),
        validation_args=SimpleNamespace(
            golden_output=_PerRank(lambda rank_id: {"out": np.zeros((128, 16), np.float32)})
        ),
    )
    step = conform_plugin.per_rank_inference(module, lambda self, case: "one rank")
    assert step(Harness(), case) == str(tmp_path / "infer")
    for r in range(2):
        got = np.fromfile(tmp_path / "infer" / f"output_worker_{r}" / "out.bin", dtype=np.float32)
        np.testing.assert_array_equal(got.reshape(128, 16), np.concatenate(xs, axis=1))
    one = SimpleNamespace(inference_args=SimpleNamespace(collective_ranks=1))
    assert step(Harness(), one) == "one rank"  # other tests take the harness's own path
    case.validation_args = SimpleNamespace(golden_output={"out": np.zeros(1), "extra": np.zeros(1)})
    with pytest.raises(RuntimeError, match="rank 0: the kernel returned 1 outputs, the test expects 2"):
        step(Harness(), case)


# ---------------------------------------------------------------- an interrupted launch stops


class _Interrupt(BaseException):
    """Stands for the conformance runner's time limit, raised in the launching thread."""


def core_1_traces_long(x):
    me = nl.program_id(axis=0)
    mine = nl.ndarray((16, 4), dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray((16, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x)
    if me == 1:
        for _ in range(200_000):  # seconds of tracing on core 1 while core 0 waits
            nisa.memset(dst=mine, value=0)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    out = nl.ndarray((16, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=got)
    return out


def test_an_interrupted_launch_stops_its_other_instances() -> None:
    import signal as sig
    import threading
    import time

    def interrupt(signum, frame):
        raise _Interrupt

    before = threading.active_count()
    previous = sig.signal(sig.SIGALRM, interrupt)
    start = time.perf_counter()
    try:
        sig.setitimer(sig.ITIMER_REAL, 0.3)
        with pytest.raises(_Interrupt):
            run_kernel(core_1_traces_long, [np.zeros((16, 4), np.float32)], lnc=2, target="trn2")
    finally:
        sig.setitimer(sig.ITIMER_REAL, 0)
        sig.signal(sig.SIGALRM, previous)
    assert time.perf_counter() - start < 1.5  # core 1 was stopped, not waited for
    assert threading.active_count() == before
