"""``nl.shared_constant``: constant data embedded in the kernel and placed in shared HBM.

nki.language.shared_constant (NKI 0.3.0 / SDK 2.29): "Create a tensor in shared HBM initialized
with constant data ... a numpy array or a file path to a .npy file"; with LNC=2 both cores share
the same constant. Supported element types: float32, float16, bfloat16, int32, int16, int8,
uint32, uint16, uint8, float8_e4m3fn, float8_e5m2, and (NKI 0.6.0 page) float8_e8m0fnu, the MX
scale dtype NKI 0.5.0 introduced (refused under an earlier target release, as ``nl.float8_e8m0fnu``
is). The page lists packed x4 and tfloat32 as not tested end-to-end on hardware; the emulator
refuses them, and anything else, at the kernel line.

The data is written by the program's first use (on the traced run and on every replay), so a
replayed kernel sees the same constant. The array's bytes are part of the kernel key only through
the kernel's source (a file path argument names the data; changing the file's contents between
calls of the same key is not seen — as on hardware, where the constant is compiled in).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from trncore.sim import context, dtypes, versions
from trncore.sim.creation import allocate
from trncore.sim.errors import DtypeError
from trncore.sim.tensor import SHARED_HBM

__all__ = ["shared_constant"]

_SUPPORTED = frozenset(
    {"float32", "float16", "bfloat16", "int32", "int16", "int8", "uint32", "uint16", "uint8",
     "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"}
)  # fmt: skip


def shared_constant(constant: Any) -> Any:
    """A shared-HBM tensor holding ``constant`` (an array, or the path of a ``.npy`` file)."""
    site = context.user_site()
    if isinstance(constant, (str, os.PathLike)):
        data = np.load(os.fspath(constant), allow_pickle=False)
    else:
        data = np.asarray(constant)
    try:
        name = dtypes.dtype_name(data.dtype)
    except (TypeError, NotImplementedError):
        name = str(data.dtype)
    if name not in _SUPPORTED:
        raise DtypeError("shared-constant-dtype", f"nl.shared_constant of {data.dtype} data: "
                         f"supported element types are {sorted(_SUPPORTED)}", site)  # fmt: skip
    if name == "float8_e8m0fnu":  # a dtype of NKI 0.5.0 and later (nki.language.float8_e8m0fnu)
        versions.require("nl.float8_e8m0fnu", site)
    shape = data.shape if data.ndim else (1,)
    t = allocate(shape, name, SHARED_HBM, "shared_constant", "constant")
    ctx = context.current()
    values = np.ascontiguousarray(data).reshape(shape).astype(dtypes.storage_dtype(name))
    arr = t.array()

    def run() -> None:
        arr[...] = values

    ctx.emit("shared_constant", "dma", site, [], [t], run, {"bytes": values.nbytes})
    return t
