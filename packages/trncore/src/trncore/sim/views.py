"""The ``NkiTensor`` view methods of NKI 0.5.0: ``slice``, ``select``, ``permute``, ``broadcast``,
``expand_dim``, ``squeeze_dim``, ``reshape_dim``, ``flatten_dims``, ``rearrange``,
``is_contiguous``, ``is_indirect``, ``reinterpret_cast``, ``vector_select``.

Each returns a new view of the same allocation (no data moves): the emulator's views are an element
offset plus ``(step, num)`` pairs, so every method is arithmetic on that list. The constraints are
the ones the ``nki.language.NkiTensor`` API page (NKI 0.5.0) states, each raised at the kernel's
line: dims in range, the partition dim of an on-chip tensor stays first and whole, merged dims must
be contiguous, sizes must multiply out. :func:`attach` puts the methods on ``NkiTensor``;
:mod:`trncore.sim.versions` gates them to 0.5.0 and later.
"""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Sequence
from typing import Any

from trncore.sim.arrays import dense
from trncore.sim.context import user_site
from trncore.sim.errors import BoundsError, LanguageError, PartitionError, site_suffix
from trncore.sim.tensor import NkiTensor

__all__ = ["METHODS", "attach"]

Dims = list[tuple[int, int]]


def _dim(t: NkiTensor, dim: Any, api: str, ndim: int | None = None) -> int:
    n = t.ndim if ndim is None else ndim
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < n:
        raise BoundsError("view-dim", f"{api}: dim={dim!r} must be an int in [0, {n})", user_site())
    return dim


def _no_partition(t: NkiTensor, dim: int, api: str) -> None:
    if t.on_chip and dim == 0:
        raise PartitionError(
            "view-partition-dim",
            f"{api} cannot act on dim 0 of on-chip {t.describe()}: the partition dim stays "
            "outermost and whole",
            user_site(),
        )


def _view(t: NkiTensor, offset: int, dims: Dims, api: str) -> NkiTensor:
    """The view ``offset``/``dims`` of ``t``'s storage; an indirect ``t`` keeps its indirection
    (:func:`_keeps_indirection`)."""
    if t.dynamic is None:
        return NkiTensor(t.alloc, t.dtype, offset, dims, indexed=True)
    _keeps_indirection(t, dims, api)
    return NkiTensor(t.alloc, t.dtype, offset, dims, indexed=True, dynamic=t.dynamic)


def _indirect_dims(t: NkiTensor, dims: Dims) -> Dims:
    """The dims of ``dims`` (a view of indirect ``t``) that take part in the indirection: dim 0 of
    a ``vector_offset`` / ``vector_select`` view; for a ``scalar_offset`` / dynamic ``select`` one,
    the dims stepping by the indirection's row (a dynamic ``select`` removed its dim, so none)."""
    from trncore.sim.dynamic import VectorOffset

    assert t.dynamic is not None
    if isinstance(t.dynamic, VectorOffset):
        return list(dims[:1])
    row = t.dynamic.row
    return [(s, n) for s, n in dims if s == row and n > 1]


def _keeps_indirection(t: NkiTensor, dims: Dims, api: str) -> None:
    """A view method on an indirect view may act on every dim but those that take part in the
    indirection (``nki.language.NkiTensor``, NKI 0.5.0 and 0.6.0: "the dimension that
    participates in the indirection cannot be further sliced or selected"; after
    ``vector_select``, ``permute`` keeps dim 0 first and ``expand_dim`` inserts after it)."""
    if _indirect_dims(t, dims) != _indirect_dims(t, list(t.dims)):
        raise LanguageError(
            "view-indirect-dim",
            f"NkiTensor.{api} on the indirect view {t.describe()} would change the dimension "
            "that takes part in its indirection (nki.language.NkiTensor.is_indirect, NKI 0.5.0: "
            "it cannot be further sliced or selected)",
            user_site(),
        )


