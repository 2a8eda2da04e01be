"""What this host has: PyTorch, the real NKI package, torch-xla, a Neuron device.

Every probe is lazy (the nki and device probes cached): importing a trnsci library never imports
torch-xla or nki. torch is an extra of trncore (``pip install trncore`` is the NKI emulator alone, on
NumPy and ml_dtypes), so the modules that need it say what to install where it is absent
(:func:`missing_torch`).
"""

from __future__ import annotations

import functools
import glob
import importlib
import importlib.util
import sys

from trncore import config

__all__ = [
    "TORCH_INSTALL",
    "missing_torch",
    "neuron_device_present",
    "nki_version",
    "real_nki_available",
    "torch_available",
    "torch_message",
    "torch_xla_available",
]

#: How to get torch where trncore was installed alone. The three libraries declare torch themselves.
TORCH_INSTALL = 'pip install "trncore[torch]", or any of trnblas, trnfft, trntensor (they bring torch)'


def torch_available() -> bool:
    """True where ``torch`` can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def torch_message(needed_by: str, why: str = "") -> str:
    """The one message for a part of trncore that needs torch where torch is not installed."""
    because = f" ({why})" if why else ""
    return (
        f"{needed_by} needs PyTorch{because}, which is not installed: {TORCH_INSTALL}. "
        "Without torch, trncore is the NKI emulator (trncore.sim, trncore.kernels) on NumPy."
    )


def missing_torch(needed_by: str, error: ModuleNotFoundError) -> None:
    """Raise :func:`torch_message` as an ImportError if ``error`` is torch's absence.

    Called by each module that imports torch, from the ``except`` of that import::

        try:
            import torch
        except ModuleNotFoundError as exc:
            platform.missing_torch(__name__, exc)
            raise

    Any other missing module (a broken torch installation) returns, and the caller re-raises it.
    """
    if error.name == "torch":
        raise ImportError(torch_message(needed_by), name="torch") from error


def _is_trncore_emulator(module: object) -> bool:
    return bool(getattr(module, "__trncore_emulator__", False))


@functools.lru_cache(maxsize=1)
def _real_nki_probe() -> bool:
    loaded = sys.modules.get("nki")
    if loaded is not None:
        return not _is_trncore_emulator(loaded)
    if importlib.util.find_spec("nki") is None:
        return False
    try:
        module = importlib.import_module("nki")
    except ImportError:  # PyPI's 'nki' placeholder raises ImportError on import
        return False
    return hasattr(module, "jit") and not _is_trncore_emulator(module)


def real_nki_available() -> bool:
    """True where AWS's ``nki`` package imports (the emulator registered as ``nki`` does not count)."""
    loaded = sys.modules.get("nki")
    if loaded is not None and _is_trncore_emulator(loaded):
        return False
    return _real_nki_probe()


def nki_version() -> str | None:
    """The installed real ``nki`` version, or ``None``."""
    if not real_nki_available():
        return None
    from importlib import metadata

    try:
        return metadata.version("nki")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def torch_xla_available() -> bool:
    """True where ``torch_xla`` can be imported (without importing it)."""
    return importlib.util.find_spec("torch_xla") is not None


@functools.lru_cache(maxsize=1)
def neuron_device_present() -> bool:
    """True only where torch-xla reports a Neuron device.

    An importable ``nki`` or ``torch_xla`` is not enough: torch-xla on a CPU host (PJRT_DEVICE=CPU)
    reports ``CPU`` and this returns False.
    """
    if not torch_xla_available():
        return False
    if not glob.glob("/dev/neuron*") and config.pjrt_device() != "NEURON":
        return False  # no device node and no Neuron PJRT plugin requested: skip importing torch-xla
    try:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        if str(xr.device_type()).upper() != "NEURON":
            return False
        # device_type() only echoes PJRT_DEVICE; ask the initialised runtime what the device is.
        return str(xm.xla_device_hw(torch_xla.device())).upper() == "NEURON"
    except Exception:  # no Neuron PJRT plugin or a broken torch-xla: no usable device
        return False
