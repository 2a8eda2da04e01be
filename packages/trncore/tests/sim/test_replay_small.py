"""The replay-lean runs of small-tile instructions (docs/emulator-speed.md, "Replay of small
tiles") against NumPy and Python-integer references written here, traced and replayed.

- tensor_tensor (nki.isa.tensor_tensor, NKI 0.3.0): bitvec ops on integer tiles of one type
  (``right_shift`` logical: AWS NKI API Common Fields, NKI 0.3.0); GpSimd int32/uint32
  arithmetic, exact and saturated at the dst's range (docs/emulator.md, Numerics); float32
  arithmetic into float32 and bfloat16 dsts.
- tensor_scalar (nki.isa.tensor_scalar, NKI 0.3.0): bitvec ops against constants, one and two
  ops, both operand orders, ``invert``; float32 arithmetic against constants.
- tensor_copy (nki.isa.tensor_copy, NKI 0.3.0): "bit-exact or cast via float32": an integer
  tile into another integer type goes through float32, then saturates; the same dtype copies
  every bit (bfloat16 NaN payloads).
- dma_copy of one dtype: every bit.

Each kernel runs twice (the trace, then the replay of the cached program) and both results
are compared; each test also checks that the lean run is the one recorded, so it tests that run.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate, trace

pytestmark = pytest.mark.simulator

BF16 = np.dtype(ml_dtypes.bfloat16)
P, F = 64, 72

#: integer patterns: zero, one, all ones, both ends of int32, alternating bits, a byte
_SPECIALS = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x55555555, 0xAAAAAAAA, 0xFF, 0x100, 0xFFFFFF00]


def _words(seed: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Two (P, F) tiles of ``dtype`` whose element pairs include every pair of the special
    patterns (the rest random words)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 32, size=(P, F), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, size=(P, F), dtype=np.uint64).astype(np.uint32)
    n = len(_SPECIALS)
    pairs = np.array([(x, y) for x in _SPECIALS for y in _SPECIALS], dtype=np.uint32)
    a.reshape(-1)[: n * n], b.reshape(-1)[: n * n] = pairs[:, 0], pairs[:, 1]
    return a.view(dtype), b.view(dtype)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    raw = np.dtype(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(raw), want.view(raw))


def _twice(kernel, *args, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's output traced, then replayed from the cache (the same arguments)."""
    run = simulate(kernel)
    first = np.array(run(*args, **kwargs), copy=True)
    return first, np.asarray(run(*args, **kwargs))


def _run_names(kernel, *args, **kwargs) -> set[str]:
    """The names of the recorded runs of the kernel's program for these arguments."""
    return {getattr(ins.run, "__name__", "") for ins in trace(kernel, *args, **kwargs).instrs}


def _load(x, wide: bool):
    """``x`` in an SBUF tile; ``wide``: as a strided view (columns of a tile 8 wider)."""
    p, f = x.shape
    if wide:
        big = nl.ndarray((p, f + 8), dtype=x.dtype, buffer=nl.sbuf)
        t = big[:, 8 : 8 + f]
    else:
        t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _tensor_tensor_kernel(a, b, op, dst_dtype, wide, in_place):
    ta, tb = _load(a, wide), _load(b, False)
    dst = ta if in_place else nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dst, data1=ta, data2=tb, op=op)
    return _store(dst)


