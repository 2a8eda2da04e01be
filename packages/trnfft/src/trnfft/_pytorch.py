"""trnfft's PyTorch references: the real-to-real transforms and the complex layers' arithmetic.

The transforms of :mod:`trnfft._ops` have ``torch.fft`` itself as their reference; this module
holds the references written here: the complex layers' operations (``complex_matmul``, ``modrelu``,
whitening batch normalisation; see the end of the module) and the real-to-real transforms below.

Real-to-real transforms (DCT and DST, types 1-4) in torch.

Each transform is reduced to one FFT of a real or complex sequence plus ``O(n)`` element-wise
work, so it costs what an FFT costs and is differentiable through torch's autograd. The FFTs are
taken from an :class:`FFTPrimitives` (torch.fft here; the NKI drivers pass kernel-backed ones and
reuse the same algebra). Definitions (``N`` points, unnormalised, scipy.fft's):

=======  ============================================================================
DCT-I    ``y[k] = x[0] + (-1)^k x[N-1] + 2 sum_{n=1}^{N-2} x[n] cos(pi k n / (N-1))``
DCT-II   ``y[k] = 2 sum_n x[n] cos(pi k (2n+1) / (2N))``
DCT-III  ``y[k] = x[0] + 2 sum_{n>=1} x[n] cos(pi n (2k+1) / (2N))``
DCT-IV   ``y[k] = 2 sum_n x[n] cos(pi (2k+1)(2n+1) / (4N))``
DST-I    ``y[k] = 2 sum_n x[n] sin(pi (k+1)(n+1) / (N+1))``
DST-II   ``y[k] = 2 sum_n x[n] sin(pi (k+1)(2n+1) / (2N))``
DST-III  ``y[k] = (-1)^k x[N-1] + 2 sum_{n<N-1} x[n] sin(pi (2k+1)(n+1) / (2N))``
DST-IV   ``y[k] = 2 sum_n x[n] sin(pi (2k+1)(2n+1) / (4N))``
=======  ============================================================================

Algorithms: DCT-I / DST-I are the real FFT of the even / odd extension (length ``2(N-1)`` /
``2(N+1)``); DCT-II is Makhoul's (the FFT of ``x`` reordered as even samples then odd ones
reversed, times ``exp(-i pi k / 2N)``; a real FFT of length ``N`` gives both ``y[k]`` and
``y[N-k]``); DCT-III is its inverse (an inverse real FFT); DCT-IV of even ``N`` is one complex FFT of length
``N/2`` of ``x[2j] + i x[N-1-2j]`` with pre- and post-twiddles (odd ``N``: the real part of a
twiddled length-``2N`` FFT); DST-IV is ``(-1)^k DCT4(flip(x))``; DST-II and
DST-III are DCT-II and DCT-III of the sign-alternated / reversed sequence
(``DST2(x) = flip(DCT2((-1)^n x))``, ``DST3(x) = (-1)^k DCT3(flip(x))``). Up to
:data:`MATRIX_MAX` points (and :data:`MATRIX_WORK` multiply-adds) the PyTorch route multiplies by
the transform's matrix instead (built once from the algorithms in float64).

Normalisation and ``orthogonalize`` follow scipy.fft: the scale ``M`` is ``2(N-1)`` for DCT-I,
``2(N+1)`` for DST-I and ``2N`` otherwise; ``"backward"`` leaves the forward transform unscaled,
``"forward"`` divides it by ``M``, ``"ortho"`` by ``sqrt(M)``, and the inverse of type ``t`` is the
forward transform of type ``1, 3, 2, 4`` (for ``t = 1, 2, 3, 4``) with the opposite scaling.
``orthogonalize`` multiplies the boundary samples so that the ``"ortho"`` matrices are orthogonal:
DCT-I ``x[0], x[N-1]`` by ``sqrt 2`` and ``y[0], y[N-1]`` by ``1/sqrt 2``; DCT-II ``y[0]`` and DST-II
``y[N-1]`` by ``1/sqrt 2``; DCT-III ``x[0]`` and DST-III ``x[N-1]`` by ``sqrt 2``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from trnfft.errors import FFTArgumentError, FFTTypeError

__all__ = [
    "INVERSE_TYPE",
    "TORCH_PRIMITIVES",
    "FFTPrimitives",
    "check_dtype",
    "dct",
    "dctn",
    "dst",
    "dstn",
    "idct",
    "idctn",
    "idst",
    "idstn",
    "r2r",
    "r2r_matrix",
    "r2rn",
    "resize",
    "scale_length",
]

#: The forward type whose transform inverts type ``t`` (up to the scale ``M``).
INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}
_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class FFTPrimitives:
    """The three FFTs the real-to-real algorithms need, all along the last dimension.

    ``rfft(x)``: first ``m // 2 + 1`` bins of the unnormalised DFT of the real ``(..., m)`` input;
    ``irfft(X, m)``: the real unnormalised inverse DFT (no ``1/m``) of length ``m`` of a half spectrum;
    ``fft(z)``: the unnormalised DFT of the complex ``(..., m)`` input.
    """

    rfft: Callable[[torch.Tensor], torch.Tensor]
    irfft: Callable[[torch.Tensor, int], torch.Tensor]
    fft: Callable[[torch.Tensor], torch.Tensor]


#: The PyTorch route's primitives: ``torch.fft``.
TORCH_PRIMITIVES = FFTPrimitives(
    rfft=lambda x: torch.fft.rfft(x),
    irfft=lambda X, m: torch.fft.irfft(X, m, norm="forward"),
    fft=lambda z: torch.fft.fft(z),
)


#: The same primitives as an object of its own: the algorithms without the short-length matrix.
_FFT_ONLY = FFTPrimitives(TORCH_PRIMITIVES.rfft, TORCH_PRIMITIVES.irfft, TORCH_PRIMITIVES.fft)
#: Up to this length the PyTorch route multiplies by the transform's cached matrix (built in float64
#: by the FFT algorithms; one GEMM beats their eight small torch operations there) ...
MATRIX_MAX = 128
#: ... while the product costs at most this many multiply-adds (rows * n * n; the measured
#: crossover on one x86-64 thread is near 2^20).
MATRIX_WORK = 1 << 19


def scale_length(kind: str, type: int, n: int) -> int:
    """scipy.fft's normalisation length ``M`` of a transform of ``n`` points."""
    if type == 1:
        return 2 * (n - 1) if kind == "dct" else 2 * (n + 1)
    return 2 * n


