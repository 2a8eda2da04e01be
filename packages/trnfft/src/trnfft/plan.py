"""FFT plans: what one transform length needs, built once and reused.

``create_plan(n, dtype=..., device=..., norm=...)`` returns the same :class:`FFTPlan` object for the
same arguments, so repeated transforms of one size rebuild nothing. A plan records the algorithm
the NKI route uses for ``n`` and its stage radices; its twiddle tables are built on first use, in
float64 and rounded once to the plan's precision, on the plan's device, and then kept.

Algorithm rule (the NKI route's choice; on the PyTorch route a plan runs ``torch.fft``):

``dft_gemm``
    ``n <= 128``: one complex GEMM against the ``n x n`` DFT matrix, the batch on the partition
    dimension (the contraction of ``n`` fits the Tensor Engine's 128 rows in one pass).
``stockham``
    ``n > 128`` a power of two: Stockham autosort stages of radix 8 (radix 4 for the remaining
    factors 4 or 16); each stage is a small DFT on the Tensor Engine with its twiddles fused.
``mixed_radix``
    ``n > 128`` whose prime factors are all at most 13: Stockham stages of radices 8, 4, 2, 3, 5,
    7, 11 and 13 (a radix-``r`` stage costs ``r`` multiply-adds per point, so small radices only).
``bluestein``
    every other ``n``: a chirp-z convolution of power-of-two length ``m >= 2n - 1`` built from a
    ``stockham`` plan of length ``m``.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from trnfft import _validate, transforms
from trnfft._drivers.plan import (
    ALGORITHMS,
    DFT_GEMM_MAX,
    KernelSetup,
    algorithm_for,
    bluestein_length,
    clear_kernel_plans,
    kernel_plan,
    unit_root_powers,
)
from trnfft.complex_tensor import ComplexTensor, TensorLike
from trnfft.errors import FFTArgumentError

__all__ = [
    "ALGORITHMS",
    "DFT_GEMM_MAX",
    "FFTPlan",
    "bluestein_length",
    "choose_algorithm",
    "clear_plan_cache",
    "create_plan",
    "plan_cache_info",
]

_COMPLEX = {
    torch.complex64: torch.complex64,
    torch.complex128: torch.complex128,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}
_PART = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def choose_algorithm(n: int) -> tuple[str, tuple[int, ...]]:
    """The algorithm the NKI route uses for length ``n`` and its stage radices.

    Parameters
    ----------
    n : int
        Transform length, positive.

    Returns
    -------
    (str, tuple of int)
        One of :data:`ALGORITHMS` and the radices of its stages in execution order (``(n,)`` for
        ``dft_gemm``; for ``bluestein``, the radices of the power-of-two convolution length).
    """
    _check_n(n)
    algorithm, radices, _ = algorithm_for(n)
    return algorithm, radices


def _check_n(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"create_plan: n must be an int, got {type(n).__name__}")
    if n <= 0:
        raise FFTArgumentError(f"create_plan: n must be a positive transform length, got {n}")


@dataclass(frozen=True)
class TwiddleTables:
    """The constant tables a plan's kernels read, as (real, imaginary) plane pairs.

    Attributes
    ----------
    stage_dft : tuple of (torch.Tensor, torch.Tensor)
        Per stage, the ``r x r`` DFT matrix of its radix ``r`` (for ``dft_gemm``, the ``n x n``
        matrix): entry ``[j, p] = exp(-2πi j p / r)``.
    stage_twiddles : tuple of (torch.Tensor, torch.Tensor)
        Per stage, the ``L x r`` twiddle factors ``exp(-2πi k p / (L r))`` applied before its DFT,
        where ``L`` is the product of the earlier radices.
    chirp : (torch.Tensor, torch.Tensor) or None
        Bluestein only: ``exp(-πi k² / n)`` for ``k < n``.
    chirp_filter : (torch.Tensor, torch.Tensor) or None
        Bluestein only: the length-``m`` DFT of the circular conjugate chirp (the convolution's
        filter, transformed once).
    """

    stage_dft: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    stage_twiddles: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    chirp: tuple[torch.Tensor, torch.Tensor] | None = None
    chirp_filter: tuple[torch.Tensor, torch.Tensor] | None = None


def _planes(
    values: torch.Tensor, part: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous real and imaginary planes of a complex128 table, rounded once to ``part``."""
    return (
        values.real.to(device=device, dtype=part).contiguous(),
        values.imag.to(device=device, dtype=part).contiguous(),
    )


