"""Races between the two cores of an LNC=2 launch on shared HBM (rule ``lnc-race``).

AWS sources: the two cores of an LNC=2 launch are "two physical cores ... that have shared HBM
memory" (Using Logical Neuron Cores, NKI 0.3.0); ``nki.isa.core_barrier`` (NKI 0.3.0) is how two
cores that wrote disjoint portions of a shared HBM tensor both read it afterwards ("Now both cores
can safely read the complete tensor"). The emulator traces core 0 first; without the rule, a read
by core 1 of what core 0 wrote without a meeting between them would silently see core 0's data.
Each valid form is checked against NumPy; each invalid neighbour is refused at its line.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim import nisa, nl
from trncore.sim.collectives import ReplicaGroup
from trncore.sim.errors import RaceError
from trncore.sim.runner import run_kernel, run_ranks
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator


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
    assert err.lineno == marked_line(exchange_through_hbm, "# READ")  # the later access, core 1's read
    assert f"test_lnc_races.py:{marked_line(exchange_through_hbm, '# WRITE')}" in str(err)  # core 0's line
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
    assert info.value.lineno == marked_line(read_then_overwrite, "# WRITE")
    assert f":{marked_line(read_then_overwrite, '# READ')}" in str(info.value)
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
    # refused at the write: core 0 read back what core 1 now overwrites with other values (a
    # write/write race alone is judged on the cores' last values: test_conform_regressions.py)
    with pytest.raises(RaceError, match=r"core 1 writes shared_hbm.* that core 0 read") as info:
        run_kernel(both_write, [x], {"same": False}, target="trn2", lnc=2)
    assert info.value.lineno == marked_line(both_write, "# WRITE")


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
    assert info.value.lineno == marked_line(row_by_slot, "# READ")
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
    """The overlap of two access footprints (the check's fast paths: one run, sorted patterns,
    bands of one row pitch, row-by-row comparison of dynamic rows) agrees with the byte sets
    listed one by one: strided patterns, dynamic rows (random row sets, repeats included, times
    a random in-row pattern), parts of either (what a write changed) and explicit elements, on
    element widths of 1, 2, 4 and 8 bytes."""
    from trncore.sim.core_races import _apart, _Footprint, _hits_in_run, _meets, _meets_by_rows, _without

    rng = np.random.default_rng(7)

    def step() -> int:  # mostly forward, some broadcast (0) and some backward steps
        u = rng.random()
        return 0 if u < 0.12 else int(rng.integers(-3, 0)) if u < 0.2 else int(rng.integers(1, 40))

    def dims(n_max: int) -> tuple[tuple[int, int], ...]:
        return tuple((step(), int(rng.integers(1, 6))) for _ in range(rng.integers(1, n_max + 1)))

    def footprint(isz: int = 0, kind: float = -1.0) -> _Footprint:
        isz = isz or int(rng.choice([1, 2, 4, 8]))
        kind = kind if kind >= 0 else rng.random()
        if kind < 0.27:  # a strided pattern
            fp = _Footprint(isz, int(rng.integers(0, 200)), dims(3))
        elif kind < 0.35:  # one run (a whole tensor or whole rows), row-major or transposed
            rows, cols = int(rng.integers(1, 9)), int(rng.integers(1, 20))
            run = ((cols, rows), (1, cols)) if rng.random() < 0.6 else ((1, cols), (cols, rows))
            fp = _Footprint(isz, int(rng.integers(0, 200)), run)
        elif kind < 0.9:  # dynamic rows: row indices (repeats allowed) times a pitch, one in-row pattern
            pitch = int(rng.choice([0, 8, 12, 16, 24, 32, 48]))
            rows = rng.integers(0, 8, size=int(rng.integers(1, 7))).astype(np.int64)
            fp = _Footprint(isz, int(rng.integers(0, 24)), dims(2), rows=rows, pitch=pitch)
        else:  # explicit elements
            return _Footprint(isz, elems=rng.integers(0, 300, size=int(rng.integers(1, 12))).astype(np.int64))
        if rng.random() < 0.3:  # part of it (what a write changed)
            keep = rng.random(fp.indices().size) < 0.6
            keep[int(rng.integers(0, keep.size))] = True
            fp = fp.subset(keep)
        return fp

    def element_bytes(fp: _Footprint) -> np.ndarray:
        """Every byte of every listed element: one row per element."""
        return fp.indices()[:, None] * fp.isz + np.arange(fp.isz)[None, :]

    def same_rows_as(a: _Footprint) -> _Footprint:
        """Other rows through ``a``'s in-row pattern (two cores gathering through one view)."""
        rows = rng.integers(0, 8, size=int(rng.integers(1, 7))).astype(np.int64)
        fp = _Footprint(a.isz, a.offset, a.dims, rows=rows, pitch=a.pitch)
        return fp.subset(rng.random(fp.indices().size) < 0.7) if rng.random() < 0.3 else fp

    apart = by_rows = in_run = 0
    for _ in range(1500):
        a = footprint()
        if rng.random() < 0.15:  # a run of a's width (a kernel's whole-tensor copy after its rows)
            b = footprint(a.isz, kind=0.3)
        else:
            b = same_rows_as(a) if a.rows is not None and rng.random() < 0.4 else footprint()
            a, b = (a, b) if rng.random() < 0.5 else (b, a)
        expected = np.isin(element_bytes(b), element_bytes(a)).any(axis=1).tolist()
        hit = _meets(a, b)
        assert (hit.tolist() if hit is not None else [False] * len(expected)) == expected
        if b.dense() and not a.dense() and not _apart(a, b) and a.hi > b.lo and b.hi > a.lo:
            run_hit = _hits_in_run(a, b)
            if run_hit is not None:
                in_run += 1
                assert run_hit.tolist() == expected
        if _apart(a, b):
            apart += 1
            assert not any(expected)
        if a.elems is None and b.elems is None and (a.rows is not None or b.rows is not None):
            rows_hit = _meets_by_rows(a, b)
            if rows_hit is not None:
                by_rows += 1
                assert rows_hit.tolist() == expected
        keep = rng.random(b.indices().size) < 0.5
        assert b.pick(keep).tolist() == b.indices()[keep].tolist()
        left = _without(b, a)
        kept = [int(e) for e, h in zip(b.indices(), expected) if not h]
        assert (left.indices().tolist() if left is not None else []) == kept
    assert apart > 80  # the band test decided a fair share without listing elements
    assert by_rows > 400  # and the row-by-row comparison many of the dynamic-row pairs
    assert in_run > 40  # and a fair share met a run of elements (a kernel's whole-tensor copy)