def _unsigned(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


_BITVEC = {
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    # shifts by 0..31 (the operand masked): the bits of the unsigned word, shifted
    "left_shift": lambda a, b: (_unsigned(a) << _unsigned(b)).view(a.dtype),
    "right_shift": lambda a, b: (_unsigned(a) >> _unsigned(b)).view(a.dtype),
}


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("op", sorted(_BITVEC))
@pytest.mark.parametrize(("wide", "in_place"), [(False, False), (True, False), (False, True)])
def test_tensor_tensor_bitvec_matches_numpy(dtype: str, op: str, wide: bool, in_place: bool) -> None:
    a, b = _words(1, dtype)
    if op.endswith("shift"):
        b = (_unsigned(b) & np.uint32(31)).view(dtype)
    want = _BITVEC[op](a, b)
    if op == "right_shift" and dtype == "int32":
        # logical: a negative word shifted right by 1 or more comes out non-negative
        assert (want[(a < 0) & (b > 0)] >= 0).all() and ((a < 0) & (b > 0)).any()
    params = {"op": getattr(nl, op), "dst_dtype": getattr(nl, dtype), "wide": wide, "in_place": in_place}
    for got in _twice(_tensor_tensor_kernel, a, b, **params):
        _same_bits(got, want)
    assert "run_bitvec" in _run_names(_tensor_tensor_kernel, a, b, **params)


_EXACT = {
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "multiply": lambda x, y: x * y,
    "maximum": max,
    "minimum": min,
}


def _saturated(a: np.ndarray, b: np.ndarray, fn, dst: np.dtype) -> np.ndarray:
    """``fn`` of each pair as Python integers, saturated at ``dst``'s range."""
    info = np.iinfo(dst)
    flat = [min(max(fn(int(x), int(y)), int(info.min)), int(info.max)) for x, y in zip(a.flat, b.flat)]
    return np.array(flat, dtype=np.int64).astype(dst).reshape(a.shape)


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype"), [("int32", "int32"), ("uint32", "uint32"), ("int32", "uint32")]
)
@pytest.mark.parametrize("dst_dtype", ["int32", "uint32"])
@pytest.mark.parametrize("op", sorted(_EXACT))
def test_tensor_tensor_gpsimd_integer_arithmetic_is_exact_and_saturates(
    a_dtype: str, b_dtype: str, dst_dtype: str, op: str
) -> None:
    a, _ = _words(2, a_dtype)
    _, b = _words(3, b_dtype)
    dst = np.dtype(dst_dtype)
    want = _saturated(a, b, _EXACT[op], dst)
    info = np.iinfo(dst)
    if op in ("add", "subtract", "multiply"):
        # the reference saturates somewhere (a run that wraps would fail)
        wide = _EXACT[op](a.astype(object), b.astype(object))
        assert (wide > int(info.max)).any() or (wide < int(info.min)).any()
    params = {"op": getattr(nl, op), "dst_dtype": getattr(nl, dst_dtype), "wide": False, "in_place": False}
    for got in _twice(_tensor_tensor_kernel, a, b, **params):
        _same_bits(got, want)
    unsigned_add = op == "add" and a_dtype == b_dtype == dst_dtype == "uint32"
    lean = "run_saturating_add" if unsigned_add else "run_exact"
    assert lean in _run_names(_tensor_tensor_kernel, a, b, **params)


def _tensor_tensor_3d_kernel(a, b, op, dst_dtype):
    # operands as (P, 4, F/4) views of wider 3-D tiles: no (P, free) view of their layout, so
    # the instruction records the general run, not a lean one
    p, f = a.shape
    n = f // 4

    def load(x):
        big = nl.ndarray((p, 4, n + 2), dtype=x.dtype, buffer=nl.sbuf)
        t = big[:, :, 1 : 1 + n]
        nisa.dma_copy(dst=t, src=x.reshape((p, 4, n)))
        return t

    ta, tb = load(a), load(b)
    dst = nl.ndarray((p, 4, n), dtype=dst_dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dst, data1=ta, data2=tb, op=op)
    out = nl.ndarray((p, 4, n), dtype=dst_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("dst_dtype", ["uint32", "int32"])
def test_unsigned_products_past_int64_saturate_on_the_general_run(dst_dtype: str) -> None:
    # uint32 x uint32 products reach (2^32 - 1)^2, past int64's 2^63 - 1: the general run must
    # not wrap them either
    a, _ = _words(4, "uint32")
    _, b = _words(5, "uint32")
    wide = a.astype(object) * b.astype(object)
    assert (wide > 2**63 - 1).any()
    want = _saturated(a, b, _EXACT["multiply"], np.dtype(dst_dtype)).reshape(P, 4, F // 4)
    params = {"op": nl.multiply, "dst_dtype": getattr(nl, dst_dtype)}
    for got in _twice(_tensor_tensor_3d_kernel, a, b, **params):
        _same_bits(got, want)
    assert "run_exact" not in _run_names(_tensor_tensor_3d_kernel, a, b, **params)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_tensor_tensor_gpsimd_add_in_place_saturates(dtype: str) -> None:
    # dst is data1's tile: the run reads both operands before it writes (a uint32 add's room
    # above data1 is taken from data1 first)
    a, b = _words(8, dtype)
    want = _saturated(a, b, _EXACT["add"], np.dtype(dtype))
    params = {"op": nl.add, "dst_dtype": getattr(nl, dtype), "wide": False, "in_place": True}
    for got in _twice(_tensor_tensor_kernel, a, b, **params):
        _same_bits(got, want)


_FLOATS = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-40, 3e38, -3e38, 0.7, 2.0], np.float32)


