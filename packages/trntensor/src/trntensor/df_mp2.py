"""DF-MP2 building blocks: AO→MO transform of 3-index integrals, the fitting metric, the energy.

Density fitting writes the MO integrals as ``(ia|jb) ≈ Σ_P B[i,a,P] B[j,b,P]``; the closed-shell
MP2 correlation energy is then

    E = Σ_{ijab} T_ij^ab (2 T_ij^ab − T_ij^ba) / (ε_i + ε_j − ε_a − ε_b),   T_ij^ab = Σ_P B_iaP B_jbP.

Both steps are trncore operations (``trntensor.ao_to_mo`` and ``trntensor.mp2_energy``): the public
functions validate their inputs and call them. On the PyTorch route they run the reference
implementations of :mod:`trntensor._pytorch`; on the NKI route (a Neuron device, or the emulator
with ``TRNTENSOR_USE_SIMULATOR=1``) the drivers in :mod:`trntensor._drivers` launch the
kernels of :mod:`trntensor.kernels`, which compute in float32. float64 inputs stay on the float64
reference with a fallback warning unless float32 compute is opted into
(:mod:`trntensor._precision`).
"""

from __future__ import annotations

import torch

from trntensor import _ops
from trntensor._checks import check_int, check_same_device, check_tensor, floating_dtype

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "ao_to_mo_transform",
    "apply_metric",
    "metric_inverse_sqrt",
    "mp2_energy",
]

#: Bytes the energy's intermediates may use at once: a quarter of this 24 GiB machine, leaving
#: room for B, the caller's own arrays and other processes. Pass ``memory_budget=`` to change it.
DEFAULT_MEMORY_BUDGET = 6 * 2**30


def _common_dtype(tensors: list[torch.Tensor], names: list[str]) -> torch.dtype:
    dtype = floating_dtype(tensors[0], names[0])
    for t, n in zip(tensors[1:], names[1:]):
        dtype = torch.promote_types(dtype, floating_dtype(t, n))
    return dtype


def ao_to_mo_transform(
    eri3c: torch.Tensor,
    C_occ: torch.Tensor,
    C_vir: torch.Tensor,
    *,
    metric: torch.Tensor | None = None,
) -> torch.Tensor:
    """Transform AO 3-index integrals to the occupied–virtual MO block ``B[i, a, P]``.

    Parameters
    ----------
    eri3c : torch.Tensor
        Either dense ``(nbasis, nbasis, naux)`` integrals ``(μν|P)``, or PySCF's packed layout
        ``(naux, nbasis·(nbasis+1)/2)`` of lower triangles (``df.DF(...)._cderi``, or
        ``df.incore.aux_e2(..., aosym="s2ij").T``). The layout is told apart by the rank.
    C_occ : torch.Tensor
        Occupied MO coefficients, ``(nbasis, nocc)``.
    C_vir : torch.Tensor
        Virtual MO coefficients, ``(nbasis, nvir)``.
    metric : torch.Tensor, optional
        The Coulomb metric ``J[P,Q] = (P|Q)``; when given, ``J^{-1/2}`` is applied to the result
        (:func:`apply_metric`). Leave it out for integrals that are already fitted, such as
        PySCF's Cholesky-decomposed ``_cderi``.

    Returns
    -------
    torch.Tensor
        ``B`` of shape ``(nocc, nvir, naux)`` in the promoted dtype of the inputs, on their device.
    """
    eri3c = check_tensor(eri3c, "eri3c")
    C_occ = check_tensor(C_occ, "C_occ", ndim=2)
    C_vir = check_tensor(C_vir, "C_vir", ndim=2)
    names = ["eri3c", "C_occ", "C_vir"]
    check_same_device([eri3c, C_occ, C_vir], names)
    dtype = _common_dtype([eri3c, C_occ, C_vir], names)
    n = C_occ.shape[0]
    if C_vir.shape[0] != n:
        raise ValueError(f"C_occ has {n} basis functions (rows) but C_vir has {C_vir.shape[0]}")
    c_occ, c_vir = C_occ.to(dtype), C_vir.to(dtype)
    if eri3c.dim() == 3:
        if tuple(eri3c.shape[:2]) != (n, n):
            raise ValueError(
                f"eri3c has shape {tuple(eri3c.shape)}; expected ({n}, {n}, naux) for {n} basis functions"
            )
    elif eri3c.dim() == 2:
        npair = n * (n + 1) // 2
        if eri3c.shape[1] != npair:
            raise ValueError(
                f"eri3c has shape {tuple(eri3c.shape)}; PySCF's packed layout for {n} basis functions "
                f"is (naux, {npair})"
            )
    else:
        raise ValueError(
            f"eri3c must be (nbasis, nbasis, naux) or packed (naux, nbasis*(nbasis+1)/2), "
            f"got shape {tuple(eri3c.shape)}"
        )
    b = _ops.ao_to_mo(eri3c.to(dtype), c_occ, c_vir)
    if metric is not None:
        b = apply_metric(b, metric)
    return b


