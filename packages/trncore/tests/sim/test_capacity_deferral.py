"""SBUF capacity with loads a compiler may defer (trncore.sim.liveness), per core of a launch.

AWS sources: ``nki.language.no_reorder`` (NKI 0.3.0 API reference): without it "the compiler
scheduler is free to reorder independent operations"; a transfer from HBM into a tile depends on
nothing on chip, so it may run just before the tile's first use. The budget is per partition
(docs/hardware.md) and a one-partition tile may start at partition 0, 32, 64 or 96 (the
start-partition rule, AWS Trainium/Inferentia2 Architecture Guide for NKI, NKI 0.3.0).

The kernels are in the style of nki-library's output projection for token generation: many
one-partition rows loaded in one loop, used in a later loop. ROWS one-partition rows of
COLS float32 (40 000 bytes each) held at once need 6 per start partition, 240 000 bytes, over
both targets' budgets (180 224 on trn1, 212 984 on trn2); one or two at a time fit easily.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import CapacityError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

ROWS, COLS = 24, 10000


def rows_then_use(x, z, passes: int, overwrite: str, ordered: bool = False):
    """Load rows 0..ROWS-1 of ``x`` one per tile, then out = 2 * row + 1, column block by column
    block (``passes`` blocks, each reading every row once). ``overwrite`` copies ``z`` into
    ``x``'s loaded rows ("loaded") or into its last row, which no tile reads ("other"), between
    the loads and the first use ("none": no copy). ``ordered`` runs it all in nl.no_reorder()."""
    with nl.no_reorder() if ordered else contextlib.nullcontext():
        return _rows_then_use(x, z, passes, overwrite)


def _rows_then_use(x, z, passes: int, overwrite: str):
    n = x.shape[0] - 1
    cols = x.shape[1]
    block = cols // passes
    out = nl.ndarray((n, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = []
    for i in range(n):
        t = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)  # ROW
        nisa.dma_copy(dst=t, src=x[i : i + 1, :])
        rows.append(t)
    if overwrite == "loaded":
        nisa.dma_copy(dst=x[0:n, :], src=z[0:n, :])
    elif overwrite == "other":
        nisa.dma_copy(dst=x[n : n + 1, :], src=z[n : n + 1, :])
    y = nl.ndarray((1, block), dtype=x.dtype, buffer=nl.sbuf)
    for p in range(passes):
        for i in range(n):
            nisa.tensor_scalar(
                dst=y, data=rows[i][:, p * block : (p + 1) * block],
                op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0,
            )  # fmt: skip
            nisa.dma_copy(dst=out[i : i + 1, p * block : (p + 1) * block], src=y)
    return out


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(13)
    x = rng.standard_normal((ROWS + 1, COLS)).astype(np.float32)
    return x, np.zeros_like(x)


def test_rows_loaded_early_fit_when_each_load_moves_to_its_reader(target: str) -> None:
    x, z = _inputs()
    want = 2 * x[:ROWS] + 1  # NumPy, before the kernel may write x
    got = run_kernel(rows_then_use, [x.copy(), z], {"passes": 1, "overwrite": "none"}, target=target)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_write_elsewhere_in_the_source_tensor_does_not_pin_the_loads(target: str) -> None:
    x, z = _inputs()
    want = 2 * x[:ROWS] + 1
    got = run_kernel(rows_then_use, [x.copy(), z], {"passes": 1, "overwrite": "other"}, target=target)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_rows_all_read_before_any_is_released_are_refused(target: str) -> None:
    # Two column blocks, each reading every row: every row is live from the first block to the
    # second, wherever its load runs, so no schedule fits (the invalid neighbour).
    x, z = _inputs()
    with pytest.raises(CapacityError) as info:
        run_kernel(rows_then_use, [x, z], {"passes": 2, "overwrite": "none"}, target=target)
    err = info.value
    assert err.rule == "sbuf-capacity"
    assert err.lineno == marked_line(_rows_then_use, "# ROW")
    assert "deferred" in str(err)  # the figure is the one after deferring the loads


def test_loads_whose_source_is_overwritten_before_use_keep_their_place(target: str) -> None:
    # Moving a load past a write of the bytes it reads would change what it loads: the rows
    # stay live from their loads, all 24 at once, and the kernel is refused.
    x, z = _inputs()
    with pytest.raises(CapacityError) as info:
        run_kernel(rows_then_use, [x, z], {"passes": 1, "overwrite": "loaded"}, target=target)
    err = info.value
    assert err.rule == "sbuf-capacity"
    assert err.lineno == marked_line(_rows_then_use, "# ROW")
    assert "deferred" not in str(err)  # no load could move: the program-order figure


def test_loads_inside_a_no_reorder_block_keep_their_place(target: str) -> None:
    # nki.language.no_reorder (NKI 0.3.0): operations inside the block execute in program order,
    # so the rows stay live from their loads and the kernel is refused.
    x, z = _inputs()
    with pytest.raises(CapacityError) as info:
        run_kernel(rows_then_use, [x, z], {"passes": 1, "overwrite": "none", "ordered": True}, target=target)
    assert info.value.rule == "sbuf-capacity"
    assert info.value.lineno == marked_line(_rows_then_use, "# ROW")


def rows_across_a_barrier(x, hazard: bool):
    """LNC=2: core 0 loads rows 0..ROWS-1 of a shared HBM copy of ``x``, then uses them; with
    ``hazard`` the cores meet at a core_barrier after the loads and core 1 then overwrites the
    copy, so core 0's loads must run before the barrier (the invalid neighbour)."""
    n = x.shape[0] - 1
    cols = x.shape[1]
    me = nl.program_id(axis=0)
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((n, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    if me == 0:
        nisa.dma_copy(dst=shared, src=x)
    nisa.core_barrier(data=shared, cores=(0, 1))
    rows = []
    if me == 0:
        for i in range(n):
            t = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)  # ROW
            nisa.dma_copy(dst=t, src=shared[i : i + 1, :])
            rows.append(t)
    if hazard:
        nisa.core_barrier(data=shared, cores=(0, 1))
        if me == 1:
            zero = nl.ndarray((n, cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.memset(dst=zero, value=0.0)
            nisa.dma_copy(dst=shared[0:n, :], src=zero)
    if me == 0:
        y = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)
        for i in range(n):
            nisa.tensor_scalar(dst=y, data=rows[i], op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)
            nisa.dma_copy(dst=out[i : i + 1, :], src=y)
    return out


def test_loads_do_not_move_past_a_meeting_of_the_cores() -> None:
    # nki.isa.core_barrier (NKI 0.3.0): what one core does after the barrier is ordered after
    # what the other did before it. A load moved past the barrier could read core 1's later write.
    x, _ = _inputs()
    got = run_kernel(rows_across_a_barrier, [x], {"hazard": False}, target="trn2", lnc=2)
    np.testing.assert_allclose(got, 2 * x[:ROWS] + 1, rtol=1e-6)
    with pytest.raises(CapacityError) as info:
        run_kernel(rows_across_a_barrier, [x], {"hazard": True}, target="trn2", lnc=2)
    assert info.value.rule == "sbuf-capacity"
    assert info.value.lineno == marked_line(rows_across_a_barrier, "# ROW")


def held_across_a_barrier(x, tiles: int):
    """LNC=2: each core fills ``tiles`` [128, 30000] float32 tiles (120 000 bytes per partition
    each), meets the other core, then writes them out (the sum of its tiles)."""
    me = nl.program_id(axis=0)
    out = nl.ndarray((2 * 128, 30000), dtype=nl.float32, buffer=nl.shared_hbm)
    held = []
    for k in range(tiles):
        t = nl.ndarray((128, 30000), dtype=nl.float32, buffer=nl.sbuf)  # HELD
        nisa.memset(dst=t, value=1.0 + k)
        held.append(t)
    nisa.core_barrier(data=out, cores=(0, 1))
    for k in range(1, tiles):
        nisa.tensor_tensor(dst=held[0], data1=held[0], data2=held[k], op=nl.add)
    nisa.dma_copy(dst=out[me * 128 : (me + 1) * 128, :], src=held[0])
    return out


def test_each_core_of_an_lnc2_launch_counts_its_own_sbuf() -> None:
    # Using Logical Neuron Cores (NKI 0.3.0): an LNC=2 kernel runs on two physical cores, each
    # with its own SBUF; the two instances' tiles, live together across a meeting, do not add up.
    x = np.zeros((1, 1), np.float32)
    got = run_kernel(held_across_a_barrier, [x], {"tiles": 1}, target="trn2", lnc=2)
    np.testing.assert_array_equal(got, np.ones((256, 30000), np.float32))
    with pytest.raises(CapacityError) as info:  # two such tiles on one core: 240 000 bytes
        run_kernel(held_across_a_barrier, [x], {"tiles": 2}, target="trn2", lnc=2)
    assert info.value.rule == "sbuf-capacity"
    assert info.value.lineno == marked_line(held_across_a_barrier, "# HELD")
