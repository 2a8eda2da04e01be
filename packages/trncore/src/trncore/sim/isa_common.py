"""Enums and plumbing shared by the ``nki.isa`` instruction modules (AWS NKI docs, nki.isa, NKI 0.3.0).

The enums (``engine``, ``dge_mode``, ...) are ``nisa`` names, re-exported by :mod:`trncore.sim.isa`
and :mod:`trncore.sim.isa_constants`. The functions are the emulator's instruction plumbing, used
by every ``isa_*`` module and by :mod:`trncore.sim.lnc` and :mod:`trncore.sim.registers`; they are
public here so those modules import them by name, and ``nisa`` (which takes an explicit list of
names from here) never sees them.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.alu import (
    BINARY,
    Op,
)
from trncore.sim.arrays import pattern_indices
from trncore.sim.context import current, user_site
from trncore.sim.errors import (
    BufferError,
    LanguageError,
    ShapeError,
    warn_at,
)
from trncore.sim.tensor import NkiTensor, Operand


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.scalar, engine.gpsimd
vector_engine, unknown_engine = engine.vector, engine.unknown


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode(enum.Enum):
    # string values, as the nki.isa page lists them (NKI 0.3.0 and 0.6.0); AWS's NKI library also
    # passes the strings themselves (perf_mode="double_row"), which trncore.sim.matmul_modes accepts
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


def begin() -> tuple[Any, tuple[str, int] | None]:
    """The active trace context and the kernel's source line: the first step of every instruction."""
    return current(), user_site()


def elementwise_meta(t: NkiTensor, **extra: Any) -> dict[str, Any]:
    """The cost-model fields of an instruction over ``t`` (partitions, free size) plus ``extra``."""
    return {"partitions": t.partitions, "free": t.free_size, **extra}


def hbm_bytes_meta(sources: list[NkiTensor], dst: NkiTensor) -> dict[str, int]:
    """The HBM bytes a DMA reads and writes, each at the HBM side's own dtype (cost-model fields
    ``hbm_read`` / ``hbm_write`` of :mod:`trncore.sim.report`).

    A DMA converts element types on the way ("first casting from src.dtype to float32, then from
    float32 to dst.dtype", AWS NKI docs, nki.isa.dma_copy, NKI 0.3.0 and 0.6.0; ``dma_compute``
    sums its sources in float32 and casts to ``dst.dtype``, same pages), so a float32 SBUF tile
    stored to a bfloat16 HBM tensor writes 2 bytes per element to HBM, not 4, and a
    ``dma_compute`` of two on-chip sources writes only ``dst``'s bytes to HBM."""

    def size(t: NkiTensor) -> int:
        return t.size * dtypes.itemsize(t.dtype)

    on_hbm = [t for t in sources if t.buffer.name.endswith("hbm")]
    return {
        "hbm_read": sum(size(t) for t in on_hbm),
        "hbm_write": size(dst) if dst.buffer.name.endswith("hbm") else 0,
    }


def writer(dst: NkiTensor, site: Any) -> Any:
    """A function writing float32 results into ``dst``, cast to its dtype (resolved once, at trace)."""
    operand = dst.operand(site)
    name = dst.dtype
    shape = dst.shape
    # values already of a plain float dst's storage type need no cast (dtypes.cast would copy
    # them unchanged before the write copies them again); tfloat32 still rounds
    same = dtypes.storage_dtype(name) if dtypes.is_float(name) and name != "tfloat32" else None
    if name in DIRECT_CASTS and type(operand) is Operand:
        # float32 results into a static bfloat16/float16 view: NumPy's assignment runs the same
        # cast as dtypes.cast (ml_dtypes' / NumPy's float32 -> bf16/fp16 loop, nearest even)
        # straight into the view, without the cast's temporary and a second copy (a [64, 65535]
        # bf16 tile: 2.8 -> 1.8 ms)
        arr = operand.arr

        def write_direct(values: np.ndarray) -> None:
            values = np.asarray(values)
            if values.dtype == _F32:
                arr[...] = values.reshape(arr.shape)
            elif values.dtype == same:
                operand.write(values)
            else:
                operand.write(dtypes.cast(values.reshape(shape), name))

        return write_direct

    if type(operand) is Operand and (name == "float32" or dtypes.is_int(name)):
        # results of the dst's own type (float32, or an integer type, which dtypes.cast returns
        # unchanged) are assigned to the view as Operand.write assigns them, one call fewer (a
        # replay of small integer tiles spent a third of each instruction in the cast's dispatch)
        arr = operand.arr
        own = arr.dtype

        def write_own(values: np.ndarray) -> None:
            values = np.asarray(values)
            if values.dtype == own:
                arr[...] = values.reshape(arr.shape)
            else:
                operand.write(dtypes.cast(values.reshape(shape), name))

        return write_own

    def write(values: np.ndarray) -> None:
        values = np.asarray(values)
        if values.dtype == same:
            operand.write(values)
        else:
            operand.write(dtypes.cast(values.reshape(shape), name))

    return write


