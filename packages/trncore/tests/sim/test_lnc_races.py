"""Races between the two cores of an LNC=2 launch on shared HBM (rule ``lnc-race``).

AWS sources: the two cores of an LNC=2 launch are "two physical cores ... that have shared HBM
memory" (Using Logical Neuron Cores, NKI 0.3.0); ``nki.isa.core_barrier`` (NKI 0.3.0) is how two
cores that wrote disjoint portions of a shared HBM tensor both read it afterwards ("Now both cores
can safely read the complete tensor"). The emulator traces core 0 first; without the rule, a read
by core 1 of what core 0 wrote without a meeting between them would silently see core 0's data.
Each valid form is checked against NumPy; each invalid neighbour is refused at its line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim import nisa, nl
from trncore.sim.collectives import ReplicaGroup
from trncore.sim.errors import RaceError
from trncore.sim.runner import run_kernel, run_ranks

pytestmark = pytest.mark.simulator


def _line(fn, marker: str) -> int:
    """The source line of ``fn`` carrying ``# marker``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if f"# {marker}" in text)


def scaled_halves(x):
    """Each core scales its half of the rows (disjoint writes by program_id)."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[me * half : (me + 1) * half, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=t)
    return out


def column_halves(x):
    """Each core writes its half of the columns of every row (interleaved, disjoint bytes)."""
    rows, cols = x.shape
    half = cols // 2
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, half), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, me * half : (me + 1) * half])
    nisa.dma_copy(dst=out[:, me * half : (me + 1) * half], src=t)
    return out


def exchange_through_hbm(x, sync: str):
    """Core 0 writes 3*x to shared HBM; core 1 reads it after ``sync`` ("barrier", "sendrecv"
    or "none") and writes it to the output; core 0 writes its own rows of the output."""
    rows, cols = x.shape
    me = nl.program_id(axis=0)
    shared = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((2 * rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if me == 0:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=shared, src=t)  # WRITE
    if sync == "barrier":
        nisa.core_barrier(data=shared, cores=(0, 1))
    elif sync == "sendrecv":
        got = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    if me == 1:
        nisa.dma_copy(dst=t, src=shared)  # READ
    nisa.dma_copy(dst=out[me * rows : (me + 1) * rows, :], src=t)
    return out


def test_disjoint_halves_and_shared_reads_pass() -> None:
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    for _ in range(2):  # traced, then replayed
        np.testing.assert_array_equal(run_kernel(scaled_halves, [x], target="trn2", lnc=2), 2 * x)
    np.testing.assert_array_equal(run_kernel(column_halves, [x], target="trn2", lnc=2), x)


@pytest.mark.parametrize("sync", ["barrier", "sendrecv"])
def test_write_then_meeting_then_read_passes(sync: str) -> None:
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    out = run_kernel(exchange_through_hbm, [x], {"sync": sync}, target="trn2", lnc=2)
    np.testing.assert_array_equal(out, np.concatenate([3 * x, 3 * x]))


def test_read_of_the_other_cores_write_without_a_meeting_is_refused() -> None:
    x = np.ones((16, 4), np.float32)
    with pytest.raises(RaceError) as info:
        run_kernel(exchange_through_hbm, [x], {"sync": "none"}, target="trn2", lnc=2)
    err = info.value
    assert err.rule == "lnc-race"
    assert err.lineno == _line(exchange_through_hbm, "READ")  # the later access, core 1's read
    assert f"test_lnc_races.py:{_line(exchange_through_hbm, 'WRITE')}" in str(err)  # core 0's line
    assert "core 1 reads" in str(err) and "core 0 wrote" in str(err)
    # the same kernel at LNC=1 has one core: nothing to race with
    np.testing.assert_array_equal(
        run_kernel(exchange_through_hbm, [x], {"sync": "none"}, target="trn2", lnc=1)[:16], 3 * x
    )


def read_then_overwrite(x):
    """Core 0 reads the argument's rows; core 1 overwrites them (the read may see either)."""
    rows, cols = x.shape
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    if me == 0:
        nisa.dma_copy(dst=t, src=x)  # READ
        nisa.dma_copy(dst=out, src=t)
    else:
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=x[2:4, :], src=t[2:4, :])  # WRITE
    return out


