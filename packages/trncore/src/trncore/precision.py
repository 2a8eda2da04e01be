"""Which dtype a kernel computes in, and the one opt-in that lets float64 data run in float32.

The Tensor Engine multiplies bfloat16, float16 and float32 operands and accumulates in float32
(AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0)); there is no float64 anywhere on a NeuronCore. A float64
input is therefore never computed in float32 behind the caller's back: the kernel route declines it with
the reason, and dispatch runs the float64 PyTorch reference with one ``NkiFallbackWarning``. A caller
who accepts float32 accuracy opts in, for every library with ``TRNSCI_ALLOW_FP32_COMPUTE=1``, for one
library with ``<LIB>_ALLOW_FP32_COMPUTE=1`` (read at each call, like every steering variable), for a
block of code with ``with trncore.precision.fp32_compute(): ...`` (this thread or task only), or per
call where an entry point offers ``allow_fp32=True`` (it opens that scope). Then float64 inputs are
rounded to float32, the kernel runs, and results come back as float64 carrying float32 accuracy. Every
library applies this one policy through :func:`kernel_dtype`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from trncore import platform

try:
    import torch
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

from trncore import config
from trncore.dispatch import KernelUnsupported

__all__ = ["ENV_SUFFIX", "KERNEL_DTYPES", "fp32_compute", "fp32_compute_allowed", "kernel_dtype"]

#: ``<LIB>_ALLOW_FP32_COMPUTE`` / ``TRNSCI_ALLOW_FP32_COMPUTE``.
ENV_SUFFIX = "ALLOW_FP32_COMPUTE"

#: Input dtypes the Tensor Engine takes as they are (nki.isa.nc_matmul, NKI 0.3.0); kernels may accept
#: fewer.
KERNEL_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


_SCOPE: ContextVar[bool] = ContextVar("trncore_fp32_compute", default=False)


@contextlib.contextmanager
def fp32_compute(enabled: bool = True) -> Iterator[None]:
    """Inside the block (this thread or task), float64 inputs may compute in float32, in every library.

    ``enabled=False`` adds nothing (an enclosing scope or the environment still applies), so an
    entry point can open the scope with its ``allow_fp32`` argument unconditionally.
    """
    token = _SCOPE.set(bool(enabled) or _SCOPE.get())
    try:
        yield
    finally:
        _SCOPE.reset(token)


def fp32_compute_allowed(library: str, explicit: bool = False) -> bool:
    """Whether ``library`` may compute float64 data in float32: ``explicit``, an
    :func:`fp32_compute` scope, or the environment."""
    return bool(explicit) or _SCOPE.get() or config.read_bool(library, ENV_SUFFIX)


def kernel_dtype(
    library: str,
    dtype: torch.dtype,
    *,
    operation: str,
    dtypes: tuple[torch.dtype, ...] = KERNEL_DTYPES,
    allow_fp32: bool = False,
) -> torch.dtype:
    """The dtype ``library``'s kernel for ``operation`` computes ``dtype`` inputs in.

    Returns ``dtype`` itself when the kernel takes it, float32 for float64 under the opt-in, and
    otherwise raises :class:`~trncore.dispatch.KernelUnsupported` with the reason (so the call runs
    the reference, with the reason in the fallback warning or the ``REQUIRE_NKI`` error).
    """
    if dtype in dtypes:
        return dtype
    allowed = ", ".join(_name(d) for d in dtypes)
    if dtype == torch.float64:
        if fp32_compute_allowed(library, allow_fp32):
            return torch.float32
        raise KernelUnsupported(
            f"{operation} kernel computes in {allowed} and got float64, which stays float64 on the "
            f"PyTorch reference (float64 stays float64 unless float32 compute is opted into: "
            f"{library.upper()}_{ENV_SUFFIX}=1, TRNSCI_{ENV_SUFFIX}=1 or trncore.precision.fp32_compute())"
        )
    raise KernelUnsupported(f"{operation} kernel takes {allowed} (float64 with the float32 opt-in), "
                            f"got {_name(dtype)}")
