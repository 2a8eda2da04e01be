"""Forms that a twenty-first batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: an RMSNorm's inverse root taken by ``nl.rsqrt`` of a ``(P, 1)`` row statistic.

The NKI 0.5.0 release notes (Improvements) move ``nl.rsqrt`` to the GpSimd Engine and drop its
PSUM inputs: "use nisa.activation directly if you need PSUM input". So from NKI 0.5.0 the
wrapper runs on GpSimd and a PSUM argument is refused at the kernel's line; before, it was a
Scalar Engine activation that read PSUM too (the emulator had kept that form under every
release)."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BufferError
from trncore.sim.runner import run_kernel, trace
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2101)
EPS = 1e-6


def rms_normalize(x, stat_in_psum):
    """Rows of ``x`` times ``rsqrt(mean(x^2) + eps)``. The row statistic is an SBUF tile (the
    valid form, as a public Mochi-1 RMSNorm writes it) or, for the neighbour, that tile copied to
    PSUM first."""
    p, d = x.shape
    t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=sq, data1=t, data2=t, op=nl.multiply)
    ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=ss, op=nl.add, data=sq, axis=1)
    stat = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=stat, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
    if stat_in_psum:
        held = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=held, src=stat)
        stat = held
    inv = nl.rsqrt(stat)  # HERE
    y = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=inv)
    out = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


def _want(x: np.ndarray) -> np.ndarray:
    xf = x.astype(np.float64)
    return xf / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + EPS)


@pytest.mark.parametrize("version", ["0.3", "0.4", "0.5", "0.6"])
def test_rsqrt_of_an_sbuf_row_statistic_matches_numpy(target: str, version: str) -> None:
    x = rng.standard_normal((96, 40)).astype(np.float32)
    got = run_kernel(rms_normalize, [x], {"stat_in_psum": False}, target=target, nki_version=version)
    np.testing.assert_allclose(got, _want(x), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize(("version", "engine"), [("0.4", "scalar"), ("0.5", "gpsimd")])
def test_rsqrt_engine_follows_the_release(version: str, engine: str) -> None:
    # the kernel's only Scalar Engine or GpSimd instruction is the rsqrt
    rep = trace(rms_normalize, ((96, 40), "float32"), nki_version=version, stat_in_psum=False).report()
    assert rep.instructions[engine] == 1
    assert rep.instructions["scalar" if engine == "gpsimd" else "gpsimd"] == 0


@pytest.mark.parametrize("version", ["0.3", "0.4"])
def test_rsqrt_of_a_psum_tile_runs_before_0_5(target: str, version: str) -> None:
    x = rng.standard_normal((64, 24)).astype(np.float32)
    got = run_kernel(rms_normalize, [x], {"stat_in_psum": True}, target=target, nki_version=version)
    np.testing.assert_allclose(got, _want(x), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("version", ["0.5", "0.6"])
def test_rsqrt_of_a_psum_tile_is_refused_from_0_5(target: str, version: str) -> None:
    x = rng.standard_normal((64, 24)).astype(np.float32)
    with pytest.raises(BufferError) as exc:
        run_kernel(rms_normalize, [x], {"stat_in_psum": True}, target=target, nki_version=version)
    assert exc.value.rule == "rsqrt-psum"
    assert "nisa.activation(op=nl.rsqrt)" in str(exc.value)
    assert_reported_at(exc.value, rms_normalize)
