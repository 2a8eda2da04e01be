"""Drivers of the NKI route: torch.fft semantics on top of the stage kernel.

Each driver takes exactly the arguments of its ``torch.fft`` reference (``input, n/s, dim, norm``),
does on the caller's device what is bookkeeping (moving the transformed dimension last, zero
padding or cropping, splitting complex tensors into float32 planes, padding the batch to the
kernel's bucket), and runs every transform of length ``n`` as launches of
:func:`trnfft.kernels.fft.fft_stages_kernel` with the plan's resident tables:

* forward: one launch (``dft_gemm``, ``stockham``, ``mixed_radix``); Bluestein: two launches of the
  power-of-two kernel, ``FFT_m(x c) H`` then the inverse transform times ``conj(c)/m``;
* inverse: ``n ifft(x) = swap(fft(swap(x)))`` with ``swap(a + ib) = b + ia`` (``swap(z) = i conj z``),
  so an inverse is the forward kernel with its planes exchanged: no extra tables, no extra work;
* real signals of even length ``n = 2m`` (``rfft``, ``ihfft``, ``irfft``, ``hfft`` and the real
  passes of their 2-D/N-D forms): one complex transform of length ``m`` whose real plane holds the
  even samples and whose imaginary plane the odd ones, with ``O(n)`` torch arithmetic and the
  plan's ``real_twiddles`` to separate (``rfft``) or combine (``irfft``) the two half spectra;
  half the kernel work of a full-length transform. Odd lengths transform at full length: ``rfft``
  with a zero imaginary plane, ``irfft`` by completing the Hermitian spectrum and keeping the real
  plane.

Inputs the kernels do not take (float64/complex128 — float64 stays float64 —, other dtypes,
``out=``) raise :class:`~trncore.dispatch.KernelUnsupported`, so trncore runs ``torch.fft`` with
one fallback warning.

Autograd: each kernel transform is a :class:`PlanesFFT` function whose backward is the same
kernel again (for ``y = s F x`` with the symmetric DFT matrix ``F``, PyTorch's convention gives
``grad_x = s conj(F) grad_y = s swap(F swap(grad_y))``); the bookkeeping around it is torch's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trncore.dispatch import KernelContext, KernelUnsupported
from trncore.keys import KernelKey
from trnfft._drivers.plan import KernelPlan, kernel_plan
from trnfft._drivers.refusals import unsupported_dtype
from trnfft._pytorch import resize as _resize  # zero-pad or crop along a dim: one helper for both
from trnfft.kernels.fft import fft_onchip3_kernel, fft_onchip_kernel, fft_stages_kernel

__all__ = [
    "KERNEL_OPTIONS",
    "KernelOptions",
    "PlanesFFT",
    "c2c_along",
    "c2r_along",
    "check_input",
    "r2c_along",
    "transform_planes",
]

_KERNEL_DTYPES = (torch.float32, torch.complex64)
#: Half-precision inputs the transform drivers also take: their planes go to the kernel as they are
#: and the DMA that loads them into SBUF casts to float32 (AWS NKI docs, nki.isa.dma_copy (NKI 0.3.0)),
#: so they cross HBM at half the bytes; the kernel computes in float32 and the result is complex64 /
#: float32.
_HALF_DTYPES = (torch.float16, torch.bfloat16, torch.complex32)
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
_NORMS = (None, "backward", "forward", "ortho")


@dataclass
class KernelOptions:
    """Variant of the stage kernel the NKI route launches (the benchmark compares them).

    ``grouping``: ``"fused"`` (consecutive radices multiplied into stages of at most 128) or
    ``"plan"`` (one stage per plan radix, 8 or 4). ``gauss``: three-multiplication complex
    products (``True``, the default: the model puts TensorE 25% lower at n=4096 while the Vector
    and GpSimd engines stay below the DMA time), four (``False``).
    """

    grouping: str = "fused"
    gauss: bool = True
    onchip: bool = True


#: The variant used by every NKI-route transform.
KERNEL_OPTIONS = KernelOptions()


def _scale(n: int, norm: str | None, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "forward") != inverse:  # forward+"forward" or inverse+"backward"/None
        return 1.0 / n
    return 1.0


def _launch(
    ctx: KernelContext,
    plan: KernelPlan,
    tensors: Sequence[torch.Tensor],
    params: dict[str, Any],
    tag: str,
    kernel: Any = fft_stages_kernel,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch a transform kernel and remember its key on the plan (one entry per distinct key)."""
    ident = (ctx.target, tag, kernel.__name__, tuple(tensors[0].shape), tuple(sorted(params.items())))
    if ident not in plan.keys:
        specs = [(tuple(t.shape), _DTYPE_NAMES[t.dtype]) for t in tensors]
        plan.keys[ident] = KernelKey.build(kernel, specs, params, target=ctx.target)
    yr, yi = ctx.launch(kernel, *tensors, **params)
    return yr, yi