def metric_inverse_sqrt(metric: torch.Tensor, *, lindep: float = 1e-12) -> torch.Tensor:
    """``J^{-1/2}`` of a symmetric positive (semi-)definite Coulomb metric, by eigendecomposition.

    Eigenvalues below ``lindep`` times the largest are treated as linear dependencies of the
    auxiliary basis and dropped (their directions get weight zero) instead of being inverted.

    Parameters
    ----------
    metric : torch.Tensor
        ``J[P, Q] = (P|Q)``, shape ``(naux, naux)``.
    lindep : float
        Relative eigenvalue cut-off.

    Returns
    -------
    torch.Tensor
        The symmetric inverse square root, same shape, dtype and device.
    """
    metric = check_tensor(metric, "metric", ndim=2)
    floating_dtype(metric, "metric")
    if metric.shape[0] != metric.shape[1]:
        raise ValueError(f"metric must be square, got shape {tuple(metric.shape)}")
    if not (isinstance(lindep, (int, float)) and 0 <= lindep < 1):
        raise ValueError(f"lindep must be a float in [0, 1), got {lindep!r}")
    w, v = torch.linalg.eigh(metric)
    if metric.shape[0] and float(w[-1]) <= 0:
        raise ValueError("metric is not positive definite (its largest eigenvalue is <= 0)")
    keep = w > lindep * w[-1] if metric.shape[0] else w > 0
    w_inv = torch.where(keep, w.clamp_min(torch.finfo(w.dtype).tiny).rsqrt(), torch.zeros_like(w))
    return (v * w_inv) @ v.mT


def apply_metric(B: torch.Tensor, metric: torch.Tensor, *, lindep: float = 1e-12) -> torch.Tensor:
    """Fit the auxiliary index: ``B'[..., Q] = Σ_P B[..., P] (J^{-1/2})[P, Q]``.

    Parameters
    ----------
    B : torch.Tensor
        Unfitted 3-index quantities with the auxiliary index last, e.g. ``(nocc, nvir, naux)``.
    metric : torch.Tensor
        ``J[P, Q] = (P|Q)``, ``(naux, naux)``.
    lindep : float
        Relative eigenvalue cut-off of :func:`metric_inverse_sqrt`.

    Returns
    -------
    torch.Tensor
        ``B'`` with ``Σ_Q B'_iaQ B'_jbQ = Σ_PQ B_iaP (J^{-1})_PQ B_jbQ``, same shape as ``B``.
    """
    B = check_tensor(B, "B")
    metric = check_tensor(metric, "metric", ndim=2)
    check_same_device([B, metric], ["B", "metric"])
    dtype = _common_dtype([B, metric], ["B", "metric"])
    if B.dim() < 1 or B.shape[-1] != metric.shape[0]:
        raise ValueError(
            f"B's last dimension ({B.shape[-1] if B.dim() else 'none'}) must match the metric's size "
            f"{metric.shape[0]}"
        )
    fit = metric_inverse_sqrt(metric.to(dtype), lindep=lindep)
    # One GEMM over every (…) row, through the same dispatched GEMM as einsum's steps.
    return _ops.contract_gemm(B.to(dtype).reshape(-1, fit.shape[0]), fit).reshape(B.shape)


