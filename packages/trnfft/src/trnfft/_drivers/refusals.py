"""The NKI route's refusal of a dtype its kernels do not take: one message for every trnfft driver.

The operation table then runs the PyTorch reference, which keeps float64/complex128 in double
precision; the message says how to opt into float32 compute instead (trncore.precision).
"""

from __future__ import annotations

import torch

from trncore.dispatch import KernelUnsupported

__all__ = ["unsupported_dtype"]

_DOUBLE = (torch.float64, torch.complex128)


def unsupported_dtype(dtype: torch.dtype, takes: str) -> KernelUnsupported:
    """``KernelUnsupported`` saying the kernel takes ``takes`` and got ``dtype`` (to be raised)."""
    hint = (
        " (float64 stays float64 on the reference; opt into float32 compute with "
        "TRNFFT_ALLOW_FP32_COMPUTE=1 or TRNSCI_ALLOW_FP32_COMPUTE=1)"
        if dtype in _DOUBLE
        else ""
    )
    return KernelUnsupported(f"kernel takes {takes}, got {str(dtype).removeprefix('torch.')}{hint}")
