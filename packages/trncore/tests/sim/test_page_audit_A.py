"""Page audit A (issue 13): data movement, Tensor Engine and Scalar Engine instructions checked
form by form against AWS's API pages (``nki.isa.*`` docstrings of NKI 0.3.0 / SDK 2.29 and
NKI 0.6.0 / SDK 2.32). Each valid form is compared with a NumPy reading of the page computed
here; each documented invalid neighbour must be refused at the kernel's line."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BufferError, DtypeError, ShapeError, TargetError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

BF16 = ml_dtypes.bfloat16
rng = np.random.default_rng(2029)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _load(x: Any, dtype: Any = None, buffer: Any = None) -> Any:
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=buffer or nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t: Any) -> Any:
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _refused(kernel: Any, args: list, error: type, rule: str, **kw: Any) -> None:
    """``kernel`` is refused with ``error`` naming ``rule``, at its line marked ``# HERE``."""
    with pytest.raises(error, match=rule) as exc:
        run_kernel(kernel, args, **kw)
    assert_reported_at(exc.value, kernel)


# --- the kernel key: one ``def`` made with different parameter defaults --------------------------


def test_parameter_defaults_are_part_of_the_kernel_key() -> None:
    # Kernels made in a loop as ``def k(x, dt=dt)`` share their source; a default the call
    # leaves out changes the program as a captured value does (docs/emulator.md, "Trace once").
    kernels = []
    for dt in (nl.float32, nl.bfloat16):

        def k(x, dt=dt):
            t = _load(x, dt)
            o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=t)
            return _store(o)

        kernels.append(k)
    x = np.array([[1.0 + 2.0**-12]], np.float32)
    np.testing.assert_array_equal(run_kernel(kernels[0], [x]), x)
    np.testing.assert_array_equal(run_kernel(kernels[1], [x]), x.astype(BF16).astype(np.float32))


# --- engine= choices each page lists ----------------------------------------------------------


def _copy_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=_load(x), engine=engine)  # HERE
        return _store(o)

    return k


def _memset_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=o, value=1.5, engine=engine)  # HERE
        return _store(o)

    return k


def _transpose_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(dst=o, data=_load(x), engine=engine)  # HERE
        return _store(o)

    return k


def _dma_on(engine: Any, mode: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=o, src=x, dge_mode=mode, engine=engine)  # HERE
        return _store(o)

    return k


E = nisa.engine
HW = nisa.dge_mode.hwdge


@pytest.mark.parametrize(
    ("make", "engine", "expected"),
    [
        # nki.isa.tensor_copy (NKI 0.3.0, 0.6.0): vector, scalar, gpsimd or unknown
        (_copy_on, E.vector, "copy"),
        (_copy_on, E.gpsimd, "copy"),
        (_copy_on, E.unknown, "copy"),
        # nki.isa.memset: "using Vector or GpSimd Engine"
        (_memset_on, E.vector, "fill"),
        (_memset_on, E.gpsimd, "fill"),
        # nki.isa.nc_transpose: tensor or vector; SBUF output means the Vector Engine
        (_transpose_on, E.vector, "transpose"),
    ],
)
def test_listed_engines_run(target: str, make: Any, engine: Any, expected: str) -> None:
    x = _f32(8, 12)
    got = run_kernel(make(engine), [x])
    want = {"copy": x, "fill": np.full_like(x, 1.5), "transpose": x.T}[expected]
    np.testing.assert_array_equal(got, want)


def test_dma_copy_hwdge_queue_engines_on_trn2() -> None:
    # nki.isa.dma_copy: engine is the HWDGE descriptor generator, sync or scalar, with hwdge only
    x = _f32(8, 12)
    for engine in (E.sync, E.scalar):
        np.testing.assert_array_equal(run_kernel(_dma_on(engine, HW), [x], target="trn2"), x)


@pytest.mark.parametrize(
    ("kernel", "rule"),
    [
        (_copy_on(E.tensor), "tensor-copy-engine"),
        (_copy_on(E.sync), "tensor-copy-engine"),
        (_memset_on(E.scalar), "memset-engine"),
        (_memset_on(E.tensor), "memset-engine"),
        (_transpose_on(E.scalar), "nc-transpose-engine"),
        (_transpose_on(E.gpsimd), "nc-transpose-engine"),
        (_dma_on(E.vector, HW), "dma-copy-engine"),
        (_dma_on(E.sync, nisa.dge_mode.swdge), "dma-copy-engine"),
        (_dma_on(E.scalar, nisa.dge_mode.unknown), "dma-copy-engine"),
    ],
)
def test_engines_a_page_does_not_list_are_refused(kernel: Any, rule: str) -> None:
    from trncore.sim.errors import LanguageError

    _refused(kernel, [_f32(8, 12)], LanguageError, rule, target="trn2")


# --- iota / affine_select patterns: up to 4D --------------------------------------------------


def _iota4(x):
    t = nl.ndarray((4, 2, 3, 2), nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[100, 2], [10, 3], [1, 1], [3, 2]], offset=-7, channel_multiplier=1000)
    return _store(t)


def _iota5(x):
    t = nl.ndarray((4, 12), nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[100, 2], [10, 3], [1, 1], [3, 2], [1, 1]])  # HERE
    return _store(t)


