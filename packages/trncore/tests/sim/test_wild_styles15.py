"""Forms that a fifteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: heads split over the programs of an LNC=2 launch with the last program taking
the remainder, so that one program may own no head and run its Tensor Engine work on empty
tiles or on tiles of no partition; and, for such a program, a reduction over nothing, which no
page defines."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import CapacityError, LanguageError, PartitionError, ShapeError
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


def _share(n):
    """(start, count) of this program's share of ``n`` items: ``n // programs`` each, the last
    program taking the remainder (the public KDA decode step's split of its heads)."""
    programs = nl.num_programs(0)
    pid = nl.program_id(0)
    local = n // programs
    start = pid * local
    if pid == programs - 1:
        local = n - start
    return start, local


def head_col_sums(x, col0):
    """out[0, h * V + j] = sum_p x[h, p, j]: heads split over the programs, the last program taking
    the remainder; one ones-column matmul per program over its heads side by side, written from
    column ``col0`` of a two-bank PSUM tile (past 512 - heads * V the output crosses into the
    second bank: the neighbour)."""
    bh, p, v = x.shape
    start, local = _share(bh)
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


# ------------------------------------------------------------------ a reduction over nothing
# With the same split, a program owning no column and reducing its slice reduces nothing: no
# reducing instruction's page (nki.isa.tensor_reduce, tensor_scalar_reduce, activation's reduce,
# select_reduce, tensor_partition_reduce, nc_matmul's K; NKI 0.3.0-0.6.0) defines that value, and
# a maximum of nothing has none. The emulator crashed in NumPy ("zero-size array to reduction
# operation maximum which has no identity", no kernel line); it is refused at the line.


def shard_row_max(x):
    """out[p, i] = max over program i's columns of x[p, :]: columns split over the programs, the
    last taking the remainder; each program writes its own column of ``out``."""
    p, c = x.shape
    start, local = _share(c)
    x_sb = nl.ndarray((p, local), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x[:, start : start + local])
    top = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=top, op=nl.maximum, data=x_sb, axis=1)  # HERE
    programs, pid = nl.num_programs(0), nl.program_id(0)
    out = nl.ndarray((p, programs), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, pid : pid + 1], src=top)
    return out


def test_sharded_row_max_matches_numpy() -> None:
    x = rng.standard_normal((128, 5)).astype(np.float32)
    got = run_kernel(shard_row_max, [x], target="trn2", lnc=2)
    want = np.stack([x[:, 0:2].max(axis=1), x[:, 2:5].max(axis=1)], axis=1)
    np.testing.assert_array_equal(got, want)


def test_reduction_of_an_empty_slice_is_refused_at_its_line() -> None:
    x = rng.standard_normal((128, 1)).astype(np.float32)  # program 0 owns no column
    with pytest.raises(ShapeError, match="reduce-empty") as info:
        run_kernel(shard_row_max, [x], target="trn2", lnc=2)
    assert_reported_at(info.value, shard_row_max)


def test_illegal_reduce_op_is_named_once() -> None:
    """The op-token error names an operator as ``nl.<name>`` (it printed ``nl.nl.maximum``)."""

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=t, op=nl.exp, data=t, reduce_op=nl.maximum, reduce_res=s)
        return x

    with pytest.raises(LanguageError, match="op-token") as info:
        run_kernel(kernel, [np.ones((4, 8), np.float32)], target="trn2")
    assert "reduce_op=nl.maximum is not legal here" in str(info.value)


# ------------------------------------------------------------------ a shard of no row
# Splitting rows (partitions) the same way leaves program 0 a [0, C] tile at one row. An
# instruction whose outputs are all empty writes nothing: activation and tensor_scalar on no
# partition crashed in NumPy (reshaping 0 rows) and the start-partition rule named "0
# partitions". A 16-row tile starting at partition 16 is still refused (AWS Trainium/Inferentia2
# Architecture Guide for NKI, NKI 0.3.0: at most 32 partitions start at 0, 32, 64 or 96).


def shard_rows_exp(x, first):
    """out[r, :] = 2 * exp(x[r, :]): rows split over the programs, the last taking the remainder,
    each program's rows placed from partition ``first`` of an SBUF tile."""
    r, c = x.shape
    start, local = _share(r)
    tile = nl.ndarray((128, c), dtype=nl.float32, buffer=nl.sbuf)
    rows = tile[first : first + local, :]
    nisa.dma_copy(dst=rows, src=x[start : start + local, :])
    nisa.activation(dst=rows, op=nl.exp, data=rows)  # HERE
    nisa.tensor_scalar(dst=rows, data=rows, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray((r, c), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[start : start + local, :], src=rows)
    return out


@pytest.mark.parametrize("r", [1, 5])
def test_program_with_no_row_matches_numpy(r: int) -> None:
    x = rng.standard_normal((r, 24)).astype(np.float32)
    got = run_kernel(shard_rows_exp, [x, 0], target="trn2", lnc=2)
    np.testing.assert_allclose(got, 2 * np.exp(x), rtol=1e-6, atol=1e-6)


def test_rows_from_a_disallowed_start_partition_are_still_refused_at_their_line(target: str) -> None:
    x = rng.standard_normal((16, 24)).astype(np.float32)
    with pytest.raises(PartitionError, match="start-partition") as info:
        run_kernel(shard_rows_exp, [x, 16], target=target)
    assert_reported_at(info.value, shard_rows_exp)
