"""Vector / GpSimd instructions: elementwise, reductions, scans and selection (AWS NKI docs, nki.isa,
NKI 0.3.0: one page per instruction)."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from trncore.sim import dtypes, from_nki_0_2
from trncore.sim.alu import (
    ACTIVATIONS,
    BINARY,
    REDUCIBLE,
    UNARY_BITVEC,
    Op,
    bitvec_ufunc,
    constant_row,
)
from trncore.sim.checks import (
    F32,
    check_compute_operand,
    check_reduces_elements,
    check_same_layout,
    check_vector_operand,
    memoised_checks,
    read_f32,
    scalar_reader,
    value_key,
)
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    LanguageError,
    ShapeError,
    site_suffix,
    warn_unless_strict,
)
from trncore.sim.isa_common import DIRECT_CASTS, engine, reduce_cmd
from trncore.sim.isa_common import affine_values as _affine_values
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import check_engine as _check_engine
from trncore.sim.isa_common import check_gpsimd_psum as _check_gpsimd_psum
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import enum_arg as _enum_arg
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import pick_engine as _pick_engine
from trncore.sim.isa_common import saturate_into as _saturate_into
from trncore.sim.isa_common import static_rows as _static_rows
from trncore.sim.isa_common import writer as _writer
from trncore.sim.release_rules import check_unary_operand, unary_alu_ops
from trncore.sim.tensor import NkiTensor

_RC = reduce_cmd  # (the parameter of the same name shadows the class)


def _tensor_tensor_checks(
    site: Any, dst: Any, data1: Any, data2: Any, op: Any, engine: Any
) -> tuple[Op, Any]:
    """tensor_tensor's static checks; ``(operator token, engine)`` when they pass."""
    d1 = check_compute_operand(data1, "tensor_tensor", "data1", site)
    d2 = check_compute_operand(data2, "tensor_tensor", "data2", site)
    dst = check_compute_operand(dst, "tensor_tensor", "dst", site)
    token = _op_token(op, "op", site, BINARY)
    if d1.partitions == d2.partitions and (d1.free_size == 1) != (d2.free_size == 1):
        # tensor_tensor takes equal layouts, no broadcast (nki.isa.tensor_tensor, NKI 0.3.0 and
        # 0.6.0); a [P, 1] column against a [P, F] tile is tensor_scalar's per-partition operand.
        # Two public kernels of the sixth third-party batch (a LayerNorm, a BERT attention) wrote it.
        col, wide = ("data2", "data1") if d2.free_size == 1 else ("data1", "data2")
        raise ShapeError(
            "element-count",
            f"tensor_tensor does not broadcast: {col} is a [{d1.partitions}, 1] column against "
            f"{wide}'s {max(d1.free_size, d2.free_size)} elements per partition "
            f"({d1.describe()} vs {d2.describe()}); for a per-partition scalar use "
            f"nisa.tensor_scalar(data={wide}, op0=..., operand0={col})",
            site,
        )
    check_same_layout(d1, d2, "tensor_tensor", "data1 and data2", site)
    check_same_layout(d1, dst, "tensor_tensor", "data1 and dst", site)
    if d1.buffer.name == "psum" and d2.buffer.name == "psum":
        raise BufferError(
            "tensor-tensor-two-psum",
            f"tensor_tensor inputs cannot both be in PSUM: {d1.describe()}, {d2.describe()}",
            site,
        )
    eng_enum = globals()["engine"]
    ints = all(t.dtype in ("int32", "uint32") for t in (d1, d2, dst))
    any_psum = any(t.buffer.name == "psum" for t in (d1, d2, dst))
    default = (
        eng_enum.gpsimd if (token.name == "power" or (ints and not any_psum)) else eng_enum.vector
    )
    eng = _pick_engine(engine, default)
    _check_engine(eng, (eng_enum.vector, eng_enum.gpsimd), "tensor_tensor",
                  "nki.isa.tensor_tensor, NKI 0.3.0 and 0.6.0", site)  # fmt: skip
    _check_gpsimd_psum(eng, "tensor_tensor", site, d1, d2, dst)
    if token.kind == "bitvec" and not all(dtypes.is_int(t.dtype) for t in (d1, d2, dst)):
        raise DtypeError(
            "bitvec-int",
            f"bitwise op {token!r} needs integer tensors: {d1.dtype}, {d2.dtype} -> {dst.dtype}",
            site,
        )
    return token, eng


