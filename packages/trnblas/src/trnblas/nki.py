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
"""

from __future__ import annotations

import torch

from trnblas import _ops, level3
from trnblas import _validate as v

__all__ = ["nki_batched_gemm", "nki_gemm", "nki_mp2_energy", "nki_mp2_energy_df", "nki_syrk", "nki_trsm"]


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


def _check_energies(eps_occ_chunk: object, eps_occ_full: object, eps_vir: object, like: torch.Tensor) -> None:
    named = (("eps_occ_chunk", eps_occ_chunk), ("eps_occ_full", eps_occ_full), ("eps_vir", eps_vir))
    for name, value in named:
        e = v.tensor(name, value, 1, dtypes=(torch.float32, torch.float64))
        if e.device != like.device:
            raise ValueError(
                f"{name} must be on the same device as the amplitudes ({like.device}), got {e.device}"
            )


def nki_mp2_energy(
    T_flat: torch.Tensor,
    eps_occ_chunk: torch.Tensor,
    eps_occ_full: torch.Tensor,
    eps_vir: torch.Tensor,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """Closed-shell MP2 energy ``Σ T (2T − Tᵀ) / Δ`` of a chunk of amplitudes, on chip.

    Parameters
    ----------
    T_flat : torch.Tensor
        ``(ni·nvir, nocc·nvir)`` with ``T[i, j, a, b] = T_flat[i·nvir + a, j·nvir + b]``; float32
        or bfloat16 (float64 with the opt-in).
    eps_occ_chunk, eps_occ_full, eps_vir : torch.Tensor
        Orbital energies: the chunk's ``ni`` occupied orbitals, all ``nocc`` occupied ones and the
        ``nvir`` virtual ones (1-D, float32 or float64). Any ``nvir``, primes included.
    allow_fp32 : bool, optional
        Compute float64 inputs in float32 instead of falling back to PyTorch.

    Returns
    -------
    torch.Tensor
        A 0-dim tensor: float32, or float64 when any input is float64 (computed in float32).
        ``Tᵀ`` swaps ``a`` and ``b``; ``Δ = εi + εj − εa − εb``.
    """
    t = v.tensor("T_flat", T_flat, 2, dtypes=(torch.float32, torch.float64, torch.bfloat16, torch.float16))
    _check_energies(eps_occ_chunk, eps_occ_full, eps_vir, t)
    ni, nocc, nvir = eps_occ_chunk.shape[0], eps_occ_full.shape[0], eps_vir.shape[0]
    expected = (ni * nvir, nocc * nvir)
    if tuple(t.shape) != expected:
        raise ValueError(
            f"T_flat must have shape (len(eps_occ_chunk)·nvir, len(eps_occ_full)·nvir) = {expected}, "
            f"got {tuple(t.shape)}"
        )
    with _ops.kernel_route(allow_fp32):
        return _ops.call(_ops.mp2_energy_op, t, eps_occ_chunk, eps_occ_full, eps_vir)


def nki_mp2_energy_df(
    b_chunk: torch.Tensor,
    b_full: torch.Tensor,
    eps_occ_chunk: torch.Tensor,
    eps_occ_full: torch.Tensor,
    eps_vir: torch.Tensor,
    allow_fp32: bool = False,
) -> torch.Tensor:
    """The MP2 energy with amplitudes formed in PSUM from DF factors, never written to HBM.

    ``T[i, j, a, b] = Σ_Q b_chunk[i·nvir + a, Q] · b_full[j·nvir + b, Q]`` — the amplitudes
    :func:`nki_mp2_energy` takes as ``T_flat = b_chunk @ b_fullᵀ`` — reduced as there.

    Parameters
    ----------
    b_chunk : torch.Tensor
        ``(ni·nvir, naux)`` DF factors of the chunk's occupied orbitals (float32 or bfloat16).
    b_full : torch.Tensor
        ``(nocc·nvir, naux)`` DF factors of all occupied orbitals, same dtype.
    eps_occ_chunk, eps_occ_full, eps_vir, allow_fp32
        As in :func:`nki_mp2_energy`.

    Returns
    -------
    torch.Tensor
        A 0-dim tensor, as :func:`nki_mp2_energy`.
    """
    dtypes = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    bc = v.tensor("b_chunk", b_chunk, 2, dtypes=dtypes)
    bf = v.tensor("b_full", b_full, 2, dtypes=dtypes)
    v.same_kind(b_chunk=bc, b_full=bf)
    _check_energies(eps_occ_chunk, eps_occ_full, eps_vir, bc)
    ni, nocc, nvir = eps_occ_chunk.shape[0], eps_occ_full.shape[0], eps_vir.shape[0]
    if tuple(bc.shape) != (ni * nvir, bf.shape[1]):
        raise ValueError(
            f"b_chunk must have shape (len(eps_occ_chunk)·nvir, naux) = {(ni * nvir, bf.shape[1])}, "
            f"got {tuple(bc.shape)}"
        )
    if bf.shape[0] != nocc * nvir:
        raise ValueError(
            f"b_full must have len(eps_occ_full)·nvir = {nocc * nvir} rows, got shape {tuple(bf.shape)}"
        )
    with _ops.kernel_route(allow_fp32):
        return _ops.call(_ops.mp2_energy_df_op, bc, bf, eps_occ_chunk, eps_occ_full, eps_vir)
