"""Complex-valued layers for models: linear, 1-D convolution, batch normalisation, modReLU.

Each layer keeps its parameters as split real/imaginary planes (``weight_real``, ``weight_imag``
…), the layout NKI kernels read, and takes a torch complex tensor or a
:class:`~trnfft.ComplexTensor`; it returns the same kind it was given.

``ComplexLinear``, ``ComplexConv1d`` (``groups=1``; im2col + complex GEMM), ``ComplexModReLU``
run through ``torch.autograd.Function`` classes with analytic backward passes whose every step is
a trncore operation (:mod:`trnfft._ops`; the autograd functions are in :mod:`trnfft._autograd`):
on the NKI route forward and backward run the kernels of :mod:`trnfft.kernels`, on the PyTorch
route their torch references;
``ComplexBatchNorm1d`` likewise (:mod:`trnfft._autograd`). Grouped convolutions compute with
torch's ``conv1d`` on either route (autograd through torch).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trnfft._autograd import BatchNormFunction, Conv1dFunction, LinearFunction, ModReLUFunction
from trnfft._pytorch import Planes
from trnfft.complex_tensor import ComplexTensor, TensorLike

__all__ = ["ComplexBatchNorm1d", "ComplexConv1d", "ComplexLinear", "ComplexModReLU"]

_PARTS = {
    None: None,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}


def _part_dtype(layer: str, dtype: Any) -> torch.dtype | None:
    """The real plane dtype for a layer's ``dtype`` argument (complex dtypes name their planes)."""
    if dtype not in _PARTS:
        raise TypeError(
            f"{layer}: dtype must be float32, float64, complex64 or complex128 (the parameter precision), "
            f"got {dtype!r}"
        )
    return _PARTS[dtype]