def tensor_tensor(
    dst: Any, data1: Any, data2: Any, op: Any, engine: Any = engine.unknown, name: str | None = None
) -> None:
    """AWS NKI docs, nki.isa.tensor_tensor (NKI 0.3.0): ``dst = op(data1, data2)`` elementwise; no
    broadcasting; not both inputs in PSUM."""
    ctx, site = _begin()
    # static checks once per kernel line, operand signature and keyword (checks.static_lookup)
    hit = memoised_checks(ctx, "tensor_tensor", site, (data1, data2, dst), (op, engine),
                          lambda: _tensor_tensor_checks(site, dst, data1, data2, op, engine))  # fmt: skip
    token, eng = hit
    d1, d2 = data1, data2
    eng_enum = globals()["engine"]
    ints = all(t.dtype in ("int32", "uint32") for t in (d1, d2, dst))
    a_op, b_op = d1.operand(site), d2.operand(site)
    p, fn = d1.partitions, token.fn
    int_fn = _INT_EXACT.get(token.name)
    exact_int = ints and eng == eng_enum.gpsimd and int_fn is not None
    meta = _elementwise_meta(dst, per_elem=2.0)
    fast = _rows_run(token, exact_int, a_op, b_op, dst, site, p)
    if fast is not None:
        ctx.emit("tensor_tensor", eng.name, site, [d1, d2], [dst], fast, meta)
        return
    write = _writer(dst, site)
    if token.kind == "bitvec":

        def run() -> None:
            a = np.asarray(a_op.read()).reshape(p, -1)
            b = np.asarray(b_op.read()).reshape(p, -1).astype(a.dtype)
            write(fn(a, b))
    elif exact_int:

        exact = int_fn
        assert exact is not None
        wide = _exact_dtype(token.name, np.dtype(d1.dtype), np.dtype(d2.dtype))

        def run() -> None:
            a = np.asarray(a_op.read()).reshape(p, -1).astype(wide)
            b = np.asarray(b_op.read()).reshape(p, -1).astype(wide)
            write(exact(a, b))
    elif (uf := _float_ufunc(token)) is not None:

        def run() -> None:
            # the token's float32 ufunc, computed into a converted (bfloat16/fp8) operand's
            # copy when there is one instead of a new temporary (the same loop, the same values)
            ra, rb = a_op.read(), b_op.read()
            a, b = read_f32(ra, p), read_f32(rb, p)
            own = a if ra.dtype != F32 else b if rb.dtype != F32 else None
            write(uf(a, b, out=own))
    else:

        def run() -> None:
            write(fn(read_f32(a_op.read(), p), read_f32(b_op.read(), p)))

    ctx.emit("tensor_tensor", eng.name, site, [d1, d2], [dst], run, meta)


_U32 = np.dtype(np.uint32)

#: dsts that take float32 results by assignment (isa_common.writer: float32 as it is, bfloat16
#: and float16 by NumPy's cast, its DIRECT_CASTS)
_F32_WRITES = DIRECT_CASTS | {"float32"}

#: AWS NKI docs, nki.isa.tensor_tensor (NKI 0.3.0): int32/uint32 tensor_tensor on GpSimd is exact integer
#: arithmetic.
_INT_EXACT = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
_PY_EXACT: dict[str, Callable[[int, int], int]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "maximum": max,
    "minimum": min,
}


def _rows_run(
    token: Op, exact_int: bool, a_op: Any, b_op: Any, dst: NkiTensor, site: Any, p: int
) -> Any:
    """A replay-lean ``run`` for tensor_tensor on static operands whose ``(p, free)`` views
    exist, or None (the general runs in :func:`tensor_tensor` then apply).

    A float32 arithmetic token on two float32 operands into a float32, bfloat16 or float16 dst:
    the token's ufunc into a new array, assigned to the dst's rows (the general run's own steps:
    no converted copy to compute into, and its writer stores float32 values by that assignment,
    :func:`trncore.sim.isa_common.writer`). Bitvec ops with both operands and the dst of one
    integer type: the token's ufunc straight into the dst (:func:`trncore.sim.alu.bitvec_ufunc`;
    the general run's result has that type, so its cast is the identity). Exact GpSimd
    int32/uint32 arithmetic: the ufunc in the general run's wide type (:func:`_exact_dtype`:
    int64, uint64 for a product of unsigned words), saturated at the dst type's range in place
    and stored, as
    :func:`trncore.sim.dtypes.cast` saturates it (a uint32 add: the saturating sum in uint32,
    the same values). Same bits, one to five NumPy calls instead of about ten Python steps
    around them (small integer tiles, e.g. a random-number kernel's (128, 1) words, replay at a
    few microseconds per instruction)."""
    uf = _float_ufunc(token) if dst.dtype in _F32_WRITES else None
    if uf is None and (dst.dtype not in ("int32", "uint32") or not (exact_int or token.kind == "bitvec")):
        return None
    a2, b2 = _static_rows(a_op, p), _static_rows(b_op, p)
    d2 = _static_rows(dst.operand(site), p) if a2 is not None and b2 is not None else None
    if a2 is None or b2 is None or d2 is None:
        return None
    a_rows, b_rows, d_rows = a2, b2, d2  # (the closures' names: narrowed for mypy)
    if uf is not None:
        if not a2.dtype == b2.dtype == F32:
            return None
        arith = uf

        def run_float() -> None:
            d_rows[...] = arith(a_rows, b_rows)

        return run_float
    if exact_int and token.name == "add" and a2.dtype == b2.dtype == d2.dtype == _U32:

        def run_saturating_add() -> None:
            # min(a + b, 2^32 - 1) without widening: b is cut to the room above a (~a), so the
            # uint32 sum never wraps; the int64 sum's floor (0) is never passed
            room = np.invert(a_rows)
            np.minimum(room, b_rows, out=room)
            np.add(a_rows, room, out=d_rows)

        return run_saturating_add
    if exact_int:
        exact = _INT_EXACT[token.name]
        floor, ceiling = _exact_clips(token.name, a2.dtype, b2.dtype, d2.dtype)
        wide = _exact_dtype(token.name, a2.dtype, b2.dtype)

        def run_exact() -> None:
            _saturate_into(exact(a_rows.astype(wide), b_rows.astype(wide)), floor, ceiling, d_rows)

        return run_exact
    found = bitvec_ufunc(token.name, d2.dtype) if token.kind == "bitvec" else None
    if found is None or not a2.dtype == b2.dtype == d2.dtype:
        return None
    uf, view = found
    if view != d2.dtype:
        a2, b2, d2 = a2.view(view), b2.view(view), d2.view(view)

    def run_bitvec() -> None:
        uf(a2, b2, out=d2)

    return run_bitvec


