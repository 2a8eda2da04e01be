"""Operand checks shared by the ISA instructions (AWS NKI docs, nki.isa; AWS NKI docs, Indexing overview
(NKI 0.3.0); docs/emulator.md, What is checked)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.errors import BufferError, DtypeError, PartitionError, ShapeError, TargetError
from trncore.sim.tensor import NkiTensor

__all__ = [
    "as_tensor",
    "check_compute_operand",
    "check_same_layout",
    "check_vector_operand",
    "read_f32",
]

F32 = np.float32
FREE_MAX = 65536


def as_tensor(x: Any, op: str, what: str, site: Any) -> NkiTensor:
    """``x`` itself when it is an NKI tensor; a ``TypeError`` naming ``op``/``what`` otherwise."""
    if not isinstance(x, NkiTensor):
        raise TypeError(f"{op}: {what} must be an NKI tensor, got {type(x).__name__} (at {site})")
    return x


def check_partitions(t: NkiTensor, op: str, what: str, site: Any, start_rules: bool) -> None:
    """AWS NKI docs, Indexing overview (NKI 0.3.0); AWS Trainium/Inferentia2 Architecture Guide for NKI
    (NKI 0.3.0): at most 128 partitions; compute engines obey the start-partition rules."""
    p = t.partitions
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
        if start not in allowed:
            raise PartitionError(
                "start-partition",
                f"{op} {what} spans {p} partitions starting at partition {start}; a compute "
                f"engine access of {p} partitions must start at one of {allowed} (AWS Trainium/Inferentia2 "
                f"Architecture Guide for NKI, NKI 0.3.0): "
                f"{t.describe()}",
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
    buffer = t.alloc.buffer
    if buffer.name not in buffers:
        rule = "compute-no-hbm" if buffer.is_hbm else f"{op}-buffer"
        raise BufferError(
            rule,
            f"{op} {what} must be in {' or '.join(buffers)}, got {t.describe()}"
            + (
                "; compute engines cannot access HBM (copy it in with nisa.dma_copy)"
                if buffer.is_hbm
                else ""
            ),
            site,
        )
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
        raise TypeError(f"{op}: {what} must be a number or a (P, 1) tensor, got {x!r} (at {site})")
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
