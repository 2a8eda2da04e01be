"""Complex GEMM as a trncore operation, and the layers' autograd functions built on it.

``complex_matmul(ar, ai, br, bi, bias_r, bias_i, trans_a, trans_b)`` is declared with trncore: its
reference is four real GEMMs in torch (any dtype, any device), its driver launches
:func:`trncore.kernels.complex_gemm.complex_matmul_kernel` for float32 planes. The layers'
``torch.autograd.Function`` classes call it in ``forward`` *and* in ``backward`` (the analytic
gradients are complex GEMMs too), so on the NKI route both directions run on the Tensor Engine and
on the PyTorch route both run the reference (where float64 ``gradcheck`` verifies the formulas).

For ``Y = X Wᵀ + b`` with complex ``X (rows, in)``, ``W (out, in)`` and real loss ``ℓ``, PyTorch's
convention (the gradient of a real function of a complex tensor is ``∂ℓ/∂Re + i ∂ℓ/∂Im``) gives

    grad_X = grad_Y · conj(W),   grad_W = grad_Yᵀ · conj(X),   grad_b = Σ_rows grad_Y,

which, on planes, is what the backward below computes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from trncore.dispatch import KernelContext, KernelUnsupported, Operation
from trncore.kernels.complex_gemm import complex_matmul_kernel, use_gauss
from trnfft import _library
from trnfft.kernels.modrelu import modrelu_backward_kernel, modrelu_kernel

__all__ = [
    "Conv1dFunction",
    "LinearFunction",
    "ModReLUFunction",
    "complex_matmul",
    "modrelu",
    "modrelu_backward",
]

Planes = tuple[torch.Tensor, torch.Tensor]


def _complex_matmul_torch(
    ar: torch.Tensor,
    ai: torch.Tensor,
    br: torch.Tensor,
    bi: torch.Tensor,
    bias_r: torch.Tensor | None = None,
    bias_i: torch.Tensor | None = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Planes:
    """Reference: ``op(A) @ op(B) (+ bias)`` on planes with four real GEMMs."""
    if trans_a:
        ar, ai = ar.t(), ai.t()
    if trans_b:
        br, bi = br.t(), bi.t()
    cr = ar @ br - ai @ bi
    ci = ar @ bi + ai @ br
    if bias_r is not None:
        assert bias_i is not None  # the planes of one bias come together
        cr = cr + bias_r
        ci = ci + bias_i
    return cr, ci


def _complex_matmul_driver(
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
            hint = (
                " (float64 stays float64: the reference keeps full precision)"
                if t.dtype == torch.float64
                else ""
            )
            raise KernelUnsupported(
                f"kernel takes float32 planes, got {str(t.dtype).removeprefix('torch.')}{hint}"
            )
    if ar.dim() != 2 or br.dim() != 2 or ar.shape != ai.shape or br.shape != bi.shape:
        raise KernelUnsupported("kernel takes 2-D planes of equal shapes")
    m, k = (ar.shape[1], ar.shape[0]) if trans_a else tuple(ar.shape)
    k2, n = (br.shape[1], br.shape[0]) if trans_b else tuple(br.shape)
    if k != k2 or min(m, n, k) == 0:
        raise KernelUnsupported(f"shapes do not chain: {tuple(ar.shape)} and {tuple(br.shape)}")
    gauss = use_gauss(m, n)
    args = [t.contiguous() for t in tensors]
    return ctx.launch(complex_matmul_kernel, *args, trans_a=bool(trans_a), trans_b=bool(trans_b), gauss=gauss)


def _work(
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


complex_matmul: Operation = _library.operation(
    "complex_matmul",
    reference=_complex_matmul_torch,
    driver=_complex_matmul_driver,
    work=_work,
    min_work=1 << 24,  # placeholder threshold for ``auto``, to be measured on hardware
)


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


# --------------------------------------------------------------------------- modReLU


def _modrelu_torch(xr: torch.Tensor, xi: torch.Tensor, b: torch.Tensor) -> Planes:
    """Reference forward on ``(C, M)`` planes with a ``(C,)`` bias (0 where ``z = 0``)."""
    r2 = xr * xr + xi * xi
    r = torch.sqrt(torch.where(r2 > 0, r2, 1.0))
    s = torch.where((r2 > 0) & (r + b[:, None] > 0), (r + b[:, None]) / r, 0.0)
    return xr * s, xi * s


def _modrelu_backward_torch(
    xr: torch.Tensor, xi: torch.Tensor, b: torch.Tensor, gr: torch.Tensor, gi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference analytic backward (see :mod:`trnfft.kernels.modrelu`); ``grad_b`` is ``(C, 1)``."""
    r2 = xr * xr + xi * xi
    r = torch.sqrt(torch.where(r2 > 0, r2, 1.0))
    bias = b[:, None]
    mask = ((r2 > 0) & (r + bias > 0)).to(xr.dtype)
    s = (r + bias) / r * mask
    d = gr * xr + gi * xi
    coef = bias * mask / (r * r * r) * d
    return gr * s - coef * xr, gi * s - coef * xi, (d / r * mask).sum(1, keepdim=True)


def _planes_driver(kernel: Any) -> Any:
    """A driver launching ``kernel`` on float32 tensors; keyword arguments become compile-time parameters."""

    def driver(ctx: KernelContext, *tensors: torch.Tensor, **params: Any) -> Any:
        for t in tensors:
            if t.dtype != torch.float32:
                hint = (
                    " (float64 stays float64: the reference keeps full precision)"
                    if t.dtype == torch.float64
                    else ""
                )
                raise KernelUnsupported(
                    f"kernel takes float32, got {str(t.dtype).removeprefix('torch.')}{hint}"
                )
        if tensors[0].numel() == 0:
            raise KernelUnsupported("empty input")
        return ctx.launch(kernel, *[t.contiguous() for t in tensors], **params)

    driver.__doc__ = f"Launch ``{kernel.__name__}`` on float32 tensors."
    return driver


modrelu: Operation = _library.operation(
    "modrelu",
    reference=_modrelu_torch,
    driver=_planes_driver(modrelu_kernel),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
modrelu_backward: Operation = _library.operation(
    "modrelu_backward",
    reference=_modrelu_backward_torch,
    driver=_planes_driver(modrelu_backward_kernel),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)


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
