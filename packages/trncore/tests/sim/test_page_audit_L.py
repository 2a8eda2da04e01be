"""Page audit of ``nki.language`` (issue 13): each documented form of the nki.language page of NKI
0.3.0 (Neuron SDK 2.29) and NKI 0.6.0 (SDK 2.32), run on the emulator and checked against the
page's semantics computed here in NumPy, and each documented invalid neighbour refused at the
kernel's line.

Pages: the docstrings of ``nki/api/nki/language/__init__.py`` in the two SDK releases (AWS
Neuron SDK docs, nki.language.<name>); the "NKI API Common Fields" page for dtypes. Tiny shapes
only; forms already covered elsewhere (``test_language_wrappers.py``, ``test_known_issues.py``,
``test_versions_apis.py``) are not repeated.
"""

from __future__ import annotations

import warnings
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from scipy.special import erf as _erf

from trncore.sim import errors, nisa, nl, run_kernel
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import NkiDeprecationWarning, VersionError

pytestmark = pytest.mark.simulator

_RNG = np.random.default_rng(13)


def _out(t: Any) -> Any:
    """``t`` (SBUF or PSUM) stored to a new shared_hbm tensor (PSUM through a tensor_copy)."""
    if t.buffer is nl.psum:
        s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _np(dtype: str) -> Any:
    return getattr(ml_dtypes, dtype, None) or np.dtype(dtype)


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# ------------------------------------------------------------ element-wise math and activations
#: nki.language.<name> (NKI 0.3.0 and 0.6.0): the page's formula / NumPy or torch equivalent.
_UNARY = {
    "abs": np.abs,
    "arctan": np.arctan,
    "ceil": np.ceil,
    "cos": np.cos,
    "exp": np.exp,
    "floor": np.floor,
    "log": np.log,
    "negative": np.negative,
    "reciprocal": lambda x: 1.0 / x,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),  # "rsqrt(x) = 1 / sqrt(x)"
    "sign": np.sign,  # -1 / 0 / 1
    "sin": np.sin,
    "sqrt": np.sqrt,
    "square": np.square,
    "tan": np.tan,
    "tanh": np.tanh,
    "trunc": np.trunc,  # "the fractional part of the signed number x is discarded"
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": _sig,
    "silu": lambda x: x * _sig(x),
    "silu_dx": lambda x: _sig(x) * (1 + x * (1 - _sig(x))),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) * (1 + 1.702 * x * (1 - _sig(1.702 * x))),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "softplus": lambda x: np.log1p(np.exp(x)),
    "erf": _erf,
    "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
}
_POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_float32_matches_the_page_formula(target: str, name: str) -> None:
    def k(x):
        return _out(getattr(nl, name)(nl.load(x)))

    lo = 0.1 if name in _POSITIVE else -2.0
    x = _RNG.uniform(lo, 2.0, (8, 16)).astype(np.float32)
    want = _UNARY[name](x.astype(np.float64))
    got = run_kernel(k, [x], target=target)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["abs", "negative", "sign", "square", "floor", "ceil", "trunc"])
