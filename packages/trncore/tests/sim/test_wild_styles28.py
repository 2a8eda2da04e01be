"""Forms that a twenty-eighth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own.

A paged KV-cache scatter whose caller always launches it as ``kernel[2]``: the two programs of
the LNC=2 launch split the work by ``nl.program_id(0)`` (one scatters V, the other K, each row
through a ``vector_offset`` index under ``oob_mode.skip``) and the caches are returned as they
were updated in place. A driver that hands that launched kernel to :func:`run_kernel`,
:func:`trace` or :func:`trncore.sim.report` ran one program ("Using Logical Neuron Cores", NKI
0.3.0 to 0.6.0: ``kernel[2]`` launches two): the K cache was never written, the report showed
half the instructions, and on trn1 nothing refused the LNC=2 launch. They now run the grid the
kernel carries, as ``kernel[2](...)`` and ``nki.simulate(kernel[2])`` do.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import trncore.sim
from trncore.sim import nisa, nki, nl
from trncore.sim.errors import TargetError
from trncore.sim.runner import run_kernel, run_ranks, trace
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2801)
SKIP = 0x7FFFFFFF  # a row index past any cache: dropped under oob_mode.skip
D = 64


@nki.jit
def split_scatter(k_cache, v_cache, k_new, v_new, rows):
    """``v_cache[rows[i]] = v_new[i]`` on program 0, ``k_cache[rows[i]] = k_new[i]`` on program 1
    (LNC=2 only); out-of-range rows are skipped. Returns the caches, updated in place."""
    n, d = k_new.shape
    idx = nl.ndarray((n, 1), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    cache, new = (v_cache, v_new) if nl.program_id(0) == 0 else (k_cache, k_new)
    t = nl.ndarray((n, d), dtype=new.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=new)
    dst = cache.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx, indirect_dim=0)
    nisa.dma_copy(dst=dst, src=t, oob_mode=nisa.oob_mode.skip)
    return k_cache, v_cache


def scatter_reference(cache: np.ndarray, new: np.ndarray, rows: np.ndarray) -> np.ndarray:
    want = cache.copy()
    for i, r in enumerate(rows.ravel()):
        if 0 <= r < len(want):
            want[r] = new[i]
    return want


def _inputs() -> dict[str, np.ndarray]:
    rows = np.array([[3], [SKIP], [0], [9]], np.int32)
    return {
        "k_cache": rng.standard_normal((12, D)).astype(np.float32),
        "v_cache": rng.standard_normal((12, D)).astype(np.float32),
        "k_new": rng.standard_normal((4, D)).astype(np.float32),
        "v_new": rng.standard_normal((4, D)).astype(np.float32),
        "rows": rows,
    }


def test_run_kernel_runs_the_grid_of_a_launched_kernel() -> None:
    a = _inputs()
    want_k = scatter_reference(a["k_cache"], a["k_new"], a["rows"])
    want_v = scatter_reference(a["v_cache"], a["v_new"], a["rows"])
    got_k, got_v = run_kernel(split_scatter[2], [], dict(a), target="trn2")
    np.testing.assert_array_equal(got_k, want_k)  # program 1's work: was never done
    np.testing.assert_array_equal(got_v, want_v)
    np.testing.assert_array_equal(a["k_cache"], want_k)  # in place, as nki.simulate
    b = _inputs()
    called_k, called_v = split_scatter[2](**b)
    np.testing.assert_array_equal(called_k, scatter_reference(b["k_cache"], b["k_new"], b["rows"]))
    np.testing.assert_array_equal(called_v, scatter_reference(b["v_cache"], b["v_new"], b["rows"]))


def test_trace_and_report_of_a_launched_kernel_are_its_lnc2_program() -> None:
    specs = (((12, D), "float32"),) * 2 + (((4, D), "float32"),) * 2 + (((4, 1), "int32"),)
    launched = trace(split_scatter[2], *specs, target="trn2")
    assert launched.lnc == 2
    by_lnc = trace(split_scatter, *specs, target="trn2", lnc=2)
    got = trncore.sim.report(split_scatter[2], *specs, target="trn2").as_dict()
    want = trncore.sim.report(split_scatter, *specs, target="trn2", lnc=2).as_dict()
    assert len(launched.instrs) == len(by_lnc.instrs)
    # each program loads the index and its rows and scatters them: 3 DMAs each
    assert got["instructions"]["dma"] == want["instructions"]["dma"] == 6
    assert got["min_traffic_bytes"] == want["min_traffic_bytes"]


def test_a_launched_lnc2_kernel_is_refused_on_trn1_at_its_launch() -> None:
    a = _inputs()
    with pytest.raises(TargetError, match="lnc-target") as err:
        run_kernel(split_scatter[2], [], a, target="trn1")  # HERE
    assert_reported_at(err.value, test_a_launched_lnc2_kernel_is_refused_on_trn1_at_its_launch)
    with pytest.raises(TargetError, match="lnc-target"):
        trace(split_scatter[2], ((12, D), "float32"), ((12, D), "float32"), ((4, D), "float32"),
              ((4, D), "float32"), ((4, 1), "int32"), target="trn1")  # fmt: skip


def test_a_second_grid_must_agree_with_the_launched_one() -> None:
    a = _inputs()
    with pytest.raises(ValueError, match=r"lnc=1 conflicts with the launch grid of kernel\[2\]"):
        run_kernel(split_scatter[2], [], a, target="trn2", lnc=1)
    want_k = scatter_reference(a["k_cache"], a["k_new"], a["rows"])
    got_k, _ = run_kernel(split_scatter[2], [], a, target="trn2", lnc=2)  # the same grid twice
    np.testing.assert_array_equal(got_k, want_k)


def test_timeline_and_run_ranks_take_the_launched_grid_too() -> None:
    specs = (((12, D), "float32"),) * 2 + (((4, D), "float32"),) * 2 + (((4, 1), "int32"),)
    launched = trncore.sim.timeline(split_scatter[2], *specs, target="trn2")
    by_lnc = trncore.sim.timeline(split_scatter, *specs, target="trn2", lnc=2)
    assert len(launched.bars) == len(by_lnc.bars) > 0
    inputs = [_inputs(), _inputs()]
    wants = [scatter_reference(a["k_cache"], a["k_new"], a["rows"]) for a in inputs]
    for (got_k, _), want in zip(run_ranks(split_scatter[2], inputs, target="trn2"), wants, strict=True):
        np.testing.assert_array_equal(got_k, want)


def _scaled_into(x, out):
    """``out`` (an argument the kernel writes in place) = 2 * ``x``; returns ``out``."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)  # (writes the argument out)
    return out


