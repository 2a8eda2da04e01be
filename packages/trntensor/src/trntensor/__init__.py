"""trntensor: Einsum with contraction planning, tensor decompositions and DF-MP2 building blocks.

``einsum`` matches ``torch.einsum`` on every expression and contracts in opt_einsum's optimal
order; each GEMM-shaped step goes through the trncore operation ``contract_gemm``
(:mod:`trntensor._ops`). ``ao_to_mo_transform`` and ``mp2_energy`` run through the operations
``ao_to_mo`` and ``mp2_energy``. Each operation has a PyTorch reference (any device) and an NKI
kernel (:mod:`trntensor.kernels`, float32) used on a Neuron device or on the trncore.sim emulator.

Backend selection is shared with every trnsci library (see :mod:`trncore.dispatch`):
``set_backend("auto" | "pytorch" | "nki")``, ``get_backend()``, ``HAS_NKI`` (true only where the
real ``nki`` package and a Neuron device are present) and the ``TRNTENSOR_*`` / ``TRNSCI_*``
environment variables.
"""

from trncore import NkiDispatchError, NkiFallbackWarning, neuron_device_present
from trncore.xla import from_xla, to_xla
from trntensor import _library
from trntensor._library import __version__, backend, explain, get_backend, set_backend
from trntensor.contraction import einsum, multi_einsum
from trntensor.decompositions import (
    CPDecomposition,
    TTDecomposition,
    TuckerDecomposition,
    cp_decompose,
    cp_reconstruct,
    tt_decompose,
    tt_reconstruct,
    tucker_decompose,
    tucker_reconstruct,
)
from trntensor.df_mp2 import ao_to_mo_transform, apply_metric, metric_inverse_sqrt, mp2_energy
from trntensor.dfmp2 import DFMP2Energy, dfmp2_energy
from trntensor.planning import (
    ContractionPlan,
    ContractionStep,
    clear_plan_cache,
    estimate_flops,
    plan_cache_info,
    plan_contraction,
)

__getattr__ = _library.module_getattr  # provides the lazily evaluated HAS_NKI

__all__ = [
    "HAS_NKI",
    "CPDecomposition",
    "ContractionPlan",
    "ContractionStep",
    "DFMP2Energy",
    "NkiDispatchError",
    "NkiFallbackWarning",
    "TTDecomposition",
    "TuckerDecomposition",
    "__version__",
    "ao_to_mo_transform",
    "apply_metric",
    "backend",
    "clear_plan_cache",
    "cp_decompose",
    "cp_reconstruct",
    "dfmp2_energy",
    "einsum",
    "estimate_flops",
    "explain",
    "from_xla",
    "get_backend",
    "metric_inverse_sqrt",
    "mp2_energy",
    "multi_einsum",
    "neuron_device_present",
    "plan_cache_info",
    "plan_contraction",
    "set_backend",
    "to_xla",
    "tt_decompose",
    "tt_reconstruct",
    "tucker_decompose",
    "tucker_reconstruct",
]
