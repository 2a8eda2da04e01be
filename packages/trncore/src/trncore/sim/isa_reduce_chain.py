"""``nisa.tensor_scalar_reduce`` and ``nisa.tensor_scalar_cumulative``: the Vector Engine
accumulator (NKI 0.3.0 / 0.4.0 / 0.6.0).

AWS page ``nki.isa.tensor_scalar_reduce`` (NKI 0.6.0): ``dst = data op0 operand0`` and a reduction
over every free element of ``dst`` into a per-partition accumulator register of the Vector Engine.
``reduce_cmd`` resets it to the identity of ``reduce_op`` (default), continues accumulating
(``reduce``) or loads ``reduce_init`` first (``load_reduce``) — NKI 0.4.0. ``reduce_res`` receives
the accumulator (negated with ``reduce_res_negate``, which leaves the register alone); with
``reduce_res=None`` (NKI 0.6.0) nothing is written and a later call continues the chain. Under NKI
0.3.0 the call is the single-shot form (reset, ``reduce_res`` required), which is this with the
defaults. The accumulator is program state, zeroed at the start of every replay like the ScalarE
registers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import versions
from trncore.sim.alu import BINARY
from trncore.sim.checks import (
    check_compute_operand,
    check_reduces_elements,
    check_same_layout,
    check_vector_operand,
    read_f32,
    scalar_reader,
)
from trncore.sim.errors import DtypeError, ShapeError, site_suffix
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import reduce_cmd
from trncore.sim.isa_common import reduce_cmd as _ReduceCmd
from trncore.sim.isa_common import writer as _writer
from trncore.sim.release_rules import check_unary_operand, unary_alu_ops
from trncore.sim.tensor import NkiTensor

__all__ = ["ACC_KEY", "accumulator", "chain_row_max", "tensor_scalar_cumulative", "tensor_scalar_reduce"]

#: ``TraceContext.engine_state`` key of the VectorE accumulator (a (128, 1) float32 array).
ACC_KEY = "vector_acc"
_F32 = np.float32
_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
_REDUCERS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum}  # fmt: skip


def _arithmetic_ops() -> dict[str, Any]:
    """The binary "Arithmetic" operators of the nki.isa "Supported Math Operators" table (NKI 0.3.0
    to 0.6.0): add ... power and also the comparisons (``equal``, ``greater_equal``, ...) and the
    logical ops, which the table lists as arithmetic (not bitvec); a comparison gives 1.0 or 0.0."""
    return {k: v for k, v in BINARY.items() if v.kind in ("arith", "compare")}


def accumulator(ctx: Any) -> np.ndarray:
    """The Vector Engine accumulator registers of the trace ((pmax, 1) float32, zeroed on replay),
    shared by the instructions that chain through them (``tensor_scalar_reduce``,
    ``tensor_scalar_cumulative``, ``range_select``, ``select_reduce``)."""
    acc = ctx.engine_state.get(ACC_KEY)
    if acc is None:
        acc = ctx.engine_state[ACC_KEY] = np.zeros((ctx.rules.pmax, 1), dtype=_F32)
    return acc


def chain_row_max(acc: np.ndarray | None, cmd: str, rowmax: np.ndarray) -> np.ndarray:
    """The row maxima a max-chaining instruction (``range_select``, ``select_reduce``) reports:
    with the accumulator in use (``acc``, None for ``idle``), ``reset`` / ``reset_reduce``
    restart it at -inf, every command but ``reset`` folds this call's ``rowmax`` in, and the
    result is the accumulator; without it, this call's ``rowmax``."""
    if acc is None:
        return rowmax
    if cmd in ("reset", "reset_reduce"):
        acc[...] = -np.inf
    if cmd != "reset":
        acc[...] = np.maximum(acc, rowmax)
    return acc


def _reduce_cmd_name(reduce_cmd: Any, api: str) -> str:
    """The name of a ``nisa.reduce_cmd`` member (``reset_reduce``, ``reduce`` or ``load_reduce``:
    the VectorE accumulator commands both reduce-chain instructions take), else a ValueError."""
    name = reduce_cmd.name if isinstance(reduce_cmd, _ReduceCmd) else ""
    if name not in ("reset_reduce", "reduce", "load_reduce"):
        raise ValueError(
            f"nisa.{api}: reduce_cmd must be nisa.reduce_cmd.reset_reduce, reduce or load_reduce, "
            f"got {reduce_cmd!r}"
        )
    return name