def _float_pairs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((P, F)).astype(np.float32)
    b = rng.standard_normal((P, F)).astype(np.float32)
    n = len(_FLOATS)
    a.reshape(-1)[: n * n] = np.repeat(_FLOATS, n)
    b.reshape(-1)[: n * n] = np.tile(_FLOATS, n)
    return a, b


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("wide", [False, True])
def test_tensor_tensor_float32_arithmetic_matches_numpy(op: str, dst_dtype: str, wide: bool) -> None:
    a, b = _float_pairs(4)
    out = np.dtype(np.float32) if dst_dtype == "float32" else BF16
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a, b).astype(out)
    params = {"op": getattr(nl, op), "dst_dtype": getattr(nl, dst_dtype), "wide": wide, "in_place": False}
    for got in _twice(_tensor_tensor_kernel, a, b, **params):
        _same_bits(got, want)
    assert "run_float" in _run_names(_tensor_tensor_kernel, a, b, **params)


def _tensor_scalar_kernel(x, op0, c0, rev0, op1, c1, dst_dtype, wide):
    t = _load(x, wide)
    dst = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.sbuf)
    if op1 is None:
        nisa.tensor_scalar(dst=dst, data=t, op0=op0, operand0=c0, reverse0=rev0)
    else:
        nisa.tensor_scalar(dst=dst, data=t, op0=op0, operand0=c0, reverse0=rev0, op1=op1, operand1=c1)
    return _store(dst)


#: (op0, constant, reverse0, op1, constant): a random kernel's byte splits and packing
_BITVEC_SCALAR = [
    ("bitwise_and", 0xFF, False, None, None),
    ("right_shift", 8, False, "bitwise_and", 0xFF),
    ("right_shift", 31, False, None, None),
    ("left_shift", 24, False, "bitwise_or", 0x5A),
    ("bitwise_xor", 0x7FFFFFFF, True, "right_shift", 3),
    ("left_shift", 1, True, None, None),  # 1 << x
    ("right_shift", 0x80000000, True, None, None),  # the top bit >> x, logical
    ("invert", 0, False, "bitwise_and", 0xFFFF),
]


def _bitvec_reference(x: np.ndarray, op: str, c: int, rev: bool) -> np.ndarray:
    u = _unsigned(x)
    k = np.uint32(c & 0xFFFFFFFF)
    if op == "invert":
        return (~u).view(x.dtype)
    fn = _BITVEC[op]
    left, right = (np.full_like(u, k), u) if rev else (u, np.full_like(u, k))
    return fn(left.view(x.dtype), right.view(x.dtype))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize(("op0", "c0", "rev0", "op1", "c1"), _BITVEC_SCALAR)