def static_rows(operand: Any, p: int) -> np.ndarray | None:
    """The ``(p, free)`` array of a static operand's view (a view of the storage, in the
    operand's storage dtype), for a run that computes straight from or into it (no temporary,
    no second copy); None for a dynamic operand or a layout with no 2-D view."""
    if type(operand) is not Operand:
        return None
    arr = operand.arr
    if arr.ndim == 2 and arr.shape[0] == p:
        return arr  # (already the rows: a 2-D tile or view, the usual case)
    return view_as(arr, (p, -1))


def view_as(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``arr`` in ``shape`` as a view of its own memory, or None when no view has that shape.

    (``np.reshape(copy=False)`` says this from NumPy 2.1; older releases, down to the lowest the
    packages support, copy silently, so a copy is told by its memory instead.)"""
    try:
        out = arr.reshape(shape)
    except ValueError:
        return None
    return out if np.may_share_memory(out, arr) else None


def copy_run(src: Any, dst: Any) -> Any:
    """A replay-lean ``run`` copying static operand ``src`` into static operand ``dst`` of the
    same dtype (one assignment; bfloat16/fp8 as integer words, as :meth:`Operand.write` moves
    them), or None when either is not static or the source has no view of the dst's shape (the
    general run reshapes it, in C order as this view does)."""
    if type(src) is not Operand or type(dst) is not Operand or src.arr.dtype != dst.arr.dtype:
        return None
    d_arr, s_arr = dst.arr, src.arr
    if s_arr.shape != d_arr.shape:
        viewed = view_as(s_arr, d_arr.shape)
        if viewed is None:  # (no view of that shape)
            return None
        s_arr = viewed
    raw = dtypes.RAW_VIEW.get(d_arr.dtype)
    if raw is not None:
        d_arr, s_arr = d_arr.view(raw), s_arr.view(raw)

    def run_copy() -> None:
        d_arr[...] = s_arr

    return run_copy


def saturate_into(
    wide: np.ndarray, floor: np.ndarray | None, ceiling: np.ndarray | None, dst: np.ndarray
) -> None:
    """Clip ``wide`` (a wider type's values) in place at ``floor`` and ``ceiling`` (None: a bound
    its values cannot pass) and assign it to integer ``dst``: :func:`trncore.sim.dtypes.cast`'s
    saturation of whole numbers, for the replay-lean runs."""
    if floor is not None:
        np.maximum(wide, floor, out=wide)
    if ceiling is not None:
        np.minimum(wide, ceiling, out=wide)
    dst[...] = wide


def float32_rows(operand: Any, p: int) -> np.ndarray | None:
    """:func:`static_rows` of a float32 operand; None for another dtype."""
    if type(operand) is not Operand or operand.arr.dtype != _F32:
        return None
    return static_rows(operand, p)


#: dsts whose float32 -> storage cast NumPy's assignment performs exactly as dtypes.cast does
#: (dtypes.cast is ``astype`` for them; tfloat32 and fp8 round through their own code)
DIRECT_CASTS = frozenset({"bfloat16", "float16"})
_F32 = np.dtype(np.float32)


def enum_arg(value: Any, cls: type[enum.Enum], op: str, what: str) -> Any:
    """``value`` when it is a member of the ``nki.isa`` enum ``cls``.

    The sources differ on a raw integer (docs/emulator.md, Readings chosen): the NKI 0.3.0 update
    guide, "Integer Enum Constants No Longer Supported", says "Raw integer values (e.g.,
    ``dge_mode=2``) are no longer accepted for enum parameters", while AWS's own NKI Library of
    the same release passes them (``dge_mode=3`` in its norm, qkv and MLP token-generation
    kernels, whose tests run them). A raw integer that is a member's value therefore runs as that
    member, with a warning at the kernel's line quoting the guide; any other value (an integer no
    member has, a string, a float, a bool) is a LanguageError ``enum-member`` at the line."""
    if type(value) is cls:
        return value
    site = user_site()
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        try:
            member = cls(int(value))
        except ValueError:
            member = None
        if member is not None:
            message = (
                f"{op}: {what}={int(value)} is a raw integer; the NKI 0.3.0 update guide says raw "
                f"integers are no longer accepted for enum parameters: pass nisa.{cls.__name__}."
                f"{member.name}"
            )
            warn_at(message, site, stacklevel=3)
            return member
    raise LanguageError(
        "enum-member",
        f"{op}: {what} must be a nisa.{cls.__name__} member, got {value!r} (raw integers are not "
        "accepted from NKI 0.3.0, the NKI 0.3.0 update guide)",
        site,
    )


def pick_engine(requested: Any, default: engine) -> engine:
    """The engine an instruction runs on: ``requested`` unless unset or ``engine.unknown``."""
    if type(requested) is engine:
        eng = requested  # the usual case; calling the Enum class is several times dearer
    else:
        eng = enum_arg(requested, engine, "nki.isa", "engine") if requested is not None else engine.unknown
    if eng == engine.unknown:
        eng = default
    return eng


def check_engine(eng: engine, allowed: tuple[engine, ...], op: str, page: str, site: Any) -> None:
    """An ``engine=`` the instruction's page does not list is a LanguageError ``<op>-engine`` (dashes) at
    ``site`` naming the argument (``eng`` as :func:`pick_engine` resolved it; ``page`` cites the
    list, e.g. "nki.isa.memset, NKI 0.3.0 and 0.6.0: vector or gpsimd")."""
    if eng not in allowed:
        names = ", ".join(f"nisa.engine.{e.name}" for e in allowed)
        raise LanguageError(
            f"{op.replace('_', '-')}-engine",
            f"{op} engine={eng.name} is not supported; engine must be one of "
            f"{names} or nisa.engine.unknown ({page})",
            site,
        )


def check_gpsimd_psum(eng: engine, op: str, site: Any, *tensors: NkiTensor) -> None:
    """GpSimd has no PSUM access: a BufferError at ``site`` when ``eng`` is GpSimd and a tensor is in PSUM."""
    if eng == engine.gpsimd:
        for t in tensors:
            if t.buffer.name == "psum":
                raise BufferError(
                    "gpsimd-no-psum", f"{op} on GpSimd cannot access PSUM: {t.describe()}", site
                )


def require_sbuf(op: str, rule: str, site: Any, **operands: NkiTensor) -> None:
    """GpSimd-only instructions read and write SBUF: a BufferError ``rule`` at ``site`` naming the
    first operand (keyword = the parameter's name) that is elsewhere."""
    for what, t in operands.items():
        if t.buffer.name != "sbuf":
            raise BufferError(rule, f"{op} {what} must be in SBUF (GpSimd cannot access PSUM): "
                              f"{t.describe()}", site)  # fmt: skip


# ``nl.max`` / ``nl.min`` passed as an ISA operator: the nki.isa.tensor_scalar_reduce page (NKI 0.3.0
# and 0.6.0) names them as operators ("The reduce_op can be any of nl.add, nl.multiply, nl.max or
# nl.min", identities "-inf for nl.max and +inf for nl.min"), and AWS's later nki-library foreach
# norm kernels pass nl.max as tensor_reduce / tensor_tensor / tensor_partition_reduce ``op``. They
# are the operator table's maximum / minimum wherever those are legal (docs/emulator.md, Readings
# chosen); nl.sum, nl.prod and the other reduction functions are not operators.
_REDUCTION_ALIASES = {"max": "maximum", "min": "minimum"}


def _is_nl_reduction(op: Any) -> bool:
    """Whether ``op`` is the emulator's ``nl.max`` / ``nl.min`` reduction function."""
    return callable(op) and getattr(op, "__module__", "") == "trncore.sim.wrappers"


def op_token(op: Any, name: str, site: Any, allowed: dict[str, Op]) -> Op:
    """The operator token ``op`` if ``allowed`` for parameter ``name``, else a LanguageError at ``site``.

    ``op=nl.divide`` is refused wherever it would otherwise be allowed: the table of operators an
    ISA instruction takes (AWS NKI docs, "Supported Math Operators for NKI ISA", NKI 0.3.0 and
    0.6.0) has no divide, and the compiler rejects it ("unsupported operator 'divide'"). The
    ``nl.divide`` wrapper (a Known Issue, ``nl-divide``) passes its own token and is not affected.
    """
    if op is BINARY["divide"] and "divide" in allowed:
        raise LanguageError(
            "isa-divide",
            f"{name}=nl.divide is not an ISA operator (AWS NKI docs, Supported Math Operators for "
            "NKI ISA, NKI 0.3.0: no divide); multiply by the nisa.reciprocal of the divisor",
            site,
        )
    if isinstance(op, Op) and op.name in allowed and allowed[op.name] is op:
        return op
    if isinstance(op, Op) and op.name in allowed:
        return allowed[op.name]
    alias = _REDUCTION_ALIASES.get(getattr(op, "__qualname__", "")) if _is_nl_reduction(op) else None
    if alias is not None and alias in allowed:
        return allowed[alias]
    raise LanguageError(
        "op-token",
        f"{name}={_op_label(op)} is not legal here; allowed: "
        f"{', '.join('nl.' + k for k in allowed if k != 'divide')}{_numpy_hint(op, allowed)}",
        site,
    )


def _numpy_hint(op: Any, allowed: dict[str, Op]) -> str:
    """What to pass instead of a NumPy ufunc of an allowed operator's name (``op0=np.multiply``).

    NKI Beta 1 kernels passed NumPy ufuncs (AWS's older tutorials, the fused Mamba kernel still
    in aws-neuron/nki-samples); the operator table of NKI 0.3.0-0.6.0 ("Supported Math
    Operators for NKI ISA") lists the ``nki.language`` tokens only. AWS's NKI front end (KLR,
    ``KLR/Trace/FromNKI.lean`` @7ccd18c) matches an operator by its last name, so it takes
    ``np.multiply`` too; the pages decide here (docs/emulator.md, Readings chosen).
    """
    if isinstance(op, np.ufunc) and op.__name__ in allowed:
        return (
            f"; NumPy's np.{op.__name__} is not an NKI operator token (NKI Beta 1 took NumPy "
            f"ufuncs; the operator table of NKI 0.3.0-0.6.0 lists nki.language's): write "
            f"nl.{op.__name__}"
        )
    return ""


def _op_label(op: Any) -> str:
    """How an ``op=`` value is named in an error: ``nl.<name>`` for the emulator's own functions
    (a release-table API it does not run says so), ``repr`` for anything else. A public fp8 kernel
    passes ``nl.abs_max`` (NeuronCore-v4 only; "Legal Reduction op: N" in the operator table,
    NKI 0.6.0) to ``tensor_reduce``, and the message printed a function's address."""
    api = getattr(op, "__nki_api__", None)
    if api is not None:
        return f"{api} (in NKI's release table, not emulated)"
    if isinstance(op, Op):
        return f"nl.{op.name}"  # an operator token (its repr already reads nl.<name>)
    if callable(op) and getattr(op, "__module__", "").startswith("trncore.sim"):
        return f"nl.{getattr(op, '__name__', op)}"
    return repr(op)


def affine_values(
    pattern: Any, offset: int, cm: int, p: int, free: int, op: str, site: Any, start: int
) -> np.ndarray:
    """The int32 values ``offset + (start + c) * cm + sum(index * step)`` of an iota-style
    ``pattern`` over ``p`` partitions of ``free`` elements (``nisa.iota``, ``nisa.affine_select``);
    a pattern that does not cover ``free`` is a ShapeError naming ``op``."""
    # the pages: "an int32 offset", "an int32 multiplier", integer [step, num] pairs; a
    # fractional value would be truncated here, computing what no page describes
    for what, value in [("offset", offset), ("channel_multiplier", cm)] + [
        (f"pattern {pattern}", v) for pair in pattern for v in pair
    ]:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not float(value).is_integer()
            or not -(2**31) <= value < 2**31
        ):
            raise ShapeError(
                "pattern-int32",
                f"{op} {what} value {value!r} is not an int32 (nki.isa.{op}: int32 values)",
                site,
            )
    dims = [(int(s), int(n)) for s, n in pattern]
    if len(dims) > 4:
        # nki.isa.iota / nki.isa.affine_select (NKI 0.3.0 and 0.6.0): "a list of [step, num] to
        # describe up to 4D tensor sizes and strides"
        raise ShapeError(
            "pattern-rank",
            f"{op} pattern {pattern} has {len(dims)} [step, num] pairs; the pattern is up to 4D",
            site,
        )
    if math.prod(n for _, n in dims) != free:
        raise ShapeError(
            "pattern-size",
            f"{op} pattern {pattern} covers {math.prod(n for _, n in dims)} "
            f"elements but dst has {free} per partition",
            site,
        )
    vals = pattern_indices(0, dims)
    chan = (np.arange(p, dtype=np.int64) + start) * int(cm)
    return (int(offset) + chan[:, None] + vals.reshape(1, -1)).astype(np.int32)
