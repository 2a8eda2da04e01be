"""Page audit (issue 13), Vector / GpSimd instructions: each documented form of the nki.isa pages
of NKI 0.3.0 (SDK 2.29) and NKI 0.6.0 (SDK 2.32) run on the emulator against NumPy computed here
from the page's own formula, and the invalid neighbour refused at the kernel's line.

Pages: nki.isa.tensor_tensor, tensor_scalar, tensor_reduce, tensor_partition_reduce,
tensor_scalar_cumulative, tensor_scalar_reduce, scalar_tensor_tensor, tensor_tensor_scan, bn_stats,
bn_aggr, max8, nc_find_index8, and the operator table "Supported Math Operators for NKI ISA"
(nki.api.shared). Kernels are built by small factories that capture only plain values (strings,
numbers, tuples), which the kernel key covers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, run_kernel
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    LanguageError,
    PartitionError,
    ShapeError,
)
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(20261126)
F32 = np.float32
BF16 = ml_dtypes.bfloat16

#: The page formulas' operators, in float32 NumPy (the engines compute in float32).
NP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "greater": lambda a, b: (a > b).astype(F32),
    "less_equal": lambda a, b: (a <= b).astype(F32),
}


def _load(x: Any, dtype: Any = None, buffer: str = "sbuf") -> Any:
    """``x`` on chip (in PSUM through a VectorE copy, as DMA never writes PSUM)."""
    s = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    if buffer == "sbuf":
        return s
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.psum)
    nisa.tensor_copy(dst=t, src=s)
    return t


def _store(t: Any, dtype: Any = None) -> Any:
    out = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.shared_hbm)
    src = t
    if t.buffer.name == "psum":
        src = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=src, src=t)
    nisa.dma_copy(dst=out, src=src)
    return out


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(F32)


# ------------------------------------------------------------------ tensor_scalar: unary op0
def _ts_kernel(op0: str, operand0: Any, dtype: str) -> Callable[..., Any]:
    def k(x):
        t = _load(x)
        d = nl.ndarray(x.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.tensor_scalar(dst=d, data=t, op0=getattr(nl, op0), operand0=operand0)  # HERE
        return _store(d)

    return k


_UNARY_NP: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "rsqrt": lambda x: (F32(1) / np.sqrt(x)).astype(F32),
    "reciprocal": lambda x: (F32(1) / x).astype(F32),
    "square": lambda x: x * x,
    "relu": lambda x: np.maximum(x, F32(0)),
    "invert": np.invert,
}


@pytest.mark.parametrize(
    ("op0", "operand0", "version"),
    [
        # the 0.6.0 page: operand0 "must be None or 0 when op0 is a unary operator"
        ("abs", None, "0.6"),
        ("abs", 0, "0.6"),
        ("abs", None, "0.3"),
        ("abs", 2.0, "0.3"),  # 0.3.0 says nothing: a dummy operand, ignored
        ("rsqrt", None, "0.6"),
        ("reciprocal", None, "0.3"),
        # the operator table's "Arithmetic Unary" group gains square and relu in NKI 0.4.0
        ("square", None, "0.6"),
        ("relu", 0, "0.6"),
        ("square", None, "0.4"),
        ("invert", None, "0.6"),  # the unary bitvec operator, on an int32 tile
    ],
)
def test_tensor_scalar_unary_op0(target: str, op0: str, operand0: Any, version: str) -> None:
    if op0 == "invert":
        x = rng.integers(-1000, 1000, (4, 6)).astype(np.int32)
        dtype = "int32"
    else:
        x = (np.abs(_f32(4, 6)) + F32(0.25)) * np.where(rng.random((4, 6)) < 0.5, -1, 1).astype(F32)
        x = np.abs(x) if op0 == "rsqrt" else x
        dtype = "float32"
    got = run_kernel(_ts_kernel(op0, operand0, dtype), [x], target=target, nki_version=version)
    want = _UNARY_NP[op0](x)
    if dtype == "int32":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    ("op0", "operand0", "version", "rule"),
    [
        ("abs", 2.0, "0.6", "unary-operand"),  # 0.4.0+: None or 0 only
        ("reciprocal", 1.0, "0.4", "unary-operand"),
        ("square", None, "0.3", "op-token"),  # not an ALU operator before 0.4.0
        ("relu", None, "0.3", "op-token"),
    ],
)
def test_tensor_scalar_unary_op0_refused(target: str, op0: str, operand0: Any, version: str,
                                         rule: str) -> None:  # fmt: skip
    k = _ts_kernel(op0, operand0, "float32")
    with pytest.raises(LanguageError) as exc:
        run_kernel(k, [_f32(4, 6)], target=target, nki_version=version)
    assert exc.value.rule == rule
    assert "op0" in str(exc.value) or "operand0" in str(exc.value)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_scalar_reduce
def _tsr_kernel(op0: str, operand0: Any, reduce_op: str, reverse0: bool) -> Callable[..., Any]:
    def k(x):
        t = _load(x)
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=getattr(nl, op0), operand0=operand0,  # HERE
                                  reduce_op=getattr(nl, reduce_op), reduce_res=r,
                                  reverse0=reverse0)  # fmt: skip
        return _store(d), _store(r)

    return k


@pytest.mark.parametrize(
    ("op0", "operand0", "reduce_op", "reverse0", "version"),
    [
        # reverse0: operand0 is op0's lhs (both pages' parameter list)
        ("subtract", 1.5, "add", True, "0.3"),
        ("subtract", 1.5, "maximum", True, "0.6"),
        ("power", 2.0, "add", True, "0.6"),
        ("subtract", 1.5, "minimum", False, "0.6"),
        # "any arithmetic operator": the unary rows of the operator table, operand0 None or 0
        ("rsqrt", None, "add", False, "0.3"),
        ("reciprocal", 0, "multiply", False, "0.6"),
        ("square", None, "add", False, "0.6"),
        ("relu", None, "maximum", False, "0.6"),
    ],
)
def test_tensor_scalar_reduce_forms(target: str, op0: str, operand0: Any, reduce_op: str,
                                    reverse0: bool, version: str) -> None:  # fmt: skip
    x = np.abs(_f32(4, 6)) + F32(0.5)
    if op0 == "relu":
        x = _f32(4, 6)
    k = _tsr_kernel(op0, operand0, reduce_op, reverse0)
    got_d, got_r = run_kernel(k, [x], target=target, nki_version=version)
    if op0 in _UNARY_NP:
        want = _UNARY_NP[op0](x)
    else:
        c = F32(operand0)
        want = NP_OPS[op0](c, x) if reverse0 else NP_OPS[op0](x, c)
    want = want.astype(F32)
    np.testing.assert_allclose(got_d, want, rtol=1e-6)
    np.testing.assert_allclose(got_r[:, 0], NP_OPS[reduce_op].reduce(want, axis=1), rtol=1e-5)


def test_tensor_scalar_reduce_unary_with_operand_refused_from_0_4(target: str) -> None:
    k = _tsr_kernel("abs", 3.0, "maximum", False)
    with pytest.raises(LanguageError) as exc:
        run_kernel(k, [_f32(4, 6)], target=target, nki_version="0.6")
    assert exc.value.rule == "unary-operand" and "operand0" in str(exc.value)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ max8 / nc_find_index8 rank
def _max8_kernel() -> Callable[..., Any]:
    def k(x):
        t = _load(x)
        d = nl.ndarray((x.shape[0], 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=d, src=t)  # HERE
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("shape", "version"),
    [((4, 8), "0.6"), ((128, 16384), "0.6"), ((4, 3, 5), "0.6"), ((2, 2, 2, 4), "0.3"),
     ((2, 2, 2, 2, 2), "0.3")],
)  # fmt: skip
def test_max8_shapes(target: str, shape: tuple[int, ...], version: str) -> None:
    x = _f32(*shape)
    got = run_kernel(_max8_kernel(), [x], target=target, nki_version=version)
    want = -np.sort(-x.reshape(shape[0], -1), axis=1)[:, :8]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("shape", "version"),
    [((2, 2, 2, 4), "0.6"), ((2, 2, 2, 4), "0.4"), ((2, 1, 1, 1, 1, 8), "0.3"),
     ((4, 7), "0.6"), ((1, 16385), "0.3")],
)  # fmt: skip
def test_max8_shapes_refused(target: str, shape: tuple[int, ...], version: str) -> None:
    k = _max8_kernel()
    with pytest.raises(ShapeError) as exc:
        run_kernel(k, [_f32(*shape)], target=target, nki_version=version)
    assert "src" in str(exc.value)
    assert_reported_at(exc.value, k)


def _find8_kernel() -> Callable[..., Any]:
    def k(x, v):
        t, tv = _load(x), _load(v)
        d = nl.ndarray((x.shape[0], 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=d, data=t, vals=tv)  # HERE
        return _store(d)

    return k


@pytest.mark.parametrize("version", ["0.3", "0.6"])
def test_nc_find_index8_source_rank(target: str, version: str) -> None:
    """4-d ``data``: valid in the 0.3.0 page (up to 5 dims), refused from 0.4.0 (up to 3)."""
    x = rng.permutation(128).astype(F32).reshape(2, 2, 2, 16) - F32(20)
    flat = x.reshape(2, -1)
    idx = np.stack([rng.choice(64, 8, replace=False) for _ in range(2)])
    vals = np.take_along_axis(flat, idx, axis=1)
    k = _find8_kernel()
    if version == "0.3":
        got = run_kernel(k, [x, vals], target=target, nki_version=version)
        np.testing.assert_array_equal(got, idx.astype(np.uint32))
        return
    with pytest.raises(ShapeError) as exc:
        run_kernel(k, [x, vals], target=target, nki_version=version)
    assert "data" in str(exc.value)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_tensor
def _tt_kernel(op: str, dtype: str, b1: str, b2: str, bd: str, engine: str) -> Callable[..., Any]:
    def k(a, b):
        ta, tb = _load(a, buffer=b1), _load(b, buffer=b2)
        d = nl.ndarray(a.shape, getattr(nl, dtype), buffer=getattr(nl, bd))
        nisa.tensor_tensor(dst=d, data1=ta, data2=tb, op=getattr(nl, op),  # HERE
                           engine=getattr(nisa.engine, engine))  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("op", "dtype", "b1", "b2", "bd", "engine"),
    [
        # the three legal buffer cases, and a PSUM dst
        ("subtract", "float32", "psum", "sbuf", "sbuf", "unknown"),
        ("subtract", "float32", "sbuf", "psum", "psum", "unknown"),
        ("maximum", "bfloat16", "sbuf", "sbuf", "psum", "vector"),
        # nl.power runs on GpSimd
        ("power", "float32", "sbuf", "sbuf", "sbuf", "unknown"),
        ("power", "float32", "sbuf", "sbuf", "sbuf", "gpsimd"),
        # comparisons are arithmetic: 1.0 / 0.0
        ("greater", "float32", "sbuf", "sbuf", "sbuf", "gpsimd"),
        ("less_equal", "bfloat16", "psum", "sbuf", "sbuf", "vector"),
    ],
)
def test_tensor_tensor_forms(target: str, op: str, dtype: str, b1: str, b2: str, bd: str,
                             engine: str) -> None:  # fmt: skip
    a, b = np.abs(_f32(4, 6)) + F32(0.5), _f32(4, 6)
    got = run_kernel(_tt_kernel(op, dtype, b1, b2, bd, engine), [a, b], target=target)
    want = NP_OPS[op](a, b).astype(F32)
    if dtype == "bfloat16":
        want = want.astype(BF16)
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-6)


def test_tensor_tensor_int32_gpsimd_exact_and_vector_through_fp32(target: str) -> None:
    """int32 on GpSimd (the default for all-int32 SBUF operands) is exact; forced onto VectorE it
    goes through float32, which cannot hold 2**24 + 1."""
    a = np.array([[2**24 + 1, -7, 123456789, 5]], np.int32)
    b = np.array([[2, 3, -2, 11]], np.int32)
    exact = run_kernel(_tt_kernel("add", "int32", "sbuf", "sbuf", "sbuf", "unknown"), [a, b],
                       target=target)  # fmt: skip
    np.testing.assert_array_equal(exact, a + b)
    via_f32 = run_kernel(_tt_kernel("add", "int32", "sbuf", "sbuf", "sbuf", "vector"), [a, b],
                         target=target)  # fmt: skip
    np.testing.assert_array_equal(via_f32, (a.astype(F32) + b.astype(F32)).astype(np.int32))


@pytest.mark.parametrize(
    ("op", "b1", "b2", "bd", "engine", "error"),
    [
        ("add", "psum", "psum", "sbuf", "vector", BufferError),  # not both inputs in PSUM
        ("power", "psum", "sbuf", "sbuf", "unknown", BufferError),  # GpSimd cannot read PSUM
        ("add", "sbuf", "sbuf", "psum", "gpsimd", BufferError),
        ("divide", "sbuf", "sbuf", "sbuf", "vector", LanguageError),  # not in the ALU table
    ],
)
def test_tensor_tensor_refused(target: str, op: str, b1: str, b2: str, bd: str, engine: str,
                               error: type) -> None:  # fmt: skip
    k = _tt_kernel(op, "float32", b1, b2, bd, engine)
    with pytest.raises(error) as exc:
        run_kernel(k, [_f32(4, 6), _f32(4, 6)], target=target)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_reduce
def _reduce_kernel(op: str, axis: Any, dst_shape: tuple[int, ...], negate: bool, keepdims: bool,
                   buffer: str, dtype: str) -> Callable[..., Any]:  # fmt: skip
    def k(x):
        t = _load(x, buffer=buffer)
        d = nl.ndarray(dst_shape, getattr(nl, dtype), buffer=getattr(nl, buffer))
        nisa.tensor_reduce(dst=d, op=getattr(nl, op), data=t, axis=axis,  # HERE
                           negate=negate, keepdims=keepdims)  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("op", "axis", "negate", "keepdims", "buffer", "dtype"),
    [
        ("add", 3, False, False, "sbuf", "float32"),
        ("add", (2, 3), False, False, "psum", "float32"),  # both operands in PSUM
        ("multiply", [1, 2, 3], False, False, "sbuf", "float32"),
        ("maximum", (2, 3), True, True, "sbuf", "float32"),  # negate, keepdims
        ("minimum", (3,), False, False, "sbuf", "bfloat16"),
        ("add", (3,), True, False, "sbuf", "bfloat16"),
    ],
)
def test_tensor_reduce_forms(target: str, op: str, axis: Any, negate: bool, keepdims: bool,
                             buffer: str, dtype: str) -> None:  # fmt: skip
    x = _f32(4, 2, 3, 5) * F32(0.8)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    want = NP_OPS[op].reduce(x, axis=axes, keepdims=keepdims).astype(F32)
    if negate:
        want = -want
    shape = want.shape if want.ndim > 1 else (*want.shape, 1)
    k = _reduce_kernel(op, axis, shape, negate, keepdims, buffer, dtype)
    got = run_kernel(k, [x], target=target)
    if dtype == "bfloat16":
        want = want.astype(BF16).astype(F32)
    np.testing.assert_allclose(np.asarray(got, F32), want.reshape(shape), rtol=1e-6)


@pytest.mark.parametrize("op", ["bitwise_xor", "bitwise_and", "logical_or"])
def test_tensor_reduce_bitvec_and_logical(target: str, op: str) -> None:
    x = rng.integers(0, 1 << 20, (4, 9)).astype(np.int32)
    x[0] = 0
    got = run_kernel(_reduce_kernel(op, 1, (4, 1), False, False, "sbuf", "int32"), [x],
                     target=target)  # fmt: skip
    if op == "logical_or":
        want = np.logical_or.reduce(x != 0, axis=1)
    else:
        want = getattr(np, op).reduce(x, axis=1)
    np.testing.assert_array_equal(got[:, 0], want.astype(np.int32))


@pytest.mark.parametrize(
    ("op", "axis", "dst_shape", "dtype", "rule"),
    [
        ("add", (1,), (4, 3, 5), "float32", "reduce-axes"),  # not ending at the last dim
        ("add", (1, 3), (4, 3), "float32", "reduce-axes"),  # not contiguous
        ("add", (3,), (4, 3), "float32", "reduce-dst"),  # dst holds the wrong count
        ("bitwise_or", (3,), (4, 2, 3), "float32", "bitvec-int"),  # bitvec on float data
        ("power", (3,), (4, 2, 3), "float32", "op-token"),  # not a legal reduction op
    ],
)
def test_tensor_reduce_refused(target: str, op: str, axis: Any, dst_shape: tuple[int, ...],
                               dtype: str, rule: str) -> None:  # fmt: skip
    k = _reduce_kernel(op, axis, dst_shape, False, False, "sbuf", dtype)
    with pytest.raises((ShapeError, LanguageError, DtypeError)) as exc:
        run_kernel(k, [_f32(4, 2, 3, 5)], target=target)
    assert getattr(exc.value, "rule", None) == rule
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_partition_reduce
def _preduce_kernel(op: str, dtype: str, buffer: str) -> Callable[..., Any]:
    def k(x):
        t = _load(x)
        d = nl.ndarray((1, *x.shape[1:]), getattr(nl, dtype), buffer=getattr(nl, buffer))
        nisa.tensor_partition_reduce(dst=d, op=getattr(nl, op), data=t)  # HERE
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "version"),
    [
        ("add", (128, 5), "float32", "0.3"),
        ("maximum", (7, 2, 3), "float32", "0.6"),
        ("average", (6, 4), "float32", "0.5"),  # listed from NKI 0.5.0
        ("average", (128, 3), "bfloat16", "0.6"),
        ("bitwise_or", (5, 4), "int32", "0.3"),
        ("bitwise_and", (5, 4), "int32", "0.6"),
    ],
)
def test_tensor_partition_reduce_forms(target: str, op: str, shape: tuple[int, ...], dtype: str,
                                       version: str) -> None:  # fmt: skip
    if dtype == "int32":
        x = rng.integers(0, 1 << 16, shape).astype(np.int32)
        want: np.ndarray = getattr(np, op).reduce(x, axis=0, keepdims=True)
    else:
        x = _f32(*shape)
        fn = {"add": np.sum, "maximum": np.max, "average": np.mean}[op]
        want = fn(x.astype(np.float64), axis=0, keepdims=True).astype(F32)
        if dtype == "bfloat16":
            want = want.astype(BF16).astype(F32)
    got = run_kernel(_preduce_kernel(op, dtype, "sbuf"), [x], target=target, nki_version=version)
    np.testing.assert_allclose(np.asarray(got, F32), want, rtol=2e-6, atol=2e-5)  # fp32 sums


@pytest.mark.parametrize(
    ("op", "buffer", "version", "error"),
    [
        ("minimum", "sbuf", "0.6", LanguageError),  # not in the page's list
        ("multiply", "sbuf", "0.6", LanguageError),
        ("add", "psum", "0.6", BufferError),  # GpSimd: no PSUM
    ],
)
def test_tensor_partition_reduce_refused(target: str, op: str, buffer: str, version: str,
                                         error: type) -> None:  # fmt: skip
    k = _preduce_kernel(op, "float32", buffer)
    with pytest.raises(error) as exc:
        run_kernel(k, [_f32(4, 3)], target=target, nki_version=version)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_scalar_cumulative
def _cum_kernel(op0: str, op1: str, imm0: float, imm1: Any, cmd: str, dtype: str
                ) -> Callable[..., Any]:  # fmt: skip
    def k(x):
        t = _load(x, getattr(nl, dtype))
        d = nl.ndarray(x.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=d, src=t, op0=getattr(nl, op0), op1=getattr(nl, op1),  # HERE
                                      imm0=imm0, imm1=imm1,
                                      reduce_cmd=getattr(nisa.reduce_cmd, cmd))  # fmt: skip
        return _store(d, nl.float32)

    return k


def _cumulative(y: np.ndarray, op1: str, reg0: float) -> np.ndarray:
    """The page's pseudocode: ``reg = op1(op0(x[i], imm0), reg); out[i] = reg``."""
    out = np.empty_like(y)
    reg = np.full(y.shape[0], reg0, F32)
    for i in range(y.shape[1]):
        reg = NP_OPS[op1](y[:, i], reg).astype(F32)
        out[:, i] = reg
    return out


