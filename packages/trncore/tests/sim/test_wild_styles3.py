"""Forms that public third-party NKI 0.4-0.6 kernels write (checked against the emulator, see
docs/third-party-kernels.md), in kernels of our own, each next to its invalid
neighbour."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.errors import BoundsError, DtypeError, LanguageError, PartitionError
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2031)


def halves_by_program(x):
    """Each program (LNC core) doubles its half of the rows; program_id(0) picks the half."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs(0)
    r0 = nl.program_id(0) * half
    t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r0 : r0 + half, 0:cols])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[r0 : r0 + half, 0:cols], src=t)
    return out


def test_one_axis_tuple_grid_is_the_lnc_grid() -> None:
    # nki.language.program_id / num_programs (NKI 0.6.0) index "the launch grid"; a one-axis grid
    # written as a tuple is the same LNC=2 launch as kernel[2] (NKI 0.6.0 "LNC Overview").
    x = rng.standard_normal((64, 32)).astype(np.float32)
    got = jit(halves_by_program)[(2,)](x)
    np.testing.assert_array_equal(got, 2.0 * x)
    np.testing.assert_array_equal(jit(halves_by_program)[2](x), 2.0 * x)


@pytest.mark.filterwarnings("ignore:kernel.*N-D SPMD grid:UserWarning")  # test_spmd_grid.py
def test_two_axis_spmd_grid_runs_each_program() -> None:
    # A ragged paged-attention kernel launched kernel[(requests, heads)] reads program_id(1). The
    # nki.language pages (NKI 0.3.0 to 0.6.0) describe an N-D SPMD launch grid (program_ndim): its
    # programs run one after the other (trncore.sim.grid). Programs (i, 0) and (i, 1) double the
    # same half i, writing the same values, which any order leaves as they are.
    x = rng.standard_normal((64, 32)).astype(np.float32)
    kernel = jit(halves_by_program)
    np.testing.assert_array_equal(kernel[(2, 2)](x), 2.0 * x)
    np.testing.assert_array_equal(kernel(x), 2.0 * x)


def gather_transposed(src, idx, skip_oob):
    """Rows ``src[idx.T.flatten()]`` transposed into SBUF by one indirect dma_transpose."""
    p, n = idx.shape
    rows, cols = n * p, src.shape[1]
    out = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.shared_hbm)
    idx_sb = nl.ndarray((p, n), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx_sb, src=idx)
    dst = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=0)
    view = src.ap(pattern=[[cols, rows], [1, cols]], vector_offset=idx_sb, indirect_dim=0)
    mode = nisa.oob_mode.skip if skip_oob else nisa.oob_mode.error
    nisa.dma_transpose(dst=dst, src=view, axes=(1, 0), oob_mode=mode)  # HERE
    nisa.dma_copy(dst=out, src=dst)
    return out


def bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16)


def test_indirect_dma_transpose_takes_a_2d_index_tile_column_major() -> None:
    # nki.isa.dma_transpose, "DMA Indirect Transpose" (NKI 0.3.0 to 0.6.0): with a [128, N]
    # index tile, flat_indices = indices.T.flatten(); gathered = src[flat_indices]; dst =
    # gathered.T. A row-major reading gathers the same rows in another order.
    src = bf16(rng.standard_normal((300, 64)))
    idx = rng.integers(0, 300, (128, 2)).astype(np.uint32)
    got = jit(gather_transposed)(src, idx, False)
    np.testing.assert_array_equal(got, src[idx.T.reshape(-1)].T)
    assert not np.array_equal(got, src[idx.reshape(-1)].T)


def test_indirect_dma_transpose_honours_oob_mode() -> None:
    # Same page: oob_mode=skip skips an out-of-bounds index; oob_mode=error (the default) is a
    # runtime error, reported at the kernel's dma_transpose line.
    src = bf16(rng.standard_normal((100, 32)))
    idx = rng.integers(0, 100, (128, 1)).astype(np.uint32)
    idx[5, 0] = 1000
    got = jit(gather_transposed)(src, idx, True)
    keep = idx[:, 0] < 100
    np.testing.assert_array_equal(got[:, keep], src[idx[keep, 0]].T)
    np.testing.assert_array_equal(got[:, ~keep], 0)
    with pytest.raises(BoundsError) as info:
        jit(gather_transposed)(src, idx, False)
    assert_reported_at(info.value, gather_transposed)


