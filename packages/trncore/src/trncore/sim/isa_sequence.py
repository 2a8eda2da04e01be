"""``nisa.sequence_bounds`` on GpSimd (AWS NKI docs, nki.isa.sequence_bounds, NKI 0.3.0 / SDK
2.29; the same page in SDK 2.32, NKI 0.6.0).

What the page defines: for every element of a ``segment_ids`` tile, the first index of its
segment and the index one past its last element. A segment is a run of equal consecutive IDs
(the page's worked example, ``[0, 1, 1, 2, 2, 2, 0, 3, 3]`` -> starts ``[9, 1, 1, 3, 3, 3, 9, 7,
7]``, ends ``[-1, 3, 3, 6, 6, 6, -1, 9, 9]``). ID 0 marks padding, whose bounds are ``(n, -1)``
with ``n`` the number of IDs. IDs must be non-negative integers.

Rules checked at the kernel's line (from the page): the partition dimension is 1; ``dst`` has
shape ``(1, 2, n)`` for ``segment_ids`` of shape ``(1, n)`` (row 0 of the middle dim the starts,
row 1 the ends); both tiles are ``float32`` or ``int32``. GpSimd reads and writes SBUF only
("GpSimd Engine cannot access PSUM", the nki.isa reference of NKI 0.3.0, e.g. its
``nc_n_gather`` and ``tensor_copy`` pages; the rule of every GpSimd-only instruction here). The
IDs are data, so their rule (non-negative integers) is checked when the instruction runs, on
every run. Available on trn1 and trn2 (the page names no target restriction).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim.checks import check_compute_operand
from trncore.sim.errors import BoundsError, DtypeError, PartitionError, ShapeError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import require_sbuf as _require_sbuf

__all__ = ["sequence_bounds"]

_DTYPES = ("float32", "int32")


def _segment_bounds(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) index of the run of equal values each element of the 1-D
    ``ids`` belongs to; elements equal to 0 get ``(len(ids), -1)``."""
    n = ids.size
    pos = np.arange(n, dtype=np.int64)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = ids[1:] != ids[:-1]
    starts = np.maximum.accumulate(np.where(new_run, pos, 0))
    last_of_run = np.ones(n, dtype=bool)
    last_of_run[:-1] = ids[:-1] != ids[1:]
    # the end of a run, read from the right: the smallest "last element + 1" at or after i
    ends = np.minimum.accumulate(np.where(last_of_run, pos + 1, n)[::-1])[::-1]
    pad = ids == 0
    return np.where(pad, n, starts), np.where(pad, -1, ends)


def sequence_bounds(dst: Any, segment_ids: Any, name: str | None = None) -> None:
    """``dst[0, 0, i]`` / ``dst[0, 1, i]``: the start / end (exclusive) of ``segment_ids[0, i]``'s
    segment; padding (ID 0) gets ``n`` / ``-1``."""
    ctx, site = _begin()
    what = "sequence_bounds"
    ids = check_compute_operand(segment_ids, what, "segment_ids", site)
    out = check_compute_operand(dst, what, "dst", site)
    _require_sbuf(what, "sequence-bounds-sbuf", site, segment_ids=ids, dst=out)
    for t, arg in ((ids, "segment_ids"), (out, "dst")):
        if t.dtype not in _DTYPES:
            raise DtypeError("sequence-bounds-dtype", f"{what} {arg} must be float32 or int32, got "
                             f"{t.describe()}", site)  # fmt: skip
        if t.shape[0] != 1:
            raise PartitionError("sequence-bounds-partitions", f"{what}: the partition dimension "
                                 f"must be 1, got {arg} {t.describe()}", site)  # fmt: skip
    if len(ids.shape) != 2:
        raise ShapeError("sequence-bounds-shape", f"{what}: segment_ids must be a (1, n) tile, got "
                         f"{ids.describe()}", site)  # fmt: skip
    n = int(ids.shape[1])
    if tuple(out.shape) != (1, 2, n):
        raise ShapeError("sequence-bounds-shape", f"{what}: dst must have shape [1, 2, {n}] (start "
                         f"and end per segment id), got {out.describe()}", site)  # fmt: skip
    i_op, d_op = ids.operand(site), out.operand(site)
    out_dtype = np.int32 if out.dtype == "int32" else np.float32

    def run() -> None:
        values = np.asarray(i_op.read(), dtype=np.float64).reshape(n)
        bad = (values < 0) | (values != np.floor(values)) | ~np.isfinite(values)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise BoundsError("sequence-bounds-ids", f"{what}: segment IDs must be non-negative "
                              f"integers; segment_ids[0, {k}] is {values[k]!r}", site)  # fmt: skip
        starts, ends = _segment_bounds(values)
        d_op.write(np.stack([starts, ends]).reshape(1, 2, n).astype(out_dtype))

    ctx.emit(what, "gpsimd", site, [ids], [out], run, _elementwise_meta(ids))