@pytest.mark.parametrize(
    ("op0", "op1", "imm0", "imm1", "cmd", "dtype"),
    [
        ("multiply", "add", 0.5, None, "reset_reduce", "float32"),
        ("add", "subtract", 1.0, None, "reset_reduce", "float32"),
        ("subtract", "maximum", 0.25, None, "reset_reduce", "float32"),
        ("multiply", "minimum", -1.0, None, "reset_reduce", "bfloat16"),
        ("add", "multiply", 1.0, 2.0, "load_reduce", "float32"),
        ("add", "add", 0.0, -3.0, "load_reduce", "int16"),
        ("maximum", "add", 0.0, None, "reset_reduce", "uint8"),
        ("add", "add", 0.0, None, "reset_reduce", "float8_e4m3"),
    ],
)
def test_tensor_scalar_cumulative_forms(target: str, op0: str, op1: str, imm0: float, imm1: Any,
                                        cmd: str, dtype: str) -> None:  # fmt: skip
    ints = dtype in ("int16", "uint8")
    x = rng.integers(0, 5, (3, 7)).astype(F32) if ints or dtype == "float8_e4m3" else _f32(3, 7)
    stored = x.astype(ml_dtypes.float8_e4m3) if dtype == "float8_e4m3" else x
    stored = stored.astype(BF16) if dtype == "bfloat16" else stored
    y = NP_OPS[op0](np.asarray(stored, F32), F32(imm0)).astype(F32)
    reg0 = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf,
            "minimum": np.inf}[op1] if imm1 is None else imm1  # fmt: skip
    want = _cumulative(y, op1, reg0)
    np_dtype = {"float32": F32, "bfloat16": BF16, "int16": np.int16, "uint8": np.uint8,
                "float8_e4m3": ml_dtypes.float8_e4m3}[dtype]  # fmt: skip
    k = _cum_kernel(op0, op1, imm0, imm1, cmd, dtype)
    got = run_kernel(k, [x.astype(np_dtype)], target=target)
    np.testing.assert_allclose(got, want.astype(np_dtype).astype(F32), rtol=1e-6)


