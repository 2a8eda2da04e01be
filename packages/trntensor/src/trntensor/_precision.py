"""trncore's dtype policy (:mod:`trncore.precision`) as trntensor's kernels apply it.

The kernels compute in float32 (bfloat16 einsum operands are taken as they are, with float32
accumulation). A float64 input is never computed in float32 behind the caller's back: the
kernel route declines it with the reason and dispatch runs the float64 PyTorch reference with
one ``NkiFallbackWarning``. A caller who accepts float32 accuracy passes float32 tensors, or sets
``TRNTENSOR_ALLOW_FP32_COMPUTE=1`` (``TRNSCI_ALLOW_FP32_COMPUTE=1`` for every library): float64
inputs then run in float32 and the results come back as float64.
"""

from __future__ import annotations

import torch

from trncore import precision

__all__ = ["KERNEL_DTYPES", "kernel_dtype"]

#: Input dtypes trntensor's kernels take as they are.
KERNEL_DTYPES = (torch.float32, torch.bfloat16)


def kernel_dtype(dtype: torch.dtype, operation: str) -> torch.dtype:
    """The dtype the kernel of ``operation`` runs in for inputs of ``dtype``.

    Raises :class:`~trncore.dispatch.KernelUnsupported` (so the reference runs, with the reason)
    for float64 without the opt-in and for dtypes no kernel takes (integers, complex, float16).
    """
    return precision.kernel_dtype("trntensor", dtype, operation=operation, dtypes=KERNEL_DTYPES)
