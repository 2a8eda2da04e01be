"""DF-MP2 from a PySCF SCF object: RHF and UHF references, spin components, SCS-MP2, and runs
over many processes through ``torch.distributed``.

:func:`dfmp2_energy` is the whole correlation step: the 3-index integrals ``(μν|P)`` (PySCF's
``int3c2e`` over a range of auxiliary shells), their transformation to ``B[i,a,P]``, the fit with
the metric ``J = LLᵀ`` (``B ← B L⁻ᵀ``, a triangular solve, as PySCF's Cholesky-fitted integrals;
``J^{-1/2}`` when ``J`` is too close to singular for a Cholesky factor), and the pair energies.
With a process group every step is split:

* the auxiliary shells are cut into fixed chunks (:data:`AUX_CHUNK` functions); in rounds, every
  rank computes and transforms one chunk (``c mod R`` = rank) in parallel with the others, then
  the round's chunks are broadcast and every rank keeps only the rows of the blocks it owns;
* occupied orbitals are cut into fixed blocks (:data:`OCC_BLOCK`), dealt to the ranks in a snake
  order (0, 1, …, R−1, R−1, …, 0, …: block ``k`` has the most pairs when ``k`` is small), and each
  owner fits its blocks with the metric;
* pair blocks: each block is broadcast once by its owner, and the owner of block ``k`` forms every
  pair ``(k, l)`` it needs while block ``l`` is in its receive buffer and the next block is
  already travelling (row by row, so the temporaries are one row's amplitudes).

Peak memory per rank therefore falls with the number of ranks (a rank holds its own blocks, two
received blocks, one row of amplitudes and one integral chunk). :func:`memory_plan` counts these
bytes (and the metric's factor) before anything is computed; when the own blocks do not fit the budget
they are streamed through an HDF5 file (``_dfmp2_store``), one block at a time, with the same
numbers. A rank that dies or does not answer within ``timeout`` ends the run on the others with
:class:`RankFailure` (stage, rank, and the rank it waited for), never with an energy.

Every number is computed by the same operations on the same shapes whatever the number of ranks,
and the pair energies are added up with ``math.fsum`` in a fixed order, so **the energy is
bitwise the same for 1, 2, 3, ... ranks** (at a fixed number of threads per rank: a BLAS may
split sums differently across thread counts).

Spin components: for RHF ``E_os = Σ T²/Δ`` and ``E_ss = Σ T(T − T')/Δ`` over ``i, j, a, b``
(``T' = T_ij^ba``), ``E_corr = E_os + E_ss``; for UHF the same-spin part is
``½ Σ T(T − T')/Δ`` over αα and ββ, the opposite-spin part ``Σ T²/Δ`` over αβ. SCS-MP2 (Grimme,
J. Chem. Phys. 118, 9095 (2003)) is ``c_os E_os + c_ss E_ss`` with ``c_os = 6/5``, ``c_ss = 1/3``.

PySCF is needed here (it computes the integrals) but is imported only when this runs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trntensor._dfmp2_comm import Comm, RankFailure, StageTime
from trntensor._dfmp2_heap import release_free_memory
from trntensor._dfmp2_plan import AUX_CHUNK, OCC_BLOCK, MemoryPlan, memory_plan, owned, owner
from trntensor._dfmp2_plan import blocks as _blocks
from trntensor._dfmp2_store import BlockStore
from trntensor._pytorch import PackedTransform
from trntensor.df_mp2 import metric_inverse_sqrt

__all__ = [
    "AUX_CHUNK", "OCC_BLOCK", "DFMP2Energy", "MemoryPlan", "RankFailure", "StageTime", "dfmp2_energy",
    "memory_plan",
]

#: Seconds a stage runs before its progress bar appears (quick runs print nothing).
PROGRESS_DELAY = 2.0


@dataclass(frozen=True)
class DFMP2Energy:
    """The DF-MP2 correlation energy and its spin components (Hartree).

    Attributes
    ----------
    e_os, e_ss : float
        Opposite-spin and same-spin components; ``e_corr = e_os + e_ss``.
    unrestricted : bool
        Whether the reference was UHF.
    nocc, nvir : tuple of int
        Active occupied and virtual orbitals per spin (one entry for RHF, α and β for UHF).
    naux : int
        Auxiliary basis functions.
    ranks : int
        Processes the run was split over.
    plan : MemoryPlan
        The memory plan of the run (per rank).
    timings : dict of str to StageTime
        Where this rank's time went, by part of the run (``setup``, ``integrals`` (PySCF's
        ``int3c2e``), ``transform``, ``redistribute`` (the chunks' broadcasts and the copies into
        the rank's blocks; absent for one process with ``B`` in memory, which transforms straight
        into its blocks), ``metric``, ``fit``, ``pairs``, ``sum``):
        elapsed and CPU seconds, and the seconds spent waiting for collectives. Unlike the
        energy, these differ from rank to rank.
    """

    e_os: float
    e_ss: float
    unrestricted: bool
    nocc: tuple[int, ...]
    nvir: tuple[int, ...]
    naux: int
    ranks: int
    plan: MemoryPlan = field(repr=False)
    timings: dict[str, StageTime] = field(default_factory=dict, repr=False, compare=False)

    @property
    def e_corr(self) -> float:
        """``e_os + e_ss``."""
        return self.e_os + self.e_ss

    def scs(self, c_os: float = 6 / 5, c_ss: float = 1 / 3) -> float:
        """Spin-component-scaled correlation energy ``c_os e_os + c_ss e_ss`` (Grimme's by default)."""
        return c_os * self.e_os + c_ss * self.e_ss


# ----------------------------------------------------------------------------- orbitals


@dataclass
class _Spin:
    c_occ: torch.Tensor
    c_vir: torch.Tensor
    e_occ: torch.Tensor
    e_vir: torch.Tensor
    blocks: list[tuple[int, int]]


def _frozen_sets(frozen: Any, nspin: int, nmo: int) -> list[set[int]]:
    """PySCF's ``frozen``: None, a count of lowest orbitals, a list of indices, or (UHF) a pair."""
    if frozen is None:
        return [set() for _ in range(nspin)]
    if isinstance(frozen, bool):
        raise TypeError("frozen must be None, an int, or a sequence of orbital indices; got a bool")
    if isinstance(frozen, int):
        if frozen < 0:
            raise ValueError(f"frozen must be >= 0, got {frozen}")
        return [set(range(frozen)) for _ in range(nspin)]
    if not isinstance(frozen, Sequence) or isinstance(frozen, str):
        raise TypeError(f"frozen must be None, an int, or a sequence of orbital indices; got {frozen!r}")
    per_spin: list[Any]
    if nspin == 2 and len(frozen) == 2 and all(isinstance(f, Sequence) for f in frozen):
        per_spin = list(frozen)
    else:
        per_spin = [frozen] * nspin
    sets = []
    for s in per_spin:
        indices = set()
        for i in s:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"frozen orbital indices must be ints, got {i!r}")
            if not 0 <= i < nmo:
                raise ValueError(f"frozen orbital index {i} is outside 0..{nmo - 1}")
            indices.add(i)
        sets.append(indices)
    return sets


