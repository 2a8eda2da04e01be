"""NKI-route drivers of the real-to-real transforms (``dct``, ``dst``, their inverses and n-D forms).

Two ways onto the stage kernel (:func:`trnfft.kernels.fft.fft_stages_kernel`), chosen by the
transform length ``N`` along each axis:

* ``N <= 128`` (the kernel's ``dft_gemm`` case): the whole transform — even/odd extension,
  pre/post twiddles, scipy's scaling and ``orthogonalize`` weights — is one real ``N x N`` matrix,
  folded into the one-stage stationary (:func:`trnfft.kernels.geometry.build_matrix_tables`). A
  real matrix applied to a complex row transforms its two planes independently, so the real
  signals go two per row (one as the real plane, one as the imaginary plane) and one launch
  transforms the whole batch. Backward: the same launch with the transposed matrix.
* ``N > 128``: the algorithms of :mod:`trnfft._pytorch` (Makhoul's for types 2/3, extensions for type
  1, a twiddled length-``2N`` transform for type 4) with their FFTs on the kernel: real FFTs of even
  length through the half-length packed transform of :mod:`trnfft._drivers.fft`, the rest as complex
  transforms (Bluestein for prime lengths). The ``O(N)`` twiddles and reorderings are torch
  element-wise operations on the caller's device; gradients flow through the kernel transforms'
  own backward.

Inputs: float32 and complex64, and float16 / bfloat16 / complex32, computed in float32 (their
planes reach the kernel as they are and its DMA casts them on load; above 128 points they are
converted in torch first) with float32 / complex64 results. float64 stays float64: it falls back
to the PyTorch route with one ``NkiFallbackWarning``, as every trnfft transform does.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from trncore.dispatch import KernelContext, KernelUnsupported
from trnfft import _pytorch
from trnfft._drivers import fft as _fft
from trnfft._drivers.refusals import unsupported_dtype
from trnfft.kernels.fft import fft_stages_kernel
from trnfft.kernels.geometry import KernelGeometry, build_matrix_tables, kernel_geometry

__all__ = [
    "MATRIX_MAX",
    "dct_driver",
    "dctn_driver",
    "dst_driver",
    "dstn_driver",
    "idct_driver",
    "idctn_driver",
    "idst_driver",
    "idstn_driver",
    "work_r2r",
    "work_r2rn",
]

#: Largest length transformed as one matrix in the stationary (the PE array's 128 rows).
MATRIX_MAX = 128
_KERNEL_DTYPES = (torch.float32, torch.complex64, torch.float16, torch.bfloat16, torch.complex32)
_NORMS = (None, "backward", "forward", "ortho")


@functools.lru_cache(maxsize=128)
def _matrix_tables(
    kind: str,
    type: int,
    n: int,
    norm: str | None,
    ortho: bool,
    inverse: bool,
    transpose: bool,
    device: torch.device,
) -> tuple[KernelGeometry, tuple[torch.Tensor, torch.Tensor]]:
    """Geometry and stationary planes of one transform's matrix (built once per configuration)."""
    geometry = kernel_geometry(n, (n,))
    matrix = _pytorch.r2r_matrix(kind, type, n, norm, ortho, inverse)
    tables = build_matrix_tables(geometry, matrix.T if transpose else matrix)
    return geometry, (tables[0].to(device), tables[1].to(device))


