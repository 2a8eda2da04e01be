"""NKI dtypes (AWS NKI API Common Fields (NKI 0.3.0)) mapped to NumPy storage, and the casts the engines
perform (docs/emulator.md, Numerics).

In NKI 0.3.0 the dtype constants are plain strings (``nl.bfloat16 == "bfloat16"``); the emulator
keeps that and also accepts NumPy/ml_dtypes dtypes. bfloat16 and fp8 are stored exactly through
ml_dtypes (the vendor simulator's ``NKI_PRECISE_FP=1`` mode). tfloat32 lives in a float32 container
whose mantissa is rounded to 10 bits (nearest even) on every write.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from trncore.sim import context

__all__ = [
    "FLOAT_NAMES",
    "INT_NAMES",
    "NKI_DTYPES",
    "PACKED_NAMES",
    "assign",
    "cast",
    "contiguous",
    "dtype_name",
    "float_to_int_truncation",
    "ieee_arithmetic",
    "is_byte_float",
    "is_float",
    "is_int",
    "is_packed",
    "itemsize",
    "read_only_f32",
    "storage_dtype",
    "to_f32",
]

NKI_DTYPES: dict[str, np.dtype] = {
    "bool_": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "tfloat32": np.dtype(np.float32),
    "float32": np.dtype(np.float32),
    # AWS NKI API Common Fields (NKI 0.3.0): nl.float8_e4m3 is the IEEE-like e4m3 (with inf); ml_dtypes >= 0.5
    # has it.
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    # NKI 0.5.0: the OCP MX scale type (8 exponent bits, no sign or mantissa; page
    # nki.language.float8_e8m0fnu); trncore.sim.versions gates nl.float8_e8m0fnu to 0.5.0+.
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    # Packed MX types (nki.language dtype list, NKI 0.3.0): "4x packed float8/float4 elements,
    # custom data type for nki.isa.nc_matmul_mx on NeuronCore-v4". fp8 x4 is a 32-bit word
    # (nki.isa.quantize_mx), fp4 x4 16 bits (the 0.3.0 update guide views a uint16 tensor as
    # float4_e2m1fn_x4). Stored as one-field structured words so that they stay distinct from
    # uint32/uint16 and no NumPy arithmetic applies to them: on trn1/trn2 they are storage only.
    "float8_e5m2_x4": np.dtype([("float8_e5m2_x4", "<u4")]),
    "float8_e4m3fn_x4": np.dtype([("float8_e4m3fn_x4", "<u4")]),
    "float4_e2m1fn_x4": np.dtype([("float4_e2m1fn_x4", "<u2")]),
}
FLOAT_NAMES = frozenset(
    {"float16", "bfloat16", "tfloat32", "float32", "float8_e4m3", "float8_e5m2", "float8_e4m3fn",
     "float8_e8m0fnu"}
)
INT_NAMES = frozenset({"bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32"})
PACKED_NAMES = frozenset({"float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"})

_PACKED_STORAGE = frozenset(NKI_DTYPES[n] for n in PACKED_NAMES)

_BY_NUMPY = {
    np.dtype(np.bool_): "bool_",
    np.dtype(np.int8): "int8",
    np.dtype(np.int16): "int16",
    np.dtype(np.int32): "int32",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.uint16): "uint16",
    np.dtype(np.uint32): "uint32",
    np.dtype(np.float16): "float16",
    np.dtype(ml_dtypes.bfloat16): "bfloat16",
    np.dtype(np.float32): "float32",
    np.dtype(ml_dtypes.float8_e4m3): "float8_e4m3",
    np.dtype(ml_dtypes.float8_e5m2): "float8_e5m2",
    np.dtype(ml_dtypes.float8_e4m3fn): "float8_e4m3fn",
    np.dtype(ml_dtypes.float8_e8m0fnu): "float8_e8m0fnu",
    **{NKI_DTYPES[n]: n for n in PACKED_NAMES},
}


def dtype_name(dtype: Any) -> str:
    """The NKI name of ``dtype`` (a name string, NumPy dtype, ml_dtypes type or torch-like str)."""
    if isinstance(dtype, str):
        name = dtype.removeprefix("nl.").removeprefix("torch.")
        if name == "bool":
            name = "bool_"
        if name in NKI_DTYPES:
            return name
        raise TypeError(f"{dtype!r} is not an NKI dtype; NKI has {', '.join(sorted(NKI_DTYPES))}")
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not an NKI dtype") from None
    if np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    raise TypeError(
        f"{np_dtype} is not an NKI dtype (NKI has no 64-bit or complex types); "
        f"cast to one of {', '.join(sorted(NKI_DTYPES))}"
    )


def storage_dtype(name: str) -> np.dtype:
    """The NumPy dtype that stores NKI dtype ``name``."""
    return NKI_DTYPES[name]


def itemsize(name: str) -> int:
    """Bytes per element of NKI dtype ``name``."""
    return NKI_DTYPES[name].itemsize


def is_float(name: str) -> bool:
    """Whether NKI dtype ``name`` is a floating-point type (fp8 through float32, tfloat32 included)."""
    return name in FLOAT_NAMES


def is_packed(name: str) -> bool:
    """Whether NKI dtype ``name`` is a 4-packed MX type (``float8_e4m3fn_x4`` and kin)."""
    return name in PACKED_NAMES


def is_byte_float(name: str) -> bool:
    """Whether NKI dtype ``name`` is a one-byte float (the fp8 types and ``float8_e8m0fnu``),
    read through a 256-entry table (:func:`to_f32`)."""
    return NKI_DTYPES.get(name) in _BYTE_FLOATS


def is_int(name: str) -> bool:
    """Whether NKI dtype ``name`` is an integer type (``bool_`` counts as one: stored as uint8)."""
    return name in INT_NAMES


def _round_tf32(values: np.ndarray) -> np.ndarray:
    """Round float32 values to tfloat32 (10 mantissa bits), nearest even; inf/NaN kept."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    bits = v.view(np.uint32)
    lsb = (bits >> 13) & 1
    rounded = ((bits + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)).astype(np.uint32)
    finite = np.isfinite(v)
    out = np.where(finite, rounded, bits).astype(np.uint32)
    return out.view(np.float32)