def count_at_least(x, bound, bitwise):
    """Per row, how many elements are >= bound (a radix top-k round), by tensor_scalar_reduce."""
    rows, cols = x.shape
    out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    flags = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    count = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    op = nl.bitwise_and if bitwise else nl.greater_equal
    nisa.tensor_scalar_reduce(  # HERE
        dst=flags,
        data=t,
        op0=op,
        operand0=bound,
        reduce_op=nl.add,
        reduce_res=count,
    )
    nisa.dma_copy(dst=out, src=count)
    return out


def running_count_above(x, bound):
    """Per row, the running count of elements > bound (tensor_scalar_cumulative)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=r, src=t, op0=nl.greater, op1=nl.add, imm0=bound)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_comparison_ops_are_arithmetic_for_the_reducing_tensor_scalars() -> None:
    # nki.isa "Supported Math Operators" table (NKI 0.3.0 to 0.6.0) lists equal, greater_equal,
    # ... under "Arithmetic", and tensor_scalar_reduce / tensor_scalar_cumulative take any
    # arithmetic op0 (not bitvec): a comparison gives 1.0 / 0.0, so the reduction counts.
    x = rng.standard_normal((128, 300)).astype(np.float32)
    got = jit(count_at_least)(x, 0.25, False)
    np.testing.assert_array_equal(got, (x >= 0.25).sum(1, keepdims=True))
    np.testing.assert_array_equal(jit(running_count_above)(x, -0.5), np.cumsum(x > -0.5, axis=1))
    # the page's exclusion stays: a bitvec op0 is refused at the kernel's line
    with pytest.raises(LanguageError) as info:
        jit(count_at_least)(x.astype(np.int32), 1, True)
    assert info.value.rule == "op-token"
    assert_reported_at(info.value, count_at_least)


def radix_digits(keys, shifts):
    """Per partition, the 2-bit digit of every key at that partition's own bit position."""
    rows, cols = keys.shape
    out = nl.ndarray((rows, cols), dtype=nl.int32, buffer=nl.shared_hbm)
    k = nl.ndarray((rows, cols), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=k, src=keys)
    sh = nl.ndarray((rows, 1), dtype=shifts.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sh, src=shifts)
    d = nl.ndarray((rows, cols), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(  # HERE
        dst=d, data=k, op0=nl.right_shift, operand0=sh, op1=nl.bitwise_and, operand1=3
    )
    nisa.dma_copy(dst=out, src=d)
    return out


def test_bitvec_tensor_scalar_takes_a_per_partition_integer_operand() -> None:
    # nki.isa.tensor_scalar (NKI 0.3.0 to 0.6.0): operand0/operand1 are scalars or (P, 1) tiles;
    # bitvec operators work on integer bit patterns. A radix sort pass shifts by a (P, 1) int32
    # tile (its shift replicated over partitions).
    keys = rng.integers(0, 2**31 - 1, (128, 64)).astype(np.int32)
    shifts = rng.integers(0, 30, (128, 1)).astype(np.int32)
    got = jit(radix_digits)(keys, shifts)
    np.testing.assert_array_equal(got, (keys >> shifts) & 3)
    # a float tile is no bit pattern: refused at the kernel's line
    with pytest.raises(DtypeError) as info:
        jit(radix_digits)(keys, shifts.astype(np.float32))
    assert info.value.rule == "bitvec-int"
    assert_reported_at(info.value, radix_digits)


def two_named(t):
    """Two independent named instructions, then their sum (the Scheduling APIs guide's shape)."""
    x = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=t)
    a = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    b = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.reciprocal(dst=a, data=x, name="recip")
    nisa.tensor_scalar(dst=b, data=x, op0=nl.add, operand0=1.0, name="plus1")
    c = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_with_schedule_attaches_edges_and_keeps_results() -> None:
    # AWS "How to Use the NKI Scheduling APIs" (NKI 0.3.0 to 0.6.0): kernel.with_schedule([(name,
    # name or [names]), ...]) adds dependency edges; the first named instruction waits on the
    # others. They order independent instructions, so the values are the unscheduled kernel's.
    t = rng.uniform(0.5, 2.0, (128, 64)).astype(np.float32)
    kernel = jit(two_named)
    scheduled = kernel.with_schedule([("plus1", "recip")]).with_schedule([("plus1", ["recip"])])
    assert scheduled.schedule == (("plus1", "recip"), ("plus1", "recip"))
    assert scheduled[2].schedule == scheduled.schedule
    np.testing.assert_allclose(scheduled(t), 1.0 / t + t + 1.0, rtol=1e-6)
    # a malformed edge is refused at the call, naming the expected form
    with pytest.raises(TypeError, match=r"with_schedule: each edge must be a pair"):
        kernel.with_schedule([("plus1", 3)])
    with pytest.raises(TypeError, match=r"with_schedule: each edge must be a pair"):
        kernel.with_schedule(["plus1"])


