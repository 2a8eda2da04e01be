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
from trncore.sim.checks import MISS, lookup, remember
from trncore.sim.context import current, user_site
from trncore.sim.errors import CapacityError, LanguageError, PartitionError
from trncore.sim.tensor import PSUM, SBUF, Buffer, Layout, NkiTensor, layout

__all__ = ["PartitionDim", "allocate", "fill", "fill_array"]


class PartitionDim(int):
    """The size ``nl.par_dim(n)`` returns: an int that remembers it was marked as the partition
    dim, so that an allocation can tell Beta 1's block dimensions (a shape with the mark after
    its first dim) from a plain shape. Behaves as ``n`` everywhere else."""


def _block_dimensions(shape: Any, site: Any) -> None:
    """Refuse ``nl.par_dim`` after the first dim of a shape: Beta 1's block dimensions.

    NKI Beta 2 migration guide (SDK 2.29, NKI 0.3.0), "Translation of Block Dimensions": a
    tensor "with a partition dimension set to any position other than the left-most position"
    has a block dimension, which "has been removed"; the NKI block dimension migration guide
    shows the two rewrites. Read as a plain shape, ``(8, nl.par_dim(128), 512)`` would be a
    tile of 8 partitions, so the emulator does not read it at all.
    """
    if isinstance(shape, (int, np.integer)) or not isinstance(shape, (tuple, list)):
        return
    for i, size in enumerate(shape[1:], 1):
        if type(size) is PartitionDim:
            raise LanguageError(
                "block-dimension",
                f"shape {tuple(int(d) for d in shape)} marks dim {i} with nl.par_dim: Beta 1's "
                "block dimensions (dims before the partition dim) were removed (NKI Beta 2 "
                "migration guide, Translation of Block Dimensions); put the partition dim first "
                f"and fold the block dims into the free dims, nl.ndarray(({int(size)}, ...)), or "
                "keep a Python list of tiles",
                site,
            )


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
    # the checks read only these arguments and the target: decided once per kernel line and
    # arguments (a loop allocating the same tile each iteration), strictly by type and value
    # (an unhashable argument, a list shape, is checked on every call)
    key = ("nl.ndarray", site, type(shape), shape, type(dtype), dtype, buffer, address)
    key, hit = lookup(ctx, key)
    if hit is MISS:  # (no lambda made on a hit: a modular allocator allocates ~50 000 tiles)
        hit = remember(ctx, key, _checks(ctx, site, shape, dtype, buffer, address))
    shape, name_dt, placed, start, address_bytes, sizes = hit
    tensor = ctx.allocate(shape, name_dt, buffer, name or "", init, site, placed, sizes)
    if placed is not None:
        # nl.ndarray address=(partition_offset, free_offset) (NKI 0.3.0): the tile occupies
        # partitions [offset, offset + shape[0]); SBUF capacity is counted per partition.
        alloc = tensor.alloc
        alloc.partition_start = start
        alloc.address_bytes = address_bytes
    return tensor


#: what :func:`_checks` returns: shape, dtype name, placement, first partition, byte address,
#: and the :func:`trncore.sim.tensor.layout` of the shape and dtype
Checked = tuple[tuple[int, ...], str, "tuple[int, int] | None", int, "int | None", Layout]


def _checks(ctx: Any, site: Any, shape: Any, dtype: Any, buffer: Any, address: Any) -> Checked:
    """The rules of ``nl.ndarray`` (partition dim, PSUM size and bank, explicit address): the
    shape, the dtype's name, the placement ``(partition, byte)`` or None, its first partition,
    the explicit byte address (None for HBM, or an on-chip tile placed by the emulator) and the
    sizes every allocation of this shape and dtype computes (:func:`layout`, a function of the
    shape and dtype only, both in the memo's key)."""
    checked = _rules(ctx, site, shape, dtype, buffer, address)
    return (*checked, layout(checked[0], checked[1]))


def _rules(
    ctx: Any, site: Any, shape: Any, dtype: Any, buffer: Any, address: Any
) -> tuple[tuple[int, ...], str, tuple[int, int] | None, int, int | None]:
    """:func:`_checks` without the layout."""
    if isinstance(buffer, str):
        raise LanguageError(
            "buffer-string",
            f"buffer={buffer!r}: NKI 0.3.0 rejects string buffer names; use "
            "nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm",
            site,
        )
    if not isinstance(buffer, Buffer):
        raise TypeError(f"buffer must be nl.sbuf/nl.psum/nl.hbm/nl.shared_hbm, got {buffer!r}")
    _block_dimensions(shape, site)
    shape = _shape(shape)
    name_dt = dtypes.dtype_name(dtype)
    on_chip = buffer.on_chip
    if not shape and not on_chip:
        # no page gives a tensor without dims; AWS's NKI front end refuses every empty shape
        # ("invalid shape", leanprover/KLR KLR/Trace/FromNKI.lean @7ccd18c: a shape is a
        # partition dim and free dims), as the emulator refuses it on chip (partition-dim)
        raise LanguageError(
            "ndarray-shape",
            f"a {name_dt} tensor of shape () in {buffer!r}: an NKI tensor has at least one dim "
            "(write (1,) for one element)",
            site,
        )
    rules = ctx.rules
    if on_chip:
        if not shape:
            raise PartitionError("partition-dim", "on-chip tensors need a partition dim", site)
        if shape[0] > rules.pmax:
            raise PartitionError(
                "partition-dim-max",
                f"Size of partition dimension {shape[0]} exceeds architecture limitation of "
                f"{ctx.rules.pmax}: a {list(shape)} {name_dt} tile in {buffer!r}",  # allocated or a result
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
    if address is None or not on_chip:
        return shape, name_dt, None, 0, None
    placed = (int(address[0]), int(address[1]))
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
    if buffer is SBUF:
        byte = placed[1]
        end = byte + math.prod(shape[1:]) * dtypes.itemsize(name_dt)  # bytes per partition
        if byte < 0 or end > rules.sbuf_bytes:
            raise CapacityError(
                "address-range",
                f"address {tuple(address)} places {list(shape)} {name_dt} at bytes "
                f"[{byte}, {end}) of each partition; SBUF has {ctx.rules.sbuf_bytes} on "
                f"{ctx.target}",
                site,
            )
        return shape, name_dt, placed, start, byte
    # explicit PSUM addresses name banks (2 KiB each); tiles sharing one share the bank
    return shape, name_dt, placed, start, placed[1] if buffer is PSUM else None


def fill(t: NkiTensor, value: float) -> None:
    """nl.zeros/ones/full lower to a memset (GpSimd for SBUF, Vector for PSUM).

    An integer tile gets ``value`` as a number, as ``nisa.memset`` writes it (the NKI 0.3.0
    update guide has integer tiles take integer literals; ``nki.language.full``, NKI 0.3.0 and
    0.6.0: a tensor of ``dtype`` "filled with initial value"): an int32/uint32 constant past
    2^24 is not rounded to float32 on the way (``0x9E3779B9`` stayed ``0x9E377A00`` until the
    thirty-first third-party batch). A float tile keeps the float32 value."""
    ctx, site = current(), user_site()
    source = np.float64 if dtypes.is_int(t.dtype) else np.float32
    filled = dtypes.cast(np.full(t.shape, value, dtype=source), t.dtype)
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