def _spins(mf: Any, frozen: Any, dtype: torch.dtype, occ_block: int) -> tuple[list[_Spin], bool]:
    import numpy as np

    coeff = np.asarray(mf.mo_coeff)
    unrestricted = coeff.ndim == 3
    if not unrestricted and not np.all(np.isin(np.asarray(mf.mo_occ), (0.0, 2.0))):
        raise ValueError(
            "mf has singly occupied orbitals in a restricted reference (ROHF?); DF-MP2 here takes "
            "RHF or UHF references: run scf.UHF for an open shell"
        )
    coeffs = list(coeff) if unrestricted else [coeff]
    occs = list(np.asarray(mf.mo_occ)) if unrestricted else [np.asarray(mf.mo_occ)]
    energies = list(np.asarray(mf.mo_energy)) if unrestricted else [np.asarray(mf.mo_energy)]
    frozen_sets = _frozen_sets(frozen, len(coeffs), coeffs[0].shape[1])
    spins = []
    for c, occ, e, fz in zip(coeffs, occs, energies, frozen_sets):
        occupied = [i for i in range(len(occ)) if occ[i] > 0 and i not in fz]
        virtual = [i for i in range(len(occ)) if occ[i] == 0 and i not in fz]
        ct = torch.from_numpy(np.ascontiguousarray(c)).to(dtype)
        et = torch.from_numpy(np.ascontiguousarray(e)).to(dtype)
        spins.append(
            _Spin(
                c_occ=ct[:, occupied].contiguous(),
                c_vir=ct[:, virtual].contiguous(),
                e_occ=et[occupied],
                e_vir=et[virtual],
                blocks=_blocks(len(occupied), occ_block),
            )
        )
    return spins, unrestricted