def slice(self: NkiTensor, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
    """The elements ``start:end:step`` of ``dim`` (``0 <= start < end <= shape[dim]``, ``step >= 1``)."""
    d = _dim(self, dim, "slice")
    num = self.shape[d]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end, step)):
        raise TypeError(f"NkiTensor.slice: start, end and step must be ints, got {start!r}, "
                        f"{end!r}, {step!r}")  # fmt: skip
    if not 0 <= start < end <= num or step < 1:
        raise BoundsError(
            "view-slice",
            f"slice(dim={d}, start={start}, end={end}, step={step}) on size {num} of "
            f"{self.describe()}: needs 0 <= start < end <= {num} and step >= 1",
            user_site(),
        )
    if self.dynamic is not None:  # an indirect view is not indexed with []: its dims directly
        dims = list(self.dims)
        dims[d] = (dims[d][0] * step, len(range(start, end, step)))
        return _view(self, self.offset + start * self.dims[d][0], dims, "slice")
    key: list[Any] = [builtins.slice(None)] * self.ndim
    key[d] = builtins.slice(start, end, step)
    return self[tuple(key)]


def select(self: NkiTensor, dim: int, index: Any) -> NkiTensor:
    """Element ``index`` of ``dim``, the dim removed: a static int index, or an ``NkiTensor``
    holding it (dynamic, read when the instruction using the view runs)."""
    if isinstance(index, NkiTensor):
        return _dynamic_select(self, dim, index)
    if hasattr(index, "as_scalar_offset") and not isinstance(index, int):
        return _register_select(self, dim, index)
    d = _dim(self, dim, "select")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(
            "NkiTensor.select: index must be an int, an NkiTensor holding it (SBUF) or a "
            f"VirtualRegister, got {index!r}{site_suffix(user_site())}"
        )
    _no_partition(self, d, "select")
    step, num = self.dims[d]
    if not 0 <= index < num:
        raise BoundsError("view-select", f"select(dim={d}, index={index}) on size {num} of "
                          f"{self.describe()}", user_site())  # fmt: skip
    dims = [x for i, x in enumerate(self.dims) if i != d]
    return _view(self, self.offset + index * step, dims, "select")


def _runtime_select_dims(self: NkiTensor, dim: Any, site: Any) -> tuple[int, Dims]:
    """``(dim, the view's dims without it)`` for a ``select`` whose index is known at run time
    (an SBUF tensor, :func:`_dynamic_select`, or a register, :func:`_register_select`), after the
    checks the two share, each at the kernel's line ``site``: ``dim`` in range; one dynamic select
    per tensor (``nki.language.NkiTensor.select``, NKI 0.5.0 and 0.6.0: not on a view already
    indirect); on chip, not dim 0, the partition dim."""
    d = _dim(self, dim, "select")
    if self.dynamic is not None:
        raise LanguageError("select-indirect", "only one dynamic select per tensor: "
                            f"{self.describe()} is already indirect (see is_indirect)",
                            site)  # fmt: skip
    if self.on_chip and d == 0:
        raise PartitionError("view-partition-dim", "a dynamic select on an on-chip tensor cannot "
                             f"take dim 0 (the partition dim) of {self.describe()}", site)  # fmt: skip
    return d, [x for i, x in enumerate(self.dims) if i != d]


def _dynamic_select(self: NkiTensor, dim: int, index: NkiTensor) -> NkiTensor:
    """``select`` with a tensor index (``nki.language.NkiTensor.select``, NKI 0.5.0 and 0.6.0: "When
    ``index`` is an ``NkiTensor`` ... performs dynamic indirect selection where the index is resolved
    at runtime"): the view without ``dim``, offset at run time by the index times ``dim``'s stride,
    the access ``.ap(scalar_offset=index, indirect_dim=dim)`` builds. The page's constraints, at the
    kernel's line: one dynamic select per tensor (not on a view already indirect); on-chip, ``dim``
    is not 0; the index one integer element in SBUF (as any ``scalar_offset``)."""
    from trncore.sim.dynamic import ScalarOffset

    site = user_site()
    d, dims = _runtime_select_dims(self, dim, site)
    dynamic = ScalarOffset(index, self.dims[d][0], site)
    result = NkiTensor(self.alloc, self.dtype, self.offset, dims, indexed=True, dynamic=dynamic)
    dynamic.check_static(result)
    return result