def test_write_over_what_the_other_core_read_is_refused() -> None:
    x = np.ones((8, 4), np.float32)
    with pytest.raises(RaceError) as info:
        run_kernel(read_then_overwrite, [x], target="trn2", lnc=2)
    assert info.value.lineno == _line(read_then_overwrite, "WRITE")
    assert f":{_line(read_then_overwrite, 'READ')}" in str(info.value)
    assert "element [2, 0]" in str(info.value)  # the first element both touch


def both_write(x, same: bool):
    """Both cores write all of ``out``: the same values, or each its own."""
    rows, cols = x.shape
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if not same:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=me * 1.0)
    nisa.dma_copy(dst=out, src=t)  # WRITE
    # each core reads back what it wrote: the same bytes whichever core's write lands last
    u = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=out)
    return out


def test_overlapping_writes_pass_only_with_identical_bytes() -> None:
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    np.testing.assert_array_equal(run_kernel(both_write, [x], {"same": True}, target="trn2", lnc=2), x)
    with pytest.raises(RaceError, match=r"core 1 writes different values into") as info:
        run_kernel(both_write, [x], {"same": False}, target="trn2", lnc=2)
    assert info.value.lineno == _line(both_write, "WRITE")


def row_by_slot(x, slots):
    """Core 0 writes row slots[0] of ``x``; core 1 reads row slots[1] (dynamic offsets)."""
    rows, cols = x.shape
    me = nl.program_id(axis=0)
    idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=slots[me : me + 1].reshape((1, 1)))
    t = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)
    row = x.ap(pattern=[[cols, 1], [1, cols]], offset=0, scalar_offset=idx, indirect_dim=0)
    if me == 0:
        nisa.memset(dst=t, value=7.0)
        nisa.dma_copy(dst=row, src=t)  # WRITE
    else:
        nisa.dma_copy(dst=t, src=row)  # READ
    out = nl.ndarray((2, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me : me + 1, :], src=t)
    return out


def test_dynamic_offsets_are_resolved_to_the_rows_touched() -> None:
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    out = run_kernel(row_by_slot, [x.copy(), np.array([1, 3], np.int32)], target="trn2", lnc=2)
    np.testing.assert_array_equal(out, np.stack([np.full(8, 7.0, np.float32), x[3]]))  # disjoint rows
    # the verdict rests on the offsets, so the program is traced (and checked) again on each call
    with pytest.raises(RaceError) as info:  # both cores on row 2
        run_kernel(row_by_slot, [x.copy(), np.array([2, 2], np.int32)], target="trn2", lnc=2)
    assert info.value.lineno == _line(row_by_slot, "READ")
    assert "element [2, 0]" in str(info.value)


def private_scratch(x):
    """Each core writes its own values into a private HBM scratch tensor and reads them back."""
    rows, cols = x.shape
    me = nl.program_id(axis=0)
    scratch = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.private_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=me * 100.0)
    nisa.dma_copy(dst=scratch, src=t)
    nisa.dma_copy(dst=t, src=scratch)
    out = nl.ndarray((2 * rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * rows : (me + 1) * rows, :], src=t)
    return out


def test_private_hbm_is_per_core() -> None:
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    out = run_kernel(private_scratch, [x], target="trn2", lnc=2)
    np.testing.assert_array_equal(out, np.concatenate([x, x + 100]))  # each core read its own


