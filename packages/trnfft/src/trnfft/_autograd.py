"""The complex layers' autograd functions, built on the operations of :mod:`trnfft._ops`.

``complex_matmul(ar, ai, br, bi, bias_r, bias_i, trans_a, trans_b)`` is a trncore operation: its
reference is four real GEMMs in torch (any dtype, any device), its driver launches
:func:`trncore.kernels.complex_gemm.complex_matmul_kernel` for float32 planes. The layers'
``torch.autograd.Function`` classes below call it in ``forward`` *and* in ``backward`` (the analytic
gradients are complex GEMMs too), so on the NKI route both directions run on the Tensor Engine and
on the PyTorch route both run the reference (where float64 ``gradcheck`` verifies the formulas).

For ``Y = X Wᵀ + b`` with complex ``X (rows, in)``, ``W (out, in)`` and real loss ``ℓ``, PyTorch's
convention (the gradient of a real function of a complex tensor is ``∂ℓ/∂Re + i ∂ℓ/∂Im``) gives

    grad_X = grad_Y · conj(W),   grad_W = grad_Yᵀ · conj(X),   grad_b = Σ_rows grad_Y,

which, on planes, is what the backward below computes.

modReLU and whitening batch normalisation have analytic backwards of their own (operations
``modrelu_backward`` and ``batchnorm_backward``; the formulas are beside their references in
:mod:`trnfft._pytorch`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from trnfft._ops import batchnorm_backward, batchnorm_forward, complex_matmul, modrelu, modrelu_backward
from trnfft._pytorch import Planes

__all__ = ["BatchNormFunction", "Conv1dFunction", "LinearFunction", "MatmulFunction", "ModReLUFunction"]


class MatmulFunction(torch.autograd.Function):
    """``C = A B`` on 2-D planes through the ``complex_matmul`` operation, with its backward by the
    same operation: ``grad_A = grad_C B^H``, ``grad_B = A^H grad_C`` (torch's convention for
    complex gradients, which on planes is the gradient of each real plane)."""

    @staticmethod
    def forward(
        ctx: Any, ar: torch.Tensor, ai: torch.Tensor, br: torch.Tensor, bi: torch.Tensor
    ) -> Planes:
        """The product's planes."""
        ctx.save_for_backward(ar, ai, br, bi)
        return complex_matmul(ar, ai, br, bi)

    @staticmethod
    def backward(ctx: Any, gcr: torch.Tensor, gci: torch.Tensor) -> tuple[Any, ...]:
        """Gradients of the four planes."""
        ar, ai, br, bi = ctx.saved_tensors
        need = ctx.needs_input_grad
        gar = gai = gbr = gbi = None
        gcr, gci = gcr.contiguous(), gci.contiguous()
        if need[0] or need[1]:
            gar, gai = complex_matmul(gcr, gci, br, -bi, None, None, False, True)
        if need[2] or need[3]:
            gbr, gbi = complex_matmul(ar, -ai, gcr, gci, None, None, True, False)
        return gar, gai, gbr, gbi


class LinearFunction(torch.autograd.Function):
    """``Y = X Wᵀ + b`` on planes, ``X`` of shape ``(rows, in)``; analytic backward by complex GEMMs."""

    @staticmethod
    def forward(
        ctx: Any,
        xr: torch.Tensor,
        xi: torch.Tensor,
        wr: torch.Tensor,
        wi: torch.Tensor,
        br: torch.Tensor | None,
        bi: torch.Tensor | None,
    ) -> Planes:
        """The layer's output planes."""
        ctx.save_for_backward(xr, xi, wr, wi)
        ctx.has_bias = br is not None
        return complex_matmul(xr, xi, wr, wi, br, bi, False, True)

    @staticmethod
    def backward(ctx: Any, gyr: torch.Tensor, gyi: torch.Tensor) -> tuple[Any, ...]:
        """Gradients of the planes: ``grad_X = grad_Y conj(W)``, ``grad_W = grad_Yᵀ conj(X)``."""
        xr, xi, wr, wi = ctx.saved_tensors
        need = ctx.needs_input_grad
        gxr = gxi = gwr = gwi = gbr = gbi = None
        gyr, gyi = gyr.contiguous(), gyi.contiguous()
        if need[0] or need[1]:
            gxr, gxi = complex_matmul(gyr, gyi, wr, -wi)
        if need[2] or need[3]:
            gwr, gwi = complex_matmul(gyr, gyi, xr, -xi, None, None, True, False)
        if ctx.has_bias and (need[4] or need[5]):
            gbr, gbi = gyr.sum(0), gyi.sum(0)
        return gxr, gxi, gwr, gwi, gbr, gbi


def _unfold(x: torch.Tensor, k: int, stride: int, padding: int, dilation: int) -> torch.Tensor:
    """im2col of ``(N, C, L)``: ``(N * L_out, C * k)``, row ``(n, t)`` holds the window at ``t``."""
    cols = F.unfold(x.unsqueeze(2), (1, k), dilation=(1, dilation), padding=(0, padding), stride=(1, stride))
    return cols.transpose(1, 2).reshape(-1, cols.shape[1])


