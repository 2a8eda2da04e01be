"""``nisa.nc_n_gather``: gather within each partition on GpSimd (nki.isa API reference,
NKI 0.3.0 / SDK 2.29).

Per partition, the free dimensions of ``data`` are flattened and ``dst`` takes the elements at the
flat positions listed in ``indices`` (uint32); ``dst`` has ``data``'s dtype and ``indices``'s
elements per partition; all three in SBUF with the same partition count. The index range
``[0, data.size / data.shape[0])`` depends on device data, so it is checked when the instruction
runs (on the traced run and on every replay), like dynamic offsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim.checks import check_compute_operand
from trncore.sim.errors import BoundsError, DtypeError, ShapeError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import require_sbuf

__all__ = ["nc_n_gather"]


def nc_n_gather(dst: Any, data: Any, indices: Any, name: str | None = None) -> None:
    """``dst[p, k] = flat(data)[p, indices[p, k]]`` on GpSimd."""
    ctx, site = _begin()
    data = check_compute_operand(data, "nc_n_gather", "data", site)
    idx = check_compute_operand(indices, "nc_n_gather", "indices", site)
    dst = check_compute_operand(dst, "nc_n_gather", "dst", site)
    require_sbuf("nc_n_gather", "n-gather-sbuf", site, data=data, indices=idx, dst=dst)
    if idx.dtype != "uint32":
        raise DtypeError("n-gather-index-dtype", f"nc_n_gather indices must be uint32, got "
                         f"{idx.describe()}", site)  # fmt: skip
    if dst.dtype != data.dtype:
        raise DtypeError("n-gather-dtype", f"nc_n_gather dst must have data's dtype: "
                         f"{data.describe()} -> {dst.describe()}", site)  # fmt: skip
    if not data.partitions == idx.partitions == dst.partitions or dst.free_size != idx.free_size:
        raise ShapeError("n-gather-shape", "nc_n_gather needs equal partition counts and as many "
                         f"dst elements per partition as indices: data {data.describe()}, "
                         f"indices {idx.describe()}, dst {dst.describe()}", site)  # fmt: skip
    d_op, i_op, o_op = data.operand(site), idx.operand(site), dst.operand(site)
    p, f, n = data.partitions, data.free_size, idx.free_size

    def run() -> None:
        x = np.asarray(d_op.read()).reshape(p, f)
        k = np.asarray(i_op.read()).reshape(p, n).astype(np.int64)
        if k.size and (k.min() < 0 or k.max() >= f):
            raise BoundsError("n-gather-index-range", f"nc_n_gather index {int(k.max())} is "
                              f"outside [0, {f}) of {data.describe()}", site)  # fmt: skip
        o_op.write(np.take_along_axis(x, k, axis=1))

    ctx.emit("nc_n_gather", "gpsimd", site, [data, idx], [dst], run, _elementwise_meta(dst))