def tensor_scalar_reduce(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any = None,
    reverse0: bool = False,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: str | None = None,
) -> None:
    """``dst = data op0 operand0``; the accumulator reduces ``dst``; ``reduce_res`` gets it."""
    ctx, site = _begin()
    data = check_compute_operand(data, "tensor_scalar_reduce", "data", site)
    dst = check_compute_operand(dst, "tensor_scalar_reduce", "dst", site)
    check_same_layout(data, dst, "tensor_scalar_reduce", "data and dst", site)
    check_reduces_elements(data, data.free_size, "tensor_scalar_reduce", "the free axis", site)
    p = data.partitions
    res = None
    if reduce_res is not None:
        res = check_compute_operand(reduce_res, "tensor_scalar_reduce", "reduce_res", site)
        if res.partitions != p or res.free_size != 1:
            raise ShapeError("reduce-res-shape", f"reduce_res must be ({p}, 1), got "
                             f"{res.describe()}", site)  # fmt: skip
    # op0 is an arithmetic ALU op (the ALU-operator table of the nki.isa reference): the binary
    # ones and the unary ones of the target release (abs, rsqrt, reciprocal; square and relu
    # from NKI 0.4.0), whose operand0 is None or 0 (release_rules.check_unary_operand).
    unary_ops = unary_alu_ops()
    t0 = _op_token(op0, "op0", site, {**_arithmetic_ops(), **unary_ops})
    unary = t0.name in unary_ops
    if unary:
        operand0 = check_unary_operand(operand0, "tensor_scalar_reduce", site)
    if reduce_op is BINARY["subtract"] and not versions.at_least("0.4.0"):
        # the NKI 0.3.0 page lists nl.subtract as a reduce_op; no page says what a subtract
        # reduction accumulates, and the 0.4.0-0.6.0 pages drop it (then an op-token error)
        raise NotImplementedError(
            "nisa.tensor_scalar_reduce(reduce_op=nl.subtract): listed by the NKI 0.3.0 page, "
            f"but no AWS page defines the reduction (dropped from NKI 0.4.0){site_suffix(site)}"
        )
    tr = _op_token(reduce_op, "reduce_op", site, {k: BINARY[k] for k in _REDUCERS})
    cmd_name = _reduce_cmd_name(reduce_cmd, "tensor_scalar_reduce")
    if (reduce_init is not None) != (cmd_name == "load_reduce"):
        raise ValueError(
            "nisa.tensor_scalar_reduce: reduce_init is given exactly when reduce_cmd=load_reduce"
        )
    init_read = None
    extra: list[NkiTensor] = []
    if reduce_init is not None:
        reduce_init = check_vector_operand(reduce_init, data, "tensor_scalar_reduce",
                                           "reduce_init", site)  # fmt: skip
        init_read = scalar_reader(reduce_init, site)
        if isinstance(reduce_init, NkiTensor):
            extra.append(reduce_init)
    operand0 = check_vector_operand(operand0, data, "tensor_scalar_reduce", "operand0", site)
    if isinstance(operand0, NkiTensor):
        extra.append(operand0)
    o_read, red, identity = scalar_reader(operand0, site), _REDUCERS[tr.name], _IDENTITY[tr.name]
    op_fn = t0.fn
    if unary:  # a unary op ignores operand0
        fn = lambda x, _o: op_fn(x)  # noqa: E731
    elif reverse0:  # operand0 is op0's lhs (nki.isa.tensor_scalar_reduce, NKI 0.3.0 to 0.6.0)
        fn = lambda x, o: op_fn(o, x)  # noqa: E731
    else:
        fn = op_fn
    x_op, write = data.operand(site), _writer(dst, site)
    res_write = _writer(res, site) if res is not None else None
    acc = accumulator(ctx)[:p]
    sign = _F32(-1.0 if reduce_res_negate else 1.0)

    def run() -> None:
        y = fn(read_f32(x_op.read(), p), o_read())
        write(y)
        if cmd_name == "reset_reduce":
            acc[...] = identity
        elif init_read is not None:
            acc[...] = np.broadcast_to(np.asarray(init_read(), dtype=_F32), acc.shape)
        acc[...] = red(acc, red.reduce(np.asarray(y, dtype=_F32), axis=1, keepdims=True))
        if res_write is not None:
            res_write(acc * sign)

    writes = [dst] + ([res] if res is not None else [])
    ctx.emit("tensor_scalar_reduce", "vector", site, [data, *extra], writes, run,
             _elementwise_meta(dst))  # fmt: skip


