"""trnblas's NKI kernels: SYRK, plus the suite's GEMM kernel (also batched,
and with a fused ``alpha·AB + C`` update), which lives in :mod:`trncore.kernels.gemm` because
trntensor launches it too. Plain functions using ``from trncore.lang import nki, nl, nisa`` and
the shared building blocks of :mod:`trncore.kernels`; the host-side drivers that pad, cast and
launch them live in ``trnblas._ops``. Kernel code keeps to the Python subset the NKI compiler
takes (docs/emulator.md, "The Python subset of the NKI compiler"; no comprehensions, ``raise``
or ``del``).
"""

from trnblas._library import removed_getattr
from trnblas.kernels.syrk import syrk_kernel
from trncore.kernels.gemm import gemm_kernel, gemm_update_kernel

__all__ = [
    "gemm_kernel",
    "gemm_update_kernel",
    "syrk_kernel",
]

# The MP2 energy kernels are gone (trntensor's mp2_energy_block_kernel is the suite's one).
__getattr__ = removed_getattr(__name__)
