"""trncore: the shared runtime of the trnsci libraries.

It owns what every library would otherwise write again: backend selection and the environment
variables that steer it (:mod:`trncore.config`), dispatch of declared operations to PyTorch, the
simulator or a Neuron device (:mod:`trncore.dispatch`), torch ↔ NumPy marshalling
(:mod:`trncore.marshal`), XLA residency and barriers (:mod:`trncore.xla`), kernel cache keys
(:mod:`trncore.keys`) and the NKI emulator
(:mod:`trncore.sim`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trncore.config import BACKENDS
from trncore.errors import CallerError, NkiDispatchError, NkiFallbackWarning
from trncore.keys import KernelKey, bucket_dim, bucket_shape
from trncore.platform import neuron_device_present, real_nki_available

if TYPE_CHECKING:
    from trncore.dispatch import (
        KernelContext,
        KernelUnsupported,
        Library,
        Operation,
        Route,
        reset_fallback_warnings,
    )
    from trncore.padding import TilePolicy

# The names below need torch; they load on first use so that ``import trncore.sim`` (the emulator,
# NumPy only) does not import torch (PEP 562 module __getattr__).
_LAZY = {
    "KernelContext": "trncore.dispatch",
    "KernelUnsupported": "trncore.dispatch",
    "Library": "trncore.dispatch",
    "Operation": "trncore.dispatch",
    "Route": "trncore.dispatch",
    "backend": "trncore.dispatch",
    "reset_fallback_warnings": "trncore.dispatch",
    "TilePolicy": "trncore.padding",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trncore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "backend",
    "bucket_dim",
    "bucket_shape",
    "neuron_device_present",
    "real_nki_available",
    "reset_fallback_warnings",
]
