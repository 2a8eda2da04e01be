"""Scalar Engine instructions: ``activation``, ``activation_reduce`` (AWS NKI docs, nki.isa.activation,
nki.isa.activation_reduce (NKI 0.3.0))."""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim.alu import (
    ACTIVATIONS,
    BINARY,
    DOCUMENTED_ACTIVATIONS,
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
    DtypeError,
    LanguageError,
    ShapeError,
    TargetError,
    UninitializedReadError,
    site_suffix,
    warn_at,
    warn_unless_strict,
)
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import enum_arg as _enum_arg
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import reduce_cmd
from trncore.sim.isa_common import writer as _writer
from trncore.sim.tensor import NkiTensor

_RC = reduce_cmd  # (the parameter of the same name shadows the class)


def _scalar_regs(ctx: Any) -> np.ndarray:
    regs = ctx.engine_state.get("scalar_regs")
    if regs is None:
        regs = ctx.engine_state["scalar_regs"] = np.zeros((128, 1), dtype=F32)
    return regs


def _check_regs_read(ctx: Any, site: Any, name: str, cmd: int, reduce_res: Any) -> None:
    """A ``reduce_res`` read-out with ``reduce_cmd=idle`` before any instruction of the trace set
    the Scalar Engine's ``reduce_regs``: nki.isa.activation's pseudo-code (NKI 0.3.0-0.6.0) adds
    this call's reduction only under ``reduce`` / ``reset_reduce`` and then copies ``reduce_regs``
    into ``reduce_res``, so with ``idle`` the kernel reads registers nothing wrote (a third-party
    router kernel divided by that read-out, expecting this call's row sums). Warned at the
    kernel's line; an ``UninitializedReadError`` in strict mode, as unwritten memory is."""
    state = ctx.engine_state
    if cmd != 0:
        state["scalar_regs_set"] = True
        return
    if reduce_res is None or state.get("scalar_regs_set"):
        return
    message = (
        f"{name}(reduce_res=...) with reduce_cmd=idle reads the Scalar Engine's reduce registers, "
        "which no instruction of this kernel has set: idle does not add this call's reduction "
        "(nki.isa.activation pseudo-code, NKI 0.3.0-0.6.0); pass "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce or use nisa.activation_reduce"
    )
    warn_unless_strict(ctx.strict, UninitializedReadError, "scalar-regs-unset", message, site,
                       stacklevel=4)


