"""Each ISA instruction against a NumPy expectation computed here, on both targets."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import isa_vector, nisa, nl
from trncore.sim import simulate as _simulate

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1234)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def simulate(kernel):
    """Run ``kernel`` twice (traced, then replayed) and require bit-identical results."""

    def run(*args):
        first = _simulate(kernel)(*args)
        again = _simulate(kernel)(*args)
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (first, again))):
            np.testing.assert_array_equal(a, b)  # NaN == NaN here
        return first

    return run


def _load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t, dtype=None):
    out = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_copy_roundtrip_and_cast(target: str) -> None:
    def k(x):
        t = _load(x, nl.bfloat16)  # DMA casts via fp32 (nki.isa.dma_copy, NKI 0.3.0)
        return _store(t, nl.float32)

    x = _f32(64, 100)
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(simulate(k)(x), expected)


def test_tensor_tensor_ops(target: str) -> None:
    def k(a, b):
        ta, tb = _load(a), _load(b)
        outs = []
        for op in (nl.add, nl.subtract, nl.multiply, nl.maximum, nl.greater):
            t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=t, data1=ta, data2=tb, op=op)
            outs.append(_store(t))
        return tuple(outs)

    a, b = _f32(128, 64), _f32(128, 64)
    got = simulate(k)(a, b)
    for g, e in zip(got, (a + b, a - b, a * b, np.maximum(a, b), (a > b).astype(np.float32))):
        np.testing.assert_array_equal(g, e)


def test_tensor_tensor_int32_exact_and_bitwise(target: str) -> None:
    def k(a, b):
        ta, tb = _load(a), _load(b)
        s = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=ta, data2=tb, op=nl.add)
        x = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x, data1=ta, data2=tb, op=nl.bitwise_xor)
        return _store(s), _store(x)

    a = rng.integers(2**24, 2**30, size=(16, 8)).astype(np.int32)  # beyond fp32's exact range
    b = rng.integers(1, 2**20, size=(16, 8)).astype(np.int32)
    s, x = simulate(k)(a, b)
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(x, a ^ b)


def test_tensor_scalar_and_reverse(target: str) -> None:
    def k(a, v):
        ta, tv = _load(a), _load(v)
        o1 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=o1,
            data=ta,
            op0=nl.subtract,
            operand0=2.0,
            reverse0=True,
            op1=nl.multiply,
            operand1=3.0,
        )
        o2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=o2, data=ta, op0=nl.add, operand0=tv, op1=nl.subtract, operand1=1.0, reverse1=True
        )
        return _store(o1), _store(o2)

    a, v = _f32(32, 40), _f32(32, 1)
    o1, o2 = simulate(k)(a, v)
    np.testing.assert_allclose(o1, (2.0 - a) * 3.0, rtol=1e-6)
    np.testing.assert_allclose(o2, 1.0 - (a + v), rtol=1e-6)


def test_scalar_tensor_tensor(target: str) -> None:
    def k(a, b):
        ta, tb = _load(a), _load(b)
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=o, data=ta, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=tb
        )
        return _store(o)

    a, b = _f32(64, 32), _f32(64, 32)
    np.testing.assert_allclose(simulate(k)(a, b), a * 0.5 + b, rtol=1e-6)


@pytest.mark.parametrize("accumulate", [None, True, False])
def test_nc_matmul_accumulate_modes(target: str, accumulate: bool | None) -> None:
    def k(a, b):
        ps = nl.zeros((64, 256), nl.float32, buffer=nl.psum)
        for kk in nl.static_range(2):
            lt = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf)
            rt = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=lt, src=a[kk * 128 : (kk + 1) * 128, :])
            nisa.dma_copy(dst=rt, src=b[kk * 128 : (kk + 1) * 128, :])
            nisa.nc_matmul(dst=ps, stationary=lt, moving=rt, accumulate=accumulate)
        sb = nl.ndarray((64, 256), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        return _store(sb)

    a, b = _f32(256, 64), _f32(256, 256)
    ab = a.astype(ml_dtypes.bfloat16).astype(np.float64)  # inputs rounded to bf16
    bb = b.astype(ml_dtypes.bfloat16).astype(np.float64)
    first, second = ab[:128].T @ bb[:128], ab[128:].T @ bb[128:]
    expected = second if accumulate is False else first + second
    np.testing.assert_allclose(simulate(k)(a, b), expected, rtol=1e-5, atol=1e-4)


def test_nc_matmul_fp32(target: str) -> None:
    def k(a, b):
        ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, _load(a), _load(b))
        sb = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)  # PSUM eviction casts to bf16
        return _store(sb)

    a, b = _f32(128, 128), _f32(128, 512)
    expected = (a.astype(np.float64).T @ b).astype(np.float32).astype(ml_dtypes.bfloat16)
    got = simulate(k)(a, b)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(
        got.astype(np.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-2
    )


def test_nc_transpose_tensor_and_vector(target: str) -> None:
    def k(a, s):
        ps = nl.ndarray((48, 100), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=ps, data=_load(a))
        sb = nl.ndarray((48, 100), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        small = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=small, data=_load(s), engine=nisa.vector_engine)
        return _store(sb), _store(small)

    a, s = _f32(100, 48), _f32(32, 16)
    t1, t2 = simulate(k)(a, s)
    np.testing.assert_array_equal(t1, a.T)
    np.testing.assert_array_equal(t2, s.T)


def test_activation_bias_scale_reduce(target: str) -> None:
    def k(a, bias):
        ta, tb = _load(a), _load(bias)
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=o,
            op=nl.exp,
            data=ta,
            bias=tb,
            scale=0.5,
            reduce_op=nl.add,
            reduce_res=s,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        o2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        s2 = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=o2, op=nl.square, data=ta, reduce_op=nl.add, reduce_res=s2)
        return _store(o), _store(s), _store(s2)

    a, bias = _f32(96, 70), _f32(96, 1)
    o, s, s2 = simulate(k)(a, bias)
    e = np.exp(a * 0.5 + bias)
    np.testing.assert_allclose(o, e, rtol=1e-5)
    np.testing.assert_allclose(s, e.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(s2, (a * a).sum(axis=1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("relu", lambda x: np.maximum(x, 0)),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("tanh", np.tanh),
        (
            "gelu_apprx_tanh",
            lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
        ),
        ("silu", lambda x: x / (1 + np.exp(-x))),
        ("softplus", lambda x: np.log1p(np.exp(x))),
        ("erf", None),
    ],
)
def test_activation_functions(target: str, name: str, ref) -> None:
    import math

    if ref is None:
        ref = np.vectorize(math.erf)

    def k(a):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=o, op=getattr(nl, name), data=_load(a))
        return _store(o)

    a = _f32(16, 64) * 2
    np.testing.assert_allclose(simulate(k)(a), ref(a.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_tensor_reduce_axes_negate(target: str) -> None:
    def k(a):
        ta = _load(a)
        m = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m, op=nl.maximum, data=ta, axis=(1, 2), negate=True)
        s = nl.ndarray((a.shape[0], a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=ta, axis=2)
        return _store(m), _store(s)

    a = _f32(8, 5, 7)
    m, s = simulate(k)(a)
    np.testing.assert_array_equal(m, -a.max(axis=(1, 2)).reshape(8, 1))
    np.testing.assert_allclose(s, a.sum(axis=2), rtol=1e-6)


def test_tensor_tensor_scan(target: str) -> None:
    def k(a, b):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(
            dst=o, data0=_load(a), data1=_load(b), initial=0.5, op0=nl.multiply, op1=nl.add
        )
        return _store(o)

    a, b = _f32(4, 10), _f32(4, 10)
    expected = np.empty_like(a)
    prev = np.full(4, 0.5, dtype=np.float32)
    for i in range(10):
        prev = a[:, i] * prev + b[:, i]
        expected[:, i] = prev
    np.testing.assert_allclose(simulate(k)(a, b), expected, rtol=1e-5)


def test_memset_iota_reciprocal(target: str) -> None:
    def k(a):
        m = nl.ndarray((8, 6), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=m, value=2.5)
        i = nl.ndarray((8, 2, 3), nl.int32, buffer=nl.sbuf)
        nisa.iota(i, [[10, 2], [1, 3]], offset=5, channel_multiplier=100)
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=_load(a))
        return _store(m), _store(i), _store(r)

    a = _f32(8, 6) + 3.0
    m, i, r = simulate(k)(a)
    np.testing.assert_array_equal(m, np.full((8, 6), 2.5, np.float32))
    chan = np.arange(8).reshape(8, 1, 1) * 100
    expected = 5 + chan + (np.arange(2) * 10).reshape(1, 2, 1) + np.arange(3).reshape(1, 1, 3)
    np.testing.assert_array_equal(i, expected)
    np.testing.assert_allclose(r, 1.0 / a, rtol=1e-6)


def test_select_and_affine_select(target: str) -> None:
    def k(a, b, c):
        ta, tb, tc = _load(a), _load(b), _load(c)
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        isa_vector.select(dst=o, predicate=tc, on_true=ta, on_false=tb)  # nl.where's instruction
        causal = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        # keep where partition - column >= 0 (lower triangle), else -1e9
        nisa.affine_select(
            dst=causal,
            pattern=[[-1, a.shape[1]]],
            channel_multiplier=1,
            on_true_tile=ta,
            on_false_value=-1e9,
            cmp_op=nl.greater_equal,
        )
        return _store(o), _store(causal)

    a, b = _f32(16, 16), _f32(16, 16)
    c = (rng.random((16, 16)) > 0.5).astype(np.float32)
    o, causal = simulate(k)(a, b, c)
    np.testing.assert_array_equal(o, np.where(c != 0, a, b))
    np.testing.assert_array_equal(causal, np.where(np.tril(np.ones((16, 16))) > 0, a, -1e9))


def test_float_to_int_cast_rounds_even_and_saturates(target: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, nl.int8, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=_load(a))
        return _store(t)

    a = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 126.6]], dtype=np.float32)
    expected = np.array([[0, 2, 2, 0, -2, 127, -128, 127]], dtype=np.int8)
    np.testing.assert_array_equal(simulate(k)(a), expected)


def test_tfloat32_rounding(target: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, nl.tfloat32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=_load(a))
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=t)
        return _store(o)

    a = np.array([[1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-10 + 2**-12]], dtype=np.float32)
    # 10 mantissa bits, nearest even: 1+2^-11 -> 1, 1+3*2^-11 -> 1+2^-9, 1+2^-10+2^-12 -> 1+2^-10
    expected = np.array([[1.0, 1.0 + 2**-9, 1.0 + 2**-10]], dtype=np.float32)
    np.testing.assert_array_equal(simulate(k)(a), expected)


def test_ap_static_and_dynamic_offsets(target: str) -> None:
    def k(a, idx, rows):
        # static pattern: every other column of rows 0..3 of a (8, 16) HBM tensor
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[16, 4], [2, 8]]))
        # scalar dynamic offset: row block chosen by a device value
        sidx = _load(idx)
        u = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=a.ap([[16, 2], [1, 16]], scalar_offset=sidx))
        # vector dynamic offset: one row index per partition (gather)
        vidx = _load(rows)
        g = nl.ndarray((3, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=a.ap([[16, 3], [1, 16]], vector_offset=vidx))
        return _store(t), _store(u), _store(g)

    a = _f32(8, 16)
    idx = np.array([[5]], dtype=np.int32)
    rows = np.array([[7], [0], [3]], dtype=np.int32)
    t, u, g = simulate(k)(a, idx, rows)
    np.testing.assert_array_equal(t, a[0:4, 0::2])
    np.testing.assert_array_equal(u, a[5:7])
    np.testing.assert_array_equal(g, a[[7, 0, 3]])


def test_dma_transpose_trn2_only(target: str) -> None:
    from trncore.sim.errors import TargetError

    def k(a):
        t = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a)
        return _store(t)

    a = _f32(16, 128).astype(ml_dtypes.bfloat16)
    if target == "trn1":
        with pytest.raises(TargetError):
            simulate(k)(a)
    else:
        np.testing.assert_array_equal(simulate(k)(a), a.T)


def test_get_nc_version(target: str) -> None:
    def k(a):
        v = nisa.get_nc_version()
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=o, value=float(int(v)))
        return _store(o)

    got = simulate(k)(_f32(2, 2))
    assert got[0, 0] == (2.0 if target == "trn1" else 3.0)


def test_activation_accumulator_registers_persist(target: str) -> None:
    def k(a, b):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=o,
            op=nl.copy,
            data=_load(a),
            reduce_op=nl.add,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        nisa.activation(
            dst=o,
            op=nl.exp,
            data=_load(b),
            reduce_op=nl.add,
            reduce_cmd=nisa.reduce_cmd.reduce,
            reduce_res=s,
        )
        return _store(s)

    a, b = _f32(8, 16), _f32(8, 16)
    expected = a.sum(1, keepdims=True) + np.exp(b).sum(1, keepdims=True)
    np.testing.assert_allclose(simulate(k)(a, b), expected, rtol=1e-5)


def test_select_reduce_row_max(target: str) -> None:
    def k(a, c):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(
            dst=o,
            predicate=_load(c, nl.uint8),  # nki.isa.select_reduce: an 8/16-bit integer predicate
            on_true=_load(a),
            on_false=-5.0,
            reduce_res=m,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_op=nl.maximum,
        )
        return _store(o), _store(m)

    a = _f32(16, 24)
    c = (rng.random((16, 24)) > 0.3).astype(np.float32)
    o, m = simulate(k)(a, c)
    expected = np.where(c != 0, a, -5.0)
    np.testing.assert_array_equal(o, expected)
    np.testing.assert_array_equal(m, expected.max(axis=1, keepdims=True))


def test_partition_and_scalar_reductions(target: str) -> None:
    def k(a):
        ta = _load(a)
        col = nl.ndarray((1, a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=col, op=nl.add, data=ta)
        scaled = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        rowmax = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(
            dst=scaled,
            data=ta,
            op0=nl.multiply,
            operand0=2.0,
            reduce_op=nl.maximum,
            reduce_res=rowmax,
        )
        top = nl.ndarray((a.shape[0], 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=ta)
        return _store(col), _store(scaled), _store(rowmax), _store(top)

    a = _f32(32, 20)
    col, scaled, rowmax, top = simulate(k)(a)
    np.testing.assert_allclose(col, a.sum(axis=0, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(scaled, a * 2)
    np.testing.assert_array_equal(rowmax, (a * 2).max(axis=1, keepdims=True))
    np.testing.assert_array_equal(top, -np.sort(-a, axis=1)[:, :8])


def test_tensor_scalar_reduce_takes_abs_but_not_a_bitwise_op(target: str) -> None:
    # abs is arithmetic in the NKI 0.3.0 ALU-operator table (nki.isa reference): |x| per element,
    # its row sums in reduce_res; operand0 is a dummy for a unary op.
    def k(a):
        ta = _load(a)
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(
            dst=out, data=ta, op0=nl.abs, operand0=0.0, reduce_op=nl.add, reduce_res=sums
        )
        return _store(out), _store(sums)

    a = _f32(16, 12)
    out, sums = simulate(k)(a)
    np.testing.assert_array_equal(out, np.abs(a))
    np.testing.assert_allclose(sums, np.abs(a).sum(axis=1, keepdims=True), rtol=1e-6)

    def bitwise(a):
        ta = _load(a)
        out = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        sums = nl.ndarray((a.shape[0], 1), nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(  # BROKEN: bitwise ops are not arithmetic
            dst=out, data=ta, op0=nl.bitwise_and, operand0=1, reduce_op=nl.add, reduce_res=sums
        )
        return _store(out)

    with pytest.raises(Exception, match="op0") as info:
        _simulate(bitwise)(np.ones((4, 4), np.int32))
    lines, start = inspect.getsourcelines(bitwise)
    broken = start + next(i for i, text in enumerate(lines) if "# BROKEN" in text)
    assert f"test_isa_conformance.py:{broken}" in str(info.value)  # reported at the kernel's line


def test_predicated_copy_and_batch_norm_stats(target: str) -> None:
    def k(a, b, pred):
        d = _load(a)
        nisa.tensor_copy_predicated(dst=d, src=_load(b), predicate=_load(pred))
        stats = nl.ndarray((a.shape[0], 12), nl.float32, buffer=nl.sbuf)
        ta = _load(a)
        half = a.shape[1] // 2
        nisa.bn_stats(dst=stats[:, 0:6], data=ta[:, 0:half])
        nisa.bn_stats(dst=stats[:, 6:12], data=ta[:, half : a.shape[1]])
        mv = nl.ndarray((a.shape[0], 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        return _store(d), _store(mv)

    a, b = _f32(16, 30), _f32(16, 30)
    pred = (rng.random((16, 30)) > 0.5).astype(np.uint8)
    d, mv = simulate(k)(a, b, pred)
    np.testing.assert_array_equal(d, np.where(pred != 0, b, a))
    np.testing.assert_allclose(mv[:, 0], a.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv[:, 1], a.var(axis=1), rtol=1e-4, atol=1e-6)


def test_tensor_copy_with_dynamic_free_offset(target: str) -> None:
    def k(a, start):
        t = _load(a)
        s = _load(start)
        out = nl.ndarray((a.shape[0], 8), nl.float32, buffer=nl.sbuf)
        # replaces 0.2.0's tensor_copy_dynamic_src: columns start..start+8 of every partition
        src = t.ap([[a.shape[1], a.shape[0]], [1, 8]], scalar_offset=s, indirect_dim=1)
        nisa.tensor_copy(dst=out, src=src)
        return _store(out)

    a = _f32(16, 40)
    for first in (0, 5, 32):
        got = simulate(k)(a, np.array([[first]], dtype=np.int32))
        np.testing.assert_array_equal(got, a[:, first : first + 8])


def test_on_chip_access_cannot_run_past_a_partition_row(target: str) -> None:
    from trncore.sim.errors import BoundsError

    def static_overrun(a):
        t = _load(a)
        out = nl.ndarray((a.shape[0], 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=t.ap([[a.shape[1], a.shape[0]], [1, 8]], offset=36))

    def dynamic(a, start):
        t, s = _load(a), _load(start)
        out = nl.ndarray((a.shape[0], 8), nl.float32, buffer=nl.sbuf)
        src = t.ap([[a.shape[1], a.shape[0]], [1, 8]], scalar_offset=s, indirect_dim=1)
        nisa.tensor_copy(dst=out, src=src)
        return _store(out)

    a = _f32(16, 40)
    with pytest.raises(BoundsError, match="partitions hold 40"):
        _simulate(static_overrun)(a)
    with pytest.raises(BoundsError, match="scalar_offset value 33"):
        _simulate(dynamic)(a, np.array([[33]], dtype=np.int32))


def test_dma_copy_oob_skip_drops_a_scalar_offset_transfer_out_of_bounds(target: str) -> None:
    """nki.isa.dma_copy (NKI 0.3.0): with ``oob_mode=skip`` a dynamic address out of bounds skips
    the transfer (the destination keeps its contents); with the default mode it is an error."""
    from trncore.sim.errors import BoundsError

    def scatter(mode):
        def k(base, rows, start):
            out = nl.ndarray(base.shape, nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=base)
            t, s = _load(rows), _load(start)
            dst = out.ap([[base.shape[1], rows.shape[0]], [1, base.shape[1]]],
                         scalar_offset=s, indirect_dim=0)
            nisa.dma_copy(dst=dst, src=t, oob_mode=mode)  # the line a refusal names
            return out

        return k

    def gather(mode):
        def k(base, start):
            fill = nl.ndarray((2, base.shape[1]), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=fill, value=7.0)
            s = _load(start)
            src = base.ap([[base.shape[1], 2], [1, base.shape[1]]], scalar_offset=s, indirect_dim=0)
            nisa.dma_copy(dst=fill, src=src, oob_mode=mode)
            return _store(fill)

        return k

    base, rows = _f32(16, 8), _f32(2, 8)
    skip = scatter(nisa.oob_mode.skip)
    for first in (3, 14):  # in bounds: rows first..first+1 replaced
        want = base.copy()
        want[first : first + 2] = rows
        np.testing.assert_array_equal(simulate(skip)(base, rows, np.array([[first]], np.int32)), want)
    for first in (-1000000, -1, 15, 16):  # any part out of bounds: nothing written
        got = simulate(skip)(base, rows, np.array([[first]], np.int32))
        np.testing.assert_array_equal(got, base)
    got = simulate(gather(nisa.oob_mode.skip))(base, np.array([[15]], np.int32))
    np.testing.assert_array_equal(got, np.full((2, 8), 7.0, np.float32))
    np.testing.assert_array_equal(
        simulate(gather(nisa.oob_mode.skip))(base, np.array([[4]], np.int32)), base[4:6]
    )
    line = inspect.getsourcelines(scatter)[1] + 7
    with pytest.raises(BoundsError, match="scalar_offset value -1000000") as info:
        _simulate(scatter(nisa.oob_mode.error))(base, rows, np.array([[-1000000]], np.int32))
    assert f":{line}" in str(info.value)
