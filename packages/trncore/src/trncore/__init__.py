"""trncore: the shared runtime of the trnsci libraries.

It owns what every library would otherwise write again: backend selection and the environment
variables that steer it (:mod:`trncore.config`), dispatch of declared operations to PyTorch, the
simulator or a Neuron device (:mod:`trncore.dispatch`), torch ↔ NumPy marshalling
(:mod:`trncore.marshal`), XLA residency and barriers (:mod:`trncore.xla`), kernel cache keys
(:mod:`trncore.keys`), persistent caches (:mod:`trncore.store`) and the NKI emulator
(:mod:`trncore.sim`).
"""

from trncore.config import BACKENDS
from trncore.dispatch import (
    KernelContext,
    KernelUnsupported,
    Library,
    Operation,
    Route,
    reset_fallback_warnings,
)
from trncore.errors import CallerError, NkiDispatchError, NkiFallbackWarning
from trncore.keys import KernelKey, bucket_dim, bucket_shape
from trncore.padding import TilePolicy
from trncore.platform import neuron_device_present, real_nki_available

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "CallerError",
    "KernelContext",
    "KernelKey",
    "KernelUnsupported",
    "Library",
    "NkiDispatchError",
    "NkiFallbackWarning",
    "Operation",
    "Route",
    "TilePolicy",
    "__version__",
    "bucket_dim",
    "bucket_shape",
    "neuron_device_present",
    "real_nki_available",
    "reset_fallback_warnings",
]
