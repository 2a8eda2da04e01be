"""Forms that a fifteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/conformance.md, "Third-party kernels"), in kernels of our own, each next to its
invalid neighbour: heads split over the programs of an LNC=2 launch with the last program taking
the remainder, so that one program may own no head and run its Tensor Engine work on empty
tiles."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import CapacityError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1501)

# ------------------------------------------------------------------ an empty TensorE output
# A public KDA decode kernel gives each program BH // programs heads and the last one the
# remainder; with one head at LNC=2, program 0 owns none and its per-head tiles are [K, 0] and
# [1, 0]. Empty tiles are no-ops for every instruction; nc_matmul was the exception: its one-bank
# check (AWS Trainium/Inferentia2 Architecture Guide for NKI, "Tile Size", NKI 0.3.0-0.6.0: "each
# nc_matmul can only write to a single PSUM bank") counted the empty output as reaching bank -1
# and refused it. An empty output writes no bank; an output over two banks is still refused.


def head_col_sums(x, col0):
    """out[0, h * V + j] = sum_p x[h, p, j]: heads split over the programs, the last program taking
    the remainder; one ones-column matmul per program over its heads side by side, written from
    column ``col0`` of a two-bank PSUM tile (past 512 - heads * V the output crosses into the
    second bank: the neighbour)."""
    bh, p, v = x.shape
    programs = nl.num_programs(0)
    pid = nl.program_id(0)
    local = bh // programs
    start = pid * local
    if pid == programs - 1:
        local = bh - start
    ones = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    x_sb = nl.ndarray((p, local * v), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x.ap(pattern=[[v, p], [p * v, local], [1, v]], offset=start * p * v))
    acc = nl.ndarray((1, 1024), dtype=nl.float32, buffer=nl.psum)
    cols = acc[:, col0 : col0 + local * v]
    nisa.nc_matmul(dst=cols, stationary=ones, moving=x_sb)  # HERE
    res = nl.ndarray((1, local * v), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=cols)
    out = nl.ndarray((1, bh * v), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, start * v : (start + local) * v], src=res)
    return out


@pytest.mark.parametrize("bh", [1, 3])
def test_program_with_no_head_matches_numpy(bh: int) -> None:
    x = rng.standard_normal((bh, 64, 96)).astype(np.float32)
    got = run_kernel(head_col_sums, [x, 0], target="trn2", lnc=2)
    np.testing.assert_allclose(got, x.sum(axis=1).reshape(1, -1), rtol=1e-5, atol=1e-5)


def test_matmul_output_over_two_banks_is_still_refused_at_its_line(target: str) -> None:
    x = rng.standard_normal((1, 64, 200)).astype(np.float32)  # columns 400-599: bytes 1600-2400
    with pytest.raises(CapacityError, match="psum-tile-bank") as info:
        run_kernel(head_col_sums, [x, 400], target=target)
    assert "banks 0-1" in str(info.value)
    assert_reported_at(info.value, head_col_sums)
