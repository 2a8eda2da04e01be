"""``nisa.dma_compute``: scaled element-wise reduction inside the DMA engines (nki.isa API
reference, NKI 0.3.0 / SDK 2.29).

``dst = srcs[0] + srcs[1] + ...`` computed in float32 and cast to ``dst.dtype``. Checked at the
kernel line: ``reduce_op`` is ``nl.add`` (the only one supported), every scale is 1.0 (or
``scales=None``), 1 to 16 sources, equal element counts, and no PSUM operand (DMA engines do not
reach PSUM).

The two read-modify-write forms of the same page, where a source has a ``vector_offset``: scatter
RMW (``dst`` in HBM with a ``vector_offset``, one source that same view, the other in SBUF) and
gather RMW (``dst`` in SBUF, one source an HBM view with a ``vector_offset``, the other ``dst``
itself). Both need exactly two sources, scales 1.0 and ``unique_indices=True``; any other use of a
dynamic view is refused at the kernel line. The indexed rows are read, summed with the other
source in float32 and written back, each run with that run's indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes, from_nki_0_2
from trncore.sim.alu import BINARY
from trncore.sim.checks import as_tensor
from trncore.sim.errors import BufferError, LanguageError, ShapeError, warn_unless_strict
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import enum_arg as _enum_arg
from trncore.sim.isa_common import hbm_bytes_meta, oob_mode
from trncore.sim.isa_common import op_token as _op_token

_OOB = oob_mode  # (the parameter of the same name shadows the class)

__all__ = ["dma_compute"]


def dma_compute(
    dst: Any,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
) -> None:
    """``dst = sum(srcs)`` (fp32 inside the DMA engines), element by element. ``oob_mode``
    (NKI 0.4.0): with ``oob_mode.skip`` an out-of-bounds ``vector_offset`` row of the RMW forms is
    skipped (read as 0, not written), as the page says: "Silently skips any operations involving
    out-of-bounds indices"."""
    ctx, site = _begin()
    _enum_arg(oob_mode, _OOB, "dma_compute", "oob_mode")
    dst = as_tensor(dst, "dma_compute", "dst", site)
    sources = [as_tensor(s, "dma_compute", f"srcs[{i}]", site) for i, s in enumerate(srcs)]
    if isinstance(reduce_op, (list, tuple)):  # the scales, where NKI 0.2.0 put them
        raise from_nki_0_2.argument_order_error(
            "nisa.dma_compute", f"reduce_op={list(reduce_op)!r} is a list (scales)", site
        )
    _op_token(reduce_op, "reduce_op", site, {"add": BINARY["add"]})
    if not 1 <= len(sources) <= 16:
        raise ShapeError("dma-compute-srcs", f"dma_compute takes 1 to 16 sources, got "
                         f"{len(sources)}", site)  # fmt: skip
    if scales is not None:
        values = [float(x) for x in scales]
        if len(values) != len(sources) or any(v != 1.0 for v in values):
            raise ShapeError("dma-compute-scales", "dma_compute scales must be 1.0 for every "
                             f"source (or None), got {tuple(values)}", site)  # fmt: skip
    if any(t.dynamic is not None for t in (dst, *sources)):
        _check_rmw(dst, sources, unique_indices, site)
    for t in (dst, *sources):
        if t.buffer.name == "psum":
            raise BufferError("dma-psum", f"dma_compute cannot access PSUM: {t.describe()}", site)
        if t.size != dst.size:
            raise ShapeError("element-count", f"dma_compute element counts differ: "
                             f"{t.describe()} vs dst {dst.describe()}", site)  # fmt: skip
    if len(sources) == 1:
        # The nki.isa.dma_compute page (NKI 0.3.0-0.6.0): dst = reduce_op(srcs[0] * scales[0],
        # ...), so one source is a copy; the NKI 0.3.0 update guide's replacement for
        # dma_copy(dst, src, dst_rmw_op=nl.add) is dma_compute(dst, [src], reduce_op=nl.add), read
        # as dst += src (docs/emulator.md, Readings chosen)
        warn_unless_strict(
            ctx.strict, LanguageError, "dma-compute-one-source",
            f"dma_compute with one source ({sources[0].describe()}) computes dst = srcs[0] by the "
            "nki.isa.dma_compute page (dst = reduce_op(srcs...)); the NKI 0.3.0 update guide "
            "writes dma_compute(dst, [src], reduce_op=nl.add) for the removed "
            "dma_copy(dst_rmw_op=nl.add), i.e. dst += src: to accumulate, list dst among the srcs",
            site, instead="; runs as the page's dst = srcs[0]", stacklevel=4,
        )  # fmt: skip
    skip = int(oob_mode) == 1
    if skip and all(t.dynamic is None for t in (dst, *sources)):
        # NKI 0.4.0 release notes (SDK 2.30), New Features: "Validation ensures oob_mode.skip is
        # used only with indirect indexing" (the dma_compute page: "during indirect access")
        raise LanguageError("dma-compute-oob", "dma_compute oob_mode=skip is only valid with "
                            "indirect indexing (a .ap(vector_offset=...) view in dst or srcs); "
                            "no operand here is indirect", site)  # fmt: skip
    ops = [s.operand(site, oob_skip=skip) for s in sources]
    out_op = dst.operand(site, oob_skip=skip)
    name_ = dst.dtype

    def write(values: np.ndarray) -> None:
        out_op.write(dtypes.cast(np.asarray(values).reshape(dst.shape), name_))

    scatter = dst.dynamic is not None  # scatter RMW: the run's indices must be unique

    def run() -> None:
        if scatter and out_op.rows_overlap():
            raise LanguageError("dma-compute-unique", "dma_compute scatter RMW: two partitions "
                                "index the same destination element, but the page requires "
                                "unique_indices=True ('non-unique indices not yet supported'): "
                                "give each partition its own rows, or accumulate duplicates "
                                "before the scatter", site)  # fmt: skip
        acc = np.zeros(dst.size, dtype=np.float32)
        for op in ops:
            acc = acc + np.asarray(op.read(), dtype=np.float32).reshape(-1)
        write(acc)

    nbytes = sum(s.size * dtypes.itemsize(s.dtype) for s in sources)
    meta = {"bytes": nbytes, "src": sources[0].buffer.name, "dst": dst.buffer.name, "dge": 0,
            **hbm_bytes_meta(sources, dst)}  # fmt: skip
    ctx.emit("dma_compute", "dma", site, sources, [dst], run, meta)


