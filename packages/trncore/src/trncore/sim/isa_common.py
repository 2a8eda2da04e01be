"""Enums and helpers shared by the ``nki.isa`` instruction modules (AWS NKI docs, nki.isa, NKI 0.3.0)."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.alu import (
    Op,
)
from trncore.sim.context import current, user_site
from trncore.sim.errors import (
    BufferError,
    LanguageError,
)
from trncore.sim.tensor import NkiTensor


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


class matmul_perf_mode(enum.IntEnum):
    none = 0
    double_row = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


def _begin() -> tuple[Any, tuple[str, int] | None]:
    return current(), user_site()


def _elementwise_meta(t: NkiTensor, **extra: Any) -> dict[str, Any]:
    return {"partitions": t.partitions, "free": t.free_size, **extra}


def _writer(dst: NkiTensor, site: Any) -> Any:
    operand = dst.operand(site)
    name = dst.dtype
    shape = dst.shape

    def write(values: np.ndarray) -> None:
        operand.write(dtypes.cast(np.asarray(values).reshape(shape), name))

    return write


def _pick_engine(requested: Any, default: engine) -> engine:
    eng = engine(int(requested)) if requested is not None else engine.unknown
    if eng == engine.unknown:
        eng = default
    return eng


def _check_gpsimd_psum(eng: engine, op: str, site: Any, *tensors: NkiTensor) -> None:
    if eng == engine.gpsimd:
        for t in tensors:
            if t.buffer.name == "psum":
                raise BufferError(
                    "gpsimd-no-psum", f"{op} on GpSimd cannot access PSUM: {t.describe()}", site
                )


def _op_token(op: Any, name: str, site: Any, allowed: dict[str, Op]) -> Op:
    if isinstance(op, Op) and op.name in allowed and allowed[op.name] is op:
        return op
    if isinstance(op, Op) and op.name in allowed:
        return allowed[op.name]
    raise LanguageError(
        "op-token",
        f"{name}={op!r} is not legal here; allowed: {', '.join('nl.' + k for k in allowed)}",
        site,
    )