def _affine5(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.affine_select(  # HERE
        dst=t, pattern=[[1, 1], [1, 1], [1, 1], [1, 1], [-1, 12]], channel_multiplier=1,
        on_true_tile=_load(x), on_false_value=0.0,
    )  # fmt: skip
    return _store(t)


def test_iota_four_dim_pattern_follows_the_pages_loop_nest(target: str) -> None:
    # nki.isa.iota: value = offset + c*channel_multiplier + w*step_w + z*step_z + y*step_y + x*step_x
    c, w, z, y, xx = np.ogrid[0:4, 0:2, 0:3, 0:1, 0:2]
    want = -7 + 1000 * c + 100 * w + 10 * z + 1 * y + 3 * xx
    got = run_kernel(_iota4, [np.zeros(1, np.float32)])
    np.testing.assert_array_equal(got.reshape(4, -1), want.reshape(4, -1))


@pytest.mark.parametrize("kernel", [_iota5, _affine5])
def test_a_pattern_of_more_than_four_dims_is_refused(kernel: Any) -> None:
    _refused(kernel, [_f32(4, 12)], ShapeError, "pattern-rank")


# --- nc_matmul: the page's input dtypes, pairings and limits ---------------------------------

_NP = {
    "float32": np.float32,
    "bfloat16": BF16,
    "float16": np.float16,
    "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}


def _tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to 10 mantissa bits, to nearest even (tfloat32)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


def _as(x: np.ndarray, name: str) -> np.ndarray:
    return _tf32(x) if name == "tfloat32" else x.astype(_NP[name]).astype(np.float32)


def _matmul(sdt: str, mdt: str, m: int, n: int, **kw: Any) -> Any:
    def k(a, b):
        s = _load(a, getattr(nl, sdt))
        v = _load(b, getattr(nl, mdt))
        p = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=v, **kw)  # HERE
        o = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=p)
        return _store(o)

    return k


@pytest.mark.parametrize(
    ("sdt", "mdt"),
    [
        # nki.isa.nc_matmul (NKI 0.3.0, 0.6.0): float8_e4m3/float8_e5m2/bfloat16/float16/tfloat32/
        # float32; mixed types allowed except that fp32/tf32 pairs only with fp32/tf32
        ("float8_e4m3", "float8_e4m3"),
        ("float8_e5m2", "float8_e5m2"),
        ("float8_e4m3", "float8_e5m2"),
        ("bfloat16", "float8_e4m3"),
        ("float16", "bfloat16"),
        ("float8_e5m2", "float16"),
        ("tfloat32", "tfloat32"),
        ("tfloat32", "float32"),
    ],
)
def test_matmul_input_dtypes_of_the_page(target: str, sdt: str, mdt: str) -> None:
    k_, m, n = 128, 128, 512  # the page's limits: K, M <= 128, N <= 512 (one fp32 PSUM bank)
    a, b = _f32(k_, m), _f32(k_, n)
    want = _as(a, sdt).astype(np.float64).T @ _as(b, mdt).astype(np.float64)
    got = run_kernel(_matmul(sdt, mdt, m, n), [a, b])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)  # fp32 accumulation


@pytest.mark.parametrize(
    ("sdt", "mdt", "error", "rule"),
    [
        ("float32", "bfloat16", "DtypeError", "matmul-fp32-pairing"),
        ("float16", "tfloat32", "DtypeError", "matmul-fp32-pairing"),
        ("int8", "int8", "DtypeError", "matmul-input-dtype"),
        # NKI 0.6.0 page: float8_e4m3fn (OCP FP8) from NeuronCore-v4; 0.3.0 does not list it
        ("float8_e4m3fn", "float8_e4m3", "TargetError", "matmul-e4m3fn"),
        ("bfloat16", "float8_e4m3fn", "TargetError", "matmul-e4m3fn"),
    ],
)
def test_matmul_dtypes_the_page_excludes(target: str, sdt: str, mdt: str, error: str, rule: str) -> None:
    from trncore.sim import errors

    _refused(_matmul(sdt, mdt, 8, 8), [_f32(8, 8), _f32(8, 8)], getattr(errors, error), rule)


def test_matmul_accumulate_loop_example_of_the_0_6_page(target: str) -> None:
    # nki.isa.nc_matmul, NKI 0.6.0 example: K=512 tiled by 128, accumulate=(i > 0)
    def kernel(lhs_t, rhs):
        kk, m = lhs_t.shape
        n = rhs.shape[1]
        result = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        res_psum = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        for i in nl.static_range(kk // 128):
            lhs_sb = nl.ndarray((128, m), dtype=lhs_t.dtype, buffer=nl.sbuf)
            rhs_sb = nl.ndarray((128, n), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhs_sb, src=lhs_t[i * 128 : (i + 1) * 128, :])
            nisa.dma_copy(dst=rhs_sb, src=rhs[i * 128 : (i + 1) * 128, :])
            nisa.nc_matmul(dst=res_psum, stationary=lhs_sb, moving=rhs_sb, accumulate=(i > 0))
        res_sb = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res_sb, src=res_psum)
        nisa.dma_copy(dst=result, src=res_sb)
        return result

    a, b = _f32(512, 64), _f32(512, 96)
    got = run_kernel(kernel, [a, b])
    np.testing.assert_allclose(got, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def _transpose_by_matmul(x, eye):
    s = _load(x)
    p = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=_load(eye), is_transpose=True)
    o = nl.ndarray(p.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=p)
    return _store(o)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_matmul_transpose_mode_is_bit_accurate_on_trn2(dtype: Any) -> None:
    # nki.isa.nc_matmul (NKI 0.3.0, 0.6.0): "Starting NeuronCore-v3, ... is_transpose=True enables
    # bit-accurate data transpose, which can transpose tensors with NaN/Inf values properly"
    x = _f32(16, 24).astype(dtype)
    x[0, 0], x[3, 5], x[7, 1] = np.nan, np.inf, -0.0
    got = run_kernel(_transpose_by_matmul, [x, np.eye(16, dtype=dtype)], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16 if dtype is BF16 else np.uint32),
                                  x.T.view(np.uint16 if dtype is BF16 else np.uint32))  # fmt: skip


def test_matmul_transpose_mode_of_finite_data_on_trn1() -> None:
    # NeuronCore-v2 has no transpose mode (the page): a product with the identity, exact for
    # finite values
    x = _f32(16, 24)
    np.testing.assert_array_equal(run_kernel(_transpose_by_matmul, [x, np.eye(16, dtype=np.float32)],
                                             target="trn1"), x.T)  # fmt: skip


