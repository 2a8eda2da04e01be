"""Forms that a seventh batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import ShapeError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2071)

FP8 = {"float8_e4m3": ml_dtypes.float8_e4m3, "float8_e5m2": ml_dtypes.float8_e5m2}


def fp8_transpose_in_slots(x):
    """``x.T`` of a float8 ``[P, F]`` tile through the Tensor Engine, each transposed element in
    a 2-byte PSUM slot (the view steps by 2): NeuronCore-v3's transpose mode writes float8 input
    as 16-bit PSUM elements, upper 8 bits zero (Trainium2 Architecture Guide for NKI, "Built-in
    Transpose Support", NKI 0.3.0 and 0.6.0). Two public fp8 GEMM kernels lay PSUM out this way."""
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    slots = nl.ndarray((f, 2 * p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=slots.ap([[2 * p, f], [2, p]]), data=s)
    t = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=slots[:, 0 : 2 * p : 2])
    nisa.dma_copy(dst=out, src=t)
    return out


def fp8_transpose_packed(x):
    """The same into a float8 PSUM tile laid out element after element: no room for the 16-bit
    elements on NeuronCore-v3."""
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    packed = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=packed, data=s)  # HERE
    t = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=packed)
    nisa.dma_copy(dst=out, src=t)
    return out


def fp8_matmul_transpose_packed(x, ident):
    """``nc_matmul(is_transpose=True)`` (transpose mode, the moving tile an identity) of float8
    data into a packed float8 PSUM tile."""
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    i_sb = nl.ndarray((p, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=ident)
    packed = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=packed, stationary=s, moving=i_sb, is_transpose=True)  # HERE
    t = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=packed)
    nisa.dma_copy(dst=out, src=t)
    return out


def bf16_transpose_packed(x):
    """A bfloat16 transpose into a packed bfloat16 PSUM tile: its elements are 16-bit already."""
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    packed = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=packed, data=s)
    t = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=packed)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("dtype", sorted(FP8))
@pytest.mark.parametrize("shape", [(128, 128), (37, 96)])
def test_fp8_transpose_into_two_byte_psum_slots_is_numpy_transpose(
    dtype: str, shape: tuple[int, int]
) -> None:
    x = rng.standard_normal(shape).astype(FP8[dtype])
    got = run_kernel(fp8_transpose_in_slots, [x], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint8), x.T.view(np.uint8))


def test_fp8_transpose_into_a_packed_psum_tile_is_refused_at_its_line() -> None:
    x = rng.standard_normal((64, 96)).astype(ml_dtypes.float8_e4m3)
    with pytest.raises(ShapeError) as info:
        run_kernel(fp8_transpose_packed, [x], target="trn2")
    assert_reported_at(info.value, fp8_transpose_packed)
    assert "16-bit" in str(info.value) and "steps by 2" in str(info.value)


def test_fp8_matmul_transpose_mode_into_a_packed_psum_tile_is_refused_at_its_line() -> None:
    x = rng.standard_normal((64, 96)).astype(ml_dtypes.float8_e5m2)
    ident = np.eye(64).astype(ml_dtypes.float8_e5m2)
    with pytest.raises(ShapeError) as info:
        run_kernel(fp8_matmul_transpose_packed, [x, ident], target="trn2")
    assert_reported_at(info.value, fp8_matmul_transpose_packed)
    assert "is_transpose=True" in str(info.value) and "16-bit" in str(info.value)


def test_bf16_transpose_into_a_packed_psum_tile_still_matches_numpy() -> None:
    x = rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    got = run_kernel(bf16_transpose_packed, [x], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), x.T.view(np.uint16))