def _apply_matrix(
    ctx: KernelContext, xr: torch.Tensor, xi: torch.Tensor, config: tuple[Any, ...], transpose: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A xr, A xi)`` for the float32 ``(B, n)`` planes: one launch of the one-stage kernel."""
    batch = xr.shape[0]
    geometry, tables = _matrix_tables(*config, transpose, xr.device)
    padded = geometry.padded_batch(batch)
    params = {
        "stages": geometry.stage_params(),
        "batch_tile": geometry.tile_for(padded),
        "gauss": bool(_fft.KERNEL_OPTIONS.gauss),
        "scale": 1.0,
    }
    planes = [torch.nn.functional.pad(p, (0, 0, 0, padded - batch)).contiguous() for p in (xr, xi)]
    yr, yi = ctx.launch(fft_stages_kernel, *planes, *tables, **params)
    return yr[:batch], yi[:batch]


class PlanesMatrix(torch.autograd.Function):
    """``(A xr, A xi)`` on the NKI route for a transform's real matrix ``A``; backward uses ``A^T``."""

    @staticmethod
    def forward(
        fctx: Any, ctx: KernelContext, xr: torch.Tensor, xi: torch.Tensor, config: tuple[Any, ...]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One kernel launch with ``A`` in the stationary."""
        fctx.kernel_ctx, fctx.config = ctx, config
        return _apply_matrix(ctx, xr, xi, config, transpose=False)

    @staticmethod
    def backward(fctx: Any, gyr: torch.Tensor, gyi: torch.Tensor) -> tuple[Any, ...]:
        """``grad_x = A^T grad_y`` for each plane (one launch with the transposed matrix)."""
        gr, gi = _apply_matrix(fctx.kernel_ctx, gyr.contiguous(), gyi.contiguous(), fctx.config, True)
        return None, gr, gi, None


def _by_matrix(ctx: KernelContext, x: torch.Tensor, config: tuple[Any, ...]) -> torch.Tensor:
    """The transform of ``x``'s last dimension by its matrix; real rows are packed two per row."""
    shape = x.shape
    n = shape[-1]
    flat = x.reshape(-1, n)
    if flat.shape[0] == 0:
        return x.clone()  # no rows: the (empty) result has the input's shape
    if x.is_complex():
        yr, yi = PlanesMatrix.apply(ctx, flat.real.contiguous(), flat.imag.contiguous(), config)
        return torch.complex(yr, yi).reshape(shape)
    rows = flat.shape[0]
    half = (rows + 1) // 2
    padded = torch.nn.functional.pad(flat, (0, 0, 0, 2 * half - rows))
    yr, yi = PlanesMatrix.apply(ctx, padded[:half].contiguous(), padded[half:].contiguous(), config)
    return torch.cat([yr, yi])[:rows].reshape(shape)


def _kernel_primitives(ctx: KernelContext) -> _pytorch.FFTPrimitives:
    """The FFTs of :mod:`trnfft._pytorch` on the stage kernel (unnormalised, float32 planes)."""

    def rfft(x: torch.Tensor) -> torch.Tensor:
        return _fft.r2c_along(ctx, x.float(), -1, x.shape[-1], 1.0, False)

    def irfft(spectrum: torch.Tensor, m: int) -> torch.Tensor:
        return _fft.c2r_along(ctx, spectrum, -1, m, 1.0, True)

    def fft(z: torch.Tensor) -> torch.Tensor:
        return _fft.c2c_along(ctx, z.to(torch.complex64), -1, 1.0, False)

    return _pytorch.FFTPrimitives(rfft=rfft, irfft=irfft, fft=fft)


def _check_input(x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise KernelUnsupported(f"kernel takes a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _KERNEL_DTYPES:
        raise unsupported_dtype(x.dtype, "float32, complex64 or a half-precision dtype")
    return x


def _along(
    ctx: KernelContext,
    kind: str,
    inverse: bool,
    x: torch.Tensor,
    type: int,
    n: int | None,
    axis: int,
    norm: str | None,
    orthogonalize: bool | None,
) -> torch.Tensor:
    """One axis: matrix launch for ``n <= 128``, kernel FFTs beyond."""
    if n is not None:
        x = _pytorch.resize(x, axis, n)
    length = x.shape[axis]
    if length <= MATRIX_MAX:
        ortho = norm == "ortho" if orthogonalize is None else bool(orthogonalize)
        config = (kind, type, length, norm, ortho, inverse)
        return _by_matrix(ctx, x.movedim(axis, -1), config).movedim(-1, axis)
    if x.dtype in (torch.float16, torch.bfloat16, torch.complex32):
        x = x.to(torch.complex64 if x.is_complex() else torch.float32)
    return _pytorch.r2r(kind, inverse, x, type, None, axis, norm, orthogonalize, _kernel_primitives(ctx))


def _valid(type: Any, norm: Any) -> bool:
    return isinstance(type, int) and not isinstance(type, bool) and type in (1, 2, 3, 4) and norm in _NORMS


def _driver(kind: str, inverse: bool) -> Any:
    name = ("i" if inverse else "") + kind

    def driver(
        ctx: KernelContext,
        x: Any,
        type: Any = 2,
        n: Any = None,
        axis: Any = -1,
        norm: Any = None,
        orthogonalize: Any = None,
    ) -> torch.Tensor:
        x = _check_input(x)
        if not _valid(type, norm) or x.dim() == 0 or not -x.dim() <= axis < x.dim():
            ctx.caller_error(x, type, n, axis, norm, orthogonalize)
        return _along(ctx, kind, inverse, x, type, n, axis, norm, orthogonalize)

    driver.__name__ = driver.__qualname__ = f"{name}_driver"
    driver.__doc__ = f"NKI-route driver of ``{name}`` (scipy.fft semantics, arguments checked)."
    return driver


def _driver_nd(kind: str, inverse: bool) -> Any:
    name = ("i" if inverse else "") + kind + "n"

    def driver(
        ctx: KernelContext,
        x: Any,
        type: Any = 2,
        s: Any = None,
        axes: Any = None,
        norm: Any = None,
        orthogonalize: Any = None,
    ) -> torch.Tensor:
        x = _check_input(x)
        if not _valid(type, norm):
            ctx.caller_error(x, type, s, axes, norm, orthogonalize)
        dims = list(range(x.dim())) if axes is None else list(axes)
        if not dims:
            return x.clone()
        for i, axis in enumerate(dims):
            size = None if s is None or s[i] == -1 else s[i]
            x = _along(ctx, kind, inverse, x, type, size, axis, norm, orthogonalize)
        return x

    driver.__name__ = driver.__qualname__ = f"{name}_driver"
    driver.__doc__ = f"NKI-route driver of ``{name}`` (scipy.fft semantics, arguments checked)."
    return driver


dct_driver = _driver("dct", False)
idct_driver = _driver("dct", True)
dst_driver = _driver("dst", False)
idst_driver = _driver("dst", True)
dctn_driver = _driver_nd("dct", False)
idctn_driver = _driver_nd("dct", True)
dstn_driver = _driver_nd("dst", False)
idstn_driver = _driver_nd("dst", True)


def work_r2r(x: Any, type: Any = 2, n: Any = None, axis: Any = -1, *args: Any, **kwargs: Any) -> int:
    """Flops of a 1-D real-to-real transform (``5 N log2 N`` per row), 0 for unusual arguments
    (half precision: above any threshold, as :func:`trnfft._drivers.fft.work_1d`)."""
    if getattr(x, "dtype", None) in (torch.float16, torch.bfloat16, torch.complex32):
        return _fft.HALF_PRECISION_WORK
    try:
        size = int(x.shape[axis]) if n is None else int(n)
        rows = x.numel() // max(1, int(x.shape[axis]))
    except Exception:
        return 0
    return int(5 * rows * size * max(1.0, math.log2(max(size, 2))))


def work_r2rn(x: Any, *args: Any, **kwargs: Any) -> int:
    """Flops of an n-D real-to-real transform over the whole input (an estimate)."""
    return _fft.work_nd(x)