# --- activation / activation_reduce: operands, dtypes, buffers --------------------------------


def _activation(form: dict) -> Any:
    """``activation(op=nl.exp)`` in the form ``form`` describes (keys below)."""

    def k(x, b, s):
        t = _load(x, form.get("x", nl.float32))
        if form.get("data_psum"):
            p = nl.ndarray(x.shape, t.dtype, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=t)
            t = p
        kw: dict = {}
        if form.get("bias") == "vector":
            kw["bias"] = _load(b, form.get("bias_dtype", nl.float32))
        elif form.get("bias") == "scalar":
            kw["bias"] = 0.25
        if form.get("scale") == "vector":
            kw["scale"] = _load(s, form.get("scale_dtype", nl.float32))
        elif form.get("scale") == "scalar":
            kw["scale"] = 1.5
        res = None
        if form.get("reduce"):
            res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
            kw.update(reduce_op=nl.add, reduce_res=res, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        buf = nl.psum if form.get("dst_psum") else nl.sbuf
        o = nl.ndarray(x.shape, form.get("dst", nl.float32), buffer=buf)
        nisa.activation(dst=o, op=nl.exp, data=t, **kw)  # HERE
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=o)
        return (_store(out), _store(res)) if res is not None else _store(out)

    return k


_ACT_NP = {nl.float32: np.float32, nl.bfloat16: BF16, nl.float16: np.float16}


def _activation_reference(form: dict, x, b, s) -> np.ndarray:
    # output = op(data * scale + bias) in float32, cast to dst's dtype (nki.isa.activation)
    xx = x.astype(_ACT_NP[form.get("x", nl.float32)]).astype(np.float64)
    scale = {"vector": s.astype(np.float64), "scalar": 1.5}.get(form.get("scale"), 1.0)
    bias = {"vector": b.astype(_ACT_NP[form.get("bias_dtype", nl.float32)]).astype(np.float64),
            "scalar": 0.25}.get(form.get("bias"), 0.0)  # fmt: skip
    y = np.exp(xx * scale + bias).astype(np.float32)
    return y.astype(_ACT_NP[form.get("dst", nl.float32)]).astype(np.float32)


@pytest.mark.parametrize(
    "form",
    [
        {"bias": "vector", "scale": "vector"},
        {"bias": "vector", "bias_dtype": nl.bfloat16, "scale": "scalar"},  # any dtype but tf32
        {"bias": "vector", "bias_dtype": nl.float16},
        {"x": nl.bfloat16, "dst": nl.bfloat16, "scale": "vector"},
        {"x": nl.float16, "dst": nl.float16},
        {"data_psum": True, "scale": "scalar"},  # data and dst: SBUF or PSUM
        {"dst_psum": True, "bias": "vector"},
        {"data_psum": True, "dst_psum": True, "dst": nl.bfloat16},
        {"reduce": True, "scale": "vector", "bias": "vector"},
    ],
)
def test_activation_forms_of_the_page(target: str, form: dict) -> None:
    _check_activation(form, target)


def test_activation_scalar_bias_on_trn2() -> None:
    # "starting NeuronCore-v3, bias can either be a compile-time constant scalar or a [N, 1] vector"
    _check_activation({"bias": "scalar", "scale": "scalar"}, "trn2")


def _check_activation(form: dict, target: str) -> None:
    x, b, s = _f32(16, 10), _f32(16, 1), _f32(16, 1)
    got = run_kernel(_activation(form), [x, b, s], target=target)
    want = _activation_reference(form, x, b, s)
    if form.get("reduce"):
        got, red = got
        np.testing.assert_allclose(red, want.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("form", "error", "rule", "targets"),
    [
        ({"scale": "vector", "scale_dtype": nl.bfloat16}, DtypeError, "activation-scale-dtype",
         ("trn1", "trn2")),
        ({"scale": "vector", "scale_dtype": nl.float16}, DtypeError, "activation-scale-dtype",
         ("trn1", "trn2")),
        ({"bias": "vector", "bias_dtype": nl.tfloat32}, DtypeError, "activation-bias-dtype",
         ("trn1", "trn2")),
        ({"bias": "scalar"}, TargetError, "activation-scalar-bias", ("trn1",)),
    ],
)  # fmt: skip
def test_activation_neighbours_the_page_excludes(form: dict, error: type, rule: str, targets: tuple) -> None:
    for target in targets:
        _refused(_activation(form), [_f32(16, 10), _f32(16, 1), _f32(16, 1)], error, rule,
                 target=target)  # fmt: skip


def test_activation_reduce_op_is_add_only() -> None:
    # nki.isa.activation (NKI 0.3.0, 0.6.0): "reduce_op must be nl.add" (activation_reduce adds
    # "On NeuronCore-v2"; docs/emulator.md "Readings chosen": nl.add on every target)
    from trncore.sim.errors import LanguageError

    def k(x):
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=o, op=nl.exp, data=_load(x), reduce_op=nl.maximum, reduce_res=r)  # HERE
        return _store(r)

    for target in ("trn1", "trn2"):
        _refused(k, [_f32(8, 4)], LanguageError, "op-token", target=target)


# --- select_reduce: the page's operand rules and its accumulator ------------------------------


