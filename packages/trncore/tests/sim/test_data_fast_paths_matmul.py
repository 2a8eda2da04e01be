"""nc_matmul's one-byte-float operands decoded once while their bytes are unchanged
(docs/emulator-speed.md, "Data work, fourth round"), against ml_dtypes' own conversion and
products worked out in float64 here.

nki.isa.nc_matmul (NKI 0.3.0): ``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` with fp32
accumulation in PSUM; an fp8 operand enters as its exact value. The operands below are small
integers, so every product and sum is exact in float32 and the expected results are exact
whatever the order of the sums: a stale decoding (a tile rewritten between two matmuls and read
with its old values) changes them.
"""

from __future__ import annotations

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import dtypes, nisa, nl
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator

ONE_BYTE_FLOATS = [ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn,
                   ml_dtypes.float8_e8m0fnu]  # fmt: skip


@pytest.mark.parametrize("fp8", ONE_BYTE_FLOATS)
def test_every_byte_pattern_decodes_as_ml_dtypes_on_first_and_later_reads(fp8: type) -> None:
    storage = np.arange(512, dtype=np.uint8).reshape(2, 256).view(fp8)  # each pattern twice
    view = storage[:, ::1]  # one array read again and again, as a tile's view is
    want = view.astype(np.float32)
    first = dtypes.read_only_f32(view)
    np.testing.assert_array_equal(first.view(np.uint32), want.view(np.uint32))  # NaN bits too
    again = dtypes.read_only_f32(view)
    assert again is first and not again.flags.writeable  # decoded once, never written by a reader
    storage.view(np.uint8)[1, 7] = 0x38  # a write between the reads, through another array
    changed = dtypes.read_only_f32(view)
    np.testing.assert_array_equal(changed.view(np.uint32), view.astype(np.float32).view(np.uint32))
    assert changed[1, 7] == view.astype(np.float32)[1, 7] != first[1, 7]
    strided = storage[:, 1::3]  # a strided view (every third column of each row)
    np.testing.assert_array_equal(
        dtypes.read_only_f32(strided).view(np.uint32), strided.astype(np.float32).view(np.uint32)
    )


def test_a_decoded_operand_keeps_no_storage_alive() -> None:
    storage = np.arange(64, dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    alive = weakref.ref(storage)
    dtypes.read_only_f32(storage[8:40])
    del storage
    gc.collect()
    assert alive() is None  # the cache holds the decoded values, not the tile it read


def test_other_dtypes_convert_as_to_f32() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 40)).astype(ml_dtypes.bfloat16)[:, 3:30]
    np.testing.assert_array_equal(dtypes.read_only_f32(x), x.astype(np.float32))
    y = rng.standard_normal((8, 40)).astype(np.float32)
    assert dtypes.read_only_f32(y) is y  # float32 is read as it is (no copy), as to_f32 does


def reused_weight(a, w0, w1, row):
    """Three matmuls against one moving tile ``w``, rewritten between them: whole (DMA) after
    the first, one partition after the second; the last two accumulate into one PSUM tile."""
    k, n = w0.shape
    m = a.shape[2]
    w = nl.ndarray((k, n), dtype=w0.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=w0)
    s = nl.ndarray((k, 3, m), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    first = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=first, stationary=s[:, 0, :], moving=w, accumulate=False)
    nisa.nc_matmul(dst=first, stationary=s[:, 0, :], moving=w, accumulate=True)  # read again
    nisa.dma_copy(dst=w, src=w1)  # the whole tile rewritten
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s[:, 1, :], moving=w, accumulate=False)
    nisa.dma_copy(dst=w[5:6, :], src=row)  # one partition rewritten
    nisa.nc_matmul(dst=acc, stationary=s[:, 2, :], moving=w, accumulate=True)
    out = nl.ndarray((2, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for i, p in enumerate((first, acc)):
        r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out[i], src=r)
    return out


def _small_ints(rng: np.random.Generator, shape: tuple[int, ...], fp8: type) -> np.ndarray:
    return rng.integers(-4, 5, shape).astype(np.float32).astype(fp8)  # exact in every fp8 type


@pytest.mark.parametrize("fp8", [ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2])
def test_fp8_moving_tile_rewritten_between_matmuls_is_read_anew(
    fp8: type, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    k, m, n = 128, 32, 96
    a = _small_ints(rng, (k, 3, m), fp8)
    w0, w1 = _small_ints(rng, (k, n), fp8), _small_ints(rng, (k, n), fp8)
    row = _small_ints(rng, (1, n), fp8)
    decodes = []
    to_f32 = dtypes.to_f32

    def counting(values: np.ndarray) -> np.ndarray:
        decodes.append(values.dtype)
        return to_f32(values)

    monkeypatch.setattr(dtypes, "to_f32", counting)
    got = run_kernel(reused_weight, [a, w0, w1, row], target=target)
    a64, w2 = a.astype(np.float64), w1.astype(np.float64)
    w2[5] = row.astype(np.float64)[0]
    first = 2 * (a64[:, 0, :].T @ w0.astype(np.float64))
    acc = a64[:, 1, :].T @ w1.astype(np.float64) + a64[:, 2, :].T @ w2
    np.testing.assert_array_equal(got, np.stack([first, acc]).astype(np.float32))
    # 8 operand reads; the second matmul's two operands are the first's bytes, decoded once
    assert len(decodes) == 6, decodes


def double_row_reused(a3, b3, b3_new):
    p, _, m = a3.shape
    n = b3.shape[2]
    s = nl.ndarray((p, 2, m), dtype=a3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a3)
    v = nl.ndarray((p, 2, n), dtype=b3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b3)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    mode = nisa.matmul_perf_mode.double_row
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=mode)
    nisa.dma_copy(dst=v[:, 1, :], src=b3_new[:, 1, :])  # the second half of K rewritten
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=mode, accumulate=True)
    r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_double_row_operand_rewritten_in_part_is_read_anew() -> None:
    rng = np.random.default_rng(12)
    a = _small_ints(rng, (128, 2, 40), ml_dtypes.float8_e4m3)
    b = _small_ints(rng, (128, 2, 72), ml_dtypes.float8_e5m2)
    b_new = _small_ints(rng, (128, 2, 72), ml_dtypes.float8_e5m2)
    a64 = a.astype(np.float64).reshape(256, 40)
    b_after = b.astype(np.float64)
    b_after[:, 1, :] = b_new.astype(np.float64)[:, 1, :]
    want = a64.T @ b.astype(np.float64).reshape(256, 72) + a64.T @ b_after.reshape(256, 72)
    for _ in range(2):  # traced, then replayed (the same closures over the same storage)
        got = run_kernel(double_row_reused, [a, b, b_new], target="trn2")
        np.testing.assert_array_equal(got, want.astype(np.float32))