@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "bfloat16", "float16"])
def test_unary_keeps_the_input_dtype_and_is_exact_on_small_integers(name: str, dtype: str) -> None:
    """ "if not specified, it will default to be the same as the data type of the input tile"."""

    def k(x):
        return _out(getattr(nl, name)(nl.load(x)))

    x = _RNG.integers(-5, 6, (4, 8)).astype(_np(dtype))
    got = run_kernel(k, [x], target="trn2")
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float64), _UNARY[name](x.astype(np.float64)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3"])
def test_unary_dtype_argument_rounds_to_the_named_dtype(dtype: str) -> None:
    """``dtype=``: "data type to cast the output type to" (round to nearest even)."""

    def k(x):
        return _out(nl.exp(nl.load(x), dtype=getattr(nl, dtype)))

    x = _RNG.uniform(-1, 1, (4, 8)).astype(np.float32)
    got = run_kernel(k, [x], target="trn2")
    assert got.dtype == _np(dtype)
    want = np.exp(x).astype(_np(dtype))
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


# ------------------------------------------------------------ binary operators
_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _binary_kernel(name: str, form: str, scalar: float | int) -> Any:
    def k(a, b):
        f = getattr(nl, name)
        ta, tb = nl.load(a), nl.load(b)
        if form == "tile, tile":
            r = f(ta, tb)
        elif form == "tile, scalar":
            r = f(ta, scalar)
        else:
            r = f(scalar, tb)
        return _out(r)

    return k


#: ``nl.power(tile, scalar)`` is a Known Issue of every release (``nl-power-scalar``), tested in
#: test_known_issues.py; its other forms are here.
_BINARY_FORMS = [
    (name, form)
    for name in sorted(_BINARY)
    for form in ("tile, tile", "tile, scalar", "scalar, tile")
    if (name, form) != ("power", "tile, scalar")
]


@pytest.mark.parametrize(("name", "form"), _BINARY_FORMS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_binary_forms_match_numpy(target: str, name: str, dtype: str, form: str) -> None:
    """ "x: a tile or a scalar value; y: a tile or a scalar value" (comparisons: "1 where true,
    0 otherwise", in the input tile's dtype: "Defaults to the input tile dtype")."""
    d = _np(dtype)
    if name.startswith("logical"):
        a, b = (_RNG.integers(0, 2, (4, 8)).astype(d) for _ in range(2))
    elif name == "power":
        a = _RNG.integers(1, 4, (4, 8)).astype(d)
        b = _RNG.integers(0, 3, (4, 8)).astype(d)
    else:
        a, b = (_RNG.integers(-4, 5, (4, 8)).astype(d) for _ in range(2))
    s = 2
    got = run_kernel(_binary_kernel(name, form, s), [a, b], target=target)
    A, B = a.astype(np.float64), b.astype(np.float64)
    f = _BINARY[name]
    want = f(A, B) if form == "tile, tile" else (f(A, s) if form == "tile, scalar" else f(s, B))
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got.astype(np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"])
def test_comparison_with_uint8_dtype_is_boolean_like(name: str) -> None:
    """The comparison pages: "Use ``dtype=nl.uint8`` for a boolean-like result" (1 / 0)."""

    def k(a, b):
        return _out(getattr(nl, name)(nl.load(a), nl.load(b), dtype=nl.uint8))

    a = _RNG.integers(-3, 3, (4, 8)).astype(np.float32)
    b = _RNG.integers(-3, 3, (4, 8)).astype(np.float32)
    got = run_kernel(k, [a, b], target="trn2")
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, _BINARY[name](a, b).astype(np.uint8))


_BITWISE = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}


@pytest.mark.parametrize("name", sorted(_BITWISE))
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
@pytest.mark.parametrize("form", ["tile, tile", "tile, scalar", "scalar, tile"])
def test_bitwise_forms_on_every_integer_dtype(name: str, dtype: str, form: str) -> None:
    """ "Inputs must be integer typed"; results as NumPy's on the same dtype."""
    d = np.dtype(dtype)
    a = _RNG.integers(0, 100, (4, 8)).astype(d)
    b = _RNG.integers(0, 5, (4, 8)).astype(d)
    got = run_kernel(_binary_kernel(name, form, 3), [a, b], target="trn2")
    f, s = _BITWISE[name], d.type(3)
    want = f(a, b) if form == "tile, tile" else (f(a, s) if form == "tile, scalar" else f(s, b))
    assert got.dtype == d
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_invert_and_logical_not(dtype: str) -> None:
    """``invert``: "Implemented as XOR with all-ones"; ``logical_not``: "XOR with 1" on 0/1 inputs."""

    def k(a, b):
        return _out(nl.invert(nl.load(a))), _out(nl.logical_not(nl.load(b)))

    d = np.dtype(dtype)
    a = _RNG.integers(0, 100, (4, 8)).astype(d)
    b = _RNG.integers(0, 2, (4, 8)).astype(d)
    inv, lnot = run_kernel(k, [a, b], target="trn2")
    np.testing.assert_array_equal(inv, np.bitwise_xor(a, d.type(np.iinfo(d).max if d.kind == "u" else -1)))
    np.testing.assert_array_equal(lnot, np.bitwise_xor(b, d.type(1)))


def test_bitwise_of_a_float_tile_is_refused_at_the_line() -> None:
    """The neighbour of "Inputs must be integer typed"."""

    def k(a):
        t = nl.load(a)
        r = nl.bitwise_and(t, 3)  # HERE
        return _out(r)

    with pytest.raises(errors.NkiValidationError) as exc:
        run_kernel(k, [np.ones((4, 8), np.float32)], target="trn2")
    assert_reported_at(exc.value, k, "# HERE")


# ------------------------------------------------------------ reductions
_REDUCE = {
    "sum": np.sum,
    "max": np.max,
    "min": np.min,
    "prod": np.prod,
    "mean": np.mean,
    "var": np.var,  # population variance
}
_AXES = [((4, 6), 1), ((4, 6), -1), ((4, 3, 5), 2), ((4, 3, 5), (1, 2)), ((4, 3, 5), [1, 2])]


def _reduce_kernel(name: str, axis: Any, keepdims: bool) -> Any:
    def k(a):
        return _out(getattr(nl, name)(nl.load(a), axis=axis, keepdims=keepdims))

    return k


@pytest.mark.parametrize("name", sorted(_REDUCE))
@pytest.mark.parametrize(("shape", "axis"), _AXES, ids=[f"{s}-{a}" for s, a in _AXES])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_over_the_last_contiguous_free_dims(
    name: str, shape: tuple[int, ...], axis: Any, keepdims: bool
) -> None:
    """ "can only be the last contiguous dim(s) of the tile"; ``keepdims``; ``var``: "keepdims:
    currently ignored; result always has keepdims=True shape". An on-chip result keeps at least
    two dims (the free dim is kept at 1)."""
    x = _RNG.standard_normal(shape).astype(np.float32)
    ax = tuple(axis) if isinstance(axis, list) else axis
    kd = True if name == "var" else keepdims
    want = _REDUCE[name](x.astype(np.float64), axis=ax, keepdims=kd)
    got = run_kernel(_reduce_kernel(name, axis, keepdims), [x], target="trn2")
    assert got.shape == (want.shape if want.ndim > 1 else (want.shape[0],))
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=2e-5, atol=1e-6)


