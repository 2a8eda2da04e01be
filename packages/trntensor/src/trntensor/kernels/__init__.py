"""trntensor's NKI kernels: the AO→MO transform and the DF-MP2 energy.

The einsum GEMM step launches the suite's GEMM kernel, :func:`trncore.kernels.gemm_kernel`.

Each kernel is an ordinary function written against ``from trncore.lang import nl, nisa`` (AWS's
NKI where it is installed, the :mod:`trncore.sim` emulator elsewhere) and is launched through a
trncore operation of :mod:`trntensor._ops`, whose driver (:mod:`trntensor._drivers`) pads and
launches it. The Tensor Engine work of every kernel goes through the shared tiled
matmul block of :mod:`trncore.kernels`; the energy kernel reduces with the shared MP2 energy
block from the same place. Tile sizes are compile-time parameters, and ragged edges are clipped
tiles (sizes from ``min``), so no kernel assumes multiples of 128. Kernel code keeps to the
Python subset the NKI compiler takes (docs/emulator.md, "The Python subset of the NKI
compiler"; no comprehensions, ``raise`` or ``del``).
"""

from trntensor.kernels.ao_to_mo import ao_to_mo_kernel
from trntensor.kernels.mp2_energy import mp2_energy_block_kernel

__all__ = ["ao_to_mo_kernel", "mp2_energy_block_kernel"]