def _select_reduce(pdt: Any = nl.uint8, tdt: Any = nl.float32, on_false: str = "scalar",
                   cmds: tuple = ("reset_reduce",), res_dtype: Any = nl.float32) -> Any:  # fmt: skip
    """One select_reduce per entry of ``cmds`` over column blocks of the data; the last writes
    ``reduce_res``."""

    def k(a, c, f):
        p, n = a.shape
        w = n // len(cmds)
        pred, t = _load(c, pdt), _load(a, tdt)
        fv = {"vector": _load(f) if on_false == "vector" else None, "tile": t}.get(on_false, -5.0)
        o = nl.ndarray((p, n), nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((p, 1), res_dtype, buffer=nl.sbuf)
        for i, cmd in enumerate(cmds):
            last = i == len(cmds) - 1
            cols = slice(i * w, (i + 1) * w)
            nisa.select_reduce(  # HERE
                dst=o[:, cols], predicate=pred[:, cols], on_true=t[:, cols],
                on_false=fv[:, cols] if on_false == "tile" else fv,
                reduce_res=m if last else None, reduce_cmd=getattr(nisa.reduce_cmd, cmd),
                reduce_op=nl.maximum, reverse_pred=(i % 2 == 1),
            )  # fmt: skip
        return _store(o), _store(m)

    return k


def _select_reduce_reference(a, c, f, cmds, on_false):
    n = a.shape[1]
    w = n // len(cmds)
    fill = f if on_false == "vector" else np.float32(-5.0)
    outs, acc = [], np.full((a.shape[0], 1), -np.inf, np.float32)
    for i, cmd in enumerate(cmds):
        pred = c[:, i * w : (i + 1) * w] != 0
        pred = ~pred if i % 2 == 1 else pred  # reverse_pred
        y = np.where(pred, a[:, i * w : (i + 1) * w], fill).astype(np.float32)
        outs.append(y)
        if cmd == "reset_reduce":
            acc = np.full_like(acc, -np.inf)
        acc = np.maximum(acc, y.max(axis=1, keepdims=True))
    return np.concatenate(outs, axis=1), acc


@pytest.mark.parametrize(
    ("pdt", "on_false", "cmds"),
    [
        (nl.uint8, "scalar", ("reset_reduce",)),
        (nl.int8, "vector", ("reset_reduce",)),  # on_false: a (P, 1) vector
        (nl.int16, "scalar", ("reset_reduce", "reduce", "reduce")),  # a chain, reduce_res=None between
        (nl.uint16, "vector", ("reset_reduce", "reduce")),
    ],
)
def test_select_reduce_forms_and_accumulator_chain(target: str, pdt: Any, on_false: str, cmds: tuple) -> None:
    a, f = _f32(16, 24), _f32(16, 1)
    c = (rng.random((16, 24)) > 0.4).astype(np.float32)
    o, m = run_kernel(_select_reduce(pdt, on_false=on_false, cmds=cmds), [a, c, f])
    want_o, want_m = _select_reduce_reference(a, c, f, cmds, on_false)
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(m, want_m)


@pytest.mark.parametrize(
    ("kw", "error", "rule"),
    [
        ({"pdt": nl.float32}, DtypeError, "select-reduce-predicate"),
        ({"pdt": nl.int32}, DtypeError, "select-reduce-predicate"),
        ({"tdt": nl.int32}, DtypeError, "select-reduce-on-true"),
        ({"tdt": nl.tfloat32}, DtypeError, "select-reduce-on-true"),
        ({"on_false": "tile"}, ShapeError, "select-reduce-on-false"),
        ({"res_dtype": nl.int32}, DtypeError, "select-reduce-reduce-res"),
    ],
)
def test_select_reduce_neighbours_the_page_excludes(kw: dict, error: type, rule: str) -> None:
    a, f = _f32(16, 24), _f32(16, 1)
    c = np.ones((16, 24), np.float32)
    _refused(_select_reduce(**kw), [a, c, f], error, rule)


# --- nc_transpose: both engines at the page's size edges --------------------------------------


def _transpose(p: int, f: int, engine: Any, dst_buf: Any, dtype: Any = nl.float32) -> Any:
    def k(x):
        o = nl.ndarray((f, p), dtype, buffer=dst_buf)
        nisa.nc_transpose(dst=o, data=_load(x, dtype), engine=engine)  # HERE
        if dst_buf is nl.psum:
            s = nl.ndarray((f, p), dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=o)
            o = s
        return _store(o)

    return k


@pytest.mark.parametrize(
    ("p", "f", "engine", "dst_buf", "dtype"),
    [
        # nki.isa.nc_transpose: Tensor Engine up to [128, 128], SBUF -> PSUM, dst of data's dtype
        (128, 128, E.tensor, nl.psum, nl.float32),
        (128, 1, E.tensor, nl.psum, nl.bfloat16),
        (7, 128, E.tensor, nl.psum, nl.float8_e4m3),
        # Vector Engine up to [32, 32], SBUF or PSUM either side
        (32, 32, E.vector, nl.sbuf, nl.int32),
        (32, 32, E.vector, nl.psum, nl.float32),
        (1, 32, E.vector, nl.sbuf, nl.bfloat16),
        (5, 7, E.unknown, nl.sbuf, nl.int8),  # unknown: the compiler picks (VectorE here)
    ],
)
def test_nc_transpose_at_the_size_edges(
    target: str, p: int, f: int, engine: Any, dst_buf: Any, dtype: Any
) -> None:
    x = (_f32(p, f) * 8).astype(np.float32)
    np_dtype = {nl.float32: np.float32, nl.bfloat16: BF16, nl.float8_e4m3: ml_dtypes.float8_e4m3,
                nl.int32: np.int32, nl.int8: np.int8}[dtype]  # fmt: skip
    want = x.astype(np_dtype) if dtype not in (nl.int32, nl.int8) else np.round(x).astype(np_dtype)
    if target == "trn2" and dtype is nl.float8_e4m3 and engine is E.tensor:
        # NeuronCore-v3's transpose mode writes float8 data as 16-bit PSUM elements (Trainium2
        # Architecture Guide for NKI, "Built-in Transpose Support"): a packed float8 dst is
        # refused (test_wild_styles7.py runs the 2-byte-slot form)
        _refused(_transpose(p, f, engine, dst_buf, dtype), [want], ShapeError, "transpose-fp8-psum")
        return
    got = run_kernel(_transpose(p, f, engine, dst_buf, dtype), [want])
    np.testing.assert_array_equal(got, want.T)


@pytest.mark.parametrize(
    ("p", "f", "engine", "dst_buf", "error", "rule"),
    [
        (32, 33, E.vector, nl.sbuf, ShapeError, "transpose-size"),
        (33, 32, E.vector, nl.sbuf, ShapeError, "transpose-size"),
        (16, 16, E.tensor, nl.sbuf, BufferError, "transpose-buffer"),  # TensorE writes PSUM
    ],
)
def test_nc_transpose_neighbours(p: int, f: int, engine: Any, dst_buf: Any, error: type, rule: str) -> None:
    _refused(_transpose(p, f, engine, dst_buf), [_f32(p, f)], error, rule)


# --- affine_select: on_true dtypes cast through fp32, the comparison operators ----------------


@pytest.mark.parametrize(
    ("dtype", "cmp_op", "npop"),
    [
        (nl.bfloat16, nl.greater_equal, np.greater_equal),
        (nl.float16, nl.less, np.less),
        (nl.int32, nl.not_equal, np.not_equal),
        (nl.float32, nl.equal, np.equal),
    ],
)
def test_affine_select_dtypes_and_comparisons(target: str, dtype: Any, cmp_op: Any, npop: Any) -> None:
    # predicate = cmp_op(offset + c*channel_multiplier + x*step, 0); on_true cast via fp32 to dst
    def k(x):
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=o, pattern=[[-1, x.shape[1]]], channel_multiplier=1,
                           on_true_tile=_load(x), on_false_value=-3.5, cmp_op=cmp_op, offset=2)  # fmt: skip
        return _store(o)

    np_dtype = {nl.bfloat16: BF16, nl.float16: np.float16, nl.int32: np.int32, nl.float32: np.float32}[dtype]
    x = (_f32(8, 10) * 10).astype(np_dtype)
    affine = 2 + np.arange(8)[:, None] - np.arange(10)[None, :]
    want = np.where(npop(affine, 0), x.astype(np.float32), np.float32(-3.5))
    np.testing.assert_array_equal(run_kernel(k, [x]), want)


