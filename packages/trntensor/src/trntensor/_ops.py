"""trntensor's operation table: each kernel-backed operation declared once with trncore dispatch.

Each operation ties its PyTorch reference (:mod:`trntensor._pytorch`, which defines the call
signature) to its NKI kernel (:mod:`trntensor.kernels`, :mod:`trncore.kernels`) through its driver
(:mod:`trntensor._drivers`). The public modules call these names: :mod:`trntensor.contraction`
(every GEMM-shaped einsum step) and :mod:`trntensor.df_mp2`.
"""

from __future__ import annotations

from trncore.dispatch import Operation
from trncore.kernels import gemm_kernel
from trntensor import _drivers, _pytorch
from trntensor._library import library
from trntensor.kernels import ao_to_mo_kernel, mp2_energy_block_kernel

__all__ = ["ao_to_mo", "contract_gemm", "mp2_energy"]

contract_gemm: Operation = library.operation(
    "contract_gemm",
    reference=_pytorch.gemm,
    kernel=gemm_kernel,
    driver=_drivers.gemm_driver,
    policy=_drivers.GEMM_POLICY,
    work=_drivers.gemm_work,
    min_work=2 * 128**3,
)
"""Dispatched ``a @ b`` of one einsum step (2-D or batched 3-D)."""

ao_to_mo: Operation = library.operation(
    "ao_to_mo",
    reference=_pytorch.ao_to_mo,
    kernel=ao_to_mo_kernel,
    driver=_drivers.ao_to_mo_driver,
    policy=_drivers.AO_TO_MO_POLICY,
    work=_drivers.ao_to_mo_work,
    min_work=2 * 128**3,
)
"""Dispatched AO→MO transform (validated inputs of one dtype; either integral layout)."""

mp2_energy: Operation = library.operation(
    "mp2_energy",
    reference=_pytorch.mp2_energy,
    kernel=mp2_energy_block_kernel,
    driver=_drivers.mp2_driver,
    work=_drivers.mp2_work,
    min_work=2 * 128**3,
)
"""Dispatched closed-shell DF-MP2 energy of validated ``b`` and ``d = ε_i − ε_a``."""
