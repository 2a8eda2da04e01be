"""Operand checks shared by the ISA instructions (AWS NKI docs, nki.isa; AWS NKI docs, Indexing overview
(NKI 0.3.0); docs/emulator.md, What is checked)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from trncore.sim import dtypes, versions
from trncore.sim.context import user_site
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    PartitionError,
    ShapeError,
    TargetError,
    site_suffix,
)
from trncore.sim.tensor import NkiTensor

__all__ = [
    "as_tensor",
    "bool_parameters",
    "check_bool_arguments",
    "check_buffer",
    "check_compute_operand",
    "check_same_layout",
    "check_vector_operand",
    "lookup",
    "memoised",
    "memoised_checks",
    "read_f32",
    "remember",
    "static_lookup",
    "value_key",
]

F32 = np.float32
T = TypeVar("T")
FREE_MAX = 65536


#: what :func:`static_lookup` returns for a key that was never recorded (a memoised result
#: may itself be None)
MISS: Any = object()
#: entries a trace's memo holds at most before it starts again
_MEMO_MAX = 1 << 16


def value_key(x: Any) -> Any:
    """What a memo key holds of an operand that may be a tensor or a value: ``"tensor"`` for a
    tensor (its signature is among the key's operands, :func:`static_lookup`), else the value's type and the
    value (``1``, ``1.0`` and ``True`` are told apart: a bool is refused where a number is not)."""
    return "tensor" if isinstance(x, NkiTensor) else (type(x), x)


def static_lookup(
    ctx: Any, op: str, site: Any, operands: tuple[Any, ...], extra: tuple[Any, ...],
    offsets: bool = True,
) -> tuple[Any, Any]:  # fmt: skip
    """``(key, result)`` of an instruction's static checks, memoised per trace (docs/emulator-speed.md,
    seventh round).

    The key is the instruction, the kernel's line, each operand's static signature (the
    allocation's buffer, dtype, shape, partition start and explicit byte address, the view's
    dtype, element offset and access pattern: what the partition, bank and bounds rules read) and
    ``extra`` (the static keyword values the checks read); the target's rules and the NKI release
    are fixed for the trace that holds the memo (``ctx.static_checks``). ``offsets`` False
    leaves the views' element offsets out of the key, for an instruction none of whose static
    checks reads them (``dma_copy``: a DMA has no start-partition rule, and a view's bounds are
    checked where it is made or, for an ``.ap()`` view, by ``operand`` on every call): a loop
    moving tile after tile of one HBM tensor then checks once. Such an instruction's key takes
    an operand with a dynamic offset too, by the kind of its offset (its class: a register
    ``scalar_offset``, a ``vector_offset`` gather) in place of the element offset; the offset's
    values are read, and bounds-checked, when the instruction runs. ``result`` is
    :data:`MISS` when the checks must run: the first call with this key, or a key that cannot
    be made (``key`` None: an operand that is not a plain tensor or, with ``offsets``, has a
    dynamic offset, decided at run time; an unhashable keyword value), which then runs every
    check on every call.
    """
    sigs = []
    for t in operands:  # every instruction of a loop comes here: the signature is built inline
        if type(t) is not NkiTensor:
            return None, MISS
        dynamic = t.dynamic
        if dynamic is not None and offsets:
            return None, MISS
        a = t.alloc
        sigs.append(
            (a.buffer, a.dtype, a.shape, a.partition_start, a.address_bytes, t.dtype,
             t.offset if offsets else type(dynamic), t.dims)
        )  # fmt: skip
    return lookup(ctx, (op, site, offsets, *sigs, *extra))


def lookup(ctx: Any, key: Any) -> tuple[Any, Any]:
    """``(key, memoised result or MISS)``; ``key`` None when it is unhashable (never memoised).
    A caller that gets MISS runs its checks and then calls :func:`remember`."""
    memo = ctx.static_checks
    try:
        hit = memo.get(key, MISS)
    except TypeError:  # an unhashable keyword value (a list): never memoised
        return None, MISS
    if hit is MISS and len(memo) > _MEMO_MAX:
        memo.clear()  # bound the memory (a kernel naming ever new offsets only misses)
    return key, hit


def memoised(ctx: Any, key: Any, run: Callable[[], T]) -> T:
    """``run()``, static checks, unless this trace already passed them under ``key`` (a tuple;
    an unhashable one is never memoised); the result is remembered only once ``run`` has
    returned, so an invalid call raises at its own line every time."""
    key, hit = lookup(ctx, key)
    return _run_and_record(ctx, key, hit, run)


def memoised_checks(
    ctx: Any, op: str, site: Any, operands: tuple[Any, ...], extra: tuple[Any, ...],
    run: Callable[[], T], offsets: bool = True,
) -> T:
    """:func:`memoised` under the :func:`static_lookup` key of an instruction's operands."""
    key, hit = static_lookup(ctx, op, site, operands, extra, offsets)
    return _run_and_record(ctx, key, hit, run)


def remember(ctx: Any, key: Any, result: T) -> T:
    """Record ``result`` of checks that passed under ``key`` (from :func:`lookup`; None: never
    memoised); returns ``result``."""
    if key is not None:
        ctx.static_checks[key] = result
    return result