@pytest.mark.parametrize(
    ("op1", "dtype", "rule"),
    [
        ("add", "int32", "cumulative-dtype"),  # INT32/UINT32: an ISA limitation
        ("add", "uint32", "cumulative-dtype"),
        ("power", "float32", "op-token"),  # op1 is add, subtract, mult, max or min
        ("bitwise_or", "float32", "op-token"),
    ],
)
def test_tensor_scalar_cumulative_refused(target: str, op1: str, dtype: str, rule: str) -> None:
    k = _cum_kernel("add", op1, 0.0, None, "reset_reduce", dtype)
    x = rng.integers(0, 5, (3, 7)).astype(np.int32 if "int" in dtype else F32)
    if dtype == "uint32":
        x = x.astype(np.uint32)
    with pytest.raises((DtypeError, LanguageError)) as exc:
        run_kernel(k, [x], target=target)
    assert getattr(exc.value, "rule", None) == rule
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ scalar_tensor_tensor
def _stt_kernel(op0: str, c: Any, op1: str, rev0: bool, rev1: bool, vec: bool, bx: str, b1: str,
                bd: str) -> Callable[..., Any]:  # fmt: skip
    def k(x, o1, v):
        t, to = _load(x, buffer=bx), _load(o1, buffer=b1)
        d = nl.ndarray(x.shape, nl.float32, buffer=getattr(nl, bd))
        operand0 = _load(v) if vec else c
        nisa.scalar_tensor_tensor(dst=d, data=t, op0=getattr(nl, op0), operand0=operand0,  # HERE
                                  op1=getattr(nl, op1), operand1=to, reverse0=rev0,
                                  reverse1=rev1)  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("op0", "c", "op1", "rev0", "rev1", "vec", "bx", "b1", "bd"),
    [
        ("subtract", 0.5, "subtract", True, True, False, "sbuf", "sbuf", "sbuf"),
        ("subtract", 0.5, "subtract", False, True, False, "psum", "sbuf", "psum"),
        ("multiply", None, "add", False, False, True, "sbuf", "psum", "sbuf"),
        ("greater", 0.0, "multiply", False, False, False, "sbuf", "sbuf", "sbuf"),
        ("power", 2.0, "maximum", False, False, False, "sbuf", "sbuf", "psum"),
    ],
)
def test_scalar_tensor_tensor_forms(target: str, op0: str, c: Any, op1: str, rev0: bool,
                                    rev1: bool, vec: bool, bx: str, b1: str, bd: str) -> None:  # fmt: skip
    x, o1, v = _f32(4, 6), _f32(4, 6), _f32(4, 1)
    k = _stt_kernel(op0, c, op1, rev0, rev1, vec, bx, b1, bd)
    got = run_kernel(k, [x, o1, v], target=target)
    operand = v if vec else F32(c)
    t = NP_OPS[op0](operand, x) if rev0 else NP_OPS[op0](x, operand)
    want = NP_OPS[op1](o1, t) if rev1 else NP_OPS[op1](t, o1)
    np.testing.assert_allclose(got, want.astype(F32), rtol=1e-6)


@pytest.mark.parametrize(
    ("op0", "bx", "b1", "error"),
    [
        ("add", "psum", "psum", BufferError),  # data and operand1 not both in PSUM
        ("bitwise_and", "sbuf", "sbuf", LanguageError),  # bitvec operators are not supported
    ],
)
def test_scalar_tensor_tensor_refused(target: str, op0: str, bx: str, b1: str, error: type) -> None:
    k = _stt_kernel(op0, 1, "add", False, False, False, bx, b1, "sbuf")
    with pytest.raises(error) as exc:
        run_kernel(k, [_f32(4, 6), _f32(4, 6), _f32(4, 1)], target=target)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_tensor_scan