def resize(x: torch.Tensor, dim: int, n: int) -> torch.Tensor:
    """Zero-pad or crop ``x`` along ``dim`` to ``n`` (scipy.fft's ``n`` / ``s`` semantics)."""
    size = x.shape[dim]
    if size == n:
        return x
    if size > n:
        return x.narrow(dim, 0, n)
    pad = [0, 0] * (x.dim() - 1 - dim % x.dim()) + [0, n - size]
    return torch.nn.functional.pad(x, pad)


def _complex_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.complex128 if dtype in (torch.float64, torch.complex128) else torch.complex64


@functools.lru_cache(maxsize=1024)
def _table(what: str, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The constant vectors of the length-``n`` algorithms, built once per dtype and device.

    Angles ``exp(-i pi e / d)`` are computed in float64 from the integer exponent reduced modulo
    ``2 d`` (exact to the working precision whatever ``n``) and rounded once to ``dtype``'s
    complex precision.
    """
    if what == "signs":
        signs = torch.ones(n, dtype=dtype)
        signs[1::2] = -1.0
        return signs.to(device)
    count = {"dct2_post": n // 2 + 1, "dct3_pre": n // 2 + 1, "dct4_pre": n // 2, "dct4_post": n // 2}
    k = torch.arange(count.get(what, n), dtype=torch.int64)
    numerator, denominator, factor = {
        "dct4_pre": (4 * k + 1, 4 * n, 1.0),  # exp(-i pi (4j+1) / 4N), even N
        "dct4_post": (k, n, 2.0),  # 2 exp(-i pi k / N), even N
        "dct2_post": (k, 2 * n, 2.0),  # 2 exp(-i pi k / 2N), k <= N/2
        "dct3_pre": (-k, 2 * n, 1.0),  # exp(+i pi k / 2N), k <= N/2
        "type4_pre": (k, 2 * n, 1.0),  # exp(-i pi n / 2N)
        "type4_post": (2 * k + 1, 4 * n, 2.0),  # 2 exp(-i pi (2k+1) / 4N)
    }[what]
    reduced = torch.remainder(numerator, 2 * denominator).to(torch.float64) * (-math.pi / denominator)
    w = factor * torch.polar(torch.ones_like(reduced), reduced)
    return w.to(device=device, dtype=_complex_dtype(dtype))


def _dct1(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    n = x.shape[-1]
    ext = torch.cat([x, x[..., 1 : n - 1].flip(-1)], dim=-1)  # even extension, length 2(n-1)
    return fft.rfft(ext).real


def _dst1(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    n = x.shape[-1]
    zero = x.new_zeros(*x.shape[:-1], 1)
    ext = torch.cat([zero, x, zero, -x.flip(-1)], dim=-1)  # odd extension, length 2(n+1)
    return -fft.rfft(ext).imag[..., 1 : n + 1]


def _dct2(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    n = x.shape[-1]
    v = torch.cat([x[..., 0::2], x[..., 1::2].flip(-1)], dim=-1)  # even samples, odd ones reversed
    z = _table("dct2_post", n, x.dtype, x.device) * fft.rfft(v)  # 2 exp(-i pi k / 2N) V[k], k <= N/2
    # y[k] = Re z[k]; y[N-k] = -Im z[k]
    return torch.cat([z.real, -z.imag[..., 1 : (n - 1) // 2 + 1].flip(-1)], dim=-1)


def _dct3(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    n = x.shape[-1]
    half = n // 2 + 1
    mirrored = torch.cat([x.new_zeros(*x.shape[:-1], 1), x.flip(-1)[..., : half - 1]], dim=-1)  # x[N-k]
    spectrum = torch.complex(x[..., :half], -mirrored) * _table("dct3_pre", n, x.dtype, x.device)
    v = fft.irfft(spectrum, n)
    # x[2j] = v[j], x[2j+1] = v[N-1-j]: interleave the first half with the reversed second half
    first = (n + 1) // 2
    second = v[..., first:].flip(-1)
    if n % 2:
        second = torch.nn.functional.pad(second, (0, 1))
    return torch.stack([v[..., :first], second], dim=-1).flatten(-2)[..., :n]


def _alternate(x: torch.Tensor) -> torch.Tensor:
    return x * _table("signs", x.shape[-1], x.dtype, x.device)


def _type4(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    """``2 exp(-i pi (2k+1) / 4N) sum_n x[n] exp(-i pi n / 2N) exp(-2 pi i k n / 2N)``, ``k < N``:
    DCT-IV is its real part, DST-IV minus its imaginary part."""
    n = x.shape[-1]
    z = torch.nn.functional.pad(x * _table("type4_pre", n, x.dtype, x.device), (0, n))
    return _table("type4_post", n, x.dtype, x.device) * fft.fft(z)[..., :n]


def _dct4(x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    """DCT-IV; for even ``N`` through one complex FFT of length ``N/2``: with
    ``t[j] = (x[2j] + i x[N-1-2j]) exp(-i pi (4j+1) / 4N)`` and ``c = 2 exp(-i pi k / N) FFT(t)[k]``,
    ``y[2k] = Re c[k]`` and ``y[N-1-2k] = -Im c[k]``. Odd ``N``: the length-``2N`` form."""
    n = x.shape[-1]
    if n % 2:
        return _type4(x, fft).real
    t = torch.complex(x[..., 0::2], x.flip(-1)[..., 0::2]) * _table("dct4_pre", n, x.dtype, x.device)
    c = _table("dct4_post", n, x.dtype, x.device) * fft.fft(t)
    return torch.stack([c.real, -c.imag.flip(-1)], dim=-1).reshape(x.shape)


def _transform(kind: str, type: int, x: torch.Tensor, fft: FFTPrimitives) -> torch.Tensor:
    """Unnormalised transform of the real ``x`` along its last dimension."""
    if kind == "dct":
        if type == 1:
            return _dct1(x, fft)
        if type == 2:
            return _dct2(x, fft)
        if type == 3:
            return _dct3(x, fft)
        return _dct4(x, fft)
    if type == 1:
        return _dst1(x, fft)
    if type == 2:
        return _dct2(_alternate(x), fft).flip(-1)
    if type == 3:
        return _alternate(_dct3(x.flip(-1), fft))
    return _alternate(_dct4(x.flip(-1), fft))  # DST4(x) = (-1)^k DCT4(flip(x))


@functools.lru_cache(maxsize=256)
def _weights(
    n: int, first: float | None, last: float | None, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    w = torch.ones(n, dtype=dtype)
    if first is not None:
        w[0] = w[0] * first
    if last is not None:
        w[-1] = w[-1] * last
    return w.to(device)


def _boundary(x: torch.Tensor, first: float | None, last: float | None) -> torch.Tensor:
    """``x`` with its first / last sample along the last dim multiplied by ``first`` / ``last``."""
    return x * _weights(x.shape[-1], first, last, x.dtype, x.device)


_PRE = {("dct", 1): (_SQRT2, _SQRT2), ("dct", 3): (_SQRT2, None), ("dst", 3): (None, _SQRT2)}
_POST = {("dct", 1): (1 / _SQRT2, 1 / _SQRT2), ("dct", 2): (1 / _SQRT2, None), ("dst", 2): (None, 1 / _SQRT2)}


def _scale(norm: str | None, m: int, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / math.sqrt(m)
    if (norm == "forward") != inverse:
        return 1.0 / m
    return 1.0


def _r2r_last(
    kind: str,
    type: int,
    x: torch.Tensor,
    norm: str | None,
    orthogonalize: bool | None,
    inverse: bool,
    fft: FFTPrimitives,
) -> torch.Tensor:
    """One real-to-real transform of ``x``'s last dimension, scipy's scaling and weights applied."""
    if x.is_complex():  # scipy: real and imaginary parts transformed separately
        re = _r2r_last(kind, type, x.real, norm, orthogonalize, inverse, fft)
        im = _r2r_last(kind, type, x.imag, norm, orthogonalize, inverse, fft)
        return torch.complex(re, im)
    n = x.shape[-1]
    ortho = norm == "ortho" if orthogonalize is None else bool(orthogonalize)
    if n <= MATRIX_MAX and x.numel() * n <= MATRIX_WORK and fft is TORCH_PRIMITIVES:
        return x @ _matrix_t(kind, type, n, norm, ortho, inverse, x.dtype, x.device)
    t = INVERSE_TYPE[type] if inverse else type
    if ortho and (kind, t) in _PRE:
        x = _boundary(x, *_PRE[kind, t])
    y = _transform(kind, t, x, fft)
    if ortho and (kind, t) in _POST:
        y = _boundary(y, *_POST[kind, t])
    scale = _scale(norm, scale_length(kind, type, n), inverse)
    return y * scale if scale != 1.0 else y


def r2r(
    kind: str,
    inverse: bool,
    x: torch.Tensor,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    orthogonalize: bool | None = None,
    fft: FFTPrimitives = TORCH_PRIMITIVES,
) -> torch.Tensor:
    """``dct``/``dst`` (``idct``/``idst`` with ``inverse``) of ``x`` along ``axis`` (arguments checked)."""
    if n is not None:
        x = resize(x, axis, n)
    moved = x.movedim(axis, -1)
    return _r2r_last(kind, type, moved, norm, orthogonalize, inverse, fft).movedim(-1, axis)


def r2rn(
    kind: str,
    inverse: bool,
    x: torch.Tensor,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    orthogonalize: bool | None = None,
    fft: FFTPrimitives = TORCH_PRIMITIVES,
) -> torch.Tensor:
    """The n-D form: one-dimensional transforms along each of ``axes`` (normalised, checked)."""
    axes = list(range(x.dim())) if axes is None else list(axes)
    for i, axis in enumerate(axes):
        size = None if s is None or s[i] == -1 else s[i]
        x = r2r(kind, inverse, x, type, size, axis, norm, orthogonalize, fft)
    if not axes:
        x = x.clone()
    return x


@functools.lru_cache(maxsize=256)
def _matrix_t(
    kind: str,
    type: int,
    n: int,
    norm: str | None,
    ortho: bool,
    inverse: bool,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """``A^T`` of a short transform in ``dtype`` on ``device`` (``y = x @ A^T`` along the last dim)."""
    return r2r_matrix(kind, type, n, norm, ortho, inverse).T.to(device=device, dtype=dtype).contiguous()


def r2r_matrix(
    kind: str, type: int, n: int, norm: str | None, orthogonalize: bool | None, inverse: bool
) -> torch.Tensor:
    """The ``n x n`` float64 matrix ``A`` of a transform (``y = A x``), built by transforming the identity."""
    eye = torch.eye(n, dtype=torch.float64)
    return _r2r_last(kind, type, eye, norm, orthogonalize, inverse, _FFT_ONLY).T.contiguous()


# --------------------------------------------------------------------------- the references

_REAL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def check_dtype(fn: str, x: torch.Tensor) -> None:
    """Raise a clear ``TypeError`` for a dtype the PyTorch route cannot transform."""
    if x.dtype not in _REAL_DTYPES:
        raise FFTTypeError(
            f"{fn}: input dtype {str(x.dtype).removeprefix('torch.')} is not supported on the PyTorch "
            "route; use float32, float64, complex64 or complex128"
        )


def _check_reference_args(fn: str, x: torch.Tensor, type: int, norm: str | None) -> None:
    """The checks the references make themselves (the kernel route's ``caller_error`` runs them)."""
    check_dtype(fn, x)
    if type not in (1, 2, 3, 4) or isinstance(type, bool):
        raise FFTArgumentError(f"{fn}: type must be 1, 2, 3 or 4, got {type!r}")
    if norm not in (None, "backward", "forward", "ortho"):
        raise FFTArgumentError(f"{fn}: norm must be None, 'backward', 'forward' or 'ortho', got {norm!r}")


def _reference(kind: str, inverse: bool) -> Callable[..., torch.Tensor]:
    name = ("i" if inverse else "") + kind

    def reference(
        x: torch.Tensor,
        type: int = 2,
        n: int | None = None,
        axis: int = -1,
        norm: str | None = None,
        orthogonalize: bool | None = None,
    ) -> torch.Tensor:
        _check_reference_args(name, x, type, norm)
        return r2r(kind, inverse, x, type, n, axis, norm, orthogonalize)

    reference.__name__ = reference.__qualname__ = name
    reference.__doc__ = f"PyTorch reference of ``{name}`` (arguments already checked)."
    return reference


def _reference_nd(kind: str, inverse: bool) -> Callable[..., torch.Tensor]:
    name = ("i" if inverse else "") + kind + "n"

    def reference(
        x: torch.Tensor,
        type: int = 2,
        s: Sequence[int] | None = None,
        axes: Sequence[int] | None = None,
        norm: str | None = None,
        orthogonalize: bool | None = None,
    ) -> torch.Tensor:
        _check_reference_args(name, x, type, norm)
        return r2rn(kind, inverse, x, type, s, axes, norm, orthogonalize)

    reference.__name__ = reference.__qualname__ = name
    reference.__doc__ = f"PyTorch reference of ``{name}`` (arguments already checked)."
    return reference


dct = _reference("dct", False)
idct = _reference("dct", True)
dst = _reference("dst", False)
idst = _reference("dst", True)
dctn = _reference_nd("dct", False)
idctn = _reference_nd("dct", True)
dstn = _reference_nd("dst", False)
idstn = _reference_nd("dst", True)


# --------------------------------------------------------------------------- complex layers

Planes = tuple[torch.Tensor, torch.Tensor]


def complex_matmul(
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


def modrelu(xr: torch.Tensor, xi: torch.Tensor, b: torch.Tensor) -> Planes:
    """Reference forward on ``(C, M)`` planes with a ``(C,)`` bias (0 where ``z = 0``)."""
    r2 = xr * xr + xi * xi
    r = torch.sqrt(torch.where(r2 > 0, r2, 1.0))
    s = torch.where((r2 > 0) & (r + b[:, None] > 0), (r + b[:, None]) / r, 0.0)
    return xr * s, xi * s


def modrelu_backward(
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


# --------------------------------------------------------------------------- batch normalisation
#
# Whitening batch normalisation as trncore operations with an analytic backward.
#
# Layout: channels first, ``(C, M)`` planes (``M`` = every sample of a channel). ``params`` is
# ``(C, 5)``: ``γ_rr, γ_ii, γ_ri, β_r, β_i``; ``stats`` is ``(C, 5)``: ``μ_r, μ_i, V_rr, V_ii, V_ri``
# (biased batch covariance, ``eps`` not included).
#
# Forward: ``c = x - μ``, ``W = (V + eps I)^(-1/2)`` (closed form for a 2x2 SPD matrix, see
# :func:`whitening`), ``ŷ = W c``, ``y = Γ ŷ + β`` with ``Γ = [[γ_rr, γ_ri], [γ_ri, γ_ii]]``.
#
# Backward, with ``g = ∂ℓ/∂y`` and ``h = Γ g`` (per sample, 2-vectors):
#
# * ``∂ℓ/∂β = Σ g``, ``∂ℓ/∂γ_rr = Σ g_r ŷ_r``, ``∂ℓ/∂γ_ii = Σ g_i ŷ_i``, ``∂ℓ/∂γ_ri = Σ g_r ŷ_i + g_i ŷ_r``;
# * with running statistics (constants): ``∂ℓ/∂x = W h``;
# * with batch statistics: ``G = Σ h cᵀ``; ``Z`` solves the Sylvester equation
#   ``W Z + Z W = G + Gᵀ`` (``W² = (V + eps I)⁻¹`` differentiates through it); ``S = -W² Z W²``;
#   ``∂ℓ/∂c = W h + S c / M`` and ``∂ℓ/∂x = ∂ℓ/∂c - mean(∂ℓ/∂c)`` (the centring's Jacobian).
#
# For a symmetric ``W = [[a, b], [b, d]]`` and symmetric right side ``R``, the Sylvester solution is
# ``z12 = (R12 - b R11 / 2a - b R22 / 2d) / (a + d - b²/a - b²/d)``, ``z11 = (R11 - 2 b z12) / 2a``,
# ``z22 = (R22 - 2 b z12) / 2d`` (the denominator is ``(a + d) det W / (a d) > 0``).


def whitening(stats: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(W_rr, W_ii, W_ri)`` of ``(V + eps I)^(-1/2)`` per channel.

    For a 2x2 SPD ``V``: ``(adj V + s I) / (s t)`` with ``s = √det V`` and ``t = √(tr V + 2s)``.
    """
    vrr, vii, vri = stats[:, 2] + eps, stats[:, 3] + eps, stats[:, 4]
    s = torch.sqrt(vrr * vii - vri * vri)
    inv = 1.0 / (s * torch.sqrt(vrr + vii + 2 * s))
    return (vii + s) * inv, (vrr + s) * inv, -vri * inv


def batchnorm_forward(
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


def batchnorm_backward(
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
