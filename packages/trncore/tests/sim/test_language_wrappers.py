"""The experimental nl.* wrappers and language helpers against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(7)


def _out(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


def test_elementwise_and_reductions(target: str) -> None:
    def k(x, y):
        a, b = nl.load(x), nl.load(y)
        s = nl.add(a, b)
        p = nl.multiply(a, 2.0)
        q = nl.subtract(1.0, a)  # scalar first
        e = nl.exp(a)
        m = nl.maximum(a, b)
        r = nl.sum(a, axis=1, keepdims=True)
        mx = nl.max(a, axis=1, keepdims=True)
        mean = nl.mean(a, axis=1, keepdims=True)
        var = nl.var(a, axis=1)
        c = nl.cos(a)
        return tuple(_out(t) for t in (s, p, q, e, m, r, mx, mean, var, c))

    x, y = rng.standard_normal((64, 48), np.float32), rng.standard_normal((64, 48), np.float32)
    got = simulate(k)(x, y)
    expected = (
        x + y,
        x * 2,
        1 - x,
        np.exp(x),
        np.maximum(x, y),
        x.sum(1, keepdims=True),
        x.max(1, keepdims=True),
        x.mean(1, keepdims=True),
        x.var(1, keepdims=True),
        np.cos(x),
    )
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_matmul_transpose_copy_where_broadcast(target: str) -> None:
    def k(xt, y, cond):
        a, b = nl.load(xt), nl.load(y)
        prod = nl.matmul(a, b, transpose_x=True)
        prod_sb = nl.ndarray(prod.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=prod_sb, src=prod)
        tr = nl.transpose(a)
        tr_sb = nl.ndarray(tr.shape, tr.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tr_sb, src=tr)
        cp = nl.copy(a)
        w = nl.where(nl.load(cond), a, 0.0)
        row = nl.load(xt[0:1, :])
        bc = nl.broadcast_to(row, (32, xt.shape[1]))
        lt = nl.load_transpose2d(y)
        return tuple(_out(t) for t in (prod_sb, tr_sb, cp, w, bc, lt))

    xt, y = rng.standard_normal((32, 16), np.float32), rng.standard_normal((32, 24), np.float32)
    cond = (rng.random((32, 16)) > 0.5).astype(np.float32)
    prod, tr, cp, w, bc, lt = simulate(k)(xt, y, cond)
    np.testing.assert_allclose(prod, xt.T @ y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(tr, xt.T)
    np.testing.assert_array_equal(cp, xt)
    np.testing.assert_array_equal(w, np.where(cond != 0, xt, 0.0))
    np.testing.assert_array_equal(bc, np.broadcast_to(xt[0:1], (32, 16)))
    np.testing.assert_array_equal(lt, y.T)


def test_softmax_wrapper_and_views(target: str) -> None:
    def k(x):
        t = nl.load(x)
        s = nl.softmax(t, axis=1)
        three = nl.ndarray((x.shape[0], 2, x.shape[1] // 2), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=three, src=x)
        flat = three.reshape((x.shape[0], x.shape[1]))
        again = nl.ndarray(flat.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=again, src=flat)
        ex = nl.expand_dims(again, 1)
        assert ex.shape == (x.shape[0], 1, x.shape[1])
        bits = nl.load(x).view(nl.int32)
        return _out(s), _out(again), _out(bits)

    x = rng.standard_normal((16, 40), np.float32)
    s, again, bits = simulate(k)(x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(again, x)
    np.testing.assert_array_equal(bits, x.view(np.int32))


def test_device_print_runs_on_replay(target: str, capsys: pytest.CaptureFixture) -> None:
    def k(x):
        t = nl.load(x)
        nl.device_print("tile:", t)
        return _out(t)

    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    simulate(k)(x)
    simulate(k)(x + 10)
    printed = capsys.readouterr().out
    assert printed.count("tile:") == 2 and "13." in printed


def test_tile_size_and_program_ids(target: str) -> None:
    def k(x):
        assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
        size = nl.tile_size.total_available_sbuf_size
        t = nl.ndarray((1, 3), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t[:, 0:1], value=float(size))
        nisa.memset(dst=t[:, 1:2], value=float(nl.program_id(axis=0)))
        nisa.memset(dst=t[:, 2:3], value=float(nl.num_programs(axes=0)))
        return _out(t)

    got = simulate(k)(np.zeros((1, 1), np.float32))
    sbuf = 180224 if target == "trn1" else 212984
    np.testing.assert_array_equal(got, [[sbuf, 0, 1]])
