"""Trace once, replay many: identity with the traced run, no Python re-execution, fresh memory."""

from __future__ import annotations

import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nisa, nl, simulate
from trncore.simulator import SimulatorEngine, get_engine

pytestmark = pytest.mark.simulator

CALLS = {"n": 0}


def counting_kernel(a, b):
    CALLS["n"] += 1  # Python side effect: runs only while tracing
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for r in nl.static_range(a.shape[0] // 128):
        ta = nl.ndarray((128, a.shape[1]), nl.float32, buffer=nl.sbuf)
        tb = nl.ndarray((128, a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[r * 128 : (r + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[r * 128 : (r + 1) * 128, :])
        tc = nl.ndarray((128, a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.multiply)
        te = nl.ndarray((128, a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=te, op=nl.tanh, data=tc, scale=0.25)
        nisa.dma_copy(dst=out[r * 128 : (r + 1) * 128, :], src=te)
    return out


def test_traced_and_replayed_are_identical_and_python_runs_once(target: str) -> None:
    sim.clear_cache()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 96), np.float32), rng.standard_normal((256, 96), np.float32)
    before = CALLS["n"]
    first = simulate(counting_kernel)(a, b)
    again = simulate(counting_kernel)(a, b)
    np.testing.assert_array_equal(first, again)  # bit-identical
    c, d = rng.standard_normal((256, 96), np.float32), rng.standard_normal((256, 96), np.float32)
    other = simulate(counting_kernel)(c, d)
    np.testing.assert_allclose(other, np.tanh(c * d * 0.25), rtol=1e-6)
    np.testing.assert_allclose(first, np.tanh(a * b * 0.25), rtol=1e-6)
    assert CALLS["n"] - before == 1
    info = sim.cache_info()
    assert info["traces"] == 1 and info["replays"] == 2


def test_count_keys_and_trace_without_data(target: str) -> None:
    rng = np.random.default_rng(1)
    with sim.count_keys() as keys:
        for _ in range(3):
            simulate(counting_kernel)(*(rng.standard_normal((128, 32), np.float32),) * 2)
        simulate(counting_kernel)(*(rng.standard_normal((256, 32), np.float32),) * 2)
    assert len(keys) == 2
    prog = sim.trace(counting_kernel, ((384, 64), "float32"), ((384, 64), "float32"))
    # per row block: 2 loads, multiply, tanh, store
    assert len(prog) == 3 * 5
    assert prog.engine_counts() == {"dma": 9, "vector": 3, "scalar": 3}


def test_replay_resets_memory_to_sentinels(target: str) -> None:
    def half(a):
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:64, :], src=a[0:64, :])
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    for value in (1.0, 2.0):
        out = simulate(half)(np.full((128, 8), value, np.float32))
        assert np.all(out[:64] == value) and np.all(np.isnan(out[64:]))


def test_inputs_written_in_place(target: str) -> None:
    def scale_in_place(x):
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=x, src=t)

    for _ in range(2):  # traced, then replayed
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        assert simulate(scale_in_place)(x) is None
        np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32).reshape(8, 8) * 3)


def test_dynamic_offsets_are_read_at_replay(target: str) -> None:
    def pick_rows(a, idx):
        i = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i, src=idx)
        t = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[16, 2], [1, 16]], scalar_offset=i))
        out = nl.ndarray((2, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    for row in (0, 3, 6):
        np.testing.assert_array_equal(
            simulate(pick_rows)(a, np.array([[row]], np.int32)), a[row : row + 2]
        )
    with pytest.raises(sim.errors.BoundsError):  # replay checks the new offset too
        simulate(pick_rows)(a, np.array([[7]], np.int32))


def test_engine_protocol(target: str) -> None:
    engine = get_engine("trncore")
    assert engine is sim.ENGINE and isinstance(engine, SimulatorEngine)
    assert engine.name == "trncore"
    a = np.ones((128, 16), np.float32)
    out = engine.run(counting_kernel, [a, a * 2], {}, target=target)
    np.testing.assert_allclose(out, np.tanh(np.full((128, 16), 0.5, np.float32)), rtol=1e-6)


def test_compile_time_parameters_are_part_of_the_key(target: str) -> None:
    def scaled(a, factor):
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((4, 4), np.float32)
    assert simulate(scaled)(a, 2.0)[0, 0] == 2.0
    assert simulate(scaled)(a, factor=5.0)[0, 0] == 5.0
    assert sim.ENGINE.run(scaled, [a], {"factor": 7.0}, target=target)[0, 0] == 7.0
    # NumPy scalars are keyed by value, not mistaken for (shape, dtype) specs
    assert simulate(scaled)(a, np.float32(4.0))[0, 0] == 4.0
    assert simulate(scaled)(a, np.float32(6.0))[0, 0] == 6.0


def _scaler(factor: float):  # type: ignore[no-untyped-def]
    def scale(t):  # type: ignore[no-untyped-def]
        y = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=factor)
        return y

    return scale


def _kernel_with_helper(helper):  # type: ignore[no-untyped-def]
    def k(a):  # type: ignore[no-untyped-def]
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=helper(t))
        return out

    return k


