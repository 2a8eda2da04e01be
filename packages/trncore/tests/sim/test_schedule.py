"""The dependency-aware schedule on hand-built programs whose schedule is known in advance.

Expected times are computed here from AWS's documented figures (engine clocks, the TensorE
``max(N, 64)`` initiation interval, VectorE ``N`` cycles plus the ~60-cycle access overhead, DMA
600 ns per instruction plus bytes over 16 engines of 27 GiB/s, 8 partitions per DMA engine),
never read back from the scheduler.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nisa, nl
from trncore.sim.cli import main
from trncore.sim.schedule import schedule

pytestmark = pytest.mark.simulator

TENSOR_HZ = {"trn1": 2.8e9, "trn2": 2.4e9}
VECTOR_HZ = {"trn1": 1.12e9, "trn2": 0.96e9}
ENGINE_BPS = {"trn1": 27 * 2**30, "trn2": 3.5e12 / 8 / 16}  # one DMA engine (16 per core)
DMA_FIXED = 0.6e-6


def dma_time(target: str, nbytes: int, partitions: int = 128) -> float:
    engines = (partitions + 7) // 8
    return DMA_FIXED + nbytes / (engines * ENGINE_BPS[target])


def vector_time(target: str, free: int, per_elem: int = 1) -> float:
    return (60 + max(64, per_elem * free)) / VECTOR_HZ[target]


# ------------------------------------------------------------------------- hand-built programs
def independent(a):
    """One instruction per engine, no tensor shared: perfect overlap."""
    ta = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=tb, value=0.0)
    tc = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    td = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=tc, op=nl.exp, data=td)
    te = nl.ndarray((128, 512), nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=te, pattern=[[1, 512]])
    st = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    mv = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv)


def chain(a):
    """Every instruction reads what the previous one wrote: no overlap at all."""
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    t1 = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t1, src=a)
    t2 = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t2, data=t1, op0=nl.multiply, operand0=2.0)
    t3 = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(dst=t3, op=nl.exp, data=t2)
    ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=t3[:, 0:128], moving=t3)
    t4 = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t4, src=ps)
    nisa.dma_copy(dst=out, src=t4)
    return out


def streamed(a, rotate: bool):
    """Load tile i, scale it on VectorE: with ``rotate`` the tile is allocated per iteration, so
    the emulator recycles two buffers (double buffering); else one buffer serves every tile."""
    n_tiles = a.shape[0] // 128
    res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    tile = None if rotate else nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    for i in range(n_tiles):
        if rotate:
            tile = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a[i * 128 : (i + 1) * 128, :])
        nisa.tensor_scalar(dst=res, data=tile, op0=nl.multiply, operand0=2.0)


def double_buffered(a):
    streamed(a, True)


def single_buffered(a):
    streamed(a, False)


def narrow_loads(a):
    """Two loads into disjoint partition ranges (0-15 and 16-31): disjoint DMA engines."""
    t = nl.ndarray((32, 2048), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:16, :], src=a[0:16, :])
    nisa.dma_copy(dst=t[16:32, :], src=a[16:32, :])


# ----------------------------------------------------------------------------------- the tests
def test_independent_engines_give_the_lower_bound(target: str) -> None:
    rep = sim.report(independent, ((128, 512), "float32"))
    busy = rep.busy_seconds
    assert busy["dma"] == pytest.approx(dma_time(target, 128 * 512 * 4))
    assert busy["tensor"] == pytest.approx(512 / TENSOR_HZ[target])
    assert busy["vector"] == pytest.approx(vector_time(target, 512))
    assert rep.modelled_s == pytest.approx(rep.lower_bound_s)
    assert rep.lower_bound_s == pytest.approx(max(busy.values()))
    assert rep.lower_bound_s < rep.upper_bound_s
    assert rep.overlap == pytest.approx(1.0)
    # every lane started at time 0: nothing waited
    sched = schedule(sim.trace(independent, ((128, 512), "float32")))
    assert all(item.start_s == 0.0 and item.waited_for == "start" for item in sched.instrs)


def test_strict_chain_gives_the_upper_bound(target: str) -> None:
    rep = sim.report(chain, ((128, 512), "bfloat16"))
    expected = (
        dma_time(target, 128 * 512 * 2)
        + vector_time(target, 512)
        + rep.busy_seconds["scalar"]
        + 512 / TENSOR_HZ[target]
        + vector_time(target, 512)
        + dma_time(target, 128 * 512 * 4)
    )
    assert rep.upper_bound_s == pytest.approx(expected)
    assert rep.modelled_s == pytest.approx(rep.upper_bound_s)
    assert rep.overlap == pytest.approx(0.0)
    # the critical path is the whole program, in order, each step waiting on the one before
    assert sum(seg["count"] for seg in rep.critical_path) == rep.total_instructions == 6
    assert [seg["engine"] for seg in rep.critical_path] == [
        "dma", "vector", "scalar", "tensor", "vector", "dma",
    ]  # fmt: skip
    sched = schedule(sim.trace(chain, ((128, 512), "bfloat16")))
    assert [item.waited_for for item in sched.instrs] == ["start"] + ["RAW"] * 5


def test_double_buffering_overlaps_loads_with_compute(target: str) -> None:
    n = 6
    d = dma_time(target, 128 * 512 * 4)
    c = vector_time(target, 512)
    assert d > c  # DMA-bound: the loads run back to back, the last tile's compute follows
    double = sim.report(double_buffered, ((128 * n, 512), "float32"))
    single = sim.report(single_buffered, ((128 * n, 512), "float32"))
    for rep in (double, single):
        assert rep.lower_bound_s == pytest.approx(n * d)
        assert rep.upper_bound_s == pytest.approx(n * (d + c))
    assert double.modelled_s == pytest.approx(n * d + c)
    # one buffer: each load waits until the previous tile was read (write after read)
    assert single.modelled_s == pytest.approx(n * (d + c))
    sched = schedule(sim.trace(single_buffered, ((128 * n, 512), "float32")))
    loads = [item for item in sched.instrs if item.engine == "dma"]
    assert [item.waited_for for item in loads[1:]] == ["WAR"] * (n - 1)
    # achieved overlap: (upper - modelled) / (upper - lower)
    assert double.overlap == pytest.approx((n * c - c) / (n * c))


def test_transfers_on_disjoint_partitions_share_the_dma_engines(target: str) -> None:
    rep = sim.report(narrow_loads, ((32, 2048), "float32"))
    one = dma_time(target, 16 * 2048 * 4, partitions=16)  # 2 engines of 16
    assert rep.busy_seconds["dma"] == pytest.approx(2 * one)
    assert rep.modelled_s == pytest.approx(one)  # side by side on engines 0-1 and 2-3
    assert rep.lower_bound_s == pytest.approx(one)
    tl = sim.timeline(narrow_loads, ((32, 2048), "float32"))
    assert tl.lanes == ["dma0-1", "dma2-3"]


def _exact_bytes(acc) -> tuple[int, np.ndarray]:
    """The storage and the exact byte offsets an access touches, enumerated element by element."""
    alloc, dtype, offset, dims = acc
    if dtype is None:
        return id(alloc.storage), np.arange(alloc.storage.nbytes)
    isz = alloc.flat_as(dtype).itemsize
    idx = np.array([offset])
    for step, num in dims:
        idx = (idx[:, None] + step * np.arange(num)[None, :]).reshape(-1)
    return id(alloc.storage), (idx[:, None] * isz + np.arange(isz)).reshape(-1)


def tall_rows(a):
    """Row-by-row stores into a tall HBM tensor, then reads of one row and of everything."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    for i in range(a.shape[0]):
        nisa.dma_copy(dst=out[i : i + 1, :], src=t)
    row = nl.ndarray((16, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row[8:9, :], src=out[150:151, :])  # partition 8: DMA engine 1, idle
    whole = nl.ndarray((100, a.shape[0] * a.shape[1] // 100), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=whole, src=out.reshape((100, a.shape[0] * a.shape[1] // 100)))
    return out


def _check_all_conflicts(prog) -> int:
    """Assert that every pair of instructions touching a common byte (exact byte sets, one of
    them writing) runs in program order; returns the number of such pairs."""
    sched = schedule(prog)
    instrs = [ins for ins in prog.instrs if ins.engine not in ("alloc", "debug")]
    touched = []
    for ins in instrs:
        reads, writes = ins.access
        accs = [(*_exact_bytes(a), False) for a in reads] + [(*_exact_bytes(a), True) for a in writes]
        touched.append([(st, set(b.tolist()), b.min(), b.max(), w) for st, b, w in accs if b.size])
    pairs = 0
    for j in range(len(instrs)):
        for i in range(j):
            for si, bi, lo_i, hi_i, wi in touched[i]:
                for sj, bj, lo_j, hi_j, wj in touched[j]:
                    if si != sj or not (wi or wj) or hi_i < lo_j or hi_j < lo_i:
                        continue
                    if not bi.isdisjoint(bj):
                        assert sched.instrs[j].start_s >= sched.instrs[i].end_s - 1e-15, (i, j)
                        pairs += 1
    assert sched.lower_bound_s <= sched.makespan_s <= sched.upper_bound_s
    return pairs


@pytest.mark.parametrize(
    ("a", "b", "dtype"),
    [
        ((256, 256), (256, 640), "bfloat16"),
        ((200, 130), (130, 300), "float32"),
        ((3, 140, 70), (3, 70, 600), "float32"),  # batched: 3-D HBM tensors
    ],
)
def test_schedule_orders_every_pair_of_conflicting_accesses(a, b, dtype) -> None:
    """Independent check of the dependencies on the suite GEMM (aligned, ragged, batched)."""
    from trncore.kernels import gemm_kernel

    prog = sim.trace(gemm_kernel, (a, dtype), (b, dtype))
    assert _check_all_conflicts(prog) > len(prog)  # the check saw real dependencies


def test_tall_hbm_tensors_keep_every_dependency() -> None:
    """300 rows (more than one row bucket): the one-row read waits for its row's store only, the
    whole-tensor read for every store."""
    prog = sim.trace(tall_rows, ((300, 64), "float32"))
    assert _check_all_conflicts(prog) >= 300 + 300
    sched = schedule(prog)
    stores, row_read, whole_read = sched.instrs[1:301], sched.instrs[301], sched.instrs[302]
    assert row_read.waited_for == "RAW" and row_read.after == stores[150].index
    assert whole_read.start_s >= max(s.end_s for s in stores)


def test_a_store_waiting_for_data_does_not_hold_back_the_next_load() -> None:
    """Loads and stores sit in different DMA queues: tile 1's load starts as soon as tile 0's
    load is done, before tile 0's store, which waits for tile 0's compute."""
    sched = schedule(sim.trace(scale_tiles, ((512, 512), "float32")))
    dmas = [item for item in sched.instrs if item.engine == "dma"]
    load0, store0, load1 = dmas[0], dmas[1], dmas[2]
    assert (load0.op, store0.op, load1.op) == ("dma_copy",) * 3
    assert load1.start_s == load0.end_s < store0.start_s


def test_engines_run_their_instructions_in_program_order_one_at_a_time(target: str) -> None:
    from trncore.kernels import gemm_kernel

    sched = schedule(sim.trace(gemm_kernel, ((384, 256), "bfloat16"), ((256, 1024), "bfloat16")))
    by_lane: dict[str, list] = {}
    for item in sched.instrs:
        for lane in item.lanes:
            by_lane.setdefault(lane, []).append(item)
    for lane, items in by_lane.items():
        spans = sorted((it.start_s, it.end_s) for it in items)
        assert all(a[1] <= b[0] + 1e-15 for a, b in itertools.pairwise(spans)), lane
        if not lane.startswith("dma"):
            starts = [it.start_s for it in items]
            assert starts == sorted(starts), lane
    # idle time per lane and what it waited for add up to the modelled time
    for lane, busy in sched.lane_busy_s.items():
        waited = sum(sched.lane_waits_s.get(lane, {}).values())
        assert busy + waited == pytest.approx(sched.makespan_s)


def test_timeline_data_and_pictures(target: str, tmp_path) -> None:
    tl = sim.timeline(chain, ((128, 512), "bfloat16"))
    assert tl.lanes == ["tensor", "vector", "scalar", "dma0-15"]
    assert len(tl.bars) == 6 and all(b.critical for b in tl.bars)
    assert {r["op"] for r in tl.records()} >= {"dma_copy", "nc_matmul", "activation"}
    assert tl.modelled_s == pytest.approx(tl.upper_bound_s)
    assert all(b.line.startswith("test_schedule.py:") for b in tl.bars)
    prog = sim.trace(chain, ((128, 512), "bfloat16"))
    assert sim.timeline(prog).modelled_s == tl.modelled_s
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    tl.plot(png)
    tl.plot(svg, color_by="op")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]
    with pytest.raises(ValueError, match="png or .svg"):
        tl.plot(tmp_path / "t.pdf")
    with pytest.raises(ValueError, match="color_by"):
        tl.plot(color_by="engine")
    fig = tl.plot(window=(0.0, tl.modelled_s / 2))
    assert fig.axes[0].get_xlim() == pytest.approx((0.0, tl.modelled_s / 2 * 1e6))
    with pytest.raises(ValueError, match="window"):
        tl.plot(window=(2e-6, 1e-6))


def scale_tiles(a):
    """The same kernel as KERNEL_FILE's, for in-process checks."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
        r = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=r)
    return out


KERNEL_FILE = '''
import nki
import nki.language as nl
import nki.isa as nisa


def scale(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        r = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=r)
    return out
'''


def test_cli_report_draws_the_timeline_as_png_and_svg(tmp_path, capsys) -> None:
    path = tmp_path / "k.py"
    path.write_text(KERNEL_FILE, encoding="utf-8")
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<svg")):
        out = tmp_path / f"timeline{suffix}"
        code = main([
            "report", f"{path}::scale", "--shapes", "512x512:float32", "--target", "trn1",
            "--timeline", str(out),
        ])  # fmt: skip
        assert code == 0
        assert magic in out.read_bytes()[:2000]
        text = capsys.readouterr().out
        assert "modelled (us)" in text and "critical path" in text and "idle (us) vector" in text
    with pytest.raises(SystemExit):
        main(["report", f"{path}::scale", "--shapes", "512x512:float32", "--timeline", "x.pdf"])


def test_import_trncore_sim_does_not_import_matplotlib() -> None:
    code = "import sys, trncore.sim; print(any(m.startswith('matplotlib') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_launch_records_sum_the_scheduled_time_of_every_launch() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    tall = rng.standard_normal((256, 512)).astype(np.float32)
    with sim.record_launches() as record:
        sim.simulate(double_buffered)(x)
        sim.simulate(double_buffered)(x)
        sim.simulate(single_buffered)(tall)
    for target in ("trn1", "trn2"):
        one = sim.report(double_buffered, ((128, 512), "float32"), target=target)
        two = sim.report(single_buffered, ((256, 512), "float32"), target=target)
        model = record.model(target)
        assert model.modelled_s == pytest.approx(2 * one.modelled_s + two.modelled_s)
        assert model.lower_s <= model.modelled_s <= model.upper_s
        assert model.as_dict()["modelled_s"] == model.modelled_s
        progs = record.programs(target)
        assert sorted(count for _, count in progs) == [1, 2]
        assert all(isinstance(p, sim.Program) and p.target == target for p, _ in progs)


def gather_rows(a, rows):
    """An indirect DMA: its row indices are read from SBUF when it runs."""
    vidx = nl.ndarray((3, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vidx, src=rows)
    g = nl.ndarray((3, 16), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=a.ap([[16, 3], [1, 16]], vector_offset=vidx))
    out = nl.ndarray((3, 16), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_an_indirect_dma_waits_for_its_index_tile(target: str) -> None:
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    rows = np.array([[7], [0], [3]], dtype=np.int32)
    np.testing.assert_array_equal(sim.simulate(gather_rows)(a, rows), a[[7, 0, 3]])
    sched = schedule(sim.trace(gather_rows, a, rows))
    load, gather, store = sched.instrs
    assert gather.waited_for == "RAW" and gather.after == load.index
    assert store.waited_for == "RAW" and store.after == gather.index
    assert sched.makespan_s == pytest.approx(sched.upper_bound_s)  # a strict chain
