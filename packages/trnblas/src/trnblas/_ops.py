"""trnblas's operation table: each kernel-backed operation declared once with trncore dispatch.

Each operation ties a PyTorch reference (from :mod:`trnblas._pytorch`, which also defines the call
signature) to an NKI kernel (:mod:`trnblas.kernels`, :mod:`trncore.kernels`) through its driver
(:mod:`trnblas._drivers`), with its padding policy and the ``auto`` size threshold. The public
modules (:mod:`trnblas.level3`, :mod:`trnblas.nki`) call the operations through :func:`call`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import torch

from trnblas import _drivers, _pytorch
from trnblas._drivers import POLICY as _POLICY
from trnblas._drivers import triangle_product
from trnblas._flags import hermitian_from_triangle, symmetric_from_triangle, triangle
from trnblas._library import library
from trnblas.kernels import (
    gemm_kernel,
    gemm_update_kernel,
    mp2_energy_df_kernel,
    mp2_energy_kernel,
    syrk_kernel,
)
from trncore.dispatch import Operation
from trncore.kernels.complex_gemm import complex_matmul_kernel

__all__ = [
    "batched_gemm_op",
    "call",
    "gemm_op",
    "hemm_op",
    "her2k_op",
    "herk_op",
    "kernel_route",
    "mp2_energy_df_op",
    "mp2_energy_op",
    "symm_op",
    "syr2k_op",
    "syrk_op",
    "trmm_op",
    "trsm_op",
]

#: Below this many flops, backend ``auto`` keeps PyTorch (dispatch and transfer dominate).
_MIN_FLOPS = 2 * 256**3


# ----------------------------------------------------------------------------- routing


# Set by trnblas.nki for the duration of one call: run the kernel route, with this fp32 opt-in.
_kernel_request: ContextVar[bool | None] = ContextVar("trnblas_kernel_request", default=None)


def call(operation: Any, *args: Any) -> Any:
    """Call ``operation`` as dispatch routes it, or on its kernel route inside :func:`kernel_route`."""
    request = _kernel_request.get()
    if request is None:
        return operation(*args)
    return operation.call_kernel(*args, allow_fp32=request)


@contextlib.contextmanager
def kernel_route(allow_fp32: bool) -> Iterator[None]:
    """Within the block (this thread/task only), operations take their kernel route."""
    token = _kernel_request.set(bool(allow_fp32))
    try:
        yield
    finally:
        _kernel_request.reset(token)


# ----------------------------------------------------------------------------- GEMM


def _gemm_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None,
    trans_a: int, trans_b: int, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch GEMM (``allow_fp32`` only concerns the kernel route)."""
    return _pytorch.gemm(alpha, a, b, beta, c, trans_a, trans_b)


gemm_op: Operation = library.operation(
    "gemm",
    reference=_gemm_reference,
    kernel=gemm_kernel,
    driver=_drivers.gemm_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: 2 * a.shape[0] * a.shape[1] * (b.shape[1] if b.dim() > 1 else 1),
)


# ----------------------------------------------------------------------------- batched GEMM


def _batched_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None,
    trans_a: int, trans_b: int, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch batched GEMM (``torch.matmul`` broadcasting)."""
    return _pytorch.batched_gemm(alpha, a, b, beta, c, trans_a, trans_b)


batched_gemm_op: Operation = library.operation(
    "batched_gemm",
    reference=_batched_reference,
    kernel=gemm_kernel,
    driver=_drivers.batched_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: 2 * a.numel() * b.shape[-1],
)


# ----------------------------------------------------------------------------- SYRK


def _syrk_reference(
    alpha: float, a: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int, lower: bool,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch SYRK (one triangle; the other is ``c``'s)."""
    return _pytorch.syrk(alpha, a, beta, c, trans, lower)


syrk_op: Operation = library.operation(
    "syrk",
    reference=_syrk_reference,
    kernel=syrk_kernel,
    driver=_drivers.syrk_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, beta, c, trans, *args, **kw: a.numel() * a.shape[1 if trans else 0],
)


# ----------------------------------------------------------------------------- TRSM


def _trsm_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, right: bool, lower: bool, trans_a: int,
    unit_diagonal: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch TRSM (``torch.linalg.solve_triangular``)."""
    return _pytorch.trsm(alpha, a, b, right, lower, trans_a, unit_diagonal)


trsm_op: Operation = library.operation(
    "trsm",
    reference=_trsm_reference,
    kernel=gemm_update_kernel,
    driver=_drivers.trsm_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: a.shape[0] * b.numel(),
)


# ----------------------------------------------------------------------------- MP2 energy


def _mp2_reference(
    t_flat: torch.Tensor, eps_occ_chunk: torch.Tensor, eps_occ_full: torch.Tensor, eps_vir: torch.Tensor,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch closed-shell MP2 energy of a chunk of amplitudes."""
    return _pytorch.mp2_energy(t_flat, eps_occ_chunk, eps_occ_full, eps_vir)


