"""``nisa.range_select`` on the Vector Engine (nki.isa API reference, NKI 0.3.0 / SDK 2.29).

The page's NumPy equivalent is what runs: the free index plus ``range_start`` (in fp32) is
compared with the per-partition ``bound0``/``bound1``; where both comparisons hold ``dst`` takes
``on_true_tile``, elsewhere ``on_false_value``; ``reduce_res`` gets the row maximum. Checked at the
kernel line: NeuronCore-v3 or newer; comparison operators among equal/less/less_equal/greater/
greater_equal; fp ``on_true_tile``, fp32 bounds with one element per partition;
``on_false_value`` FP32_MIN ("due to hardware constraints"); ``reduce_op`` maximum; a
compile-time int ``range_start``.

``reduce_cmd`` drives the Vector Engine accumulator registers (the ``nki.isa.reduce_cmd`` page,
NKI 0.3.0), the one register file ``tensor_scalar_reduce`` / ``tensor_scalar_cumulative`` use
(:data:`trncore.sim.isa_reduce_chain.ACC_KEY`): ``reset_reduce`` (the default) resets them to the
maximum's initial state (-inf) and takes this instruction's row maxima, ``reduce`` keeps
accumulating into what earlier instructions left, ``reset`` only resets, ``idle`` leaves them
alone (``reduce_res`` then gets this instruction's row maxima, as before). ``reduce_res`` receives
the accumulator; without it the result stays in the registers for a later call (the 0.6.0 page:
"only the final call needs to pass a tile"). ``load_reduce`` is not emulated
(NotImplementedError): it loads "a value" into the registers, and ``range_select`` has no
parameter that gives one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.alu import BINARY
from trncore.sim.checks import check_compute_operand, check_same_layout, memoised_checks, read_f32
from trncore.sim.errors import DtypeError, ShapeError, TargetError, site_suffix
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import enum_arg, float32_rows, reduce_cmd
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import reduce_cmd as _ReduceCmd
from trncore.sim.isa_common import writer as _writer
from trncore.sim.isa_reduce_chain import accumulator, chain_row_max
from trncore.sim.tensor import NkiTensor

__all__ = ["range_select"]

_FP32_MIN = float(np.finfo(np.float32).min)
_COMPARE = {k: BINARY[k] for k in ("equal", "less", "less_equal", "greater", "greater_equal")}
#: the comparisons as NumPy's boolean functions (the tokens' own results are 1.0/0.0 in fp32,
#: which the mask would only turn back into booleans)
_COMPARE_BOOL = {
    "equal": np.equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal,
}  # fmt: skip


def range_select(
    dst: Any,
    on_true_tile: Any,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Any,
    bound1: Any,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: Any = None,
    reduce_op: Any = None,
    range_start: Any = 0,
    on_false_value: Any = _FP32_MIN,
    name: str | None = None,
) -> None:
    """``dst = where(op0(idx, bound0) & op1(idx, bound1), on_true_tile, FP32_MIN)``, row max."""
    ctx, site = _begin()
    # the static checks once per kernel line and signature (trncore.sim.checks.static_lookup):
    # the operands' static signatures (a non-tensor or a dynamic one runs them on every call)
    # and every other argument the checks read, each by type and value (True is not 1, and
    # reduce_cmd.reset is not 1); they return the operators and the command, never a tensor
    operands = (dst, on_true_tile, bound0, bound1) + (() if reduce_res is None else (reduce_res,))
    extra = (type(comp_op0), comp_op0, type(comp_op1), comp_op1, type(reduce_cmd), reduce_cmd,
             reduce_res is None, type(reduce_op), reduce_op, type(range_start), range_start,
             type(on_false_value), on_false_value)  # fmt: skip
    op0, op1, cmd = memoised_checks(
        ctx, "range_select", site, operands, extra,
        lambda: _checks(ctx, site, dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                        reduce_cmd, reduce_res, reduce_op, range_start, on_false_value),
    )  # fmt: skip
    src = on_true_tile
    bounds = [bound0, bound1]
    writes = [dst]
    res_write = None
    if reduce_res is not None:
        res_write = _writer(reduce_res, site)
        writes.append(reduce_res)
    p, f = src.partitions, src.free_size
    s_op, b0_op, b1_op = src.operand(site), bounds[0].operand(site), bounds[1].operand(site)
    write = _writer(dst, site)
    index = (int(range_start) + np.arange(f)).astype(np.float32)[None, :]
    fill = np.float32(_FP32_MIN)

    acc = accumulator(ctx)[:p] if cmd != "idle" else None
    cmp0, cmp1 = _COMPARE_BOOL[op0.name], _COMPARE_BOOL[op1.name]

    def run() -> None:
        x = read_f32(s_op.read(), p)
        b0 = read_f32(b0_op.read(), p)
        b1 = read_f32(b1_op.read(), p)
        mask = cmp0(index, b0)
        mask &= cmp1(index, b1)
        out = np.where(mask, x, fill)  # float32: x and fill are
        write(out)
        rowmax = chain_row_max(acc, cmd, out.max(axis=1, keepdims=True))
        if res_write is not None:
            res_write(rowmax)

    d_rows = float32_rows(dst.operand(site), p)
    if d_rows is not None:
        # a float32 dst takes the selection straight: the source copied in, the fill written
        # where the mask is false (np.where's temporary and the copy of it cost more; the same
        # values; NumPy's copy handles a dst overlapping the source)
        def run_into_dst() -> None:
            x = read_f32(s_op.read(), p)
            b0 = read_f32(b0_op.read(), p)
            b1 = read_f32(b1_op.read(), p)
            mask = cmp0(index, b0)
            mask &= cmp1(index, b1)
            np.logical_not(mask, out=mask)
            np.copyto(d_rows, x)
            np.copyto(d_rows, fill, where=mask)
            rowmax = chain_row_max(acc, cmd, d_rows.max(axis=1, keepdims=True))
            if res_write is not None:
                res_write(rowmax)

        run = run_into_dst

    reads = [src, *bounds]
    ctx.emit("range_select", "vector", site, reads, writes, run, _elementwise_meta(dst))


def _checks(
    ctx: Any, site: Any, dst: Any, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any,
    bound1: Any, reduce_cmd: Any, reduce_res: Any, reduce_op: Any, range_start: Any,
    on_false_value: Any,
) -> tuple[Any, Any, str]:  # fmt: skip
    """range_select's static checks at the kernel's line: the comparison operators and the
    reduce command's name when they pass (the tensors checked are the caller's own)."""
    if ctx.rules.nc_version < 3:
        raise TargetError("range-select-target", "nisa.range_select needs NeuronCore-v3 (trn2)", site)
    dst = check_compute_operand(dst, "range_select", "dst", site)
    src = check_compute_operand(on_true_tile, "range_select", "on_true_tile", site)
    check_same_layout(src, dst, "range_select", "on_true_tile and dst", site)
    if not dtypes.is_float(src.dtype):
        raise DtypeError("range-select-dtype", f"range_select on_true_tile must be a float tile, "
                         f"got {src.describe()}", site)  # fmt: skip
    bounds = []
    for b, what in ((bound0, "bound0"), (bound1, "bound1")):
        if not isinstance(b, NkiTensor):
            # nki.isa.range_select (NKI 0.3.0-0.6.0): "bound0: tile with one element per
            # partition" (the signature types it NkiTensor; select_reduce's on_false, by contrast,
            # is "float | NkiTensor"). A public DeepSeek indexer passes bound0=0.0.
            raise ShapeError("range-select-bound", f"range_select {what} must be a float32 tile "
                             f"with one element on each of {src.partitions} partitions, not a "
                             f"{type(b).__name__} ({b!r}); memset a ({src.partitions}, 1) tile",
                             site)  # fmt: skip
        b = check_compute_operand(b, "range_select", what, site)
        if b.partitions != src.partitions or b.free_size != 1:
            raise ShapeError("range-select-bound", f"range_select {what} must be a float32 tile "
                             f"with one element on each of {src.partitions} partitions, got "
                             f"{b.describe()}", site)  # fmt: skip
        if b.dtype != "float32":  # a dtype rule (nki.isa.range_select: "bound0/bound1 must be FP32")
            raise DtypeError("range-select-bound-dtype", f"range_select {what} must be float32, "
                             f"got {b.describe()}", site)  # fmt: skip
        bounds.append(b)
    op0 = _op_token(comp_op0, "comp_op0", site, _COMPARE)
    op1 = _op_token(comp_op1, "comp_op1", site, _COMPARE)
    if reduce_op is not None:
        _op_token(reduce_op, "reduce_op", site, {"maximum": BINARY["maximum"]})
    if np.float32(on_false_value) != np.float32(_FP32_MIN):
        raise DtypeError("range-select-false-value", "range_select on_false_value must be FP32_MIN "
                         f"(-3.4028235e+38) on the hardware, got {on_false_value!r}", site)  # fmt: skip
    if isinstance(range_start, bool) or not isinstance(range_start, (int, np.integer)):
        raise TypeError("range_select: range_start must be a compile-time int, got "
                        f"{range_start!r}{site_suffix(site)}")
    # as every enum parameter (docs/emulator.md, Readings chosen): a raw integer that is a
    # member's value runs as that member, warned at the line; anything else is enum-member
    cmd = enum_arg(reduce_cmd, _ReduceCmd, "range_select", "reduce_cmd").name
    if cmd == "load_reduce":
        raise NotImplementedError("nisa.range_select reduce_cmd=load_reduce is not emulated (the "
                                  f"page gives no value to load){site_suffix(site)}")  # fmt: skip
    if reduce_res is not None:
        reduce_res = check_compute_operand(reduce_res, "range_select", "reduce_res", site)
        if reduce_res.partitions != src.partitions or reduce_res.free_size != 1:
            raise ShapeError("range-select-reduce-res", "range_select reduce_res must hold one "
                             f"element per partition, got {reduce_res.describe()}", site)  # fmt: skip
    return op0, op1, cmd