def _scan_kernel(op0: str, op1: str, initial: Any, rev0: bool, rev1: bool, vec: bool, b0: str,
                 b1: str, dtype: str) -> Callable[..., Any]:  # fmt: skip
    def k(a, b, v):
        ta, tb = _load(a, buffer=b0), _load(b, buffer=b1)
        d = nl.ndarray(a.shape, getattr(nl, dtype), buffer=nl.sbuf)
        init = _load(v) if vec else initial
        nisa.tensor_tensor_scan(dst=d, data0=ta, data1=tb, initial=init,  # HERE
                                op0=getattr(nl, op0), op1=getattr(nl, op1), reverse0=rev0,
                                reverse1=rev1)  # fmt: skip
        return _store(d, nl.float32)

    return k


def _scan(a: np.ndarray, b: np.ndarray, init: Any, op0: str, op1: str, rev0: bool, rev1: bool
          ) -> np.ndarray:  # fmt: skip
    """The page's NumPy: ``result[:, i] = op1(op0(data0[:, i], result[:, i-1]), data1[:, i])``;
    reverse0 makes data0 op0's rhs, reverse1 makes data1 op1's lhs."""
    out = np.empty_like(a)
    prev = np.broadcast_to(np.asarray(init, F32).reshape(-1), (a.shape[0],))
    for i in range(a.shape[1]):
        t = NP_OPS[op0](prev, a[:, i]) if rev0 else NP_OPS[op0](a[:, i], prev)
        prev = (NP_OPS[op1](b[:, i], t) if rev1 else NP_OPS[op1](t, b[:, i])).astype(F32)
        out[:, i] = prev
    return out


@pytest.mark.parametrize(
    ("op0", "op1", "initial", "rev0", "rev1", "vec", "b0", "b1", "dtype"),
    [
        ("multiply", "add", 0.0, False, False, False, "sbuf", "sbuf", "float32"),
        ("subtract", "subtract", 1.0, True, True, False, "psum", "sbuf", "float32"),
        ("maximum", "add", None, False, False, True, "sbuf", "psum", "float32"),
        ("multiply", "add", 0.5, False, False, False, "sbuf", "sbuf", "bfloat16"),
    ],
)
def test_tensor_tensor_scan_forms(target: str, op0: str, op1: str, initial: Any, rev0: bool,
                                  rev1: bool, vec: bool, b0: str, b1: str, dtype: str) -> None:  # fmt: skip
    a, b, v = _f32(4, 9) * F32(0.5), _f32(4, 9), _f32(4, 1)
    k = _scan_kernel(op0, op1, initial, rev0, rev1, vec, b0, b1, dtype)
    got = run_kernel(k, [a, b, v], target=target)
    want = _scan(a, b, v if vec else initial, op0, op1, rev0, rev1)
    if dtype == "bfloat16":
        want = want.astype(BF16).astype(F32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    ("op0", "b0", "b1", "error"),
    [
        ("multiply", "psum", "psum", BufferError),
        ("bitwise_or", "sbuf", "sbuf", LanguageError),  # "any binary arithmetic operator"
    ],
)
def test_tensor_tensor_scan_refused(target: str, op0: str, b0: str, b1: str, error: type) -> None:
    k = _scan_kernel(op0, "add", 0.0, False, False, False, b0, b1, "float32")
    with pytest.raises(error) as exc:
        run_kernel(k, [_f32(4, 9), _f32(4, 9), _f32(4, 1)], target=target)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ bn_stats / bn_aggr
def _bn_kernel(dtype: str, split: int) -> Callable[..., Any]:
    def k(x):
        t = _load(x, getattr(nl, dtype))
        n = 1 if split == 0 else 2
        s = nl.ndarray((x.shape[0], 6 * n), nl.float32, buffer=nl.sbuf)
        if n == 1:
            nisa.bn_stats(dst=s, data=t)  # HERE
        else:
            nisa.bn_stats(dst=s[:, 0:6], data=t[:, 0:split])
            nisa.bn_stats(dst=s[:, 6:12], data=t[:, split : x.shape[1]])
        a = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=a, data=s)
        return _store(s), _store(a)

    return k