# --- dma_transpose: the page's examples (NKI 0.6.0) and its direct / indirect constraints -------


def _gather_transpose(src_hbm, idx_hbm, mode=nisa.dge_mode.unknown):
    # the page's "Indirect transpose example" (1-D [128, 1] and 2-D [128, N] indices)
    n = idx_hbm.shape[1]
    p, f = 128, 128 * n
    output = nl.ndarray((p, f), dtype=src_hbm.dtype, buffer=nl.shared_hbm)
    idx_sb = nl.load(idx_hbm)
    dst_sb = nl.ndarray((p, f), dtype=src_hbm.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst_sb, value=0)
    src_ap = src_hbm.ap(pattern=[[p, f], [1, p]], vector_offset=idx_sb, indirect_dim=0)
    nisa.dma_transpose(dst=dst_sb, src=src_ap, axes=(1, 0), dge_mode=mode)  # HERE
    nisa.dma_copy(dst=output, src=dst_sb)
    return output


def _gather_transpose_4d(src_hbm, idx_hbm):
    # the page's "4D indirect transpose example with 2D indices"
    _, d1, d2, d3 = src_hbm.shape
    f = 128 * idx_hbm.shape[1]
    idx_sb = nl.load(idx_hbm)
    dst_sb = nl.ndarray((d3, d1, d2, f), dtype=src_hbm.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst_sb, value=0)
    src_ap = src_hbm.ap(pattern=[[d1 * d2 * d3, f], [d2 * d3, d1], [d3, d2], [1, d3]],
                        vector_offset=idx_sb, indirect_dim=0)  # fmt: skip
    nisa.dma_transpose(dst=dst_sb, src=src_ap, axes=(3, 1, 2, 0))
    output = nl.ndarray((d3, d1, d2, f), dtype=src_hbm.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=output, src=dst_sb)
    return output


@pytest.mark.parametrize("cols", [1, 2])
def test_dma_transpose_indirect_examples_of_the_page(cols: int) -> None:
    # flat_indices = indices.T.flatten()[:src.shape[0]]; gathered = src[flat_indices, :]; dst = gathered.T
    src = _f32(512, 128).astype(BF16)
    idx = rng.permutation(512)[: 128 * cols].astype(np.uint32).reshape(128, cols)
    want = src[idx.T.flatten()].T
    got = run_kernel(_gather_transpose, [src, idx], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_dma_transpose_indirect_4d_example_of_the_page() -> None:
    src = _f32(256, 2, 1, 16).astype(BF16)
    idx = rng.permutation(256)[:128].astype(np.uint32).reshape(128, 1)
    want = np.transpose(src[idx.T.flatten()], (3, 1, 2, 0))
    got = run_kernel(_gather_transpose_4d, [src, idx], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def _direct_transpose(mode: Any = nisa.dge_mode.unknown, oob: Any = nisa.oob_mode.error) -> Any:
    def k(x):
        t = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, dge_mode=mode, oob_mode=oob)  # HERE
        return _store(t)

    return k


@pytest.mark.parametrize("mode", [nisa.dge_mode.unknown, nisa.dge_mode.hwdge, nisa.dge_mode.none])
def test_dma_transpose_direct_dge_modes(mode: Any) -> None:
    # none: the DGE deep dive's table (docs/emulator.md "Readings chosen")
    x = _f32(16, 128).astype(BF16)  # hwdge: 2-byte dtype, shape[0] == 16, shape[-1] <= 128
    got = run_kernel(_direct_transpose(mode), [x], target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), x.T.view(np.uint16))


