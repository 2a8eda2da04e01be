"""``nisa.dma_compute``: scaled element-wise reduction inside the DMA engines (nki.isa API
reference, NKI 0.3.0 / SDK 2.29).

``dst = srcs[0] + srcs[1] + ...`` computed in float32 and cast to ``dst.dtype``. Checked at the
kernel line: ``reduce_op`` is ``nl.add`` (the only one supported), every scale is 1.0 (or
``scales=None``), 1 to 16 sources, equal element counts, and no PSUM operand (DMA engines do not
reach PSUM). The read-modify-write forms with a ``vector_offset`` source (scatter/gather RMW) are
not emulated (NotImplementedError).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.alu import BINARY
from trncore.sim.checks import as_tensor
from trncore.sim.errors import BufferError, ShapeError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import op_token as _op_token
from trncore.sim.isa_common import writer as _writer

__all__ = ["dma_compute"]


def dma_compute(
    dst: Any,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    name: str | None = None,
) -> None:
    """``dst = sum(srcs)`` (fp32 inside the DMA engines), element by element."""
    ctx, site = _begin()
    dst = as_tensor(dst, "dma_compute", "dst", site)
    sources = [as_tensor(s, "dma_compute", f"srcs[{i}]", site) for i, s in enumerate(srcs)]
    _op_token(reduce_op, "reduce_op", site, {"add": BINARY["add"]})
    if not 1 <= len(sources) <= 16:
        raise ShapeError("dma-compute-srcs", f"dma_compute takes 1 to 16 sources, got "
                         f"{len(sources)}", site)  # fmt: skip
    if scales is not None:
        values = [float(x) for x in scales]
        if len(values) != len(sources) or any(v != 1.0 for v in values):
            raise ShapeError("dma-compute-scales", "dma_compute scales must be 1.0 for every "
                             f"source (or None), got {tuple(values)}", site)  # fmt: skip
    for t in (dst, *sources):
        if t.dynamic is not None:
            raise NotImplementedError("nisa.dma_compute with a vector_offset source "
                                      "(scatter/gather read-modify-write)")  # fmt: skip
        if t.buffer.name == "psum":
            raise BufferError("dma-psum", f"dma_compute cannot access PSUM: {t.describe()}", site)
        if t.size != dst.size:
            raise ShapeError("element-count", f"dma_compute element counts differ: "
                             f"{t.describe()} vs dst {dst.describe()}", site)  # fmt: skip
    ops = [s.operand(site) for s in sources]
    write = _writer(dst, site)

    def run() -> None:
        acc = np.zeros(dst.size, dtype=np.float32)
        for op in ops:
            acc = acc + np.asarray(op.read(), dtype=np.float32).reshape(-1)
        write(acc)

    nbytes = sum(s.size * dtypes.itemsize(s.dtype) for s in sources)
    meta = {"bytes": nbytes, "src": sources[0].buffer.name, "dst": dst.buffer.name, "dge": 0}
    ctx.emit("dma_compute", "dma", site, sources, [dst], run, meta)
