"""``nki.isa``: the instructions the emulator executes, each checked against AWS NKI docs, nki.isa
(NKI 0.3.0) and docs/emulator.md, What is checked.

Every instruction follows one pattern: look up the trace context and the caller's source line,
check the operands (raising an :class:`~trncore.sim.errors.NkiValidationError` subclass that names
the rule and the line), build a closure over pre-resolved NumPy views, and hand it to
``TraceContext.emit``, which records it (for replay) and runs it. Compute engines work in float32
and cast to ``dst.dtype`` (AWS NKI docs, nki.isa, NKI 0.3.0; docs/emulator.md, Numerics); ``dst`` comes first
and nothing is returned (AWS NKI docs, nki.isa, NKI 0.3.0).

This module is the ``nisa`` a kernel sees, so every public name in it is an NKI name (a test holds
them to AWS's ``nki.isa`` pages); the plumbing it uses is imported under private aliases.
"""

from __future__ import annotations

import typing as _typing

from trncore.sim.context import maybe_current as _maybe_current
from trncore.sim.errors import NkiValidationError
from trncore.sim.isa_common import (
    dge_mode,
    dma_engine,
    engine,
    gpsimd_engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from trncore.sim.isa_movement import dma_copy, dma_transpose, iota, memset, tensor_copy
from trncore.sim.isa_reduce_chain import tensor_scalar_reduce
from trncore.sim.isa_scalar import activation, activation_reduce, exponential
from trncore.sim.isa_statistics import (
    bn_aggr,
    bn_stats,
    max8,
    tensor_copy_predicated,
    tensor_partition_reduce,
)
from trncore.sim.isa_tensor_engine import nc_matmul, nc_transpose
from trncore.sim.isa_vector import (
    affine_select,
    reciprocal,
    scalar_tensor_tensor,
    select_reduce,
    tensor_reduce,
    tensor_scalar,
    tensor_tensor,
    tensor_tensor_scan,
)

if _typing.TYPE_CHECKING:
    from typing import Any

__all__ = [
    "NkiValidationError",
    "activation",
    "activation_reduce",
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "dge_mode",
    "dma_copy",
    "dma_engine",
    "dma_transpose",
    "engine",
    "exponential",
    "get_nc_sub_version",
    "get_nc_version",
    "gpsimd_engine",
    "iota",
    "matmul_perf_mode",
    "max8",
    "memset",
    "nc_matmul",
    "nc_transpose",
    "nc_version",
    "oob_mode",
    "reciprocal",
    "reduce_cmd",
    "scalar_engine",
    "scalar_tensor_tensor",
    "select_reduce",
    "tensor_copy",
    "tensor_copy_predicated",
    "tensor_engine",
    "tensor_partition_reduce",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_scalar_reduce",
    "tensor_tensor",
    "tensor_tensor_scan",
    "unknown_engine",
    "vector_engine",
]


def get_nc_version() -> nc_version:
    """AWS NKI docs, nki.isa.get_nc_version (NKI 0.3.0): the target's NeuronCore generation (gen2 = trn1, gen3
    = trn2)."""
    ctx = _maybe_current()
    if ctx is None:
        from trncore.config import current_target
        from trncore.sim.rules import rules_for

        return nc_version(rules_for(current_target()).nc_version)
    return nc_version(ctx.rules.nc_version)


def get_nc_sub_version() -> int:
    """AWS NKI docs, nki.isa.get_nc_sub_version (NKI 0.5.0): the silicon revision within the target's
    ``nc_version``, 0 for the first revision (the page's default) and 1 for the second.

    No AWS page says which revision a trn1 or trn2 instance is, and the emulator models one
    NeuronCore per target (the figures of docs/hardware.md), so it returns the default, 0, on both.
    """
    return 0


def _unsupported(api: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"nisa.{api} is not implemented by the trncore.sim emulator")

    fn.__name__ = api
    fn.__doc__ = f"``nisa.{api}``: not emulated; raises NotImplementedError."
    return fn


_NOT_EMULATED = (
    "dma_compute",
    "nc_find_index8",
    "nc_match_replace8",
    "range_select",
    "nc_n_gather",
    "local_gather",
    "nc_stream_shuffle",
    "nonzero_with_count",
    "rand2",
    "register_alloc",
    "register_move",
    "register_load",
    "register_store",
    "core_barrier",
    "sendrecv",
)
for _api in _NOT_EMULATED:
    globals()[_api] = _unsupported(_api)

# Instructions emulated in their own modules (they replace the NotImplementedError stand-ins).
from trncore.sim.isa_dma_compute import dma_compute  # noqa: E402, F401
from trncore.sim.isa_gather import nc_n_gather  # noqa: E402, F401
from trncore.sim.isa_local_gather import local_gather  # noqa: E402, F401
from trncore.sim.isa_movement import tensor_copy_dynamic_dst, tensor_copy_dynamic_src  # noqa: E402, F401
from trncore.sim.isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402, F401
from trncore.sim.isa_nonzero import nonzero_with_count  # noqa: E402, F401
from trncore.sim.isa_random import (  # noqa: E402, F401
    dropout,
    rand_get_state,
    rand_set_state,
    rng,
    set_rng_seed,
)
from trncore.sim.isa_range_select import range_select  # noqa: E402, F401
from trncore.sim.isa_reduce_chain import tensor_scalar_cumulative  # noqa: E402, F401
from trncore.sim.isa_select import nc_find_index8, nc_match_replace8, nc_stream_shuffle  # noqa: E402, F401
from trncore.sim.isa_sequence import sequence_bounds  # noqa: E402, F401
from trncore.sim.lnc import core_barrier, sendrecv  # noqa: E402, F401
from trncore.sim.registers import (  # noqa: E402, F401
    VirtualRegister,
    register_alloc,
    register_load,
    register_move,
    register_store,
)
