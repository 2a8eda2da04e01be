"""Registers and register-driven loops (NKI language guide, "Dynamic Control Flow", NKI 0.3.0):
``for i in nl.dynamic_range(reg)`` and ``while reg:`` with register_load / register_store."""

from __future__ import annotations

import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, ShapeError
from trncore.sim.runner import get_program, run_kernel

pytestmark = pytest.mark.simulator


def add_n_times(x, count):
    """out = x + count (count read from device memory into a register, nkilib's dynamic style)."""
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    for _ in nl.dynamic_range(0, reg, 1):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_dynamic_range_over_a_register_loaded_from_data(target: str) -> None:
    x = np.zeros((4, 8), np.float32)
    for n in (3, 5, 0):  # same kernel key, different data: the program is traced each time
        got = run_kernel(add_n_times, [x, np.array([[n]], np.int32)])
        np.testing.assert_array_equal(got, x + n)


def test_a_data_dependent_program_hands_its_outputs_over_and_copies_its_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # never kept (valid for its traced data only), so its outputs need no copy
    # (trncore.sim.lending); its small arguments, under the default cache budget, were copied
    # in, since whether a program is data-dependent is known only after its trace
    sim.clear_cache()
    monkeypatch.delenv("TRNSCI_SIM_CACHE_MIB", raising=False)
    x = np.zeros((4, 8), np.float32)
    prog, _, first = get_program(add_n_times, [x, np.array([[3]], np.int32)], lend=True)
    assert prog.data_dependent and prog.lent_inputs == frozenset()
    assert not np.shares_memory(prog.inputs[0].storage, x)
    assert np.shares_memory(first, prog.outputs[0].alloc.storage)
    second = run_kernel(add_n_times, [x, np.array([[5]], np.int32)])
    np.testing.assert_array_equal(first, x + 3)  # the first call's output is its own
    np.testing.assert_array_equal(second, x + 5)
    assert sim.cache_info()["programs"] == 0


def test_while_register_loop_and_register_store(target: str) -> None:
    def countdown(start):
        # cond holds the remaining count; the loop runs while the register is non-zero
        cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=cond, src=start)
        steps = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=steps, value=0)
        reg = nisa.register_alloc(1)
        while reg:
            nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
            nisa.tensor_scalar(dst=steps, data=steps, op0=nl.add, operand0=1)
            nisa.register_load(reg, cond)
        seven = nisa.register_alloc(7)
        copy = nisa.register_alloc()
        nisa.register_move(copy, seven)
        marker = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(marker, copy)
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0:1, 0:1], src=steps)
        nisa.dma_copy(dst=out[0:1, 1:2], src=marker)
        return out

    got = run_kernel(countdown, [np.array([[4]], np.int32)])
    np.testing.assert_array_equal(got, [[4, 7]])


def test_register_invalid_neighbours(target: str) -> None:
    def step_register(x):
        reg = nisa.register_alloc(2)
        for _ in nl.dynamic_range(0, 8, reg):  # the step must be a compile-time int
            pass
        return x

    x = np.zeros((1, 1), np.int32)
    with pytest.raises(LanguageError, match=r"dynamic-range-step.*test_registers.py:\d+"):
        run_kernel(step_register, [x])

    def load_two(x):
        t = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        reg = nisa.register_alloc()
        nisa.register_load(reg, t)  # two elements: a register holds one
        return x

    with pytest.raises(ShapeError, match=r"register_load-one-element.*test_registers.py:\d+"):
        run_kernel(load_two, [x])

    def unwritten(x):
        reg = nisa.register_alloc()
        for _ in nl.dynamic_range(reg):
            pass
        return x

    with pytest.raises(LanguageError, match="register-uninitialized"):
        run_kernel(unwritten, [x])
