"""Give the C heap's free pages back to the system between the DF-MP2 driver's stages.

Temporaries that come and go in sizes that change from round to round (an integral chunk's
transform, a received chunk, one row's amplitudes) are served by glibc's allocator from its heap
once its adaptive ``mmap`` threshold has risen past them, and free memory in the middle of the
heap stays resident: measured on an 418-function alkane, a rank's resident set grew by about
70 MiB of free memory over the integral chunks, as much as its share of ``B`` with 4 ranks. The
driver's loops now reuse buffers made once instead (nothing of that size is allocated in them), and
call :func:`release_free_memory` after the integrals and after the fit, where large buffers are
freed for good.

:func:`release_free_memory` returns the heap's free pages to the system (glibc ``malloc_trim(0)``,
which changes no allocator setting) once more than :data:`RELEASE_ABOVE` bytes of it are free
(``mallinfo2``). Not at every call: a trimmed page costs a page fault when it is used again, and
trimming after every round made naphthalene's correlation step 20 % slower. Without glibc it does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["RELEASE_ABOVE", "release_free_memory"]

#: Free heap bytes above which :func:`release_free_memory` gives them back to the system.
RELEASE_ABOVE = 16 * 2**20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]


def _release() -> Callable[[], None]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        trim, info = libc.malloc_trim, libc.mallinfo2
    except (OSError, AttributeError):  # not glibc (or older than 2.33): nothing to do
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    info.argtypes, info.restype = [], _MallInfo2

    def release() -> None:
        if info().fordblks > RELEASE_ABOVE:  # free bytes in the main heap and the arenas
            trim(0)

    return release


#: Return the heap's free pages to the system when more than :data:`RELEASE_ABOVE` bytes are free
#: (glibc ``malloc_trim(0)``; a no-op elsewhere).
release_free_memory: Callable[[], None] = _release()