def _same_view(a: Any, b: Any) -> bool:
    """Whether two tensors are the same view (the RMW source that "matches dst")."""
    if a is b:
        return True
    same_dyn = a.dynamic is b.dynamic or (
        a.dynamic is not None and b.dynamic is not None and a.dynamic.tensor is b.dynamic.tensor
        and a.dynamic.row == b.dynamic.row and type(a.dynamic) is type(b.dynamic)
    )
    return (a.alloc is b.alloc and a.dtype == b.dtype and a.offset == b.offset
            and a.dims == b.dims and same_dyn)  # fmt: skip


def _check_rmw(dst: Any, sources: list[Any], unique_indices: bool, site: Any) -> None:
    """The read-modify-write forms of nki.isa.dma_compute (NKI 0.3.0): "Scatter RMW:
    dst(HBM)[indices] = dst(HBM)[indices] + src(SB)" and "Gather RMW: dst(SB) = dst(SB) +
    src(HBM)[indices]"; "Exactly 2 source tensors", "unique_indices must be True"."""
    from trncore.sim.dynamic import VectorOffset

    def rmw_error(why: str) -> LanguageError:
        return LanguageError("dma-compute-rmw", f"dma_compute with a vector_offset view: {why} "
                             "(the page's two forms: scatter RMW, dst in HBM with a vector_offset, "
                             "srcs=[dst, sbuf_tile]; gather RMW, dst in SBUF, "
                             "srcs=[dst, hbm_view_with_vector_offset])", site)  # fmt: skip

    views = [t for t in (dst, *sources) if t.dynamic is not None]
    if any(not isinstance(t.dynamic, VectorOffset) for t in views):
        raise rmw_error("only a vector_offset (not a scalar_offset) view takes part")
    if len(sources) != 2:
        raise rmw_error(f"it takes exactly 2 sources, got {len(sources)}")
    if not unique_indices:
        raise rmw_error("unique_indices must be True (non-unique indices are not supported)")
    if dst.dynamic is not None:  # scatter RMW
        same = [s for s in sources if _same_view(s, dst)]
        other = [s for s in sources if not _same_view(s, dst)]
        if dst.buffer.name == "sbuf" or len(same) != 1 or len(other) != 1:
            raise rmw_error("a scatter needs dst in HBM and one source equal to dst")
        if other[0].buffer.name != "sbuf" or other[0].dynamic is not None:
            raise rmw_error("the scattered source must be a static SBUF tile")
    else:  # gather RMW
        same = [s for s in sources if _same_view(s, dst)]
        other = [s for s in sources if not _same_view(s, dst)]
        if dst.buffer.name != "sbuf" or len(same) != 1 or len(other) != 1:
            raise rmw_error("a gather needs dst in SBUF and one source equal to dst")
        if other[0].dynamic is None or other[0].buffer.on_chip:
            raise rmw_error("the gathered source must be an HBM view with a vector_offset")
