"""Direct entry points to trnblas's NKI kernels: torch tensors in, torch tensors out.

These run the kernel route whatever :func:`trnblas.set_backend` says — on the CPU emulator when
``TRNBLAS_USE_SIMULATOR=1`` (or ``TRNSCI_USE_SIMULATOR=1``) is set, else on a Neuron device —
through the same trncore dispatch as :func:`trnblas.gemm` and friends. When the kernel cannot run
(no device and no simulator, or inputs it does not take) PyTorch answers with one
``NkiFallbackWarning`` naming the cause; with ``TRNBLAS_REQUIRE_NKI=1`` that is an
``NkiDispatchError`` instead. ``TRNBLAS_FORCE_BACKEND=pytorch`` still forces PyTorch.

Inputs are validated exactly as by the BLAS functions. The kernels compute in float32 from
float32 or bfloat16/float16 inputs. float64 inputs fall back to PyTorch (the reason is in the
warning) unless ``allow_fp32=True`` is passed here, or ``TRNBLAS_ALLOW_FP32_COMPUTE=1`` is set;
then they are rounded to float32 and the result is returned as float64 with float32 accuracy.

The MP2 energy entry points that used to live here are gone: the suite's one MP2 energy is
``trntensor.mp2_energy`` (asking for ``nki_mp2_energy`` raises an ``AttributeError`` that says so).
"""

from __future__ import annotations

import torch

from trnblas import _library, _ops, level3

__all__ = ["nki_batched_gemm", "nki_gemm", "nki_syrk", "nki_trsm"]

# The MP2 energy entry points are gone (trntensor.mp2_energy is the suite's one): asking for one
# raises an AttributeError that names it.
__getattr__ = _library.removed_getattr(__name__)


def nki_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    trans_a: int = 0,
    trans_b: int = 0,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """``alpha · op(a) @ op(b) + beta · c`` on the GEMM kernel (see :func:`trnblas.gemm`).

    Any M, K, N; the transposes are folded into the kernel's loads. Returns a new tensor of the
    inputs' dtype (bfloat16 inputs: float32 accumulation, rounded to bfloat16 at the end).
    """
    with _ops.kernel_route(allow_fp32):
        return level3.gemm(alpha, a, b, beta, c, trans_a, trans_b)


def nki_batched_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    trans_a: int = 0,
    trans_b: int = 0,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """Batched GEMM as ONE kernel launch over the whole batch (see :func:`trnblas.batched_gemm`).

    Batch dimensions broadcast like ``torch.matmul``; an operand whose batch is all ones (a shared
    matrix) is read by every batch entry without being copied.
    """
    with _ops.kernel_route(allow_fp32):
        return level3.batched_gemm(a, b, alpha, beta, c, trans_a, trans_b)


def nki_syrk(
    a: torch.Tensor,
    trans: int = 0,
    lower: int = 0,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """One triangle of ``alpha · op(a) op(a)ᵀ + beta · c`` on the SYRK kernel (see :func:`trnblas.syrk`).

    The kernel reads ``a`` once and computes only the tiles of the selected triangle; when
    ``op(a)ᵀ`` does not fit SBUF the GEMM kernel computes the product instead.
    """
    with _ops.kernel_route(allow_fp32):
        return level3.syrk(alpha, a, beta, c, trans, lower)


def nki_trsm(
    a: torch.Tensor,
    b: torch.Tensor,
    side: int = 0,
    lower: int = 0,
    trans_a: int = 0,
    diag: int = 0,
    alpha: float = 1.0,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """Blocked triangular solve with its panel products on the GEMM kernels (see :func:`trnblas.trsm`).

    Two distinct kernel keys for any number of 128-row panels. Inputs float32 (float64 with the
    opt-in).
    """
    with _ops.kernel_route(allow_fp32):
        return level3.trsm(alpha, a, b, side, lower, trans_a, diag)
