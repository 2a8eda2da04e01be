"""The experimental ``nl.*`` compute wrappers of NKI 0.3.0 (AWS NKI docs, nki.language (NKI 0.3.0)), lowered
onto ``nki.isa``.

Each wrapper allocates its result tile (SBUF unless stated) and issues the ISA instructions the
real wrapper lowers to, so the same checks and costs apply. The Known Issues of the targeted
release (``nl.divide``, tile broadcasting, ``nl.matmul`` without ``transpose_x=True``, ...) are
applied through :mod:`trncore.sim.known_issues`; reductions take trailing free axes only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trncore.sim import dtypes, hooks, isa_vector, known_issues, versions
from trncore.sim import isa as nisa
from trncore.sim.alu import ACTIVATIONS, BINARY, DOCUMENTED_ACTIVATIONS, Op
from trncore.sim.checks import F32, as_tensor, check_buffer, check_compute_operand
from trncore.sim.context import current, pins_site, user_site
from trncore.sim.creation import allocate
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    LanguageError,
    ShapeError,
    site_suffix,
    warn_unless_strict,
)
from trncore.sim.isa_tensor_engine import WIDE_MATMUL_DTYPES
from trncore.sim.tensor import PSUM, SBUF, NkiTensor

__all__ = [
    "all",
    "broadcast_to",
    "dropout",
    "expand_dims",
    "fmod",
    "gather_flattened",
    "load",
    "load_transpose2d",
    "logical_not",
    "matmul",
    "max",
    "mean",
    "min",
    "mod",
    "prod",
    "rms_norm",
    "softmax",
    "store",
    "sum",
    "transpose",
    "var",
    "where",
]


def _new(shape: Any, dtype: str, buffer: Any = SBUF) -> NkiTensor:
    """A new uninitialized result tile, as ``nl.ndarray(shape, dtype, buffer=buffer)``."""
    return allocate(tuple(shape), dtype, buffer, "", "sentinel")


def _promote(a: str, b: str) -> str:
    """NKI type promotion (AWS NKI API Common Fields, the Beta 1 table) for two tile dtypes."""
    if a == b:
        return a
    fa, fb = dtypes.is_float(a), dtypes.is_float(b)
    if fa != fb:
        return a if fa else b
    if fa:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        if a.startswith("float8") and b.startswith("float8"):
            return "bfloat16"
        return a if dtypes.itemsize(a) >= dtypes.itemsize(b) else b
    if {a, b} == {"int32", "uint32"}:
        return "float32"
    if dtypes.itemsize(a) == dtypes.itemsize(b):
        return {1: "int16", 2: "int32", 4: "int32"}[dtypes.itemsize(a)]
    return a if dtypes.itemsize(a) > dtypes.itemsize(b) else b


def _scalar_dtype(tile: str, scalar: Any) -> str:
    if isinstance(scalar, float) and not dtypes.is_float(tile):
        return "float32"
    return tile


# ---------------------------------------------------------------- memory
@pins_site
def load(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """HBM -> a new SBUF tile (``dma_copy``)."""
    out = _new(src.shape, dtypes.dtype_name(dtype) if dtype else src.dtype)
    nisa.dma_copy(dst=out, src=src)
    return out


@pins_site
def store(dst: NkiTensor, value: NkiTensor) -> None:
    """SBUF -> HBM (``dma_copy``); a PSUM tile is a known issue (0.3.0), then a DMA rule."""
    # nki.language.store (NKI 0.3.0-0.6.0): value is "an SBUF tile that contains the values to
    # store"; a number (a public solver's `nl.store(D[p, q], 0.0)`) is named as store's, not as
    # the dma_copy it lowers to
    as_tensor(value, "nl.store", "value (an SBUF tile; fill one with nl.full to store a constant)",
              user_site())  # fmt: skip
    if value.buffer is PSUM:
        known_issues.check("nl-store-psum")
    nisa.dma_copy(dst=dst, src=value)


def load_transpose2d(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """A 2-D HBM tensor ``(a, b)`` -> SBUF tile ``(b, a)`` through a transposing DMA."""
    ctx, site = current(), user_site()
    if src.ndim != 2 or not src.buffer.is_hbm:
        raise LanguageError(
            "load-transpose2d",
            f"load_transpose2d needs a 2-D HBM tensor, got {src.describe()} (AWS NKI docs, "
            "nki.language.load_transpose2d, NKI 0.3.0 and 0.6.0: loads from HBM and "
            "'2D-transpose[s] the data'; index or reshape a higher-rank view down to 2-D)",
            site,
        )
    name = dtypes.dtype_name(dtype) if dtype else src.dtype
    out = _new((src.shape[1], src.shape[0]), name)
    s_op, d_arr = src.operand(site), out.array()

    def run() -> None:
        d_arr[...] = dtypes.cast(np.asarray(s_op.read(), dtype=F32).T, name)

    meta = {"bytes": src.size * dtypes.itemsize(src.dtype), "src": src.buffer.name, "dst": "sbuf"}
    ctx.emit("load_transpose2d", "dma", site, [src], [out], run, meta)
    return out


@pins_site
def copy(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """``nl.copy``: as the targeted release's hardware copies (known issues ``nl-copy-*``).

    Up to 0.5.0 a new tile in ``x``'s buffer through ``activation(op=nl.copy)`` (the Scalar
    Engine's float32 path, lossy for large integers); from 0.6.0 the stable form
    (:func:`_stable_copy`: a VectorE copy onto SBUF, bit-exact).
    """
    if not known_issues.listed("nl-copy-fp32"):
        return _stable_copy(x, dtype)
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype, x.buffer)
    nisa.activation(dst=out, op=ACTIVATIONS["copy"], data=x)
    return out


# ---------------------------------------------------------------- TensorE
def _stable_copy(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """``nl.copy`` of NKI 0.6.0 (page ``nki.language.copy``): a new SBUF tile written by a VectorE
    ``tensor_copy``, bit-exact when the dtypes match, from an SBUF or PSUM tile.

    Earlier releases keep the experimental form (:func:`copy`): ScalarE ``activation(copy)``
    through float32 into a tile in ``x``'s buffer (their known issues: lossy for integers above
    2^24, no cross-buffer copy).
    """
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype, SBUF)
    nisa.tensor_copy(dst=out, src=x, engine=nisa.engine.vector)
    return out


def _warn_gen2_narrow_matmul(x: NkiTensor, y: NkiTensor) -> None:
    """On NeuronCore-v2 (trn1), warn at the ``nl.matmul`` line when neither operand is fp32/tf32
    (an error in strict mode, ``nl-matmul-dst-gen2``).

    No AWS page gives ``nl.matmul``'s PSUM result dtype (``nki.language.matmul``, NKI 0.3.0-0.6.0:
    "x @ y", no dtype parameter); the emulator writes float32. A public kernel's notes report
    the NKI 0.6.0 compiler on Inf2 taking the operands' dtype for it and refusing bf16 operands
    ("nc_matmul dst dtype must be float32 on gen2, got bfloat16": aws-neuron/nki-samples PR #133,
    contributed/decode_attention.py), as ``nki.isa.nc_matmul`` requires a float32 dst on
    NeuronCore-v2. The same report has trn2 accepting the kernel, so trn2 is not warned.
    Mixed fp32/narrow operands are refused by the pairing rule of the ``nc_matmul`` below."""
    ctx = current()
    if ctx.rules.nc_version != 2 or x.dtype in WIDE_MATMUL_DTYPES or y.dtype in WIDE_MATMUL_DTYPES:
        return
    message = (
        f"nl.matmul of {x.dtype} and {y.dtype} operands on {ctx.target}: no AWS page gives its PSUM "
        "result dtype, which the emulator makes float32; the NKI 0.6.0 compiler on NeuronCore-v2 "
        "is reported to take the operands' dtype and refuse it ('nc_matmul dst dtype must be "
        "float32 on gen2', aws-neuron/nki-samples PR #133), as nki.isa.nc_matmul requires a "
        "float32 dst on NeuronCore-v2; use nisa.nc_matmul into a float32 PSUM tile"
    )
    warn_unless_strict(
        ctx.strict,
        DtypeError,
        "nl-matmul-dst-gen2",
        message,
        user_site(),
        instead="; runs with a float32 result here",
        stacklevel=3,
    )


@pins_site
def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """``x.T @ y`` into a new float32 PSUM tile. Without ``transpose_x=True`` a known issue of
    every release (``nl-matmul-transpose-x``); computed as ``x @ y`` when the mode allows. On
    trn1, narrow (non-fp32) operands are warned at the line (:func:`_warn_gen2_narrow_matmul`)."""
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor):
        _check_matmul_operands_in_sbuf(x, y)
        _warn_gen2_narrow_matmul(x, y)
    if not transpose_x:
        known_issues.check("nl-matmul-transpose-x")
        # what AWS's simulator computes: x @ y, with x (M, K) moved to (K, M) on TensorE
        xt_psum = transpose(x)
        x = _new(xt_psum.shape, x.dtype)
        nisa.tensor_copy(dst=x, src=xt_psum)
    out = _new((x.free_size, y.free_size), "float32", PSUM)
    nisa.nc_matmul(dst=out, stationary=x, moving=y)
    return out


def _check_matmul_operands_in_sbuf(x: NkiTensor, y: NkiTensor) -> None:
    """``nki.language.matmul`` (NKI 0.3.0 and 0.6.0): ``x`` and ``y`` are each "a tile on SBUF".

    Without this check the instruction the wrapper issues refused the tile under its own name
    ("nc_matmul moving must be in sbuf"), which a kernel that called ``nl.matmul`` never wrote
    (a public decode-attention kernel of the twenty-sixth batch passed ``nl.transpose``'s PSUM
    result as ``y``, docs/third-party-kernels.md). The refusal is unchanged; it now names the argument.
    """
    for what, t in (("x", x), ("y", y)):
        if t.buffer is not SBUF:
            hint = (
                "; nl.transpose and nl.matmul return PSUM tiles: copy one to SBUF (nl.copy or "
                "nisa.tensor_copy) before using it as an operand"
                if t.buffer is PSUM
                else ""
            )
            raise BufferError(
                "nl-matmul-buffer",
                f"nl.matmul {what} must be a tile on SBUF (nki.language.matmul, NKI 0.3.0 and "
                f"0.6.0), got {t.describe()}{hint}",
                user_site(),
            )


@pins_site
def transpose(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """P <-> F transpose of a <= 128x128 SBUF tile into a new PSUM tile."""
    out = _new((x.free_size, x.partitions), dtypes.dtype_name(dtype) if dtype else x.dtype, PSUM)
    nisa.nc_transpose(dst=out, data=x)
    return out


# ---------------------------------------------------------------- elementwise
@hooks.call_token.register
@pins_site
def call_token(op: Op, *args: Any, **kwargs: Any) -> NkiTensor:
    """``nl.<token>(...)`` called as a function: the experimental wrapper of that name."""
    if op.name == "copy":
        return copy(*args, **kwargs)
    if op.name == "divide":
        known_issues.check("nl-divide")
    if op.name == "average":  # a reduction token (tensor_partition_reduce's op), no nl function
        raise LanguageError(
            "op-token",
            "nl.average is a reduction operator (nisa.tensor_partition_reduce(op=nl.average)), "
            "not a function",
            user_site(),
        )
    if op.name in BINARY:
        return _binary(op, *args, **kwargs)
    return _unary(op, *args, **kwargs)


def _unary(op: Op, x: NkiTensor, dtype: Any = None) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise TypeError(f"nl.{op.name} needs a tensor argument, got {x!r}")
    name = dtypes.dtype_name(dtype) if dtype else x.dtype
    out = _new(x.shape, name)
    if op.name == "rsqrt" and versions.has_change("nl.rsqrt"):
        _gpsimd_rsqrt(op, x, out)
    elif op.name in DOCUMENTED_ACTIVATIONS and op.name != "sin":
        nisa.activation(dst=out, op=op, data=x)
    elif op.name == "invert":
        nisa.tensor_scalar(dst=out, data=x, op0=op, operand0=0)
    elif op.name == "negative":
        nisa.tensor_scalar(dst=out, data=x, op0=BINARY["multiply"], operand0=-1.0)
    else:
        _custom_unary(op, x, out)
    return out


def _gpsimd_rsqrt(op: Op, x: NkiTensor, out: NkiTensor) -> None:
    """``nl.rsqrt`` from NKI 0.5.0: the NKI 0.5.0 release notes (Improvements) move it to the
    GpSimd Engine and drop PSUM inputs ("use nisa.activation directly if you need PSUM input").
    GpSimd has no PSUM access, so a PSUM ``x`` is refused here, at the kernel's line, with that
    advice; the rest is the GpSimd ``tensor_scalar`` the ``nki.isa.tensor_scalar`` page allows
    for rsqrt (a unary ``op0``, ``operand0=None``)."""
    if x.buffer is PSUM:
        raise BufferError(
            "rsqrt-psum",
            f"nl.rsqrt takes no PSUM input from NKI 0.5.0 (it runs on the GpSimd Engine, which "
            f"cannot read PSUM; NKI 0.5.0 release notes): {x.describe()}; use "
            "nisa.activation(op=nl.rsqrt) or copy the tile to SBUF first",
            user_site(),
        )
    nisa.tensor_scalar(dst=out, data=x, op0=op, operand0=None, engine=nisa.engine.gpsimd)


def _custom_unary(op: Op, x: NkiTensor, out: NkiTensor) -> None:
    """Math without an ISA activation (cos, tan, floor, ceil, trunc): one VectorE instruction.
    ``nl.sin`` too: it range-reduces before the Scalar Engine's activation (the 0.6.0 shared page,
    "Supported Activation Functions"), so it is exact over every input, unlike
    ``nisa.activation(op=nl.sin)`` outside [-pi, pi]."""
    ctx, site = current(), user_site()
    check_compute_operand(x, f"nl.{op.name}", "x", site)
    s_op, d_arr, fn, name = x.operand(site), out.array(), op.fn, out.dtype

    def run() -> None:
        d_arr[...] = dtypes.cast(fn(np.asarray(s_op.read(), dtype=F32)), name)

    ctx.emit(
        f"nl.{op.name}",
        "vector",
        site,
        [x],
        [out],
        run,
        {"partitions": x.partitions, "free": x.free_size},
    )


#: The ``nl.divide`` wrapper's own token: the ISA operator check (``isa_common.op_token``) refuses
#: ``op=nl.divide`` written in a kernel, while the wrapper (a Known Issue, ``nl-divide``) still
#: computes where the known-issue setting lets it run.
_WRAPPER_DIVIDE = Op("divide", "arith", BINARY["divide"].fn)


def _binary(op: Op, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    site = user_site()
    if op.name == "divide":
        op = _WRAPPER_DIVIDE
    xt, yt = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not (xt or yt):
        raise TypeError(f"nl.{op.name} needs at least one tensor argument")
    if xt and yt:
        if x.shape != y.shape:
            # checked before the broadcast copies them: an HBM operand is refused as it is
            # when the shapes match (by tensor_tensor), whatever the known-issue setting
            check_buffer(x, f"nl.{op.name}", "x", site)
            check_buffer(y, f"nl.{op.name}", "y", site)
            known_issues.check(
                "nl-binary-broadcast", f"nl.{op.name} of {x.describe()} and {y.describe()}", site
            )
            x, y = _broadcast_pair(x, y, site)
        name = dtypes.dtype_name(dtype) if dtype else _promote(x.dtype, y.dtype)
        out = _new(x.shape, name)
        nisa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
        return out
    tile, scalar = (x, y) if xt else (y, x)
    if op.name == "power" and xt:
        known_issues.check("nl-power-scalar", f"exponent {scalar!r}", site)
    name = dtypes.dtype_name(dtype) if dtype else _scalar_dtype(tile.dtype, scalar)
    out = _new(tile.shape, name)
    if op.kind == "bitvec":
        scalar = int(scalar)
    else:
        scalar = float(scalar)
    nisa.tensor_scalar(dst=out, data=tile, op0=op, operand0=scalar, reverse0=not xt)
    return out


def _broadcast_pair(x: NkiTensor, y: NkiTensor, site: Any) -> tuple[NkiTensor, NkiTensor]:
    """Both tiles broadcast to their common shape (AWS's simulator's lenient semantics)."""
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        shape = ()
    if not shape or len(shape) != x.ndim or len(shape) != y.ndim:
        raise ShapeError(
            "broadcast-shape",
            f"cannot broadcast {x.describe()} with {y.describe()} (same rank, dims equal or 1)",
            site,
        )
    wide = tuple(shape)
    return (
        x if x.shape == wide else broadcast_to(x, wide),
        y if y.shape == wide else broadcast_to(y, wide),
    )


def logical_not(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """``nl.logical_not``: 1 where ``x == 0`` else 0, elementwise (one ``tensor_scalar`` ``equal 0``)."""
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype)
    nisa.tensor_scalar(dst=out, data=x, op0=BINARY["equal"], operand0=0.0)
    return out


def _modulo(what: str, fn: Any, x: Any, y: Any, dtype: Any) -> NkiTensor:
    """``nl.fmod`` / ``nl.mod``: a known issue (no hardware modulo); computed as AWS's simulator
    does (one float32 VectorE pass) when the known-issues mode lets it through."""
    ctx, site = current(), user_site()
    known_issues.check("nl-fmod-mod", f"nl.{what}", site)
    tile = x if isinstance(x, NkiTensor) else y
    if not isinstance(tile, NkiTensor):
        raise TypeError(f"nl.{what} needs at least one tensor argument")
    for v in (x, y):
        if isinstance(v, NkiTensor) and v.shape != tile.shape:
            raise ShapeError("nl-modulo-shape", f"nl.{what} operands differ in shape", site)
    out = _new(tile.shape, dtypes.dtype_name(dtype) if dtype else tile.dtype)
    readers = [_reader(v, site) for v in (x, y)]
    d_arr, name = out.array(), out.dtype

    def run() -> None:
        a, b = (read() for read in readers)
        d_arr[...] = dtypes.cast(np.asarray(fn(a, b), F32).reshape(d_arr.shape), name)

    tensors = [v for v in (x, y) if isinstance(v, NkiTensor)]
    meta = {"partitions": tile.partitions, "free": tile.free_size}
    ctx.emit(f"nl.{what}", "vector", site, tensors, [out], run, meta)
    return out


def _reader(v: Any, site: Any) -> Any:
    """A zero-argument function giving ``v`` (a tile or a number) as float32."""
    if isinstance(v, NkiTensor):
        operand = v.operand(site)
        return lambda: np.asarray(operand.read(), F32)
    value = F32(v)
    return lambda: value


def fmod(x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``nl.fmod``: remainder with the sign of ``x`` (known issue ``nl-fmod-mod``)."""
    return _modulo("fmod", np.fmod, x, y, dtype)