def _fold(
    cols: torch.Tensor, shape: torch.Size, k: int, stride: int, padding: int, dilation: int
) -> torch.Tensor:
    """The adjoint of :func:`_unfold`: overlapping windows summed back into ``(N, C, L)``."""
    n, c, length = shape
    cols = cols.reshape(n, -1, c * k).transpose(1, 2)
    out = F.fold(cols, (1, length), (1, k), dilation=(1, dilation), padding=(0, padding), stride=(1, stride))
    return out.squeeze(2)


class Conv1dFunction(torch.autograd.Function):
    """Complex 1-D cross-correlation (``groups=1``, zero padding) as im2col + complex GEMM."""

    @staticmethod
    def forward(
        ctx: Any,
        xr: torch.Tensor,
        xi: torch.Tensor,
        wr: torch.Tensor,
        wi: torch.Tensor,
        br: torch.Tensor | None,
        bi: torch.Tensor | None,
        stride: int,
        padding: int,
        dilation: int,
    ) -> Planes:
        """Output planes ``(N, out, L_out)``."""
        out_ch, _, k = wr.shape
        geo = (k, stride, padding, dilation)
        cr, ci = _unfold(xr, *geo), _unfold(xi, *geo)
        w2r, w2i = wr.reshape(out_ch, -1), wi.reshape(out_ch, -1)
        yr, yi = complex_matmul(cr, ci, w2r, w2i, br, bi, False, True)
        ctx.save_for_backward(cr, ci, w2r, w2i)
        ctx.geo, ctx.in_shape, ctx.w_shape, ctx.has_bias = geo, xr.shape, wr.shape, br is not None
        n = xr.shape[0]
        planes = [y.reshape(n, -1, out_ch).transpose(1, 2).contiguous() for y in (yr, yi)]
        return planes[0], planes[1]

    @staticmethod
    def backward(ctx: Any, gyr: torch.Tensor, gyi: torch.Tensor) -> tuple[Any, ...]:
        """``grad_cols = grad_Y conj(W)`` folded back, ``grad_W = grad_Yᵀ conj(cols)``."""
        cr, ci, w2r, w2i = ctx.saved_tensors
        need = ctx.needs_input_grad
        out_ch = w2r.shape[0]
        g2r = gyr.transpose(1, 2).reshape(-1, out_ch).contiguous()
        g2i = gyi.transpose(1, 2).reshape(-1, out_ch).contiguous()
        gxr = gxi = gwr = gwi = gbr = gbi = None
        if need[0] or need[1]:
            gcr, gci = complex_matmul(g2r, g2i, w2r, -w2i)
            gxr, gxi = (_fold(g, ctx.in_shape, *ctx.geo) for g in (gcr, gci))
        if need[2] or need[3]:
            gwr, gwi = complex_matmul(g2r, g2i, cr, -ci, None, None, True, False)
            gwr, gwi = gwr.reshape(ctx.w_shape), gwi.reshape(ctx.w_shape)
        if ctx.has_bias and (need[4] or need[5]):
            gbr, gbi = gyr.sum((0, 2)), gyi.sum((0, 2))
        return gxr, gxi, gwr, gwi, gbr, gbi, None, None, None


class ModReLUFunction(torch.autograd.Function):
    """modReLU on ``(C, M)`` planes with a ``(C,)`` bias; analytic backward (one kernel each way)."""

    @staticmethod
    def forward(ctx: Any, xr: torch.Tensor, xi: torch.Tensor, b: torch.Tensor) -> Planes:
        """Output planes."""
        ctx.save_for_backward(xr, xi, b)
        return modrelu(xr, xi, b)

    @staticmethod
    def backward(ctx: Any, gyr: torch.Tensor, gyi: torch.Tensor) -> tuple[Any, ...]:
        """Gradients of the planes and the bias."""
        xr, xi, b = ctx.saved_tensors
        gxr, gxi, gb = modrelu_backward(xr, xi, b, gyr.contiguous(), gyi.contiguous())
        return gxr, gxi, gb.reshape(b.shape)


class BatchNormFunction(torch.autograd.Function):
    """Whitening batch norm on ``(C, M)`` planes; returns ``(yr, yi, stats)`` (stats not differentiable)."""

    @staticmethod
    def forward(
        ctx: Any,
        xr: torch.Tensor,
        xi: torch.Tensor,
        params: torch.Tensor,
        stats_in: torch.Tensor,
        eps: float,
        batch_stats: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Output planes and the statistics used."""
        yr, yi, stats = batchnorm_forward(xr, xi, params, stats_in, eps=eps, batch_stats=batch_stats)
        ctx.save_for_backward(xr, xi, params, stats)
        ctx.eps, ctx.batch_stats = eps, batch_stats
        ctx.mark_non_differentiable(stats)
        return yr, yi, stats

    @staticmethod
    def backward(ctx: Any, gyr: torch.Tensor, gyi: torch.Tensor, gstats: Any) -> tuple[Any, ...]:
        """Gradients of the input planes and of ``params``."""
        xr, xi, params, stats = ctx.saved_tensors
        gxr, gxi, gparams = batchnorm_backward(
            xr,
            xi,
            gyr.contiguous(),
            gyi.contiguous(),
            params,
            stats,
            eps=ctx.eps,
            batch_stats=ctx.batch_stats,
        )
        return gxr, gxi, gparams, None, None, None