def _build_twiddles(plan: FFTPlan) -> TwiddleTables:
    """Compute every table of ``plan`` (called once per plan, on first use)."""
    part = _PART[plan.dtype]
    radices = plan.radices
    stage_dft, stage_twiddles = [], []
    length_before = 1
    for r in radices:
        idx = torch.arange(r, dtype=torch.int64)
        stage_dft.append(_planes(unit_root_powers(torch.outer(idx, idx), r), part, plan.device))
        k = torch.arange(length_before, dtype=torch.int64)
        stage_twiddles.append(
            _planes(unit_root_powers(torch.outer(k, idx), length_before * r), part, plan.device)
        )
        length_before *= r
    chirp = chirp_filter = None
    if plan.algorithm == "bluestein":
        n, m = plan.n, plan.inner_length
        k = torch.arange(n, dtype=torch.int64)
        # exp(-πi k²/n) = exp(-2πi (k² mod 2n) / 2n): reduce in integers to keep float64 accuracy.
        c = unit_root_powers(k * k, 2 * n)
        conj_chirp = torch.zeros(m, dtype=torch.complex128)
        conj_chirp[:n] = c.conj()
        conj_chirp[m - n + 1 :] = c[1:].conj().flip(0)
        chirp = _planes(c, part, plan.device)
        chirp_filter = _planes(torch.fft.fft(conj_chirp), part, plan.device)
    return TwiddleTables(tuple(stage_dft), tuple(stage_twiddles), chirp, chirp_filter)