def gather_rows_column_by_column(table, rows):
    """``out[p, j, :] = table[rows[p, j], :]``: one indirect DMA per index column, each column a
    ``(P, 1)`` view of the ``[P, N]`` index tile (one row index per partition, nki.isa.dma_copy,
    "Indirect addressing", NKI 0.3.0 and 0.6.0)."""
    _, width = table.shape
    p, n = rows.shape
    out = nl.ndarray((p, n * width), dtype=table.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((p, n), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=rows)
    got = nl.ndarray((p, n * width), dtype=table.dtype, buffer=nl.sbuf)
    for j in range(n):
        nisa.dma_copy(
            dst=got[:, j * width : (j + 1) * width],
            src=table.ap(
                pattern=[[width, p], [1, width]],
                offset=0,
                vector_offset=r.ap(pattern=[[n, p], [1, 1]], offset=j),
                indirect_dim=0,
            ),
        )
    nisa.dma_copy(dst=out, src=got)
    return out


def gather_rows_in_one_dma(table, rows):
    """The same in one DMA whose ``vector_offset`` is the whole ``[P, N]`` index tile (a public
    probe's second form): no page defines more than one index per partition."""
    _, width = table.shape
    p, n = rows.shape
    out = nl.ndarray((p, n * width), dtype=table.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((p, n), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=rows)
    got = nl.ndarray((p, n * width), dtype=table.dtype, buffer=nl.sbuf)
    src = table.ap(
        pattern=[[width, p], [width, n], [1, width]],
        offset=0,
        vector_offset=r.ap(pattern=[[n, p], [1, n]], offset=0),
        indirect_dim=0,
    )
    nisa.dma_copy(dst=got.reshape((p, n, width)), src=src)  # HERE
    nisa.dma_copy(dst=out, src=got)
    return out


@pytest.mark.parametrize("p", [128, 37])
def test_gather_one_index_column_at_a_time_matches_numpy(target: str, p: int) -> None:
    table = rng.standard_normal((300, 8)).astype(np.float32)
    rows = rng.integers(0, 300, (p, 5)).astype(np.int32)
    got = run_kernel(gather_rows_column_by_column, [table, rows])
    np.testing.assert_array_equal(got, table[rows].reshape(p, -1))


def test_gather_with_a_whole_index_tile_in_one_dma_is_refused_at_its_line() -> None:
    table = rng.standard_normal((300, 8)).astype(np.float32)
    rows = rng.integers(0, 300, (128, 5)).astype(np.int32)
    with pytest.raises(ShapeError) as info:
        run_kernel(gather_rows_in_one_dma, [table, rows], target="trn2")
    assert_reported_at(info.value, gather_rows_in_one_dma)
    assert "one row index per partition" in str(info.value) and "[128, 5]" in str(info.value)


def fp8_transpose_whole_slots(x, ident, width, use_matmul):
    """The transpose into 2-byte slots of a ``[F, width]`` float8 PSUM tile, by ``nc_transpose``
    or ``nc_matmul(is_transpose=True)``; returns the whole tile, value bytes and upper bytes."""
    p, f = x.shape
    out = nl.ndarray((f, width), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    i_sb = nl.ndarray((p, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=ident)
    slots = nl.ndarray((f, width), dtype=x.dtype, buffer=nl.psum)
    dst = slots.ap([[width, f], [2, p]])
    if use_matmul:
        nisa.nc_matmul(dst=dst, stationary=s, moving=i_sb, is_transpose=True)  # MATMUL
    else:
        nisa.nc_transpose(dst=dst, data=s)  # TRANSPOSE
    t = nl.ndarray((f, width), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=slots)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("use_matmul", [False, True])
@pytest.mark.parametrize("shape", [(128, 128), (37, 96)])
def test_fp8_transpose_writes_zero_upper_bytes_into_its_slots(
    shape: tuple[int, int], use_matmul: bool
) -> None:
    # Trainium2 Architecture Guide for NKI, "Built-in Transpose Support" (NKI 0.3.0 and 0.6.0):
    # FP8 input "produces 16-bit output elements in PSUM, with the upper 8 bits filled with
    # zeros" -- read as words, each slot is the value's byte, then a zero byte
    p, f = shape
    x = rng.standard_normal(shape).astype(ml_dtypes.float8_e4m3)
    ident = np.eye(p).astype(ml_dtypes.float8_e4m3)
    got = run_kernel(
        fp8_transpose_whole_slots, [x, ident], {"width": 2 * p, "use_matmul": use_matmul}, target="trn2"
    )
    want = np.zeros((f, 2 * p), dtype=np.uint8)
    want[:, 0::2] = x.T.view(np.uint8)
    np.testing.assert_array_equal(got.view(np.uint8), want)


@pytest.mark.parametrize("use_matmul", [False, True])
def test_fp8_transpose_without_room_for_the_last_upper_byte_is_refused_at_its_line(use_matmul: bool) -> None:
    # a row of 2P - 1 bytes holds the last value at column 2P - 2 but not its upper byte
    p, f = 32, 48
    x = rng.standard_normal((p, f)).astype(ml_dtypes.float8_e4m3)
    ident = np.eye(p).astype(ml_dtypes.float8_e4m3)
    with pytest.raises(ShapeError) as info:
        kwargs = {"width": 2 * p - 1, "use_matmul": use_matmul}
        run_kernel(fp8_transpose_whole_slots, [x, ident], kwargs, target="trn2")
    assert info.value.rule == "transpose-fp8-psum"
    assert_reported_at(info.value, fp8_transpose_whole_slots, "# MATMUL" if use_matmul else "# TRANSPOSE")
    assert "upper byte" in str(info.value)
