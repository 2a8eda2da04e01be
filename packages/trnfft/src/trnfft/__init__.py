"""trnfft: A drop-in for ``torch.fft``, with NKI transforms for AWS Trainium.

Same signatures and results as ``torch.fft``; on a machine without Trainium the PyTorch route
runs ``torch.fft`` underneath.

Backend selection is shared with every trnsci library (see :mod:`trncore.dispatch`):
``set_backend("auto" | "pytorch" | "nki")``, ``get_backend()``, ``HAS_NKI`` (true only where the
real ``nki`` package and a Neuron device are present) and the ``TRNFFT_*`` / ``TRNSCI_*``
environment variables.
"""

from trncore import Library, NkiDispatchError, NkiFallbackWarning, neuron_device_present

__version__ = "0.1.0"

_library = Library.register("trnfft", __version__)
set_backend = _library.set_backend
get_backend = _library.get_backend
__getattr__ = _library.module_getattr  # provides the lazily evaluated HAS_NKI

__all__ = [
    "HAS_NKI",
    "NkiDispatchError",
    "NkiFallbackWarning",
    "__version__",
    "get_backend",
    "neuron_device_present",
    "set_backend",
]