mp2_energy_op: Operation = library.operation(
    "mp2_energy",
    reference=_mp2_reference,
    kernel=mp2_energy_kernel,
    driver=_drivers.mp2_driver,
    min_work=0,
)


def _mp2_df_reference(
    b_chunk: torch.Tensor, b_full: torch.Tensor, eps_occ_chunk: torch.Tensor, eps_occ_full: torch.Tensor,
    eps_vir: torch.Tensor, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch DF-MP2 energy: amplitudes ``b_chunk @ b_fullᵀ``, then the energy reduction."""
    return _pytorch.mp2_energy(b_chunk @ b_full.mT, eps_occ_chunk, eps_occ_full, eps_vir)


mp2_energy_df_op: Operation = library.operation(
    "mp2_energy_df",
    reference=_mp2_df_reference,
    kernel=mp2_energy_df_kernel,
    driver=_drivers.mp2_df_driver,
    min_work=0,
)


# ----------------------------------------------------------------------------- GEMM reductions


def _symm_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None, right: bool,
    lower: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch SYMM: the symmetric matrix built from one triangle, then one GEMM."""
    return triangle_product(symmetric_from_triangle, _pytorch.gemm, alpha, a, b, beta, c, right, lower)


symm_op: Operation = library.operation(
    "symm", reference=_symm_reference, kernel=gemm_kernel, driver=_drivers.symm_driver, policy=_POLICY,
    min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: 2 * a.shape[0] * b.numel(),
)


def _trmm_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, right: bool, lower: bool, trans_a: int,
    unit_diagonal: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch TRMM: the selected triangle (zeros elsewhere) times ``b``."""
    tri = triangle(a, lower, unit_diagonal)
    if right:
        return _pytorch.gemm(alpha, b, tri, 0.0, None, 0, trans_a)
    return _pytorch.gemm(alpha, tri, b, 0.0, None, trans_a, 0)


trmm_op: Operation = library.operation(
    "trmm", reference=_trmm_reference, kernel=gemm_kernel, driver=_drivers.trmm_driver, policy=_POLICY,
    min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: a.shape[0] * b.numel(),
)


def _syr2k_reference(
    alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int,
    lower: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch SYR2K."""
    return _pytorch.syr2k(alpha, a, b, beta, c, trans, lower)


syr2k_op: Operation = library.operation(
    "syr2k", reference=_syr2k_reference, kernel=gemm_kernel, driver=_drivers.syr2k_driver, policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, beta, c, trans, *args, **kw: 2 * a.numel() * a.shape[1 if trans else 0],
)


# ----------------------------------------------------------------------------- Hermitian routines
#
# All three reduce to the GEMM operation's driver (the complex kernel for complex data), as symm
# and syr2k do. BLAS leaves the imaginary parts of a Hermitian result's diagonal at zero; so do we.


def _hemm_reference(
    alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: complex, c: torch.Tensor | None, right: bool,
    lower: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch HEMM: the Hermitian matrix built from one triangle, then one GEMM."""
    return triangle_product(hermitian_from_triangle, _pytorch.gemm, alpha, a, b, beta, c, right, lower)


hemm_op: Operation = library.operation(
    "hemm", reference=_hemm_reference, kernel=complex_matmul_kernel, driver=_drivers.hemm_driver,
    policy=_POLICY, min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: 8 * a.shape[0] * b.numel(),
)


def _herk_reference(
    alpha: float, a: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int, lower: bool,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch HERK (one triangle, real diagonal; the other triangle is ``c``'s)."""
    return _pytorch.herk(alpha, a, beta, c, trans, lower)


herk_op: Operation = library.operation(
    "herk", reference=_herk_reference, kernel=complex_matmul_kernel, driver=_drivers.herk_driver,
    policy=_POLICY, min_work=_MIN_FLOPS,
    work=lambda alpha, a, beta, c, trans, *args, **kw: 8 * a.numel() * a.shape[1 if trans else 0],
)


def _her2k_reference(
    alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: float, c: torch.Tensor | None, trans: int,
    lower: bool, allow_fp32: bool = False,
) -> torch.Tensor:
    """The PyTorch HER2K."""
    return _pytorch.her2k(alpha, a, b, beta, c, trans, lower)


her2k_op: Operation = library.operation(
    "her2k", reference=_her2k_reference, kernel=complex_matmul_kernel, driver=_drivers.her2k_driver,
    policy=_POLICY, min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, beta, c, trans, *args, **kw: 16 * a.numel() * a.shape[1 if trans else 0],
)
