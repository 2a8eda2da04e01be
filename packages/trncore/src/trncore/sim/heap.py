"""Keep glibc's heap from handing the emulator's scratch memory back to the system after every
instruction.

Each instruction's data work makes NumPy temporaries of a tile's size (a float32 copy of a
bfloat16 operand, a matmul's product, an activation's intermediate: 64 KiB to a few MiB). With
glibc's default settings such a block is either mapped fresh (at or above the dynamic mmap
threshold) or carved from the top of the heap, which is trimmed back to the system as soon as
more than twice that threshold lies free at its top. Either way the next instruction touches
new pages: measured on AWS's qkv_cte kernel (4 224 bf16 matmuls of 128 x 128 x 512), 139 page
faults per matmul while tracing and a closure that took 580 µs of CPU against 260 µs in a
replay of the same closures (whose heap layout happened to stay put).

:func:`retain_freed_memory` sets two of glibc's ``mallopt`` parameters once per process: blocks
under 32 MiB (glibc's own ceiling for its dynamic mmap threshold on 64-bit) come from the heap,
and the heap is trimmed only when more than 64 MiB lies free at its top. The cost is memory: a
process keeps up to 64 MiB of freed heap per malloc arena instead of returning it (an explicit
``malloc_trim``, which the conformance runner makes before each case, still returns it). Where
the C library is not glibc nothing is changed.

It is applied when a process first traces a kernel on the emulator (:func:`configure`, called
by each trace; the conformance runner's test process applies it at start), unless
``TRNSCI_SIM_HEAP=system`` asks to leave glibc's own settings alone. Applying it by default is a
trade: every emulator user gets the speed (1.2-2x on AWS's larger library kernels, see
docs/emulator-speed.md), and a process that runs the emulator keeps up to 64 MiB of freed
memory per arena, which is small beside the tiles and HBM images a trace holds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

from trncore import config

__all__ = ["HEAP_ENV", "MMAP_THRESHOLD", "MODES", "TRIM_THRESHOLD", "configure", "retain_freed_memory"]

HEAP_ENV = "TRNSCI_SIM_HEAP"

#: Blocks below this many bytes come from the heap (glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit).
MMAP_THRESHOLD = 32 * 2**20
#: The heap is trimmed only when more than this many bytes lie free at its top.
TRIM_THRESHOLD = 64 * 2**20

# glibc's malloc.h parameter numbers
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_applied = False


@functools.lru_cache(maxsize=1)
def _mallopt() -> Any:
    """glibc's ``mallopt``, or None where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    if not hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt does nothing
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def retain_freed_memory() -> bool:
    """Set the heap parameters described in the module docstring (once per process).

    True when they are in effect (now or from an earlier call), False where they cannot be set.
    """
    global _applied
    if _applied:
        return True
    mallopt = _mallopt()
    if mallopt is None:
        return False
    mapped = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)  # (1 on success)
    trimmed = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    _applied = mapped == 1 and trimmed == 1
    return _applied


#: The values ``TRNSCI_SIM_HEAP`` takes: ``retain`` (the default) or ``system`` (glibc's settings).
MODES = ("retain", "system")


def configure() -> bool:
    """Apply the setting ``TRNSCI_SIM_HEAP`` names (``retain`` when unset, or ``system``).
    True when the heap parameters are in effect (``system`` does not undo an earlier ``retain``
    in the same process: glibc's dynamic threshold cannot be restored)."""
    mode = config.read_verbatim(HEAP_ENV, "").strip().lower() or "retain"
    if mode not in MODES:
        raise ValueError(f"{HEAP_ENV} must be 'retain' or 'system', got {mode!r}")
    if mode == "retain":
        return retain_freed_memory()
    return _applied