def scatter_rows(table, src, idx, cols: int):
    """Core ``c`` scatters rows ``src[c*P:(c+1)*P]`` into the rows of ``table`` that
    ``idx[c*P:(c+1)*P]`` name (``vector_offset``), in columns ``[c*cols/2, ...)`` when ``cols``
    is half of the table's width (the cores split each row), else in whole rows."""
    width = table.shape[1]
    p = idx.shape[0] // 2
    me = nl.program_id(axis=0)
    start = me * cols if cols < width else 0
    ix = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ix, src=idx[me * p : (me + 1) * p, :])
    t = nl.ndarray((p, cols), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[me * p : (me + 1) * p, 0:cols])
    rows = table.ap(pattern=[[width, p], [1, cols]], offset=start, vector_offset=ix, indirect_dim=0)
    nisa.dma_copy(dst=rows, src=t)  # SCATTER
    return table


def _scatter(table: np.ndarray, src: np.ndarray, idx: np.ndarray, cols: int) -> np.ndarray:
    """NumPy reference of :func:`scatter_rows` (core 0, then core 1)."""
    out = table.copy()
    p = idx.shape[0] // 2
    for core in range(2):
        start = core * cols if cols < table.shape[1] else 0
        for k in range(core * p, (core + 1) * p):
            out[idx[k, 0], start : start + cols] = src[k, :cols]
    return out