def _positive_int(layer: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive int, got {value!r}")
    return value


def _split(layer: str, input: Any, like: torch.Tensor) -> tuple[Planes, bool]:
    """The planes of ``input`` and whether it was a ComplexTensor; checks precision and device."""
    if isinstance(input, ComplexTensor):
        planes, was_ct = (input.real, input.imag), True
    elif isinstance(input, torch.Tensor) and input.is_complex():
        planes, was_ct = (input.real, input.imag), False
    else:
        got = f"a real {input.dtype} tensor" if isinstance(input, torch.Tensor) else type(input).__name__
        raise TypeError(f"{layer}: input must be a complex torch.Tensor or trnfft.ComplexTensor, got {got}")
    if planes[0].dtype != like.dtype:
        raise TypeError(
            f"{layer}: input precision {planes[0].dtype} differs from the parameters' {like.dtype}; "
            "convert the input or the layer (.double() / .float()) explicitly"
        )
    if planes[0].device != like.device:
        raise ValueError(f"{layer}: input is on {planes[0].device} but the parameters are on {like.device}")
    return planes, was_ct


def _join(planes: Planes, as_complex_tensor: bool) -> TensorLike:
    return ComplexTensor(*planes) if as_complex_tensor else torch.complex(*planes)


def _check_features(layer: str, name: str, got: int, expected: int) -> None:
    if got != expected:
        raise ValueError(f"{layer}: input has {got} {name}, the layer expects {expected}")


# --------------------------------------------------------------------------- linear


class ComplexLinear(nn.Module):
    """Complex affine map ``y = x Wᵀ + b`` (``torch.nn.Linear`` for complex inputs).

    Parameters
    ----------
    in_features, out_features : int
        Sizes of the last input and output dimension.
    bias : bool, default True
        Learn a complex bias.
    device, dtype
        Where and in which precision to create the parameters (float32/complex64 or
        float64/complex128; the planes are real).

    Notes
    -----
    Each plane is drawn from ``U(-a, a)`` with ``a = 1/sqrt(2 * in_features)``, so the complex
    weights have the variance of ``torch.nn.Linear``'s real ones.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features = _positive_int("ComplexLinear", "in_features", in_features)
        self.out_features = _positive_int("ComplexLinear", "out_features", out_features)
        kw: dict[str, Any] = {"device": device, "dtype": _part_dtype("ComplexLinear", dtype)}
        bound = 1.0 / math.sqrt(2 * in_features)
        self.weight_real = nn.Parameter(torch.empty(out_features, in_features, **kw).uniform_(-bound, bound))
        self.weight_imag = nn.Parameter(torch.empty(out_features, in_features, **kw).uniform_(-bound, bound))
        if bias:
            self.bias_real = nn.Parameter(torch.empty(out_features, **kw).uniform_(-bound, bound))
            self.bias_imag = nn.Parameter(torch.empty(out_features, **kw).uniform_(-bound, bound))
        else:
            self.register_parameter("bias_real", None)
            self.register_parameter("bias_imag", None)

    @property
    def weight(self) -> torch.Tensor:
        """The weight as one complex tensor ``(out_features, in_features)`` (differentiable)."""
        return torch.complex(self.weight_real, self.weight_imag)

    def forward(self, input: TensorLike) -> TensorLike:
        """Apply the layer to ``(..., in_features)``; returns the same kind of complex tensor."""
        x, was_ct = _split("ComplexLinear", input, self.weight_real)
        _check_features("ComplexLinear", "features in the last dimension", x[0].shape[-1], self.in_features)
        lead = x[0].shape[:-1]
        flat = [p.reshape(-1, self.in_features) for p in x]
        yr, yi = LinearFunction.apply(
            flat[0], flat[1], self.weight_real, self.weight_imag, self.bias_real, self.bias_imag
        )
        return _join((yr.reshape(*lead, self.out_features), yi.reshape(*lead, self.out_features)), was_ct)

    def extra_repr(self) -> str:
        has_bias = self.bias_real is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={has_bias}"


# --------------------------------------------------------------------------- convolution


def _complex_conv1d(x: Planes, weight: Planes, bias: Planes | None, conv: dict[str, Any]) -> Planes:
    """Complex 1-D cross-correlation on planes (``conv`` holds stride, padding, dilation, groups)."""
    (xr, xi), (wr, wi) = x, weight
    yr = F.conv1d(xr, wr, **conv) - F.conv1d(xi, wi, **conv)
    yi = F.conv1d(xr, wi, **conv) + F.conv1d(xi, wr, **conv)
    if bias is not None:
        yr = yr + bias[0][:, None]
        yi = yi + bias[1][:, None]
    return yr, yi


class ComplexConv1d(nn.Module):
    """Complex 1-D convolution (``torch.nn.Conv1d`` semantics for complex inputs).

    Parameters
    ----------
    in_channels, out_channels, kernel_size : int
        As ``torch.nn.Conv1d``.
    stride, dilation, groups : int
        As ``torch.nn.Conv1d``.
    padding : int or {"valid", "same"}, default 0
        Zero padding on both sides, or a string mode (``"same"`` needs ``stride=1``).
    bias : bool, default True
        Learn a complex bias per output channel.
    padding_mode : {"zeros", "reflect", "replicate", "circular"}, default "zeros"
        How padded samples are filled (applied to both planes).
    device, dtype
        Where and in which precision to create the parameters.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int | str = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        name = "ComplexConv1d"
        for arg, value in (
            ("in_channels", in_channels),
            ("out_channels", out_channels),
            ("kernel_size", kernel_size),
            ("stride", stride),
            ("dilation", dilation),
            ("groups", groups),
        ):
            _positive_int(name, arg, value)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels and out_channels must be divisible by groups={groups}")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: padding must be an int, 'valid' or 'same', got {padding!r}")
            if padding == "same" and stride != 1:
                raise ValueError(f"{name}: padding='same' needs stride=1, got stride={stride}")
        elif isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
            raise ValueError(
                f"{name}: padding must be a non-negative int, 'valid' or 'same', got {padding!r}"
            )
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(
                f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', "
                f"got {padding_mode!r}"
            )
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.padding_mode = padding_mode
        kw: dict[str, Any] = {"device": device, "dtype": _part_dtype(name, dtype)}
        shape = (out_channels, in_channels // groups, kernel_size)
        bound = 1.0 / math.sqrt(2 * (in_channels // groups) * kernel_size)
        self.weight_real = nn.Parameter(torch.empty(shape, **kw).uniform_(-bound, bound))
        self.weight_imag = nn.Parameter(torch.empty(shape, **kw).uniform_(-bound, bound))
        if bias:
            self.bias_real = nn.Parameter(torch.empty(out_channels, **kw).uniform_(-bound, bound))
            self.bias_imag = nn.Parameter(torch.empty(out_channels, **kw).uniform_(-bound, bound))
        else:
            self.register_parameter("bias_real", None)
            self.register_parameter("bias_imag", None)

    @property
    def weight(self) -> torch.Tensor:
        """The kernel as one complex tensor ``(out, in / groups, kernel_size)`` (differentiable)."""
        return torch.complex(self.weight_real, self.weight_imag)

    def _explicit_padding(self) -> tuple[int, int]:
        if self.padding == "valid":
            return 0, 0
        if self.padding == "same":
            total = self.dilation * (self.kernel_size - 1)
            return total // 2, total - total // 2
        assert isinstance(self.padding, int)  # the constructor admits only these three forms
        return self.padding, self.padding

    def forward(self, input: TensorLike) -> TensorLike:
        """Convolve ``(N, C_in, L)`` or ``(C_in, L)``; returns the same kind of complex tensor."""
        x, was_ct = _split("ComplexConv1d", input, self.weight_real)
        if x[0].dim() not in (2, 3):
            raise ValueError(
                f"ComplexConv1d: input must be (N, C, L) or (C, L), got shape {tuple(x[0].shape)}"
            )
        _check_features("ComplexConv1d", "channels", x[0].shape[-2], self.in_channels)
        left, right = self._explicit_padding()
        if self.padding_mode == "zeros" and left == right:
            conv_padding: int | str = left
        else:  # asymmetric 'same' or a non-zero fill: pad explicitly, then convolve unpadded
            mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
            x = (F.pad(x[0], (left, right), mode=mode), F.pad(x[1], (left, right), mode=mode))
            conv_padding = 0
        conv = {
            "stride": self.stride,
            "padding": conv_padding,
            "dilation": self.dilation,
            "groups": self.groups,
        }
        bias = None if self.bias_real is None else (self.bias_real, self.bias_imag)
        if self.groups != 1:  # grouped convolution: torch's conv1d on the planes (no kernel yet)
            return _join(_complex_conv1d(x, (self.weight_real, self.weight_imag), bias, conv), was_ct)
        unbatched = x[0].dim() == 2
        planes = [p.unsqueeze(0) if unbatched else p for p in x]
        yr, yi = Conv1dFunction.apply(
            planes[0], planes[1], self.weight_real, self.weight_imag, self.bias_real, self.bias_imag,
            self.stride, conv_padding, self.dilation,
        )
        if unbatched:
            yr, yi = yr.squeeze(0), yi.squeeze(0)
        return _join((yr, yi), was_ct)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding!r}, dilation={self.dilation}, groups={self.groups}, "
            f"bias={self.bias_real is not None}, padding_mode={self.padding_mode!r}"
        )


# --------------------------------------------------------------------------- batch norm


class ComplexBatchNorm1d(nn.Module):
    """Complex batch normalisation by whitening (Trabelsi et al., "Deep Complex Networks", 2018).

    Each channel's real and imaginary parts are centred and decorrelated with the inverse square
    root of their 2x2 covariance, then mapped by a learned symmetric 2x2 matrix ``γ`` and a complex
    shift ``β``. Normalising real and imaginary parts separately would not make the output circular;
    whitening does.

    Parameters
    ----------
    num_features : int
        Channels ``C`` of an ``(N, C)`` or ``(N, C, L)`` input.
    eps : float, default 1e-5
        Added to the covariance diagonal.
    momentum : float or None, default 0.1
        Running-statistics update weight (``None``: cumulative average), as ``torch.nn.BatchNorm1d``.
    affine : bool, default True
        Learn ``γ`` (``gamma_rr``, ``gamma_ii``, ``gamma_ri``; initialised to ``1/√2, 1/√2, 0`` so the
        output has unit complex variance) and ``β`` (``bias_real``, ``bias_imag``).
    track_running_stats : bool, default True
        Keep running mean and covariance (unbiased) and use them in eval mode.
    device, dtype
        Where and in which precision to create parameters and buffers.
    """

    running_mean: torch.Tensor  # registered buffers, declared for the type checker
    running_cov: torch.Tensor
    num_batches_tracked: torch.Tensor

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        name = "ComplexBatchNorm1d"
        self.num_features = _positive_int(name, "num_features", num_features)
        if not eps > 0:
            raise ValueError(f"{name}: eps must be positive, got {eps!r}")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be in [0, 1] or None, got {momentum!r}")
        self.eps, self.momentum, self.affine = eps, momentum, affine
        self.track_running_stats = track_running_stats
        kw: dict[str, Any] = {"device": device, "dtype": _part_dtype(name, dtype)}
        if affine:
            self.gamma_rr = nn.Parameter(torch.full((num_features,), 2**-0.5, **kw))
            self.gamma_ii = nn.Parameter(torch.full((num_features,), 2**-0.5, **kw))
            self.gamma_ri = nn.Parameter(torch.zeros(num_features, **kw))
            self.bias_real = nn.Parameter(torch.zeros(num_features, **kw))
            self.bias_imag = nn.Parameter(torch.zeros(num_features, **kw))
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(2, num_features, **kw))
            cov = torch.zeros(3, num_features, **kw)
            cov[:2] = 1.0
            self.register_buffer("running_cov", cov)
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))

    def forward(self, input: TensorLike) -> TensorLike:
        """Normalise ``(N, C)`` or ``(N, C, L)``; returns the same kind of complex tensor."""
        name = "ComplexBatchNorm1d"
        like = self.gamma_rr if self.affine else (self.running_mean if self.track_running_stats else None)
        if like is None:  # no parameters or buffers: the input fixes the precision
            like = input.real if isinstance(input, (ComplexTensor, torch.Tensor)) else torch.empty(0)
        x, was_ct = _split(name, input, like)
        if x[0].dim() not in (2, 3):
            raise ValueError(f"{name}: input must be (N, C) or (N, C, L), got shape {tuple(x[0].shape)}")
        _check_features(name, "channels", x[0].shape[1], self.num_features)
        c = self.num_features
        # channels first, every sample of a channel along the free dimension: the kernels' layout
        planes = [p.t() if p.dim() == 2 else p.permute(1, 0, 2) for p in x]
        inner = planes[0].shape
        flat = [p.reshape(c, -1) for p in planes]
        use_batch = self.training or not self.track_running_stats
        count = flat[0].shape[1]
        if use_batch and count < 2:
            raise ValueError(f"{name}: training needs more than one value per channel, got {count}")
        if self.affine:
            affine = (self.gamma_rr, self.gamma_ii, self.gamma_ri, self.bias_real, self.bias_imag)
            params = torch.stack(affine, 1)
        else:  # Γ = I, β = 0
            params = torch.zeros(c, 5, dtype=like.dtype, device=like.device)
            params[:, :2] = 1.0
        if use_batch:
            stats_in = torch.zeros(c, 5, dtype=like.dtype, device=like.device)
        else:
            stats_in = torch.cat([self.running_mean.t(), self.running_cov.t()], 1)
        eps = float(self.eps)
        yr, yi, stats = BatchNormFunction.apply(flat[0], flat[1], params, stats_in, eps, use_batch)
        if self.training and self.track_running_stats:
            self._update_running((stats[:, 0], stats[:, 1]), stats[:, 2:].t(), count)
        out = [y.reshape(inner) for y in (yr, yi)]
        out = [y.t() if y.dim() == 2 else y.permute(1, 0, 2) for y in out]
        return _join((out[0], out[1]), was_ct)

    @torch.no_grad()
    def _update_running(self, mean: Planes, cov: torch.Tensor, count: int) -> None:
        self.num_batches_tracked += 1
        weight = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        self.running_mean.lerp_(torch.stack(mean), weight)
        self.running_cov.lerp_(cov * (count / (count - 1)), weight)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