def test_aliased_arguments_the_kernel_writes_are_warned_at_the_call() -> None:
    """The twenty-eighth batch's scatter takes its K and V caches as two arguments; passed the same
    array twice, the emulator's copies part (each argument its own HBM tensor). A kernel writing
    one of two arguments that share memory is warned at the caller's line; distinct arrays, or
    one array passed twice and only read, are not."""
    x = rng.standard_normal((4, 32)).astype(np.float32)
    out = np.zeros_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_kernel(_scaled_into, [x, out], target="trn2")
        np.testing.assert_array_equal(got, 2 * x)
        np.testing.assert_array_equal(out, 2 * x)  # (written in place, as nki.simulate does)
        run_kernel(_rows_plus, [x, x], target="trn2")  # read twice: no warning
    same = x.copy()
    line = inspect.currentframe().f_lineno + 2
    with pytest.warns(UserWarning, match=r"kernel arguments 'x' and 'out' share memory") as rec:
        run_kernel(_scaled_into, [same, same], target="trn2")
    sites = [(w.filename, w.lineno) for w in rec]
    assert (__file__, line) in sites, sites
    half = x.copy()
    with pytest.warns(UserWarning, match=r"share memory"):
        run_kernel(_scaled_into, [half[:, 0:16], half[:, 8:24]], target="trn2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_kernel(_scaled_into, [half[:, 0:16].copy(), half[:, 16:32]], target="trn2")


def _rows_plus(a, b):
    """``a + b`` (both only read)."""
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=ta)
    return out