def _exact_dtype(name: str, a: np.dtype, b: np.dtype) -> np.dtype:
    """The type an exact GpSimd op ``name`` of ``a`` and ``b`` integer operands computes in,
    wide enough for every result: int64, but uint64 for a product of two unsigned words (up to
    (2^32 - 1)^2, past int64's 2^63 - 1, where an int64 product would wrap: 0xFFFFFFFF squared
    came out 1 and saturated to 1 instead of to the dst's maximum)."""
    if name == "multiply" and a.kind == "u" and b.kind == "u":
        return np.dtype(np.uint64)
    return np.dtype(np.int64)


@functools.cache
def _exact_clips(
    name: str, a: np.dtype, b: np.dtype, dst: np.dtype
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The bounds (0-d arrays of :func:`_exact_dtype`, shared read-only) an exact GpSimd op
    ``name`` of ``a`` and ``b`` operands saturates at for a ``dst``
    (:func:`trncore.sim.dtypes.cast`'s range), None for a bound the exact result cannot pass.
    Add, subtract, maximum and minimum are monotone in each operand, and a product's extremes
    are at the operands' range corners too (x * y is monotone in x for a fixed sign of y), so
    each bound is checked against the results at the corners."""
    low, high = dtypes.int_range(dst)
    exact = _PY_EXACT[name]  # (Python integers: the corners' exact results, never wrapped)
    ends = [exact(int(x), int(y)) for x in dtypes.int_range(a) for y in dtypes.int_range(b)]
    clip_low, clip_high = min(ends) < low, max(ends) > high
    wide = _exact_dtype(name, a, b)
    floor = np.asarray(low, dtype=wide) if clip_low else None
    ceiling = np.asarray(high, dtype=wide) if clip_high else None
    for bound in (floor, ceiling):
        if bound is not None:
            bound.flags.writeable = False
    return floor, ceiling


def _is_unary(token: Op) -> bool:
    """Whether ``token`` is a unary ALU operator (``nl.invert``, or an "Arithmetic Unary" row of
    the operator table: ``abs``, ``rsqrt``, ``reciprocal``, from NKI 0.4.0 ``square``, ``relu``)."""
    return token.name in UNARY_BITVEC or (token.kind == "activation" and token.name not in BINARY)


def _tensor_scalar_op(token: Op, rev: bool, operand: Any) -> Any:
    fn = token.fn
    if _is_unary(token):
        # AWS NKI API Common Fields (NKI 0.3.0): unary ALU ops take a dummy operand; the emulator ignores it
        # (our reading; the page does not say what the operand does).
        return lambda x: fn(x)
    if rev:
        return lambda x: fn(operand(), x)
    return lambda x: fn(x, operand())


def _bit_reader(x: Any, raw: np.dtype, what: str, site: Any) -> Any:
    """A bitvec operand's bit pattern in ``data``'s integer type: a constant, or a (P,1) integer
    tile read when the instruction runs. nki.isa.tensor_scalar (NKI 0.3.0 to 0.6.0): operands are
    scalars or (P,1) tiles, bitvec ops take integer types as bit patterns, no cast."""
    if isinstance(x, NkiTensor):
        if not dtypes.is_int(x.dtype):
            raise DtypeError(
                "bitvec-int",
                f"bitwise tensor_scalar {what} must be an integer tile, got {x.describe()}",
                site,
            )
        operand, p = x.operand(site), x.partitions
        return lambda: np.asarray(operand.read()).reshape(p, 1).astype(raw)
    value = np.asarray(x).astype(raw)
    return lambda: value


def _bitvec_scalar_run(x_op: Any, dst: NkiTensor, site: Any, p: int, steps: Any) -> Any:
    """A replay-lean ``run`` for a bitvec tensor_scalar with constant operands on a static
    integer data view and a dst of the same type whose ``(p, free)`` views exist, or None.

    Each op is its token's ufunc (:func:`trncore.sim.alu.bitvec_ufunc`) on the constant as
    :func:`_bit_reader` converts it, the first from the data into the dst, the second in place in
    the dst: the general run computes the same bits into temporaries of that type and stores
    them (its cast is the identity)."""
    if any(isinstance(x, NkiTensor) for _, _, x in steps):
        return None  # (a (P, 1) tile is read when the instruction runs)
    x2 = _static_rows(x_op, p)
    if x2 is None:
        return None
    raw = x2.dtype
    # the constants as _bit_reader converts them, before the dst's view (the general path's order)
    consts = [np.asarray(value).astype(raw) for token, _, value in steps if token is not None]
    d2 = _static_rows(dst.operand(site), p)
    if d2 is None or d2.dtype != raw:
        return None
    calls = []
    source = x2
    for (token, rev, _), const in zip((s for s in steps if s[0] is not None), consts):
        found = bitvec_ufunc(token.name, raw)
        if found is None:
            return None
        uf, view = found
        src, out = (source, d2) if view == raw else (source.view(view), d2.view(view))
        if _is_unary(token):
            args: tuple[np.ndarray, ...] = (src,)
        else:
            c = const if view == raw else const.view(view)
            args = (c, src) if rev else (src, c)
        calls.append((uf, args, out))
        source = d2
    if len(calls) == 1:
        ((uf0, args0, out0),) = calls

        def run_one() -> None:
            uf0(*args0, out=out0)

        return run_one
    (uf0, args0, out0), (uf1, args1, out1) = calls

    def run_two() -> None:
        uf0(*args0, out=out0)
        uf1(*args1, out=out1)

    return run_two


def _float_ufunc(token: Op) -> Any:
    """The NumPy ufunc of a float32 arithmetic token of :data:`BINARY` (which may write into a
    buffer the instruction owns); None for any other token."""
    uf = token.ufunc
    if uf is None or token.kind != "arith" or BINARY.get(token.name) is not token:
        return None
    return uf


#: ufuncs that take a constant operand as a float32 row (:func:`trncore.sim.alu.constant_row`)
_ROW_OPERAND = (np.minimum, np.maximum)


def _inplace_op(token: Op, rev: bool, operand: Any, value: Any = None, free: int = 0) -> Any:
    """``(x, out) -> ufunc(x, operand())`` (or reversed) written into ``out`` (None: a new
    array), for a token with a :func:`_float_ufunc`; None for any other token. It runs under
    :func:`trncore.sim.dtypes.ieee_arithmetic`, as every instruction does. ``value``: the operand when
    it is a constant (not a tile) and ``free`` the data's elements per partition; minimum and
    maximum then take it as a row (:data:`_ROW_OPERAND`)."""
    uf = _float_ufunc(token)
    if uf is None:
        return None
    if uf in _ROW_OPERAND and free > 0 and value is not None and not isinstance(value, NkiTensor):
        row = constant_row(int(np.asarray(F32(value)).view(np.uint32)), free)
        if rev:
            return lambda x, out: uf(row, x, out=out)
        return lambda x, out: uf(x, row, out=out)
    if rev:
        return lambda x, out: uf(operand(), x, out=out)
    return lambda x, out: uf(x, operand(), out=out)


def _gpsimd_arith(ctx: Any, site: Any, t0: Op) -> None:
    """tensor_scalar on GpSimd with an operator other than rsqrt. The ``nki.isa.tensor_scalar``
    page (NKI 0.3.0-0.6.0) says two things: its ``engine`` parameter lists gpsimd "(only allowed
    for rsqrt)", while its text says "If arithmetic operators are used, the tensor_scalar
    instruction can run on Vector or Scalar or GpSimd Engine" and that bitvec ones "must run on
    Vector Engine". Public kernels reported compiled and run on devices put integer index
    arithmetic (multiply, add, less) there (docs/emulator.md "Readings chosen"): an arithmetic
    operator runs, with a warning at the line (an error in strict mode); a bitvec one is refused."""
    message = (
        f"tensor_scalar engine=gpsimd with op0={t0.name}: the nki.isa.tensor_scalar page's engine "
        "parameter lists gpsimd as 'only allowed for rsqrt', while its text lets arithmetic "
        "operators run on Vector, Scalar or GpSimd Engine"
    )
    if t0.kind == "bitvec":
        raise LanguageError(
            "tensor-scalar-gpsimd",
            f"tensor_scalar with bitvec op0={t0.name} must run on Vector Engine, not gpsimd "
            "(nki.isa.tensor_scalar, NKI 0.3.0-0.6.0)",
            site,
        )
    warn_unless_strict(ctx.strict, LanguageError, "tensor-scalar-gpsimd", message, site,
                       instead="; runs as on the Vector Engine", stacklevel=4)


def _tensor_scalar_checks(
    ctx: Any, site: Any, dst: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any,
    engine: Any,
) -> tuple[Op, Op | None, Any]:
    """tensor_scalar's static checks; ``(op0 token, op1 token or None, engine)`` when they pass."""
    data = check_compute_operand(data, "tensor_scalar", "data", site)
    dst = check_compute_operand(dst, "tensor_scalar", "dst", site)
    check_same_layout(data, dst, "tensor_scalar", "data and dst", site)
    allowed = {**BINARY, **unary_alu_ops(), **UNARY_BITVEC}
    t0 = _op_token(op0, "op0", site, allowed)
    if _is_unary(t0):  # None or 0 (nki.isa.tensor_scalar, NKI 0.4.0+; see release_rules)
        operand0 = check_unary_operand(operand0, "tensor_scalar", site)
    operand0 = check_vector_operand(operand0, data, "tensor_scalar", "operand0", site)
    if (op1 is None) != (operand1 is None):
        raise LanguageError(
            "tensor-scalar-op1",
            "tensor_scalar op1 and operand1 must both be given or both None",
            site,
        )
    t1 = None
    if op1 is not None:
        t1 = _op_token(op1, "op1", site, allowed)
        operand1 = check_vector_operand(operand1, data, "tensor_scalar", "operand1", site)
        if (t0.kind == "bitvec") != (t1.kind == "bitvec"):
            raise LanguageError(
                "tensor-scalar-op-kinds",
                f"tensor_scalar ops must be both bitvec or both arithmetic: {t0!r}, {t1!r}",
                site,
            )
    eng_enum = globals()["engine"]
    eng = _pick_engine(engine, eng_enum.vector)
    _check_engine(eng, (eng_enum.vector, eng_enum.scalar, eng_enum.gpsimd), "tensor_scalar",
                  "nki.isa.tensor_scalar, NKI 0.3.0 and 0.6.0", site)  # fmt: skip
    if eng == eng_enum.gpsimd and t0.name != "rsqrt":
        _gpsimd_arith(ctx, site, t0)
    if eng == eng_enum.scalar and ctx.rules.nc_version == 3:
        pair = (t0.name, t1.name if t1 else None)
        if pair not in {("multiply", "add"), ("multiply", None), ("add", None)}:
            raise LanguageError(
                "tensor-scalar-scalar-engine",
                f"ScalarE tensor_scalar on trn2 supports only "
                f"(multiply, add), (multiply, None), (add, None); got {pair}",
                site,
            )
    operands = [x for x in (operand0, operand1) if isinstance(x, NkiTensor)]
    _check_gpsimd_psum(eng, "tensor_scalar", site, data, dst, *operands)
    bitvec = t0.kind == "bitvec"
    if bitvec:
        if not (dtypes.is_int(data.dtype) and dtypes.is_int(dst.dtype)):
            raise DtypeError(
                "bitvec-int",
                f"bitwise tensor_scalar needs integer tensors: {data.describe()}",
                site,
            )
    else:
        for x, what in ((operand0, "operand0"), (operand1, "operand1")):
            if isinstance(x, NkiTensor) and x.dtype != "float32":
                raise DtypeError(
                    "tensor-scalar-operand-fp32",
                    f"tensor_scalar {what} must be float32, got {x.describe()}",
                    site,
                )
    return t0, t1, eng


def tensor_scalar(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = engine.unknown,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.tensor_scalar (NKI 0.3.0): ``dst = (data op0 operand0) op1 operand1``; operands
    are scalars or (P,1) tensors."""
    ctx, site = _begin()
    # static checks once per kernel line, operand signatures, operator tokens and the kinds and
    # values of scalar operands (trncore.sim.checks.static_lookup)
    tensors = (dst, data, *(x for x in (operand0, operand1) if isinstance(x, NkiTensor)))
    extra = (op0, op1, engine, value_key(operand0), value_key(operand1))
    hit = memoised_checks(
        ctx, "tensor_scalar", site, tensors, extra,
        lambda: _tensor_scalar_checks(ctx, site, dst, data, op0, operand0, op1, operand1, engine),
    )  # fmt: skip
    t0, t1, eng = hit
    if operand0 is None and _is_unary(t0):
        operand0 = 0  # a unary op0's operand0 may be None, read as 0 (release_rules.check_unary_operand)
    operands = tensors[2:]  # the (P, 1) tensor operands, read by the instruction
    bitvec = t0.kind == "bitvec"
    if bitvec:
        raw = data.array().dtype
        steps = ((t0, reverse0, operand0), (t1, reverse1, operand1))
        fast = _bitvec_scalar_run(data.operand(site), dst, site, data.partitions, steps)
        if fast is not None:
            ctx.emit("tensor_scalar", eng.name, site, [data, *operands], [dst], fast, _elementwise_meta(dst))
            return
        f0 = _tensor_scalar_op(t0, reverse0, _bit_reader(operand0, raw, "operand0", site))
        f1 = _tensor_scalar_op(t1, reverse1, _bit_reader(operand1, raw, "operand1", site)) if t1 else None
    else:
        f0 = _tensor_scalar_op(t0, reverse0, scalar_reader(operand0, site))
        f1 = _tensor_scalar_op(t1, reverse1, scalar_reader(operand1, site)) if t1 else None
    x_op = data.operand(site)
    write = _writer(dst, site)
    p = data.partitions
    if not bitvec:
        # the same float32 ufuncs computed into a buffer the instruction owns (the converted copy
        # of a bfloat16/fp8 operand, or the first op's result) instead of a new temporary each
        free = data.free_size
        g0 = _inplace_op(t0, reverse0, scalar_reader(operand0, site), operand0, free)
        g1 = _inplace_op(t1, reverse1, scalar_reader(operand1, site), operand1, free) if t1 else None
        if g0 is not None and (t1 is None or g1 is not None):
            x2 = _static_rows(x_op, p) if dst.dtype in _F32_WRITES else None
            d2 = _static_rows(dst.operand(site), p) if x2 is not None and x2.dtype == F32 else None
            if d2 is not None:
                assert x2 is not None
                data2 = x2

                def run_rows() -> None:
                    # (run_owned's steps on float32 data, which has no converted copy to own,
                    # from and into the static rows: writer stores float32 by this assignment)
                    y = g0(data2, None)
                    if g1 is not None:
                        y = g1(y, y)
                    d2[...] = y

                ctx.emit(
                    "tensor_scalar", eng.name, site, [data, *operands], [dst], run_rows,
                    _elementwise_meta(dst),
                )  # fmt: skip
                return

            def run_owned() -> None:
                raw = x_op.read()
                x = read_f32(raw, p)
                y = g0(x, x if raw.dtype != F32 else None)
                if g1 is not None:
                    y = g1(y, y)
                write(y)

            ctx.emit(
                "tensor_scalar", eng.name, site, [data, *operands], [dst], run_owned,
                _elementwise_meta(dst),
            )  # fmt: skip
            return

    def run() -> None:
        x = np.asarray(x_op.read()).reshape(p, -1) if bitvec else read_f32(x_op.read(), p)
        y = f0(x)
        if f1 is not None:
            y = f1(y)
        write(y)

    ctx.emit("tensor_scalar", eng.name, site, [data, *operands], [dst], run, _elementwise_meta(dst))


def scalar_tensor_tensor(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.scalar_tensor_tensor (NKI 0.3.0): ``dst = (data op0 operand0) op1 operand1``,
    operand1 a full tile; VectorE."""
    ctx, site = _begin()
    data = check_compute_operand(data, "scalar_tensor_tensor", "data", site)
    dst = check_compute_operand(dst, "scalar_tensor_tensor", "dst", site)
    other = check_compute_operand(operand1, "scalar_tensor_tensor", "operand1", site)
    check_same_layout(data, dst, "scalar_tensor_tensor", "data and dst", site)
    check_same_layout(data, other, "scalar_tensor_tensor", "data and operand1", site)
    if data.buffer.name == "psum" and other.buffer.name == "psum":
        raise BufferError(
            "stt-two-psum", "scalar_tensor_tensor data and operand1 cannot both be in PSUM", site
        )
    arith = {k: v for k, v in BINARY.items() if v.kind != "bitvec"}
    t0 = _op_token(op0, "op0", site, arith)
    t1 = _op_token(op1, "op1", site, arith)
    operand0 = check_vector_operand(operand0, data, "scalar_tensor_tensor", "operand0", site)
    f0 = _tensor_scalar_op(t0, reverse0, scalar_reader(operand0, site))
    x_op, o_op = data.operand(site), other.operand(site)
    write = _writer(dst, site)
    p, fn1 = data.partitions, t1.fn
    extra = [operand0] if isinstance(operand0, NkiTensor) else []
    # float32 arithmetic ufuncs for both ops: computed into the converted copy of a
    # bfloat16/fp8 data operand (or the first op's result), as tensor_scalar does, instead of a
    # new temporary for each op (the same ufuncs on the same values)
    g0 = _inplace_op(t0, reverse0, scalar_reader(operand0, site), operand0, data.free_size)
    uf1 = _float_ufunc(t1)
    if g0 is not None and uf1 is not None:

        def run_owned() -> None:
            raw = x_op.read()
            x = read_f32(raw, p)
            o = read_f32(o_op.read(), p)
            y = g0(x, x if raw.dtype != F32 else None)
            y = uf1(o, y, out=y) if reverse1 else uf1(y, o, out=y)
            write(y)

        ctx.emit("scalar_tensor_tensor", "vector", site, [data, other, *extra], [dst], run_owned,
                 _elementwise_meta(dst))  # fmt: skip
        return

    def run() -> None:
        y = f0(read_f32(x_op.read(), p))
        o = read_f32(o_op.read(), p)
        write(fn1(o, y) if reverse1 else fn1(y, o))

    ctx.emit(
        "scalar_tensor_tensor",
        "vector",
        site,
        [data, other, *extra],
        [dst],
        run,
        _elementwise_meta(dst),
    )


def reciprocal(dst: Any, data: Any, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.reciprocal (NKI 0.3.0): ``1/x`` on VectorE in float32."""
    ctx, site = _begin()
    data = check_compute_operand(data, "reciprocal", "data", site)
    dst = check_compute_operand(dst, "reciprocal", "dst", site)
    check_same_layout(data, dst, "reciprocal", "data and dst", site)
    x_op, write, p = data.operand(site), _writer(dst, site), data.partitions
    fn = ACTIVATIONS["reciprocal"].fn

    def run() -> None:
        write(fn(read_f32(x_op.read(), p)))

    ctx.emit("reciprocal", "vector", site, [data], [dst], run, _elementwise_meta(dst))


def _sum_in_order(x: np.ndarray) -> np.ndarray:
    """``x.sum(axis=2)`` accumulated left to right in x's dtype. NumPy adds whole slices one after
    another when the summed axis is the outer one (pairwise only along the contiguous axis), which
    is the faster way for short rows; ``add.accumulate`` for long ones."""
    if x.shape[2] <= 2048:
        return np.add.reduce(np.ascontiguousarray(np.moveaxis(x, 2, 0)), axis=0)
    return np.add.accumulate(x, axis=2)[:, :, -1]


def tensor_reduce(
    dst: Any,
    op: Any,
    data: Any,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.tensor_reduce (NKI 0.3.0): reduce trailing contiguous free axes (never the
    partition axis) on VectorE."""
    ctx, site = _begin()
    data = check_compute_operand(data, "tensor_reduce", "data", site)
    dst = check_compute_operand(dst, "tensor_reduce", "dst", site)
    if isinstance(op, Op) and op.name == "subtract":
        raise NotImplementedError(
            "nisa.tensor_reduce(op=nl.subtract) is not emulated: the nki.isa.tensor_reduce page "
            "(NKI 0.3.0 to 0.6.0) names subtract among the arithmetic reduction operators but no "
            f"page defines what a subtract reduction computes{site_suffix(site)}"
        )
    token = _op_token(op, "op", site, {k: BINARY[k] for k in REDUCIBLE})
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(a) for a in axes))
    nd = data.ndim
    if not axes or 0 in axes or axes != tuple(range(nd - len(axes), nd)):
        raise ShapeError(
            "reduce-axes",
            f"tensor_reduce axis {axis} must be the trailing contiguous free "
            f"dims ending at dim {nd - 1} (never 0) of {data.describe()}"
            f"{from_nki_0_2.reduce_axis_hint(axes, nd)}",
            site,
        )
    kept = math.prod(data.shape[1 : nd - len(axes)])
    check_reduces_elements(data, math.prod(data.shape[nd - len(axes) :]), "tensor_reduce",
                           f"axis {axis}", site)  # fmt: skip
    if dst.partitions != data.partitions or dst.free_size != kept:
        raise ShapeError(
            "reduce-dst",
            f"tensor_reduce dst must hold {data.partitions} x {kept} elements, "
            f"got {dst.describe()}",
            site,
        )
    bitvec = token.kind == "bitvec"
    if bitvec and not dtypes.is_int(data.dtype):
        raise DtypeError("bitvec-int", f"bitwise reduction needs integers: {data.describe()}", site)
    red = REDUCIBLE[token.name]
    # On trn1 a float add accumulates left to right in float32 (np.add.reduce sums pairwise, as
    # the vendor simulator does): on a trn1 device (NKI 0.6.0) tensor_reduce(op=nl.add) over 128
    # float32 values per row gave the sequential float32 sum, bit for bit, on every row of two
    # published 4096-row runs; nki.simulate's pairwise sums differ from it by up to 8 ulp (fourth
    # batch of third-party kernels, docs/emulator.md "Numerics"). No trn2 run is public: trn2
    # keeps the simulator's pairwise sum.
    sequential = token.name == "add" and not bitvec and ctx.rules.nc_version < 3
    x_op, write, p, sign = data.operand(site), _writer(dst, site), data.partitions, F32(-1.0)

    def run() -> None:
        x = np.asarray(x_op.read()).reshape(p, kept, -1)
        if not bitvec:
            x = x.astype(F32)
        y = _sum_in_order(x) if sequential else red(x, axis=2)
        if negate and not bitvec:
            y = y * sign
        write(y)

    ctx.emit("tensor_reduce", "vector", site, [data], [dst], run, _elementwise_meta(data))


def tensor_tensor_scan(
    dst: Any,
    data0: Any,
    data1: Any,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.tensor_tensor_scan (NKI 0.3.0): ``res[:,i] = op1(op0(data0[:,i], res[:,i-1]),
    data1[:,i])`` along the free dim."""
    ctx, site = _begin()
    d0 = check_compute_operand(data0, "tensor_tensor_scan", "data0", site)
    d1 = check_compute_operand(data1, "tensor_tensor_scan", "data1", site)
    dst = check_compute_operand(dst, "tensor_tensor_scan", "dst", site)
    check_same_layout(d0, d1, "tensor_tensor_scan", "data0 and data1", site)
    check_same_layout(d0, dst, "tensor_tensor_scan", "data0 and dst", site)
    if d0.buffer.name == "psum" and d1.buffer.name == "psum":
        raise BufferError("scan-two-psum", "tensor_tensor_scan inputs cannot both be in PSUM", site)
    arith = {k: v for k, v in BINARY.items() if v.kind != "bitvec"}
    f0 = _op_token(op0, "op0", site, arith).fn
    f1 = _op_token(op1, "op1", site, arith).fn
    initial = check_vector_operand(initial, d0, "tensor_tensor_scan", "initial", site)
    init_r = scalar_reader(initial, site)
    a_op, b_op, write, p = d0.operand(site), d1.operand(site), _writer(dst, site), d0.partitions

    def run() -> None:
        a, b = read_f32(a_op.read(), p), read_f32(b_op.read(), p)
        out = np.empty_like(a)
        prev = np.broadcast_to(np.asarray(init_r(), dtype=F32).reshape(-1), (p,)).copy()
        for i in range(a.shape[1]):
            t = f0(prev, a[:, i]) if reverse0 else f0(a[:, i], prev)
            prev = f1(b[:, i], t) if reverse1 else f1(t, b[:, i])
            out[:, i] = prev
        write(out)

    extra = [initial] if isinstance(initial, NkiTensor) else []
    ctx.emit(
        "tensor_tensor_scan",
        "vector",
        site,
        [d0, d1, *extra],
        [dst],
        run,
        _elementwise_meta(dst, per_elem=2.0),
    )


# ---------------------------------------------------------------------------- selection
def affine_select(
    dst: Any,
    pattern: Any,
    channel_multiplier: int,
    on_true_tile: Any,
    on_false_value: Any,
    cmp_op: Any = None,
    offset: int = 0,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.affine_select (NKI 0.3.0): ``dst = on_true_tile where cmp_op(affine value, 0)
    else on_false_value`` (GpSimd)."""
    ctx, site = _begin()
    if not isinstance(on_true_tile, NkiTensor) and isinstance(on_false_value, NkiTensor):
        # the tile one place to the right: NKI 0.2.0's positional (..., offset, channel_multiplier, ...)
        raise from_nki_0_2.argument_order_error(
            "nisa.affine_select",
            f"on_true_tile is {on_true_tile!r} and on_false_value is a tensor", site
        )
    dst = check_compute_operand(dst, "affine_select", "dst", site, buffers=("sbuf",))
    src = check_compute_operand(
        on_true_tile, "affine_select", "on_true_tile", site, buffers=("sbuf",)
    )
    check_same_layout(src, dst, "affine_select", "on_true_tile and dst", site)
    token = _op_token(
        cmp_op if cmp_op is not None else BINARY["equal"],
        "cmp_op",
        site,
        {k: v for k, v in BINARY.items() if v.kind == "compare"},
    )
    vals = _affine_values(
        pattern, offset, channel_multiplier, dst.partitions, dst.free_size, "affine_select", site, 0
    ).astype(F32)
    keep = token.fn(vals, F32(0.0)) != 0
    false_v = F32(on_false_value)
    s_op, write, p = src.operand(site), _writer(dst, site), src.partitions

    def run() -> None:
        write(np.where(keep, read_f32(s_op.read(), p), false_v))

    ctx.emit("affine_select", "gpsimd", site, [src], [dst], run, _elementwise_meta(dst))


def select_reduce(
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.select_reduce (NKI 0.3.0): ``np.where(predicate, on_true, on_false)`` on VectorE,
    optional per-row max."""
    ctx, site = _begin()
    if type(reduce_cmd) is not _RC:
        _enum_arg(reduce_cmd, _RC, "select_reduce", "reduce_cmd")
    _select(
        ctx,
        site,
        "select_reduce",
        dst,
        predicate,
        on_true,
        on_false,
        reverse_pred,
        reduce_res,
        int(reduce_cmd),
        reduce_op,
    )


def _check_select_reduce_page(
    site: Any, pred: NkiTensor, on_true: Any, on_false: Any, reduce_res: Any
) -> None:
    """The operand rules of nki.isa.select_reduce (NKI 0.3.0 and 0.6.0, "Memory constraints",
    "Shape and data type constraints"), at the kernel's line."""
    if pred.dtype not in ("int8", "uint8", "int16", "uint16"):
        raise DtypeError("select-reduce-predicate", "select_reduce predicate must be int8, uint8, "
                         f"int16 or uint16, got {pred.describe()}", site)  # fmt: skip
    if isinstance(on_true, NkiTensor):
        if on_true.dtype in ("tfloat32", "int32", "uint32"):
            raise DtypeError("select-reduce-on-true", "select_reduce on_true can be any dtype "
                             f"except tfloat32, int32, uint32, got {on_true.describe()}", site)  # fmt: skip
        if on_true.buffer.name == "psum" and pred.buffer.name == "psum":
            raise BufferError("select-reduce-two-psum", "select_reduce on_true and predicate "
                              "cannot both be in PSUM", site)  # fmt: skip
    if isinstance(on_false, NkiTensor) and on_false.free_size != 1:
        raise ShapeError("select-reduce-on-false", "select_reduce on_false is a scalar or a "
                         f"(P, 1) vector, got {on_false.describe()}", site)  # fmt: skip
    if isinstance(reduce_res, NkiTensor):
        if reduce_res.partitions != pred.partitions or reduce_res.free_size != 1:
            raise ShapeError("select-reduce-reduce-res", "select_reduce reduce_res must be "
                             f"({pred.partitions}, 1), got {reduce_res.describe()}", site)  # fmt: skip
        if not dtypes.is_float(reduce_res.dtype):
            raise DtypeError("select-reduce-reduce-res", "select_reduce reduce_res must be a "
                             f"float dtype, got {reduce_res.describe()}", site)  # fmt: skip


def select(dst: Any, predicate: Any, on_true: Any, on_false: Any, name: str | None = None) -> None:
    """``dst = on_true where predicate else on_false`` (``select_reduce`` without the reduction).

    The instruction ``nl.where`` lowers to. Not an ``nki.isa`` name in NKI 0.3.0-0.6.0 (AWS NKI
    docs, nki.isa, which lists ``select_reduce`` only), so ``nisa`` does not expose it.
    """
    ctx, site = _begin()
    _select(ctx, site, "select", dst, predicate, on_true, on_false, False, None, 0, None)


def _select(
    ctx: Any,
    site: Any,
    name: str,
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reverse: bool,
    reduce_res: Any,
    cmd: int,
    reduce_op: Any,
) -> None:
    dst = check_compute_operand(dst, name, "dst", site)
    pred = check_compute_operand(predicate, name, "predicate", site)
    check_same_layout(pred, dst, name, "predicate and dst", site)
    if name == "select_reduce":
        _check_select_reduce_page(site, pred, on_true, on_false, reduce_res)
    reads, readers = [pred], []
    for x, what in ((on_true, "on_true"), (on_false, "on_false")):
        if isinstance(x, NkiTensor):
            check_compute_operand(x, name, what, site)
            if x.free_size == 1 and dst.free_size != 1:
                check_vector_operand(x, dst, name, what, site)
                readers.append(scalar_reader(x, site))
            else:
                check_same_layout(x, dst, name, f"{what} and dst", site)
                op_, p_ = x.operand(site), x.partitions
                readers.append(lambda op_=op_, p_=p_: read_f32(op_.read(), p_))
            reads.append(x)
        else:
            readers.append(scalar_reader(x, site))
    if reduce_op is not None:
        _op_token(reduce_op, "reduce_op", site, {"maximum": BINARY["maximum"]})
    writes = [dst]
    if reduce_res is not None:
        reduce_res = check_compute_operand(reduce_res, name, "reduce_res", site)
        writes.append(reduce_res)
    if reduce_res is not None or cmd != int(reduce_cmd.idle):
        check_reduces_elements(dst, dst.free_size, name, "the free axis", site)
    if cmd == int(reduce_cmd.load_reduce):
        raise NotImplementedError(f"nisa.{name} reduce_cmd=load_reduce is not emulated (the page "
                                  f"gives no value to load){site_suffix(site)}")  # fmt: skip
    p_op, write, p = pred.operand(site), _writer(dst, site), dst.partitions
    res_write = _writer(reduce_res, site) if reduce_res is not None else None
    t_r, f_r = readers
    # nki.isa.select_reduce (NKI 0.3.0, 0.6.0), "Accumulator behavior": the Vector Engine
    # accumulator registers (the ones range_select / tensor_scalar_reduce use): reset_reduce resets
    # them to -inf and takes this call's row maxima, reduce keeps accumulating, idle leaves them
    # (reduce_res then gets this call's row maxima); reduce_res=None keeps the result in the
    # registers for a later call (the 0.6.0 page). reset (the nki.isa.reduce_cmd page) only resets.
    from trncore.sim.isa_reduce_chain import accumulator, chain_row_max

    acc = accumulator(ctx)[:p] if cmd != int(reduce_cmd.idle) else None
    cmd_name = reduce_cmd(cmd).name

    def run() -> None:
        mask = np.asarray(p_op.read()).reshape(p, -1) != 0
        if reverse:
            mask = ~mask
        y = np.where(mask, t_r(), f_r()).astype(F32)
        write(y)
        if res_write is not None or acc is not None:
            rowmax = chain_row_max(acc, cmd_name, y.max(axis=1, keepdims=True))
            if res_write is not None:
                res_write(rowmax)

    ctx.emit(name, "vector", site, reads, writes, run, _elementwise_meta(dst))