# ----------------------------------------------------------------------------- the driver


def _pair_list(nspin: int, counts: list[int]) -> list[tuple[int, int, int, int]]:
    """Every pair block ``(spin_i, k, spin_j, l)`` the energy needs, in a fixed order."""
    pairs = []
    for s in range(nspin):
        pairs += [(s, k, s, l) for k in range(counts[s]) for l in range(k, counts[s])]
    if nspin == 2:
        pairs += [(0, k, 1, l) for k in range(counts[0]) for l in range(counts[1])]
    return pairs


class _RowBuffers:
    """The temporaries of the pair loop (the amplitudes of one row against a block, ``T/Δ`` and
    ``T'``), allocated once for the largest row: the loop then allocates nothing, so it neither
    fragments the heap nor faults fresh pages in at every row."""

    def __init__(self, size: int) -> None:
        self.t, self.x, self.tp = (torch.empty(size, dtype=torch.float64) for _ in range(3))


def _pair_energy(
    bi: torch.Tensor, bj: torch.Tensor, di: torch.Tensor, dj: torch.Tensor, same_spin: bool,
    work: _RowBuffers,
) -> tuple[float, float]:
    """``(Σ T²/Δ, Σ T(T − T')/Δ)`` of one occupied row ``i`` (``bi``: ``(nvir, naux)``,
    ``di``: ``(nvir,)``) against a block (``bj``: ``(nj, nvir, naux)``), the second only for a
    same-spin pair.

    One GEMM into ``work.t``, then ``T/Δ`` and (same spin) ``T' = T_ij^ba`` in the other two
    buffers; the sums are dot products, so no product array is formed.
    """
    nv1, naux = bi.shape
    nj, nv2, _ = bj.shape
    size = nv1 * nj * nv2
    t = work.t[:size].view(nv1, nj * nv2)
    torch.matmul(bi, bj.reshape(nj * nv2, naux).mT, out=t)
    x = work.x[:size].view(nv1, nj, nv2)
    torch.add(di[:, None, None], dj[None, :, :], out=x)  # Δ
    torch.div(t.view(nv1, nj, nv2), x, out=x)  # T/Δ
    direct = float(torch.dot(x.view(-1), t.view(-1)))
    if not same_spin:
        return direct, 0.0
    tp = work.tp[:size].view(nv1, nj, nv2)
    tp.copy_(t.view(nv1, nj, nv2).permute(2, 1, 0))  # T'[a, j, b] = T[b, j, a]
    exchange = float(torch.dot(x.view(-1), tp.view(-1)))
    return direct, direct - exchange


def _block_energy(
    bi: torch.Tensor, bj: torch.Tensor, di: torch.Tensor, dj: torch.Tensor, same_spin: bool,
    work: _RowBuffers,
) -> tuple[float, float]:
    """:func:`_pair_energy` of two blocks, one row ``i`` at a time (temporaries of one row's
    size: ``nvir × nj·nvir``, instead of the whole block pair's)."""
    direct = ss = 0.0
    for i in range(bi.shape[0]):
        d_i, s_i = _pair_energy(bi[i], bj, di[i], dj, same_spin, work)
        direct, ss = direct + d_i, ss + s_i
    return direct, ss


def _diagonal_block_energy(b: torch.Tensor, d: torch.Tensor, work: _RowBuffers) -> tuple[float, float]:
    """:func:`_pair_energy` of a block with itself (same spin), forming only the pairs ``j ≥ i``:
    the pair sums are symmetric in ``(i, j)``, so the full block is ``Σ_i e_ii + 2 Σ_{i<j} e_ij``
    at a little over half the GEMM work of the square."""
    direct = ss = 0.0
    for i in range(b.shape[0]):
        d_ii, s_ii = _pair_energy(b[i], b[i : i + 1], d[i], d[i : i + 1], True, work)
        direct, ss = direct + d_ii, ss + s_ii
        if i + 1 < b.shape[0]:
            d_ij, s_ij = _pair_energy(b[i], b[i + 1 :], d[i], d[i + 1 :], True, work)
            direct, ss = direct + 2.0 * d_ij, ss + 2.0 * s_ij
    return direct, ss


