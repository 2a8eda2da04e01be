"""trnblas's NKI kernels: GEMM (also batched, and with a fused ``alpha·AB + C`` update), SYRK and
the MP2 energy. Plain functions using ``from trncore.lang import nki, nl, nisa`` and the shared
building blocks of :mod:`trncore.kernels`; the host-side drivers that pad, cast and launch them
live in :mod:`trnblas._drivers`.
"""

from trnblas.kernels.gemm import gemm_kernel, gemm_update_kernel
from trnblas.kernels.mp2 import mp2_energy_df_kernel, mp2_energy_kernel
from trnblas.kernels.syrk import syrk_kernel

__all__ = [
    "gemm_kernel",
    "gemm_update_kernel",
    "mp2_energy_df_kernel",
    "mp2_energy_kernel",
    "syrk_kernel",
]