@dataclass(frozen=True, eq=False)
class FFTPlan:
    """Everything a transform of length ``n`` needs, built once per (n, dtype, device, norm).

    Create plans with :func:`create_plan` (which caches them); do not construct directly.

    Attributes
    ----------
    n : int
        Transform length.
    dtype : torch.dtype
        complex64 or complex128: the precision of the tables and of the transforms run with it.
    device : torch.device
        Where the tables live and the inputs must be.
    norm : str or None
        Normalisation mode used by :meth:`fft` / :meth:`ifft`.
    algorithm : str
        One of :data:`ALGORITHMS` (see :func:`choose_algorithm`).
    radices : tuple of int
        Stage radices in execution order.
    inner_length : int
        Length of the staged transform: ``n``, or Bluestein's convolution length ``m``.
    kernel_keys : dict
        Compiled-kernel keys per stage and target, filled by the NKI route when it first runs a
        transform of length ``n`` on the plan's device (empty on the PyTorch route). The kernels
        compute on float32 planes whatever the plan's precision, so the dictionary belongs to the
        length and device: it is the drivers' kernel plan's (:mod:`trnfft._drivers.plan`).
    """

    n: int
    dtype: torch.dtype
    device: torch.device
    norm: str | None
    algorithm: str
    radices: tuple[int, ...]
    inner_length: int
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kernel_keys(self) -> dict[Any, Any]:
        """Compiled-kernel keys of the NKI route for this length and device (see the class)."""
        return kernel_plan(self.n, self.device).keys

    @property
    def twiddles(self) -> TwiddleTables:
        """The plan's twiddle tables, built on first access and then reused (never rebuilt)."""
        tables = self.__dict__.get("_twiddles")
        if tables is None:
            with self._lock:
                tables = self.__dict__.get("_twiddles")
                if tables is None:
                    tables = _build_twiddles(self)
                    self.__dict__["_twiddles"] = tables
        return tables

    @property
    def real_twiddles(self) -> torch.Tensor:
        """``exp(-2πi k / n)`` for ``k = 0 … n // 2`` (complex, the plan's precision and device).

        The NKI route transforms a real signal of even length ``n`` as a complex one of length
        ``n / 2`` (even samples as the real plane, odd ones as the imaginary plane); these factors
        separate the two halves' spectra afterwards. Built on first access, then reused.
        """
        table = self.__dict__.get("_real_twiddles")
        if table is None:
            with self._lock:
                table = self.__dict__.get("_real_twiddles")
                if table is None:
                    w = unit_root_powers(torch.arange(self.n // 2 + 1, dtype=torch.int64), self.n)
                    table = w.to(device=self.device, dtype=self.dtype)
                    self.__dict__["_real_twiddles"] = table
        return table

    def _check_input(self, fn: str, x: TensorLike) -> None:
        if not isinstance(x, (torch.Tensor, ComplexTensor)):
            raise TypeError(
                f"FFTPlan.{fn}: x must be a torch.Tensor or ComplexTensor, got {type(x).__name__}"
            )
        if x.dtype.is_complex or x.dtype.is_floating_point:
            precision = _COMPLEX.get(x.dtype)
            if precision is not None and precision != self.dtype:
                raise TypeError(
                    f"FFTPlan.{fn}: x is {str(x.dtype).removeprefix('torch.')} but the plan is "
                    f"{str(self.dtype).removeprefix('torch.')}; create a plan with dtype={x.dtype}"
                )
        if x.device != self.device:
            raise ValueError(f"FFTPlan.{fn}: x is on {x.device} but the plan's tables are on {self.device}")

    def kernel_setup(self, grouping: str = "fused") -> KernelSetup:
        """The NKI route's stage geometry and float32 tables for this plan (built once, then kept).

        Parameters
        ----------
        grouping : {"fused", "plan"}, default "fused"
            ``"plan"`` runs one kernel stage per plan radix (8 or 4 for powers of two);
            ``"fused"`` multiplies consecutive radices into one Tensor Engine stage while the
            product stays at most 128.

        Returns
        -------
        trnfft._drivers.plan.KernelSetup
            Geometry, stationary tables and (Bluestein) pointwise tables on the plan's device,
            shared with the drivers' kernel plan for this length and device.
        """
        return kernel_plan(self.n, self.device).setup(grouping)

    def fft(self, x: TensorLike, dim: int = -1) -> TensorLike:
        """The forward transform of length ``n`` along ``dim`` (as :func:`trnfft.fft`).

        Parameters
        ----------
        x : torch.Tensor or ComplexTensor
            Input of the plan's precision (real or complex) on the plan's device.
        dim : int, default -1
            Dimension to transform; it is padded or cropped to ``n``.

        Returns
        -------
        torch.Tensor or ComplexTensor
            As :func:`trnfft.fft` returns.
        """
        self._check_input("fft", x)
        return transforms.fft(x, self.n, dim, self.norm)

    def ifft(self, x: TensorLike, dim: int = -1) -> TensorLike:
        """The inverse transform of length ``n`` along ``dim`` (as :func:`trnfft.ifft`).

        Parameters
        ----------
        x : torch.Tensor or ComplexTensor
            Input of the plan's precision on the plan's device.
        dim : int, default -1
            Dimension to transform.

        Returns
        -------
        torch.Tensor or ComplexTensor
            As :func:`trnfft.ifft` returns.
        """
        self._check_input("ifft", x)
        return transforms.ifft(x, self.n, dim, self.norm)


# lru_cache may run the builder twice for one key under a race; the lock keeps one plan per key.
_plan_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def _cached_plan(n: int, dtype: torch.dtype, device: torch.device, norm: str | None) -> FFTPlan:
    algorithm, radices, inner = algorithm_for(n)
    return FFTPlan(n, dtype, device, norm, algorithm, radices, inner)


def create_plan(
    n: int,
    *,
    dtype: torch.dtype = torch.complex64,
    device: torch.device | str | None = None,
    norm: str | None = None,
) -> FFTPlan:
    """The cached plan for transforms of length ``n``.

    Parameters
    ----------
    n : int
        Transform length, positive.
    dtype : torch.dtype, default torch.complex64
        Precision: complex64 or float32 (single), complex128 or float64 (double).
    device : torch.device or str, optional
        Device of the tables and inputs (default CPU).
    norm : {None, "backward", "forward", "ortho"}, optional
        Normalisation mode for :meth:`FFTPlan.fft` / :meth:`FFTPlan.ifft`.

    Returns
    -------
    FFTPlan
        The same object for the same arguments (up to 256 plans are kept, least recently used
        first out); see :func:`plan_cache_info`.
    """
    _check_n(n)
    precision = _COMPLEX.get(dtype) if isinstance(dtype, torch.dtype) else None
    if precision is None:
        raise TypeError(
            f"create_plan: dtype must be complex64, complex128, float32 or float64, got {dtype!r}"
        )
    _validate.check_norm("create_plan", norm)
    where = torch.device("cpu") if device is None else torch.device(device)
    with _plan_lock:
        return _cached_plan(n, precision, where, norm)


def plan_cache_info() -> Any:
    """Hits, misses and size of the plan cache (``functools.lru_cache`` statistics)."""
    return _cached_plan.cache_info()


def clear_plan_cache() -> None:
    """Drop every cached plan and its tables, the NKI route's included (later calls build new ones)."""
    with _plan_lock:
        _cached_plan.cache_clear()
    clear_kernel_plans()