#: Input/output dtypes of tensor_scalar_cumulative (its page: "BF16, FP16, FP32, FP8, UINT8,
#: UINT16, INT8, INT16"; "INT32/UINT32 are not supported as input/output dtypes (ISA limitation)").
_CUMULATIVE_DTYPES = {"bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2",
                      "float8_e4m3fn", "uint8", "uint16", "int8", "int16"}  # fmt: skip
_CUMULATIVE_OPS = ("add", "subtract", "multiply", "maximum", "minimum")


def tensor_scalar_cumulative(
    dst: Any,
    src: Any,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    name: str | None = None,
) -> None:
    """``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` over each partition's free elements.

    AWS page ``nki.isa.tensor_scalar_cumulative`` (NKI 0.3.0; same in 0.6.0): ``reduce_cmd``
    resets ``reg`` to ``op1``'s identity (0 for add/subtract, 1 for multiply, -inf/+inf for
    max/min), continues (``reduce``) or loads ``imm1`` (``load_reduce``); ``op0`` is an arithmetic
    op, ``op1`` one of add, subtract, multiply, max, min; ``imm0``/``imm1`` are numbers or fp32
    ``(P, 1)`` tiles; int32/uint32 tiles are refused. The 0.6.0 page says the register is the one
    ``tensor_scalar_reduce`` and the other VectorE accumulation instructions share, so it is this
    module's accumulator, left holding each partition's last value.
    """
    ctx, site = _begin()
    src = check_compute_operand(src, "tensor_scalar_cumulative", "src", site)
    dst = check_compute_operand(dst, "tensor_scalar_cumulative", "dst", site)
    check_same_layout(src, dst, "tensor_scalar_cumulative", "src and dst", site)
    for t, what in ((src, "src"), (dst, "dst")):
        if t.dtype not in _CUMULATIVE_DTYPES:
            raise DtypeError("cumulative-dtype", f"tensor_scalar_cumulative {what} dtype "
                             f"{t.dtype} is not one of {sorted(_CUMULATIVE_DTYPES)} "
                             f"({t.describe()})", site)  # fmt: skip
    arith = _arithmetic_ops()
    t0 = _op_token(op0, "op0", site, arith)
    t1 = _op_token(op1, "op1", site, {k: BINARY[k] for k in _CUMULATIVE_OPS})
    cmd_name = _reduce_cmd_name(reduce_cmd, "tensor_scalar_cumulative")
    if cmd_name == "load_reduce" and imm1 is None:
        raise ValueError("nisa.tensor_scalar_cumulative: reduce_cmd=load_reduce needs imm1")
    extra: list[NkiTensor] = []
    readers: list[Any] = []
    for value, what in ((imm0, "imm0"), (imm1, "imm1")):
        if value is None:
            readers.append(None)
            continue
        value = check_vector_operand(value, src, "tensor_scalar_cumulative", what, site)
        if isinstance(value, NkiTensor):
            if value.dtype != "float32":
                raise DtypeError("cumulative-imm-dtype", f"tensor_scalar_cumulative {what} must "
                                 f"be float32, got {value.describe()}", site)  # fmt: skip
            extra.append(value)
        readers.append(scalar_reader(value, site))
    imm0_read, imm1_read = readers
    assert imm0_read is not None
    p = src.partitions
    x_op, write = src.operand(site), _writer(dst, site)
    acc = accumulator(ctx)[:p]
    fn0, name1 = t0.fn, t1.name
    identity = 0.0 if name1 == "subtract" else _IDENTITY[name1]

    def run() -> None:
        y = np.asarray(fn0(read_f32(x_op.read(), p), imm0_read()), dtype=_F32)
        y = np.broadcast_to(y, (p, y.shape[1] if y.ndim == 2 else 1))
        if cmd_name == "reset_reduce":
            acc[...] = identity
        elif cmd_name == "load_reduce":
            assert imm1_read is not None
            acc[...] = np.broadcast_to(np.asarray(imm1_read(), dtype=_F32), acc.shape)
        out = np.empty_like(y)
        if name1 == "subtract":  # reg = y[i] - reg, as the page's pseudocode writes op1(y, reg)
            reg = acc[:, 0].copy()
            for i in range(y.shape[1]):
                reg = y[:, i] - reg
                out[:, i] = reg
        else:
            red = _REDUCERS[name1]
            out[...] = red.accumulate(np.concatenate([acc, y], axis=1), axis=1)[:, 1:]
        if out.shape[1]:
            acc[...] = out[:, -1:]
        write(out)

    ctx.emit("tensor_scalar_cumulative", "vector", site, [src, *extra], [dst], run,
             _elementwise_meta(dst))  # fmt: skip
