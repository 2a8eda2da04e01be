"""NumPy helpers beneath the tensor model: strided views over an allocation's flat storage.

Used by :mod:`trncore.sim.tensor` (a view's array) and :mod:`trncore.sim.dynamic` (the access of
a run-time offset); kept below both so that neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["dense", "extent", "pattern_indices", "strided_view"]


def strided_view(
    flat: np.ndarray, offset: int, shape: Sequence[int], steps: Sequence[int]
) -> np.ndarray:
    """A writable strided view of a contiguous 1-D array (steps in elements, all >= 0).

    Built with the ndarray constructor rather than ``as_strided``, which cannot carry
    ml_dtypes' bfloat16/fp8 dtypes through the array interface.
    """
    item = flat.itemsize
    # (positional arguments: the constructor's keyword parsing cost more than the view itself)
    return np.ndarray(tuple(shape), flat.dtype, flat, offset * item, tuple([s * item for s in steps]))


def dense(dims: Sequence[tuple[int, int]]) -> bool:
    """Whether ``dims`` (step, count) cover consecutive elements in row-major order; a dim of
    count 1 is skipped (its step addresses nothing). ``reshape``'s contiguity rule,
    ``NkiTensor.is_contiguous`` (trncore.sim.views) and a gather's row runs
    (trncore.sim.dynamic); here, below all three, so that none imports another for it."""
    inner = 1
    for step, num in reversed(dims):
        if num != 1 and step != inner:
            return False
        inner *= num
    return True


#: :func:`extent` of the patterns seen so far: a kernel names a few patterns again and again (a
#: gather loop, every view's bounds check), and a look-up costs a tenth of the two sums
_EXTENTS: dict[tuple[tuple[int, int], ...], tuple[int, int]] = {}


def extent(dims: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """How far a pattern's elements reach below and above its first one, in elements: the
    smallest and the largest sum of index times step over its (step, count) ``dims``. The
    bounds checks of views (trncore.sim.tensor), of indirect accesses (trncore.sim.dynamic) and
    the LNC=2 race footprints (trncore.sim.core_races) read it."""
    found = _EXTENTS.get(dims)
    if found is None:
        if len(_EXTENTS) > 4096:
            _EXTENTS.clear()  # bound the memory
        found = _EXTENTS[dims] = (
            sum(min(0, (n - 1) * s) for s, n in dims),
            sum(max(0, (n - 1) * s) for s, n in dims),
        )
    return found


def pattern_indices(offset: int, dims: Sequence[tuple[int, int]]) -> np.ndarray:
    """The flat element index of each element of a (step, count) pattern starting at ``offset``,
    in row-major order of the pattern (1-D int64; ``[offset]`` for no dims). The index lists of
    the LNC=2 race footprints (trncore.sim.core_races), a gather's row (trncore.sim.dynamic),
    ``iota``'s values (trncore.sim.isa_common) and the cost report's minimum traffic
    (trncore.sim.report)."""
    idx = np.array([offset], dtype=np.int64)
    for step, num in dims:
        idx = (idx[:, None] + np.arange(num, dtype=np.int64) * step).reshape(-1)
    return idx
