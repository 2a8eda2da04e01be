"""Drivers of the complex layers' operations: float32 planes onto the shared kernels.

``complex_matmul`` launches :func:`trncore.kernels.complex_gemm.complex_matmul_kernel` (three or
four real products per tile); :func:`planes_driver` makes the driver of a kernel that takes float32
planes as they are (modReLU and batch normalisation, :mod:`trnfft.kernels`). Other dtypes raise
:class:`~trncore.dispatch.KernelUnsupported`, so the PyTorch reference runs (float64 stays float64).
"""

from __future__ import annotations

from typing import Any

import torch

from trncore.dispatch import KernelContext, KernelUnsupported
from trncore.kernels.complex_gemm import complex_matmul_kernel, use_gauss
from trnfft._drivers.refusals import unsupported_dtype
from trnfft._pytorch import Planes

__all__ = ["complex_matmul_driver", "complex_matmul_work", "planes_driver"]


def complex_matmul_driver(
    ctx: KernelContext,
    ar: torch.Tensor,
    ai: torch.Tensor,
    br: torch.Tensor,
    bi: torch.Tensor,
    bias_r: torch.Tensor | None = None,
    bias_i: torch.Tensor | None = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Planes:
    tensors = [t for t in (ar, ai, br, bi, bias_r, bias_i) if t is not None]
    for t in tensors:
        if t.dtype != torch.float32:
            raise unsupported_dtype(t.dtype, "float32 planes")
    if ar.dim() != 2 or br.dim() != 2 or ar.shape != ai.shape or br.shape != bi.shape:
        raise KernelUnsupported("kernel takes 2-D planes of equal shapes")
    m, k = (ar.shape[1], ar.shape[0]) if trans_a else tuple(ar.shape)
    k2, n = (br.shape[1], br.shape[0]) if trans_b else tuple(br.shape)
    if k != k2 or min(m, n, k) == 0:
        raise KernelUnsupported(f"shapes do not chain: {tuple(ar.shape)} and {tuple(br.shape)}")
    gauss = use_gauss(m, n)
    args = [t.contiguous() for t in tensors]
    return ctx.launch(complex_matmul_kernel, *args, trans_a=bool(trans_a), trans_b=bool(trans_b), gauss=gauss)


def complex_matmul_work(
    ar: Any,
    ai: Any,
    br: Any,
    bi: Any,
    bias_r: Any = None,
    bias_i: Any = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> int:
    """Real flops of the four-multiplication product (the ``auto`` threshold's measure)."""
    try:
        n = br.shape[0] if trans_b else br.shape[1]
        return int(8 * ar.numel() * n)
    except Exception:
        return 0


def planes_driver(kernel: Any) -> Any:
    """A driver launching ``kernel`` on float32 tensors; keyword arguments become compile-time parameters."""

    def driver(ctx: KernelContext, *tensors: torch.Tensor, **params: Any) -> Any:
        for t in tensors:
            if t.dtype != torch.float32:
                raise unsupported_dtype(t.dtype, "float32")
        if tensors[0].numel() == 0:
            raise KernelUnsupported("empty input")
        return ctx.launch(kernel, *[t.contiguous() for t in tensors], **params)

    driver.__doc__ = f"Launch ``{kernel.__name__}`` on float32 tensors."
    return driver