def transform_planes(
    ctx: KernelContext, xr: torch.Tensor, xi: torch.Tensor, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward DFT (times ``scale``) of each row of the float32 planes ``(B, n)`` on the NKI route."""
    batch, n = xr.shape
    plan = kernel_plan(n, xr.device)
    setup = plan.setup(KERNEL_OPTIONS.grouping)
    geo = setup.geometry
    onchip = setup.onchip if KERNEL_OPTIONS.onchip else None
    onchip3 = setup.onchip3 if KERNEL_OPTIONS.onchip else None
    kernel: Any = fft_stages_kernel
    tables: tuple[torch.Tensor, ...] = setup.tables
    if onchip is not None:
        padded = onchip.padded_batch(batch)
        params: dict[str, Any] = dict(onchip.params(padded))
        kernel, tables = fft_onchip_kernel, setup.onchip_tables
    elif onchip3 is not None:
        padded = onchip3.padded_batch(batch)
        params = dict(onchip3.params(padded))
        kernel, tables = fft_onchip3_kernel, setup.onchip3_tables
    else:
        padded = geo.padded_batch(batch)
        params = {
            "stages": geo.stage_params(),
            "batch_tile": geo.tile_for(padded),
            "gauss": bool(KERNEL_OPTIONS.gauss),
        }
    length = geo.n  # n, or Bluestein's m
    planes = []
    for p in (xr, xi):
        if padded != batch or length != n:
            p = torch.nn.functional.pad(p, (0, length - n, 0, padded - batch))
        planes.append(p.contiguous())
    if setup.pre is None:
        yr, yi = _launch(ctx, plan, [*planes, *tables], {**params, "scale": float(scale)}, "fft", kernel)
    else:
        assert setup.post is not None and setup.post_inverse is not None  # Bluestein plans have them
        vr, vi = _launch(
            ctx,
            plan,
            [*planes, *tables, *setup.post, *setup.pre],
            {**params, "scale": 1.0},
            "bluestein-forward",
            kernel,
        )
        zr, zi = _launch(
            ctx,
            plan,
            [vi, vr, *tables, *setup.post_inverse],
            {**params, "scale": float(scale)},
            "bluestein-inverse",
            kernel,
        )
        yr, yi = zi, zr
    return yr[:batch, :n], yi[:batch, :n]


class PlanesFFT(torch.autograd.Function):
    """``(yr, yi) = scale * DFT(xr + i xi)`` on the NKI route, differentiable (backward: same kernel)."""

    @staticmethod
    def forward(
        fctx: Any, ctx: KernelContext, xr: torch.Tensor, xi: torch.Tensor, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Kernel transform of the planes."""
        fctx.kernel_ctx, fctx.scale = ctx, scale
        return transform_planes(ctx, xr, xi, scale)

    @staticmethod
    def backward(fctx: Any, gyr: torch.Tensor, gyi: torch.Tensor) -> tuple[Any, ...]:
        """``grad_x = scale * swap(DFT(swap(grad_y)))``."""
        ur, ui = transform_planes(fctx.kernel_ctx, gyi.contiguous(), gyr.contiguous(), fctx.scale)
        return None, ui, ur, None


# --------------------------------------------------------------------------- argument handling


def check_input(input: Any, halves: bool = False) -> torch.Tensor:
    """``input`` if the kernels take its dtype (with ``halves``: also float16, bfloat16, complex32)."""
    if not isinstance(input, torch.Tensor):
        raise KernelUnsupported(f"kernel takes a torch.Tensor, got {type(input).__name__}")
    if input.dtype not in _KERNEL_DTYPES and not (halves and input.dtype in _HALF_DTYPES):
        raise unsupported_dtype(input.dtype, "float32 or complex64")
    return input


def _valid_1d(x: torch.Tensor, n: Any, dim: Any, norm: Any) -> bool:
    if norm not in _NORMS or isinstance(dim, bool) or not isinstance(dim, int):
        return False
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        return False
    return n is None or (isinstance(n, int) and not isinstance(n, bool) and n > 0)


def _planes_last(
    ctx: KernelContext, re: torch.Tensor, im: torch.Tensor, scale: float, inverse: bool
) -> torch.Tensor:
    """Complex64 transform along the last dim of the complex signal given as two real planes
    (float32, or a half-precision dtype the kernel's DMA casts on load)."""
    shape = re.shape
    n = shape[-1]
    xr, xi = re.reshape(-1, n), im.reshape(-1, n)
    if xr.shape[0] == 0 or n == 0:
        return torch.zeros(shape, dtype=torch.complex64, device=re.device)
    if inverse:
        yi, yr = PlanesFFT.apply(ctx, xi, xr, scale)
    else:
        yr, yi = PlanesFFT.apply(ctx, xr, xi, scale)
    return torch.complex(yr, yi).reshape(shape)


def c2c_along(ctx: KernelContext, x: torch.Tensor, dim: int, scale: float, inverse: bool) -> torch.Tensor:
    """Complex64 transform of ``x`` along ``dim`` (already of the transform length)."""
    moved = x.movedim(dim, -1)
    if x.is_complex():
        re, im = moved.real, moved.imag
    else:
        re, im = moved, torch.zeros_like(moved)
    return _planes_last(ctx, re, im, scale, inverse).movedim(-1, dim)


def _named(driver: Any, name: str) -> Any:
    """Name a generated driver after its transform (for tracebacks and the kernel report)."""
    driver.__name__ = driver.__qualname__ = f"{name}_driver"
    driver.__doc__ = f"NKI-route driver of ``{name}`` (``torch.fft.{name}`` semantics)."
    return driver


def _no_out(out: Any) -> None:
    if out is not None:
        raise KernelUnsupported("out= is not supported by the kernel route")


def _c2c_driver(inverse: bool, name: str) -> Any:
    def driver(
        ctx: KernelContext, input: Any, n: Any = None, dim: Any = -1, norm: Any = None, *, out: Any = None
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        if not _valid_1d(x, n, dim, norm):
            ctx.caller_error(input, n, dim, norm)  # torch's own error
        length = x.shape[dim] if n is None else n
        x = _resize(x, dim, length)
        return c2c_along(ctx, x, dim, _scale(length, norm, inverse), inverse)

    return _named(driver, name)


fft_driver = _c2c_driver(False, "fft")
ifft_driver = _c2c_driver(True, "ifft")


def _real_twiddles(n: int, device: torch.device) -> torch.Tensor:
    return kernel_plan(n, device).real_twiddles


def r2c_along(
    ctx: KernelContext, x: torch.Tensor, dim: int, length: int, scale: float, inverse: bool
) -> torch.Tensor:
    """The first ``length // 2 + 1`` bins of the transform of the real ``x`` (already ``length`` long)
    along ``dim``; ``inverse`` gives the inverse transform's (the conjugate of the forward one)."""
    m = length // 2
    if length % 2 or m < 2:  # odd (or tiny): the full transform with a zero imaginary plane
        full = c2c_along(ctx, x, dim, scale, inverse)
        return full.narrow(dim, 0, m + 1)
    moved = x.movedim(dim, -1)
    # z[j] = x[2j] + i x[2j+1] and Z = DFT_m(z) (the kernel); for k = 0 … m, with Z[m] = Z[0],
    # the even samples' spectrum is E = (Z[k] + conj Z[m-k]) / 2, the odd ones' O = (Z[k] -
    # conj Z[m-k]) / 2i, and X[k] = E[k] + exp(-2πi k/n) O[k].
    z = _planes_last(ctx, moved[..., 0::2], moved[..., 1::2], scale, False)
    zk = torch.cat([z, z[..., :1]], dim=-1)
    zc = zk.flip(-1).conj()
    w = _real_twiddles(length, x.device)
    half = 0.5 * (zk + zc) - 0.5j * w * (zk - zc)
    return (half.conj().resolve_conj() if inverse else half).movedim(-1, dim)


def _r2c_driver(inverse: bool, name: str) -> Any:
    def driver(
        ctx: KernelContext, input: Any, n: Any = None, dim: Any = -1, norm: Any = None, *, out: Any = None
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        if x.is_complex() or not _valid_1d(x, n, dim, norm):
            ctx.caller_error(input, n, dim, norm)
        length = x.shape[dim] if n is None else n
        return r2c_along(ctx, _resize(x, dim, length), dim, length, _scale(length, norm, inverse), inverse)

    return _named(driver, name)


rfft_driver = _r2c_driver(False, "rfft")
rfft_driver.__doc__ = (
    "NKI-route driver of ``rfft``: the first ``n//2 + 1`` bins of the real input's transform."
)
# ihfft(x) = conj(rfft(x)) / n: the same half spectrum, conjugated (r2c_along's inverse flag).
ihfft_driver = _r2c_driver(True, "ihfft")
ihfft_driver.__doc__ = (
    "NKI-route driver of ``ihfft``: the first ``n//2 + 1`` bins of the real input's inverse transform."
)


def c2r_along(
    ctx: KernelContext, x: torch.Tensor, dim: int, length: int, scale: float, inverse: bool
) -> torch.Tensor:
    """Real result of transforming the Hermitian completion of ``x`` to ``length`` along ``dim``."""
    half = _resize(x.to(torch.complex64), dim, length // 2 + 1)
    m = length // 2
    if length % 2 or m < 2:
        # X[length - k] = conj(X[k]) for 0 < k < ceil(length / 2); the imaginary parts of the DC
        # and Nyquist bins only add an imaginary constant / alternating term, dropped with the
        # imaginary plane.
        mirror = half.narrow(dim, 1, (length - 1) // 2).flip(dim).conj()
        full = torch.cat([half, mirror], dim=dim)
        return c2c_along(ctx, full, dim, scale, inverse).real.contiguous()
    spec = half.movedim(dim, -1)
    if not inverse:
        # The forward transform of a Hermitian array is real and equals the unnormalised
        # inverse transform of its conjugate.
        spec = spec.conj()
    # The completion's DC and Nyquist bins are real (c2r ignores their imaginary parts). With
    # A = X[k] + X[k+m] and B = (X[k] - X[k+m]) exp(2πi k/n), X[k+m] = conj X[m-k], k < m:
    # x[2j] + i x[2j+1] = IDFT_m(A + iB)[j] (unnormalised, times the scale).
    edges = torch.ones(m + 1, device=spec.device)
    edges[0] = edges[m] = 0.0
    spec = torch.complex(spec.real, spec.imag * edges)
    low, high = spec[..., :m], spec[..., 1:].flip(-1).conj()  # X[k] and X[k+m]
    w = _real_twiddles(length, x.device)[:m].conj()
    z = c2c_along(ctx, (low + high) + 1j * (low - high) * w, -1, scale, True)
    out = torch.stack([z.real, z.imag], dim=-1).reshape(*z.shape[:-1], length)
    return out.movedim(-1, dim).contiguous()


def _c2r_driver(inverse: bool, name: str) -> Any:
    def driver(
        ctx: KernelContext, input: Any, n: Any = None, dim: Any = -1, norm: Any = None, *, out: Any = None
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        if not _valid_1d(x, n, dim, norm):
            ctx.caller_error(input, n, dim, norm)
        length = 2 * (x.shape[dim] - 1) if n is None else n
        if length <= 0:
            ctx.caller_error(input, n, dim, norm)
        return c2r_along(ctx, x, dim, length, _scale(length, norm, inverse), inverse)

    return _named(driver, name)


irfft_driver = _c2r_driver(True, "irfft")
irfft_driver.__doc__ = "NKI-route driver of ``irfft``: the real inverse transform of a half spectrum."
# hfft(a) = n irfft(conj a): the forward transform of a's Hermitian completion, which is real.
hfft_driver = _c2r_driver(False, "hfft")
hfft_driver.__doc__ = "NKI-route driver of ``hfft``: the real forward transform of a half spectrum."


def _nd_args(
    ctx: KernelContext, input: Any, s: Any, dim: Any, norm: Any, half_input: bool = False
) -> tuple[list[int], list[int]]:
    """Transform dims and sizes (torch.fft's ``s``/``dim`` rules); torch's error when they are invalid.

    ``half_input``: the last transformed dim holds ``m`` bins of a Hermitian spectrum, whose real
    length defaults to ``2 * (m - 1)`` (the ``irfftn`` family).
    """
    x = input
    try:
        dims = _nd_dims(x, s, dim)
    except (ValueError, TypeError):
        ctx.caller_error(input, s, dim, norm)
    if norm not in _NORMS or dims is None:
        ctx.caller_error(input, s, dim, norm)
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    if half_input and (s is None or s[-1] == -1):
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
    if any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in sizes):
        ctx.caller_error(input, s, dim, norm)
    return dims, sizes


def _nd_driver(inverse: bool, name: str, default_dims: Any) -> Any:
    def driver(
        ctx: KernelContext,
        input: Any,
        s: Any = None,
        dim: Any = default_dims,
        norm: Any = None,
        *,
        out: Any = None,
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        dims, sizes = _nd_args(ctx, x, s, dim, norm)
        for d, size in zip(dims, sizes):
            x = _resize(x, d, size)
        for d, size in reversed(list(zip(dims, sizes))):
            x = c2c_along(ctx, x, d, _scale(size, norm, inverse), inverse)
        return x

    return _named(driver, name)


def _rnd_driver(name: str, default_dims: Any, inverse: bool = False) -> Any:
    """``rfft2``/``rfftn`` (``ihfft2``/``ihfftn`` with ``inverse``): the last dim's half spectrum,
    then full transforms along the others."""

    def driver(
        ctx: KernelContext,
        input: Any,
        s: Any = None,
        dim: Any = default_dims,
        norm: Any = None,
        *,
        out: Any = None,
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        if x.is_complex():
            ctx.caller_error(input, s, dim, norm)
        dims, sizes = _nd_args(ctx, x, s, dim, norm)
        if not dims:
            raise KernelUnsupported("no dimension to transform")
        for d, size in zip(dims, sizes):
            x = _resize(x, d, size)
        last, length = dims[-1], sizes[-1]
        # The half spectrum first: the other dims then transform only length // 2 + 1 columns.
        x = r2c_along(ctx, x, last, length, _scale(length, norm, inverse), inverse)
        for d, size in reversed(list(zip(dims[:-1], sizes[:-1]))):
            x = c2c_along(ctx, x, d, _scale(size, norm, inverse), inverse)
        return x

    return _named(driver, name)


def _irnd_driver(name: str, default_dims: Any, inverse: bool = True) -> Any:
    """``irfft2``/``irfftn``: inverse transforms along the other dims, then the real inverse of the
    last. ``hfft2``/``hfftn`` (not ``inverse``) are the same with forward transforms: the forward
    transform of a Hermitian-symmetric array is real and equals the unnormalised inverse of its
    conjugate, and transforming the other dims first keeps the last dim Hermitian."""

    def driver(
        ctx: KernelContext,
        input: Any,
        s: Any = None,
        dim: Any = default_dims,
        norm: Any = None,
        *,
        out: Any = None,
    ) -> torch.Tensor:
        x = check_input(input, halves=True)
        _no_out(out)
        if not x.dim():
            ctx.caller_error(input, s, dim, norm)
        dims, sizes = _nd_args(ctx, x, s, dim, norm, half_input=True)
        if not dims:
            raise KernelUnsupported("no dimension to transform")
        x = x.to(torch.complex64)
        for d, size in zip(dims[:-1], sizes[:-1]):
            x = _resize(x, d, size)
        for d, size in reversed(list(zip(dims[:-1], sizes[:-1]))):
            x = c2c_along(ctx, x, d, _scale(size, norm, inverse), inverse)
        last, length = dims[-1], sizes[-1]
        return c2r_along(ctx, x, last, length, _scale(length, norm, inverse), inverse)

    return _named(driver, name)


def _nd_dims(x: torch.Tensor, s: Any, dim: Any) -> list[int] | None:
    """Normalised transform dims, or None when torch should judge the arguments."""
    if dim is None:
        if s is None:
            return list(range(x.dim()))
        return list(range(x.dim() - len(s), x.dim())) if len(s) <= x.dim() else None
    dims = [dim] if isinstance(dim, int) else list(dim)
    if any(isinstance(d, bool) or not isinstance(d, int) or not -x.dim() <= d < x.dim() for d in dims):
        return None
    dims = [d % x.dim() for d in dims]
    if len(set(dims)) != len(dims) or (s is not None and len(s) != len(dims)):
        return None
    return dims


fft2_driver = _nd_driver(False, "fft2", (-2, -1))
ifft2_driver = _nd_driver(True, "ifft2", (-2, -1))
fftn_driver = _nd_driver(False, "fftn", None)
ifftn_driver = _nd_driver(True, "ifftn", None)
rfft2_driver = _rnd_driver("rfft2", (-2, -1))
rfftn_driver = _rnd_driver("rfftn", None)
irfft2_driver = _irnd_driver("irfft2", (-2, -1))
irfftn_driver = _irnd_driver("irfftn", None)
hfft2_driver = _irnd_driver("hfft2", (-2, -1), inverse=False)
hfftn_driver = _irnd_driver("hfftn", None, inverse=False)
ihfft2_driver = _rnd_driver("ihfft2", (-2, -1), inverse=True)
ihfftn_driver = _rnd_driver("ihfftn", None, inverse=True)


#: The work reported for half-precision inputs: above any threshold, so that ``auto`` sends them
#: to the kernel whenever one can run (``torch.fft`` rejects them on a CPU, and on a GPU takes
#: powers of two only); with no kernel available they still reach ``torch.fft`` and its error.
HALF_PRECISION_WORK = 1 << 62


def work_1d(input: Any, n: Any = None, dim: Any = -1, *args: Any, **kwargs: Any) -> int:
    """Flops of a 1-D transform (``5 N log2 N`` per row), 0 when the arguments are unusual."""
    if getattr(input, "dtype", None) in _HALF_DTYPES:
        return HALF_PRECISION_WORK
    try:
        size = int(input.shape[dim]) if n is None else int(n)
        rows = input.numel() // max(1, int(input.shape[dim]))
    except Exception:
        return 0
    return int(5 * rows * size * max(1.0, math.log2(max(size, 2))))


def work_nd(input: Any, *args: Any, **kwargs: Any) -> int:
    """Flops of an n-D transform over the whole input (an estimate for the size threshold)."""
    if getattr(input, "dtype", None) in _HALF_DTYPES:
        return HALF_PRECISION_WORK
    try:
        count = int(input.numel())
    except Exception:
        return 0
    return int(5 * count * max(1.0, math.log2(max(count, 2))))
