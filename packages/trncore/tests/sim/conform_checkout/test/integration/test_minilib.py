"""Cases for the miniature checkout: one outcome of the conformance runner each."""

import os

import numpy as np
import pytest
from minilib.kernels import (
    DEFAULT,
    ScaleConfig,
    never_ends,
    off_by_one,
    scale_add,
    swap_and_count,
    too_many_partitions,
)

RNG = np.random.default_rng(5)
X = RNG.standard_normal((128, 64)).astype(np.float32)
B = RNG.standard_normal((128, 64)).astype(np.float32)


def _ref(x, bias=None, cfg=DEFAULT):
    return x * cfg.scale + (0 if bias is None else bias)


@pytest.mark.fast
@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("with_bias", [False, True])
def test_scale_add(test_manager, lnc, with_bias):
    inputs = {"x": X, "cfg": ScaleConfig(scale=2.0)}
    if with_bias:
        inputs["bias"] = B
    test_manager.execute(scale_add, inputs, _ref, lnc=lnc)


def test_swap_and_count(test_manager):
    def ref(x, count):
        half = x.shape[0] // 2
        return np.concatenate([x[half:], x[:half]]) + count[0, 0]

    inputs = {"x": X, "count": np.array([[3]], np.int32)}
    test_manager.execute(swap_and_count, inputs, ref, lnc=2)


@pytest.mark.slow_simulation
def test_scale_add_large(test_manager):
    x = np.zeros((8192, 64), np.float32)
    test_manager.execute(scale_add, {"x": x}, _ref)


def test_off_by_one(test_manager):
    test_manager.execute(off_by_one, {"x": X}, lambda x: x)


def test_too_many_partitions(test_manager):
    test_manager.execute(too_many_partitions, {"x": X[:129]}, lambda x: x)


def test_not_emulated(test_manager):
    import nki

    nki.profile(scale_add)


def test_never_ends(test_manager):
    test_manager.execute(never_ends, {"x": X}, lambda x: x)


def test_stuck_in_one_call(test_manager):
    import signal
    import time

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the per-case alarm cannot fire
    time.sleep(120)


def test_process_dies(test_manager):
    os._exit(3)


def test_after_crash(test_manager):
    test_manager.execute(scale_add, {"x": X, "cfg": ScaleConfig(scale=0.5)}, _ref)
