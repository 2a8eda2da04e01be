"""``nki.isa.constants``: the enumerations of the ISA (engines, DMA modes, out-of-bounds modes, ...)
as the importable submodule kernels write ``from nki.isa.constants import engine, oob_mode``
with; the same objects ``nki.isa`` exposes."""

from __future__ import annotations

from trncore.sim.isa_common import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