#: The ml_dtypes types (NumPy's casts of them run element by element through their own loops).
_ML_DTYPES = frozenset(
    NKI_DTYPES[n] for n in ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu")
)

#: Storage types whose same-type copies NumPy runs through the type's own element loops
#: (ml_dtypes' bfloat16/fp8), with the unsigned integer type of their width: a copy between
#: two arrays of such a type moves the same bytes as the copy between their integer views,
#: which NumPy does several times faster (a strided bfloat16 tile copy ~3x).
RAW_VIEW: dict[np.dtype, np.dtype] = {d: np.dtype(f"u{d.itemsize}") for d in _ML_DTYPES}

#: The one-byte float dtypes, converted through tables (see :func:`to_f32` and :func:`cast`).
_BYTE_FLOATS = frozenset(
    NKI_DTYPES[n] for n in ("float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu")
)


@functools.cache
def _byte_float_tables(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tables of a one-byte float type, built with ml_dtypes' own conversions (so exact):

    - its 256 values as float32 (reading);
    - its value for each float32 bit pattern ``hi << 16`` and ``hi << 16 | 1`` (writing): an
      8-bit float keeps at most 3 of float32's 23 mantissa bits, so the rounding of any float32
      depends on its top 16 bits and on whether the low 16 bits are zero (they can only make a
      tie into "above the tie", or a NaN of an inf pattern, which ``| 1`` does as well).
    """
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    with np.errstate(invalid="ignore", over="ignore"):  # the table covers NaN and inf too
        exact = hi.view(np.float32).astype(dtype).view(np.uint8)
        sticky = (hi | np.uint32(1)).view(np.float32).astype(dtype).view(np.uint8)
    return values, exact, sticky


def to_f32(values: np.ndarray) -> np.ndarray:
    """``values`` as float32, the engines' internal format (no copy when already float32).

    One-byte floats go through a 256-entry table (ml_dtypes' own values): converting them with
    ``astype`` costs ~10 ns an element, which made fp8 matmuls the emulator's hottest spot.
    """
    if values.dtype in _BYTE_FLOATS:
        table = _byte_float_tables(values.dtype)[0]
        # (mode "wrap": a byte is always inside the 256 entries, and NumPy's take skips its
        # per-element bounds check, ~15 % of the read)
        return table.take(values.view(np.uint8), mode="wrap")
    if values.dtype in _ML_DTYPES:
        if values.ndim and values.strides[-1] != values.itemsize and not values.flags.c_contiguous:
            # ml_dtypes converts an array whose last axis is strided several times slower than
            # a contiguous copy of it (the same conversion of the same elements); the copy moves
            # the integer words (RAW_VIEW). Rows of contiguous elements (a tile's partitions)
            # convert directly: copying them first doubled the cost of a [64, 65535] bf16 read.
            values = contiguous(values)
        return values.astype(np.float32, order="C")
    return np.asarray(values, dtype=np.float32)


#: The float32 values of one-byte-float operands read through :func:`read_only_f32`, by the
#: identity of the array read: (a weak reference to that array, its bytes when decoded, the
#: read-only decoding). The weak reference tells a later array given the same ``id`` apart and
#: does not keep a tile's storage alive.
_DECODED: dict[int, tuple[weakref.ref[np.ndarray], bytes, np.ndarray]] = {}
#: Entries kept (oldest dropped first): a [128, 2, 512] fp8 operand holds 512 KiB of float32
#: and 128 KiB of bytes, so at most ~20 MiB.
_DECODED_LIMIT = 32


def read_only_f32(values: np.ndarray) -> np.ndarray:
    """``to_f32(values)`` for a caller that only reads the result (``nc_matmul``'s operands).

    A one-byte-float array read again with the same bytes gets the float32 array decoded the
    first time (read-only). The bytes are compared in full on every read, so any write to the
    storage in between, by whatever path, decodes afresh: the result is always the table's
    decoding of the current bytes. Why: AWS's fp8 kernels keep a weight tile in SBUF and feed it
    to many matmuls (in the fp8 output projection 5 034 of 5 040 moving-operand reads find the
    bytes unchanged); comparing them costs a tenth of the 256-entry table read (~4 against
    ~40 us for [112, 2, 239]).
    bfloat16 is converted as ``to_f32`` does: its conversion costs what the comparison would.
    """
    if values.dtype not in _BYTE_FLOATS:
        return to_f32(values)
    raw = values.tobytes()
    key = id(values)
    entry = _DECODED.get(key)
    if entry is not None and entry[0]() is values and entry[1] == raw:
        return entry[2]
    decoded = to_f32(values)
    decoded.flags.writeable = False  # shared by the reads that find these bytes
    _DECODED.pop(key, None)  # (re-inserted last: the oldest entries go first)
    if len(_DECODED) >= _DECODED_LIMIT:
        # (the oldest key from a copy of the keys: kernels on other threads, e.g. run_ranks'
        # ranks, share the cache, and an iterator over the dict itself could see it change)
        for oldest in list(_DECODED)[:1]:
            _DECODED.pop(oldest, None)
    _DECODED[key] = (weakref.ref(values), raw, decoded)
    return decoded


@functools.cache
def _byte_float_write_table(dtype: np.dtype) -> np.ndarray:
    """The two writing tables of :func:`_byte_float_tables` interleaved: entry ``2 * hi + s`` is
    the value of float32 pattern ``hi << 16`` (``s = 0``) or ``hi << 16 | 1`` (``s = 1``)."""
    _, exact, sticky = _byte_float_tables(dtype)
    both = np.empty(2 * exact.size, dtype=np.uint8)
    both[0::2] = exact
    both[1::2] = sticky
    return both


def _f32_to_byte_float(values: np.ndarray, target: np.dtype) -> np.ndarray:
    """float32 -> one-byte float, bit-identical to ``values.astype(target)`` (see the tables)."""
    bits = np.ascontiguousarray(values).view(np.uint32)
    # one lookup per element: (top 16 bits, whether the low 16 are nonzero) as one index
    index = bits >> np.uint32(16)
    index <<= np.uint32(1)
    index |= (bits & np.uint32(0xFFFF)) != 0
    return _byte_float_write_table(target).take(index).view(target)


def contiguous(values: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(values)``, copying bfloat16/fp8 as integer words (RAW_VIEW: the
    same bytes, several times faster than ml_dtypes' element loop)."""
    raw = RAW_VIEW.get(values.dtype)
    if raw is None or values.flags.c_contiguous:
        return np.ascontiguousarray(values)
    return np.ascontiguousarray(values.view(raw)).view(values.dtype)


def assign(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (same shape), moving integer words when both hold the same ml_dtypes
    type: NumPy copies bfloat16/fp8 through the type's own element loop, several times slower
    than the same bytes as unsigned integers (a 1.2 GB bfloat16 kernel argument: ~1 s -> 0.3 s).
    """
    raw = RAW_VIEW.get(src.dtype)
    if raw is not None and src.dtype == dst.dtype:
        dst.view(raw)[...] = src.view(raw)
    else:
        dst[...] = src


@functools.cache
def int_range(dtype: np.dtype) -> tuple[int, int]:
    """``(min, max)`` of an integer NumPy dtype (for an NKI dtype name, of
    ``storage_dtype(name)``); cached: ``np.iinfo`` builds a new object per call, and a replay of
    small integer tiles called it once per instruction."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def cast(values: Any, name: str) -> np.ndarray:
    """Cast computed values to NKI dtype ``name`` the way the engines do (docs/emulator.md, Numerics).

    Floats: round to nearest even (NumPy/ml_dtypes casts). Float to int: round to nearest even and
    saturate at the integer range; NaN becomes 0 (hardware behaviour for NaN is not documented
    [INF]). Ints to ints: values are taken as numbers and saturated too. Under
    :func:`float_to_int_truncation` (target NKI releases before 0.6.0, whose simulator cast with
    NumPy's truncation) float to int truncates toward zero, still saturating.
    """
    target = NKI_DTYPES[name]
    arr = np.asarray(values)
    if name in PACKED_NAMES or arr.dtype in _PACKED_STORAGE:
        if arr.dtype == target:
            return arr
        if name in PACKED_NAMES and arr.dtype.kind in "fiu" and not np.any(arr):
            return np.zeros(arr.shape, dtype=target)  # zero is zero in every packing
        raise TypeError(f"a packed x4 value converts to nothing but itself; got {arr.dtype} -> {name}")
    if name == "tfloat32":
        return _round_tf32(arr.astype(np.float32))
    if target in _BYTE_FLOATS and arr.dtype == np.float32:
        return _f32_to_byte_float(arr, target)
    if name in FLOAT_NAMES:
        if target in _ML_DTYPES and not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)  # (see to_f32: the same conversion, contiguous)
        return arr.astype(target)
    if arr.dtype == target:
        return arr
    low, high = int_range(target)
    if arr.dtype.kind in "iub":
        src_low, src_high = (0, 1) if arr.dtype.kind == "b" else int_range(arr.dtype)
        if low <= src_low and src_high <= high:
            return arr.astype(target)  # every source value fits: nothing to saturate
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            # uint64 values past int64's range (an exact GpSimd product of two uint32 words):
            # clipped in uint64, where no floor is needed (every integer type's floor is <= 0)
            return np.minimum(arr, np.uint64(high)).astype(target)
        # (np.maximum / np.minimum: np.clip builds np.iinfo objects on every call)
        wide = arr.astype(np.int64)
        np.maximum(wide, low, out=wide)
        np.minimum(wide, high, out=wide)
        return wide.astype(target)
    # rounded, saturated (inf to the range's ends), NaN to 0, in a float64 copy of the values
    # (the same values as nan_to_num followed by clip: clip keeps NaN, so it is replaced after)
    f = np.array(arr, dtype=np.float64)
    (np.trunc if getattr(_CAST_MODE, "truncate", False) else np.rint)(f, out=f)
    np.maximum(f, low, out=f)
    np.minimum(f, high, out=f)
    np.copyto(f, 0.0, where=np.isnan(f))
    return f.astype(target)


#: Per thread: whether float->int casts truncate toward zero (NKI < 0.6.0's simulator, see
#: trncore.sim.versions, row "float to int casts") instead of rounding to nearest even.
_CAST_MODE = context.inherited_local()


def ieee_arithmetic() -> contextlib.AbstractContextManager[Any]:
    """NumPy's floating-point warnings off in one thread while a kernel's instructions run.

    The engines compute IEEE float32 without traps: inf * 0 is NaN, an overflow is inf, silently
    (the Trainium2 Architecture Guide for NKI, "Built-in Transpose Support", NKI 0.3.0 and 0.6.0:
    NaN/Inf values in a TensorE matmul "propagate through the accumulation chain"). NumPy
    would warn instead ("invalid value encountered in matmul") from the emulator's own line, not
    the kernel's, and under ``-W error`` stop with an exception inside NumPy (a DeltaNet kernel
    whose fp32 ``exp`` overflows, docs/third-party-kernels.md "Twenty-fifth batch"). Entered where a trace
    or a replay runs instructions, and in each LNC core's thread (``np.errstate`` is per thread):
    the instructions' ``run`` closures hold no errstate of their own.
    """
    return np.errstate(all="ignore")


@contextlib.contextmanager
def float_to_int_truncation(enabled: bool) -> Iterator[None]:
    """Inside the block (one thread), float->int casts truncate toward zero when ``enabled``."""
    previous = getattr(_CAST_MODE, "truncate", False)
    _CAST_MODE.truncate = enabled
    try:
        yield
    finally:
        _CAST_MODE.truncate = previous
