"""Allocating a tensor and filling it at creation: the layer under ``nl``'s creation functions.

``nl.ndarray``/``nl.zeros``/``nl.shared_identity_matrix`` (:mod:`trncore.sim.language`), the
results of the ``nl`` compute wrappers (:mod:`trncore.sim.wrappers`), ``nl.copy`` and
``nl.shared_constant`` (:mod:`trncore.sim.hbm_constants`) all allocate through :func:`allocate`,
which checks the rules of ``nl.ndarray`` (AWS NKI docs, nki.language.ndarray, NKI 0.3.0):
partition dimension, PSUM bank size, explicit addresses. It lives below the ``nl`` namespace so
that those modules share it without reaching into each other's private names.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.context import current, user_site
from trncore.sim.errors import CapacityError, LanguageError, PartitionError
from trncore.sim.tensor import PSUM, SBUF, Buffer, NkiTensor

__all__ = ["allocate", "fill", "fill_array"]


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(map(int, shape))


def allocate(
    shape: Any, dtype: Any, buffer: Any, name: str, init: Any, address: Any = None
) -> NkiTensor:
    """A new tensor of ``shape``/``dtype`` in ``buffer``, ``init`` its fill on every replay
    ("sentinel": NaN/4 like the vendor simulator, a number, or "constant"), checked against the
    target's partition, PSUM-bank and address rules at the kernel's line."""
    ctx = current()
    site = user_site()
    if isinstance(buffer, str):
        raise LanguageError(
            "buffer-string",
            f"buffer={buffer!r}: NKI 0.3.0 rejects string buffer names; use "
            "nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm",
            site,
        )
    if not isinstance(buffer, Buffer):
        raise TypeError(f"buffer must be nl.sbuf/nl.psum/nl.hbm/nl.shared_hbm, got {buffer!r}")
    shape = _shape(shape)
    name_dt = dtypes.dtype_name(dtype)
    on_chip = buffer.on_chip
    rules = ctx.rules
    if on_chip:
        if not shape:
            raise PartitionError("partition-dim", "on-chip tensors need a partition dim", site)
        if shape[0] > rules.pmax:
            raise PartitionError(
                "partition-dim-max",
                f"Size of partition dimension {shape[0]} exceeds architecture limitation of "
                f"{ctx.rules.pmax}: nl.ndarray({list(shape)}, {name_dt}, buffer={buffer!r})",
                site,
            )
    if buffer is PSUM:
        # A PSUM tensor may span several 2 KiB banks, up to the partition's 16 KiB (8 banks): AWS's
        # kernel library allocates [128, 1024] float32 PSUM tensors and fills them 512 columns per
        # matmul; the tiling overview (NKI 0.3.0-0.6.0) leaves breaking tensors into tiles to the
        # programmer, and the architecture guide's reason for a one-bank tile is the matmul's
        # output ("each nc_matmul can only write to a single PSUM bank"), checked at each
        # nc_matmul / TensorE transpose (trncore.sim.isa_tensor_engine).
        per_partition = math.prod(shape[1:]) * dtypes.itemsize(name_dt)
        psum_bytes = ctx.rules.psum_bank_bytes * ctx.rules.psum_banks
        if per_partition > psum_bytes:
            raise CapacityError(
                "psum-tensor-size",
                f"PSUM tensor {list(shape)} {name_dt} needs {per_partition} bytes per partition; "
                f"PSUM holds {psum_bytes} ({ctx.rules.psum_banks} banks of "
                f"{ctx.rules.psum_bank_bytes})",
                site,
            )
        if address is not None and int(address[1]) % ctx.rules.psum_bank_bytes:
            raise CapacityError(
                "psum-address-bank",
                f"PSUM address {address} does not start at a 2 KiB bank",
                site,
            )
    placed = None
    if address is not None and on_chip:
        placed = (int(address[0]), int(address[1]))
    tensor = ctx.allocate(shape, name_dt, buffer, name or "", init, site, placed)
    if placed is not None:
        # nl.ndarray address=(partition_offset, free_offset) (NKI 0.3.0): the tile occupies
        # partitions [offset, offset + shape[0]); SBUF capacity is counted per partition.
        start = placed[0]
        if start < 0 or start + shape[0] > rules.pmax:
            raise PartitionError(
                "address-partition",
                f"address {tuple(address)} puts {shape[0]} partitions at {start}, past partition "
                f"{ctx.rules.pmax - 1}",
                site,
            )
        alloc = tensor.alloc
        alloc.partition_start = start
        if buffer is SBUF:
            byte = placed[1]
            end = byte + alloc.row_elems * dtypes.itemsize(name_dt)  # row_elems: prod(shape[1:])
            if byte < 0 or end > rules.sbuf_bytes:
                raise CapacityError(
                    "address-range",
                    f"address {tuple(address)} places {list(shape)} {name_dt} at bytes "
                    f"[{byte}, {end}) of each partition; SBUF has {ctx.rules.sbuf_bytes} on "
                    f"{ctx.target}",
                    site,
                )
            alloc.address_bytes = byte
        elif buffer is PSUM:
            # explicit PSUM addresses name banks (2 KiB each); tiles sharing one share the bank
            alloc.address_bytes = placed[1]
    return tensor


def fill(t: NkiTensor, value: float) -> None:
    """nl.zeros/ones/full lower to a memset (GpSimd for SBUF, Vector for PSUM)."""
    ctx, site = current(), user_site()
    filled = dtypes.cast(np.full(t.shape, value, dtype=np.float32), t.dtype)
    arr = t.array()

    def run() -> None:
        arr[...] = filled

    ctx.emit(
        "memset", "vector", site, [], [t], run, {"partitions": t.partitions, "free": t.free_size}
    )


def fill_array(t: NkiTensor, values: np.ndarray) -> None:
    """Write ``values`` into the new tensor ``t`` (``nl.shared_identity_matrix``: a GpSimd iota)."""
    ctx, site = current(), user_site()
    filled = dtypes.cast(values.reshape(t.shape), t.dtype)
    arr = t.array()

    def run() -> None:
        arr[...] = filled

    ctx.emit(
        "iota", "gpsimd", site, [], [t], run, {"partitions": t.partitions, "free": t.free_size}
    )
