"""``nisa.nonzero_with_count`` on GpSimd (nki.isa API reference, NKI 0.3.0 / SDK 2.29).

Per the page: NeuronCore-v3 or newer; only partitions 0, 16, ..., 112 are read and written (each
of the eight GpSimd cores uses the first of its 16 partitions; other destination partitions are
left unmodified); ``src`` float32 or int32 in SBUF, ``dst`` int32 in SBUF with one more element per
partition than ``src``; the output lists the indices of the nonzero elements plus
``index_offset``, then ``padding_val`` up to the input length, then the count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim.checks import check_compute_operand
from trncore.sim.errors import BufferError, DtypeError, ShapeError, TargetError, site_suffix
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta

__all__ = ["nonzero_with_count"]


def nonzero_with_count(
    dst: Any, src: Any, index_offset: Any = 0, padding_val: Any = -1, name: str | None = None
) -> None:
    """Indices of nonzero elements, padding and count, on partitions 0, 16, ..., 112."""
    ctx, site = _begin()
    if ctx.rules.nc_version < 3:
        raise TargetError("nonzero-with-count-target", "nisa.nonzero_with_count needs "
                          "NeuronCore-v3 (trn2) or newer", site)  # fmt: skip
    src = check_compute_operand(src, "nonzero_with_count", "src", site)
    dst = check_compute_operand(dst, "nonzero_with_count", "dst", site)
    for t, what in ((src, "src"), (dst, "dst")):
        if t.buffer.name != "sbuf":
            raise BufferError("nonzero-with-count-sbuf", f"nonzero_with_count {what} must be in "
                              f"SBUF: {t.describe()}", site)  # fmt: skip
    if src.dtype not in ("float32", "int32") or dst.dtype != "int32":
        raise DtypeError("nonzero-with-count-dtype", "nonzero_with_count needs a float32/int32 "
                         f"src and an int32 dst: {src.describe()} -> {dst.describe()}", site)  # fmt: skip
    if dst.partitions != src.partitions or dst.free_size != src.free_size + 1:
        raise ShapeError("nonzero-with-count-shape", "nonzero_with_count dst needs src's "
                         f"partitions and one more element each: {src.describe()} -> "
                         f"{dst.describe()}", site)  # fmt: skip
    for value, what in ((index_offset, "index_offset"), (padding_val, "padding_val")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"nonzero_with_count: {what} must be an int32, got {value!r}{site_suffix(site)}")
    offset, pad = int(index_offset), int(padding_val)
    s_op, d_op = src.operand(site), dst.operand(site)
    p, t = src.partitions, src.free_size
    rows = list(range(0, p, 16))

    def run() -> None:
        x = np.asarray(s_op.read()).reshape(p, t)
        out = np.array(d_op.read()).reshape(p, t + 1)
        for r in rows:
            idx = np.flatnonzero(x[r] != 0)
            out[r, : idx.size] = idx + offset
            out[r, idx.size : t] = pad
            out[r, t] = idx.size
        d_op.write(out)

    ctx.emit("nonzero_with_count", "gpsimd", site, [src, dst], [dst], run, _elementwise_meta(src))