def test_tensor_scalar_bitvec_against_constants_matches_numpy(dtype, op0, c0, rev0, op1, c1) -> None:
    x, _ = _words(5, dtype)
    if rev0 and op0.endswith("shift"):
        x = (_unsigned(x) & np.uint32(31)).view(dtype)  # the shift amounts
    if dtype == "int32":
        # constants as int32 values (the same bit patterns)
        c0, c1 = (None if c is None else int(np.uint32(c).view(np.int32)) for c in (c0, c1))
    want = _bitvec_reference(x, op0, c0, rev0)
    if op1 is not None:
        want = _bitvec_reference(want, op1, c1, False)
    params = {
        "op0": getattr(nl, op0), "c0": c0, "rev0": rev0, "op1": getattr(nl, op1) if op1 else None,
        "c1": c1, "dst_dtype": getattr(nl, dtype), "wide": True,
    }  # fmt: skip
    for got in _twice(_tensor_scalar_kernel, x, **params):
        _same_bits(got, want)
    assert {"run_one", "run_two"} & _run_names(_tensor_scalar_kernel, x, **params)


@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rev", [False, True])
def test_tensor_scalar_float32_against_constants_matches_numpy(dst_dtype: str, rev: bool) -> None:
    x, _ = _float_pairs(6)
    out = np.dtype(np.float32) if dst_dtype == "float32" else BF16
    for c0, c1 in ((0.7, -2.0), (np.nan, 1.0), (-0.0, np.inf)):
        with np.errstate(all="ignore"):
            y = np.subtract(np.float32(c0), x) if rev else np.subtract(x, np.float32(c0))
            want = np.multiply(y, np.float32(c1)).astype(out)
        params = {
            "op0": nl.subtract, "c0": c0, "rev0": rev, "op1": nl.multiply, "c1": c1,
            "dst_dtype": getattr(nl, dst_dtype), "wide": True,
        }  # fmt: skip
        for got in _twice(_tensor_scalar_kernel, x, **params):
            _same_bits(got, want)
        assert "run_rows" in _run_names(_tensor_scalar_kernel, x, **params)


def _tensor_copy_kernel(x, dst_dtype, wide):
    t = _load(x, wide)
    dst = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=dst, src=t)
    return _store(dst)


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype"),
    [("int32", "uint32"), ("uint32", "int32"), ("int32", "int16"), ("uint32", "uint8"), ("int16", "int32")],
)
def test_tensor_copy_integer_to_integer_casts_via_float32(src_dtype: str, dst_dtype: str) -> None:
    x, _ = _words(7, "uint32")
    src = np.dtype(src_dtype)
    x = x.astype(src) if src.itemsize < 4 else x.view(src)
    info = np.iinfo(np.dtype(dst_dtype))
    # the float32 image of each value, saturated at the dst's range
    want = np.clip(x.astype(np.float32).astype(np.float64), info.min, info.max).astype(dst_dtype)
    if src.itemsize == 4 and info.bits == 32:
        # the float32 rounding shows (a copy that skipped it would fail): 2^31 - 1 is 2^31 in
        # float32, and 2^32 - 1 is 2^32
        assert (want.astype(np.int64) != np.clip(x.astype(np.int64), info.min, info.max)).any()
    for got in _twice(_tensor_copy_kernel, x, dst_dtype=getattr(nl, dst_dtype), wide=True):
        _same_bits(got, want)
    assert "run_int" in _run_names(_tensor_copy_kernel, x, dst_dtype=getattr(nl, dst_dtype), wide=True)


@pytest.mark.parametrize("wide", [False, True])
def test_copies_of_one_dtype_keep_every_bit(wide: bool) -> None:
    # every bfloat16 pattern (NaN payloads, both zeros, subnormals), through dma_copy in and out
    # and a tensor_copy between tiles
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16).reshape(128, 512)
    for got in _twice(_tensor_copy_kernel, x, dst_dtype=nl.bfloat16, wide=wide):
        _same_bits(got, x)
    assert "run_copy" in _run_names(_tensor_copy_kernel, x, dst_dtype=nl.bfloat16, wide=wide)
