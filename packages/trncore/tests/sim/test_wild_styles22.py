"""Forms that a twenty-second batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own.

1. (A kernel of the ninth batch, rerun by the twenty-second for its cost report.) A depthwise
   convolution whose two float32 accumulation chains (a ScalarE ``activation`` with a
   per-partition ``scale`` tile, VectorE ``scalar_tensor_tensor`` steps) are merged by
   ``nisa.dma_compute`` straight into a bfloat16 HBM output, and a plain converting store (a
   float32 tile to a bfloat16 tensor). A DMA converts element types on the way ("first casting
   from src.dtype to float32, then from float32 to dst.dtype", nki.isa.dma_copy, NKI 0.3.0 and
   0.6.0; ``dma_compute`` sums in float32 and casts to ``dst.dtype``, same releases), so the bytes
   such a DMA writes to HBM are the destination's. The cost report counted the sources' bytes
   (4x for the merge, 2x for the store), and a kernel reading and writing each element once
   showed 2.5x its minimum traffic.
2. An average pool that reduces one channel at a time, indexing the partition axis with an
   integer (on-chip views keep it at size 1, NKI language guide, SDK 2.31): a 1-partition access
   must start at partition 0, 32, 64 or 96 (the start-partition rule, AWS Trainium/Inferentia2
   architecture guide for NKI, NKI 0.3.0 and 0.6.0), so a channel loop over every partition is
   refused at the reduction's line, and one over quadrant starts runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import PartitionError
from trncore.sim.runner import run_kernel, trace
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2201)


def depthwise_two_chains(x, taps):
    """``out[c, q] = sum_s taps[c, s] * x[c, q + s]`` (valid positions), the even taps on ScalarE
    and the odd ones on VectorE, merged while storing by ``dma_compute``."""
    c, w = x.shape
    s = taps.shape[1]
    q = w - s + 1
    xt = nl.ndarray((c, w), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt, src=x)
    wt = nl.ndarray((c, s), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=taps)
    acc = nl.ndarray((c, 4, q), dtype=nl.float32, buffer=nl.sbuf)
    results = []
    for chain in range(2):
        base = 2 * chain
        nisa.activation(dst=acc[:, base, :], op=nl.copy, data=xt[:, chain:chain + q],
                        scale=wt[:, chain:chain + 1])  # fmt: skip
        last = base
        for tap in range(chain + 2, s, 2):
            nxt = base + 1 - (last - base)
            nisa.scalar_tensor_tensor(dst=acc[:, nxt, :], data=xt[:, tap:tap + q], op0=nl.multiply,
                                      operand0=wt[:, tap:tap + 1], op1=nl.add,
                                      operand1=acc[:, last, :])  # fmt: skip
            last = nxt
        results.append(acc[:, last, :])
    out = nl.ndarray((c, q), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_compute(dst=out, srcs=results, reduce_op=nl.add)
    return out


def widen_and_store(x):
    """``x`` through a float32 tile: a loading and a storing conversion."""
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def narrow_in_hbm(x):
    """A float32 tensor converted to bfloat16 by one HBM-to-HBM DMA."""
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def _depthwise_want(x: np.ndarray, taps: np.ndarray) -> np.ndarray:
    s = taps.shape[1]
    q = x.shape[1] - s + 1
    xf = x.astype(np.float64)
    return sum(taps[:, k:k + 1].astype(np.float64) * xf[:, k:k + q] for k in range(s))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_dma_compute_merge_matches_numpy(target: str, dtype: str) -> None:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    x = rng.standard_normal((96, 70)).astype(np_dtype)
    taps = rng.standard_normal((96, 5)).astype(np.float32)
    got = np.asarray(run_kernel(depthwise_two_chains, [x, taps], {}, target=target), np.float64)
    want = _depthwise_want(x, taps)
    tol = 1e-2 if dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(("dtype", "itemsize"), [("bfloat16", 2), ("float32", 4)])
def test_report_counts_the_bytes_a_dma_compute_writes_to_hbm(target: str, dtype: str, itemsize: int) -> None:
    c, w, s = 96, 70, 5
    q = w - s + 1
    rep = trace(depthwise_two_chains, ((c, w), dtype), ((c, s), "float32"), target=target).report()
    assert rep.dma_bytes_out == c * q * itemsize  # the output, once, at its own dtype
    assert rep.dma_bytes_in == c * w * itemsize + c * s * 4
    assert rep.traffic_over_min == pytest.approx(1.0)


def test_report_counts_a_converting_store_at_the_hbm_dtype(target: str) -> None:
    rep = trace(widen_and_store, ((128, 512), "bfloat16"), target=target).report()
    assert rep.dma_bytes_in == rep.dma_bytes_out == 128 * 512 * 2
    assert rep.traffic_over_min == pytest.approx(1.0)
    same = trace(widen_and_store, ((128, 512), "float32"), target=target).report()
    assert same.dma_bytes_in == same.dma_bytes_out == 128 * 512 * 4


def test_report_counts_an_hbm_to_hbm_conversion_on_both_sides(target: str) -> None:
    rep = trace(narrow_in_hbm, ((64, 256), "float32"), target=target).report()
    assert rep.dma_bytes_in == rep.dma_bytes_out == 0
    assert rep.dma_bytes_other == 64 * 256 * 4
    # read 4 bytes and write 2 per element: the minimum, each input read once and output written once
    assert rep.min_traffic_bytes == 64 * 256 * (4 + 2)
    assert rep.traffic_over_min == pytest.approx(1.0)


def avgpool_per_channel(x, pool, channels):
    """``(C, H, W)`` average pool with ``pool x pool`` windows, one channel of ``channels`` at a
    time: ``t[c, ...]`` is a 1-partition view starting at partition ``c``."""
    _, h, w = x.shape
    ho, wo = h // pool, w // pool
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((x.shape[0], ho, wo), dtype=x.dtype, buffer=nl.shared_hbm)
    for c in channels:
        for i in range(ho):
            for j in range(wo):
                window = t[c, i * pool:(i + 1) * pool, j * pool:(j + 1) * pool]
                total = nl.sum(window, axis=[1, 2], keepdims=True)  # HERE
                mean = nl.ndarray(total.shape, dtype=total.dtype, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=mean, data=total, op0=nl.multiply, operand0=1.0 / (pool * pool))
                out[c, i, j] = mean
    return out


def test_integer_partition_index_at_quadrant_starts_runs(target: str) -> None:
    x = rng.standard_normal((128, 6, 4)).astype(np.float32)
    quadrants = (0, 32, 64, 96)
    got = np.asarray(run_kernel(avgpool_per_channel, [x], {"pool": 2, "channels": quadrants}, target=target))
    want = x.astype(np.float64).reshape(128, 3, 2, 2, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(got[list(quadrants)], want[list(quadrants)], rtol=1e-6, atol=1e-6)


def test_integer_partition_index_off_a_quadrant_start_is_refused(target: str) -> None:
    x = rng.standard_normal((8, 4, 4)).astype(np.float32)
    with pytest.raises(PartitionError) as exc:
        run_kernel(avgpool_per_channel, [x], {"pool": 2, "channels": tuple(range(8))}, target=target)
    assert exc.value.rule == "start-partition"
    assert "starting at partition 1" in str(exc.value)
    assert_reported_at(exc.value, avgpool_per_channel)


def upsample_rows_2x(x):
    """Nearest 2x upsample of ``(R, W)`` rows: columns doubled by two stride-2 SBUF writes, rows by
    two stride-2-row DMA stores (the public Flux VAE kernel's form)."""
    r, w = x.shape
    out = nl.ndarray((2 * r, 2 * w), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((r + 127) // 128):
        r0 = t * 128
        p = min(128, r - r0)
        tile = nl.ndarray((p, w), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[r0:r0 + p, :])
        wide = nl.ndarray((p, 2 * w), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=wide.ap(pattern=[[2 * w, p], [2, w]]), src=tile)
        nisa.tensor_copy(dst=wide.ap(pattern=[[2 * w, p], [2, w]], offset=1), src=tile)
        for half in range(2):
            nisa.dma_copy(dst=out.ap(pattern=[[4 * w, p], [1, 2 * w]], offset=(2 * r0 + half) * 2 * w),
                          src=wide)  # fmt: skip
    return out


def test_upsample_rows_matches_numpy_and_no_lane_idles_below_zero(target: str) -> None:
    x = rng.standard_normal((300, 20)).astype(np.float32)
    got = run_kernel(upsample_rows_2x, [x], {}, target=target)
    np.testing.assert_array_equal(got, x.repeat(2, axis=0).repeat(2, axis=1))
    # a lane busy for the whole modelled time idles 0 s, not -0.00 us from rounding in the sums
    for shape in ((300, 20), (2 * 3 * 50, 20)):
        rep = trace(upsample_rows_2x, (shape, "float32"), target=target).report()
        assert min(rep.idle_seconds.values()) >= 0.0