def mp2_energy(
    B: torch.Tensor,
    eps_occ: torch.Tensor,
    eps_vir: torch.Tensor,
    *,
    frozen: int = 0,
    memory_budget: int | None = None,
) -> torch.Tensor:
    """Closed-shell DF-MP2 correlation energy from fitted 3-index integrals.

    ``E = Σ_{ijab} T_ij^ab (2 T_ij^ab − T_ij^ba) / (ε_i + ε_j − ε_a − ε_b)`` with
    ``T_ij^ab = Σ_P B[i,a,P] B[j,b,P]``. Occupied orbitals are processed in blocks; since the
    pair energy is symmetric in (i, j), only blocks with ``I ≤ J`` are formed and off-diagonal
    blocks count twice, which roughly halves the work. Each block is one GEMM followed by a
    vectorised reduction; the block size is the largest whose intermediates fit ``memory_budget``.

    Parameters
    ----------
    B : torch.Tensor
        ``(nocc, nvir, naux)`` fitted integrals (:func:`ao_to_mo_transform`).
    eps_occ : torch.Tensor
        Occupied orbital energies, ``(nocc,)``.
    eps_vir : torch.Tensor
        Virtual orbital energies, ``(nvir,)``.
    frozen : int
        Number of lowest occupied orbitals left out of the correlation treatment (frozen core).
    memory_budget : int, optional
        Bytes the block intermediates may occupy; default :data:`DEFAULT_MEMORY_BUDGET`. A budget
        smaller than one occupied pair still runs, one pair at a time. It concerns the PyTorch
        route; the NKI kernel keeps every amplitude tile on chip and needs only a transposed copy
        of ``B``.

    Returns
    -------
    torch.Tensor
        The correlation energy (Hartree) as a 0-d tensor in the promoted dtype of the inputs
        (float64 in, float64 out) on their device.
    """
    B = check_tensor(B, "B", ndim=3)
    eps_occ = check_tensor(eps_occ, "eps_occ", ndim=1)
    eps_vir = check_tensor(eps_vir, "eps_vir", ndim=1)
    names = ["B", "eps_occ", "eps_vir"]
    check_same_device([B, eps_occ, eps_vir], names)
    dtype = _common_dtype([B, eps_occ, eps_vir], names)
    nocc, nvir, naux = B.shape
    if eps_occ.shape[0] != nocc:
        raise ValueError(f"eps_occ has {eps_occ.shape[0]} entries but B has nocc={nocc}")
    if eps_vir.shape[0] != nvir:
        raise ValueError(f"eps_vir has {eps_vir.shape[0]} entries but B has nvir={nvir}")
    frozen = check_int(frozen, "frozen", minimum=0)
    if frozen > nocc:
        raise ValueError(f"frozen={frozen} exceeds the number of occupied orbitals ({nocc})")
    budget = (
        DEFAULT_MEMORY_BUDGET
        if memory_budget is None
        else check_int(memory_budget, "memory_budget", minimum=1)
    )
    b = B[frozen:].to(dtype)
    e_occ, e_vir = eps_occ[frozen:].to(dtype), eps_vir.to(dtype)
    n = nocc - frozen
    if n and nvir and float(e_occ.max()) >= float(e_vir.min()):
        raise ValueError(
            "the highest occupied energy must lie below the lowest virtual energy "
            f"({float(e_occ.max())} >= {float(e_vir.min())}); MP2 denominators would vanish"
        )
    if n == 0 or nvir == 0 or naux == 0:
        return torch.zeros((), dtype=dtype, device=B.device)
    d = e_occ[:, None] - e_vir[None, :]  # (i, a): ε_i − ε_a
    return _ops.mp2_energy(b, d, budget).to(dtype)