def rows_by_index(table, picks, on_chip_dim0):
    """Each picked row of an HBM table, through a dynamic select whose index is a one-element
    `.ap` view of an SBUF index row (an expert-by-id load)."""
    e, p, f = table.shape
    n = picks.shape[1]
    idx = nl.ndarray((1, n), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=picks)
    out = nl.ndarray((n, p, f), dtype=table.dtype, buffer=nl.shared_hbm)
    for i in range(n):
        which = idx.ap(pattern=[[n, 1], [1, 1]], offset=i)
        buf = nl.ndarray((p, f), dtype=table.dtype, buffer=nl.sbuf)
        if on_chip_dim0:
            buf.select(0, which)  # HERE
        nisa.dma_copy(dst=buf, src=table.select(0, which))
        nisa.dma_copy(dst=out[i], src=buf)
    return out


def indirect_flags(table, picks):
    """Asserts, at trace time, which views the is_indirect page calls indirect."""
    idx = nl.ndarray((1, 4), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=picks)
    one = idx.ap(pattern=[[4, 1], [1, 1]], offset=0)
    assert table.select(0, one).is_indirect()
    assert table.ap(pattern=[[40, 32], [1, 40]], scalar_offset=one, indirect_dim=0).is_indirect()
    assert not table.select(0, 2).is_indirect() and not table.is_indirect()


def test_select_with_a_tensor_index_is_a_runtime_row() -> None:
    # nki.language.NkiTensor.select (NKI 0.5.0 and 0.6.0): "When index is an NkiTensor ...
    # performs dynamic indirect selection where the index is resolved at runtime"; constraints:
    # one dynamic select per tensor, and on an on-chip tensor dim must not be 0.
    table = rng.standard_normal((6, 32, 40)).astype(np.float32)
    picks = np.array([[3, 0, 5, 3]], np.int32)
    np.testing.assert_array_equal(jit(rows_by_index)(table, picks, False), table[picks[0]])
    # is_indirect (same pages): True for a dynamic select and for .ap(scalar_offset=tensor) views
    assert jit(indirect_flags)(table, picks) is None
    with pytest.raises(PartitionError) as info:
        jit(rows_by_index)(table, picks, True)
    assert_reported_at(info.value, rows_by_index)


def select_twice(table, picks):
    """A dynamic select on a view that is already indirect (refused: one per tensor)."""
    idx = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=picks)
    first = table.select(0, idx.ap(pattern=[[2, 1], [1, 1]], offset=0))
    second = first.select(0, idx.ap(pattern=[[2, 1], [1, 1]], offset=1))  # HERE
    out = nl.ndarray(second.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    return out


def test_a_second_dynamic_select_is_refused() -> None:
    table = rng.standard_normal((4, 5, 8)).astype(np.float32)
    with pytest.raises(LanguageError) as info:
        jit(select_twice)(table, np.array([[1, 2]], np.int32))
    assert info.value.rule == "select-indirect"
    assert_reported_at(info.value, select_twice)