def test_all_is_a_logical_and_reduction() -> None:
    def k(a):
        return _out(nl.all(nl.load(a), axis=1))

    b = (_RNG.uniform(size=(8, 6)) > 0.2).astype(np.float32)
    b[0] = 1
    np.testing.assert_array_equal(run_kernel(k, [b], target="trn2"), np.all(b, axis=1))


_BAD_AXES = [("sum", (4, 6), 0), ("max", (4, 3, 5), 1), ("var", (4, 3, 5), 1), ("softmax", (4, 3, 5), 1)]


@pytest.mark.parametrize(("name", "shape", "axis"), _BAD_AXES)
def test_reduction_over_a_non_trailing_dim_is_refused_at_the_line(
    name: str, shape: tuple[int, ...], axis: int
) -> None:
    """The neighbour: the partition dim, or a free dim that is not among the last ones."""

    def k(a):
        t = nl.load(a)
        r = getattr(nl, name)(t, axis=axis)  # HERE
        return _out(r)

    with pytest.raises(errors.ShapeError) as exc:
        run_kernel(k, [np.ones(shape, np.float32)], target="trn2")
    assert_reported_at(exc.value, k, "# HERE")
    assert "axis" in str(exc.value)


@pytest.mark.parametrize("axis", [2, (1, 2)])
def test_softmax_over_trailing_dims_of_a_3d_tile(axis: Any) -> None:
    """nki.language.softmax: axis "[1], [1,2], [1,2,3], [1,2,3,4]" (was NotImplementedError)."""

    def k(a):
        return _out(nl.softmax(nl.load(a), axis=axis))

    x = _RNG.standard_normal((4, 3, 5)).astype(np.float32)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(
        run_kernel(k, [x], target="trn2"), e / e.sum(axis=axis, keepdims=True), rtol=1e-5
    )


def test_rms_norm_page_example_and_its_dtype_arguments() -> None:
    """``x / RMS(x) * w`` with ``RMS = sqrt(sum(x^2)/n + epsilon)``; the page's example is x=2,
    w=1 over (128, 512), n=512 (result 1 up to epsilon); ``dtype``/``compute_dtype``."""

    def k(a, w):
        x, wt = nl.load(a), nl.load(w)
        ex = nl.rms_norm(
            nl.full((128, 512), 2.0, nl.float32), nl.full((128, 512), 1.0, nl.float32), axis=1, n=512
        )
        r = nl.rms_norm(x, wt, axis=1, n=16, epsilon=0.1, dtype=nl.bfloat16, compute_dtype=nl.float32)
        return _out(ex), _out(r)

    x = _RNG.standard_normal((8, 16)).astype(np.float32)
    w = _RNG.standard_normal((8, 16)).astype(np.float32)
    ex, got = run_kernel(k, [x, w], target="trn2")
    np.testing.assert_allclose(ex, 2.0 / np.sqrt(4.0 + 1e-6), rtol=1e-6)
    xd = x.astype(np.float64)
    want = xd / np.sqrt((xd * xd).sum(-1, keepdims=True) / 16 + 0.1) * w
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=8e-3, atol=1e-3)


# ------------------------------------------------------------ creation
@pytest.mark.parametrize("buffer", ["sbuf", "psum", "private_hbm", "shared_hbm", "hbm"])
def test_zeros_ones_full_in_every_buffer(buffer: str) -> None:
    """``zeros``/``ones``/``full(shape, fill_value, dtype, buffer=...)``: every buffer the page
    names (``hbm`` is ``private_hbm``)."""

    def k(a):
        outs = []
        for t in (
            nl.zeros((4, 6), nl.float32, buffer=getattr(nl, buffer)),
            nl.ones((4, 6), nl.float32, buffer=getattr(nl, buffer)),
            nl.full((4, 6), 2.5, nl.float32, buffer=getattr(nl, buffer)),
        ):
            if nl.is_hbm(t.buffer):
                s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=s, src=t)
                t = s
            outs.append(_out(t))
        return tuple(outs)

    got = run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2")
    for v, want in zip(got, (0.0, 1.0, 2.5)):
        np.testing.assert_array_equal(v, np.full((4, 6), want, np.float32))


_DTYPES = [
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "bfloat16",
    "float16",
    "float32",
    "float8_e4m3",
    "float8_e5m2",
    "float8_e4m3fn",
]


@pytest.mark.parametrize("dtype", _DTYPES)
def test_full_of_each_dtype_holds_the_value(dtype: str) -> None:
    def k(a):
        return _out(nl.full((4, 6), 3, getattr(nl, dtype)))

    got = run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2")
    assert got.dtype == _np(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), 3.0)


def test_like_constructors_take_their_buffer_as_the_page_says() -> None:
    """0.3.0/0.6.0: ``empty_like`` buffer "default: same as x"; ``zeros_like`` "defaults to sbuf"."""

    def k(a):
        p = nl.ndarray((4, 6), nl.float32, buffer=nl.psum)
        assert nl.empty_like(p).buffer is nl.psum
        z = nl.zeros_like(p)
        assert z.buffer is nl.sbuf and z.shape == (4, 6) and z.dtype == "float32"
        return _out(nl.zeros_like(p, dtype=nl.bfloat16))

    got = run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2")
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), 0)


