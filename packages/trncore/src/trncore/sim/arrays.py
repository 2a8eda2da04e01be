"""NumPy helpers beneath the tensor model: strided views over an allocation's flat storage.

Used by :mod:`trncore.sim.tensor` (a view's array) and :mod:`trncore.sim.dynamic` (the access of
a run-time offset); kept below both so that neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["strided_view"]


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
