"""trntensor: Einsum with contraction planning, tensor decompositions and DF-MP2 building blocks.

``einsum`` matches ``torch.einsum`` on every expression and contracts in opt_einsum's optimal
order; each GEMM-shaped step goes through the trncore operation ``contract_gemm``
(:mod:`trntensor.gemm`). ``ao_to_mo_transform`` and ``mp2_energy`` run through the operations
``ao_to_mo`` and ``mp2_energy``. Each operation has a PyTorch reference (any device) and an NKI
kernel (:mod:`trntensor.kernels`, float32) used on a Neuron device or on the trncore.sim emulator.

Backend selection is shared with every trnsci library (see :mod:`trncore.dispatch`):
``set_backend("auto" | "pytorch" | "nki")``, ``get_backend()``, ``HAS_NKI`` (true only where the
real ``nki`` package and a Neuron device are present) and the ``TRNTENSOR_*`` / ``TRNSCI_*``
environment variables.
"""

from trncore import Library, NkiDispatchError, NkiFallbackWarning, neuron_device_present

__version__ = "0.1.0"

_library: Library = Library.register("trntensor", __version__)
set_backend = _library.set_backend
backend = _library.backend  # with backend("nki"): ... (scoped to the block)
get_backend = _library.get_backend
__getattr__ = _library.module_getattr  # provides the lazily evaluated HAS_NKI

# Imported after registration: the modules below look the library up through this package.
from trncore.xla import from_xla, to_xla  # noqa: E402
from trntensor.contraction import einsum, multi_einsum  # noqa: E402
from trntensor.decompositions import (  # noqa: E402
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
from trntensor.df_mp2 import ao_to_mo_transform, apply_metric, metric_inverse_sqrt, mp2_energy  # noqa: E402
from trntensor.dfmp2 import DFMP2Energy, dfmp2_energy  # noqa: E402
from trntensor.planning import (  # noqa: E402
    ContractionPlan,
    ContractionStep,
    clear_plan_cache,
    estimate_flops,
    plan_cache_info,
    plan_contraction,
)

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