@pytest.mark.parametrize(("n", "dtype"), [(4, None), (128, "bfloat16"), (8, "float32")])
def test_shared_identity_matrix(n: int, dtype: str | None) -> None:
    """``shared_identity_matrix(n, dtype=uint8)``: an n x n identity in SBUF."""

    def k(a):
        eye = (
            nl.shared_identity_matrix(n)
            if dtype is None
            else nl.shared_identity_matrix(n, dtype=getattr(nl, dtype))
        )
        assert nl.is_sbuf(eye.buffer)
        return _out(eye)

    got = run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2")
    assert got.dtype == _np(dtype or "uint8")
    np.testing.assert_array_equal(got.astype(np.float32), np.eye(n))


# ------------------------------------------------------------ kernels made in a loop
@pytest.mark.parametrize("order", [("sum", "max"), ("max", "sum")])
def test_kernels_differing_only_by_a_default_argument_are_two_programs(order: tuple[str, str]) -> None:
    """A kernel's default argument values are compile-time values (NKI traces the function with
    them), so ``def k(a, op=op)`` made in a loop is a new program for each ``op``. (The kernel
    cache used to key only the source text, the arguments and the closure cells, and replayed
    the first program.)"""
    x = _RNG.standard_normal((4, 6)).astype(np.float32)
    for op in order:

        def k(a, op=op):
            return _out(getattr(nl, op)(nl.load(a), axis=1))

        np.testing.assert_allclose(run_kernel(k, [x], target="trn2"), getattr(np, op)(x, axis=1), rtol=1e-6)


# ------------------------------------------------------------ tensor manipulation, indexing
def test_broadcast_to_same_rank_forms_and_the_rank_neighbour() -> None:
    """ "Must have the same rank as x. Each dimension must either match or be broadcast from size
    1"; same shape returns the values unchanged."""

    def k(col, row, x):
        a = nl.broadcast_to(nl.load(col), (8, 6))
        b = nl.broadcast_to(nl.load(row), (8, 6))
        c = nl.broadcast_to(nl.load(x), (8, 6), dtype=nl.bfloat16)
        return _out(a), _out(b), _out(c)

    col = _RNG.standard_normal((8, 1)).astype(np.float32)
    row = _RNG.standard_normal((1, 6)).astype(np.float32)
    x = _RNG.standard_normal((8, 6)).astype(np.float32)
    a, b, c = run_kernel(k, [col, row, x], target="trn2")
    np.testing.assert_array_equal(a, np.broadcast_to(col, (8, 6)))
    np.testing.assert_array_equal(b, np.broadcast_to(row, (8, 6)))
    np.testing.assert_array_equal(c, x.astype(ml_dtypes.bfloat16))

    def bad(x):
        t = nl.load(x)
        r = nl.broadcast_to(t, (2, 8, 6))  # HERE
        return _out(r)

    with pytest.raises(errors.ShapeError) as exc:
        run_kernel(bad, [x], target="trn2")
    assert_reported_at(exc.value, bad, "# HERE")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int32"])
def test_where_result_takes_the_input_tiles_dtype(dtype: str) -> None:
    """ "if not specified, it will default to be the same as the data type of the input tile":
    with a scalar ``x`` the input tile is ``y`` (it was float32)."""

    # 0.3 rounds differently in bfloat16 / float16 than in float32; into int32, 2.5 rounds to
    # nearest even (2) under NKI 0.6.0 (docs/emulator-releases.md, NKI releases)
    scalar = 2.5 if dtype == "int32" else 0.3

    def k(c, b):
        ct, bt = nl.load(c), nl.load(b)
        return _out(nl.where(ct, scalar, bt)), _out(nl.where(ct, bt, scalar))

    c = (_RNG.uniform(size=(4, 8)) > 0.5).astype(np.float32)
    b = _RNG.integers(-9, 9, (4, 8)).astype(_np(dtype))
    r1, r2 = run_kernel(k, [c, b], target="trn2")
    assert r1.dtype == r2.dtype == b.dtype
    s = np.asarray(np.rint(scalar) if dtype == "int32" else np.float32(scalar)).astype(b.dtype)
    np.testing.assert_array_equal(r1, np.where(c > 0, s, b))
    np.testing.assert_array_equal(r2, np.where(c > 0, b, s))


def test_where_with_tiles_and_scalars() -> None:
    """``where(condition, x, y)``: condition "1.0 for True, 0.0 for False"; x / y tiles or scalars."""

    def k(c, a, b):
        ct, at, bt = nl.load(c), nl.load(a), nl.load(b)
        return _out(nl.where(ct, at, bt)), _out(nl.where(ct, at, 0.0)), _out(nl.where(ct, -1.0, bt))

    c = (_RNG.uniform(size=(8, 6)) > 0.5).astype(np.float32)
    a, b = (_RNG.standard_normal((8, 6)).astype(np.float32) for _ in range(2))
    r1, r2, r3 = run_kernel(k, [c, a, b], target="trn2")
    np.testing.assert_array_equal(r1, np.where(c > 0, a, b))
    np.testing.assert_array_equal(r2, np.where(c > 0, a, 0.0))
    np.testing.assert_array_equal(r3, np.where(c > 0, -1.0, b))


