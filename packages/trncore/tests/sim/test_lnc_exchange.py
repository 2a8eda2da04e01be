"""LNC=2 exchanges between the two cores of a launch: nisa.sendrecv and nisa.core_barrier.

Semantics from the nki.isa API pages (NKI 0.3.0): sendrecv sends src to the dst of core
send_to_rank while receiving into dst from recv_from_rank (the page's ring example); core_barrier
lets both cores read a shared HBM tensor both wrote halves of. Both need trn2 and kernel[2].
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, ShapeError, TargetError
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator


def swap_halves(x):
    """Each core loads its half of x, swaps it with the other core, writes what it received."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    other = 1 - me
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[me * half : (me + 1) * half, :])
    got = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=other, recv_from_rank=other, pipe_id=0)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=got)
    return out


def test_sendrecv_swaps_the_cores_tiles_and_replays() -> None:
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    expected = np.concatenate([x[32:], x[:32]])
    for _ in range(2):  # traced, then replayed from the recorded program
        np.testing.assert_array_equal(run_kernel(swap_halves, [x], target="trn2", lnc=2), expected)


def test_core_barrier_orders_writes_before_reads() -> None:
    def mirror(x):
        rows, cols = x.shape
        half = rows // 2
        me = nl.program_id(axis=0)
        shared = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me * half : (me + 1) * half, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=10.0)
        nisa.dma_copy(dst=shared[me * half : (me + 1) * half, :], src=t)
        nisa.core_barrier(data=shared, cores=(0, 1))
        # each core now reads the half the other core wrote
        other = 1 - me
        u = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=shared[other * half : (other + 1) * half, :])
        out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=u)
        return shared, out

    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    shared, out = run_kernel(mirror, [x], target="trn2", lnc=2)
    np.testing.assert_array_equal(shared, 10 * x)
    np.testing.assert_array_equal(out, 10 * np.concatenate([x[16:], x[:16]]))


def test_exchange_invalid_neighbours() -> None:
    x = np.zeros((64, 8), np.float32)
    with pytest.raises(TargetError, match=r"sendrecv-target|lnc-target"):
        run_kernel(swap_halves, [x], target="trn1", lnc=2)  # NeuronCore-v2 has no LNC=2
    with pytest.raises(LanguageError, match=r"sendrecv-lnc.*test_lnc_exchange.py:\d+"):
        run_kernel(swap_halves, [x], target="trn2", lnc=1)  # no partner core

    def one_sided(a):
        me = nl.program_id(axis=0)
        t = nl.ndarray((32, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:32, :])
        if me == 0:  # core 1 never reaches its sendrecv
            nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        out = nl.ndarray((32, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(LanguageError, match=r"lnc-unmatched-exchange.*test_lnc_exchange.py:\d+"):
        run_kernel(one_sided, [x], target="trn2", lnc=2)

    def gpsimd_too_wide(a):
        me = nl.program_id(axis=0)
        t = nl.ndarray((32, 512), dtype=nl.float32, buffer=nl.sbuf)  # 2048 bytes per partition
        nisa.memset(dst=t, value=0.0)
        nisa.sendrecv(src=t, dst=t, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0,
                      dma_engine=nisa.dma_engine.gpsimd_dma)  # fmt: skip
        return a

    with pytest.raises(ShapeError, match="sendrecv-gpsimd-dma"):
        run_kernel(gpsimd_too_wide, [x], target="trn2", lnc=2)
