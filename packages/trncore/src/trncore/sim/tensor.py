"""Buffers, allocations and tensor views (AWS NKI Language Guide (NKI 0.3.0); AWS NKI docs, Indexing overview
(NKI 0.3.0); AWS NKI Access Patterns deep dive (NKI 0.3.0)).

Every tensor is stored as one flat NumPy array (its *allocation*). A view is an access pattern
over that flat array: an element offset plus ``(step, num)`` pairs, exactly the ``.ap()`` model of
the AWS NKI Access Patterns deep dive (NKI 0.3.0). Slicing, integer indexing, ``nl.ds``, ``...``, ``reshape``,
``view`` and ``ap`` all produce such patterns, checked against the allocation's bounds when created (NumPy
would clip a slice silently; the emulator raises :class:`BoundsError`). A view resolves to a NumPy strided
view of the storage once, at trace time; replay reuses it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from trncore.sim import dtypes, hooks
from trncore.sim.arrays import dense, extent, strided_view
from trncore.sim.context import user_site
from trncore.sim.dtypes import RAW_VIEW as _RAW_VIEW
from trncore.sim.errors import BoundsError, HostReadError, LanguageError, PartitionError, site_suffix, warn_at

__all__ = [
    "SENTINEL_INT", "Allocation", "Buffer", "Layout", "NkiTensor", "Operand", "dims_cover", "layout",
]

#: AWS NKI docs, NKI CPU Simulator (NKI 0.3.0): the vendor simulator fills new integer tensors with 4 (floats
#: with NaN).
SENTINEL_INT = 4


class Buffer:
    """A memory region: nl.sbuf, nl.psum, nl.private_hbm (= nl.hbm) or nl.shared_hbm."""

    __slots__ = ("is_hbm", "name", "on_chip")

    def __init__(self, name: str) -> None:
        self.name = name
        # plain attributes, decided once (asked for several times per instruction and per
        # allocation: ~400 000 times in one large nkilib kernel, where a property cost 15 %
        # of allocating a tile)
        #: Whether this is an on-chip buffer (SBUF or PSUM), reachable by the compute engines.
        self.on_chip: bool = name in ("sbuf", "psum")
        #: Whether this is device memory (private or shared HBM), reachable only by DMA.
        self.is_hbm: bool = name in ("private_hbm", "shared_hbm")

    def __repr__(self) -> str:
        return f"nl.{self.name}"


SBUF = Buffer("sbuf")
PSUM = Buffer("psum")
PRIVATE_HBM = Buffer("private_hbm")
SHARED_HBM = Buffer("shared_hbm")


#: What every allocation of one shape and dtype computes: (bytes, elements, elements per
#: partition, the NumPy storage dtype)
Layout = tuple[int, int, int, np.dtype]


def layout(shape: tuple[int, ...], dtype: str) -> Layout:
    """The :data:`Layout` of a tensor of ``shape`` and NKI ``dtype`` (a function of the two
    only: callers that allocate the same shape and dtype again keep it, see
    trncore.sim.creation)."""
    np_dtype = dtypes.storage_dtype(dtype)
    size = math.prod(shape)
    return size * np_dtype.itemsize, size, math.prod(shape[1:]), np_dtype


class _Lifetime:
    """The token every view of a recyclable tile holds (and nothing else holds strongly).

    It dies with the tile's last view, which is the moment no Python object can name the tile
    any more, and then hands the allocation to ``callback`` (storage recycling,
    :meth:`trncore.sim.program.TraceContext.allocate`). One object per tile, instead of a weak
    reference per view: a kernel makes a view for nearly every operand of every instruction.
    """

    __slots__ = ("__weakref__", "alloc", "callback")

    def __init__(self, alloc: Allocation, callback: Any) -> None:
        self.alloc = alloc
        self.callback = callback

    def __del__(self) -> None:
        callback, self.callback = self.callback, None
        if callback is not None:
            callback(self.alloc)


class Allocation:
    """One allocated tensor: flat storage plus what the checks and the cost model need."""

    # (slots: AWS's modular allocator makes tens of thousands of these per trace)
    __slots__ = (
        "_arrays", "_life", "_mask", "_mm_flags", "_track_flags", "_views", "address_bytes", "buffer",
        "dtype", "fill_marker", "first_use", "flat", "id", "init", "is_input", "last_use", "name",
        "partition_start", "position", "read_since_matmul", "row_elems", "shape", "site", "size",
        "flags_summary", "storage", "tracks_mask",
    )  # fmt: skip

    def __init__(
        self,
        ident: int,
        buffer: Buffer,
        dtype: str,
        shape: tuple[int, ...],
        name: str,
        site: tuple[str, int] | None,
        init: Any,
        position: int,
        strict: bool,
        storage: np.ndarray | None = None,
        sizes: Layout | None = None,
    ) -> None:
        if sizes is None:
            sizes = layout(shape, dtype)
        self.id = ident
        self.buffer = buffer
        self.dtype = dtype
        self.shape = shape
        self.name = name
        self.site = site
        self.init = init  # "sentinel", "input" or the fill value of nl.zeros/ones/full
        self.position = position  # index of the next instruction when allocated
        self.partition_start = 0  # first partition on chip (nl.ndarray address=(partition, byte))
        self.address_bytes: int | None = None  # explicit byte offset in each partition, if given
        self.last_use = position
        self.first_use: int | None = None  # first instruction touching it (live range start)
        nbytes, self.size, row_elems, np_dtype = sizes
        #: elements per partition (row) in the allocation's own dtype; asked for by every
        #: partition check of every instruction
        self.row_elems = row_elems
        if storage is None:
            storage = np.empty(nbytes, dtype=np.uint8)
        self.storage = storage  # raw bytes; may be recycled storage of a dead allocation
        self.flat = storage.view(np_dtype)
        self._views: dict[str, np.ndarray] | None = None  # reinterpretations made so far
        #: the strided arrays of its views made so far, by (dtype, offset, dims): a kernel's
        #: loop names the same region of a tile again and again (``psum[0:m, 0:n]`` in every
        #: step of a matmul chain), each time through a new view (:meth:`NkiTensor.array`)
        self._arrays: dict[tuple[Any, ...], np.ndarray] | None = None
        # The strict-mode written mask and, for PSUM, the per-element "written by nc_matmul since
        # the last other write" flags (docs/emulator.md, What is checked) are made on first use:
        # nkilib's modular allocator declares tens of thousands of logical tiles of which most
        # are never touched, and zeroing their bookkeeping was the largest cost of allocation.
        # Made later, they start as they would have: nothing written, every matmul flag at the
        # tile's summary (clear until a matmul writes the whole tile; see flags_summary).
        #: whether the strict-mode written mask is kept (false: :attr:`mask` is None, and
        #: ``emit`` skips the mask bookkeeping of a write with one test)
        self.tracks_mask = strict
        self._mask: np.ndarray | None = None
        self._track_flags = buffer is PSUM
        self._mm_flags: np.ndarray | None = None
        #: what every matmul flag is, when known: False all clear (so before they are made),
        #: True all set, None mixed or not known (then the flags themselves tell); kept by
        #: NkiTensor.set_matmul_flags, read by NkiTensor.matmul_flag_state. While it is a bool
        #: the flags need not exist: they are made (from it) only when a write covers part of
        #: the tile, so a PSUM tile only ever written whole (AWS's bank-sized accumulators, one
        #: new tile per allocation) never allocates them
        self.flags_summary: bool | None = False
        self.read_since_matmul = False
        self.is_input = False
        #: the lifetime token of a recyclable tile, weakly (see :meth:`die_with_views`)
        self._life: weakref.ref[_Lifetime] | None = None
        #: the allocation marker whose sentinel fill waits for the first instruction touching
        #: the tile (trncore.sim.program.TraceContext.emit decides it there)
        self.fill_marker: Any = None

    def die_with_views(self, first: NkiTensor, callback: Any) -> None:
        """Call ``callback(self)`` once ``first`` and every view made of this tile later are gone.

        ``first`` is the tile's first view (made before this call, none made before it); each
        view holds the tile's :class:`_Lifetime` token, which dies with the last of them.
        """
        token = _Lifetime(self, callback)
        self._life = weakref.ref(token)
        first._life = token

    @property
    def mask(self) -> np.ndarray | None:
        """The strict-mode per-element written mask (None when not tracked)."""
        if self._mask is None and self.tracks_mask:
            self._mask = np.zeros(self.size, dtype=bool)
        return self._mask

    @mask.setter
    def mask(self, value: np.ndarray | None) -> None:
        # None stops the tracking (a recycled tile, a finished trace)
        self.tracks_mask = value is not None
        self._mask = value

    @property
    def mm_flags(self) -> np.ndarray | None:
        """The PSUM per-element matmul-written flags (None when not tracked); made on first use
        with every flag at the tile's summary (flags not made are all the summary, a bool)."""
        if self._mm_flags is None and self._track_flags:
            self._mm_flags = np.full(self.size, self.flags_summary is True, dtype=bool)
        return self._mm_flags

    @mm_flags.setter
    def mm_flags(self, value: np.ndarray | None) -> None:
        self._track_flags = value is not None
        self._mm_flags = value
        self.flags_summary = False if value is None else None

    def stop_tracking(self) -> None:
        """``mask = None`` and ``mm_flags = None`` in one step (a recycled tile, whose storage
        goes to the next tile: every tile of a modular allocator's loop comes here)."""
        self.tracks_mask = False
        self._mask = None
        self._track_flags = False
        self._mm_flags = None
        self.flags_summary = False

    @property
    def flags_made(self) -> bool:
        """Whether the matmul flags exist yet (until then every flag is the summary)."""
        return self._mm_flags is not None

    def forget_arrays(self) -> None:
        """Drop the view arrays kept for reuse (:meth:`NkiTensor.array`), e.g. at the end of a trace."""
        self._arrays = None

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays this allocation holds now (storage, and the check bookkeeping made so far)."""
        return tuple(a for a in (self.storage, self._mask, self._mm_flags) if a is not None)

    @property
    def partition_bytes(self) -> int:
        """Bytes per partition on chip (``prod(shape[1:]) * itemsize``, AWS NKI tiling overview,
        NKI 0.3.0)."""
        return self.row_elems * dtypes.itemsize(self.dtype)

    def flat_as(self, dtype: str) -> np.ndarray:
        """The storage reinterpreted as ``dtype`` (``tensor.view``)."""
        if dtype == self.dtype or dtypes.storage_dtype(dtype) == self.flat.dtype:
            return self.flat
        views = self._views
        if views is None:
            views = self._views = {}
        if dtype not in views:
            views[dtype] = self.flat.view(dtypes.storage_dtype(dtype))
        return views[dtype]

    def label(self) -> str:
        """A readable description (name, buffer, shape, dtype, where allocated) for error messages."""
        where = f" allocated at line {self.site[1]}" if self.site else ""
        if self.is_input:
            where = " (kernel argument)"
        name = f"'{self.name}' " if self.name else ""
        return f"{name}{self.buffer.name}{list(self.shape)} {self.dtype}{where}"


def _row_major(shape: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The (step, count) pairs of a contiguous row-major ``shape``, outermost dim first."""
    dims, step = [], 1
    for n in reversed(shape):
        dims.append((step, int(n)))
        step *= int(n)
    return tuple(reversed(dims))