@pytest.mark.parametrize(
    ("kernel", "args", "rule"),
    [
        # direct: "The only valid dge_modes are unknown and hwdge"; oob skip only with indirection
        (_direct_transpose(nisa.dge_mode.swdge), "direct", "dma-transpose-dge"),
        (_direct_transpose(oob=nisa.oob_mode.skip), "direct", "dma-transpose-oob"),
        # indirect: unknown or swdge, uint32 indices, 2-byte src, indices rows in [16, 128] / 16
        (lambda s, i: _gather_transpose(s, i, nisa.dge_mode.hwdge), "indirect", "dma-transpose-indirect"),
        (_gather_transpose, "int32-indices", "dma-transpose-indirect"),
        (_gather_transpose, "fp32-src", "dma-transpose-indirect"),
    ],
)
def test_dma_transpose_neighbours_the_page_excludes(kernel: Any, args: str, rule: str) -> None:
    from trncore.sim.errors import LanguageError

    idx = rng.permutation(256)[:128].astype(np.uint32).reshape(128, 1)
    src = _f32(256, 128).astype(BF16)
    data = {
        "direct": [_f32(16, 128).astype(BF16)],
        "indirect": [src, idx],
        "int32-indices": [src, idx.astype(np.int32)],
        "fp32-src": [src.astype(np.float32), idx],
    }[args]
    error = LanguageError if rule in ("dma-transpose-dge", "dma-transpose-oob") else ShapeError
    with pytest.raises(error, match=rule) as exc:
        run_kernel(kernel, data, target="trn2")
    marker = _gather_transpose if args != "direct" else kernel
    assert_reported_at(exc.value, marker)


# --- tensor_copy / memset / reciprocal / dma_copy / dma_compute: dtypes and buffers -------------

_NPD = {nl.float32: np.float32, nl.bfloat16: BF16, nl.float16: np.float16, nl.int32: np.int32,
        nl.int16: np.int16, nl.int8: np.int8, nl.uint8: np.uint8, nl.uint16: np.uint16,
        nl.uint32: np.uint32, nl.float8_e4m3: ml_dtypes.float8_e4m3,
        nl.float8_e5m2: ml_dtypes.float8_e5m2}  # fmt: skip


def _to(x: np.ndarray, dtype: Any) -> np.ndarray:
    """float32 ``x`` as the engines cast it to ``dtype``: to nearest even, ints saturating."""
    np_dtype = _NPD[dtype]
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return np.clip(np.rint(x), info.min, info.max).astype(np_dtype)
    return x.astype(np_dtype)


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype", "engine", "via_psum"),
    [
        # nki.isa.tensor_copy: bit-exact when the dtypes agree, else through float32
        (nl.int32, nl.int32, E.vector, False),
        (nl.int32, nl.int32, E.gpsimd, False),
        (nl.uint16, nl.uint16, E.gpsimd, False),
        (nl.float32, nl.float8_e4m3, E.vector, False),
        (nl.float32, nl.float8_e5m2, E.gpsimd, False),
        (nl.float32, nl.int8, E.vector, False),
        (nl.bfloat16, nl.float16, E.unknown, True),  # PSUM: Vector (or Scalar) Engine
        (nl.float32, nl.bfloat16, E.vector, True),
    ],
)
def test_tensor_copy_dtypes_engines_buffers(target: str, src_dtype: Any, dst_dtype: Any,
                                            engine: Any, via_psum: bool) -> None:  # fmt: skip
    def k(x):
        t = _load(x)
        if via_psum:
            p = nl.ndarray(x.shape, x.dtype, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=t)
            t = p
        o = nl.ndarray(x.shape, dst_dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=t, engine=engine)
        return _store(o)

    raw = _f32(8, 16) * 40
    if src_dtype in (nl.int32, nl.uint16):
        x = rng.integers(0, 2**15 if src_dtype is nl.uint16 else 2**31 - 1, (8, 16)).astype(_NPD[src_dtype])
        want = x  # bit-exact: int32 values beyond float32's 24 bits survive
    else:
        x = _to(raw, src_dtype)
        want = _to(x.astype(np.float32), dst_dtype)
    got = run_kernel(k, [x])
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(nl.float32, 2.5), (nl.bfloat16, 1.1), (nl.float16, -3), (nl.float8_e4m3, 0.3),
     (nl.int8, -7), (nl.uint32, 4000000000), (nl.int16, 0), (nl.uint8, 255)],
)  # fmt: skip
def test_memset_every_dtype(target: str, dtype: Any, value: Any) -> None:
    # nki.isa.memset: "supports all valid NKI dtypes"; a float tile takes an int literal
    def k(x):
        t = nl.ndarray((4, 6), dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=value)
        return _store(t)

    want = np.full((4, 6), value, np.float64).astype(np.float32) if isinstance(value, float) else None
    got = run_kernel(k, [np.zeros(1, np.float32)])
    expect = _to(want, dtype) if want is not None else np.full((4, 6), value, _NPD[dtype])
    np.testing.assert_array_equal(got.view(np.uint8), expect.view(np.uint8))


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("dtype", [nl.float32, nl.bfloat16, nl.float16])
def test_reciprocal_dtypes_and_buffers(target: str, dtype: Any, psum: bool) -> None:
    # nki.isa.reciprocal: data and dst in SBUF or PSUM; 1/x in float32, cast to dst's dtype
    def k(x):
        t = _load(x, dtype)
        if psum:
            p = nl.ndarray(x.shape, dtype, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=t)
            t = p
        o = nl.ndarray(x.shape, dtype, buffer=nl.psum if psum else nl.sbuf)
        nisa.reciprocal(dst=o, data=t)
        s = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=o)
        return _store(s)

    x = _f32(8, 12) + 4.0
    xin = _to(x, dtype).astype(np.float32)
    want = _to((1.0 / xin).astype(np.float32), dtype).astype(np.float32)
    np.testing.assert_allclose(run_kernel(k, [x]), want, rtol=1e-6)