@pytest.mark.parametrize(
    ("shape", "dtype", "split"),
    [((128, 512), "float32", 0), ((4, 1), "float32", 0), ((4, 7), "bfloat16", 0),
     ((3, 700), "float32", 512), ((2, 9), "float32", 4)],
)  # fmt: skip
def test_bn_stats_and_aggr(target: str, shape: tuple[int, int], dtype: str, split: int) -> None:
    x = _f32(*shape) + F32(2.0)
    if dtype == "bfloat16":
        x = x.astype(BF16).astype(F32)
    stats, agg = run_kernel(_bn_kernel(dtype, split), [x], target=target)
    parts = [x] if split == 0 else [x[:, :split], x[:, split:]]
    for g, part in enumerate(parts):  # per tile: (count, mean, var*count) of even, then odd
        for h, half in enumerate((part[:, 0::2], part[:, 1::2])):
            c = stats[:, 6 * g + 3 * h : 6 * g + 3 * h + 3]
            n = half.shape[1]
            np.testing.assert_array_equal(c[:, 0], np.full(shape[0], n, F32))
            if n:
                np.testing.assert_allclose(c[:, 1], half.mean(axis=1), rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(c[:, 2], half.var(axis=1) * n, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(agg[:, 0], x.astype(np.float64).mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(agg[:, 1], x.astype(np.float64).var(axis=1), rtol=1e-4, atol=1e-6)


def test_bn_stats_over_512_refused(target: str) -> None:
    k = _bn_kernel("float32", 0)
    with pytest.raises(ShapeError) as exc:
        run_kernel(k, [_f32(2, 513)], target=target)
    assert exc.value.rule == "bn-stats-fmax"
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ sendrecv (LNC=2, trn2)
def _swap_kernel(rows: int, cols: int, dtype: str) -> Callable[..., Any]:
    def k(x):
        me = nl.program_id(axis=0)
        t = nl.ndarray((rows, cols), getattr(nl, dtype), buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me * rows : (me + 1) * rows, :])
        got = nl.ndarray((rows, cols), getattr(nl, dtype), buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0,  # HERE
                      dma_engine=nisa.dma_engine.gpsimd_dma)  # fmt: skip
        out = nl.ndarray((2 * rows, cols), getattr(nl, dtype), buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[me * rows : (me + 1) * rows, :], src=got)
        return out

    return k


@pytest.mark.parametrize(
    ("rows", "cols", "dtype", "version"),
    [
        (16, 256, "float32", "0.3"),  # 1024 bytes per partition: the 32-bit limit
        (24, 8, "float32", "0.6"),  # 24 partitions: no multiple-of-16 rule from NKI 0.4.0
        (5, 256, "bfloat16", "0.4"),  # 512 bytes: the 16-bit limit
        (32, 256, "int8", "0.6"),  # 256 bytes: the 8-bit limit
    ],
)
def test_sendrecv_gpsimd_dma_forms(rows: int, cols: int, dtype: str, version: str) -> None:
    np_dtype = {"float32": F32, "bfloat16": BF16, "int8": np.int8}[dtype]
    x = rng.integers(-100, 100, (2 * rows, cols)).astype(np_dtype)
    got = run_kernel(_swap_kernel(rows, cols, dtype), [x], target="trn2", lnc=2,
                     nki_version=version)  # fmt: skip
    np.testing.assert_array_equal(got, np.concatenate([x[rows:], x[:rows]]))


@pytest.mark.parametrize(
    ("rows", "cols", "dtype", "version"),
    [
        (24, 8, "float32", "0.3"),  # the 0.3.0 page: a multiple of 16 partitions
        (16, 257, "float32", "0.6"),  # 1028 bytes > 1024
        (16, 257, "bfloat16", "0.3"),  # 514 bytes > 512
        (16, 257, "int8", "0.6"),  # 257 bytes > 256
    ],
)
def test_sendrecv_gpsimd_dma_refused(rows: int, cols: int, dtype: str, version: str) -> None:
    np_dtype = {"float32": F32, "bfloat16": BF16, "int8": np.int8}[dtype]
    k = _swap_kernel(rows, cols, dtype)
    with pytest.raises(ShapeError) as exc:
        run_kernel(k, [np.zeros((2 * rows, cols), np_dtype)], target="trn2", lnc=2,
                   nki_version=version)  # fmt: skip
    assert exc.value.rule == "sendrecv-gpsimd-dma" and "src" in str(exc.value)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ nc_stream_shuffle
def _shuffle_kernel(mask: tuple[int, ...], src_rows: tuple[int, int], dst_rows: tuple[int, int],
                    src_buffer: str, dtype: str, dst_dtype: str) -> Callable[..., Any]:  # fmt: skip
    def k(x):
        big = nl.ndarray((128, x.shape[1]), getattr(nl, dtype), buffer=nl.sbuf)
        nisa.dma_copy(dst=big, src=x)
        src = big
        if src_buffer == "psum":
            src = nl.ndarray((128, x.shape[1]), getattr(nl, dtype), buffer=nl.psum)
            nisa.tensor_copy(dst=src, src=big)
        out = nl.ndarray((128, x.shape[1]), getattr(nl, dst_dtype), buffer=nl.sbuf)
        nisa.memset(dst=out, value=-1)
        nisa.nc_stream_shuffle(dst=out[dst_rows[0] : dst_rows[1], :],  # HERE
                               src=src[src_rows[0] : src_rows[1], :], shuffle_mask=list(mask))  # fmt: skip
        return _store(out)

    return k


_REVERSE = tuple(31 - i for i in range(32))


@pytest.mark.parametrize(
    ("mask", "src_rows", "dst_rows", "src_buffer", "dtype"),
    [
        # 128 active partitions: the same mask in each quadrant
        (_REVERSE, (0, 128), (0, 128), "sbuf", "float32"),
        # src in PSUM, a 64-partition dst starting at 64 (allowed: 0 or 64), bfloat16
        (tuple((i + 5) % 32 for i in range(32)), (0, 64), (64, 128), "psum", "bfloat16"),
        # 32 active partitions starting at 96, 255 slots left unmodified
        (tuple(255 if i % 3 == 0 else i // 2 for i in range(32)), (32, 64), (96, 128), "sbuf",
         "int32"),
        # a partial quadrant: 40 partitions are 64 active ones, starting at 0
        (tuple(i % 8 for i in range(32)), (0, 40), (0, 40), "sbuf", "float32"),
    ],
)  # fmt: skip
def test_nc_stream_shuffle_forms(target: str, mask: tuple[int, ...], src_rows: tuple[int, int],
                                 dst_rows: tuple[int, int], src_buffer: str, dtype: str) -> None:  # fmt: skip
    np_dtype = {"float32": F32, "bfloat16": BF16, "int32": np.int32}[dtype]
    x = rng.integers(-50, 50, (128, 3)).astype(np_dtype)
    k = _shuffle_kernel(mask, src_rows, dst_rows, src_buffer, dtype, dtype)
    got = run_kernel(k, [x], target=target)
    want = np.full((128, 3), -1, np_dtype)
    src = x[src_rows[0] : src_rows[1]]
    for d in range(dst_rows[1] - dst_rows[0]):  # page: dst[q*32+i] = src[q*32+mask[i]]
        q, i = divmod(d, 32)
        if mask[i] != 255:
            want[dst_rows[0] + d] = src[q * 32 + mask[i]]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("src_rows", "dst_rows", "dst_dtype", "error"),
    [
        # the page's start rule is the compute engines' one ("start-partition" reports it first)
        ((0, 64), (32, 96), "float32", "start-partition"),  # 64 active: start 0 or 64
        ((16, 48), (0, 32), "float32", "start-partition"),  # 32 active: 0/32/64/96
        ((0, 32), (0, 32), "bfloat16", "stream-shuffle-dtype"),  # dst has src's dtype
    ],
)
def test_nc_stream_shuffle_refused(
    target: str, src_rows: tuple[int, int], dst_rows: tuple[int, int], dst_dtype: str, error: str
) -> None:
    k = _shuffle_kernel(_REVERSE, src_rows, dst_rows, "sbuf", "float32", dst_dtype)
    with pytest.raises((ShapeError, DtypeError, PartitionError)) as exc:
        run_kernel(k, [_f32(128, 3)], target=target)
    assert exc.value.rule == error
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ tensor_scalar: binary forms
def _ts2_kernel(op0: str, c0: Any, op1: Any, c1: Any, rev0: bool, rev1: bool, vec_buffer: str,
                vec_dtype: str, dtype: str, dst_dtype: str, engine: str) -> Callable[..., Any]:  # fmt: skip
    def k(x, v0, v1):
        t = _load(x, getattr(nl, dtype))
        operand0 = _load(v0, getattr(nl, vec_dtype), vec_buffer) if c0 is None else c0
        operand1 = _load(v1, getattr(nl, vec_dtype), vec_buffer) if c1 is None and op1 else c1
        operand1 = None if isinstance(operand1, str) else operand1  # an op1 without its operand1
        d = nl.ndarray(x.shape, getattr(nl, dst_dtype), buffer=nl.sbuf)
        nisa.tensor_scalar(dst=d, data=t, op0=getattr(nl, op0), operand0=operand0,  # HERE
                           reverse0=rev0, op1=getattr(nl, op1) if op1 else None,
                           operand1=operand1, reverse1=rev1,
                           engine=getattr(nisa.engine, engine))  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("op0", "c0", "op1", "c1", "rev0", "rev1", "vec_buffer", "dtype", "dst_dtype", "engine"),
    [
        # (P, 1) float32 operands in SBUF or PSUM, both reversed, a bfloat16 dst
        ("subtract", None, "power", None, True, True, "psum", "float32", "bfloat16", "vector"),
        ("multiply", None, "add", 0.5, False, False, "sbuf", "bfloat16", "float32", "unknown"),
        # arithmetic on int32 data: cast to float32, computed, cast back
        ("multiply", 3.0, "subtract", 7.0, False, False, "sbuf", "int32", "int32", "vector"),
        # the Scalar Engine's combinations on trn2 (any on trn1)
        ("multiply", None, "add", None, False, False, "sbuf", "float32", "float32", "scalar"),
        ("add", -1.0, None, None, False, False, "sbuf", "float32", "float32", "scalar"),
        ("multiply", 2.0, None, None, False, False, "sbuf", "float32", "float32", "scalar"),
        # two bitvec operators on integers, operands as bit patterns
        ("left_shift", 3, "bitwise_and", 0xFF0, False, False, "sbuf", "int32", "int32", "vector"),
        ("right_shift", 2, "bitwise_xor", None, False, False, "sbuf", "int32", "int32", "vector"),
    ],
)
def test_tensor_scalar_binary_forms(target: str, op0: str, c0: Any, op1: Any, c1: Any, rev0: bool,
                                    rev1: bool, vec_buffer: str, dtype: str, dst_dtype: str,
                                    engine: str) -> None:  # fmt: skip
    bitvec = op0 in ("left_shift", "right_shift")
    if bitvec or dtype == "int32":
        x = rng.integers(-200, 200, (4, 6)).astype(np.int32)
        v0, v1 = (rng.integers(1, 5, (4, 1)).astype(np.int32) for _ in range(2))
        vec_dtype = "int32"
    else:
        x = np.abs(_f32(4, 6)) + F32(0.5)
        v0, v1 = np.abs(_f32(4, 1)) + F32(0.5), np.abs(_f32(4, 1)) + F32(0.25)
        vec_dtype = "float32"
    k = _ts2_kernel(op0, c0, op1, c1, rev0, rev1, vec_buffer, vec_dtype, dtype, dst_dtype, engine)
    got = run_kernel(k, [x, v0, v1], target=target)
    if bitvec:
        a0 = np.int32(c0) if c0 is not None else v0
        a1 = np.int32(c1) if c1 is not None else v1
        y = np.left_shift(x, a0) if op0 == "left_shift" else (
            x.view(np.uint32) >> a0.astype(np.uint32)).view(np.int32)  # logical shift right
        want = np.bitwise_and(y, a1) if op1 == "bitwise_and" else np.bitwise_xor(y, a1)
        np.testing.assert_array_equal(got, want)
        return
    xs = np.asarray(x.astype(BF16) if dtype == "bfloat16" else x, F32)
    a0 = F32(c0) if c0 is not None else v0
    y = NP_OPS[op0](a0, xs) if rev0 else NP_OPS[op0](xs, a0)
    if op1:
        a1 = F32(c1) if c1 is not None else v1
        y = NP_OPS[op1](a1, y) if rev1 else NP_OPS[op1](y, a1)
    y = y.astype(F32)
    if dst_dtype == "bfloat16":
        np.testing.assert_array_equal(np.asarray(got, F32), y.astype(BF16).astype(F32))
    elif dst_dtype == "int32":
        np.testing.assert_array_equal(got, np.rint(y).astype(np.int32))
    else:
        np.testing.assert_allclose(got, y, rtol=1e-6)


@pytest.mark.parametrize(
    ("op0", "c0", "op1", "c1", "vec_dtype", "dtype", "engine", "targets", "rule"),
    [
        # arithmetic operands "must be float32"
        ("add", None, None, None, "bfloat16", "float32", "vector", "both", "tensor-scalar-operand-fp32"),
        # a float vector operand with a bitvec operator
        ("bitwise_and", None, None, None, "float32", "int32", "vector", "both", "bitvec-int"),
        # op0 and op1 of one kind
        ("add", 1.0, "bitwise_or", 1, "float32", "int32", "vector", "both", "tensor-scalar-op-kinds"),
        # op1 and operand1 together or not at all
        ("add", 1.0, "multiply", "none", "float32", "float32", "vector", "both", "tensor-scalar-op1"),
        # the Scalar Engine on trn2: only (multiply, add), (multiply, None), (add, None)
        ("subtract", 1.0, None, None, "float32", "float32", "scalar", "trn2",
         "tensor-scalar-scalar-engine"),
        ("add", 1.0, "multiply", 2.0, "float32", "float32", "scalar", "trn2",
         "tensor-scalar-scalar-engine"),
        # GpSimd: bitvec operators "must run on Vector Engine" (arithmetic ones run with a
        # warning, test_wild_styles16)
        ("bitwise_and", 1, None, None, "int32", "int32", "gpsimd", "both", "tensor-scalar-gpsimd"),
    ],
)  # fmt: skip
def test_tensor_scalar_binary_refused(target: str, op0: str, c0: Any, op1: Any, c1: Any,
                                      vec_dtype: str, dtype: str, engine: str, targets: str,
                                      rule: str) -> None:  # fmt: skip
    if targets != "both" and target != targets:
        return  # the rule is the target's: trn1's Scalar Engine takes any combination
    k = _ts2_kernel(op0, c0, op1, c1, False, False, "sbuf", vec_dtype, dtype,
                    "float32" if dtype == "float32" else "int32", engine)  # fmt: skip
    np_v = F32 if vec_dtype != "int32" else np.int32
    x = np.zeros((4, 6), F32 if dtype == "float32" else np.int32)
    with pytest.raises((DtypeError, LanguageError)) as exc:
        run_kernel(k, [x, np.ones((4, 1), np_v), np.ones((4, 1), np_v)], target=target)
    assert exc.value.rule == rule
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ nonzero_with_count (trn2)
def _nonzero_kernel(src_dtype: str, dst_dtype: str, src_buffer: str, offset: Any, pad: Any,
                    extra: int) -> Callable[..., Any]:  # fmt: skip
    def k(x):
        s = _load(x, getattr(nl, src_dtype), src_buffer)
        d = nl.ndarray((x.shape[0], x.shape[1] + extra), getattr(nl, dst_dtype), buffer=nl.sbuf)
        nisa.memset(dst=d, value=7)
        nisa.nonzero_with_count(dst=d, src=s, index_offset=offset, padding_val=pad)  # HERE
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("p", "t", "src_dtype", "offset", "pad"),
    [(128, 6, "int32", 0, -1), (48, 1, "float32", 1000, 0), (16, 33, "int32", -5, 99)],
)
def test_nonzero_with_count_forms(p: int, t: int, src_dtype: str, offset: int, pad: int) -> None:
    x = (rng.random((p, t)) < 0.4) * rng.integers(-3, 4, (p, t))
    x = x.astype(np.int32 if src_dtype == "int32" else F32)
    got = run_kernel(_nonzero_kernel(src_dtype, "int32", "sbuf", offset, pad, 1), [x],
                     target="trn2")  # fmt: skip
    want = np.full((p, t + 1), 7, np.int32)  # rows no GpSimd core reads stay unmodified
    for row in range(0, p, 16):  # the page: partitions 0, 16, ..., 112 only
        nz = np.flatnonzero(x[row]) + offset
        want[row, : t] = pad
        want[row, : nz.size] = nz
        want[row, t] = nz.size
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype", "src_buffer", "offset", "extra", "error"),
    [
        ("bfloat16", "int32", "sbuf", 0, 1, DtypeError),  # src float32 or int32
        ("float32", "float32", "sbuf", 0, 1, DtypeError),  # dst int32
        ("float32", "int32", "psum", 0, 1, BufferError),  # SBUF only (GpSimd)
        ("float32", "int32", "sbuf", 0, 0, ShapeError),  # dst has one more element
        ("float32", "int32", "sbuf", 0.5, 1, TypeError),  # index_offset is an int32
    ],
)
def test_nonzero_with_count_refused(src_dtype: str, dst_dtype: str, src_buffer: str, offset: Any,
                                    extra: int, error: type) -> None:  # fmt: skip
    k = _nonzero_kernel(src_dtype, dst_dtype, src_buffer, offset, -1, extra)
    with pytest.raises(error) as exc:
        run_kernel(k, [np.ones((16, 4), F32)], target="trn2")
    if error is not TypeError:
        assert_reported_at(exc.value, k)
    assert any(w in str(exc.value) for w in ("src", "dst", "index_offset"))


