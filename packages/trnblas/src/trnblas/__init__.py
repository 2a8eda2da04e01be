"""trnblas: BLAS levels 1–3 for PyTorch tensors, with NKI kernels for the Trainium Tensor Engine.

Functions follow ``scipy.linalg.blas`` (argument names, defaults, which triangle is read and
written) and return new tensors.

Backend selection is shared with every trnsci library (see :mod:`trncore.dispatch`):
``set_backend("auto" | "pytorch" | "nki")``, ``get_backend()``, ``HAS_NKI`` (true only where the
real ``nki`` package and a Neuron device are present) and the ``TRNBLAS_*`` / ``TRNSCI_*``
environment variables. Level-3 routines route through NKI kernels (:mod:`trnblas.kernels`) on
a Neuron device or the CPU simulator; :mod:`trnblas.nki` calls those kernels directly.
"""

from trnblas import _library
from trnblas._library import __version__, backend, explain, get_backend, set_backend
from trnblas.level1 import asum, axpy, copy, dot, dotc, iamax, nrm2, rot, scal, swap
from trnblas.level2 import gemv, ger, gerc, symv, trmv, trsv
from trnblas.level3 import batched_gemm, gemm, hemm, her2k, herk, symm, syr2k, syrk, trmm, trsm
from trncore import NkiDispatchError, NkiFallbackWarning, neuron_device_present

__getattr__ = _library.module_getattr  # the lazily evaluated HAS_NKI; removed names say what replaced them

__all__ = [
    "HAS_NKI",
    "NkiDispatchError",
    "NkiFallbackWarning",
    "__version__",
    "asum",
    "axpy",
    "backend",
    "batched_gemm",
    "copy",
    "dot",
    "dotc",
    "explain",
    "gemm",
    "gemv",
    "ger",
    "gerc",
    "get_backend",
    "hemm",
    "her2k",
    "herk",
    "iamax",
    "neuron_device_present",
    "nrm2",
    "rot",
    "scal",
    "set_backend",
    "swap",
    "symm",
    "symv",
    "syr2k",
    "syrk",
    "trmm",
    "trmv",
    "trsm",
    "trsv",
]