#: :func:`_row_major` of the shapes allocated so far: a whole-tensor view is made for every
#: allocation, and AWS's modular allocator allocates tiles of a few shapes tens of thousands
#: of times (the pairs are immutable tuples, safe to share between views)
_ROW_MAJOR: dict[tuple[int, ...], tuple[tuple[int, int], ...]] = {}



def dims_cover(dims: Sequence[tuple[int, int]], size: int) -> bool:
    """Whether an access pattern from offset 0 (``dims``: (step, count) per dim, in elements)
    names each of ``size`` elements exactly once: its counts multiply to ``size`` and its steps,
    sorted, are those of a mixed-radix count (1, then each step the product of the counts
    before it). A step-0 (broadcast) or overlapping pattern does not."""
    expected = 1
    for step, num in sorted(d for d in dims if d[1] != 1):
        if step != expected:
            return False
        expected *= num
    return expected == size


class Shape(tuple[int, ...]):
    """``t.shape``: a tuple of ints that also compares equal to a list of the same ints.

    AWS's guides compare shapes with lists as well as tuples: the NKI 0.3.0 indexing overview
    (SDK 2.29, "Basic Tensor Indexing": ``assert x[1].shape == [2, 2]``), the Access Patterns
    deep dive (``assert A.shape == [512, 512]``) and the performance guide (``in_tensor.shape ==
    out_tensor.shape == [128, 1024]``), and tuples elsewhere (the tiling overview's ``in_tensor.shape
    == (X_SIZE, Y_SIZE)``). Everything else is the tuple's: hashing (a shape is a dict key like the
    tuple it equals), indexing, unpacking, ``len``, ``+`` and slices (which give plain tuples),
    ordering, ``repr`` and NumPy's use of it. Only ``==`` / ``!=`` are written here, so only they
    cost a Python call; the emulator's own code reads the plain tuple (``NkiTensor._shape``)
    where it is hot."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return tuple.__eq__(self, tuple(other))
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if isinstance(other, list):
            return tuple.__ne__(self, tuple(other))
        return tuple.__ne__(self, other)

    __hash__ = tuple.__hash__


#: One :class:`Shape` per distinct shape read (kernels use few): ``t.shape`` is read by every
#: check of every instruction, so the property looks the shape up here instead of building it
_SHAPES: dict[tuple[int, ...], Shape] = {}


def _new_shape(shape: tuple[int, ...]) -> Shape:
    """The :class:`Shape` of ``shape``, remembered for the next read."""
    if len(_SHAPES) > 4096:
        _SHAPES.clear()  # bound the memory
    made = _SHAPES[shape] = Shape(shape)
    return made


def _warn_ap_offset_reading(site: Any, view_offset: int, offset: int) -> None:
    """Warn at the kernel's line that an explicit ``.ap(offset=...)`` on a view with its own
    offset is added to the view's offset. AWS's SDK 2.31-2.32 (NKI 0.5.0-0.6.0) texts differ here:
    the ``NkiTensor.ap`` reference ("element offset added to the view's base storage offset ...
    offset=0 keeps the base, offset=N shifts by N additional elements"), which the emulator
    follows, against the language guide ("Pass an explicit integer to override") and the Access
    Patterns deep dive ("from the beginning of the tensor"). A public kernel whose authors report
    ``k[b].ap(pattern, offset=...)`` verified on a device needs the reference's reading
    (docs/emulator.md, "Readings chosen"); the line names the other reading's start."""
    message = (
        f".ap(offset={offset}) on a view that starts at element {view_offset} of its tensor: "
        f"the emulator adds the offset to the view's (element {view_offset + offset}; the "
        f"NkiTensor.ap reference, NKI 0.5.0-0.6.0); the NKI language guide and Access Patterns "
        f"deep dive count it from the tensor's start (element {offset}). Pass the absolute "
        f"offset to the whole tensor's .ap() to mean the same under both readings"
    )
    warn_at(message, site, stacklevel=3)

#: What to write instead of a NumPy-style member NkiTensor lacks (see ``NkiTensor.__getattr__``).
_MISSING_HINTS = {
    "astype": "; a tile takes another dtype when copied into a tile of that dtype (nisa.tensor_copy, "
    "nisa.activation), or is read as another dtype of the same bytes with .view(dtype)",
}


class NkiTensor:
    """A tensor value: a view of one allocation (the emulator's ``NkiTensor``).

    Python operators on tensors are not part of NKI 0.3.0
    (a third-party field report, not confirmed by AWS's NKI docs); reading a tensor's data on the host
    (``bool(t)``, ``float(t)``, ``np.asarray(t)``) raises
    :class:`HostReadError`, because it would make control flow depend on data, which NKI 0.3.0 kernels cannot
    do.
    """

    __slots__ = (
        "_array", "_life", "_oob_skippable", "_shape", "_unchecked", "alloc", "dims", "dtype",
        "dynamic", "indexed", "offset",
    )  # fmt: skip
    #: True on a view offset by a VirtualRegister (set by ``.ap``/``select``; unset elsewhere, read
    #: with getattr): its bounds are a runtime address, skipped under ``oob_mode=skip``.
    _oob_skippable: bool

    def __init__(
        self,
        alloc: Allocation,
        dtype: str,
        offset: int,
        dims: Sequence[tuple[int, int]],
        indexed: bool = False,
        dynamic: Any = None,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        self.alloc = alloc
        self.dtype = dtype
        self.offset = offset
        self.dims = tuple(dims)
        # asked for by every check of every instruction (~1 M times in a large nkilib kernel);
        # ``shape`` (the dims' counts) when the caller has it already
        self._shape = tuple(n for _, n in self.dims) if shape is None else shape
        self.indexed = indexed
        self.dynamic = dynamic
        self._array: np.ndarray | None = None
        #: Set on an .ap() view whose bounds are checked when it is first read or written.
        self._unchecked: tuple[str, int] | None = None
        # (``_oob_skippable``, set only on views offset by a register, is read with getattr)
        # a view of a recyclable tile keeps the tile's lifetime token alive (Allocation.die_with_views)
        life = alloc._life
        self._life = life() if life is not None else None

    @classmethod
    def whole(cls, alloc: Allocation) -> NkiTensor:
        shape = alloc.shape
        dims = _ROW_MAJOR.get(shape)
        if dims is None:
            if len(_ROW_MAJOR) > 4096:
                _ROW_MAJOR.clear()  # bound the memory
            dims = _ROW_MAJOR[shape] = _row_major(shape)
        return cls(alloc, alloc.dtype, 0, dims, shape=shape)

    def is_whole_view(self) -> bool:
        """Whether this view has the pattern :meth:`whole` makes: every element of a non-empty
        allocation once, in order (``t[0:P, 0:F]`` of a whole tile, as a kernel names it, too).
        False says nothing (ask the pattern)."""
        alloc = self.alloc
        return (
            self.offset == 0
            and self.dtype == alloc.dtype
            and alloc.size > 0
            # (a whole view's dims are the shared tuple itself; a slice's compare equal)
            and self.dims == _ROW_MAJOR.get(alloc.shape)
        )

    # ---------------------------------------------------------------- attributes (AWS NKI Language Guide)
    @property
    def shape(self) -> tuple[int, ...]:
        """The view's shape (``t.shape``, AWS NKI Language Guide (NKI 0.3.0)); dim 0 is the partition dim on
        chip. A :class:`Shape`: a tuple that also equals a list of the same ints (typed as the
        tuple it is, so the emulator's code treats it as one)."""
        found = _SHAPES.get(self._shape)
        return found if found is not None else _new_shape(self._shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """Each dim's step in elements (``t.strides``; the element at index ``(i0, ..., in)`` is
        at ``offset + sum(strides[k] * ik)``, AWS NKI Language Guide, "Anatomy of a tensor",
        NKI 0.6.0); the steps of :meth:`get_pattern`."""
        return tuple(s for s, _ in self.dims)

    @property
    def ndim(self) -> int:
        """Number of dimensions of the view (``t.ndim``)."""
        return len(self.dims)

    @property
    def size(self) -> int:
        """Number of elements in the view (``t.size``)."""
        return math.prod(self._shape)

    @property
    def buffer(self) -> Buffer:
        """The memory region the tensor lives in (``t.buffer``: nl.sbuf, nl.psum, nl.hbm, ...)."""
        return self.alloc.buffer

    @property
    def on_chip(self) -> bool:
        """Whether the tensor is in SBUF or PSUM (so dim 0 is the partition dim)."""
        return self.alloc.buffer.on_chip

    @property
    def name(self) -> str:
        """The name given at allocation (``name=``), or ``''``."""
        return self.alloc.name

    def get_pattern(self) -> list[list[int]]:
        """The access pattern as ``[[step, num], ...]`` in elements, outermost dim first (AWS NKI Access
        Patterns deep dive (NKI 0.3.0))."""
        return [[s, n] for s, n in self.dims]

    @property
    def partitions(self) -> int:
        """Partition count of an on-chip view (dim 0)."""
        return self.dims[0][1] if self.dims else 1

    @property
    def free_size(self) -> int:
        """Elements per partition of an on-chip view."""
        shape = self._shape
        return shape[1] if len(shape) == 2 else math.prod(shape[1:])

    def start_partition(self) -> int:
        """The first partition this on-chip view touches (for the start-partition rules, AWS
        Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0))."""
        ppe = self._partition_elems()
        return self.offset // ppe if ppe else 0

    def _partition_elems(self) -> int:
        """Elements per partition of the allocation, in this view's dtype."""
        alloc = self.alloc
        if self.dtype == alloc.dtype:
            return alloc.row_elems
        scale = dtypes.itemsize(alloc.dtype) / dtypes.itemsize(self.dtype)
        return int(alloc.row_elems * scale)

    def describe(self) -> str:
        """The view and the tensor it belongs to, for error messages."""
        label = self.alloc.label()
        whole = (
            self.shape == self.alloc.shape and self.offset == 0 and self.dtype == self.alloc.dtype
        )
        if whole and not self.indexed:
            return label
        return f"view {list(self.shape)} {self.dtype} at element offset {self.offset} of {label}"

    def __repr__(self) -> str:
        return f"NkiTensor({self.describe()})"

    # ---------------------------------------------------------------- storage views
    def array(self) -> np.ndarray:
        """The strided NumPy view of this tensor's elements (static views only)."""
        if self._unchecked is not None:
            self._checked_at(self._unchecked)
        arr = self._array
        if arr is None:
            # the same pattern of the same storage is the same NumPy view: shared between the
            # views that name it (they are read and written through, never reshaped in place)
            alloc = self.alloc
            arrays = alloc._arrays
            if arrays is None:
                arrays = alloc._arrays = {}
            key = (self.dtype, self.offset, self.dims)
            arr = arrays.get(key)
            if arr is None:
                arr = arrays[key] = self._strided(alloc.flat_as(self.dtype))
            self._array = arr
        return arr

    def _strided(self, flat: np.ndarray) -> np.ndarray:
        shape = self._shape
        if 0 in shape:
            return np.empty(shape, dtype=flat.dtype)
        return strided_view(flat, self.offset, shape, [s for s, _ in self.dims])

    def mask_array(self) -> np.ndarray | None:
        """The strict-mode written-mask view (None when not tracked for this view)."""
        alloc = self.alloc
        if alloc.mask is None or self.dynamic is not None:
            return None
        if dtypes.itemsize(self.dtype) != dtypes.itemsize(alloc.dtype):
            return None  # reinterpreting views of another width are not tracked
        return self._strided(alloc.mask)

    def matmul_flag_state(self) -> bool | None:
        """Whether nc_matmul wrote every element of this static PSUM view since its last other
        write (True), none of them (False), or some (None): the accumulation rule's question
        (docs/emulator.md, What is checked). Answered from the tile's summary when it holds
        (every instruction of a matmul chain on one accumulator asks), else from the flags."""
        summary = self.alloc.flags_summary
        if summary is not None and self.size:
            return summary
        flags = self.flags_array()
        if not flags.any():
            return False
        return True if flags.all() else None

    def set_matmul_flags(self, value: bool) -> None:
        """Set (a matmul's write) or clear (any other write) the matmul flags of this static PSUM
        view, keeping the tile's summary: known after a write covering the whole tile, kept by a
        write agreeing with it, unknown otherwise. Flags already all ``value`` are left as they
        are (flags not made yet are all the summary). A write covering the tile sets the summary
        alone and lets go of the flags: every flag is ``value`` (:attr:`Allocation.mm_flags`
        remakes them from the summary if a partial write comes later)."""
        alloc = self.alloc
        summary = alloc.flags_summary
        if summary is value:
            return  # every flag already holds value
        if self.covers_allocation():
            alloc._mm_flags = None  # (tracking goes on: _track_flags is unchanged)
            alloc.flags_summary = value
            return
        self.flags_array()[...] = value
        alloc.flags_summary = None

    def covers_allocation(self) -> bool:
        """Whether this static view names every element of its allocation exactly once: offset
        0, the allocation's element width and count, and steps (sorted) of a mixed-radix count."""
        if self.offset != 0:
            return False
        if self.is_whole_view():
            return True  # (the usual case: no sort)
        alloc = self.alloc
        if dtypes.itemsize(self.dtype) != dtypes.itemsize(alloc.dtype):
            return False
        return dims_cover(self.dims, alloc.size)

    def flags_array(self) -> np.ndarray:
        """The PSUM matmul-written flags view (static PSUM views only)."""
        flags = self.alloc.mm_flags
        assert flags is not None, "matmul flags exist only for PSUM tensors"
        return self._strided(flags)

    def operand(self, site: tuple[str, int] | None, oob_skip: bool = False) -> Operand:
        """A read/write accessor; dynamic views compute their offsets at run time."""
        if self.dynamic is None:
            if self._unchecked is not None:
                if oob_skip and getattr(self, "_oob_skippable", False):
                    # A view offset by a VirtualRegister addresses memory at a runtime value:
                    # under oob_mode=skip an access out of bounds is skipped, as nki.isa.dma_copy
                    # (NKI 0.3.0-0.6.0) skips "the DMA transfer for a given dynamic address or
                    # index when it is out of bound" (the deep dive's scalar_offset may be "an
                    # SBUF tensor of shape (1, 1) or a VirtualRegister", NKI 0.6.0).
                    try:
                        self._check_bounds(site)
                    except BoundsError:
                        return SKIPPED  # type: ignore[return-value]
                self._checked_at(site)
            return Operand(self.array())
        return self.dynamic.operand(self, site, oob_skip)

    def _checked_at(self, site: Any) -> None:
        self._check_bounds(site)
        self._unchecked = None

    # ---------------------------------------------------------------- indexing (AWS NKI Indexing overview)
    def _check_bounds(self, site: Any = None) -> None:
        """The static access (offset and pattern; a dynamic view's offset tensor is not read)
        lies inside the allocation and, on chip, inside its partitions' rows."""
        if self.size == 0:
            return
        problem = self.partition_row_problem(self.offset)
        if problem:
            raise BoundsError("access-in-bounds", problem, site or user_site())
        below, above = extent(self.dims)
        lo, hi = self.offset + below, self.offset + above
        limit = self.alloc.flat_as(self.dtype).size
        if lo < 0 or hi >= limit:
            raise BoundsError(
                "access-in-bounds",
                f"access pattern offset={self.offset} pattern={self.get_pattern()} reaches flat "
                f"elements [{lo}, {hi}] of {self.alloc.label()}, which has {limit} elements",
                site or user_site(),
            )

    def partition_row_problem(self, offset: int) -> str:
        """Why an on-chip access at ``offset`` leaves its partitions' rows ('' when it does not).

        SBUF/PSUM data of a partition lives in that partition: a free-dim access past the end of
        a partition's row reads another tensor's memory, not the next partition
        (AWS NKI tiling overview, NKI 0.3.0), even though the flattened index
        (AWS NKI Access Patterns deep dive (NKI 0.3.0)) would still be inside the tensor.
        """
        if not self.alloc.buffer.on_chip or not self.dims:
            return ""
        ppe = self._partition_elems()
        step, parts = self.dims[0]
        free_dims = self.dims[1:] if (step == ppe or parts == 1) else self.dims
        if free_dims is self.dims:
            return ""  # not a partition-major pattern; the flat check above applies
        first_part, start = divmod(offset, ppe) if ppe else (0, 0)
        below, above = extent(free_dims)
        lo, hi = start + below, start + above
        if lo < 0 or hi >= ppe or first_part + parts > self.alloc.shape[0]:
            return (
                f"access at offset {offset} with pattern {self.get_pattern()} covers free "
                f"elements [{lo}, {hi}] of partitions {first_part}..{first_part + parts - 1} of "
                f"{self.alloc.label()}, whose partitions hold {ppe} elements each"
            )
        return ""

    def __getitem__(self, key: Any) -> NkiTensor:
        if self.dynamic is not None:
            raise LanguageError(
                "index-dynamic-view", "cannot index a view with a dynamic offset", user_site()
            )
        if type(key) is tuple and len(key) == len(self.dims):
            # The common keys: per dim a unit-step slice with int (or no) bounds inside the dim,
            # or an int inside it (`t[:, k, :]`). Anything else (a step, '...', a negative or
            # out-of-range bound, a non-int bound) takes the general path below, which checks
            # and reports it; this path builds the same view the general path would.
            on_chip = self.alloc.buffer.on_chip
            offset = self.offset
            fast: list[tuple[int, int]] = []
            counts: list[int] = []
            dropped: tuple[int, int] | None = None
            for k, dim in zip(key, self.dims):
                if type(k) is slice:
                    if k.step is not None:
                        break
                    start, stop = k.start, k.stop
                    if start is None:
                        start = 0
                    elif type(start) is not int:
                        break
                    if stop is None:
                        stop = dim[1]
                    elif type(stop) is not int:
                        break
                    if not 0 <= start <= stop <= dim[1]:
                        break
                    offset += start * dim[0]
                    fast.append((dim[0], stop - start))
                    counts.append(stop - start)
                elif type(k) is int and 0 <= k < dim[1]:
                    offset += k * dim[0]
                    if on_chip:
                        if fast:
                            dropped = (dim[0], 1)  # a free dim: dropped (see the general path)
                        else:
                            fast.append((dim[0], 1))  # the partition dim keeps size 1
                            counts.append(1)
                else:
                    break
            else:
                if dropped is not None and len(fast) < 2:
                    fast.append(dropped)
                    counts.append(1)
                return NkiTensor(
                    self.alloc, self.dtype, offset, fast, indexed=True, shape=tuple(counts)
                )
        if not isinstance(key, tuple):
            key = (key,)
        ndim = len(self.dims)
        # (not `Ellipsis in key`: that compares with ==, which a tensor index refuses)
        n_ell = sum(1 for k in key if k is Ellipsis)
        if n_ell > 1:
            raise BoundsError("index", "at most one '...' in an index", user_site())
        explicit = len(key) - n_ell
        if explicit > ndim:
            raise BoundsError(
                "index",
                f"{explicit} indices for a {ndim}-d tensor {self.describe()}",
                user_site(),
            )
        full: list[Any] = []
        if n_ell:
            for k in key:
                if k is Ellipsis:
                    full.extend([slice(None)] * (ndim - explicit))
                else:
                    full.append(k)
        else:
            full.extend(key)
        full.extend([slice(None)] * (ndim - len(full)))
        on_chip = self.alloc.buffer.on_chip
        offset = self.offset
        dims: list[tuple[int, int]] = []
        last_dropped: tuple[int, int] | None = None
        for axis, (k, (step, num)) in enumerate(zip(full, self.dims)):
            if type(k) is slice:
                start, stop, st = k.start, k.stop, k.step
                st = 1 if st is None else _static_int(st, "slice step")
                start = 0 if start is None else _static_int(start, "slice start")
                stop = num if stop is None else _static_int(stop, "slice stop")
                if st <= 0:
                    raise BoundsError(
                        "index", f"slice step must be positive, got {st}", user_site()
                    )
                # Negative bounds count from the end, as in Python: nki.language.NkiTensor
                # (NKI 0.6.0, SDK 2.32) "Supports integers (select), slices, Ellipsis, negative
                # indices"; the 0.3.0 guide is silent. Past either end stays an error.
                start = start + num if -num <= start < 0 else start
                stop = stop + num if -num <= stop < 0 else stop
                if start < 0 or stop > num or start > stop:
                    raise BoundsError(
                        "access-in-bounds",
                        f"slice {start}:{stop} on dim {axis} of size {num} of {self.describe()} "
                        "(negative or out-of-range bounds; NumPy would clip, NKI does not)",
                        user_site(),
                    )
                count = (stop - start + st - 1) // st  # len(range(start, stop, st)), start <= stop
                if axis == 0 and on_chip and st != 1 and count > 1:
                    raise PartitionError(
                        "partition-contiguous",
                        f"partition dim accessed with step {st} on {self.describe()}; partition "
                        "access must be contiguous (AWS NKI Indexing overview, NKI 0.3.0)",
                        user_site(),
                    )
                offset += start * step
                dims.append((step * st, count))
            else:
                idx = _static_int(k, "index")
                idx = idx + num if -num <= idx < 0 else idx  # from the end (see the slice case)
                if idx < 0 or idx >= num:
                    raise BoundsError(
                        "access-in-bounds",
                        f"index {idx} on dim {axis} of size {num} of {self.describe()}",
                        user_site(),
                    )
                offset += idx * step
                if axis == 0 and on_chip:
                    # AWS NKI docs, Indexing overview (NKI 0.3.0): an integer on the partition dim of an
                    # on-chip tensor keeps a size-1 dim.
                    dims.append((step, 1))
                elif on_chip:
                    last_dropped = (step, 1)
        if on_chip and len(dims) < 2 and ndim >= 2 and last_dropped is not None:
            # On-chip views stay at least 2-D: a free-dim integer index that would leave fewer
            # keeps the last free dim at size 1 (t[:, 0, 10] is (P, 1)). NKI language guide,
            # "Tensor Indexing", SDK 2.31; AWS's 2.29-era library relies on it (t[:p, k][:p, :1]).
            dims.append(last_dropped)
        return NkiTensor(self.alloc, self.dtype, offset, dims, indexed=True)

    def __setitem__(self, key: Any, value: Any) -> None:
        """``t[...] = value``: write a tile into a region of ``t``.

        AWS's Beta-2 migration guide (NKI 0.3.0) writes its migrated examples this way, with the
        results of ``nl.*`` calls (``t[...] = nl.load(x)``, ``acc[0:P, s:s+1] = nl.sum(...)``). The
        write is the copy NKI performs: a DMA when either side is in HBM, else ``tensor_copy``; a
        number fills the region (``memset``). Every rule of those instructions applies at this line.
        """
        hooks.write_region(self[key], value)  # the instruction lives above: isa_movement

    # ---------------------------------------------------------------- reshape / view / ap
    def _contiguous(self) -> bool:
        return self.dims == tuple(_row_major(self.shape)) or self.size <= 1

    def reshape(self, *shape: Any) -> NkiTensor:
        """A view with another shape over the same (contiguous) elements; no copy."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise BoundsError(
                "reshape-size", f"cannot reshape {self.describe()} to {list(shape)}", user_site()
            )
        if self.on_chip and shape and self.shape and shape[0] != self.shape[0]:
            raise PartitionError(
                "reshape-partition",
                f"reshape of on-chip {self.describe()} to {list(shape)} changes the partition dim "
                "(AWS NKI docs, nki.language.NkiTensor.reshape, NKI 0.6.0: on-chip tensors keep "
                "shape[0]; moving data across partitions needs an instruction, e.g. "
                "nisa.nc_transpose)",
                user_site(),
            )
        # NKI language guide, "Querying layout" (NKI 0.6.0, SDK 2.32): reshape requires
        # "contiguity on the reshaped dimensions". On chip those are the free dims (NkiTensor.reshape:
        # shape[0] stays the partition dim), so a column slice t[:, a:b] of a wider tile, whose
        # partitions step by the tile's row, reshapes; a dim of size 1 has no step that matters.
        chip = self.on_chip and bool(self.dims) and bool(shape)
        reshaped = self.dims[1:] if chip else self.dims
        if self.size > 1 and not dense(reshaped):
            raise LanguageError(
                "reshape-contiguous",
                f"reshape needs contiguous {'free dims' if chip else 'dims'}; {self.describe()} "
                f"has pattern {self.get_pattern()}",
                user_site(),
            )
        dims = _row_major(shape)
        if chip:
            dims = ((self.dims[0][0], shape[0]), *_row_major(shape[1:]))
        return NkiTensor(self.alloc, self.dtype, self.offset, dims, indexed=self.indexed)

    def view(self, dtype: Any) -> NkiTensor:
        """Reinterpret the bits as ``dtype`` (same storage); the last dim scales with the width."""
        name = dtypes.dtype_name(dtype)
        old, new = dtypes.itemsize(self.dtype), dtypes.itemsize(name)
        shape = list(self.shape)
        if shape[-1] * old % new:
            raise BoundsError(
                "view-size",
                f"last dim {shape[-1]} of {self.dtype} is not a whole number of {name}",
                user_site(),
            )
        shape[-1] = shape[-1] * old // new
        if self._contiguous() and not self.indexed:
            return NkiTensor(self.alloc, name, self.offset * old // new, _row_major(shape))
        # A view of a view (e.g. ``t[:, -2:].view(nl.int32)``): nki.language.NkiTensor.view
        # (NKI 0.6.0, SDK 2.32) asks only that "the last dimension must be contiguous in memory"
        # (and not a dynamic view); the outer strides and the offset must land on whole elements
        # of the new dtype.
        steps = [st for st, _ in self.dims]
        if self.dynamic is not None or not self.dims or (self.dims[-1][0] != 1 and self.dims[-1][1] > 1):
            raise LanguageError(
                "view-contiguous",
                f"view(dtype) needs a static view whose last dim is contiguous; got {self.describe()}",
                user_site(),
            )
        if any(st * old % new for st in steps[:-1]) or self.offset * old % new:
            raise BoundsError(
                "view-size",
                f"view(dtype) of {self.describe()}: its strides or offset are not whole {name} elements",
                user_site(),
            )
        dims = [(st * old // new, n) for st, n in self.dims[:-1]] + [(1, shape[-1])]
        return NkiTensor(self.alloc, name, self.offset * old // new, dims, indexed=True)

    def _indirect_stride(self, shape: Sequence[int], dim: int, own: bool) -> int:
        """Elements between consecutive indices of dimension ``dim`` for a dynamic offset: the
        view's own stride (``own``), else the row-major stride of ``shape``."""
        if own and dim < len(self.dims):
            return self.dims[dim][0]
        return math.prod(shape[dim + 1 :])

    def ap(
        self,
        pattern: Sequence[Sequence[int]],
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> NkiTensor:
        """An explicit access pattern over the flattened tensor (AWS NKI Access Patterns deep dive
        (NKI 0.3.0))."""
        from trncore.sim.dynamic import ScalarOffset, VectorOffset

        site = user_site()
        name = self.dtype if dtype is None else dtypes.dtype_name(dtype)
        # the Access Patterns deep dive (NKI 0.6.0): pattern is "a list of two-element tuples"
        # [step, num]; offset "the compile-time integer offset" (None: the view's own)
        if not isinstance(pattern, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pattern
        ):
            raise TypeError(f"NkiTensor.ap: pattern must be a list of [step, num] pairs, got "
                            f"{pattern!r}{site_suffix(site)}")  # fmt: skip
        if offset is not None and (isinstance(offset, bool) or not isinstance(offset, (int, np.integer))):
            raise TypeError(f"NkiTensor.ap: offset must be an int or None, got {offset!r} (a "
                            "runtime offset is scalar_offset= / vector_offset=)"
                            f"{site_suffix(site)}")  # fmt: skip
        dims = [(int(s), int(n)) for s, n in pattern]
        scale = dtypes.itemsize(self.dtype) / dtypes.itemsize(name)
        base_offset = int(self.offset * scale) + int(offset or 0)
        # Which tensor a dynamic offset's ``indirect_dim`` refers to. nki.language.NkiTensor.ap
        # (SDK 2.31 and 2.32, NKI 0.5.0-0.6.0): "offset: ... When None (default), inherits the
        # current view's storage offset"; "indirect_dim: dimension in self.shape whose stride
        # scales the indirect scalar/vector offset". ``row_shape`` is that shape; a view that
        # keeps its offset scales by its own stride (``own_stride``).
        row_shape = self.shape
        own_stride = False
        if self.indexed:
            # .ap() on a view (an .ap() view or a slice). The SDK 2.29 access-pattern page forbade
            # it ("cannot specify an access pattern on an already indexed tensor"); the SDK 2.31
            # page of the same 0.3-line API defines it: ".ap addresses the tensor's underlying
            # storage directly ... ignoring any shape, strides, or offset carried by the view",
            # so a chained .ap is the outer pattern over the storage. AWS's own library chains
            # .ap() calls, so the defined (2.31) reading is emulated (docs/emulator.md).
            # The view's storage offset is kept and the indirect dimension is the view's own
            # (``x[h].ap(pattern, vector_offset=rows)`` gathers rows of ``x[h]``). An explicit
            # offset is added to the view's: the NkiTensor.ap reference (SDK 2.31-2.32) says
            # "offset=0 keeps the base, offset=N shifts by N additional elements"; the language
            # guide and the Access Patterns deep dive count it from the storage's start, and the
            # line warns where the two part (docs/emulator.md, "Readings chosen").
            own_stride = True
            if offset is not None and self.offset:
                _warn_ap_offset_reading(site, self.offset, int(offset))
        if scalar_offset is not None and vector_offset is not None:
            raise LanguageError(
                "ap-dynamic", "scalar_offset and vector_offset are mutually exclusive", site
            )
        dynamic: ScalarOffset | VectorOffset | None = None
        register = False
        if scalar_offset is not None:
            row = int(self._indirect_stride(row_shape, indirect_dim, own_stride) * scale)
            if isinstance(scalar_offset, NkiTensor):
                dynamic = ScalarOffset(scalar_offset, row, site)
            elif hasattr(scalar_offset, "__index__") or hasattr(scalar_offset, "as_scalar_offset"):
                # a dynamic_range induction variable under NKI 0.3.0 applies its Known Issue
                # (dynamic-range-index: not usable as a scalar_offset) here, at the .ap line; a
                # VirtualRegister gives its value (NKI language guide, SDK 2.29: a register may be
                # "a scalar_offset in a tensor access pattern for dynamic indexing")
                as_offset = getattr(scalar_offset, "as_scalar_offset", None)
                base_offset += (as_offset() if as_offset else int(scalar_offset)) * row
                register = as_offset is not None and not isinstance(scalar_offset, int)
            else:
                raise NotImplementedError(
                    f"ap(scalar_offset={type(scalar_offset).__name__}): registers are not emulated"
                )
        if vector_offset is not None:
            if indirect_dim != 0:
                raise LanguageError("ap-vector-offset", "vector_offset needs indirect_dim=0", site)
            row = int(self._indirect_stride(row_shape, 0, own_stride) * scale)
            dims[0] = (row, dims[0][1])
            dynamic = VectorOffset(vector_offset, row, site)
        result = NkiTensor(self.alloc, name, base_offset, dims, indexed=True, dynamic=dynamic)
        if self.on_chip and dims:
            ppe = result._partition_elems()
            if dims[0][0] != ppe and dims[0][1] > 1:
                raise PartitionError(
                    "ap-partition-step",
                    f"partition step {dims[0][0]} of pattern {pattern} must equal the "
                    f"{ppe} elements per partition of {self.describe()} (AWS NKI Access Patterns deep dive, "
                    "NKI 0.3.0)",
                    site,
                )
        if dynamic is None:
            # Bounds are checked where the view is read or written, not where it is built: AWS's
            # NKI library builds views it only uses under a guard (an .ap() is a description).
            result._unchecked = site
            if register:
                result._oob_skippable = True  # a runtime address: oob_mode=skip applies (operand)
        else:
            dynamic.check_static(result)
        return result

    # ---------------------------------------------------------------- host reads are errors
    def _host_read(self, what: str) -> Any:
        raise HostReadError(
            "no-host-read",
            f"{what} reads the data of {self.describe()} on the host; NKI 0.3.0 kernels have no "
            "data-dependent control flow (values exist only on the device)",
            user_site(),
        )

    def __bool__(self) -> bool:
        # ``if t:`` tests the handle, never the data: NKI values behave as their Python
        # equivalents and a tensor is a value naming device memory (NKI language guide, "NKI
        # Values", SDK 2.29 / NKI 0.3.0), so a tensor argument is true and ``if bias:`` means
        # "bias was given" (AWS's NKI library writes it so). Reading data stays refused.
        return True

    def __float__(self) -> float:
        return self._host_read("float(tensor)")

    def __int__(self) -> int:
        return self._host_read("int(tensor)")

    def __index__(self) -> int:
        return self._host_read("using a tensor as an index")

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return self._host_read("np.asarray(tensor)")

    def __iter__(self) -> Any:
        return self._host_read("iterating over a tensor")

    def __len__(self) -> int:
        return self.shape[0] if self.dims else 0

    if not TYPE_CHECKING:  # (hidden from mypy, which would otherwise accept any tensor attribute)

        def __getattr__(self, name: str) -> Any:
            """Only a name NkiTensor lacks comes here; Python's own message named no kernel line.

            The NkiTensor reference (NKI 0.3.0 to 0.6.0) has no ``astype`` nor other NumPy-style
            members, and a public kernel's tile ``.astype(...)`` failed with no line (twenty-sixth
            third-party batch, docs/third-party-kernels.md). Private and special names (an unset slot
            read with a default, NumPy's ``__array_*__`` probes) keep the plain error, cheaply."""
            if name[:1] == "_":
                raise AttributeError(f"'NkiTensor' object has no attribute {name!r}")
            raise AttributeError(
                f"'NkiTensor' object has no attribute {name!r}: not a tensor attribute of NKI 0.3.0 "
                f"to 0.6.0 (the NkiTensor reference){_MISSING_HINTS.get(name, '')}"
                f"{site_suffix(user_site())}"
            )

    def _no_operator(self, *args: Any) -> Any:
        # the NkiTensor reference (NKI 0.3.0 to 0.6.0) defines no arithmetic or ordering operator;
        # NKI Beta 1 tiles (neuronxcc.nki) had them, and kernels ported from it keep `a * b`: the
        # message names the kernel's line (a public FFT library's 0.12.0 kernels showed it lacking)
        raise NotImplementedError(
            "Python operators on NKI tensors are not part of the emulated NKI 0.3.0-0.6.0 API "
            "(NKI Beta 1 tiles had them); use nl.add / nl.multiply / ... or nisa.tensor_tensor"
            f"{site_suffix(user_site())}"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_operator
    __truediv__ = __rtruediv__ = __matmul__ = __neg__ = __pow__ = _no_operator
    __lt__ = __le__ = __gt__ = __ge__ = _no_operator

    # `t == None` / `t != None` test an optional kernel argument at trace time: AWS's NKI 0.3.0
    # update guide tells kernel authors to write `==`/`!=` where they wrote `is`/`is not`, and
    # nkilib's kernels do. A comparison with anything else stays an error (no elementwise `==`).
    def __eq__(self, other: object) -> bool:
        if other is None:
            return False
        return bool(self._no_operator(other))

    def __ne__(self, other: object) -> bool:
        if other is None:
            return True
        return bool(self._no_operator(other))

    __hash__ = object.__hash__


def _static_int(value: Any, what: str) -> int:
    if type(value) is int:  # the common case (~1.5 M calls in a large nkilib kernel): no checks
        return value
    if isinstance(value, NkiTensor):
        raise NotImplementedError(
            f"a tensor as {what} (dynamic indexing) is not emulated: the NkiTensor indexing page "
            "(NKI 0.3.0 to 0.6.0) takes ints, slices, nl.ds and registers, not tensors; use "
            f".select(dim, tensor) (NKI 0.5.0) or .ap(scalar_offset=...){site_suffix(user_site())}"
        )
    if hasattr(value, "as_scalar_offset") and not isinstance(value, int):
        # a VirtualRegister: "Register values can be used to index tensors" (NKI language guide,
        # "Dynamic Control Flow", NKI 0.3.0 and 0.6.0); its value at this point of the trace
        return int(value.as_scalar_offset())
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, got {value!r}{_index_hint(value)}{site_suffix(user_site())}")
    return int(value)


def _index_hint(value: Any) -> str:
    """Why NumPy's ``None`` / list indices are not NKI indices (the NkiTensor indexing page, NKI
    0.3.0-0.6.0: ints, slices, ``nl.ds`` and registers). AWS's NKI front end refuses a list or
    tuple index ("nested tuple/list indexes not supported", leanprover/KLR
    ``KLR/Trace/Term.lean`` @7ccd18c) and reads ``None`` as a whole dim, not NumPy's new axis."""
    if value is None:
        return " (None, NumPy's new axis, is not an NKI index; add a dim with .reshape)"
    if isinstance(value, (list, tuple)):
        return " (a list of indices is NumPy's gather, not an NKI index; gather with .ap(vector_offset=...))"
    return ""


class _Skipped:
    """The operand of an access skipped under ``oob_mode=skip``: reads nothing, writes nothing."""

    __slots__ = ()

    def read(self) -> None:
        return None

    def write(self, values: np.ndarray) -> None:
        return None


SKIPPED = _Skipped()


class Operand:
    """Read/write access to a static view's elements (the common, fast case)."""

    __slots__ = ("arr",)

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def read(self) -> np.ndarray:
        """The view's elements as a NumPy array (a view of the storage, not a copy)."""
        return self.arr

    def write(self, values: np.ndarray) -> None:
        """Store ``values`` (reshaped to the view) into the view's elements."""
        arr = self.arr
        raw = _RAW_VIEW.get(values.dtype)  # (None for NumPy's own types: the usual case)
        if raw is not None and values.dtype == arr.dtype:
            # the same bytes, moved by NumPy's integer loops (dtypes.RAW_VIEW)
            arr = arr.view(raw)
            values = values.view(raw)
        arr[...] = values.reshape(arr.shape)