# ------------------------------------------------------------------ topk (NKI 0.6.0, GpSimd)
def _topk_kernel(k_: int, n: int, val_dtype: str, idx_dtype: str) -> Callable[..., Any]:
    def k(x):
        src = _load(x)
        vals = nl.ndarray((x.shape[0], k_), getattr(nl, val_dtype), buffer=nl.sbuf)
        idx = nl.ndarray((x.shape[0], k_), getattr(nl, idx_dtype), buffer=nl.sbuf)
        nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=n)  # HERE
        return _store(vals), _store(idx)

    return k


@pytest.mark.parametrize(
    ("p", "cols", "n", "k"),
    [(16, 1, 8, 8), (128, 3, 40, 1), (48, 4, 64, 64), (16, 9, 130, 17)],
)
def test_topk_forms(target: str, p: int, cols: int, n: int, k: int) -> None:
    """The page: each group of 16 partitions is a snake (element j at partition j % 16, column
    j // 16) of n active elements; the K largest, ascending, come out as a snake of the group too
    (result r at partition r % 16, column r // 16: docs/emulator.md, "Readings chosen")."""
    perm = rng.permutation(p * cols).astype(F32) - F32(p * cols // 2)  # distinct, exact in bf16
    x = perm.reshape(p, cols).astype(BF16)
    vals, idx = run_kernel(_topk_kernel(k, n, "bfloat16", "uint32"), [x], target=target)
    r = np.arange(k)
    for g in range(p // 16):
        snake = x[16 * g : 16 * g + 16].astype(F32).T.reshape(-1)[:n]
        order = np.argsort(snake, kind="stable")[-k:]
        at = (16 * g + r % 16, r // 16)
        np.testing.assert_array_equal(idx[at], order.astype(np.uint32))
        np.testing.assert_array_equal(vals[at].astype(F32), snake[order])


@pytest.mark.parametrize(
    ("p", "cols", "n", "k", "val_dtype", "idx_dtype", "version", "error"),
    [
        (16, 1, 8, 9, "bfloat16", "uint32", "0.6", ShapeError),  # K <= n
        (16, 2, 33, 4, "bfloat16", "uint32", "0.6", ShapeError),  # src free dim >= ceil(n / 16)
        (16, 4, 40, 4, "float32", "uint32", "0.6", DtypeError),  # val_dst bfloat16
        (16, 4, 40, 4, "bfloat16", "int32", "0.6", DtypeError),  # idx_dst uint32
        (16, 4, 40, 4, "bfloat16", "uint32", "0.5", VersionError),  # NKI 0.6.0
    ],
)
def test_topk_refused(p: int, cols: int, n: int, k: int, val_dtype: str, idx_dtype: str,
                      version: str, error: type) -> None:  # fmt: skip
    kern = _topk_kernel(k, n, val_dtype, idx_dtype)
    with pytest.raises(error) as exc:
        run_kernel(kern, [np.zeros((p, cols), BF16)], target="trn2", nki_version=version)
    assert_reported_at(exc.value, kern)


def test_tensor_scalar_reduce_subtract_reduction_per_release(target: str) -> None:
    """``reduce_op=nl.subtract``: listed by the NKI 0.3.0 page with no definition (not emulated,
    NotImplementedError naming it); not listed from 0.4.0 (an operator error at the line)."""
    k = _tsr_kernel("multiply", 2.0, "subtract", False)
    with pytest.raises(NotImplementedError, match=r"tensor_scalar_reduce\(reduce_op=nl.subtract\)"):
        run_kernel(k, [_f32(4, 6)], target=target, nki_version="0.3")
    with pytest.raises(LanguageError) as exc:
        run_kernel(k, [_f32(4, 6)], target=target, nki_version="0.6")
    assert exc.value.rule == "op-token" and "reduce_op" in str(exc.value)
    assert_reported_at(exc.value, k)


# ------------------------------------------------------------------ registers
def _register_kernel(load_from: str, store_to: str) -> Callable[..., Any]:
    """register_load from HBM ([1] view) or SBUF ([1, 1] or the page's nl.ones([1]) example),
    register_move between registers, register_store into HBM or SBUF."""

    def k(x):
        r = nisa.register_alloc()
        if load_from == "hbm":
            nisa.register_load(r, x[0, 1:2])
        elif load_from == "sbuf":
            t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[0:1, 2:3])
            nisa.register_load(r, t)
        elif load_from == "psum":
            t = nl.ndarray((1, 1), nl.int32, buffer=nl.psum)
            nisa.register_load(r, t)  # HERE PSUM
        elif load_from == "two":
            t = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[0:1, 0:2])
            nisa.register_load(r, t)  # HERE TWO
        else:  # the page's example: a bound of 1 in SBUF
            nisa.register_load(r, nl.ones([1], dtype=nl.int32, buffer=nl.sbuf))
        r2 = nisa.register_alloc(0)
        nisa.register_move(r2, r)
        out = nl.ndarray((1,), nl.int32, buffer=nl.shared_hbm)
        if store_to == "hbm":
            nisa.register_store(out, r2)
        elif store_to == "sbuf":
            s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
            nisa.register_store(s, r2)
            nisa.dma_copy(dst=out, src=s[0, 0:1])
        else:
            s = nl.ndarray((1, 1), nl.int32, buffer=nl.psum)
            nisa.register_store(s, r2)  # HERE STORE
        return out

    return k


@pytest.mark.parametrize(
    ("load_from", "store_to", "want"),
    [("hbm", "hbm", 8), ("sbuf", "sbuf", 9), ("ones", "hbm", 1), ("hbm", "sbuf", 8)],
)
def test_register_load_move_store(target: str, load_from: str, store_to: str, want: int) -> None:
    x = np.array([[7, 8, 9, 10]], np.int32)
    got = run_kernel(_register_kernel(load_from, store_to), [x], target=target)
    np.testing.assert_array_equal(got, [want])


@pytest.mark.parametrize(
    ("load_from", "store_to", "marker", "error"),
    [
        ("psum", "hbm", "# HERE PSUM", BufferError),  # HBM or SBUF only
        ("two", "hbm", "# HERE TWO", ShapeError),  # exactly one element
        ("hbm", "psum", "# HERE STORE", BufferError),
    ],
)
def test_register_load_store_refused(target: str, load_from: str, store_to: str, marker: str,
                                     error: type) -> None:  # fmt: skip
    k = _register_kernel(load_from, store_to)
    with pytest.raises(error) as exc:
        run_kernel(k, [np.array([[7, 8, 9, 10]], np.int32)], target=target)
    assert "src" in str(exc.value) or "dst" in str(exc.value)
    assert_reported_at(exc.value, k, marker)


# ------------------------------------------------------------------ dtypes across the ALU pages
_NP_DTYPES: dict[str, Any] = {
    "float32": F32, "bfloat16": BF16, "float16": np.float16, "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
}  # fmt: skip


def _as_float32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values).astype(F32)


