"""A call whose program the cache will not keep uses the caller's arrays and hands its outputs over
(trncore.sim.lending): the same results as copies, the caller's arrays written only as the
emulator writes them back anyway, and nothing of the call kept afterwards."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

import trncore.sim as sim
from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import BoundsError
from trncore.sim.runner import get_program


def _scale_into(a, b):
    """``b`` (an argument) becomes 2a; returns a + b, both read back after the write (an
    argument sharing memory with another would show the write in both)."""
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    two = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=two, data=ta, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=b, src=two)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    ta2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta2, src=a)
    total = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=ta2, data2=tb, op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=total)
    return out


def _fails_after_writing(a, b):
    """Writes ``b`` (an argument), then slices past ``a``'s end (a BoundsError)."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=b, src=t)
    return a[0 : a.shape[0] + 1]


@pytest.fixture
def one_shot(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No program is kept (what the conformance runner sets): every call is one-shot."""
    sim.clear_cache()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "0")
    yield
    sim.clear_cache()


def _inputs(dtype: object = np.float32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 96)).astype(dtype)
    b = np.full((128, 96), 5.0, dtype=dtype)
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_one_shot_results_equal_numpy_and_the_copying_path(
    one_shot: None, target: str, dtype: object
) -> None:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a, b = _inputs(np_dtype)
    a0 = a.copy()
    lent_out = simulate(_scale_into)(a, b)
    # NumPy reference: b = 2a (exact in either dtype), out = a + 2a rounded to the dtype
    np.testing.assert_array_equal(b, (a0.astype(np.float32) * 2).astype(np_dtype))
    np.testing.assert_array_equal(lent_out, (a0.astype(np.float32) * 3).astype(np_dtype))
    np.testing.assert_array_equal(a, a0)  # read only: untouched
    assert sim.cache_info()["programs"] == 0
    # the same call through a kept program (copies in, copies out) gives the same bytes
    sim.clear_cache()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRNSCI_SIM_CACHE_MIB", "1024")
        b2 = np.full_like(b, 5.0)
        kept_out = simulate(_scale_into)(a0.copy(), b2)
        assert sim.cache_info()["programs"] == 1
    assert kept_out.tobytes() == lent_out.tobytes() and b2.tobytes() == b.tobytes()


def test_lent_arguments_are_the_storage_the_kernel_reads_and_writes(one_shot: None, target: str) -> None:
    a, b = _inputs()
    prog, arrays, result = get_program(_scale_into, (a, b), lend=True)
    assert np.shares_memory(prog.inputs[0].storage, a) and np.shares_memory(prog.inputs[1].storage, b)
    assert prog.lent_inputs == {0, 1} and prog.written_inputs == [1]
    # the output is the output tensor's own storage, handed over
    assert np.shares_memory(result, prog.outputs[0].alloc.storage)
    # without lend (the public API's default) the same call copies both ways
    sim.clear_cache()
    prog2, _, result2 = get_program(_scale_into, (a.copy(), b.copy()))
    assert not np.shares_memory(prog2.inputs[0].storage, a)
    assert not np.shares_memory(result2, prog2.outputs[0].alloc.storage)


def test_handed_over_outputs_are_ordinary_arrays_and_the_call_keeps_nothing(one_shot: None) -> None:
    a, b = _inputs()
    refs = sys.getrefcount(a), sys.getrefcount(b)
    out = simulate(_scale_into)(a, b)
    # the program is gone with the call: it holds no reference to the caller's arrays
    assert (sys.getrefcount(a), sys.getrefcount(b)) == refs
    assert sim.cache_info()["programs"] == 0
    expected = 3 * a
    assert out.flags.writeable and out.flags.c_contiguous and out.shape == a.shape
    np.testing.assert_array_equal(torch.from_numpy(out).numpy(), expected)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(out)), expected)
    out[...] = 0  # the caller's to change: a second call is a new program
    np.testing.assert_array_equal(simulate(_scale_into)(a, np.zeros_like(b)), expected)


def test_a_failing_kernel_leaves_lent_arguments_as_they_were(one_shot: None, target: str) -> None:
    a, b = _inputs()
    b0 = b.copy()
    with pytest.raises(BoundsError):
        simulate(_fails_after_writing)(a, b)
    np.testing.assert_array_equal(b, b0)  # written by the kernel, put back by the failure


@pytest.mark.parametrize("case", ["same array twice", "overlapping views", "strided", "read-only"])
def test_arguments_that_cannot_stand_for_copies_are_copied(one_shot: None, case: str) -> None:
    a, b = _inputs()
    if case == "same array twice":
        args = (b, b)  # b = 2b through the first argument; the second reads its own copy of b
        expected_b, expected_out = 10.0, 15.0
    elif case == "overlapping views":
        whole = np.full((256, 96), 5.0, np.float32)
        args = (whole[:128], whole[:128])
        expected_b, expected_out = 10.0, 15.0
    elif case == "strided":
        wide = np.full((128, 192), 5.0, np.float32)
        args = (a, wide[:, ::2])
        expected_b, expected_out = None, None
    else:
        b.flags.writeable = False
        args = (a, b)
        expected_b, expected_out = None, None
    prog, arrays, out = get_program(_scale_into, args, lend=True)
    if case == "same array twice" or case == "overlapping views":
        assert prog.lent_inputs == frozenset()
        np.testing.assert_array_equal(out, np.full((128, 96), expected_out, np.float32))
        np.testing.assert_array_equal(args[0], np.full((128, 96), expected_b, np.float32))
    elif case == "strided":
        assert 1 not in prog.lent_inputs
        np.testing.assert_array_equal(out, 3 * a)
        np.testing.assert_array_equal(args[1], 2 * a)  # written back into the strided view
        np.testing.assert_array_equal(wide[:, 1::2], 5.0)  # the columns between are untouched
    else:
        assert 1 not in prog.lent_inputs
        np.testing.assert_array_equal(out, 3 * a)
        np.testing.assert_array_equal(b, 5.0)  # not writable: not written back, as before


def test_only_arguments_over_the_cache_budget_make_a_call_one_shot(monkeypatch: pytest.MonkeyPatch) -> None:
    sim.clear_cache()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "1")
    small_a, small_b = _inputs()  # 2 x 48 KiB: the program is kept and replayed
    large_a = np.ones((128, 2048), np.float32)  # 2 x 1 MiB of arguments: over the budget
    large_b = np.zeros((128, 2048), np.float32)
    prog, _, _ = get_program(_scale_into, (small_a, small_b.copy()), lend=True)
    assert prog.lent_inputs == frozenset() and sim.cache_info()["programs"] == 1
    np.testing.assert_array_equal(simulate(_scale_into)(small_a, small_b), 3 * small_a)
    assert sim.cache_info()["replays"] == 1
    prog, _, out = get_program(_scale_into, (large_a, large_b), lend=True)
    assert prog.lent_inputs == {0, 1} and sim.cache_info()["programs"] == 1
    np.testing.assert_array_equal(out, 3 * large_a)
    np.testing.assert_array_equal(large_b, 2 * large_a)
    sim.clear_cache()


def test_one_tensor_returned_twice_gives_two_arrays(one_shot: None) -> None:
    # handed over once; the second result is a copy, so writing one does not change the other
    def twice(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out, out

    a, _ = _inputs()
    first, second = simulate(twice)(a)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, a)
    np.testing.assert_array_equal(second, a)
