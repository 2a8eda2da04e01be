"""trnfft's operation table: every transform and layer operation declared once with trncore.

The transforms have ``torch.fft`` (or :mod:`trnfft._pytorch` for the real-to-real ones) as their
reference; the public functions in :mod:`trnfft.transforms`, :mod:`trnfft.spectral` and
:mod:`trnfft.realtransforms` call these names positionally. Routing (PyTorch, simulator, device),
backends, environment variables and fallbacks are trncore's (:mod:`trncore.dispatch`); on the
PyTorch route an operation calls its reference directly. Every transform has an NKI driver
(:mod:`trnfft._drivers.fft`), as have ``stft`` and ``istft`` (:mod:`trnfft._drivers.spectral`:
torch frames, the kernel transforms them) and the real-to-real transforms
(:mod:`trnfft._drivers.r2r`). The complex layers' operations (``complex_matmul``, ``modrelu``,
batch normalisation) run on the kernels through :mod:`trnfft._drivers.layers`; their autograd
functions are in :mod:`trnfft._autograd`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trncore import precision
from trncore.dispatch import Operation
from trnfft import _pytorch
from trnfft._drivers import fft as _nki
from trnfft._drivers import layers as _layers
from trnfft._drivers import r2r as _nki_r2r
from trnfft._drivers import spectral as _nki_spectral
from trnfft._library import library
from trnfft.kernels.batchnorm import batchnorm_backward_kernel, batchnorm_forward_kernel
from trnfft.kernels.modrelu import modrelu_backward_kernel, modrelu_kernel

#: Below this many flops (``5 N log2 N`` per row) ``auto`` keeps a call on ``torch.fft``: a kernel
#: launch costs more than a small transform. A placeholder until measured on hardware.
MIN_WORK = 1 << 20


_NARROW = {torch.float64: torch.float32, torch.complex128: torch.complex64}
_WIDE = {torch.float32: torch.float64, torch.complex64: torch.complex128}


def _narrowed(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
        return value.to(_NARROW[value.dtype])
    return value


def _widened(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_widened(v) for v in value)
    return value.to(_WIDE[value.dtype]) if isinstance(value, torch.Tensor) and value.dtype in _WIDE else value


def fp32_opt_in(driver: Callable[..., Any]) -> Callable[..., Any]:
    """``driver`` under trncore's one dtype policy (:mod:`trncore.precision`).

    The kernels compute in float32, so float64 / complex128 inputs fall back to the reference (the
    driver says why) unless float32 compute is opted into (``TRNFFT_ALLOW_FP32_COMPUTE=1``,
    ``TRNSCI_ALLOW_FP32_COMPUTE=1`` or a :func:`trncore.precision.fp32_compute` scope): then
    they enter the driver as float32 / complex64 and the results leave it as float64 / complex128
    (float32 accuracy in the wide dtype), as in trnblas and trntensor.
    """

    def wrapped(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        values = (*args, *(v for k, v in kwargs.items() if k != "out"))
        if not any(isinstance(v, torch.Tensor) and v.dtype in _NARROW for v in values):
            return driver(ctx, *args, **kwargs)
        if not precision.fp32_compute_allowed("trnfft"):
            return driver(ctx, *args, **kwargs)  # declines with the reason and the opt-in
        args = tuple(_narrowed(a) for a in args)
        kwargs = {k: v if k == "out" else _narrowed(v) for k, v in kwargs.items()}
        return _widened(driver(ctx, *args, **kwargs))

    wrapped.__name__ = getattr(driver, "__name__", "driver")
    wrapped.__doc__ = driver.__doc__
    return wrapped


def _op(
    name: str, reference: Callable[..., Any], driver: Callable[..., Any], work: Callable[..., int]
) -> Operation:
    return library.operation(
        name, reference=reference, driver=fp32_opt_in(driver), work=work, min_work=MIN_WORK
    )


fft: Operation = _op("fft", torch.fft.fft, _nki.fft_driver, _nki.work_1d)
ifft: Operation = _op("ifft", torch.fft.ifft, _nki.ifft_driver, _nki.work_1d)
rfft: Operation = _op("rfft", torch.fft.rfft, _nki.rfft_driver, _nki.work_1d)
irfft: Operation = _op("irfft", torch.fft.irfft, _nki.irfft_driver, _nki.work_1d)
fft2: Operation = _op("fft2", torch.fft.fft2, _nki.fft2_driver, _nki.work_nd)
ifft2: Operation = _op("ifft2", torch.fft.ifft2, _nki.ifft2_driver, _nki.work_nd)
fftn: Operation = _op("fftn", torch.fft.fftn, _nki.fftn_driver, _nki.work_nd)
ifftn: Operation = _op("ifftn", torch.fft.ifftn, _nki.ifftn_driver, _nki.work_nd)
hfft: Operation = _op("hfft", torch.fft.hfft, _nki.hfft_driver, _nki.work_1d)
ihfft: Operation = _op("ihfft", torch.fft.ihfft, _nki.ihfft_driver, _nki.work_1d)
rfft2: Operation = _op("rfft2", torch.fft.rfft2, _nki.rfft2_driver, _nki.work_nd)
irfft2: Operation = _op("irfft2", torch.fft.irfft2, _nki.irfft2_driver, _nki.work_nd)
hfft2: Operation = _op("hfft2", torch.fft.hfft2, _nki.hfft2_driver, _nki.work_nd)
ihfft2: Operation = _op("ihfft2", torch.fft.ihfft2, _nki.ihfft2_driver, _nki.work_nd)
rfftn: Operation = _op("rfftn", torch.fft.rfftn, _nki.rfftn_driver, _nki.work_nd)
irfftn: Operation = _op("irfftn", torch.fft.irfftn, _nki.irfftn_driver, _nki.work_nd)
hfftn: Operation = _op("hfftn", torch.fft.hfftn, _nki.hfftn_driver, _nki.work_nd)
ihfftn: Operation = _op("ihfftn", torch.fft.ihfftn, _nki.ihfftn_driver, _nki.work_nd)
stft: Operation = _op("stft", torch.stft, _nki_spectral.stft_driver, _nki_spectral.work_stft)
istft: Operation = _op("istft", torch.istft, _nki_spectral.istft_driver, _nki_spectral.work_stft)
dct: Operation = _op("dct", _pytorch.dct, _nki_r2r.dct_driver, _nki_r2r.work_r2r)
idct: Operation = _op("idct", _pytorch.idct, _nki_r2r.idct_driver, _nki_r2r.work_r2r)
dst: Operation = _op("dst", _pytorch.dst, _nki_r2r.dst_driver, _nki_r2r.work_r2r)
idst: Operation = _op("idst", _pytorch.idst, _nki_r2r.idst_driver, _nki_r2r.work_r2r)
dctn: Operation = _op("dctn", _pytorch.dctn, _nki_r2r.dctn_driver, _nki_r2r.work_r2rn)
idctn: Operation = _op("idctn", _pytorch.idctn, _nki_r2r.idctn_driver, _nki_r2r.work_r2rn)
dstn: Operation = _op("dstn", _pytorch.dstn, _nki_r2r.dstn_driver, _nki_r2r.work_r2rn)
idstn: Operation = _op("idstn", _pytorch.idstn, _nki_r2r.idstn_driver, _nki_r2r.work_r2rn)

# The complex layers' operations (their autograd functions: trnfft._autograd).
complex_matmul: Operation = library.operation(
    "complex_matmul",
    reference=_pytorch.complex_matmul,
    driver=fp32_opt_in(_layers.complex_matmul_driver),
    work=_layers.complex_matmul_work,
    min_work=1 << 24,  # placeholder threshold for ``auto``, to be measured on hardware
)
modrelu: Operation = library.operation(
    "modrelu",
    reference=_pytorch.modrelu,
    driver=fp32_opt_in(_layers.planes_driver(modrelu_kernel)),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
modrelu_backward: Operation = library.operation(
    "modrelu_backward",
    reference=_pytorch.modrelu_backward,
    driver=fp32_opt_in(_layers.planes_driver(modrelu_backward_kernel)),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
batchnorm_forward: Operation = library.operation(
    "batchnorm_forward",
    reference=_pytorch.batchnorm_forward,
    driver=fp32_opt_in(_layers.planes_driver(batchnorm_forward_kernel)),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
batchnorm_backward: Operation = library.operation(
    "batchnorm_backward",
    reference=_pytorch.batchnorm_backward,
    driver=fp32_opt_in(_layers.planes_driver(batchnorm_backward_kernel)),
    work=lambda xr, *a, **k: int(xr.numel()),
    min_work=1 << 20,
)