# --------------------------------------------------------------------------- modReLU


class ComplexModReLU(nn.Module):
    """modReLU (Arjovsky et al., 2016): ``relu(|z| + b) · z/|z|`` with a learned bias ``b``.

    It shrinks the modulus and keeps the phase, so it does not distort the complex plane the way
    applying ReLU to the real and imaginary parts separately does.

    Parameters
    ----------
    num_features : int, optional
        One bias per channel (dimension 1 of the input, or the only dimension of a 1-D input);
        ``None`` learns a single shared bias.
    bias_init : float, default 0.0
        Initial bias (negative values create a dead zone around 0).
    device, dtype
        Where and in which precision to create the bias.
    """

    def __init__(
        self,
        num_features: int | None = None,
        bias_init: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if num_features is not None:
            _positive_int("ComplexModReLU", "num_features", num_features)
        self.num_features = num_features
        kw: dict[str, Any] = {"device": device, "dtype": _part_dtype("ComplexModReLU", dtype)}
        self.bias = nn.Parameter(torch.full((num_features or 1,), float(bias_init), **kw))

    def forward(self, input: TensorLike) -> TensorLike:
        """Apply modReLU elementwise; returns the same kind of complex tensor."""
        x, was_ct = _split("ComplexModReLU", input, self.bias)
        ndim = x[0].dim()
        if self.num_features is None:  # one shared bias: every element is one "channel" row
            shape = x[0].shape
            yr, yi = ModReLUFunction.apply(x[0].reshape(1, -1), x[1].reshape(1, -1), self.bias)
            return _join((yr.reshape(shape), yi.reshape(shape)), was_ct)
        if ndim == 0:
            raise ValueError("ComplexModReLU: a per-channel bias needs an input with a channel dimension")
        channel = 0 if ndim == 1 else 1
        _check_features("ComplexModReLU", "channels", x[0].shape[channel], self.num_features)
        # channels first, everything else flattened: the kernels' (C, M) layout
        moved = [p.movedim(channel, 0) for p in x]
        inner = moved[0].shape
        yr, yi = ModReLUFunction.apply(
            moved[0].reshape(self.num_features, -1), moved[1].reshape(self.num_features, -1), self.bias
        )
        return _join((yr.reshape(inner).movedim(0, channel), yi.reshape(inner).movedim(0, channel)), was_ct)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}"
