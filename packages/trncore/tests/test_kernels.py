"""The shared NKI building blocks (trncore.kernels) on the emulator, against NumPy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import trncore.sim as sim
from trncore.kernels import (
    block_view,
    ceil_div,
    dtype_bytes,
    evict,
    gemm_kernel,
    gemm_update_kernel,
    k_tiles_per_block,
    load_block,
    matmul_tile,
    mp2_energy_tile,
    partition_sum,
    product_tile,
    spans,
    store_block,
)
from trncore.lang import nisa, nl

pytestmark = pytest.mark.simulator


@pytest.fixture(params=["trn1", "trn2"])
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", request.param)
    return request.param


# ----------------------------------------------------------------------------- pure helpers


def test_spans_cover_ragged_sizes() -> None:
    assert spans(300, 128) == [(0, 128), (128, 128), (256, 44)]
    assert spans(128, 128) == [(0, 128)]
    assert spans(5, 128, start=7) == [(7, 5)]
    assert spans(0, 128) == []
    assert ceil_div(129, 128) == 2 and ceil_div(128, 128) == 1 and ceil_div(0, 128) == 0
    # assert, not raise: spans runs in kernel traces, and the NKI compiler refuses 'raise'
    with pytest.raises(AssertionError, match="tile"):
        spans(4, 0)


def test_k_tiles_per_block_respects_budget() -> None:
    assert k_tiles_per_block(4096, 2048, budget=64 * 1024) == 32
    assert k_tiles_per_block(4096, 4096, budget=64 * 1024) == 16
    assert k_tiles_per_block(200, 10**9) == 1
    assert k_tiles_per_block(100, 1) == 1


# ----------------------------------------------------------------------------- GEMM from the blocks


def small_gemm(a, b, ta, tb, tile_n):
    """C = op(a) @ op(b) from the blocks: any M, K, N; transposes folded into the loads."""
    m_dim = a.shape[1] if ta else a.shape[0]
    k_dim = a.shape[0] if ta else a.shape[1]
    n_dim = b.shape[0] if tb else b.shape[1]
    kt = ceil_div(k_dim, 128)
    out = nl.ndarray((m_dim, n_dim), nl.float32, buffer=nl.shared_hbm)
    for m0, msz in spans(m_dim, 128):
        # stationary[q, t, m] = op(a)[m0 + m, t*128 + q] = op(a)ᵀ[t*128 + q, m0 + m]
        st = nl.ndarray((128, kt, 128), a.dtype, buffer=nl.sbuf)
        load_block(st, a, 0, k_dim, m0, msz, transposed=not ta)
        for n0, nsz in spans(n_dim, tile_n):
            mv = nl.ndarray((128, kt, tile_n), b.dtype, buffer=nl.sbuf)
            load_block(mv, b, 0, k_dim, n0, nsz, transposed=bool(tb))
            ps = nl.ndarray((128, tile_n), nl.float32, buffer=nl.psum)
            matmul_tile(ps, st, mv, k_dim, m=msz, n=nsz)
            res = nl.ndarray((128, tile_n), nl.float32, buffer=nl.sbuf)
            evict(res[0:msz, 0:nsz], ps[0:msz, 0:nsz], on_scalar=(n0 // tile_n) % 2 == 1)
            nisa.dma_copy(dst=out[m0 : m0 + msz, n0 : n0 + nsz], src=res[0:msz, 0:nsz])
    return out


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (7, 129, 130), (128, 128, 512), (129, 200, 600)])
@pytest.mark.parametrize(("ta", "tb"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_matmul_tile_gemm_any_shape(target: str, m: int, k: int, n: int, ta: int, tb: int) -> None:
    rng = np.random.default_rng(m * 7 + k + n)
    opa = rng.standard_normal((m, k)).astype(np.float32)
    opb = rng.standard_normal((k, n)).astype(np.float32)
    a = np.ascontiguousarray(opa.T) if ta else opa
    b = np.ascontiguousarray(opb.T) if tb else opb
    got = sim.simulate(small_gemm)(a, b, ta, tb, 256)
    want = opa.astype(np.float64) @ opb.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * np.sqrt(k))


def test_matmul_tile_bfloat16_accumulates_in_float32(target: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((130, 300)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((300, 70)).astype(ml_dtypes.bfloat16)
    got = sim.simulate(small_gemm)(a, b, 0, 0, 512)
    want = a.astype(np.float64) @ b.astype(np.float64)  # exact products of the bf16 inputs
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_matmul_tile_continues_a_group_across_k_blocks(target: str) -> None:
    def two_blocks(a, b):
        out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((64, 96), nl.float32, buffer=nl.psum)
        for i, (k0, ksz) in enumerate(spans(300, 200)):
            st = nl.ndarray((128, 2, 64), a.dtype, buffer=nl.sbuf)
            mv = nl.ndarray((128, 2, 96), b.dtype, buffer=nl.sbuf)
            load_block(st, a, k0, ksz, 0, 64, transposed=True)
            load_block(mv, b, k0, ksz, 0, 96)
            matmul_tile(ps, st, mv, ksz, start=i == 0)
        res = nl.ndarray((64, 96), nl.float32, buffer=nl.sbuf)
        evict(res, ps, scale=-2.0)
        nisa.dma_copy(dst=out, src=res)
        return out

    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal((300, 96)).astype(np.float32)
    np.testing.assert_allclose(sim.simulate(two_blocks)(a, b), -2 * (a @ b), rtol=1e-5, atol=1e-3)


def test_block_view_batch_offset_and_transpose(target: str) -> None:
    def gather(x):
        out = nl.ndarray((2, 5, 3), x.dtype, buffer=nl.shared_hbm)
        sb = nl.ndarray((5, 2, 3), x.dtype, buffer=nl.sbuf)
        # rows 1..5 (two tiles of 5 rows, 5 apart would overflow: one tile here) of x[1]ᵀ
        nisa.dma_copy(dst=sb[0:5, 0:1, 0:3], src=block_view(x, 1, 5, 1, 2, 3, transposed=True, batch=1))
        nisa.dma_copy(dst=sb[0:5, 1:2, 0:3], src=block_view(x, 0, 5, 1, 0, 3, batch=2))
        nisa.dma_copy(dst=out[0], src=sb[0:5, 0, 0:3])
        nisa.dma_copy(dst=out[1], src=sb[0:5, 1, 0:3])
        return out

    x = np.arange(3 * 6 * 7, dtype=np.float32).reshape(3, 6, 7)
    got = sim.simulate(gather)(x)
    np.testing.assert_array_equal(got[0], x[1].T[1:6, 2:5])
    np.testing.assert_array_equal(got[1], x[2][0:5, 0:3])


def test_block_view_rejects_bad_rank() -> None:
    class Fake:
        shape = (2, 2, 2, 2)

    class Flat:
        shape = (2, 2)

    with pytest.raises(AssertionError, match="2-D or 3-D"):
        block_view(Fake(), 0, 1, 1, 0, 1)
    with pytest.raises(AssertionError, match="batch=1 for a 2-D tensor"):
        block_view(Flat(), 0, 1, 1, 0, 1, batch=1)


# ----------------------------------------------------------------------------- MP2 energy block


def mp2_kernel(t_flat, eps_i, eps_occ, eps_vir, i_index):
    """Energy of orbital i_index of the chunk, with a on partitions and (j, b) on the free dim."""
    nvir = eps_vir.shape[0]
    nocc = eps_occ.shape[0]
    cols = t_flat.shape[1]
    f = nocc * nvir
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    ones = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    # vir_row[p, j, b] = εj − εb (the same on every partition: partition step 0).
    ej = nl.ndarray((128, nocc, nvir), nl.float32, buffer=nl.sbuf)
    eb = nl.ndarray((128, nocc, nvir), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ej, src=eps_occ.ap(pattern=[[0, 128], [1, nocc], [0, nvir]], offset=0))
    nisa.dma_copy(dst=eb, src=eps_vir.ap(pattern=[[0, 128], [0, nocc], [1, nvir]], offset=0))
    row = nl.ndarray((128, nocc, nvir), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=row, data1=ej, data2=eb, op=nl.subtract)
    for a0, asz in spans(nvir, 128):
        t = nl.ndarray((128, nocc, nvir), t_flat.dtype, buffer=nl.sbuf)
        ts = nl.ndarray((128, nocc, nvir), t_flat.dtype, buffer=nl.sbuf)
        r0 = i_index * nvir + a0
        # t[a, j, b] = T_flat[i*nvir + a, j*nvir + b]
        nisa.dma_copy(
            dst=t[0:asz], src=t_flat.ap(pattern=[[cols, asz], [nvir, nocc], [1, nvir]], offset=r0 * cols)
        )
        # ts[a, j, b] = T_flat[i*nvir + b, j*nvir + a]
        nisa.dma_copy(
            dst=ts[0:asz],
            src=t_flat.ap(pattern=[[1, asz], [nvir, nocc], [cols, nvir]], offset=i_index * nvir * cols + a0),
        )
        ea = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        ei = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ea[0:asz], src=eps_vir.ap(pattern=[[1, asz], [1, 1]], offset=a0))
        nisa.dma_copy(dst=ei[0:asz], src=eps_i.ap(pattern=[[0, asz], [1, 1]], offset=i_index))
        shift = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=shift[0:asz], data1=ei[0:asz], data2=ea[0:asz], op=nl.subtract)
        scratch = nl.ndarray((128, 2, f), nl.float32, buffer=nl.sbuf)
        mp2_energy_tile(acc[0:asz], t[0:asz], ts[0:asz], row[0:asz], shift[0:asz], scratch[0:asz])
    ps = nl.ndarray((1, 1), nl.float32, buffer=nl.psum)
    partition_sum(ps, acc, ones)
    res = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


def mp2_numpy(t_flat, eps_i, eps_occ, eps_vir, i):
    nvir = eps_vir.size
    t = t_flat.astype(np.float64).reshape(len(eps_i), nvir, len(eps_occ), nvir).transpose(0, 2, 1, 3)[i]
    den = eps_i[i] + eps_occ[:, None, None] - eps_vir[None, :, None] - eps_vir[None, None, :]
    return float((t * (2 * t - t.transpose(0, 2, 1)) / den).sum())


@pytest.mark.parametrize(("nocc", "nvir"), [(2, 7), (3, 131)])
def test_mp2_energy_tile_matches_numpy(target: str, nocc: int, nvir: int) -> None:
    rng = np.random.default_rng(nvir)
    ni = 2
    eps_occ = np.sort(rng.uniform(-2.0, -0.5, nocc)).astype(np.float32)
    eps_i = eps_occ[:ni].copy()
    eps_vir = np.sort(rng.uniform(0.2, 3.0, nvir)).astype(np.float32)
    t_flat = rng.standard_normal((ni * nvir, nocc * nvir)).astype(np.float32) * 0.01
    for i in range(ni):
        got = sim.simulate(mp2_kernel)(t_flat, eps_i, eps_occ, eps_vir, i)
        want = mp2_numpy(t_flat, eps_i, eps_occ, eps_vir, i)
        assert got.shape == (1, 1)
        np.testing.assert_allclose(got[0, 0], want, rtol=1e-5)


def test_store_block_writes_whole_tiles_and_the_ragged_tail(target: str) -> None:
    def round_trip(x):
        rows, cols = x.shape[1], x.shape[2]
        out = nl.ndarray((2, rows, cols), x.dtype, buffer=nl.shared_hbm)
        for b in range(2):
            sb = nl.ndarray((128, ceil_div(rows, 128), cols), x.dtype, buffer=nl.sbuf)
            load_block(sb, x, 0, rows, 0, cols, batch=b)
            store_block(out, sb, 0, rows, 0, cols, batch=1 - b)
        return out

    x = np.arange(2 * 300 * 5, dtype=np.float32).reshape(2, 300, 5)
    np.testing.assert_array_equal(sim.simulate(round_trip)(x), x[::-1])
    prog = sim.trace(round_trip, x)
    assert prog.report().instructions["dma"] == 2 * 4  # two loads and two stores per batch entry


def test_dtype_bytes() -> None:
    names = ("float32", "bfloat16", "float16", "float8_e4m3", "int8")
    assert [dtype_bytes(d) for d in names] == [4, 2, 2, 1, 1]
    with pytest.raises(AssertionError, match="unknown NKI dtype"):
        dtype_bytes("float64")


# ----------------------------------------------------------------------------- the GEMM kernel


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (7, 129, 200), (130, 257, 513)])
@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_kernel_any_shape_and_transpose(target, m, k, n, trans_a, trans_b) -> None:
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32)
    expected = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b)
    got = sim.simulate(gemm_kernel)(a, b, trans_a, trans_b, 0.5)
    np.testing.assert_allclose(got, 0.5 * expected, rtol=1e-5, atol=1e-4)


def test_gemm_kernel_batches_and_broadcasts_and_updates(target) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 70, 40), dtype=np.float32)
    b = rng.standard_normal((1, 40, 90), dtype=np.float32)  # a batch of one broadcasts
    c = rng.standard_normal((3, 70, 90), dtype=np.float32)
    expected = np.matmul(a.astype(np.float64), b)
    np.testing.assert_allclose(sim.simulate(gemm_kernel)(a, b), expected, rtol=1e-5, atol=1e-4)
    got = sim.simulate(gemm_update_kernel)(a, b, c, 0, 0, 2.0)
    np.testing.assert_allclose(got, 2.0 * expected + c, rtol=1e-5, atol=1e-4)


def _product_kernel(lhs, rhs, m, n):
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    product_tile(acc, lhs, rhs, lhs.shape[0], 0, m, 0, n, tile_k=128)
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    evict(res, acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_product_tile_accumulates_all_of_k_in_blocks(target) -> None:
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((1000, 100), dtype=np.float32)  # K = 1000: several K tiles, ragged
    rhs = rng.standard_normal((1000, 300), dtype=np.float32)
    got = sim.simulate(_product_kernel)(lhs, rhs, 100, 300)
    np.testing.assert_allclose(got, lhs.T.astype(np.float64) @ rhs, rtol=1e-5, atol=1e-3)
