"""The emulator's own memory: tiles at one explicit address, the program cache's byte budget,
and the conformance runner's verdict on who passed a memory limit (the emulator or the test)."""

from __future__ import annotations

import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nisa, nl, simulate
from trncore.sim.conform_meter import RETAINED_SLACK, CaseMeter, memory_verdict, time_verdict


def test_tiles_at_one_address_share_their_bytes(target: str) -> None:
    # nl.ndarray(address=(partition, byte)) (NKI 0.3.0) places a tile at those bytes of SBUF: a
    # second tile of the same size at the same address is the same memory, so it reads what the
    # first one wrote. A tile at another address is other memory (the uninitialized sentinel).
    def aliased(x):
        a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        c = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=b)
        nisa.dma_copy(dst=out[1], src=c)
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    got = simulate(aliased)(x)
    np.testing.assert_array_equal(got[0], x)
    assert np.isnan(got[1]).all()
    np.testing.assert_array_equal(simulate(aliased)(x + 1)[0], x + 1)  # replay: same sharing


def test_rotating_tiles_cost_their_physical_buffers(target: str) -> None:
    # nkilib's modular allocator: a list of 64 logical tiles over 2 physical buffers. The
    # program holds 2 tiles' storage, not 64 (each tile is 128 x 1024 float32 = 512 KiB).
    def rotating(x):
        tiles = [
            nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, (k % 2) * 4096))
            for k in range(64)
        ]
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        for k, t in enumerate(tiles):
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(k))
            nisa.dma_copy(dst=out, src=t)
        return out

    x = np.ones((128, 1024), np.float32)
    np.testing.assert_array_equal(simulate(rotating)(x), x + 63)
    prog = sim.trace(rotating, ((128, 1024), "float32"))
    tile = 128 * 1024 * 4
    assert prog.nbytes <= 2 * tile + 2 * tile  # two rotating buffers + the input and the output


def test_program_cache_keeps_programs_within_its_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out

    sim.clear_cache()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "1")
    small = np.ones((128, 64), np.float32)  # 3 x 32 KiB of storage: kept
    large = np.ones((128, 1024), np.float32)  # 3 x 512 KiB: over 1 MiB, run and dropped
    np.testing.assert_array_equal(simulate(copy)(small), small)
    np.testing.assert_array_equal(simulate(copy)(large), large)
    assert sim.cache_info()["programs"] == 1
    np.testing.assert_array_equal(simulate(copy)(large), large)
    assert sim.cache_info()["traces"] == 3 and sim.cache_info()["replays"] == 0
    simulate(copy)(small)
    assert sim.cache_info()["replays"] == 1
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "lots")
    with pytest.raises(ValueError, match="TRNSCI_SIM_CACHE_MIB"):
        simulate(copy)(np.ones((128, 32), np.float32))  # a new program to keep
    sim.clear_cache()


def _narrow_steps(x):
    # three instructions per column of (128, 1) tiles: a long record over little storage
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for j in range(x.shape[1]):
        t = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, j : j + 1])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, j : j + 1], src=t)
    return out


def test_the_byte_budget_counts_recorded_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    # A program whose storage fits the budget many times over but whose instruction list does
    # not is run and dropped, like a program with too much storage.
    x = np.arange(128 * 384, dtype=np.float32).reshape(128, 384)
    prog = sim.trace(_narrow_steps, ((128, 384), "float32"))
    assert prog.nbytes < 2**20 // 2 < prog.footprint - prog.nbytes  # storage alone would fit
    sim.clear_cache()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "1")
    for _ in range(2):
        np.testing.assert_array_equal(simulate(_narrow_steps)(x), 2 * x)
    assert sim.cache_info() == {"programs": 0, "capacity": 128, "traces": 2, "replays": 0}
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "64")
    for _ in range(2):
        np.testing.assert_array_equal(simulate(_narrow_steps)(x), 2 * x)
    assert sim.cache_info() == {"programs": 1, "capacity": 128, "traces": 3, "replays": 1}
    sim.clear_cache()


def test_the_record_estimate_is_near_what_python_allocates() -> None:
    # RECORD_BYTES estimates one entry's memory; tracemalloc counts what tracing really kept
    # (the program held, the garbage collected): the estimate stays within a factor of two.
    import gc
    import tracemalloc

    from trncore.sim.program import RECORD_BYTES

    sim.clear_cache()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        prog = sim.trace(_narrow_steps, ((128, 384), "float32"))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before - prog.nbytes
    finally:
        tracemalloc.stop()
    per_entry = kept / len(prog.instrs)
    assert per_entry / 2 <= RECORD_BYTES <= 2 * per_entry, per_entry


def test_memory_verdict_blames_the_phase_that_passed_the_limit() -> None:
    gib = 2**30
    limit = 8 * gib
    outcome, reason = memory_verdict(limit, CaseMeter(phase="inputs", rss_start=gib))
    assert outcome == "DATA" and "inputs" in reason
    inside = CaseMeter(phase="emulator", input_bytes=gib, rss_entry=2 * gib, emulator_peak=8 * gib)
    outcome, reason = memory_verdict(limit, inside)
    assert outcome == "MEMORY" and "inside the emulator" in reason
    # after the kernel returned: the test's reference, if the emulator gave its memory back ...
    done = CaseMeter(phase="reference", rss_entry=2 * gib, rss_exit=3 * gib, output_bytes=gib)
    assert memory_verdict(limit, done)[0] == "DATA"
    # ... and the emulator's, if it still held more than its outputs
    held = CaseMeter(phase="reference", rss_entry=2 * gib, rss_exit=3 * gib + 2 * RETAINED_SLACK,
                     output_bytes=gib)  # fmt: skip
    outcome, reason = memory_verdict(limit, held)
    assert outcome == "MEMORY" and "still holding" in reason


def test_time_verdict_blames_the_emulator_once_it_has_run() -> None:
    # the limit passed before the kernel ran: the test's own inputs took the time
    outcome, reason = time_verdict(30, CaseMeter(phase="inputs"))
    assert outcome == "DATA" and "building the test's inputs" in reason
    # inside the emulator, or in the reference after it: the emulator's seconds counted
    inside = CaseMeter(phase="emulator", calls=1, emulator_seconds=12.5, data_seconds=4.0)
    outcome, reason = time_verdict(30, inside)
    assert outcome == "TIMEOUT" and "inside the emulator" in reason
    after = CaseMeter(phase="reference", calls=1, emulator_seconds=5.0)
    outcome, reason = time_verdict(30, after)
    assert outcome == "TIMEOUT" and "reference" in reason and "5.0 s inside the emulator" in reason
    # a second kernel call's inputs: the emulator has run once already
    assert time_verdict(30, CaseMeter(phase="inputs", calls=1, emulator_seconds=3.0))[0] == "TIMEOUT"