def _run_and_record(ctx: Any, key: Any, hit: Any, run: Callable[[], T]) -> T:
    if hit is MISS:
        hit = run()
        if key is not None:
            ctx.static_checks[key] = hit
    return hit  # (Any: no typing.cast, which is a call)


def as_tensor(x: Any, op: str, what: str, site: Any) -> NkiTensor:
    """``x`` itself when it is an NKI tensor; a ``TypeError`` naming ``op``/``what`` otherwise."""
    if not isinstance(x, NkiTensor):
        raise TypeError(f"{op}: {what} must be an NKI tensor, got {type(x).__name__}{site_suffix(site)}")
    return x


def check_partitions(t: NkiTensor, op: str, what: str, site: Any, start_rules: bool) -> None:
    """AWS NKI docs, Indexing overview (NKI 0.3.0); AWS Trainium/Inferentia2 Architecture Guide for NKI
    (NKI 0.3.0): at most 128 partitions; compute engines obey the start-partition rules."""
    p = t.partitions
    if p == 0:
        return  # an empty access uses no partition (its instruction writes nothing)
    if p > 128:
        raise PartitionError(
            "partition-dim-max",
            f"{op} {what} partition dimension {p} exceeds maximum 128: {t.describe()}",
            site,
        )
    if start_rules and t.dynamic is None:
        offset = t.offset
        if not offset:
            return  # partition 0 is allowed for every partition count (the usual operand)
        start = t.start_partition()
        if p > 64:
            allowed: tuple[int, ...] = (0,)
        elif p > 32:
            allowed = (0, 64)
        else:
            allowed = (0, 32, 64, 96)
        if start not in allowed and t.size:
            # (a view of no element, such as t[:, n:n] at the end of a row, whose offset reads
            # as the next partition, touches none: empty tiles are no-ops, docs/emulator.md)
            raise PartitionError(
                "start-partition",
                f"{op} {what} spans {p} partitions starting at partition {start}; a compute "
                f"engine access of {p} partitions must start at one of {allowed} (AWS Trainium/Inferentia2 "
                f"Architecture Guide for NKI, NKI 0.3.0): "
                f"{t.describe()}",
                site,
            )


def check_buffer(
    t: NkiTensor, op: str, what: str, site: Any, buffers: tuple[str, ...] = ("sbuf", "psum")
) -> None:
    """``t`` lives in one of ``buffers`` (on chip by default): the buffer part of
    :func:`check_compute_operand`, alone for a reader with its own partition rules (the TensorE
    partition broadcast of ``nl.broadcast_to`` reads one row at any partition)."""
    buffer = t.alloc.buffer
    if buffer.name not in buffers:
        rule = "compute-no-hbm" if buffer.is_hbm else f"{op}-buffer"
        raise BufferError(
            rule,
            f"{op} {what} must be in {' or '.join(buffers)}, got {t.describe()}"
            + (
                # AWS NKI docs, Memory hierarchy overview (NKI 0.3.0-0.6.0): "NKI kernel input
                # tensors from HBM must be loaded into the SBUF for computation"
                "; compute engines cannot access HBM (copy it in with nisa.dma_copy; AWS NKI "
                "docs, Memory hierarchy overview, NKI 0.3.0: HBM inputs must be loaded into "
                "SBUF for computation)"
                if buffer.is_hbm
                else ""
            ),
            site,
        )


def check_compute_operand(
    t: Any,
    op: str,
    what: str,
    site: Any,
    buffers: tuple[str, ...] = ("sbuf", "psum"),
    packed_ok: bool = False,
) -> NkiTensor:
    """A compute-engine operand: on chip (never HBM), in an allowed buffer, legal partitions.

    4-packed MX types (``float8_e4m3fn_x4``, ...) are refused unless ``packed_ok``: NKI 0.3.0
    defines them for nc_matmul_mx / quantize_mx on NeuronCore-v4 only, so on trn1 and trn2 they
    are storage (dma_copy, memset with value 0).
    """
    if type(t) is not NkiTensor:  # (every instruction's operands come here: the usual type first)
        t = as_tensor(t, op, what, site)
    if t.dtype in dtypes.PACKED_NAMES and not packed_ok:
        raise TargetError(
            "packed-x4-compute",
            f"{op} cannot read or write {t.describe()}: packed x4 types are consumed only by "
            "nc_matmul_mx / quantize_mx on NeuronCore-v4 (trn3); on trn1/trn2 they are storage "
            "(dma_copy, memset value=0)",
            site,
        )
    check_buffer(t, op, what, site, buffers)
    if not t.dims:
        raise ShapeError("rank", f"{op} {what} must have a partition dim: {t.describe()}", site)
    check_partitions(t, op, what, site, start_rules=True)
    if op != "nc_matmul":
        free = t.free_size
        if free > FREE_MAX:
            # AWS Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0): one Vector/Scalar
            # instruction covers at most 64K elements per partition; larger tiles must be
            # processed in chunks.
            raise ShapeError(
                "free-size-max",
                f"{op} {what} has {free} elements per partition; one instruction handles at "
                f"most {FREE_MAX}: {t.describe()}",
                site,
            )
    return t


