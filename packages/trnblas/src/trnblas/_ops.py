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

from trnblas import _drivers, _pytorch
from trnblas._drivers import POLICY as _POLICY
from trnblas._library import library
from trnblas.kernels import gemm_kernel, gemm_update_kernel, syrk_kernel
from trncore.dispatch import Operation
from trncore.kernels.complex_gemm import complex_matmul_kernel
from trncore.precision import fp32_compute

__all__ = [
    "batched_gemm_op",
    "call",
    "gemm_op",
    "hemm_op",
    "her2k_op",
    "herk_op",
    "kernel_route",
    "symm_op",
    "syr2k_op",
    "syrk_op",
    "trmm_op",
    "trsm_op",
]

#: Below this many flops, backend ``auto`` keeps PyTorch (dispatch and transfer dominate).
_MIN_FLOPS = 2 * 256**3


# ----------------------------------------------------------------------------- routing


# Set by trnblas.nki for the duration of one call: run the kernel route.
_kernel_request: ContextVar[bool] = ContextVar("trnblas_kernel_request", default=False)


def call(operation: Any, *args: Any) -> Any:
    """Call ``operation`` as dispatch routes it, or on its kernel route inside :func:`kernel_route`."""
    if _kernel_request.get():
        return operation.call_kernel(*args)
    return operation(*args)


@contextlib.contextmanager
def kernel_route(allow_fp32: bool = False) -> Iterator[None]:
    """Within the block (this thread/task only), operations take their kernel route; with
    ``allow_fp32`` float64 inputs compute in float32 (trncore's one opt-in scope,
    :func:`trncore.precision.fp32_compute`)."""
    token = _kernel_request.set(True)
    try:
        with fp32_compute(allow_fp32):
            yield
    finally:
        _kernel_request.reset(token)


# ----------------------------------------------------------------------------- GEMM


gemm_op: Operation = library.operation(
    "gemm",
    reference=_pytorch.gemm,
    kernel=gemm_kernel,
    driver=_drivers.gemm_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: 2 * a.shape[0] * a.shape[1] * (b.shape[1] if b.dim() > 1 else 1),
)


# ----------------------------------------------------------------------------- batched GEMM


batched_gemm_op: Operation = library.operation(
    "batched_gemm",
    reference=_pytorch.batched_gemm,
    kernel=gemm_kernel,
    driver=_drivers.batched_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: 2 * a.numel() * b.shape[-1],
)


# ----------------------------------------------------------------------------- SYRK


syrk_op: Operation = library.operation(
    "syrk",
    reference=_pytorch.syrk,
    kernel=syrk_kernel,
    driver=_drivers.syrk_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, beta, c, trans, *args, **kw: a.numel() * a.shape[1 if trans else 0],
)


# ----------------------------------------------------------------------------- TRSM


trsm_op: Operation = library.operation(
    "trsm",
    reference=_pytorch.trsm,
    kernel=gemm_update_kernel,
    driver=_drivers.trsm_driver,
    policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, *args, **kw: a.shape[0] * b.numel(),
)


# ----------------------------------------------------------------------------- GEMM reductions


symm_op: Operation = library.operation(
    "symm", reference=_pytorch.symm, kernel=gemm_kernel, driver=_drivers.symm_driver, policy=_POLICY,
    min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: 2 * a.shape[0] * b.numel(),
)


trmm_op: Operation = library.operation(
    "trmm", reference=_pytorch.trmm, kernel=gemm_kernel, driver=_drivers.trmm_driver, policy=_POLICY,
    min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: a.shape[0] * b.numel(),
)


syr2k_op: Operation = library.operation(
    "syr2k", reference=_pytorch.syr2k, kernel=gemm_kernel, driver=_drivers.syr2k_driver, policy=_POLICY,
    min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, beta, c, trans, *args, **kw: 2 * a.numel() * a.shape[1 if trans else 0],
)


# ----------------------------------------------------------------------------- Hermitian routines
#
# All three reduce to the GEMM operation's driver (the complex kernel for complex data), as symm
# and syr2k do. BLAS leaves the imaginary parts of a Hermitian result's diagonal at zero; so do we.


hemm_op: Operation = library.operation(
    "hemm", reference=_pytorch.hemm, kernel=complex_matmul_kernel, driver=_drivers.hemm_driver,
    policy=_POLICY, min_work=_MIN_FLOPS, work=lambda alpha, a, b, *args, **kw: 8 * a.shape[0] * b.numel(),
)


herk_op: Operation = library.operation(
    "herk", reference=_pytorch.herk, kernel=complex_matmul_kernel, driver=_drivers.herk_driver,
    policy=_POLICY, min_work=_MIN_FLOPS,
    work=lambda alpha, a, beta, c, trans, *args, **kw: 8 * a.numel() * a.shape[1 if trans else 0],
)


her2k_op: Operation = library.operation(
    "her2k", reference=_pytorch.her2k, kernel=complex_matmul_kernel, driver=_drivers.her2k_driver,
    policy=_POLICY, min_work=_MIN_FLOPS,
    work=lambda alpha, a, b, beta, c, trans, *args, **kw: 16 * a.numel() * a.shape[1 if trans else 0],
)