def mod(x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``nl.mod``: remainder with the sign of ``y`` (known issue ``nl-fmod-mod``)."""
    return _modulo("mod", np.mod, x, y, dtype)


# ---------------------------------------------------------------- reductions
def _reduce_axes(x: NkiTensor, axis: Any, what: str) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = x.ndim
    axes = tuple(sorted(int(a) % nd for a in axes))
    if not axes or 0 in axes or axes != tuple(range(nd - len(axes), nd)):
        raise ShapeError(
            "reduce-axes",
            f"nl.{what} axis {axis} must be the last contiguous free dims of "
            f"{x.describe()} (AWS NKI docs, nki.language, NKI 0.3.0)",
            user_site(),
        )
    return axes


def _reduce(
    x: NkiTensor, axis: Any, dtype: Any, keepdims: bool, op: str, what: str, negate: bool = False
) -> NkiTensor:
    axes = _reduce_axes(x, axis, what)
    kept = [n for i, n in enumerate(x.shape) if i not in axes]
    shape = [1 if i in axes else n for i, n in enumerate(x.shape)] if keepdims else kept
    if len(shape) == 1:
        shape = [shape[0], 1] if keepdims else shape
    name = dtypes.dtype_name(dtype) if dtype else x.dtype
    out = _new(shape, name)
    nisa.tensor_reduce(dst=out, op=BINARY[op], data=x, axis=axes, negate=negate)
    return out


def sum(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.sum``: sum over the trailing free ``axis`` dims (``tensor_reduce`` add; nki.language)."""
    return _reduce(x, axis, dtype, keepdims, "add", "sum")


def max(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.max``: maximum over the trailing free ``axis`` dims (``tensor_reduce`` maximum; nki.language)."""
    return _reduce(x, axis, dtype, keepdims, "maximum", "max")


def min(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.min``: minimum over the trailing free ``axis`` dims (``tensor_reduce`` minimum; nki.language)."""
    return _reduce(x, axis, dtype, keepdims, "minimum", "min")


def prod(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.prod``: product over the trailing free ``axis`` dims (``tensor_reduce`` multiply;
    nki.language)."""
    return _reduce(x, axis, dtype, keepdims, "multiply", "prod")


def all(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.all``: logical AND over the trailing free ``axis`` dims (``tensor_reduce`` logical_and;
    nki.language)."""
    return _reduce(x, axis, dtype, keepdims, "logical_and", "all")


def mean(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """``nl.mean``: mean over the trailing free ``axis`` dims: a float32 sum scaled by ``1/count``
    (nki.language)."""
    axes = _reduce_axes(x, axis, "mean")
    count = math.prod(x.shape[a] for a in axes)
    total = _reduce(x, axis, "float32", keepdims, "add", "mean")
    out = _new(total.shape, dtypes.dtype_name(dtype) if dtype else x.dtype)
    nisa.tensor_scalar(dst=out, data=total, op0=BINARY["multiply"], operand0=1.0 / count)
    return out


def var(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Population variance over trailing free axes; always keeps dims (AWS NKI docs, nki.language
    (NKI 0.3.0))."""
    axes = _reduce_axes(x, axis, "var")
    count = math.prod(x.shape[a] for a in axes)
    flat = (x.partitions, x.free_size // count, count)
    m = mean(x, axis, "float32", keepdims=True)
    centered = _new(x.shape, "float32")
    if flat[1] == 1:
        nisa.tensor_scalar(
            dst=centered, data=x, op0=BINARY["subtract"], operand0=m.reshape((x.partitions, 1))
        )
    else:
        # trailing free axes that leave other free dims (axis=2 of a 3-D tile): the page allows
        # any last contiguous dims (nki.language.var, NKI 0.3.0 and 0.6.0), so the mean is
        # broadcast over the reduced dims and subtracted elementwise
        nisa.tensor_tensor(
            dst=centered, data1=x, data2=broadcast_to(m, x.shape), op=BINARY["subtract"]
        )
    sq = _new(x.shape, "float32")
    nisa.activation(dst=sq, op=ACTIVATIONS["square"], data=centered)
    return mean(sq, axis, dtype or x.dtype, keepdims=True)


# ---------------------------------------------------------------- manipulation
def broadcast_to(x: NkiTensor, shape: Any, dtype: Any = None) -> NkiTensor:
    """Broadcast dims of size 1 (same rank); a partition broadcast runs on TensorE (AWS Trainium/Inferentia2
    Architecture Guide for NKI (NKI 0.3.0))."""
    ctx, site = current(), user_site()
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or any(a not in (1, b) for a, b in zip(x.shape, shape)):
        raise ShapeError(
            "broadcast-shape",
            f"cannot broadcast {x.describe()} to {list(shape)} (same rank, dims equal or 1)",
            site,
        )
    # nki.language.broadcast_to (NKI 0.3.0 and 0.6.0): "x: the source tile in SBUF or PSUM". A
    # binary nl op broadcasts its smaller operand through here, so an HBM kernel argument given
    # to nl.subtract(tile, hbm) is refused here as it is when the shapes match (tensor_tensor).
    check_buffer(x, "nl.broadcast_to", "x", site)
    name = dtypes.dtype_name(dtype) if dtype else x.dtype
    out = _new(shape, name)
    s_op, d_arr = x.operand(site), out.array()

    def run() -> None:
        d_arr[...] = dtypes.cast(np.broadcast_to(np.asarray(s_op.read(), F32), shape), name)

    engine = "tensor" if x.partitions == 1 and shape[0] > 1 else "vector"
    meta = {"partitions": shape[0], "free": out.free_size}
    if engine == "tensor":
        meta.update(
            {"K": 1, "M": shape[0], "N": out.free_size, "flops": 0, "factor": 1.0, "fp8": False}
        )
    ctx.emit("broadcast_to", engine, site, [x], [out], run, meta)
    return out


def expand_dims(x: NkiTensor, axis: int) -> NkiTensor:
    """A view with a new size-1 dim at ``axis`` (no copy)."""
    shape = list(x.shape)
    axis = axis % (len(shape) + 1)
    if axis == 0 and x.on_chip:
        raise ShapeError(
            "expand-dims-partition",
            "expand_dims cannot insert before the partition dim of an on-chip tile",
            user_site(),
        )
    shape.insert(axis, 1)
    return x.reshape(tuple(shape))


def where(condition: NkiTensor, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``x`` where ``condition`` (1.0/0.0) else ``y``.

    Without ``dtype`` the result has "the data type of the input tile" (nki.language.where, NKI
    0.3.0 and 0.6.0): ``x``'s, or ``y``'s when ``x`` is a scalar (``where(c, 0.0, bf16_tile)`` is
    bfloat16), float32 when both are scalars."""
    ref = condition
    tile = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else None
    name = dtypes.dtype_name(dtype) if dtype else (tile.dtype if tile is not None else "float32")
    out = _new(ref.shape, name)
    isa_vector.select(dst=out, predicate=condition, on_true=x, on_false=y)  # not an nisa name
    return out


def softmax(x: NkiTensor, axis: Any = -1, dtype: Any = None) -> NkiTensor:
    """Softmax over the last free axis: max, exp(x - max) with row sums, reciprocal, scale."""
    known_issues.check("nl-softmax-rms-norm", "nl.softmax")
    axes = _reduce_axes(x, axis, "softmax")
    if len(axes) != 1 or x.ndim != 2:
        return _softmax_axes(x, axis, dtype)
    p = x.partitions
    neg_max = _new((p, 1), "float32")
    nisa.tensor_reduce(dst=neg_max, op=BINARY["maximum"], data=x, axis=1, negate=True)
    e = _new(x.shape, "float32")
    s = _new((p, 1), "float32")
    nisa.activation(
        dst=e,
        op=ACTIVATIONS["exp"],
        data=x,
        bias=neg_max,
        reduce_op=BINARY["add"],
        reduce_res=s,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    r = _new((p, 1), "float32")
    nisa.reciprocal(dst=r, data=s)
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype)
    nisa.tensor_scalar(dst=out, data=e, op0=BINARY["multiply"], operand0=r)
    return out


def _softmax_axes(x: NkiTensor, axis: Any, dtype: Any) -> NkiTensor:
    """``nl.softmax`` over any last contiguous free dims (``axis=2`` or ``(1, 2)`` of a 3-D tile;
    nki.language.softmax, NKI 0.3.0 and 0.6.0: "[1], [1,2], [1,2,3], [1,2,3,4]"): the row
    maximum and the sum of exponentials are kept as size-1 dims and broadcast back over them."""
    neg_max = _reduce(x, axis, "float32", True, "maximum", "softmax", negate=True)
    shifted = _new(x.shape, "float32")
    nisa.tensor_tensor(
        dst=shifted, data1=x, data2=broadcast_to(neg_max, x.shape), op=BINARY["add"]
    )
    e = _new(x.shape, "float32")
    nisa.activation(dst=e, op=ACTIVATIONS["exp"], data=shifted)
    s = _reduce(e, axis, "float32", True, "add", "softmax")
    r = _new(s.shape, "float32")
    nisa.reciprocal(dst=r, data=s)
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype)
    nisa.tensor_tensor(dst=out, data1=e, data2=broadcast_to(r, x.shape), op=BINARY["multiply"])
    return out


def _cast_to(out: NkiTensor, dtype: Any) -> NkiTensor:
    """``out`` itself when ``dtype`` is None or its own dtype, else a ``tensor_copy`` of it into a
    new SBUF tile of ``dtype`` (the ``dtype=`` argument of the nl wrappers that compute first)."""
    if dtype is None or dtypes.dtype_name(dtype) == out.dtype:
        return out
    cast = _new(out.shape, dtypes.dtype_name(dtype))
    nisa.tensor_copy(dst=cast, src=out)
    return cast


def gather_flattened(data: NkiTensor, indices: NkiTensor, axis: int = 0, dtype: Any = None) -> NkiTensor:
    """``nl.gather_flattened(data, indices, axis=0, dtype=None)``: per partition, element ``k`` of the
    result is element ``indices[p, k]`` of ``data[p]`` with its free dims flattened (AWS NKI docs,
    nki.language.gather_flattened, NKI 0.3.0: "using the index value to select from the free
    dimension of data"). The result has ``indices``' shape and ``data``'s dtype (or ``dtype``).

    Lowered onto ``nisa.nc_n_gather`` (the GpSimd in-partition gather the same page family names),
    so its rules apply: SBUF operands, equal partition counts, every index inside
    ``[0, data.size / data.shape[0])`` (checked on every run). The docs give no index dtype for
    this wrapper; signed or narrower integer indices are first copied to the ``uint32`` tile
    ``nc_n_gather`` takes. Only the default ``axis=0`` is emulated: the page (NKI 0.3.0 to 0.6.0)
    describes ``axis`` only as "axis along which to gather", its default already selects along
    the free dimension, and neither its example nor its test uses another value, so no other
    value has documented semantics."""
    if axis != 0:
        raise NotImplementedError(
            f"nl.gather_flattened with axis={axis!r} is not emulated: the nki.language.gather_flattened "
            "page (NKI 0.3.0 to 0.6.0) defines only the default axis=0 (a gather along each "
            f"partition's flattened free dims){site_suffix(user_site())}"
        )
    if not isinstance(data, NkiTensor) or not isinstance(indices, NkiTensor):
        raise TypeError("nl.gather_flattened: data and indices must be on-chip tiles")
    idx = indices
    if indices.dtype != "uint32":
        idx = _new(indices.shape, "uint32")
        nisa.tensor_copy(dst=idx, src=indices)
    out = _new(indices.shape, data.dtype)
    nisa.nc_n_gather(dst=out, data=data, indices=idx)
    return _cast_to(out, dtype)


def dropout(x: NkiTensor, rate: Any, dtype: Any = None) -> NkiTensor:
    """``nl.dropout(x, rate, dtype=None)``: ``nisa.dropout`` into a new SBUF tile (then a copy to
    ``dtype`` if given); the random draws are described in :mod:`trncore.sim.isa_random`."""
    out = _new(x.shape, x.dtype)
    nisa.dropout(dst=out, data=x, prob=rate)
    return _cast_to(out, dtype)


def rms_norm(
    x: NkiTensor,
    w: NkiTensor,
    axis: Any,
    n: int,
    epsilon: float = 1e-06,
    dtype: Any = None,
    compute_dtype: Any = None,
) -> NkiTensor:
    """``nl.rms_norm``: ``x / sqrt(sum(x^2)/n + epsilon) * w`` along ``axis`` (nki.language.rms_norm,
    NKI 0.3.0 to 0.6.0: "axis along which to compute the root mean square", ``n`` "total number
    of values to calculate rms"): the trailing free dims, as for the other nl reductions
    (one axis, or several, ``n`` counting all their values). Per partition and per index of the
    free dims kept in front of them: squares summed on ScalarE, rsqrt, a per-partition scale,
    then the weight (a tile of ``x``'s shape)."""
    known_issues.check("nl-softmax-rms-norm", "nl.rms_norm")
    axes = _reduce_axes(x, axis, "rms_norm")
    out = _new(x.shape, dtypes.dtype_name(dtype) if dtype else x.dtype)
    kept = x.shape[1 : axes[0]]  # free dims in front of the normalised ones: one pass per index
    for idx in np.ndindex(*kept):
        key = (slice(None), *idx)
        _rms_norm_rows(x[key] if idx else x, w[key] if idx else w, out[key] if idx else out, n, epsilon)
    return out


def _rms_norm_rows(x: NkiTensor, w: NkiTensor, out: NkiTensor, n: int, epsilon: float) -> None:
    """``out = x / sqrt(sum(x^2)/n + epsilon) * w`` with the sum over all of a partition's free
    elements."""
    p = x.partitions
    sq = _new(x.shape, "float32")
    ss = _new((p, 1), "float32")
    nisa.activation(
        dst=sq,
        op=ACTIVATIONS["square"],
        data=x,
        reduce_op=BINARY["add"],
        reduce_res=ss,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    ms = _new((p, 1), "float32")
    nisa.tensor_scalar(
        dst=ms, data=ss, op0=BINARY["multiply"], operand0=1.0 / n, op1=BINARY["add"],
        operand1=float(epsilon),
    )
    r = _new((p, 1), "float32")
    nisa.activation(dst=r, op=ACTIVATIONS["rsqrt"], data=ms)
    scaled = _new(x.shape, "float32")
    nisa.tensor_scalar(dst=scaled, data=x, op0=BINARY["multiply"], operand0=r)
    nisa.tensor_tensor(dst=out, data1=scaled, data2=w, op=BINARY["multiply"])