@pytest.mark.parametrize(
    ("pred_dtype", "src", "reverse"),
    [(nl.uint8, "tile", False), (nl.uint16, "scalar", True), (nl.uint32, "psum", False)],
)
def test_tensor_copy_predicated_forms(target: str, pred_dtype: Any, src: str, reverse: bool) -> None:
    # nki.isa.tensor_copy_predicated: where predicate (uint8/16/32) is true, dst = src (a tile, or
    # a number); elsewhere dst is unmodified; src may be in PSUM
    def k(x, c):
        pred = _load(c, pred_dtype)
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=o, value=-7.0)
        s: Any = 2.5
        if src != "scalar":
            s = _load(x)
            if src == "psum":
                p = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
                nisa.tensor_copy(dst=p, src=s)
                s = p
        nisa.tensor_copy_predicated(dst=o, src=s, predicate=pred, reverse_pred=reverse)
        return _store(o)

    x = _f32(8, 12)
    c = (rng.random((8, 12)) > 0.5).astype(np.float32)
    mask = (c != 0) ^ reverse
    want = np.where(mask, x if src != "scalar" else np.float32(2.5), np.float32(-7.0))
    np.testing.assert_array_equal(run_kernel(k, [x, c]), want)


def test_tensor_copy_predicated_neighbours() -> None:
    def k(x, c):
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=o, value=0.0)
        nisa.tensor_copy_predicated(dst=o, src=_load(x), predicate=_load(c, nl.int32))  # HERE
        return _store(o)

    _refused(k, [_f32(4, 4), np.ones((4, 4), np.float32)], DtypeError, "predicate-dtype")


