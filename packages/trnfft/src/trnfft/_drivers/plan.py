"""The drivers' kernel plans: per transform length, the algorithm, stage geometry and resident tables.

The NKI route's own cache, below the public :class:`trnfft.FFTPlan` (which reads it rather than
the other way round, so the drivers never import the public modules). :func:`kernel_plan` returns
one :class:`KernelPlan` per (length, device); its :meth:`KernelPlan.setup` is built once per stage
grouping, on the plan's device, so that repeated transforms of one size rebuild nothing and the
tables stay resident where the kernels run (on a Neuron device: XLA tensors that never leave it).

The algorithm rule (which :func:`trnfft.choose_algorithm` publishes):

``dft_gemm``
    ``n <= 128``: one complex GEMM against the ``n x n`` DFT matrix.
``stockham``
    ``n > 128`` a power of two: Stockham autosort stages of radix 8 (radix 4 for what is left).
``mixed_radix``
    ``n > 128`` whose prime factors are all at most 13: stages of radices 8, 4, 2, 3, 5, 7, 11, 13.
``bluestein``
    every other ``n``: a chirp-z convolution of power-of-two length ``m >= 2n - 1``.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from trnfft._pytorch import Planes
from trnfft.kernels.geometry import (
    KernelGeometry,
    OnChip3Geometry,
    OnChipGeometry,
    build_onchip3_tables,
    build_onchip_tables,
    build_stage_tables,
    group_radices,
    kernel_geometry,
    onchip3_geometry,
    onchip_geometry,
)

__all__ = [
    "ALGORITHMS",
    "DFT_GEMM_MAX",
    "KernelPlan",
    "KernelSetup",
    "algorithm_for",
    "bluestein_length",
    "clear_kernel_plans",
    "kernel_plan",
    "unit_root_powers",
]

#: The algorithms a plan can record, in the order the rule tries them.
ALGORITHMS = ("dft_gemm", "stockham", "mixed_radix", "bluestein")
#: Largest length transformed by a single DFT GEMM (the Tensor Engine's contraction rows).
DFT_GEMM_MAX = 128
_MIXED_RADIX_PRIMES = (2, 3, 5, 7, 11, 13)


def _power_of_two_radices(n: int) -> tuple[int, ...]:
    """Radix-8 stages, with radix 4 for what is left (``2**k`` for ``k >= 2``)."""
    k = n.bit_length() - 1
    eights, rest = divmod(k, 3)
    if rest == 1:  # 2**(3a+1) = 8**(a-1) * 4 * 4
        return (8,) * (eights - 1) + (4, 4)
    return (8,) * eights + ((4,) if rest == 2 else ())

def _smooth_radices(n: int) -> tuple[int, ...] | None:
    """Stage radices for a 13-smooth ``n`` (powers of two grouped as 8s and 4s), else None."""
    twos = (n & -n).bit_length() - 1
    rest = n >> twos
    radices: list[int] = []
    for p in _MIXED_RADIX_PRIMES[1:]:
        while rest % p == 0:
            radices.append(p)
            rest //= p
    if rest != 1:
        return None
    if twos >= 2:
        radices = [*_power_of_two_radices(1 << twos), *radices]
    elif twos == 1:
        radices = [2, *radices]
    return tuple(radices)

def bluestein_length(n: int) -> int:
    """The power-of-two convolution length Bluestein's algorithm uses for ``n``: ``m >= 2n - 1``."""
    return 1 << (2 * n - 2).bit_length()

def unit_root_powers(numerator: torch.Tensor, denominator: int) -> torch.Tensor:
    """``exp(-2πi numerator / denominator)`` in float64, reducing the integer exponent first."""
    reduced = torch.remainder(numerator, denominator).to(torch.float64)
    return torch.polar(torch.ones_like(reduced), reduced * (-2.0 * math.pi / denominator))


def algorithm_for(n: int) -> tuple[str, tuple[int, ...], int]:
    """``(algorithm, radices, inner length)`` of the NKI route for a positive length ``n``."""
    if n <= DFT_GEMM_MAX:
        return "dft_gemm", (n,), n
    if n & (n - 1) == 0:
        return "stockham", _power_of_two_radices(n), n
    smooth = _smooth_radices(n)
    if smooth is not None:
        return "mixed_radix", smooth, n
    m = bluestein_length(n)
    return "bluestein", _power_of_two_radices(m), m



@dataclass(frozen=True)
class KernelSetup:
    """The NKI route's constants for one transform length (float32 planes on the plan's device).

    ``geometry`` and ``tables`` describe the staged transform of length ``geometry.n`` (``n``, or
    Bluestein's power-of-two length ``m``). Bluestein plans also carry ``pre`` (the chirp
    ``exp(-πi k²/n)``, zero beyond ``n``), ``post`` (the DFT of the conjugate chirp filter) and
    ``post_inverse`` (``conj(chirp) / m``, zero beyond ``n``), see :mod:`trnfft._drivers.fft`.
    ``onchip`` and ``onchip_tables``: the two-stage on-chip kernel's layout and constants for the
    same staged length, where it applies (:func:`trnfft.kernels.geometry.onchip_geometry`);
    ``onchip3`` and ``onchip3_tables`` the three-stage on-chip kernel's, for longer lengths (not for
    Bluestein's convolutions, whose pointwise tables only the staged and two-stage kernels apply).
    """

    geometry: KernelGeometry
    tables: tuple[torch.Tensor, torch.Tensor]
    pre: Planes | None = None
    post: Planes | None = None
    post_inverse: Planes | None = None
    onchip: OnChipGeometry | None = None
    onchip_tables: tuple[torch.Tensor, ...] = ()
    onchip3: OnChip3Geometry | None = None
    onchip3_tables: tuple[torch.Tensor, ...] = ()