def test_ranks_have_separate_hbm() -> None:
    def ranked(x):
        # every rank runs the same LNC=2 kernel on its own arguments: core 0 writes x's top half,
        # core 1 the bottom half; the ranks' x are different tensors, never a race
        rows, cols = x.shape
        half = rows // 2
        me = nl.program_id(axis=0)
        t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=5.0)
        nisa.dma_copy(dst=x[me * half : (me + 1) * half, :], src=t)
        return x

    xs = [np.zeros((8, 4), np.float32) for _ in range(2)]
    outs = run_ranks(ranked, [{"x": x} for x in xs], target="trn2", lnc=2)
    for out in outs:
        np.testing.assert_array_equal(out, np.full((8, 4), 5.0, np.float32))

    with pytest.raises(RaceError, match=r"rank 0 core 1 reads .* rank 0 core 0 wrote"):
        run_ranks(exchange_through_hbm, [{"x": np.ones((8, 4), np.float32), "sync": "none"}] * 2,
                  target="trn2", lnc=2)  # fmt: skip


def test_pattern_overlap_matches_byte_sets() -> None:
    """The overlap of two strided access patterns (the check's fast paths: one run, sorted
    patterns, bands of one row pitch) agrees with the byte sets listed one by one."""
    from trncore.sim.core_races import _apart, _Footprint, _meets

    rng = np.random.default_rng(7)

    def pattern() -> _Footprint:
        dims = tuple((int(rng.integers(0, 40)), int(rng.integers(1, 6))) for _ in range(rng.integers(1, 4)))
        return _Footprint(int(rng.choice([1, 2, 4])), int(rng.integers(0, 200)), dims)

    def byte_set(fp: _Footprint) -> set[int]:
        return {int(e) * fp.isz + k for e in fp.indices() for k in range(fp.isz)}

    apart = 0
    for _ in range(1500):
        a, b = pattern(), pattern()
        bytes_a = byte_set(a)
        expected = [any(int(e) * b.isz + k in bytes_a for k in range(b.isz)) for e in b.indices()]
        hit = _meets(a, b)
        assert (hit.tolist() if hit is not None else [False] * len(expected)) == expected
        if _apart(a, b):
            apart += 1
            assert not any(expected)
    assert apart > 100  # the band test decided a fair share without listing elements


def relay(x, group, barrier: bool):
    """Core 0 writes x to shared HBM, core 1 reads it; between them two all_reduces (each core
    meets the same core of the other rank), and a core_barrier on the ranks given ``barrier``."""
    me = nl.program_id(axis=0)
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if me == 0:
        nisa.dma_copy(dst=shared, src=t)
    ncc.all_reduce(dsts=[u], srcs=[t], op=nl.add, replica_group=group)
    if barrier:
        nisa.core_barrier(data=shared, cores=(0, 1))
    ncc.all_reduce(dsts=[u], srcs=[t], op=nl.add, replica_group=group)
    if me == 1:
        nisa.dma_copy(dst=t, src=shared)  # READ
        nisa.dma_copy(dst=out, src=t)
    return out


def test_a_chain_of_collectives_through_another_rank_orders_the_cores() -> None:
    """Rank 0's core 0 → all_reduce (core 0s) → rank 1's barrier → all_reduce (core 1s) → rank
    0's core 1: rank 0's read is ordered after its write although rank 0 has no barrier. A
    collective alone meets one core of each rank, never both cores of one rank."""
    group = ReplicaGroup([[0, 1]])
    xs = [np.full((4, 8), r + 1.0, np.float32) for r in range(2)]
    outs = run_ranks(relay, [{"x": xs[0], "group": group, "barrier": False},
                             {"x": xs[1], "group": group, "barrier": True}],
                     target="trn2", lnc=2)  # fmt: skip
    for out, x in zip(outs, xs):
        np.testing.assert_array_equal(out, x)
    with pytest.raises(RaceError, match=r"rank 0 core 1 reads .* rank 0 core 0 wrote") as info:
        run_ranks(relay, [{"x": x, "group": group, "barrier": False} for x in xs], target="trn2", lnc=2)
    assert info.value.lineno == _line(relay, "READ")