def _to_dtype(values: np.ndarray, dtype: str, version: str) -> np.ndarray:
    """float32 results written to ``dtype``: floats round to nearest even (ml_dtypes); integers
    saturate and round to nearest even from NKI 0.6.0, truncate toward zero before (the release
    table's float-to-int row)."""
    target = _NP_DTYPES[dtype]
    if np.issubdtype(np.dtype(target), np.integer):
        info = np.iinfo(target)
        r = np.rint(values) if version == "0.6" else np.trunc(values)
        return np.clip(r, info.min, info.max).astype(target)
    return values.astype(target)


def _alu_kernel(api: str, in_dtype: str, out_dtype: str) -> Callable[..., Any]:
    def k(a, b):
        ta, tb = _load(a, getattr(nl, in_dtype)), _load(b, getattr(nl, in_dtype))
        if api == "tensor_reduce":
            d = nl.ndarray((a.shape[0], 1), getattr(nl, out_dtype), buffer=nl.sbuf)
            nisa.tensor_reduce(dst=d, op=nl.add, data=ta, axis=1)
        else:
            d = nl.ndarray(a.shape, getattr(nl, out_dtype), buffer=nl.sbuf)
            if api == "tensor_tensor":
                nisa.tensor_tensor(dst=d, data1=ta, data2=tb, op=nl.subtract,
                                   engine=nisa.engine.vector)  # fmt: skip
            elif api == "tensor_scalar":
                nisa.tensor_scalar(dst=d, data=ta, op0=nl.multiply, operand0=1.5, op1=nl.add,
                                   operand1=-0.25)  # fmt: skip
            elif api == "scalar_tensor_tensor":
                nisa.scalar_tensor_tensor(dst=d, data=ta, op0=nl.multiply, operand0=0.5,
                                          op1=nl.add, operand1=tb)  # fmt: skip
            else:
                nisa.tensor_tensor_scan(dst=d, data0=ta, data1=tb, initial=0.0, op0=nl.multiply,
                                        op1=nl.add)  # fmt: skip
        return _store(d)

    return k


def _alu_reference(api: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if api == "tensor_reduce":
        return a.sum(axis=1, keepdims=True, dtype=F32)
    if api == "tensor_tensor":
        return a - b
    if api == "tensor_scalar":
        return a * F32(1.5) + F32(-0.25)
    if api == "scalar_tensor_tensor":
        return a * F32(0.5) + b
    return _scan(a, b, 0.0, "multiply", "add", False, False)


@pytest.mark.parametrize(
    "api", ["tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "tensor_tensor_scan",
            "tensor_reduce"],
)  # fmt: skip
@pytest.mark.parametrize(
    ("in_dtype", "out_dtype", "version"),
    [
        ("float16", "float32", "0.6"),
        ("float8_e4m3", "bfloat16", "0.6"),
        ("float8_e5m2", "float16", "0.3"),
        ("int8", "float32", "0.6"),
        ("uint16", "int16", "0.6"),  # arithmetic in float32, the result cast to int16 (RNE)
        ("float32", "int32", "0.3"),  # 0.3.0-0.5.0 simulator: truncation toward zero
        ("float32", "uint8", "0.6"),  # saturating
        ("bfloat16", "float8_e4m3", "0.6"),
    ],
)
def test_alu_instructions_cast_through_float32(target: str, api: str, in_dtype: str,
                                               out_dtype: str, version: str) -> None:  # fmt: skip
    """The pages of every ALU instruction here: inputs are cast to float32, computed in float32,
    and the float32 result is cast to ``dst.dtype``."""
    shape = (3, 6)
    if np.issubdtype(np.dtype(_NP_DTYPES[in_dtype]), np.integer):
        a = rng.integers(0, 20, shape).astype(_NP_DTYPES[in_dtype])
        b = rng.integers(0, 20, shape).astype(_NP_DTYPES[in_dtype])
    else:
        a = (_f32(*shape) * F32(3)).astype(_NP_DTYPES[in_dtype])
        b = (_f32(*shape) * F32(3)).astype(_NP_DTYPES[in_dtype])
    got = run_kernel(_alu_kernel(api, in_dtype, out_dtype), [a, b], target=target,
                     nki_version=version)  # fmt: skip
    want = _to_dtype(_alu_reference(api, _as_float32(a), _as_float32(b)), out_dtype, version)
    np.testing.assert_array_equal(_as_float32(got), _as_float32(want))


# ------------------------------------------------------------------ buffers and bit patterns
def _misc_kernel(case: str) -> Callable[..., Any]:
    def k(a, b, v):
        if case == "tt-mixed-dtypes":  # inputs of two dtypes, both cast to float32
            d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=d, data1=_load(a, nl.bfloat16), data2=_load(b), op=nl.add)
        elif case == "ts-all-psum":  # data, a (P, 1) operand and dst in PSUM
            d = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
            nisa.tensor_scalar(dst=d, data=_load(a, buffer="psum"), op0=nl.subtract,
                               operand0=_load(v, buffer="psum"))  # fmt: skip
        elif case == "scan-psum-initial":  # initial: a (P, 1) tile, here in PSUM
            d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=d, data0=_load(a), data1=_load(b),
                                    initial=_load(v, buffer="psum"), op0=nl.multiply,
                                    op1=nl.add)  # fmt: skip
        elif case == "bn-psum-bf16":  # bn_stats from PSUM into PSUM, bn_aggr into bfloat16
            s = nl.ndarray((a.shape[0], 6), nl.float32, buffer=nl.psum)
            nisa.bn_stats(dst=s, data=_load(a, buffer="psum"))
            d = nl.ndarray((a.shape[0], 2), nl.bfloat16, buffer=nl.sbuf)
            nisa.bn_aggr(dst=d, data=s)
        else:  # "max8-psum-bf16": a bfloat16 source in PSUM
            d = nl.ndarray((a.shape[0], 8), nl.bfloat16, buffer=nl.sbuf)
            nisa.max8(dst=d, src=_load(a, nl.bfloat16, "psum"))
        return _store(d, nl.float32)

    return k


def _misc_reference(case: str, a: np.ndarray, b: np.ndarray, v: np.ndarray) -> np.ndarray:
    if case == "tt-mixed-dtypes":
        return a.astype(BF16).astype(F32) + b
    if case == "ts-all-psum":
        return a - v
    if case == "scan-psum-initial":
        return _scan(a, b, v, "multiply", "add", False, False)
    if case == "bn-psum-bf16":
        stats = np.stack([a.mean(axis=1), a.var(axis=1)], axis=1).astype(F32)
        return stats.astype(BF16).astype(F32)
    return -np.sort(-a.astype(BF16).astype(F32), axis=1)[:, :8]