@pytest.mark.parametrize("idx_dtype", ["uint32", "int32", "uint16"])
def test_gather_flattened_over_the_flattened_free_dims(idx_dtype: str) -> None:
    """ "using the index value to select from the free dimension of data" (3-D data flattened)."""

    def k(d, i):
        return _out(nl.gather_flattened(nl.load(d), nl.load(i)))

    data = _RNG.standard_normal((8, 2, 8)).astype(np.float32)
    idx = _RNG.integers(0, 16, (8, 5)).astype(idx_dtype)
    got = run_kernel(k, [data, idx], target="trn2")
    np.testing.assert_array_equal(got, np.take_along_axis(data.reshape(8, 16), idx.astype(np.int64), 1))


def test_dropout_rate_scalar_and_per_partition_tile() -> None:
    """``rate``: "a scalar constant or a tile of shape (x.shape[0], 1)"; rates 0 and 1 are exact."""

    def k(a, r):
        t = nl.load(a)
        return _out(nl.dropout(t, 0.0)), _out(nl.dropout(t, 1.0)), _out(nl.dropout(t, nl.load(r)))

    x = _RNG.standard_normal((8, 6)).astype(np.float32)
    rate = (np.arange(8) % 2).astype(np.float32).reshape(8, 1)
    keep, drop, per_row = run_kernel(k, [x, rate], target="trn2")
    np.testing.assert_array_equal(keep, x)
    np.testing.assert_array_equal(drop, 0.0)
    np.testing.assert_array_equal(per_row, np.where(rate > 0.5, 0.0, x))


def test_load_transpose2d_and_its_buffer_neighbour() -> None:
    """ "Load a tensor from device memory (HBM) and 2D-transpose"; an SBUF source is refused."""

    def k(a):
        return _out(nl.load_transpose2d(a, dtype=nl.bfloat16))

    x = _RNG.standard_normal((8, 6)).astype(np.float32)
    got = run_kernel(k, [x], target="trn2")
    np.testing.assert_array_equal(got, x.T.astype(ml_dtypes.bfloat16))

    def bad(a):
        t = nl.load(a)
        r = nl.load_transpose2d(t)  # HERE
        return _out(r)

    with pytest.raises(errors.NkiValidationError) as exc:
        run_kernel(bad, [x], target="trn2")
    assert_reported_at(exc.value, bad, "# HERE")


