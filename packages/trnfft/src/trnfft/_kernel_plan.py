"""What a plan holds for the NKI route: stage geometry, stationary tables, Bluestein's pointwise tables.

Built once per (plan, stage grouping) by :meth:`trnfft.FFTPlan.kernel_setup` and kept on
the plan, on the plan's device, so that repeated transforms of one size rebuild nothing and the
tables stay resident where the kernels run (on a Neuron device: XLA tensors that never leave it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

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

if TYPE_CHECKING:
    from trnfft.plan import FFTPlan

Planes = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class KernelSetup:
    """The NKI route's constants for one transform length (float32 planes on the plan's device).

    ``geometry`` and ``tables`` describe the staged transform of length ``geometry.n`` (``n``, or
    Bluestein's power-of-two length ``m``). Bluestein plans also carry ``pre`` (the chirp
    ``exp(-πi k²/n)``, zero beyond ``n``), ``post`` (the DFT of the conjugate chirp filter) and
    ``post_inverse`` (``conj(chirp) / m``, zero beyond ``n``), see :mod:`trnfft._nki`.
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


def build_kernel_setup(plan: FFTPlan, grouping: str) -> KernelSetup:
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