@pytest.mark.parametrize(
    "case", ["tt-mixed-dtypes", "ts-all-psum", "scan-psum-initial", "bn-psum-bf16",
             "max8-psum-bf16"],
)  # fmt: skip
def test_operands_in_the_buffers_the_pages_allow(target: str, case: str) -> None:
    a, b, v = _f32(4, 8), _f32(4, 8), _f32(4, 1)
    got = run_kernel(_misc_kernel(case), [a, b, v], target=target)
    np.testing.assert_allclose(got, _misc_reference(case, a, b, v), rtol=1e-6, atol=1e-7)


def _bits_kernel(dtype: str, op0: str, c0: int, op1: str, c1: int) -> Callable[..., Any]:
    def k(x):
        d = nl.ndarray(x.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.tensor_scalar(dst=d, data=_load(x), op0=getattr(nl, op0), operand0=c0,
                           op1=getattr(nl, op1), operand1=c1)  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize(
    ("dtype", "op0", "c0", "op1", "c1"),
    [("int8", "right_shift", 1, "bitwise_xor", 3), ("uint16", "left_shift", 4, "bitwise_or", 1),
     ("int16", "bitwise_and", 0x0FF0, "right_shift", 2)],
)  # fmt: skip
def test_tensor_scalar_bitvec_on_narrow_integers(target: str, dtype: str, op0: str, c0: int,
                                                 op1: str, c1: int) -> None:  # fmt: skip
    """Bitvec operators treat the elements as bit patterns of their own width: a right shift is
    logical (the operator table: "Logical Shift Right"; arithmetic shift right is not supported)."""
    np_dtype = _NP_DTYPES[dtype]
    info = np.iinfo(np_dtype)
    x = rng.integers(info.min, info.max, (3, 8), endpoint=True).astype(np_dtype)
    unsigned = np.dtype(f"u{np.dtype(np_dtype).itemsize}")

    def apply(op: str, y: np.ndarray, c: int) -> np.ndarray:
        u = y.view(unsigned)
        out = {"right_shift": u >> unsigned.type(c), "left_shift": u << unsigned.type(c),
               "bitwise_xor": u ^ unsigned.type(c), "bitwise_or": u | unsigned.type(c),
               "bitwise_and": u & unsigned.type(c)}[op]  # fmt: skip
        return out.astype(unsigned).view(np_dtype)

    got = run_kernel(_bits_kernel(dtype, op0, c0, op1, c1), [x], target=target)
    np.testing.assert_array_equal(got, apply(op1, apply(op0, x, c0), c1))


def _shared_accumulator_kernel() -> Callable[..., Any]:
    def k(a, b):
        ta, tb = _load(a), _load(b)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=ta, op0=nl.multiply, operand0=2.0,
                                  reduce_op=nl.add, reduce_res=None)  # fmt: skip
        c = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=c, src=tb, op0=nl.add, op1=nl.add, imm0=0.0,
                                      reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
        return _store(c)

    return k


def test_cumulative_continues_the_shared_vector_accumulator(target: str) -> None:
    """NKI 0.6.0 pages of tensor_scalar_reduce / tensor_scalar_cumulative: the accumulator
    registers are shared, so ``reduce_cmd=reduce`` continues from what tensor_scalar_reduce left
    (``reduce_res=None`` keeps it in the accumulator)."""
    a, b = _f32(4, 6), _f32(4, 5)
    got = run_kernel(_shared_accumulator_kernel(), [a, b], target=target, nki_version="0.6")
    start = (a * F32(2)).sum(axis=1, dtype=F32)
    np.testing.assert_allclose(got, _cumulative(b, "add", 0.0) + start[:, None], rtol=1e-5,
                               atol=1e-6)  # fmt: skip


# ------------------------------------------------------------------ range_select (trn2)
_FP32_MIN = float(np.finfo(F32).min)
_CMP = {"equal": np.equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
        "greater_equal": np.greater_equal}  # fmt: skip


def _range_kernel(op0: str, op1: str, start: int, in_dtype: str, out_dtype: str, res_dtype: str,
                  bound_dtype: str) -> Callable[..., Any]:  # fmt: skip
    def k(x, lo, hi):
        t = _load(x, getattr(nl, in_dtype))
        b0, b1 = _load(lo, getattr(nl, bound_dtype)), _load(hi, getattr(nl, bound_dtype))
        d = nl.ndarray(x.shape, getattr(nl, out_dtype), buffer=nl.sbuf)
        m = nl.ndarray((x.shape[0], 1), getattr(nl, res_dtype), buffer=nl.sbuf)
        nisa.range_select(dst=d, on_true_tile=t, comp_op0=getattr(nl, op0),  # HERE
                          comp_op1=getattr(nl, op1), bound0=b0, bound1=b1, reduce_res=m,
                          reduce_op=nl.maximum, range_start=start, on_false_value=_FP32_MIN)  # fmt: skip
        return _store(d, nl.float32), _store(m, nl.float32)

    return k


@pytest.mark.parametrize(
    ("op0", "op1", "start", "in_dtype", "out_dtype", "res_dtype"),
    [
        ("greater_equal", "less", 0, "float32", "float32", "float32"),
        ("greater", "less_equal", 100, "bfloat16", "bfloat16", "float32"),  # fill becomes -inf
        ("equal", "less_equal", 3, "float16", "float16", "float32"),
        ("less_equal", "greater_equal", 5, "float32", "bfloat16", "bfloat16"),
    ],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # FP32_MIN to fp16
def test_range_select_forms(op0: str, op1: str, start: int, in_dtype: str, out_dtype: str,
                            res_dtype: str) -> None:  # fmt: skip
    """The page's NumPy equivalent; a float32 FP32_MIN fill written to a 16-bit dst is -inf (the
    page's numerical-stability note: the hardware downcasts FP32_MIN)."""
    p, f = 5, 12
    x = _f32(p, f)
    x = x.astype(_NP_DTYPES[in_dtype]).astype(F32)
    lo = rng.integers(start - 2, start + f, (p, 1)).astype(F32)
    hi = lo + rng.integers(0, 6, (p, 1)).astype(F32)
    lo[0], hi[0] = (start + f + 5, start - 5) if op0 in ("greater", "greater_equal", "equal") \
        else (start - 5, start + f + 5)  # row 0 selects nothing: all fill
    k = _range_kernel(op0, op1, start, in_dtype, out_dtype, res_dtype, "float32")
    got_d, got_m = run_kernel(k, [x, lo, hi], target="trn2")
    idx = (start + np.arange(f, dtype=F32))[None, :]
    mask = _CMP[op0](idx, lo) & _CMP[op1](idx, hi)
    sel = np.where(mask, x, F32(_FP32_MIN)).astype(F32)
    np.testing.assert_array_equal(got_d, sel.astype(_NP_DTYPES[out_dtype]).astype(F32))
    np.testing.assert_array_equal(
        got_m[:, 0], sel.max(axis=1).astype(_NP_DTYPES[res_dtype]).astype(F32)
    )
    assert not mask[0].any()
    if out_dtype != "float32":
        assert np.all(np.isneginf(got_d[0]))


@pytest.mark.parametrize(
    ("op0", "in_dtype", "bound_dtype", "error"),
    [
        ("not_equal", "float32", "float32", LanguageError),  # not one of the five comparisons
        ("add", "float32", "float32", LanguageError),
        ("greater", "int32", "float32", DtypeError),  # on_true_tile: an FP dtype
        ("greater", "float32", "bfloat16", DtypeError),  # bounds: FP32
    ],
)
def test_range_select_refused(op0: str, in_dtype: str, bound_dtype: str, error: type) -> None:
    k = _range_kernel(op0, "less", 0, in_dtype, "float32", "float32", bound_dtype)
    x = np.zeros((4, 8), F32)
    with pytest.raises(error) as exc:
        run_kernel(k, [x, np.zeros((4, 1), F32), np.ones((4, 1), F32)], target="trn2")
    assert_reported_at(exc.value, k)


def _gpsimd_rsqrt_kernel(operand0: Any) -> Callable[..., Any]:
    def k(x):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.rsqrt, operand0=operand0,
                           engine=nisa.engine.gpsimd)  # fmt: skip
        return _store(d)

    return k


@pytest.mark.parametrize("operand0", [None, 0])
def test_tensor_scalar_rsqrt_on_gpsimd(target: str, operand0: Any) -> None:
    """The page's engine list: ``nki.isa.engine.gpsimd`` "(only allowed for rsqrt)", a unary
    operator whose operand0 is None or 0; bn_stats's 512 is ``nl.tile_size.bn_stats_fmax``."""
    x = np.abs(_f32(4, nl.tile_size.bn_stats_fmax)) + F32(0.1)
    got = run_kernel(_gpsimd_rsqrt_kernel(operand0), [x], target=target)
    np.testing.assert_allclose(got, F32(1) / np.sqrt(x), rtol=1e-6)
