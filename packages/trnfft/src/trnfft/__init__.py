"""trnfft: A drop-in for ``torch.fft``, with NKI transforms for AWS Trainium.

Same signatures and results as ``torch.fft``; on a machine without Trainium the PyTorch route
runs ``torch.fft`` underneath.

Backend selection is shared with every trnsci library (see :mod:`trncore.dispatch`):
``set_backend("auto" | "pytorch" | "nki")``, ``get_backend()``, ``HAS_NKI`` (true only where the
real ``nki`` package and a Neuron device are present) and the ``TRNFFT_*`` / ``TRNSCI_*``
environment variables.
"""

from trncore import NkiDispatchError, NkiFallbackWarning, neuron_device_present
from trnfft import _library
from trnfft._library import __version__, backend, explain, get_backend, set_backend
from trnfft.complex_tensor import ComplexTensor
from trnfft.errors import FFTArgumentError, FFTDimError, FFTDtypeUnsupportedError, FFTTypeError
from trnfft.layers import ComplexBatchNorm1d, ComplexConv1d, ComplexLinear, ComplexModReLU
from trnfft.matmul import complex_matmul
from trnfft.plan import (
    FFTPlan,
    choose_algorithm,
    clear_plan_cache,
    create_plan,
    plan_cache_info,
)
from trnfft.realtransforms import dct, dctn, dst, dstn, idct, idctn, idst, idstn
from trnfft.spectral import istft, stft
from trnfft.transforms import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)

__getattr__ = _library.module_getattr  # provides the lazily evaluated HAS_NKI

__all__ = [
    "HAS_NKI",
    "ComplexBatchNorm1d",
    "ComplexConv1d",
    "ComplexLinear",
    "ComplexModReLU",
    "ComplexTensor",
    "FFTArgumentError",
    "FFTDimError",
    "FFTDtypeUnsupportedError",
    "FFTPlan",
    "FFTTypeError",
    "NkiDispatchError",
    "NkiFallbackWarning",
    "__version__",
    "backend",
    "choose_algorithm",
    "clear_plan_cache",
    "complex_matmul",
    "create_plan",
    "dct",
    "dctn",
    "dst",
    "dstn",
    "explain",
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "get_backend",
    "hfft",
    "hfft2",
    "hfftn",
    "idct",
    "idctn",
    "idst",
    "idstn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "istft",
    "neuron_device_present",
    "plan_cache_info",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
    "set_backend",
    "stft",
]
