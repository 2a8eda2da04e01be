"""A form a twenty-fifth batch of public third-party NKI kernels (kernels of GitHub issue threads and
repositories that carry a compiler or hardware verdict, docs/third-party-kernels.md) writes, in
kernels of our own, next to its neighbour: an ``nc_matmul`` whose operands hold inf (a chunked
DeltaNet kernel's split decay ``exp(gc[i]) * exp(-gc[j])`` overflows float32, and its author
reports NaN logits on the device). TensorE computes IEEE float32 without traps, so the emulator
gives inf * 0 = NaN silently on every engine; NumPy's "invalid value encountered in matmul" (and in
an activation's scale multiply or bias add, and in tensor_reduce) used to come out of the emulator
(an exception inside NumPy, without the kernel's line, under ``-W error``). The runs are now under
``np.errstate(all="ignore")`` (trncore.sim.dtypes.ieee_arithmetic) in every thread that runs
instructions: a trace, each LNC core's thread and a replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode
from trncore.sim.errors import UninitializedReadError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2525)


def split_decay(g_col, w):
    """``exp(g).T @ w`` on TensorE: [P, N] float32 (``g_col`` [K, P] log-decays, ``w`` [K, N])."""
    g = nl.ndarray(g_col.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=g_col)
    e = nl.ndarray(g_col.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=g)
    m = nl.ndarray(w.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=w)
    p = nl.ndarray((g_col.shape[1], w.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=e, moving=m)
    o = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=p)
    out = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def split_decay_unwritten(g_col, w):
    """The neighbour: the stationary tile is never written (its exp is left out)."""
    e = nl.ndarray(g_col.shape, dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray(w.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=w)
    p = nl.ndarray((g_col.shape[1], w.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=e, moving=m)  # HERE
    out = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=p)
    return out


def _operands():
    # log-decays up to 100 (exp overflows float32 past ~88.7) and a moving tile with zeros, so
    # the product has inf * 0 (NaN), inf * x (inf) and finite entries
    g = rng.uniform(-4.0, 4.0, size=(64, 32)).astype(np.float32)
    g[5, :8] = 100.0
    w = rng.standard_normal((64, 48)).astype(np.float32)
    w[5, :6] = 0.0
    return g, w


def _ref(g, w):
    with np.errstate(all="ignore"):
        return np.exp(g.astype(np.float32)).T @ w


@pytest.mark.parametrize(("target", "lnc"), [("trn1", None), ("trn2", None), ("trn2", 2)])
def test_matmul_of_inf_gives_ieee_nan_and_inf_without_a_numpy_warning(target: str, lnc) -> None:
    g, w = _operands()
    want = _ref(g, w)
    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would raise here
        got = np.asarray(run_kernel(split_decay, [g, w], target=target, lnc=lnc))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-4)


def test_matmul_of_inf_replays_the_same() -> None:
    g, w = _operands()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = np.asarray(run_kernel(split_decay, [g, w], target="trn2"))
        again = np.asarray(run_kernel(split_decay, [g, w], target="trn2"))
    np.testing.assert_array_equal(first, again)


def scaled_rowsum(x):
    """``exp(0 * x + b)`` with ``b = -x[:, :1]`` on ScalarE, then each row's sum on VectorE."""
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    b = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=b, data=s[:, 0:1], op0=nl.multiply, operand0=-1.0)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=s, bias=b, scale=0.0)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=s, axis=(1,))
    out = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, 0:1], src=r)
    nisa.dma_copy(dst=out[:, 1:2], src=e[:, 1:2])
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_activation_and_reduce_of_inf_give_ieee_values_without_a_numpy_warning(target: str) -> None:
    x = rng.standard_normal((16, 8)).astype(np.float32)
    x[0, 0], x[1, 1], x[2, :2] = np.inf, -np.inf, (np.inf, -np.inf)
    with np.errstate(all="ignore"):
        b = -x[:, :1]
        want_exp = np.exp(np.float32(0.0) * x[:, 1:2] + b)  # 0 * inf is NaN
        want_sum = x.sum(axis=1, keepdims=True)  # inf + -inf is NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = np.asarray(run_kernel(scaled_rowsum, [x], target=target))
    for col, want in ((0, want_sum), (1, want_exp)):
        np.testing.assert_array_equal(np.isnan(got[:, col : col + 1]), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got[:, col : col + 1]), np.isinf(want))
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[:, col : col + 1][fin], want[fin], rtol=1e-5, atol=1e-6)


def test_unwritten_stationary_is_still_refused_at_the_matmul_line_in_strict_mode() -> None:
    g, w = _operands()
    with strict_mode(), pytest.raises(UninitializedReadError) as info:
        run_kernel(split_decay_unwritten, [g, w], target="trn2")
    assert_reported_at(info.value, split_decay_unwritten)