def test_scatters_to_disjoint_dynamic_rows_pass() -> None:
    rng = np.random.default_rng(3)
    table = rng.standard_normal((64, 32)).astype(np.float32)
    src = rng.standard_normal((32, 32)).astype(np.float32)
    idx = rng.permutation(64)[:32].astype(np.int32).reshape(32, 1)  # 16 rows per core, none shared
    out = run_kernel(scatter_rows, [table.copy(), src, idx], {"cols": 32}, target="trn2", lnc=2)
    np.testing.assert_array_equal(out, _scatter(table, src, idx, 32))
    # both cores on the same rows, each its half of the columns (the moe shard-on-H layout)
    same = np.concatenate([idx[:16], idx[:16]])
    out = run_kernel(scatter_rows, [table.copy(), src, same], {"cols": 16}, target="trn2", lnc=2)
    np.testing.assert_array_equal(out, _scatter(table, src, same, 16))


def test_scatters_to_a_shared_dynamic_row_pass_only_with_identical_values() -> None:
    rng = np.random.default_rng(4)
    table = rng.standard_normal((64, 32)).astype(np.float32)
    src = rng.standard_normal((32, 32)).astype(np.float32)
    idx = rng.permutation(64)[:32].astype(np.int32).reshape(32, 1)
    idx[20, 0] = idx[5, 0]  # core 1's 5th row is core 0's 6th
    with pytest.raises(RaceError, match=r"core 1 writes different values into") as info:
        run_kernel(scatter_rows, [table.copy(), src, idx], {"cols": 32}, target="trn2", lnc=2)
    assert info.value.lineno == marked_line(scatter_rows, "# SCATTER")  # core 1's scatter, the later one
    assert f"element [{int(idx[5, 0])}, 0]" in str(info.value)
    src[20] = src[5]  # the same values into that row: either order leaves the same table
    out = run_kernel(scatter_rows, [table.copy(), src, idx], {"cols": 32}, target="trn2", lnc=2)
    np.testing.assert_array_equal(out, _scatter(table, src, idx, 32))


def gather_after_scatter(table, idx, marker: float):
    """Core 0 scatters ``marker`` into the rows ``idx[0:P]``; core 1 gathers the rows
    ``idx[P:2P]`` and writes them to the output (no meeting between them)."""
    width = table.shape[1]
    p = idx.shape[0] // 2
    me = nl.program_id(axis=0)
    ix = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ix, src=idx[me * p : (me + 1) * p, :])
    rows = table.ap(pattern=[[width, p], [1, width]], offset=0, vector_offset=ix, indirect_dim=0)
    t = nl.ndarray((p, width), dtype=table.dtype, buffer=nl.sbuf)
    out = nl.ndarray((p, width), dtype=table.dtype, buffer=nl.shared_hbm)
    if me == 0:
        nisa.memset(dst=t, value=marker)
        nisa.dma_copy(dst=rows, src=t)  # SCATTER
    else:
        nisa.dma_copy(dst=t, src=rows)  # GATHER
        nisa.dma_copy(dst=out, src=t)
    return out


def test_gather_of_rows_the_other_core_scatters_is_refused() -> None:
    table = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    idx = np.array([[3], [9], [17], [30], [4], [8], [18], [29]], np.int32)  # disjoint rows
    out = run_kernel(gather_after_scatter, [table.copy(), idx, 7.0], target="trn2", lnc=2)
    np.testing.assert_array_equal(out, table[idx[4:, 0]])
    idx[6, 0] = 17  # core 1 gathers a row core 0 scatters into
    with pytest.raises(RaceError) as info:
        run_kernel(gather_after_scatter, [table.copy(), idx, 7.0], target="trn2", lnc=2)
    assert info.value.lineno == marked_line(gather_after_scatter, "# GATHER")
    assert f":{marked_line(gather_after_scatter, '# SCATTER')}" in str(info.value)
    assert "core 1 reads" in str(info.value) and "element [17, 0]" in str(info.value)


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
    assert info.value.lineno == marked_line(relay, "# READ")
