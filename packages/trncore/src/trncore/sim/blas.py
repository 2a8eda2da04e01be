"""Keep NumPy's BLAS single-threaded while the emulator runs a program.

The emulator multiplies many small tiles (at most 128x128 by 128x512). Threaded BLAS gains little
on such sizes and loses badly when the cores are shared: on the 2-core development machine under
load, a 1024^3 GEMM replay took about 4 s with OpenBLAS threads and 0.05 s without. While a trace
or replay runs, the calling thread's OpenBLAS thread count is set to ``TRNSCI_SIM_BLAS_THREADS``
(default 1) through OpenBLAS's thread-local setter, and restored afterwards; other threads and
other libraries (torch) are unaffected. Where NumPy does not use OpenBLAS (or the setter is
missing, or /proc is unavailable) this is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator
from typing import Any

from trncore import config

__all__ = ["BLAS_THREADS_ENV", "blas_threads"]

BLAS_THREADS_ENV = "TRNSCI_SIM_BLAS_THREADS"


@functools.lru_cache(maxsize=1)
def _setter() -> Any:
    import numpy as np

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure the BLAS library is loaded
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            fn = lib.openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    return None


@contextlib.contextmanager
def blas_threads() -> Iterator[None]:
    """Run the block with the configured number of OpenBLAS threads on this thread."""
    setter = _setter()
    if setter is None:
        yield
        return
    try:
        wanted = max(1, int(config.read_verbatim(BLAS_THREADS_ENV, "1")))
    except ValueError:
        raise ValueError(f"{BLAS_THREADS_ENV} must be a positive integer") from None
    previous = setter(wanted)
    try:
        yield
    finally:
        setter(previous)
