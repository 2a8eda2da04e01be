"""Whitening batch normalisation as trncore operations with an analytic backward.

Layout: channels first, ``(C, M)`` planes (``M`` = every sample of a channel). ``params`` is
``(C, 5)``: ``γ_rr, γ_ii, γ_ri, β_r, β_i``; ``stats`` is ``(C, 5)``: ``μ_r, μ_i, V_rr, V_ii, V_ri``
(biased batch covariance, ``eps`` not included).

Forward: ``c = x - μ``, ``W = (V + eps I)^(-1/2)`` (closed form for a 2x2 SPD matrix, see
:func:`whitening`), ``ŷ = W c``, ``y = Γ ŷ + β`` with ``Γ = [[γ_rr, γ_ri], [γ_ri, γ_ii]]``.

Backward, with ``g = ∂ℓ/∂y`` and ``h = Γ g`` (per sample, 2-vectors):

* ``∂ℓ/∂β = Σ g``, ``∂ℓ/∂γ_rr = Σ g_r ŷ_r``, ``∂ℓ/∂γ_ii = Σ g_i ŷ_i``, ``∂ℓ/∂γ_ri = Σ g_r ŷ_i + g_i ŷ_r``;
* with running statistics (constants): ``∂ℓ/∂x = W h``;
* with batch statistics: ``G = Σ h cᵀ``; ``Z`` solves the Sylvester equation
  ``W Z + Z W = G + Gᵀ`` (``W² = (V + eps I)⁻¹`` differentiates through it); ``S = -W² Z W²``;
  ``∂ℓ/∂c = W h + S c / M`` and ``∂ℓ/∂x = ∂ℓ/∂c - mean(∂ℓ/∂c)`` (the centring's Jacobian).

For a symmetric ``W = [[a, b], [b, d]]`` and symmetric right side ``R``, the Sylvester solution is
``z12 = (R12 - b R11 / 2a - b R22 / 2d) / (a + d - b²/a - b²/d)``, ``z11 = (R11 - 2 b z12) / 2a``,
``z22 = (R22 - 2 b z12) / 2d`` (the denominator is ``(a + d) det W / (a d) > 0``).
"""

from __future__ import annotations

from typing import Any

import torch

from trncore.dispatch import Operation
from trnfft import _library
from trnfft._layer_ops import _planes_driver
from trnfft.kernels.batchnorm import batchnorm_backward_kernel, batchnorm_forward_kernel

__all__ = ["BatchNormFunction", "batchnorm_backward", "batchnorm_forward", "whitening"]


def whitening(stats: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(W_rr, W_ii, W_ri)`` of ``(V + eps I)^(-1/2)`` per channel.

    For a 2x2 SPD ``V``: ``(adj V + s I) / (s t)`` with ``s = √det V`` and ``t = √(tr V + 2s)``.
    """
    vrr, vii, vri = stats[:, 2] + eps, stats[:, 3] + eps, stats[:, 4]
    s = torch.sqrt(vrr * vii - vri * vri)
    inv = 1.0 / (s * torch.sqrt(vrr + vii + 2 * s))
    return (vii + s) * inv, (vrr + s) * inv, -vri * inv


def _forward_torch(
    xr: torch.Tensor,
    xi: torch.Tensor,
    params: torch.Tensor,
    stats_in: torch.Tensor,
    eps: float = 1e-5,
    batch_stats: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference forward: ``(yr, yi, stats)``."""
    if batch_stats:
        mr, mi = xr.mean(1), xi.mean(1)
        cr, ci = xr - mr[:, None], xi - mi[:, None]
        stats = torch.stack([mr, mi, (cr * cr).mean(1), (ci * ci).mean(1), (cr * ci).mean(1)], 1)
    else:
        stats = stats_in
        cr, ci = xr - stats[:, :1], xi - stats[:, 1:2]
    a, d, b = (w[:, None] for w in whitening(stats, eps))
    hr, hi = a * cr + b * ci, b * cr + d * ci
    g_rr, g_ii, g_ri, b_r, b_i = (p[:, None] for p in params.unbind(1))
    return g_rr * hr + g_ri * hi + b_r, g_ri * hr + g_ii * hi + b_i, stats


def _backward_torch(
    xr: torch.Tensor,
    xi: torch.Tensor,
    gr: torch.Tensor,
    gi: torch.Tensor,
    params: torch.Tensor,
    stats: torch.Tensor,
    eps: float = 1e-5,
    batch_stats: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference analytic backward: ``(grad_xr, grad_xi, grad_params)``."""
    a, d, b = (w[:, None] for w in whitening(stats, eps))
    cr, ci = xr - stats[:, :1], xi - stats[:, 1:2]
    yr, yi = a * cr + b * ci, b * cr + d * ci
    g_rr, g_ii, g_ri = (p[:, None] for p in params[:, :3].unbind(1))
    gparams = torch.stack(
        [(gr * yr).sum(1), (gi * yi).sum(1), (gr * yi + gi * yr).sum(1), gr.sum(1), gi.sum(1)], 1
    )
    hr, hi = g_rr * gr + g_ri * gi, g_ri * gr + g_ii * gi
    dcr, dci = a * hr + b * hi, b * hr + d * hi
    if batch_stats:
        m = xr.shape[1]
        r11, r22 = 2 * (hr * cr).sum(1, keepdim=True), 2 * (hi * ci).sum(1, keepdim=True)
        r12 = (hr * ci).sum(1, keepdim=True) + (hi * cr).sum(1, keepdim=True)
        z12 = (r12 - b * r11 / (2 * a) - b * r22 / (2 * d)) / (a + d - b * b / a - b * b / d)
        z11, z22 = (r11 - 2 * b * z12) / (2 * a), (r22 - 2 * b * z12) / (2 * d)
        p11, p12, p22 = a * a + b * b, b * (a + d), b * b + d * d  # W² = (V + eps I)^-1
        # S = -P Z P (symmetric)
        q11, q12, q21, q22 = (
            z11 * p11 + z12 * p12,
            z11 * p12 + z12 * p22,
            z12 * p11 + z22 * p12,
            z12 * p12 + z22 * p22,
        )
        s11, s12, s22 = -(p11 * q11 + p12 * q21), -(p11 * q12 + p12 * q22), -(p12 * q12 + p22 * q22)
        dcr = dcr + (s11 * cr + s12 * ci) / m
        dci = dci + (s12 * cr + s22 * ci) / m
        dcr = dcr - dcr.mean(1, keepdim=True)
        dci = dci - dci.mean(1, keepdim=True)
    return dcr, dci, gparams


batchnorm_forward: Operation = _library.operation(
    "batchnorm_forward",
    reference=_forward_torch,
    driver=_planes_driver(batchnorm_forward_kernel),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
batchnorm_backward: Operation = _library.operation(
    "batchnorm_backward",
    reference=_backward_torch,
    driver=_planes_driver(batchnorm_backward_kernel),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)


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
