"""Forms that a nineteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: a software pipeline whose PSUM tiles are rings of entries, each entry written
afresh for one head and read back before the entry comes round again (a public KDA decode kernel
keeps six ``[1, 3, 128]`` and six ``[128, 128]`` float32 entries, twelve tiles for eight banks,
and runs in its authors' trn1 and trn2 deployments). Counted over their whole lifetimes the
entries need twelve banks; counted while a value they hold is still to be read, a few."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode
from trncore.sim.errors import CapacityError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1901)

RING = 6  # entries per ring: two rings of six PSUM tiles, twelve tiles for eight banks


def _ring(shape):
    """RING PSUM tiles of ``shape`` (float32), each a tensor of its own."""
    return [nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum) for _ in range(RING)]  # HERE


def ring_heads(a, b, c, keep_live, in_loop=False):
    """Per head h: rows[h] = [a_h^T b, a_h^T c] (two products into one [1, 2, 128] ring entry) and
    outer = sum_h r_h^T r_h with r_h = a_h^T c (a K = 1 product into one [128, 128] entry per head,
    added into SBUF), a_h = a[:, h]. ``keep_live`` (the neighbour): every entry keeps
    accumulating over the heads that use it and is read only after the last head, so each one's
    value is live throughout. ``in_loop`` (the other neighbour): the heads in an ``nl.fori_loop``.
    """
    heads = a.shape[1]
    rows = nl.ndarray((1, heads, 2, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    outer = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((128, heads), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a)
    b_sb = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=b)
    c_sb = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=c)
    rows_sb = nl.ndarray((1, heads, 2, 128), dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    pr, po = _ring((1, 2, 128)), _ring((128, 128))

    def head(h):
        e, again = h % RING, keep_live and h >= RING
        nisa.nc_matmul(dst=pr[e][:, 0, :], stationary=a_sb[:, h : h + 1], moving=b_sb, accumulate=again)
        nisa.nc_matmul(dst=pr[e][:, 1, :], stationary=a_sb[:, h : h + 1], moving=c_sb, accumulate=again)
        row = nl.ndarray((1, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=row, src=pr[e][:, 1, :])
        nisa.nc_matmul(dst=po[e], stationary=row, moving=row, accumulate=again)  # K = 1: row^T row
        if not keep_live:
            nisa.tensor_copy(dst=rows_sb[:, h, :, :], src=pr[e])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=po[e], op=nl.add)

    if in_loop:
        nl.fori_loop(0, heads, head)
    else:
        for h in range(heads):
            head(h)
    if keep_live:
        for e in range(RING):
            nisa.tensor_copy(dst=rows_sb[:, e, :, :], src=pr[e])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=po[e], op=nl.add)
    nisa.dma_copy(dst=rows, src=rows_sb)
    nisa.dma_copy(dst=outer, src=acc)
    return rows, outer


def _inputs(heads: int) -> tuple[np.ndarray, ...]:
    a = (rng.standard_normal((128, heads)) / 8).astype(np.float32)
    b = rng.standard_normal((128, 128)).astype(np.float32)
    c = rng.standard_normal((128, 128)).astype(np.float32)
    return a, b, c


def test_psum_ring_entries_reused_per_head_run_with_a_warning(target: str) -> None:
    a, b, c = _inputs(16)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        rows, outer = run_kernel(ring_heads, [a, b, c], {"keep_live": False}, target=target)
    r = a.T.astype(np.float64) @ c
    np.testing.assert_allclose(rows[0, :, 0, :], a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rows[0, :, 1, :], r, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outer, r.T @ r, rtol=1e-4, atol=1e-4)
    hits = [w for w in record if "holds its bank" in str(w.message)]
    assert hits and all(w.lineno == marked_line(_ring) for w in hits)


def test_psum_ring_reuse_is_refused_in_strict_mode(target: str) -> None:
    a, b, c = _inputs(16)
    with strict_mode(), pytest.raises(CapacityError) as exc:
        run_kernel(ring_heads, [a, b, c], {"keep_live": False}, target=target)
    assert exc.value.rule == "psum-banks"
    assert_reported_at(exc.value, _ring)


def test_psum_ring_values_live_throughout_are_refused(target: str) -> None:
    # every entry accumulates over its heads and is read after the last: twelve live values
    a, b, c = _inputs(12)
    with pytest.raises(CapacityError) as exc:
        run_kernel(ring_heads, [a, b, c], {"keep_live": True}, target=target)
    assert exc.value.rule == "psum-banks"
    assert_reported_at(exc.value, _ring)


def test_psum_ring_within_eight_banks_runs_quietly(target: str) -> None:
    # six heads: each entry used once, at most eight tiles live by either count, no warning
    a, b, c = _inputs(6)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        rows, _ = run_kernel(ring_heads, [a, b, c], {"keep_live": False}, target=target)
    np.testing.assert_allclose(rows[0, :, 1, :], a.T.astype(np.float64) @ c, rtol=1e-5, atol=1e-5)
    assert not [w for w in record if "holds its bank" in str(w.message)]


def test_psum_ring_in_a_dynamic_loop_is_refused(target: str) -> None:
    # "Inside a dynamic_range loop the compiler must keep all live tensors in on-chip memory
    # (SBUF/PSUM) for the entire duration of the loop" (Dynamic Loops deep dive, NKI 0.6.0)
    a, b, c = _inputs(16)
    with pytest.raises(CapacityError) as exc:
        run_kernel(ring_heads, [a, b, c], {"keep_live": False, "in_loop": True}, target=target)
    assert exc.value.rule == "psum-banks"
    assert_reported_at(exc.value, _ring)