def _register_select(self: NkiTensor, dim: int, index: Any) -> NkiTensor:
    """``select`` at a ``VirtualRegister``'s value. The ``nki.language.NkiTensor.select`` page
    (NKI 0.5.0-0.6.0) names an int or an NkiTensor; the Access Patterns deep dive (NKI 0.6.0) says
    select "build[s] the same access pattern that the .ap() forms produce", whose
    ``scalar_offset`` may be "an SBUF tensor of shape (1, 1) or a VirtualRegister". Read as that
    access (docs/emulator.md, Readings chosen): the register's value (as ``.ap(scalar_offset=reg,
    indirect_dim=dim)`` reads it), dim removed, on-chip never the partition dim, bounds checked
    where the view is read or written (an out-of-bounds DMA under ``oob_mode=skip`` is skipped)."""
    site = user_site()
    d, dims = _runtime_select_dims(self, dim, site)
    step = self.dims[d][0]
    view = _view(self, self.offset + index.as_scalar_offset() * step, dims, "select")
    view._unchecked = site
    view._oob_skippable = True
    return view


def permute(self: NkiTensor, dims: Sequence[int]) -> NkiTensor:
    """The dims reordered: dim ``i`` of the result is dim ``dims[i]`` of this view."""
    order = tuple(dims)
    if sorted(order) != list(range(self.ndim)):
        raise BoundsError("view-permute", f"permute({order}) is not a permutation of "
                          f"range({self.ndim}) for {self.describe()}", user_site())  # fmt: skip
    if self.on_chip and order[0] != 0:
        _no_partition(self, 0, f"permute({order})")
    return _view(self, self.offset, [self.dims[i] for i in order], "permute")


def broadcast(self: NkiTensor, dim: int, size: int) -> NkiTensor:
    """A size-1 ``dim`` repeated ``size`` times (step 0: no copy)."""
    d = _dim(self, dim, "broadcast")
    _no_partition(self, d, "broadcast")
    if self.shape[d] != 1:
        raise BoundsError("view-broadcast", f"broadcast(dim={d}) needs size 1, {self.describe()} "
                          f"has {self.shape[d]}", user_site())  # fmt: skip
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise TypeError(f"NkiTensor.broadcast: size must be a positive int, got {size!r}")
    dims = list(self.dims)
    dims[d] = (0, size)
    return _view(self, self.offset, dims, "broadcast")


def expand_dim(self: NkiTensor, dim: int) -> NkiTensor:
    """A new size-1 dim at position ``dim``."""
    d = _dim(self, dim, "expand_dim", self.ndim + 1)
    _no_partition(self, d, "expand_dim")
    dims = list(self.dims)
    dims.insert(d, (1, 1))
    return _view(self, self.offset, dims, "expand_dim")


def squeeze_dim(self: NkiTensor, dim: int) -> NkiTensor:
    """This view without its size-1 dim ``dim``."""
    d = _dim(self, dim, "squeeze_dim")
    _no_partition(self, d, "squeeze_dim")
    if self.shape[d] != 1:
        raise BoundsError("view-squeeze", f"squeeze_dim({d}) needs size 1, {self.describe()} has "
                          f"{self.shape[d]}", user_site())  # fmt: skip
    return _view(self, self.offset, [x for i, x in enumerate(self.dims) if i != d], "squeeze_dim")


