"""nc_matmul PE-array tiling (tile_position/tile_size) and FP8 double_row (nki.isa.nc_matmul,
NKI 0.3.0): results equal the plain product (tiling places the matmul, double_row splits K)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import DtypeError, ShapeError, TargetError
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator


def tiled(a_t, b, position, size):
    k, m = a_t.shape
    n = b.shape[1]
    s = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a_t)
    v = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b)
    p = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v, tile_position=position, tile_size=size)
    r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_pe_tiling_places_the_matmul_and_keeps_its_result(target: str) -> None:
    rng = np.random.default_rng(8)
    a_t = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 100)).astype(np.float32)
    expected = a_t.astype(np.float64).T @ b.astype(np.float64)
    for position, size in [((64, 0), (64, 128)), ((0, 64), (64, 64)), ((64, 64), (64, 64))]:
        got = run_kernel(tiled, [a_t, b], {"position": position, "size": size})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_pe_tiling_invalid_neighbours(target: str) -> None:
    a_t = np.zeros((64, 64), np.float32)
    b = np.zeros((64, 8), np.float32)
    with pytest.raises(ShapeError, match=r"matmul-tile-position.*test_matmul_modes.py:\d+"):
        run_kernel(tiled, [a_t, b], {"position": (32, 0), "size": (64, 128)})
    with pytest.raises(ShapeError, match="matmul-tile-rows"):
        run_kernel(tiled, [np.zeros((128, 64), np.float32), np.zeros((128, 8), np.float32)],
                   {"position": (0, 0), "size": (64, 128)})  # fmt: skip
    with pytest.raises(ShapeError, match="matmul-tiling"):
        run_kernel(tiled, [a_t, b], {"position": (0, 0), "size": ()})
    small = [np.zeros((32, 32), np.float32), np.zeros((32, 8), np.float32)]
    if target == "trn1":  # 32-row tiles need NeuronCore-v3
        with pytest.raises(ShapeError, match="matmul-tile-size"):
            run_kernel(tiled, small, {"position": (32, 0), "size": (32, 128)})
    else:
        run_kernel(tiled, small, {"position": (32, 0), "size": (32, 128)})


def double_row(a3, b3):
    p, _, m = a3.shape
    n = b3.shape[2]
    s = nl.ndarray((p, 2, m), dtype=a3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a3)
    v = nl.ndarray((p, 2, n), dtype=b3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b3)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=nisa.matmul_perf_mode.double_row)
    r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_double_row_contracts_over_256_rows_on_trn2() -> None:
    # the page's example: [1, 256] @ [256, 3] as stationary [128, 2, 1] and moving [128, 2, 3]
    rng = np.random.default_rng(9)
    a = rng.standard_normal((256, 4)).astype(ml_dtypes.float8_e4m3)
    b = rng.standard_normal((256, 3)).astype(ml_dtypes.float8_e5m2)
    expected = a.astype(np.float64).T @ b.astype(np.float64)
    got = run_kernel(double_row, [a.reshape(128, 2, 4), b.reshape(128, 2, 3)], target="trn2")
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_double_row_invalid_neighbours() -> None:
    a = np.zeros((128, 2, 4), ml_dtypes.float8_e4m3)
    b = np.zeros((128, 2, 3), ml_dtypes.float8_e4m3)
    with pytest.raises(TargetError, match=r"matmul-perf-mode.*test_matmul_modes.py:\d+"):
        run_kernel(double_row, [a, b], target="trn1")
    with pytest.raises(DtypeError, match="matmul-double-row-dtype"):
        run_kernel(double_row, [a.astype(ml_dtypes.bfloat16), b], target="trn2")