def dfmp2_energy(
    mf: Any,
    auxbasis: str | None = None,
    *,
    frozen: Any = None,
    group: Any = None,
    memory: int | None = None,
    timeout: float | None = None,
    scratch: str | None = None,
    stream: bool | None = None,
    progress: bool = False,
    on_plan: Callable[[MemoryPlan], None] | None = None,
    occ_block: int = OCC_BLOCK,
    aux_chunk: int = AUX_CHUNK,
) -> DFMP2Energy:
    """DF-MP2 correlation energy and spin components of a converged PySCF RHF or UHF.

    Parameters
    ----------
    mf : pyscf.scf.hf.RHF or pyscf.scf.uhf.UHF
        A converged SCF (its ``mol``, ``mo_coeff``, ``mo_occ``, ``mo_energy`` are read).
    auxbasis : str, optional
        The fitting basis; default PySCF's MP2-fitting choice for the orbital basis
        (``df.make_auxbasis(mol, mp2fit=True)``).
    frozen : int or sequence, optional
        As PySCF: the number of lowest orbitals to freeze, or the indices of the orbitals to leave
        out (occupied or virtual), for UHF also a pair of such lists (α, β).
    group : torch.distributed.ProcessGroup, optional
        Split the work over this group's ranks (every rank calls with the same arguments and gets
        the same result). ``None``: this process alone.
    memory : int, optional
        Bytes each rank may use for the correlation step. When ``B`` does not fit in memory, the
        rank's own ``B`` blocks are streamed through an HDF5 file (the energy is bitwise the
        same); when even that does not fit, the run is refused up front with the plan in the
        message.
    timeout : float, optional
        Seconds a rank waits for another at any collective before the run fails with
        :class:`RankFailure` (default: the process group's own timeout).
    scratch : str, optional
        Directory for the HDF5 file of streamed ``B`` (default: the system's temporary directory).
        The file is removed when the call returns or raises.
    stream : bool, optional
        Force ``B`` to disk (True) or keep it in memory (False) instead of deciding by ``memory``.
    progress : bool
        Show tqdm progress bars on stderr (rank 0 only) for the integrals and transform, the fit
        and the pair energies, once a stage has run for :data:`PROGRESS_DELAY` seconds.
    on_plan : callable, optional
        Called with the :class:`MemoryPlan` before the expensive steps (to print it, say).
    occ_block, aux_chunk : int
        Occupied orbitals per block and auxiliary functions per integral chunk. The result is
        bitwise independent of the number of ranks for fixed values of these (not across them).

    Returns
    -------
    DFMP2Energy
        ``e_corr``, ``e_os``, ``e_ss`` and ``scs()``, the same on every rank.

    Raises
    ------
    RankFailure
        Another rank died or did not answer within ``timeout`` (no energy is returned).
    MemoryError
        The plan does not fit ``memory`` even with ``B`` on disk.
    """
    from pyscf import df

    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
        raise ValueError(f"memory must be a positive number of bytes, got {memory!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if stream is not None and not isinstance(stream, bool):
        raise TypeError(f"stream must be None, True or False, got {stream!r}")
    if not getattr(mf, "converged", True):
        raise ValueError("mf has not converged; run mf.kernel() to convergence first")
    mol = mf.mol
    dtype = torch.float64
    for name, value in (("occ_block", occ_block), ("aux_chunk", aux_chunk)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    comm = Comm(group, None if timeout is None else float(timeout))
    comm.clock.enter("setup")  # orbitals, fitting basis, plan, and the stores
    spins, unrestricted = _spins(mf, frozen, dtype, occ_block)
    auxmol = df.addons.make_auxmol(mol, auxbasis or df.make_auxbasis(mol, mp2fit=True))
    naux = int(auxmol.nao)
    plan = memory_plan(
        int(mol.nao), [s.c_occ.shape[1] for s in spins], [s.c_vir.shape[1] for s in spins], naux,
        comm.size, memory, occ_block=occ_block, aux_chunk=aux_chunk, stream=stream,
    )
    if on_plan is not None:
        on_plan(plan)
    if not plan.fits():
        raise MemoryError(f"the correlation step does not fit: {plan.describe()}; add ranks or memory")

    store = BlockStore(plan.streamed, scratch, comm.rank)
    try:
        e_os, e_ss = _run(mol, auxmol, spins, unrestricted, comm, store, naux, aux_chunk,
                          _progress(progress and comm.rank == 0))
    finally:
        store.close()
        comm.clock.enter(None)
    return DFMP2Energy(
        e_os=e_os,
        e_ss=e_ss,
        unrestricted=unrestricted,
        nocc=tuple(s.c_occ.shape[1] for s in spins),
        nvir=tuple(s.c_vir.shape[1] for s in spins),
        naux=naux,
        ranks=comm.size,
        plan=plan,
        timings=dict(comm.clock.parts),
    )


def _run(
    mol: Any, auxmol: Any, spins: list[_Spin], unrestricted: bool, comm: Comm, store: BlockStore,
    naux: int, aux_chunk: int, bar: Callable[..., Any],
) -> tuple[float, float]:
    """The stages of :func:`dfmp2_energy` after the plan (integrals and transform, metric, fit,
    pair energies, sum); returns ``(e_os, e_ss)``. ``comm.clock`` times its parts."""
    import numpy as np
    from pyscf import df

    dtype = torch.float64
    clock = comm.clock
    for si, s in enumerate(spins):
        for k in owned(len(s.blocks), comm.rank, comm.size):
            i0, i1 = s.blocks[k]
            store.create((si, k), (i1 - i0, s.c_vir.shape[1], naux))

    # Integrals by auxiliary chunk, in rounds: in round j every rank computes and transforms its
    # j-th chunk (c = j·R + rank) in parallel, then the round's chunks are broadcast in order and
    # each rank keeps its blocks' rows. Every buffer of the loop is allocated once (sized for the
    # largest chunk): PySCF's output, the transform's workspace, the rank's transformed chunk and
    # the chunk being received. Fresh arrays of changing sizes would fragment the heap (resident
    # memory that is free but not returned, counted against every rank) or, returned, fault their
    # pages in again at every chunk.
    comm.stage = "integrals"
    chunks = _aux_chunks(auxmol, aux_chunk)
    nbas = mol.nbas
    widest = max((p1 - p0 for _, _, p0, p1 in chunks), default=0)
    npair = int(mol.nao) * (int(mol.nao) + 1) // 2
    eri_buffer = np.empty(npair * widest)
    # (PySCF's int3c2e makes its shell-pair data anew for every chunk, 3 ms each at 418 basis
    # functions; kept for the whole loop it would cost more memory than the chunk: 23 MiB there)
    transform = PackedTransform([(s.c_occ, s.c_vir) for s in spins], widest)
    sizes = [s.c_occ.shape[1] * s.c_vir.shape[1] for s in spins]
    # One process with B in memory transforms straight into its blocks; otherwise a chunk is
    # transformed into a buffer, which is broadcast (or written to the file) from there.
    direct = comm.size == 1 and not store.streamed
    mine_buffer = torch.empty(0 if direct else sum(sizes) * widest, dtype=dtype)
    # (one broadcast per chunk carries every spin's rows)
    part_buffer = torch.empty(sum(sizes) * widest, dtype=dtype) if comm.size > 1 else None

    def chunk_views(buffer: torch.Tensor, width: int) -> list[torch.Tensor]:
        """The transformed chunk of every spin, ``(nocc, nvir, width)`` each, in one buffer."""
        views, offset = [], 0
        for s, size in zip(spins, sizes):
            shape = (s.c_occ.shape[1], s.c_vir.shape[1], width)
            views.append(buffer[offset : offset + size * width].view(shape))
            offset += size * width
        return views

    for first in bar(range(0, len(chunks), comm.size), desc="integrals + transform"):
        mine: list[torch.Tensor] | None = None
        c = first + comm.rank
        if c < len(chunks):
            sh0, sh1, p0, p1 = chunks[c]
            clock.enter("integrals")
            eri = df.incore.aux_e2(mol, auxmol, "int3c2e", aosym="s2ij", out=eri_buffer,
                                   shls_slice=(0, nbas, 0, nbas, sh0, sh1))
            clock.enter("transform")
            # (P, μν) lower triangles; PySCF's (μν, P) comes Fortran-ordered, so this view is in
            # C order without a copy (either order gives the transform the same numbers)
            if direct:
                transform(torch.from_numpy(eri.T), [
                    [(s.blocks[k][0], store.get((si, k))[:, :, p0:p1]) for sk, k in store.keys() if sk == si]
                    for si, s in enumerate(spins)
                ])
                del eri
                continue
            mine = chunk_views(mine_buffer, p1 - p0)
            transform(torch.from_numpy(eri.T), [[(0, b)] for b in mine])
            del eri
        clock.enter("redistribute")
        for c in range(first, min(first + comm.size, len(chunks))):
            src, (_, _, p0, p1) = c - first, chunks[c]
            if comm.rank == src and mine is not None:
                received = mine_buffer
            else:
                assert part_buffer is not None
                received = part_buffer
            comm.broadcast(received[: sum(sizes) * (p1 - p0)], src)
            for si, part in enumerate(chunk_views(received, p1 - p0)):
                for key in store.keys():
                    if key[0] == si:
                        i0, i1 = spins[si].blocks[key[1]]
                        store.write_columns(key, p0, p1, part[i0:i1])
            del received
        del mine
    del eri_buffer, transform, mine_buffer, part_buffer
    release_free_memory()  # the loop's buffers (see _dfmp2_heap)
    # The metric's factor once, on rank 0, then broadcast (with which factor it is): every rank
    # fits with the same numbers. It is made after the integrals, so that it never coexists with
    # an integral chunk. Cholesky (J = L Lᵀ; the fit is a triangular solve, at about a
    # tenth of the eigendecomposition's cost and 0.6 of a GEMM's for the fit itself); J^{-1/2}
    # when J is numerically singular (linearly dependent fitting functions).
    comm.stage = "metric"
    clock.enter("metric")
    kind = torch.zeros(1, dtype=dtype)  # 0: fit = Lᵀ (upper); 1: fit = J^{-1/2}
    if comm.rank == 0:
        # J in column-major order (PySCF's) is factored in place (LAPACK's potrf on its own
        # memory: no second naux² array at this rank's peak); L column-major is Lᵀ in C order
        metric = torch.from_numpy(np.asfortranarray(auxmol.intor("int2c2e")))
        factor, info = torch.linalg.cholesky_ex(metric, out=(metric, torch.zeros((), dtype=torch.int32)))
        if int(info) == 0 and bool(torch.all(torch.diagonal(factor) > 1e-7 * float(factor[0, 0]))):
            fit = factor.mT.contiguous()  # no copy
        else:  # (J was overwritten: computed again)
            fit, kind[0] = metric_inverse_sqrt(torch.from_numpy(auxmol.intor("int2c2e")).to(dtype)), 1.0
        del metric, factor
    else:
        fit = torch.empty(naux, naux, dtype=dtype)
    comm.broadcast(kind, 0)
    comm.broadcast(fit, 0)
    cholesky = float(kind[0]) == 0.0
    comm.stage = "fit"  # block by block, row by row (the same shapes whatever the number of ranks)
    clock.enter("fit")
    fitted = torch.empty(max((s.c_vir.shape[1] * naux for s in spins), default=0), dtype=dtype)
    for key in bar(store.keys(), desc="fit"):
        b = store.get(key)
        for row in b:  # (nvir, naux), fitted in place: temporaries of one row, not of the block
            out = fitted[: row.numel()].view(row.shape)
            if cholesky:  # B Lᵀ⁻¹: B B'ᵀ = b J⁻¹ b'ᵀ
                torch.linalg.solve_triangular(fit, row, upper=True, left=False, out=out)
            else:
                torch.matmul(row, fit, out=out)
            row.copy_(out)
        # The block keeps its C order whatever the solver did (LAPACK's column-major): the pair
        # GEMMs then see the same layout in memory and from disk, so they round the same way.
        store.put(key, b)
        del b
    del fit, fitted
    release_free_memory()

    comm.stage = "pairs"
    clock.enter("pairs")
    pairs = _pair_list(len(spins), [len(s.blocks) for s in spins])
    index = {p: n for n, p in enumerate(pairs)}
    energies = torch.zeros(len(pairs), 2, dtype=torch.float64)
    d = [s.e_occ[:, None] - s.e_vir[None, :] for s in spins]
    own = store.keys()
    # Pair blocks: every block is broadcast once by its owner (two block buffers per rank), and
    # each rank forms the pairs (k, l) of the blocks k it owns.
    todo = [(sj, l) for sj, s in enumerate(spins) for l in range(len(s.blocks))]
    # The two block buffers (the block in use and the next one travelling), and with B on disk a
    # third for the own block read back, and the row temporaries: allocated once, so the loop
    # allocates nothing that size.
    largest = max(((b1 - b0) * s.c_vir.shape[1] * naux for s in spins for b0, b1 in s.blocks), default=0)
    slots = [torch.empty(largest, dtype=dtype) for _ in range(2 if comm.size > 1 or store.streamed else 0)]
    own_slot = torch.empty(largest, dtype=dtype) if store.streamed else None
    vmax = max((s.c_vir.shape[1] for s in spins), default=0)
    rows = _RowBuffers(vmax * max((b1 - b0 for s in spins for b0, b1 in s.blocks), default=0) * vmax)

    def start(step: int) -> tuple[torch.Tensor, Any]:
        """Begin receiving (or sending) the block of ``todo[step]``; the pairs of the current block
        are formed while it travels, so ranks do not wait for each other at every block."""
        sj, l = todo[step]
        sl = spins[sj]
        b0, b1 = sl.blocks[l]
        src = owner(l, comm.size)
        shape = (b1 - b0, sl.c_vir.shape[1], naux)
        if comm.rank == src and not store.streamed:
            buf = store.get((sj, l))
        else:
            buf = slots[step % 2][: math.prod(shape)].view(shape)
            if comm.rank == src:
                store.read_into((sj, l), buf)
        return buf, comm.broadcast_async(buf, src)

    pending = start(0) if todo else None
    for step in bar(range(len(todo)), desc="pair energies"):
        assert pending is not None
        bl, work = pending
        comm.wait_for(work)
        pending = start(step + 1) if step + 1 < len(todo) else None
        sj, l = todo[step]
        b0, b1 = spins[sj].blocks[l]
        for si, k in own:
            n = index.get((si, k, sj, l))
            if n is None:
                continue
            s = spins[si]
            a0, a1 = s.blocks[k]
            if si == sj and k == l:
                os_part, ss_part = _diagonal_block_energy(bl, d[si][a0:a1], rows)
            else:
                if own_slot is None:
                    bk = store.get((si, k))
                else:
                    shape = (a1 - a0, s.c_vir.shape[1], naux)
                    bk = own_slot[: math.prod(shape)].view(shape)
                    store.read_into((si, k), bk)
                os_part, ss_part = _block_energy(bk, bl, d[si][a0:a1], d[sj][b0:b1], si == sj, rows)
                del bk
            energies[n, 0], energies[n, 1] = os_part, ss_part
        del bl
    comm.stage = "sum"
    clock.enter("sum")
    comm.sum_exact(energies)

    e_os, e_ss = [], []
    for n, (si, k, sj, l) in enumerate(pairs):
        os_part, ss_part = float(energies[n, 0]), float(energies[n, 1])
        if not unrestricted:  # RHF: both (i, j) orders of an off-diagonal block pair
            weight = 1.0 if k == l else 2.0
            e_os.append(weight * os_part)
            e_ss.append(weight * ss_part)
        elif si == sj:  # αα / ββ: ½ Σ over all i, j
            e_ss.append((0.5 if k == l else 1.0) * ss_part)
        else:  # αβ
            e_os.append(os_part)
    return math.fsum(e_os), math.fsum(e_ss)


def _aux_chunks(auxmol: Any, size: int) -> list[tuple[int, int, int, int]]:
    """``(first shell, end shell, first function, end function)`` of chunks of whole shells."""
    loc = auxmol.ao_loc_nr()
    chunks, start = [], 0
    for sh in range(1, auxmol.nbas + 1):
        if loc[sh] - loc[start] >= size or sh == auxmol.nbas:
            chunks.append((start, sh, int(loc[start]), int(loc[sh])))
            start = sh
    return chunks


def _progress(show: bool) -> Callable[..., Any]:
    """``bar(iterable, desc=...)``: a tqdm bar on stderr when ``show`` (appearing only once a stage
    has run for :data:`PROGRESS_DELAY` seconds, so quick runs print nothing), else the iterable."""
    if not show:
        return lambda it, desc="": it
    from tqdm import tqdm

    return lambda it, desc="": tqdm(it, desc=desc, leave=False, delay=PROGRESS_DELAY, file=sys.stderr)