def _planes(values: torch.Tensor, device: torch.device) -> Planes:
    return (
        values.real.to(device=device, dtype=torch.float32).contiguous(),
        values.imag.to(device=device, dtype=torch.float32).contiguous(),
    )


def build_kernel_setup(plan: KernelPlan, grouping: str) -> KernelSetup:
    """Geometry and tables of ``plan`` for the stage kernel (called once per plan and variant)."""
    geometry = kernel_geometry(plan.inner_length, group_radices(plan.radices, grouping))
    tables = tuple(t.to(plan.device) for t in build_stage_tables(geometry))
    onchip = onchip_geometry(plan.inner_length)
    onchip_tables = () if onchip is None else tuple(t.to(plan.device) for t in build_onchip_tables(onchip))
    if plan.algorithm != "bluestein":
        onchip3 = onchip3_geometry(plan.inner_length) if onchip is None else None
        onchip3_tables = (
            () if onchip3 is None else tuple(t.to(plan.device) for t in build_onchip3_tables(onchip3))
        )
        return KernelSetup(
            geometry,
            tables,  # type: ignore[arg-type]
            onchip=onchip,
            onchip_tables=onchip_tables,
            onchip3=onchip3,
            onchip3_tables=onchip3_tables,
        )
    n, m = plan.n, plan.inner_length
    k = torch.arange(n, dtype=torch.int64)
    # exp(-πi k²/n) = exp(-2πi (k² mod 2n) / 2n): exact integer reduction keeps float64 accuracy
    angle = torch.remainder(k * k, 2 * n).to(torch.float64) * (-math.pi / n)
    chirp = torch.polar(torch.ones_like(angle), angle)
    padded = torch.zeros(m, dtype=torch.complex128)
    padded[:n] = chirp
    filt = torch.zeros(m, dtype=torch.complex128)
    filt[:n] = chirp.conj()
    filt[m - n + 1 :] = chirp[1:].conj().flip(0)
    inverse = torch.zeros(m, dtype=torch.complex128)
    inverse[:n] = chirp.conj() / m
    return KernelSetup(
        geometry,
        tables,  # type: ignore[arg-type]
        pre=_planes(padded, plan.device),
        post=_planes(torch.fft.fft(filt), plan.device),
        post_inverse=_planes(inverse, plan.device),
        onchip=onchip,
        onchip_tables=onchip_tables,
    )


@dataclass(frozen=True, eq=False)
class KernelPlan:
    """The NKI route's constants for transforms of length ``n`` on ``device`` (float32 planes).

    ``keys`` collects the compiled-kernel keys launched for this length (one entry per distinct
    launch; :attr:`trnfft.FFTPlan.kernel_keys` shows the same dictionary).
    """

    n: int
    device: torch.device
    algorithm: str
    radices: tuple[int, ...]
    inner_length: int
    keys: dict[Any, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _setups: dict[str, KernelSetup] = field(default_factory=dict, repr=False)

    def setup(self, grouping: str = "fused") -> KernelSetup:
        """Geometry and tables for the stage ``grouping`` (built on first use, then kept)."""
        found = self._setups.get(grouping)
        if found is None:
            with self._lock:
                found = self._setups.get(grouping)
                if found is None:
                    found = self._setups[grouping] = build_kernel_setup(self, grouping)
        return found

    @functools.cached_property
    def real_twiddles(self) -> torch.Tensor:
        """``exp(-2πi k / n)`` for ``k = 0 … n // 2`` (complex64 on the plan's device): the factors
        that separate the half spectra of a real signal transformed as a complex one of ``n / 2``."""
        w = unit_root_powers(torch.arange(self.n // 2 + 1, dtype=torch.int64), self.n)
        return w.to(device=self.device, dtype=torch.complex64)


# lru_cache may run the builder twice for one key under a race; the lock keeps one plan per key.
_plans_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def _cached(n: int, device: torch.device) -> KernelPlan:
    algorithm, radices, inner = algorithm_for(n)
    return KernelPlan(n, device, algorithm, radices, inner)


def kernel_plan(n: int, device: torch.device | str) -> KernelPlan:
    """The cached kernel plan for length ``n`` (positive) on ``device``."""
    with _plans_lock:
        return _cached(n, torch.device(device))


def clear_kernel_plans() -> None:
    """Drop every kernel plan, its tables and its recorded keys."""
    with _plans_lock:
        _cached.cache_clear()