def _split(step: int, num: int, shape: Sequence[int], api: str, t: NkiTensor) -> Dims:
    sizes = [int(s) for s in shape]
    if sizes.count(-1) > 1 or any(s == 0 or s < -1 for s in sizes):
        raise BoundsError("view-split", f"{api}: shape {tuple(shape)} may hold one -1 and "
                          "positive sizes", user_site())  # fmt: skip
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if num % known:
            raise BoundsError("view-split", f"{api}: {num} is not a multiple of {known}",
                              user_site())  # fmt: skip
        sizes = [num // known if s == -1 else s for s in sizes]
    if math.prod(sizes) != num:
        raise BoundsError("view-split", f"{api}: shape {tuple(shape)} does not multiply to {num} "
                          f"({t.describe()})", user_site())  # fmt: skip
    out: Dims = []
    inner = 1
    for s in reversed(sizes):
        out.append((step * inner, s))
        inner *= s
    return list(reversed(out))


def reshape_dim(self: NkiTensor, dim: int, shape: Sequence[int]) -> NkiTensor:
    """``dim`` split into ``shape`` (one entry may be -1)."""
    d = _dim(self, dim, "reshape_dim")
    step, num = self.dims[d]
    new = _split(step, num, shape, f"reshape_dim({d}, {tuple(shape)})", self)
    if d == 0 and self.on_chip and len(new) > 1:
        _no_partition(self, 0, f"reshape_dim(0, {tuple(shape)})")
    return _view(self, self.offset, [*self.dims[:d], *new, *self.dims[d + 1 :]], "reshape_dim")


def _merge(dims: Dims, api: str, t: NkiTensor) -> tuple[int, int]:
    live = [(s, n) for s, n in dims if n != 1]
    for (s_out, _), (s_in, n_in) in itertools.pairwise(live):
        if s_out != s_in * n_in:
            raise LanguageError("view-merge-contiguous", f"{api}: the merged dims of "
                                f"{t.describe()} (pattern {t.get_pattern()}) are not contiguous "
                                "in memory", user_site())  # fmt: skip
    num = math.prod(n for _, n in dims)
    step = live[-1][0] if live else 1
    return step, num


def flatten_dims(self: NkiTensor, start_dim: int, end_dim: int) -> NkiTensor:
    """Dims ``start_dim..end_dim`` (inclusive, contiguous in memory) merged into one."""
    a = _dim(self, start_dim, "flatten_dims")
    b = _dim(self, end_dim, "flatten_dims")
    if b < a:
        raise BoundsError("view-dim", f"flatten_dims({a}, {b}): end_dim < start_dim", user_site())
    if self.on_chip and a == 0 and b > 0:
        _no_partition(self, 0, f"flatten_dims({a}, {b})")
    merged = _merge(list(self.dims[a : b + 1]), f"flatten_dims({a}, {b})", self)
    return _view(self, self.offset, [*self.dims[:a], merged, *self.dims[b + 1 :]], "flatten_dims")


def rearrange(
    self: NkiTensor, src_pattern: Sequence[Any], dst_pattern: Sequence[Any],
    fixed_sizes: dict[str, int] | None = None,
) -> NkiTensor:  # fmt: skip
    """einops-style: split the grouped names of ``src_pattern``, reorder, merge ``dst_pattern``'s
    groups. ``fixed_sizes`` gives split sizes (one per group may be inferred)."""
    api = f"rearrange({tuple(src_pattern)}, {tuple(dst_pattern)})"
    sizes = dict(fixed_sizes or {})
    if len(src_pattern) != self.ndim:
        raise BoundsError("view-rearrange", f"{api}: {len(src_pattern)} source names for a "
                          f"{self.ndim}-d {self.describe()}", user_site())  # fmt: skip
    named: dict[str, tuple[int, int]] = {}
    first: Any = None
    for i, (item, (step, num)) in enumerate(zip(src_pattern, self.dims)):
        group = (item,) if isinstance(item, str) else tuple(item)
        split = _split(step, num, [sizes.get(n, -1) for n in group], api, self)
        for name, sn in zip(group, split):
            if name in named:
                raise BoundsError("view-rearrange", f"{api}: name {name!r} repeats", user_site())
            named[name] = sn
        if i == 0:
            first = item
    out: Dims = []
    used: list[str] = []
    for item in dst_pattern:
        group = (item,) if isinstance(item, str) else tuple(item)
        missing = [n for n in group if n not in named]
        if missing:
            raise BoundsError("view-rearrange", f"{api}: unknown names {missing}", user_site())
        used += group
        out.append(named[group[0]] if len(group) == 1 else _merge([named[n] for n in group], api,
                                                                   self))  # fmt: skip
    if sorted(used) != sorted(named):
        raise BoundsError("view-rearrange", f"{api}: every source name must appear once in the "
                          "destination", user_site())  # fmt: skip
    if self.on_chip and (dst_pattern[0] != first or not isinstance(first, str)):
        _no_partition(self, 0, api)
    return _view(self, self.offset, out, "rearrange")


def is_contiguous(self: NkiTensor) -> bool:
    """Whether the view's dims (free dims only, on chip) are row-major over the storage."""
    return dense(self.dims[1:] if self.on_chip else self.dims)


def is_indirect(self: NkiTensor) -> bool:
    """Whether the view's addresses come from an index tensor read at run time: a dynamic
    ``select``, ``vector_select``, or ``.ap`` with a tensor ``scalar_offset`` / ``vector_offset``
    (``nki.language.NkiTensor.is_indirect``, NKI 0.5.0 and 0.6.0)."""
    return self.dynamic is not None


def reinterpret_cast(self: NkiTensor, dtype: Any) -> NkiTensor:
    """The same elements reinterpreted as ``dtype`` (NKI 0.5.0's other name of ``view``).

    On a :func:`vector_select` view it is the Known Issue ``reinterpret-cast-vector-select``
    (0.5.0, 0.6.0 notes: "Combined usage is not yet supported"), checked first.
    """
    from trncore.sim.dynamic import SelectedRows

    if isinstance(self.dynamic, SelectedRows):
        from trncore.sim import known_issues

        known_issues.check("reinterpret-cast-vector-select", "reinterpret_cast of a vector_select "
                           f"view {self.describe()}")  # fmt: skip
    return self.view(dtype)


def vector_select(self: NkiTensor, dim: int, vector_offset: Any) -> NkiTensor:
    """Gather along dim 0 of an HBM tensor: output partition ``p`` addresses row
    ``vector_offset[p, 0]`` of ``self`` (``nki.language.NkiTensor.vector_select``, NKI 0.5.0).

    The page's constraints, each raised at the kernel's line: ``dim`` must be 0; HBM tensors only;
    one dynamic select per tensor (not on a view that is already indirect); ``vector_offset`` an
    SBUF integer tensor of shape ``(num_partitions, 1)``. The result has
    ``vector_offset.shape[0]`` rows and is the view ``.ap(vector_offset=..., indirect_dim=0)``
    builds (AWS NKI Access Patterns deep dive: both build the same access pattern); the indices
    are read when the instruction using the view runs, and bounds are checked then. On a
    reinterpreted tensor (``reinterpret_cast`` / ``view(dtype)``) it is the Known Issue
    ``reinterpret-cast-vector-select`` (0.5.0, 0.6.0).
    """
    from trncore.sim.dynamic import SelectedRows

    site = user_site()
    if isinstance(dim, bool) or dim != 0:
        raise BoundsError("vector-select-dim", f"vector_select(dim={dim!r}): dim must be 0",
                          site)  # fmt: skip
    if self.on_chip:
        raise LanguageError("vector-select-hbm", "vector_select is only supported on HBM "
                            f"tensors, got {self.describe()}", site)  # fmt: skip
    if self.dynamic is not None:
        raise LanguageError("vector-select-indirect", "only one dynamic select per tensor: "
                            f"{self.describe()} is already indirect (see is_indirect)",
                            site)  # fmt: skip
    if not isinstance(vector_offset, NkiTensor):
        raise TypeError(f"NkiTensor.vector_select: vector_offset must be an SBUF tensor of shape "
                        f"(num_partitions, 1), got {type(vector_offset).__name__}")  # fmt: skip
    if vector_offset.ndim != 2 or vector_offset.shape[1] != 1:
        raise LanguageError("vector-select-offsets", "vector_select vector_offset must have shape "
                            f"(num_partitions, 1), got {vector_offset.describe()}",
                            site)  # fmt: skip
    if self.dtype != self.alloc.dtype:
        from trncore.sim import known_issues

        known_issues.check("reinterpret-cast-vector-select", f"vector_select on {self.describe()}, "
                           f"reinterpreted from {self.alloc.dtype}", site)  # fmt: skip
    step = self.dims[0][0]
    dims = [(step, vector_offset.shape[0]), *self.dims[1:]]
    dynamic = SelectedRows(vector_offset, step, site)
    result = NkiTensor(self.alloc, self.dtype, self.offset, dims, indexed=True, dynamic=dynamic)
    dynamic.check_static(result)
    return result


METHODS = {
    "reinterpret_cast": reinterpret_cast,
    "slice": slice,
    "select": select,
    "permute": permute,
    "broadcast": broadcast,
    "expand_dim": expand_dim,
    "squeeze_dim": squeeze_dim,
    "reshape_dim": reshape_dim,
    "flatten_dims": flatten_dims,
    "rearrange": rearrange,
    "is_contiguous": is_contiguous,
    "is_indirect": is_indirect,
    "vector_select": vector_select,
}


def attach(cls: type) -> None:
    """Put the view methods on ``cls`` (``NkiTensor``), where they are not defined yet."""
    for name, fn in METHODS.items():
        if name not in cls.__dict__:
            setattr(cls, name, fn)