def test_a_captured_helpers_own_captured_values_are_part_of_the_key(target: str) -> None:
    # one source text for both kernels and both helpers; only the helper's captured factor
    # differs, so the second kernel is a different program (it had replayed the first one's)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    for factor in (2.0, 3.0):
        got = simulate(_kernel_with_helper(_scaler(factor)))(a)
        np.testing.assert_array_equal(got, a * factor)


def test_host_side_float_of_tensor_is_rejected(target: str) -> None:
    def bad(a):
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return float(t)

    with pytest.raises(sim.errors.HostReadError):
        simulate(bad)(np.ones((2, 2), np.float32))


def test_not_implemented_apis_name_themselves(target: str) -> None:
    with pytest.raises(NotImplementedError, match="rand2"):
        nisa.rand2(None, 0, 1)


def test_storage_is_recycled_and_reallocation_shows_sentinels(target: str) -> None:
    def partial_tiles(a):
        out = nl.ndarray((4 * 128, 8), nl.float32, buffer=nl.shared_hbm)
        for i in nl.static_range(4):
            t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
            rows = 32 * (i + 1)  # each tile writes a different number of rows
            nisa.dma_copy(dst=t[0:rows, :], src=a[0:rows, :])
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
        return out

    a = np.ones((128, 8), np.float32)
    for _ in range(2):  # traced, then replayed
        out = simulate(partial_tiles)(a).reshape(4, 128, 8)
        for i in range(4):
            rows = 32 * (i + 1)
            assert np.all(out[i, :rows] == 1.0) and np.all(np.isnan(out[i, rows:]))
    prog = sim.trace(partial_tiles, ((128, 8), "float32"))
    tiles = [x for x in prog.allocs if x.buffer.name == "sbuf"]
    assert len(tiles) == 4 and len({id(x.storage) for x in tiles}) < 4


def test_program_listing_names_kernel_lines(target: str) -> None:
    prog = sim.trace(counting_kernel, ((128, 16), "float32"), ((128, 16), "float32"))
    text = prog.listing()
    assert len(text.splitlines()) == len(prog) == 5
    assert "nc_matmul" not in text and "tensor_tensor" in text and "test_replay.py:" in text
    assert prog.report().total_instructions == 5


def test_cache_is_bounded_and_nested_launches_are_rejected(target: str, monkeypatch) -> None:
    sim.clear_cache()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_SIZE", "2")
    for rows in (128, 256, 384):
        simulate(counting_kernel)(*(np.ones((rows, 8), np.float32),) * 2)
    assert sim.cache_info()["programs"] == 2 and sim.cache_info()["traces"] == 3

    def launches(a):
        return simulate(counting_kernel)(a, a)

    with pytest.raises(sim.errors.LanguageError, match="another kernel"):
        simulate(launches)(np.ones((128, 8), np.float32))


def test_concurrent_calls_from_threads(target: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sim.clear_cache()
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((256, 32), np.float32) for _ in range(16)]

    def call(x):
        return simulate(counting_kernel)(x, x)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(call, inputs))
    for x, got in zip(inputs, results):
        np.testing.assert_allclose(got, np.tanh(x * x * 0.25), rtol=1e-6)
    assert sim.cache_info()["traces"] == 1