# ------------------------------------------------------------ launch grid
@pytest.mark.parametrize("lnc", [None, 2])
def test_program_id_num_programs_program_ndim(lnc: int | None) -> None:
    """``program_ndim``: "0 if no grid"; ``num_programs()``: the grid's total; ``program_id``."""

    def k(a):
        v = nl.program_id(0) * 100 + nl.num_programs() * 10 + nl.program_ndim()
        t = nl.full((1, 1), v, nl.float32)
        out = nl.ndarray((2, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[nl.program_id(0) : nl.program_id(0) + 1, :], src=t)
        return out

    got = run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2", lnc=lnc)
    if lnc is None:
        assert got[0, 0] == 10  # one program, no grid
    else:
        np.testing.assert_array_equal(got[:, 0], [21, 121])


# ------------------------------------------------------------ no_reorder, shared_constant, device_print
def test_no_reorder_page_example_runs() -> None:
    """The page's example: a block of creation and ``nl.add``; static loops are allowed inside."""

    def k(a):
        with nl.no_reorder():
            x = nl.full((8, 16), 3.0, dtype=nl.float32, buffer=nl.sbuf)
            y = nl.full((8, 16), 2.0, dtype=nl.float32, buffer=nl.sbuf)
            c = nl.add(x, y)
            for _ in nl.static_range(2):
                c = nl.add(c, nl.load(a))
        return _out(c)

    a = _RNG.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(run_kernel(k, [a], target="trn2"), 5.0 + a + a, rtol=1e-6)


def _dynamic_range_in_block(a):
    with nl.no_reorder():
        for _ in nl.dynamic_range(2):  # HERE
            pass
    return _out(nl.load(a))


def _fori_loop_in_block(a):
    with nl.no_reorder():
        nl.fori_loop(0, 2, lambda i: None)  # HERE
    return _out(nl.load(a))


def _while_loop_in_block(a):
    with nl.no_reorder():
        nl.while_loop(0, lambda r: r)  # HERE
    return _out(nl.load(a))


@pytest.mark.parametrize(
    ("kernel", "release"),
    [(_dynamic_range_in_block, "0.3"), (_fori_loop_in_block, "0.6"), (_while_loop_in_block, "0.6")],
)
def test_dynamic_loop_inside_no_reorder_is_refused_at_its_line(kernel: Any, release: str) -> None:
    """nki.language.no_reorder: 0.3.0 "Dynamic loops (nl.dynamic_range) are not supported inside a
    no_reorder block"; 0.6.0 the same of "Register-based dynamic loops (nl.fori_loop,
    nl.while_loop)". (Accepted before this audit.)"""
    with pytest.raises(errors.LanguageError, match="no_reorder") as exc:
        run_kernel(kernel, [np.ones((2, 2), np.float32)], target="trn2", nki_version=release)
    assert_reported_at(exc.value, kernel, "# HERE")


def _e8m0_constant(a):
    c = nl.shared_constant(np.array([[1.0, 2.0, 0.5, 2.0**-10]], dtype=ml_dtypes.float8_e8m0fnu))  # HERE
    s = nl.ndarray(c.shape, c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=c)
    return _out(s)


def test_shared_constant_of_the_mx_scale_dtype_per_release() -> None:
    """nki.language.shared_constant (NKI 0.6.0) lists float8_e8m0fnu among its element types; the
    dtype exists from NKI 0.5.0, so an earlier target refuses it at the line."""
    for release in ("0.5", "0.6"):
        got = run_kernel(_e8m0_constant, [np.zeros((1, 1), np.float32)], target="trn2", nki_version=release)
        np.testing.assert_array_equal(got.astype(np.float32), [[1.0, 2.0, 0.5, 2.0**-10]])
    with pytest.raises(VersionError) as exc:
        run_kernel(_e8m0_constant, [np.zeros((1, 1), np.float32)], target="trn2", nki_version="0.3")
    assert_reported_at(exc.value, _e8m0_constant, "# HERE")


@pytest.mark.parametrize("dtype", ["int32", "uint16", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_shared_constant_element_types_and_npy_path(dtype: str, tmp_path: Any) -> None:
    """ "Supported element types: float32, float16, bfloat16, int32, int16, int8, uint32, uint16,
    uint8, float8_e4m3fn, float8_e5m2"; "a numpy array or a file path to a .npy file"."""
    data = np.arange(12).reshape(3, 4).astype(_np(dtype))
    sources: list[Any] = [data]
    if isinstance(_np(dtype), np.dtype):  # a .npy file holds NumPy's own dtypes only
        path = tmp_path / "c.npy"
        np.save(path, data)
        sources.append(str(path))

    def k(a):
        outs = []
        for c in (nl.shared_constant(src) for src in sources):
            assert c.buffer is nl.shared_hbm and c.dtype == dtype
            s = nl.ndarray(c.shape, c.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=c)
            outs.append(_out(s))
        return tuple(outs)

    for got in run_kernel(k, [np.zeros((1, 1), np.float32)], target="trn2"):
        np.testing.assert_array_equal(got.astype(np.float64), data.astype(np.float64))


def test_device_print_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    """``tensor``: "Can be in SBUF or HBM"; the prefix "must be a constant string"; a PSUM tile
    is the neighbour."""

    def k(a):
        t = nl.load(a)
        nl.device_print("on-sbuf", t)
        nl.device_print("on-hbm", a)
        return _out(t)

    run_kernel(k, [np.full((2, 3), 7.0, np.float32)], target="trn2")
    printed = capsys.readouterr().out
    assert "on-sbuf" in printed and "on-hbm" in printed and "7." in printed

    def bad(a):
        p = nl.zeros((2, 3), nl.float32, buffer=nl.psum)
        nl.device_print("on-psum", p)  # HERE
        return _out(nl.load(a))

    with pytest.raises(errors.LanguageError) as exc:
        run_kernel(bad, [np.ones((2, 3), np.float32)], target="trn2")
    assert_reported_at(exc.value, bad, "# HERE")


# ------------------------------------------------------------ NkiTensor views (NKI 0.5.0/0.6.0 page)
#: Each method's own page example: (method, args, source shape, the NumPy view of the same data).
_VIEW_EXAMPLES = [
    ("permute", ((0, 2, 1),), (8, 4, 6), lambda a: a.transpose(0, 2, 1)),
    ("broadcast", (1, 8), (8, 1, 6), lambda a: np.broadcast_to(a, (8, 8, 6))),
    ("expand_dim", (1,), (8, 6), lambda a: a[:, None, :]),
    ("squeeze_dim", (1,), (8, 1, 6), lambda a: a[:, 0, :]),
    ("reshape_dim", (1, (4, 6)), (8, 24), lambda a: a.reshape(8, 4, 6)),
    ("reshape_dim", (1, (4, -1)), (8, 24), lambda a: a.reshape(8, 4, 6)),
    ("flatten_dims", (1, 2), (8, 2, 3, 4), lambda a: a.reshape(8, 6, 4)),
    ("reshape", ((8, 24),), (8, 4, 6), lambda a: a.reshape(8, 24)),
    ("reshape", ((8, 2, 12),), (8, 4, 6), lambda a: a.reshape(8, 2, 12)),
    ("rearrange", (("b", ("h", "w")), ("b", "w", "h"), {"h": 4}), (8, 24),
     lambda a: a.reshape(8, 4, 6).transpose(0, 2, 1)),
    ("slice", (1, 8, 24, 1), (8, 64), lambda a: a[:, 8:24]),
    ("slice", (1, 0, 64, 2), (8, 64), lambda a: a[:, 0:64:2]),
    ("select", (1, 3), (8, 8, 6), lambda a: a[:, 3, :]),
    ("view", ("int32",), (8, 6), lambda a: a.view(np.int32)),
    ("view", ("uint8",), (8, 6), lambda a: a.view(np.uint8)),
]  # fmt: skip


@pytest.mark.parametrize(("method", "args", "shape", "ref"), _VIEW_EXAMPLES)
def test_view_method_page_examples_read_the_numpy_view(method: str, args: Any, shape: Any, ref: Any) -> None:
    """The examples of the NkiTensor page (NKI 0.6.0): shape and data of each view, read back by a
    ``tensor_copy`` from the SBUF tile."""
    x = _RNG.standard_normal(shape).astype(np.float32)
    want = ref(x)

    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        v = getattr(t, method)(*args)
        assert tuple(v.shape) == want.shape
        u = nl.ndarray(v.shape, v.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=v)
        return _out(u)

    got = run_kernel(k, [x], target="trn2")
    np.testing.assert_array_equal(got, want)


#: The page's constraints broken one at a time (on-chip tensors); not in test_versions_apis.
_BAD_VIEW_CALLS = [
    ("permute", ((0, 1, 1),), (8, 4, 6), errors.BoundsError),  # not a permutation
    ("broadcast", (0, 8), (1, 6), errors.PartitionError),  # dim 0 of an on-chip tensor
    ("expand_dim", (0,), (8, 6), errors.PartitionError),
    ("reshape_dim", (0, (2, 4)), (8, 6), errors.PartitionError),
    ("flatten_dims", (0, 1), (8, 2, 3), errors.PartitionError),
    ("reshape", ((4, 12),), (8, 6), errors.PartitionError),  # shape[0] must stay t.shape[0]
    ("slice", (1, 0, 8, 0), (8, 64), errors.BoundsError),  # step >= 1
    ("slice", (1, 8, 8), (8, 64), errors.BoundsError),  # start < end
    ("select", (1, 8), (8, 8, 6), errors.BoundsError),  # 0 <= index < t.shape[dim]
    ("view", ("float32",), (8, 6), errors.BoundsError),  # uint8 last dim 6 not divisible by 4
    ("rearrange", (("b", ("h", "w")), ("b", "w", "x"), {"h": 2}), (8, 6), errors.BoundsError),
]


@pytest.mark.parametrize(("method", "args", "shape", "error"), _BAD_VIEW_CALLS)
def test_view_constraint_neighbours_are_refused_at_the_line(
    method: str, args: Any, shape: Any, error: type[Exception]
) -> None:
    def k(a):
        t = nl.ndarray(shape, nl.uint8 if method == "view" else nl.float32, buffer=nl.sbuf)
        getattr(t, method)(*args)  # HERE
        return _out(nl.load(a))

    with pytest.raises(error) as exc:
        run_kernel(k, [np.ones((2, 2), np.float32)], target="trn2")
    assert_reported_at(exc.value, k, "# HERE")
    assert method in str(exc.value) or "reshape" in str(exc.value) or "last dim" in str(exc.value)


# ------------------------------------------------------------ dtypes and their value ranges
#: "Supported Data Types" (NKI API Common Fields, NKI 0.3.0 / 0.6.0): the float formats by their
#: (sign, exponent, mantissa) bits; a cast rounds to nearest even (ml_dtypes is the reference).
_IN_RANGE = np.array([[1.0, 1 + 2**-11, 1 + 2**-9 + 2**-12, -3.0, 0.1, 1 / 3, 200.0, -(2.0**-7)]], np.float32)


def _tf32(v: np.ndarray) -> np.ndarray:
    """float32 rounded to 10 mantissa bits, ties to even ("tfloat32 (1S,8E,10M)")."""
    bits = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    keep = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return keep.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"]
)
def test_float_dtypes_round_to_nearest_even(dtype: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=nl.load(a))
        f = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=t)
        return _out(f)

    got = run_kernel(k, [_IN_RANGE], target="trn2")
    want = _tf32(_IN_RANGE) if dtype == "tfloat32" else _IN_RANGE.astype(_np(dtype)).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_integer_dtypes_hold_their_range_and_saturate(dtype: str) -> None:
    """Each integer dtype's extremes are held exactly (a DMA is bit-exact); a float beyond the
    range saturates (docs/emulator.md, Numerics)."""
    info = np.iinfo(np.dtype(dtype))
    edges = np.array([[info.min, info.max, 0, 1]], dtype)

    def k(a, f):
        t = nl.ndarray(f.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=nl.load(f))
        return _out(nl.load(a)), _out(t)

    far = np.array([[-1e10, 1e10, 0.0, 1.0]], np.float32)
    held, saturated = run_kernel(k, [edges, far], target="trn2")
    np.testing.assert_array_equal(held, edges)
    np.testing.assert_array_equal(saturated, edges)


# ------------------------------------------------------------ nl.matmul / nl.transpose page examples
def test_matmul_and_transpose_page_examples(target: str) -> None:
    """nki.language.matmul (NKI 0.6.0): ``identity.T @ ones = ones`` with ``transpose_x=True``,
    result in PSUM copied out by ``nisa.tensor_copy(result, result_psum)``; nki.language.transpose:
    the transpose of the identity is the identity. Both on 128 x 128 float32 (the pages' sizes),
    plus a non-symmetric operand to check the orientation: ``x.T @ y`` and ``x.T``."""

    def k(a, b):
        eye = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        ones = nl.full((128, 128), 1.0, dtype=nl.float32, buffer=nl.sbuf)
        mm = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(mm, nl.matmul(eye, ones, transpose_x=True))
        tr = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(tr, nl.transpose(eye))
        xa, yb = nl.load(a), nl.load(b)
        return _out(mm), _out(tr), _out(nl.matmul(xa, yb, transpose_x=True)), _out(nl.transpose(xa))

    a = _RNG.standard_normal((64, 32)).astype(np.float32)
    b = _RNG.standard_normal((64, 48)).astype(np.float32)
    mm, tr, xty, xt = run_kernel(k, [a, b], target=target)
    np.testing.assert_array_equal(mm, 1.0)
    np.testing.assert_array_equal(tr, np.eye(128))
    np.testing.assert_allclose(xty, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(xt, a.T)


def test_matmul_operand_size_neighbour_is_refused_at_the_line() -> None:
    """ "x: a tile on SBUF (partition dimension <= 128, free dimension <= 128)"; y free <= 512:
    y with 513 columns is the neighbour."""

    def k(a, b):
        xa, yb = nl.load(a), nl.load(b)
        r = nl.matmul(xa, yb, transpose_x=True)  # HERE
        return _out(r)

    with pytest.raises(errors.ShapeError) as exc:
        run_kernel(k, [np.ones((8, 4), np.float32), np.ones((8, 513), np.float32)], target="trn2")
    assert_reported_at(exc.value, k, "# HERE")


# ------------------------------------------------------------ loops: the pages' own examples
_N = 8


def _fori_page_example(data, ub_input):
    """nki.language.fori_loop (NKI 0.6.0), the page's example: copy element i of ``data`` for
    i < a runtime upper bound read into a register."""
    output = nl.ndarray((1, _N), nl.float32, buffer=nl.shared_hbm)
    ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ub_sb, src=ub_input)
    ub_reg = nisa.register_alloc()
    nisa.register_load(ub_reg, ub_sb)
    zeros = nl.zeros((1, _N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=output, src=zeros)
    temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

    nl.fori_loop(0, ub_reg, body)
    return output


def _while_page_example(data, count_input):
    """nki.language.while_loop (NKI 0.6.0), the page's example: add ``val`` to ``acc`` while a
    counter register is nonzero, counting down through SBUF."""
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    count_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_sb, src=count_input)
    one_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one_sb, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
        nisa.register_load(r, count_sb)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("bound", [0, 3, _N])
def test_fori_loop_and_while_loop_page_examples(bound: int) -> None:
    """fori_loop: elements 0..bound-1 copied, the rest zero; while_loop: ``acc = bound * val``
    ("a true while, not do-while: if init is zero the body never runs")."""
    data = np.arange(1, _N + 1, dtype=np.float32).reshape(1, _N)
    got = run_kernel(_fori_page_example, [data, np.array([[bound]], np.int32)], target="trn2")
    np.testing.assert_array_equal(got, np.where(np.arange(_N) < bound, data, 0.0))
    acc = run_kernel(_while_page_example, [np.array([[2.5]], np.float32), np.array([[bound]], np.int32)])
    np.testing.assert_array_equal(acc, [[2.5 * bound]])


def _iterators_page_examples(input_tensor):
    """The affine_range / sequential_range / static_range / dynamic_range pages' example: square
    the input in 512-column tiles (here 8-column tiles), plus start/stop/step forms."""
    out_tensor = nl.ndarray(input_tensor.shape, nl.float32, buffer=nl.shared_hbm)
    steps = []
    for rng_fn in (nl.affine_range, nl.sequential_range, nl.static_range):
        steps.append(list(rng_fn(1, 7, 2)))
    assert steps == [[1, 3, 5]] * 3, steps
    for i in nl.affine_range(input_tensor.shape[1] // 8):
        offset = i * 8
        tile = nl.load(input_tensor[0:4, offset : offset + 8])
        nl.store(out_tensor[0:4, offset : offset + 8], nl.multiply(tile, tile))
    for _ in nl.dynamic_range(1):
        tile = nl.load(input_tensor[0:4, 0:8])
        result = nl.multiply(tile, tile)
        nl.store(out_tensor[0:4, 0:8], result)
    return out_tensor


@pytest.mark.parametrize("release", ["0.3", "0.6"])
def test_iterator_page_examples(release: str) -> None:
    x = _RNG.standard_normal((4, 24)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NkiDeprecationWarning)  # dynamic_range from 0.6.0
        got = run_kernel(_iterators_page_examples, [x], target="trn2", nki_version=release)
    np.testing.assert_array_equal(got, x * x)


def test_vector_select_and_ap_page_examples() -> None:
    """NkiTensor.vector_select (NKI 0.5.0/0.6.0): each of the partitions reads the row of the HBM
    tensor its offset names (``(P, 1)`` int32 offsets, dim 0); NkiTensor.ap: the explicit 2-D
    pattern ``[[32, 128], [1, 32]]`` of a (128, 32) float32 tile is the tile itself."""

    def k(h, offs, a):
        off = nl.ndarray((16, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=off, src=offs)
        v = h.vector_select(0, off)
        assert v.shape == (16, 4, 8) and v.is_indirect()
        t = nl.ndarray((16, 4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        sb = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sb, src=a)
        w = sb.ap(pattern=[[32, 128], [1, 32]])
        u = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=w)
        return _out(t), _out(u)

    h = _RNG.standard_normal((10, 4, 8)).astype(np.float32)
    offs = _RNG.integers(0, 10, (16, 1)).astype(np.int32)
    a = _RNG.standard_normal((128, 32)).astype(np.float32)
    rows, same = run_kernel(k, [h, offs, a], target="trn2")
    np.testing.assert_array_equal(rows, h[offs[:, 0]])
    np.testing.assert_array_equal(same, a)
