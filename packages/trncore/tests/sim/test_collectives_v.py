"""The variable-length collectives ``all_to_all_v`` and ``all_gather_v`` on trncore.sim.

Semantics from AWS's ``nki.collectives`` pages: ``all_to_all_v`` (NKI 0.3.0; metadata layout,
``recv_counts_known`` and the trn1/trn2 inter-node limit from the SDK 2.30-2.32 pages) and
``all_gather_v`` (NKI 0.6.0 / SDK 2.32: LNC=2, four ranks of one chip). Each kernel runs as
2-4 ranks under ``run_ranks`` against a NumPy reference written from the pages' definitions
(flat element buffers, one equal slot per sender, row 2 of the metadata an output); each rule's
invalid neighbour is caught at the kernel's line.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim import nisa, nl
from trncore.sim.collectives import ReplicaGroup
from trncore.sim.errors import (
    BoundsError,
    BufferError,
    DtypeError,
    LanguageError,
    ShapeError,
    TargetError,
)
from trncore.sim.runner import run_ranks
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import VersionError, nki_version

pytestmark = pytest.mark.simulator


# ---------------------------------------------------------------- kernels


def a2av(x, meta, group, dst_rows, known=False, sbuf_meta=False):
    """Copy the input and the metadata in, exchange, return the destination and the metadata."""
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    dst = nl.ndarray((dst_rows, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    md = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=md, src=meta)
    if nl.num_programs(0) > 1:
        # LNC=2: both cores copy into the one shared md; each exchange then writes row 2, so the
        # copies must land first (else core 1's copy may overwrite core 0's counts: lnc-race)
        nisa.core_barrier(data=md, cores=(0, 1))
    if sbuf_meta:
        tile = nl.ndarray((1, *meta.shape), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=meta.reshape((1, *meta.shape)))
        ncc.all_to_all_v(srcs=[src], dsts=[dst], replica_group=group, metadata_tensor=tile,  # on SBUF
                         recv_counts_known=known)  # fmt: skip
        nisa.dma_copy(dst=md.reshape((1, *meta.shape)), src=tile)
    else:
        ncc.all_to_all_v(srcs=[src], dsts=[dst], replica_group=group, metadata_tensor=md,  # HERE
                         recv_counts_known=known)  # fmt: skip
    return dst, md


def agv(x, meta, group, dst_rows, known=False):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    dst = nl.ndarray((dst_rows, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    md = nl.ndarray(meta.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=md, src=meta)
    if nl.num_programs(0) > 1:
        nisa.core_barrier(data=md, cores=(0, 1))  # as in a2av: the copies land before row 2 is written
    ncc.all_gather_v(srcs=[src], dsts=[dst], replica_group=group, metadata_tensor=md,  # HERE
                     recv_counts_known=known)  # fmt: skip
    return dst, md


# ---------------------------------------------------------------- NumPy references of the pages


def ref_all_to_all_v(srcs, metas, ranks, dst_size, known):
    """Sender i's ``src.flat[displ_j : displ_j + count_j]`` lands at ``j``'s slot ``i * dst/n``;
    untouched destination elements keep their contents (NaN: new tensors); row 2 = counts."""
    n = len(ranks)
    slot = dst_size // n
    dsts = {r: np.full(dst_size, np.nan) for r in ranks}
    rows = {r: metas[r].astype(np.int64).copy() for r in ranks}
    for i, a in enumerate(ranks):
        flat = srcs[a].astype(np.float64).reshape(-1)
        for j, b in enumerate(ranks):
            count, displ = metas[a][0, j], metas[a][1, j]
            for k in range(count):
                dsts[b][i * slot + k] = flat[displ + k]
            if not known:
                rows[b][2, i] = count
    return dsts, rows


def ref_all_gather_v(srcs, metas, ranks, dst_size, known):
    n = len(ranks)
    slot = dst_size // n
    dsts = {r: np.full(dst_size, np.nan) for r in ranks}
    rows = {r: metas[r].astype(np.int64).copy() for r in ranks}
    for i, a in enumerate(ranks):
        flat = srcs[a].astype(np.float64).reshape(-1)
        count, displ = metas[a][0, 0], metas[a][1, 0]
        for b in ranks:
            dsts[b][i * slot : i * slot + count] = flat[displ : displ + count]
            if not known:
                rows[b][2, i] = count
    return dsts, rows


def _metas(rng, ranks: int, src_size: int, slot: int, same_for_all: bool = False):
    """Random send counts and displacements inside the source, each count fitting a slot; row 2
    holds a marker the exchange must overwrite (or keep, with recv_counts_known)."""
    out = []
    for _ in range(ranks):
        m = np.full((3, ranks), 77, np.uint32)
        counts = rng.integers(0, min(slot, src_size) + 1, size=ranks)
        if same_for_all:
            counts[:] = counts[0]
        m[0] = counts
        m[1] = [rng.integers(0, src_size - c + 1) for c in counts]
        out.append(m)
    return out


def _assert_outputs(outs, ranks, want, want_meta) -> None:
    """Each rank's (destination, metadata) against the references (destinations compared flat,
    exactly: the exchange only moves elements)."""
    for r in ranks:
        dst, md = outs[r]
        np.testing.assert_array_equal(dst.astype(np.float64).reshape(-1), want[r])
        np.testing.assert_array_equal(md, want_meta[r])


# ---------------------------------------------------------------- all_to_all_v


@pytest.mark.parametrize(("ranks", "rows", "cols", "dst_rows", "known", "lnc"), [
    (2, 4, 8, 8, False, 1),     # aligned: slots of 32 elements
    (3, 5, 7, 9, False, 2),     # ragged: 35-element sources, slots of 21 elements, LNC=2
    (4, 2, 16, 4, True, 1),     # row 2 left as it was
])  # fmt: skip
def test_all_to_all_v_matches_the_pages_definition(ranks, rows, cols, dst_rows, known, lnc) -> None:
    rng = np.random.default_rng(ranks * 10 + rows)
    xs = [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(ranks)]
    slot = dst_rows * cols // ranks
    metas = _metas(rng, ranks, rows * cols, slot)
    group = ReplicaGroup([list(range(ranks))])
    outs = run_ranks(
        a2av,
        [{"x": x, "meta": m, "group": group, "dst_rows": dst_rows, "known": known}
         for x, m in zip(xs, metas)],
        target="trn2", lnc=lnc, ranks_per_node=1,
    )  # fmt: skip
    want, want_meta = ref_all_to_all_v(dict(enumerate(xs)), dict(enumerate(metas)), list(range(ranks)),
                                       dst_rows * cols, known)  # fmt: skip
    _assert_outputs(outs, range(len(outs)), want, want_meta)


def test_all_to_all_v_inter_node_subgroups_sbuf_metadata_bf16_trn1() -> None:
    # 4 ranks on 2 nodes of 2: the lists [[0, 2], [1, 3]] hold same-indexed ranks of both nodes
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((3, 6)).astype(ml_dtypes.bfloat16) for _ in range(4)]
    metas = _metas(rng, 2, 18, 12)
    metas = metas + _metas(rng, 2, 18, 12)
    group = ReplicaGroup([[0, 2], [1, 3]])
    outs = run_ranks(
        a2av,
        [{"x": x, "meta": m, "group": group, "dst_rows": 4, "sbuf_meta": True} for x, m in zip(xs, metas)],
        target="trn1", ranks_per_node=2,
    )  # fmt: skip
    for lst in ([0, 2], [1, 3]):
        want, want_meta = ref_all_to_all_v({r: xs[r] for r in lst}, {r: metas[r] for r in lst}, lst, 24,
                                            False)  # fmt: skip
        _assert_outputs(outs, lst, want, want_meta)


def test_all_to_all_v_two_row_metadata_under_nki_0_3_0_only() -> None:
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2)]
    metas = [m[:2].copy() for m in _metas(rng, 2, 8, 4)]
    group = ReplicaGroup([[0, 1]])
    args = [{"x": x, "meta": m, "group": group, "dst_rows": 2} for x, m in zip(xs, metas)]
    with nki_version("0.3"):
        outs = run_ranks(a2av, args, target="trn2", ranks_per_node=1)
    padded = {r: np.vstack([metas[r], np.zeros((1, 2), np.uint32)]) for r in range(2)}
    want, _ = ref_all_to_all_v(dict(enumerate(xs)), padded, [0, 1], 8, True)
    for r in range(2):
        np.testing.assert_array_equal(outs[r][0].reshape(-1), want[r])
        np.testing.assert_array_equal(outs[r][1], metas[r])  # nothing written back
    with pytest.raises(ShapeError, match="collective-v-metadata") as exc:
        run_ranks(a2av, args, target="trn2", ranks_per_node=1)  # NKI 0.4.0+: 3 rows
    assert_reported_at(exc.value, a2av)


def test_all_to_all_v_invalid_neighbours() -> None:
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2)]
    metas = _metas(rng, 2, 8, 4)
    group = ReplicaGroup([[0, 1]])
    args = [{"x": x, "meta": m, "group": group, "dst_rows": 2} for x, m in zip(xs, metas)]
    # both ranks on one node (the default of run_ranks): an intra-node list, not inter-node
    with pytest.raises(LanguageError, match="collective-v-group") as exc:
        run_ranks(a2av, args, target="trn2")
    assert_reported_at(exc.value, a2av)
    # the same with an explicit node size of 2
    with pytest.raises(LanguageError, match="collective-v-group"):
        run_ranks(a2av, args, target="trn2", ranks_per_node=2)
    # ranks of different nodes but with different indices on them (ranks 0 and 3, nodes of 2)
    four = args + [dict(a) for a in args]
    with pytest.raises(LanguageError, match=r"collective-v-group.*\[0, 3\]"):
        run_ranks(a2av, [dict(a, group=ReplicaGroup([[0, 3], [1, 2]])) for a in four],
                  target="trn2", ranks_per_node=2)  # fmt: skip
    # metadata dtype
    bad = [dict(a, meta=a["meta"].astype(np.int32)) for a in args]
    with pytest.raises(DtypeError, match="collective-v-metadata") as exc:
        run_ranks(a2av, bad, target="trn2", ranks_per_node=1)
    assert_reported_at(exc.value, a2av)
    # a count past the source (data: checked when the ranks meet, at the sender's line)
    over = [dict(a, meta=a["meta"].copy()) for a in args]
    over[1]["meta"][1, 0] = 7
    over[1]["meta"][0, 0] = 3
    with pytest.raises(BoundsError, match=r"collective-v-bounds.*rank 1.*elements 7\.\.10") as exc:
        run_ranks(a2av, over, target="trn2", ranks_per_node=1)
    assert_reported_at(exc.value, a2av)
    # a count larger than the receiver's slot (4 elements of 8 / 2 ranks)
    big = [dict(a, meta=a["meta"].copy()) for a in args]
    big[0]["meta"][0, 1], big[0]["meta"][1, 1] = 5, 0
    with pytest.raises(BoundsError, match=r"collective-v-bounds.*slot of 4"):
        run_ranks(a2av, big, target="trn2", ranks_per_node=1)
    # a destination that does not split into equal slots
    with pytest.raises(ShapeError, match="collective-v-slots"):
        run_ranks(a2av, [dict(a, x=np.ascontiguousarray(a["x"][:, :3]), dst_rows=3) for a in args],
                  target="trn2", ranks_per_node=1)  # 9 elements for 2 ranks  # fmt: skip

    def on_sbuf(x, meta, group):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_to_all_v(srcs=[src], dsts=[dst], replica_group=group, metadata_tensor=meta)  # HERE
        return x

    with pytest.raises(BufferError, match="collective-memory") as exc:
        run_ranks(on_sbuf, [{"x": x, "meta": m, "group": group} for x, m in zip(xs, metas)],
                  target="trn2", ranks_per_node=1)  # fmt: skip
    assert_reported_at(exc.value, on_sbuf)

    def rdispls(x, meta, group):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_to_all_v(srcs=[src], dsts=[dst], replica_group=group, metadata_tensor=meta,  # HERE
                         has_rdispls=True)  # fmt: skip
        return dst

    four = [np.vstack([m, np.zeros((1, 2), np.uint32)]) for m in metas]
    with pytest.raises(TargetError, match="collective-v-rdispls") as exc:
        run_ranks(rdispls, [{"x": x, "meta": m, "group": group} for x, m in zip(xs, four)],
                  target="trn2", ranks_per_node=1)  # fmt: skip
    assert_reported_at(exc.value, rdispls)


# ---------------------------------------------------------------- all_gather_v


@pytest.mark.parametrize(("rows", "cols", "dst_rows", "known"), [(4, 8, 8, False), (3, 5, 8, True)])
def test_all_gather_v_matches_the_pages_definition(rows, cols, dst_rows, known) -> None:
    rng = np.random.default_rng(rows)
    xs = [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(4)]
    slot = dst_rows * cols // 4
    metas = _metas(rng, 4, rows * cols, slot, same_for_all=True)
    for m in metas:
        m[0, 1:] = 99  # only column 0 of rows 0 and 1 is read
        m[1, 1:] = 1000
    group = ReplicaGroup([[0, 1, 2, 3]])
    outs = run_ranks(
        agv,
        [{"x": x, "meta": m, "group": group, "dst_rows": dst_rows, "known": known}
         for x, m in zip(xs, metas)],
        target="trn2", lnc=2,
    )  # fmt: skip
    want, want_meta = ref_all_gather_v(dict(enumerate(xs)), dict(enumerate(metas)), [0, 1, 2, 3],
                                       dst_rows * cols, known)  # fmt: skip
    _assert_outputs(outs, range(len(outs)), want, want_meta)


def test_all_gather_v_invalid_neighbours() -> None:
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(4)]
    metas = _metas(rng, 4, 8, 2, same_for_all=True)
    group = ReplicaGroup([[0, 1, 2, 3]])
    args = [{"x": x, "meta": m, "group": group, "dst_rows": 2} for x, m in zip(xs, metas)]
    with pytest.raises(LanguageError, match="collective-v-lnc") as exc:
        run_ranks(agv, args, target="trn2", lnc=1)
    assert_reported_at(exc.value, agv)
    with pytest.raises(TargetError, match="collective-v-lnc") as exc:
        run_ranks(agv, args, target="trn1")
    assert_reported_at(exc.value, agv)
    two = [dict(a, group=ReplicaGroup([[0, 1], [2, 3]])) for a in args]
    with pytest.raises(LanguageError, match="collective-v-group") as exc:
        run_ranks(agv, two, target="trn2", lnc=2)
    assert_reported_at(exc.value, agv)
    with nki_version("0.5"), pytest.raises(VersionError, match="all_gather_v needs NKI 0.6.0") as exc:
        run_ranks(agv, args, target="trn2", lnc=2)
    assert_reported_at(exc.value, agv)
    wide = [dict(a, meta=a["meta"].copy()) for a in args]
    wide[2]["meta"][0, 0] = 3  # a 3-element chunk for 2-element slots
    with pytest.raises(BoundsError, match=r"collective-v-bounds.*rank 2"):
        run_ranks(agv, wide, target="trn2", lnc=2)