@pytest.mark.parametrize(("dtype", "release", "ints"), [
    (nl.bfloat16, "0.6", None), (nl.float8_e5m2, "0.6", None),
    (nl.int8, "0.6", [2, 2, -2, 127, -128]),  # 0.6.0 simulator: to nearest even, saturating
    (nl.int8, "0.3", [1, 2, -2, 127, -128]),  # 0.3.0-0.5.0 simulator: truncation, saturating
])  # fmt: skip
def test_dma_copy_casts_through_fp32_per_release(dtype: Any, release: str, ints: Any) -> None:
    # nki.isa.dma_copy: "first casting from src.dtype to float32, then from float32 to dst.dtype";
    # HBM -> HBM and HBM -> SBUF; docs/emulator-releases.md "NKI releases" (float to int casts)
    def k(x):
        o = nl.ndarray(x.shape, dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=x)
        return o

    x = np.array([[1.5, 2.5, -2.5, 300.0, -300.0]], np.float32)
    got = run_kernel(k, [x], nki_version=release)
    want = np.array([ints], np.int8) if ints is not None else x.astype(_NPD[dtype])
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_dma_compute_sixteen_sources_and_the_seventeenth(target: str) -> None:
    # nki.isa.dma_compute: dst = sum of srcs in float32, cast to dst; "The max number of source
    # tensors in srcs is 16"; SBUF or HBM either side
    def make(n: int) -> Any:
        def k(stack):
            srcs = tuple(_load(stack[i]) if i % 2 else stack[i] for i in range(n))
            o = nl.ndarray(stack.shape[1:], nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_compute(o, srcs, reduce_op=nl.add)  # HERE
            return _store(o)

        return k

    stack = _f32(17, 4, 8)
    want = stack[:16].astype(np.float32).sum(axis=0, dtype=np.float32).astype(BF16)
    got = run_kernel(make(16), [stack])
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
    _refused(make(17), [stack], ShapeError, "dma-compute-srcs")


def test_get_nc_version_per_target() -> None:
    # nki.isa.get_nc_version: "the nc_version of the current target context"
    seen = {}

    def k(x):
        seen["v"] = nisa.get_nc_version()
        return _store(_load(x))

    for target, version in (("trn1", nisa.nc_version.gen2), ("trn2", nisa.nc_version.gen3)):
        run_kernel(k, [_f32(2, 2)], target=target)
        assert seen.pop("v") == version


# --- activation: the rest of the "Supported Activation Functions" table -------------------------

_ERF = np.vectorize(__import__("math").erf)


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_ACT_TABLE = [
    # (op, NumPy meaning in float64, input range inside the table's Valid Input Range)
    ("copy", lambda x: x, (-4, 4)),
    ("gelu", lambda x: 0.5 * x * (1 + _ERF(x / np.sqrt(2))), (-4, 4)),
    ("gelu_dx", lambda x: 0.5 * (1 + _ERF(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
     (-4, 4)),
    ("gelu_apprx_sigmoid", lambda x: x * _sig(1.702 * x), (-4, 4)),
    ("gelu_apprx_sigmoid_dx", lambda x: _sig(1.702 * x) * (1 + 1.702 * x * (1 - _sig(1.702 * x))), (-4, 4)),
    ("silu_dx", lambda x: _sig(x) * (1 + x * (1 - _sig(x))), (-4, 4)),
    ("mish", lambda x: x * np.tanh(np.log1p(np.exp(x))), (-4, 4)),
    ("erf_dx", lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), (-3, 3)),
    ("sign", np.sign, (-4, 4)),
    ("abs", np.abs, (-4, 4)),
    ("log", np.log, (2.0**-10, 1e4)),
    ("sin", np.sin, (-np.pi, np.pi)),
    ("arctan", np.arctan, (-np.pi / 2, np.pi / 2)),
    ("sqrt", np.sqrt, (2.0**-20, 1e6)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (2.0**-20, 1e6)),
    ("reciprocal", lambda x: 1 / x, (0.01, 1e4)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "ref", "bounds"), _ACT_TABLE, ids=[t[0] for t in _ACT_TABLE])
def test_activation_function_table(target: str, name: str, ref: Any, bounds: tuple) -> None:
    def k(x):
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=o, op=getattr(nl, name), data=_load(x))
        return _store(o)

    x = rng.uniform(bounds[0], bounds[1], (8, 32)).astype(np.float32)
    np.testing.assert_allclose(run_kernel(k, [x]), ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


def _activation_reduce_chain(x):
    # NKI 0.6.0 nki.isa.activation_reduce: reduce_res=None keeps the sum in the ScalarE
    # accumulator; a later activation(reduce_cmd=reduce) adds to it and reads it out
    t = _load(x)
    o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=o, op=nl.square, data=t, reduce_op=nl.add, reduce_res=None)  # HERE
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=o, op=nl.copy, data=t, reduce_op=nl.add, reduce_res=r,
                    reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
    return _store(r)


def test_activation_reduce_without_reduce_res_chains_under_0_6(target: str) -> None:
    x = _f32(8, 6)
    want = (x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) + x.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(run_kernel(_activation_reduce_chain, [x], nki_version="0.6"), want, rtol=1e-5)


def test_activation_reduce_without_reduce_res_needs_0_6() -> None:
    from trncore.sim.versions import VersionError

    _refused(_activation_reduce_chain, [_f32(8, 6)], VersionError, "activation_reduce", nki_version="0.3")


# --- dma_copy: the page's indirect gather and scatter examples (NKI 0.3.0 and 0.6.0) -----------


def _indirect_gather(data, indices):
    p, f = indices.shape[0], data.shape[1]
    output = nl.ndarray((p, f), dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    dst = nl.ndarray((p, f), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=dst, src=data.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0))
    nisa.dma_copy(dst=output, src=dst)
    return output


def _indirect_scatter(src_data, indices, output):
    p, f = src_data.shape
    src = nl.ndarray((p, f), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    nisa.dma_copy(dst=output.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0), src=src)
    return output


@pytest.mark.parametrize("release", ["0.3", "0.6"])
def test_dma_copy_indirect_examples_of_the_page(target: str, release: str) -> None:
    data = _f32(64, 16)
    rows = rng.permutation(64)[:32].astype(np.uint32).reshape(32, 1)
    got = run_kernel(_indirect_gather, [data, rows], nki_version=release)
    np.testing.assert_array_equal(got, data[rows[:, 0]])
    src, out = _f32(32, 16), np.zeros((64, 16), np.float32)
    want = out.copy()
    want[rows[:, 0]] = src
    np.testing.assert_array_equal(run_kernel(_indirect_scatter, [src, rows, out], nki_version=release), want)


# --- nc_matmul double_row with PE tiling (NeuronCore-v3) --------------------------------------


def _double_row(position: tuple, size: tuple) -> Any:
    def k(a, b):
        s, v = _load(a, nl.float8_e4m3), _load(b, nl.float8_e5m2)
        p = nl.ndarray((a.shape[2], b.shape[2]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=v, perf_mode=nisa.matmul_perf_mode.double_row,  # HERE
                       tile_position=position, tile_size=size)  # fmt: skip
        o = nl.ndarray(p.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=p)
        return _store(o)

    return k


def test_double_row_with_row_tiling_and_not_column_tiling() -> None:
    # nki.isa.nc_matmul: double_row splits K over the partitions and a first free dim of 2 (e4m3
    # and e5m2 may mix); "cannot be combined with Tensor Engine column tiling mode"
    a, b = _f32(64, 2, 4), _f32(64, 2, 8)
    fa = a.astype(ml_dtypes.float8_e4m3).astype(np.float64)
    fb = b.astype(ml_dtypes.float8_e5m2).astype(np.float64)
    got = run_kernel(_double_row((64, 0), (64, 128)), [a, b], target="trn2")
    np.testing.assert_allclose(got, np.einsum("pjm,pjn->mn", fa, fb), rtol=1e-5, atol=1e-5)
    _refused(_double_row((0, 64), (64, 64)), [a, b], ShapeError, "matmul-double-row-tiling", target="trn2")


def _iota_with(offset: Any, step: Any) -> Any:
    def k(x):
        t = nl.ndarray((4, 6), nl.int32, buffer=nl.sbuf)
        nisa.iota(t, [[step, 6]], offset=offset, channel_multiplier=6)  # HERE
        return _store(t)

    return k


def test_iota_int32_parameters() -> None:
    # nki.isa.iota: "an int32 offset", "an int32 multiplier"; integral values of other types are ints
    want = -3 + 6 * np.arange(4)[:, None] + 2 * np.arange(6)[None, :]
    for offset, step in [(-3, 2), (np.int32(-3), np.int64(2)), (-3.0, 2)]:
        np.testing.assert_array_equal(run_kernel(_iota_with(offset, step), [np.zeros(1, np.float32)]), want)
    for offset, step in [(2.5, 1), (0, 1.5), (2**31, 1)]:
        _refused(_iota_with(offset, step), [np.zeros(1, np.float32)], ShapeError, "pattern-int32")


def _gather_with(mode: Any) -> Any:
    def k(data, indices):
        idx = nl.ndarray((indices.shape[0], 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        dst = nl.ndarray((indices.shape[0], data.shape[1]), dtype=data.dtype, buffer=nl.sbuf)
        f, p = data.shape[1], indices.shape[0]
        view = data.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0)
        nisa.dma_copy(dst=dst, src=view, dge_mode=mode)  # HERE
        return _store(dst)

    return k


def test_dma_copy_gather_dge_modes() -> None:
    # NKI DGE deep dive (SDK 2.29, 2.32): with vector_offset, dma_copy takes unknown or swdge;
    # hardware DGE "does not support indirect (gather/scatter) operations"
    from trncore.sim.errors import LanguageError

    data = _f32(64, 16)
    rows = rng.permutation(64)[:32].astype(np.uint32).reshape(32, 1)
    for mode in (nisa.dge_mode.unknown, nisa.dge_mode.swdge):
        got = run_kernel(_gather_with(mode), [data, rows], target="trn2")
        np.testing.assert_array_equal(got, data[rows[:, 0]])
    for mode in (nisa.dge_mode.hwdge, nisa.dge_mode.none):
        _refused(_gather_with(mode), [data, rows], LanguageError, "dma-copy-indirect-dge", target="trn2")
