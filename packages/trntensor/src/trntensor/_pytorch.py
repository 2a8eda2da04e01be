"""trntensor's PyTorch references: what each operation of :mod:`trntensor._ops` computes.

Each function here is the reference of one operation (any dtype, any device; inputs already
validated by the public functions), written with torch only. The NKI drivers
(:mod:`trntensor._drivers`) fall back to them and reuse their layout helpers (PySCF's packed
triangle order).

Density fitting writes the MO integrals as ``(ia|jb) ≈ Σ_P B[i,a,P] B[j,b,P]``; the closed-shell
MP2 correlation energy is then

    E = Σ_{ijab} T_ij^ab (2 T_ij^ab − T_ij^ba) / (ε_i + ε_j − ε_a − ε_b),   T_ij^ab = Σ_P B_iaP B_jbP.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "REFERENCE_UNPACK_BYTES", "UNPACK_BUDGET", "PackedTransform", "ao_to_mo", "gemm", "mp2_energy",
    "tril_pair_index", "unpack_tril",
]


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Reference of ``contract_gemm``: ``a @ b`` for ``(m, k) @ (k, n)`` or ``(b, m, k) @ (b, k, n)``."""
    return torch.matmul(a, b)


# The NKI driver's unpacking of PySCF's triangle layout materialises (chunk, nbasis, nbasis); this
# bounds its chunk (the reference below unpacks REFERENCE_UNPACK_BYTES at a time).
UNPACK_BUDGET = 256 * 2**20


def _ao_to_mo_dense(eri3c: torch.Tensor, c_occ: torch.Tensor, c_vir: torch.Tensor) -> torch.Tensor:
    """``B[i,a,P] = Σ_{μν} C_occ[μ,i] C_vir[ν,a] (μν|P)`` for a dense ``(nbasis, nbasis, naux)``."""
    n, _, naux = eri3c.shape
    half = torch.matmul(c_occ.mT, eri3c.reshape(n, n * naux))  # (i, ν·P)
    return torch.matmul(c_vir.mT, half.reshape(-1, n, naux))  # (i, a, P), batched over i


