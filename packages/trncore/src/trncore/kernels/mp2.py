"""The closed-shell MP2 energy of amplitude tiles, reduced on chip.

For amplitudes ``T[i, j, a, b]`` the closed-shell MP2 correlation energy is
``Σ T[i,j,a,b] · (2 T[i,j,a,b] − T[i,j,b,a]) / (εi + εj − εa − εb)``. A kernel lays a tile of it out
with ``a`` on partitions and ``(j, b)`` along the free dim, brings the swapped amplitudes
``T[i,j,b,a]`` into the same layout (a transposed load, or a second matmul), and calls
:func:`mp2_energy_tile` per tile; :func:`partition_sum` finishes the sum across partitions on the
Tensor Engine. trntensor's fused DF-MP2 energy kernel
(``trntensor.kernels.mp2_energy_block_kernel``) is built on these; the formula lives here, once.
"""

from __future__ import annotations

from typing import Any

from trncore.lang import nisa, nl

__all__ = ["mp2_energy_tile", "partition_sum"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"


def mp2_energy_tile(acc: Any, t: Any, t_swap: Any, vir_row: Any, shift: Any, scratch: Any) -> None:
    """``acc[p, 0] += Σ_f t[p,f] · (2 t[p,f] − t_swap[p,f]) / (shift[p, 0] + vir_row[p,f])``.

    Contract:

    * ``t`` (SBUF or PSUM) and ``t_swap`` (SBUF — a VectorE op may not read two PSUM operands,
      AWS NKI docs, nki.isa.tensor_tensor, NKI 0.3.0) hold ``T[i,j,a,b]`` and ``T[i,j,b,a]`` for one
      ``i`` with ``a`` on the ``P ≤ 128`` partitions and the same free layout (e.g. ``(j, b)``
      flattened, ``F`` elements).
    * ``vir_row`` (SBUF, float32, ``(P, F)``) holds the part of the denominator that varies along
      the free dim, e.g. ``εj − εb``; ``shift`` (SBUF float32 ``(P, 1)``) the per-partition part,
      e.g. ``εi − εa``. The denominator is their sum, ``Δ = εi + εj − εa − εb``.
    * ``scratch`` is an SBUF float32 tile of shape ``(P, 2, F)`` (overwritten); ``acc`` an SBUF
      float32 ``(P, 1)`` running sum that this adds to (initialise it with ``memset(0.0)``).
    * Every instruction works on ``F`` elements per partition: keep ``F`` ≤ 64K (the per-
      instruction limit of VectorE/ScalarE, AWS Trainium/Inferentia2 Architecture Guide for NKI (NKI
      0.3.0)) and larger than ~512 to amortise the fixed instruction cost. Arithmetic is float32
      whatever the dtype of ``t`` (AWS NKI API Common Fields (NKI 0.3.0)).

    Engines: the reciprocal and the final sum run on ScalarE (``activation`` without a bias, which
    trn1 supports for ``reciprocal``, AWS NKI API Common Fields (NKI 0.3.0)), the rest on VectorE, so
    the two engines share the work.
    """
    den = scratch[:, 0, :]
    num = scratch[:, 1, :]
    part = nl.ndarray((acc.shape[0], 1), nl.float32, buffer=nl.sbuf)
    # Δ = shift + vir_row (per-partition scalar broadcast along the free dim, AWS NKI docs,
    # nki.isa.tensor_scalar, NKI 0.3.0).
    nisa.tensor_scalar(dst=den, data=vir_row, op0=nl.add, operand0=shift)
    # 1/Δ on ScalarE.
    nisa.activation(dst=den, op=nl.reciprocal, data=den)
    # 2T − Tswap, then times T, then times 1/Δ.
    nisa.scalar_tensor_tensor(
        dst=num, data=t, op0=nl.multiply, operand0=2.0, op1=nl.subtract, operand1=t_swap
    )
    nisa.tensor_tensor(dst=num, data1=num, data2=t, op=nl.multiply)
    # The last product and its row sum in one ScalarE pass: copy(num * 1) with the row-sum
    # registers would need a tile scale; multiply on VectorE and reduce on ScalarE instead.
    nisa.tensor_tensor(dst=num, data1=num, data2=den, op=nl.multiply)
    nisa.activation_reduce(dst=num, op=nl.copy, data=num, reduce_op=nl.add, reduce_res=part)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)


def partition_sum(dst: Any, acc: Any, ones: Any) -> None:
    """``dst[0, f] = Σ_p acc[p, f]``: a sum across partitions as a matmul with a ones vector.

    Contract: ``acc`` is an SBUF float32 ``(P, F)`` tile (``P ≤ 128``, ``F ≤ 512``), ``ones`` an SBUF
    float32 ``(≥P, 1)`` tile of ones, ``dst`` a float32 PSUM ``(1, F)`` tile (nki.isa.nc_matmul, NKI
    0.3.0: contraction over partitions; stationary ``ones[K=P, M=1]``, moving ``acc[K=P, N=F]``).
    Cross-partition reduction belongs to the Tensor Engine (AWS Trainium/Inferentia2 Architecture Guide
    for NKI (NKI 0.3.0)); VectorE reduces only along the free dim.
    """
    p = acc.shape[0]
    nisa.nc_matmul(dst=dst, stationary=ones[0:p, 0:1], moving=acc, is_stationary_onezero=True,
                   accumulate=False)