def check_same_layout(a: NkiTensor, b: NkiTensor, op: str, names: str, site: Any) -> None:
    """AWS NKI docs, nki.isa (NKI 0.3.0): equal partition count and equal elements per partition."""
    if a.partitions != b.partitions or a.free_size != b.free_size:
        raise ShapeError(
            "element-count",
            f"{op} {names} need equal partition counts and elements per partition: "
            f"{a.describe()} ({a.partitions} x {a.free_size}) vs {b.describe()} "
            f"({b.partitions} x {b.free_size})",
            site,
        )


def check_reduces_elements(t: NkiTensor, count: int, op: str, what: str, site: Any) -> None:
    """A reduction reads at least one element for each value it writes. No page of the reducing
    instructions (nki.isa.tensor_reduce, tensor_scalar_reduce, activation's reduce_res,
    select_reduce, tensor_partition_reduce; NKI 0.3.0-0.6.0) defines a reduction over none, and a
    maximum or minimum of nothing has no value; an empty tile elsewhere is a no-op (its
    instruction writes nothing), but a reduction still writes its result."""
    if count == 0:
        raise ShapeError(
            "reduce-empty",
            f"{op} reduces {what} of {t.describe()}, which has no elements to reduce: no page "
            "defines the value of an empty reduction (a maximum of nothing has none)",
            site,
        )


def check_vector_operand(x: Any, data: NkiTensor, op: str, what: str, site: Any) -> Any:
    """A per-partition scalar: a Python number or a ``(P, 1)`` on-chip tensor (AWS NKI docs,
    nki.isa.tensor_scalar (NKI 0.3.0))."""
    if isinstance(x, NkiTensor):
        check_compute_operand(x, op, what, site)
        if x.partitions != data.partitions or x.free_size != 1:
            raise ShapeError(
                "vector-operand-shape",
                f"{op} {what} must be a ({data.partitions}, 1) tensor (one value per partition), "
                f"got {x.describe()}",
                site,
            )
        return x
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.number)):
        raise TypeError(f"{op}: {what} must be a number or a (P, 1) tensor, got {x!r}{site_suffix(site)}")
    return x


def scalar_reader(x: Any, site: Any) -> Any:
    """A zero-argument function returning the operand as float32 (P,1) array or scalar."""
    if isinstance(x, NkiTensor):
        operand = x.operand(site)
        p = x.partitions
        return lambda: dtypes.to_f32(np.asarray(operand.read())).reshape(p, 1)
    value = F32(x)
    return lambda: value


def read_f32(arr: np.ndarray, p: int) -> np.ndarray:
    """``arr`` as float32 shaped ``(p, free)``: the engines' internal fp32 view of a ``p``-partition tile."""
    return dtypes.to_f32(np.asarray(arr)).reshape(p, -1)


def require_float_dst(t: NkiTensor, op: str, site: Any) -> None:
    if not dtypes.is_float(t.dtype):
        raise DtypeError("dtype", f"{op} needs a float dst, got {t.describe()}", site)


def bool_parameters(fn: Callable[..., Any]) -> tuple[tuple[int, str], ...]:
    """``(position, name)`` of each parameter of ``fn`` annotated ``bool``: the on/off switches
    of an ``nisa`` instruction (``reverse0``, ``negate``, ``keepdims``, ``is_transpose``,
    ``reverse_pred``...), each documented with a ``False`` default. Read once per instruction
    when it is wrapped (:func:`trncore.sim.isa_instruction.returning_handle`)."""
    return tuple(
        (k, p.name)
        for k, p in enumerate(inspect.signature(fn).parameters.values())
        if p.annotation in ("bool", bool)
    )


def check_bool_arguments(
    api: str, flags: tuple[tuple[int, str], ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """A TypeError at the kernel's line unless each switch in ``flags`` that the call passes is a
    bool (a Python or NumPy bool).

    AWS's pages give these parameters a ``False`` default and describe them as true/false; AWS's
    NKI front end (KLR, leanprover/KLR at 7ccd18c, ``KLR/Trace/FromNKI.lean``, ``FromNKI Bool``)
    takes only a boolean for them and refuses an int or a string ("expecting 'boolean'"). Python's
    truthiness would read ``is_transpose="False"`` as True and run a different instruction
    (docs/emulator.md, Readings chosen)."""
    n = len(args)
    for k, name in flags:
        if k < n:
            value = args[k]
        elif name in kwargs:
            value = kwargs[name]
        else:
            continue
        if value.__class__ is bool or isinstance(value, np.bool_):
            continue
        site = user_site()
        # a switch the target release does not have is that release's error, whatever its value
        row = f"nisa.{api}({name}=)"
        try:
            versions.change(row)
        except KeyError:
            pass  # (a switch of every release)
        else:
            versions.require(row, site)
        raise TypeError(
            f"nki.isa.{api}: {name} must be a bool (True or False), got {value!r}{site_suffix(site)}"
        )