def tril_pair_index(n: int, device: torch.device) -> torch.Tensor:
    """For every (μ, ν), the position of the pair in PySCF's packed order (0,0), (1,0), (1,1), …."""
    mu = torch.arange(n, device=device)
    hi = torch.maximum(mu[:, None], mu[None, :])
    lo = torch.minimum(mu[:, None], mu[None, :])
    return (hi * (hi + 1) // 2 + lo).reshape(-1)


def unpack_tril(packed: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """``(p, n(n+1)/2)`` lower triangles → the dense ``(n, n, p)`` layout.

    Gathers whole rows of the transposed block (each a contiguous run of ``p`` values), which is
    several times faster than gathering single elements.
    """
    return packed.mT.contiguous().index_select(0, index).view(n, n, packed.shape[0])


#: Bytes of the dense ``(n, n, chunk)`` block the PyTorch reference unpacks at a time. Small, so
#: that transforming PySCF's packed triangles needs little beyond the integrals and the result
#: (the transform's GEMMs run as fast with a few auxiliary functions at a time as with hundreds).
REFERENCE_UNPACK_BYTES = 6 * 2**20


class PackedTransform:
    """``B[i,a,P]`` from packed ``(naux, n(n+1)/2)`` triangles, for one or more pairs of
    coefficient matrices, a few auxiliary functions at a time, with its workspace allocated once.

    Per piece of ``q`` functions: the triangles transposed (``(pairs, q)``), gathered by whole
    rows into the dense ``(μ, ν·q)`` (once for every pair of coefficients: the α and β orbitals of
    an open shell share it), then two GEMMs with ``q`` folded into their columns,
    ``C_occᵀ (μ, ν·q)`` and ``C_virᵀ (ν, i·q)``, so neither GEMM is skinny. The workspace is of the
    order of ``REFERENCE_UNPACK_BYTES``; a caller that transforms many chunks (the DF-MP2 driver)
    keeps one instance, so the loop allocates nothing (fresh buffers of this size would fault their
    pages in again for every chunk).
    """

    def __init__(self, coefficients: list[tuple[torch.Tensor, torch.Tensor]], max_rows: int) -> None:
        c0 = coefficients[0][0]
        n, dtype, device = c0.shape[0], c0.dtype, c0.device
        self.n = n
        self.q = max(1, min(max_rows, REFERENCE_UNPACK_BYTES // max(1, n * n * dtype.itemsize)))
        self.index = tril_pair_index(n, device)
        self.coefficients = [(o.mT.contiguous(), v.mT.contiguous()) for o, v in coefficients]
        nocc = max(o.shape[1] for o, _ in coefficients)
        nvir = max(v.shape[1] for _, v in coefficients)
        q = self.q

        def buffer(size: int) -> torch.Tensor:
            return torch.empty(size, dtype=dtype, device=device)

        self._rows = buffer(n * (n + 1) // 2 * q)  # (pairs, q)
        self._dense = buffer(n * n * q)  # (μ, ν, q)
        self._half = buffer(nocc * n * q)  # (i, ν, q)
        self._half_t = buffer(n * nocc * q)  # (ν, i, q)
        self._out = buffer(nvir * nocc * q)  # (a, i, q)

    def __call__(self, packed: torch.Tensor, outs: list[list[tuple[int, torch.Tensor]]]) -> None:
        """Fill the rows of ``B`` for every pair of coefficients from ``packed`` (``(naux, pairs)``):
        ``outs[s]`` lists ``(i0, rows)`` targets, ``rows`` a ``(ni, nvir_s, naux)`` tensor (or view)
        receiving occupied orbitals ``i0 .. i0 + ni`` (``[(0, b)]`` for the whole of ``b``)."""
        n, naux = self.n, packed.shape[0]
        npair = n * (n + 1) // 2
        for p0 in range(0, naux, self.q):
            p = min(p0 + self.q, naux) - p0
            rows = self._rows[: npair * p].view(npair, p)
            rows.copy_(packed[p0 : p0 + p].mT)
            dense = self._dense[: n * n * p].view(n * n, p)
            torch.index_select(rows, 0, self.index, out=dense)  # (μ, ν·p)
            for (c_occ_t, c_vir_t), targets in zip(self.coefficients, outs):
                nocc, nvir = c_occ_t.shape[0], c_vir_t.shape[0]
                half = self._half[: nocc * n * p].view(nocc, n * p)
                torch.matmul(c_occ_t, dense.view(n, n * p), out=half)  # (i, ν·p)
                half_t = self._half_t[: n * nocc * p].view(n, nocc, p)
                half_t.copy_(half.view(nocc, n, p).permute(1, 0, 2))  # (ν, i, p)
                out = self._out[: nvir * nocc * p].view(nvir, nocc * p)
                torch.matmul(c_vir_t, half_t.view(n, nocc * p), out=out)  # (a, i·p)
                for i0, b in targets:
                    b[:, :, p0 : p0 + p] = out.view(nvir, nocc, p)[:, i0 : i0 + b.shape[0]].permute(1, 0, 2)


def _ao_to_mo_packed(packed: torch.Tensor, c_occ: torch.Tensor, c_vir: torch.Tensor) -> torch.Tensor:
    """``B[i,a,P]`` from packed ``(naux, n(n+1)/2)`` triangles (:class:`PackedTransform`)."""
    b = torch.empty(c_occ.shape[1], c_vir.shape[1], packed.shape[0], dtype=packed.dtype, device=packed.device)
    PackedTransform([(c_occ, c_vir)], packed.shape[0])(packed, [[(0, b)]])
    return b


def ao_to_mo(eri3c: torch.Tensor, c_occ: torch.Tensor, c_vir: torch.Tensor) -> torch.Tensor:
    """PyTorch reference of the ``ao_to_mo`` operation: either layout, inputs already validated.

    ``eri3c`` is dense ``(n, n, naux)`` or packed ``(naux, n(n+1)/2)``; all three tensors share
    one dtype and device.
    """
    if eri3c.dim() == 3:
        return _ao_to_mo_dense(eri3c, c_occ, c_vir)
    return _ao_to_mo_packed(eri3c, c_occ, c_vir)


def _mp2_energy_block_reference(
    b_i: torch.Tensor, b_j: torch.Tensor, d_i: torch.Tensor, d_j: torch.Tensor
) -> torch.Tensor:
    """Σ over one block of occupied pairs of ``T (2T − Tᵀ) / Δ``.

    ``b_i`` is ``(ni, nvir, naux)``, ``b_j`` is ``(nj, nvir, naux)``; ``d_i[i, a] = ε_i − ε_a`` and
    ``d_j`` likewise, so ``Δ[i,a,j,b] = d_i[i,a] + d_j[j,b]``.
    """
    ni, nv, naux = b_i.shape
    nj = b_j.shape[0]
    t = torch.matmul(b_i.reshape(ni * nv, naux), b_j.reshape(nj * nv, naux).mT).view(ni, nv, nj, nv)
    x = torch.mul(t, 2.0).sub_(t.permute(0, 3, 2, 1))  # 2 T_ij^ab − T_ij^ba in (i, a, j, b) order
    x.mul_(t)
    del t
    x.div_(d_i[:, :, None, None] + d_j[None, None, :, :])
    return x.sum()


def mp2_energy(b: torch.Tensor, d: torch.Tensor, budget: int) -> torch.Tensor:
    """PyTorch reference of the ``mp2_energy`` operation: validated ``b`` (n, nvir, naux) and
    ``d[i, a] = ε_i − ε_a`` of one dtype; occupied blocks ``I ≤ J`` sized to ``budget`` bytes."""
    n, nvir, _ = b.shape
    # Accumulate block sums in float64 where the inputs are single precision (more bits, same out).
    acc_dtype = torch.float64 if b.dtype.itemsize < 8 else b.dtype
    total = torch.zeros((), dtype=acc_dtype, device=b.device)
    block = _occupied_block(n, nvir, b.dtype.itemsize, budget)
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        for j0 in range(i0, n, block):
            j1 = min(j0 + block, n)
            part = _mp2_energy_block_reference(b[i0:i1], b[j0:j1], d[i0:i1], d[j0:j1])
            total += part if j0 == i0 else 2 * part
    return total


def _occupied_block(n: int, nvir: int, itemsize: int, budget: int) -> int:
    """Occupied block size: fits the budget, and small enough that the I ≤ J saving applies."""
    # A block pair holds about three (bi, nvir, bj, nvir) arrays: T, 2T − Tᵀ and Δ.
    per_pair = 3 * nvir * nvir * itemsize
    fit = max(1, math.isqrt(max(1, budget // max(1, per_pair))))
    # Several blocks along i make the symmetric saving real: k blocks form k(k+1)/2 of k² pairs.
    # About eight blocks, of at least four orbitals so each GEMM stays efficient (measured on
    # naphthalene-sized inputs: blocks of 4–9 orbitals within a few percent, one block 2× slower).
    return max(1, min(fit, n, max(4, math.ceil(n / 8))))