def activation(
    dst: Any,
    op: Any,
    data: Any,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.activation (NKI 0.3.0): ``dst = op(data * scale + bias)`` on ScalarE with the
    optional row-sum registers."""
    ctx, site = _begin()
    if type(reduce_cmd) is not _RC:
        _enum_arg(reduce_cmd, _RC, "activation", "reduce_cmd")
    _activation(
        ctx, site, "activation", dst, op, data, bias, scale, reduce_op, reduce_res, int(reduce_cmd)
    )


def activation_reduce(
    dst: Any,
    op: Any,
    data: Any,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.activation_reduce (NKI 0.3.0): ``activation`` with ``reduce_cmd=reset_reduce``
    over all free axes."""
    ctx, site = _begin()
    # reduce_res=None (NKI 0.6.0 page: "Pass None to keep the reduction result in the Scalar
    # Engine's internal accumulator") is gated to 0.6.0 by the release table (trncore.sim.versions)
    _activation(
        ctx, site, "activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res, 3
    )


def _activation_checks(
    ctx: Any, site: Any, name: str, dst: Any, op: Any, data: Any, bias: Any, scale: Any,
    reduce_op: Any, reduce_res: Any, cmd: int,
) -> Any:
    """activation's static checks; the activation's token when they pass."""
    data = check_compute_operand(data, name, "data", site)
    dst = check_compute_operand(dst, name, "dst", site)
    check_same_layout(data, dst, name, "data and dst", site)
    token = _op_token(op, "op", site, {k: ACTIVATIONS[k] for k in DOCUMENTED_ACTIVATIONS})
    p = data.partitions
    if bias is not None:
        if isinstance(bias, NkiTensor):
            check_compute_operand(bias, name, "bias", site)
            if bias.partitions != p or bias.free_size != 1:
                raise ShapeError(
                    "activation-bias-shape",
                    f"{name} bias shape ({bias.partitions}x"
                    f"{bias.free_size}) must be {p}x1: {bias.describe()}",
                    site,
                )
            if bias.dtype == "tfloat32":
                raise DtypeError("activation-bias-dtype", "bias cannot be tfloat32", site)
        elif not ctx.rules.scalar_bias:
            raise TargetError(
                "activation-scalar-bias",
                f"{name} bias must be a (P,1) tensor on "
                f"{ctx.target} (scalar bias needs NeuronCore-v3)",
                site,
            )
        else:
            check_vector_operand(bias, data, name, "bias", site)
        if token.name == "reciprocal" and ctx.rules.nc_version == 2:
            raise TargetError(
                "activation-reciprocal-bias",
                "activation(op=nl.reciprocal) does not support bias on NeuronCore-v2",
                site,
            )
    scale = check_vector_operand(scale, data, name, "scale", site)
    if isinstance(scale, NkiTensor) and scale.dtype != "float32":
        # nki.isa.activation (NKI 0.3.0 and 0.6.0): "The scale parameter must have a float32
        # data type" (a [N, 1] vector or a compile-time constant)
        raise DtypeError(
            "activation-scale-dtype",
            f"{name} scale must be float32, got {scale.describe()}",
            site,
        )
    if reduce_op is not None:
        _op_token(reduce_op, "reduce_op", site, {"add": BINARY["add"]})  # activation_reduce: nl.add only
    if reduce_res is not None:
        reduce_res = check_compute_operand(reduce_res, name, "reduce_res", site)
        if reduce_res.partitions != p or reduce_res.free_size != 1:
            raise ShapeError(
                "activation-reduce-shape",
                f"{name} reduce_res must be ({p}, 1), got {reduce_res.describe()}",
                site,
            )
    if cmd == 4:
        raise NotImplementedError(
            "nisa.activation reduce_cmd=load_reduce is not emulated: the nki.isa.activation page "
            "(NKI 0.3.0 to 0.6.0) defines idle, reset, reduce and reset_reduce only, and takes no "
            f"value to load{site_suffix(site)}"
        )
    if cmd in (2, 3) and reduce_op is None:
        raise LanguageError(
            "activation-reduce-op", f"{name} with reduce_cmd needs reduce_op=nl.add", site
        )
    if cmd:  # any reduce command, reset too: TraceContext.emit skips an all-empty instruction
        check_reduces_elements(data, data.free_size, name, "the free axis", site)
    return token


def _activation(
    ctx: Any,
    site: Any,
    name: str,
    dst: Any,
    op: Any,
    data: Any,
    bias: Any,
    scale: Any,
    reduce_op: Any,
    reduce_res: Any,
    cmd: int,
) -> None:
    # static checks once per kernel line, operand signatures, tokens and the kinds and values of
    # scalar bias / scale (trncore.sim.checks.static_lookup); the accumulator registers are not
    tensors = (data, dst, *(x for x in (bias, scale, reduce_res) if isinstance(x, NkiTensor)))
    extra = (op, value_key(bias), value_key(scale), reduce_op, value_key(reduce_res), cmd)
    token = memoised_checks(
        ctx, name, site, tensors, extra,
        lambda: _activation_checks(ctx, site, name, dst, op, data, bias, scale, reduce_op, reduce_res, cmd),
    )  # fmt: skip
    p = data.partitions
    reads = [data, *(x for x in (bias, scale) if isinstance(x, NkiTensor))]
    writes = [dst] if reduce_res is None else [dst, reduce_res]
    regs = _scalar_regs(ctx)
    _check_regs_read(ctx, site, name, cmd, reduce_res)
    fn = token.fn
    sin_site = site if token.name == "sin" else None
    # a one-ufunc activation (exp, tanh, ...) computes into x, which is always the
    # instruction's own buffer by then (the converted copy or the scaled product): the same
    # float32 loop as ``fn`` without a new temporary
    uf = token.ufunc
    bias_r = scalar_reader(bias, site) if bias is not None else None
    scale_r = scalar_reader(scale, site)
    x_op = data.operand(site)
    write = _writer(dst, site)
    res_write = _writer(reduce_res, site) if reduce_res is not None else None

    # a constant scale of 1.0 is left out where an arithmetic step follows (the bias or a
    # one-ufunc function): x * 1.0 is x, bit for bit, for every number (-0.0 and subnormals
    # included), and a signalling NaN that the product would quiet is quieted by that step
    unit_scale = isinstance(scale, (int, float, np.number)) and F32(scale) == F32(1.0)
    skip_scale = unit_scale and (bias_r is not None or uf is not None)

    def run() -> None:
        raw = x_op.read()
        x = read_f32(raw, p)
        # the same float32 operations, in place where x is already a fresh copy (a converted
        # bfloat16/fp8 operand); a float32 operand is the tile itself and is not written
        own = raw.dtype != F32
        if not skip_scale:
            x = np.multiply(x, scale_r(), out=x if own else None)
            own = True
        if bias_r is not None:
            x = np.add(x, bias_r(), out=x if own else None)
            own = True
        if sin_site is not None:
            _warn_sin_out_of_range(sin_site, x)
        if uf is not None:
            y = uf(x, out=x if own else None)
        else:
            y = fn(x)
        write(y)
        if cmd == 1:
            regs[:p] = 0.0
        elif cmd == 2:
            regs[:p] += y.sum(axis=1, dtype=F32, keepdims=True)
        elif cmd == 3:
            regs[:p] = y.sum(axis=1, dtype=F32, keepdims=True)
        if res_write is not None:
            res_write(regs[:p].copy())

    ctx.emit(name, "scalar", site, reads, writes, run, _elementwise_meta(dst))


#: The Scalar Engine's Valid Input Range for ``sin`` ([-PI, PI], "Supported Activation Functions
#: for NKI ISA", NKI 0.3.0 and 0.6.0), with float32 pi and a rounding margin.
_SIN_LIMIT = float(np.float32(np.pi)) * (1.0 + 2.0**-20)


def _warn_sin_out_of_range(site: Any, x: np.ndarray) -> None:
    """Warn at the kernel's line when ``activation(op=nl.sin)`` reads an argument outside [-PI, PI].

    The 0.6.0 shared page: the Scalar Engine does no range reduction for ``sin`` and extrapolates
    its fitting polynomial outside the range (``sin(9.0)`` returns ~27.65 on hardware and in
    ``nki.simulate``). The polynomial is not published, so the emulator computes ``sin`` exactly
    and says where hardware would not: a public vocoder kernel reports the divergence measured on
    a device (NKI 0.5.0) and range-reduces first; without that step its numbers here would match
    NumPy and not the device. ``nl.sin`` range-reduces (the same page) and is not warned."""
    if x.size and float(np.nanmax(np.abs(x), initial=0.0)) > _SIN_LIMIT:
        message = (
            "activation(op=nl.sin) reads arguments outside [-pi, pi], the Scalar Engine's Valid "
            "Input Range (Supported Activation Functions for NKI ISA, NKI 0.3.0-0.6.0): hardware "
            "extrapolates its polynomial there (sin(9.0) ~ 27.65 per the page) while the emulator "
            "computes sin exactly; range-reduce the argument first or use nl.sin"
        )
        warn_at(message, site, stacklevel=2)


def exponential(*args: Any, **kwargs: Any) -> None:
    """AWS NKI docs, nki.isa.exponential (NKI 0.3.0): NeuronCore-v4 (trn3) only; the emulated targets do not
    have it."""
    ctx, site = _begin()
    raise TargetError(
        "exponential-target",
        f"nisa.exponential is NeuronCore-v4 (trn3) only; target is {ctx.target}",
        site,
    )
