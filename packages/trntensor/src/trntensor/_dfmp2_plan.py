"""The fixed decomposition of the DF-MP2 driver and its memory plan.

The decomposition (occupied blocks, which rank owns which block) does not depend on anything but
the block size and the number of ranks; the plan counts, before anything is computed, the bytes
one rank holds at its peak in each phase of :func:`trntensor.dfmp2.dfmp2_energy`, and decides
whether the fitted ``B`` of the rank's own blocks stays in memory or goes to an HDF5 file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trntensor._pytorch import REFERENCE_UNPACK_BYTES

__all__ = ["AUX_CHUNK", "OCC_BLOCK", "MemoryPlan", "blocks", "memory_plan", "owned", "owner"]

#: Auxiliary functions per integral chunk (whole shells): fixed, so the chunks do not depend on
#: the number of ranks.
AUX_CHUNK = 12
#: Occupied orbitals per block of the pair loop: fixed for the same reason.
OCC_BLOCK = 2

_F64 = 8


def blocks(n: int, size: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` of ``range(n)`` in pieces of ``size``."""
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def owner(k: int, ranks: int) -> int:
    """The rank that owns occupied block ``k``: a snake order (0, 1, .., R-1, R-1, .., 0, 0, ..),
    because block ``k`` has the pairs ``(k, l ≥ k)``, fewer for later blocks."""
    r = k % (2 * ranks)
    return r if r < ranks else 2 * ranks - 1 - r


def owned(count: int, rank: int, ranks: int) -> list[int]:
    """The blocks among ``count`` that ``rank`` owns."""
    return [k for k in range(count) if owner(k, ranks) == rank]


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes one rank needs, by use and by phase (see :func:`memory_plan`).

    The run goes through four phases: the integrals with their transform (chunk by chunk, into
    the rank's own ``B`` blocks), the metric's factor (built on rank 0 and broadcast), the fit,
    and the pair energies. :attr:`total` is the largest of the four.
    """

    metric: int  #: the metric's factor (Cholesky, or J^{-1/2}), held by every rank for the fit
    metric_build: int  #: J, its eigenvectors and the product, while J^{-1/2} is formed (rank 0)
    integrals: int  #: one chunk of (μν|P), unpacked, transformed, and one received chunk
    b_own: int  #: the fitted B rows of the rank's own blocks resident in memory (0 when streamed)
    b_visiting: int  #: the two block buffers of the pair loop (the block in use and the next)
    energy: int  #: the intermediates of one row of a pair block
    budget: int | None
    streamed: bool = False  #: the own blocks live in an HDF5 file, read one block at a time
    disk: int = 0  #: bytes of that file (the rank's own B blocks)
    b_block: int = 0  #: the largest block (a block read from disk when streamed)
    b_row: int = 0  #: one occupied row of B (the fit works row by row, in place)

    @property
    def phases(self) -> dict[str, int]:
        """Peak bytes of each phase."""
        work = self.b_block if self.streamed else 0  # an own block read from disk to pair with
        return {
            "integrals": self.integrals + self.b_own,
            "metric": self.b_own + self.metric_build,  # on rank 0, after the integrals
            # the solver's column-major copy of a row and its result (plus the block itself when
            # it was read from disk)
            "fit": self.metric + self.b_own + work + 2 * self.b_row,
            "pairs": self.b_own + self.b_visiting + work + self.energy,  # the factor is gone
        }

    @property
    def total(self) -> int:
        """The peak over the phases: what the budget is compared with."""
        return max(self.phases.values())

    def fits(self) -> bool:
        """True without a budget, or when the total is within it."""
        return self.budget is None or self.total <= self.budget

    def describe(self) -> str:
        """The parts and the peak in MiB, on one line."""
        mib = 2.0**20
        own = (
            f"B own blocks on disk {self.disk / mib:.1f} MiB (HDF5, read a block at a time)"
            if self.streamed else f"B own blocks {self.b_own / mib:.1f} MiB"
        )
        parts = [
            f"metric factor {self.metric / mib:.1f} MiB (building it {self.metric_build / mib:.1f})",
            f"integrals chunk {self.integrals / mib:.1f} MiB",
            own,
            f"B block {self.b_block / mib:.1f} MiB",
            f"B blocks in flight {self.b_visiting / mib:.1f} MiB",
            f"pair row {self.energy / mib:.1f} MiB",
        ]
        limit = "no budget" if self.budget is None else f"budget {self.budget / mib:.1f} MiB"
        return f"memory per rank: {', '.join(parts)}; peak {self.total / mib:.1f} MiB ({limit})"


def memory_plan(
    nbasis: int,
    nocc: Sequence[int],
    nvir: Sequence[int],
    naux: int,
    ranks: int,
    budget: int | None = None,
    *,
    occ_block: int = OCC_BLOCK,
    aux_chunk: int = AUX_CHUNK,
    stream: bool | None = None,
) -> MemoryPlan:
    """The peak bytes per rank of :func:`~trntensor.dfmp2.dfmp2_energy` (float64), before anything
    is computed, and whether ``B`` is streamed from disk.

    Parameters
    ----------
    nbasis : int
        Orbital basis functions.
    nocc, nvir : sequence of int
        Active occupied and virtual orbitals per spin.
    naux : int
        Auxiliary basis functions.
    ranks : int
        Number of processes.
    budget : int, optional
        Bytes allowed per rank. When the plan with ``B`` in memory exceeds it, the plan streams
        the rank's own ``B`` blocks through an HDF5 file (``streamed``), which may then fit.
    occ_block, aux_chunk : int
        The decomposition (see :func:`~trntensor.dfmp2.dfmp2_energy`).
    stream : bool, optional
        Force ``B`` to disk (True) or to memory (False) instead of deciding by the budget.
    """
    npair = nbasis * (nbasis + 1) // 2
    chunk = min(aux_chunk, naux) + 16  # whole shells may run past AUX_CHUNK by a shell
    # packed (μν|P) of one chunk (PySCF's output buffer), our transformed rows and a received
    # chunk, and the transform's workspace for a few functions at a time
    # (trntensor._pytorch.REFERENCE_UNPACK_BYTES): at its peak the unpacked (μ, ν) block with
    # either the transposed triangles it is gathered from or the half-transformed (i, ν)
    unpacked = max(1, min(chunk, REFERENCE_UNPACK_BYTES // max(1, _F64 * nbasis * nbasis)))
    work = unpacked * (nbasis * nbasis + max(npair, nbasis * max(nocc, default=0)))
    integrals = _F64 * (chunk * (npair + 2 * sum(o * v for o, v in zip(nocc, nvir))) + work)
    own = biggest = row = 0
    for o, v in zip(nocc, nvir):
        row = max(row, _F64 * v * naux)
        sizes = [b - a for a, b in blocks(o, occ_block)]
        per_rank = [sum(sizes[k] for k in owned(len(sizes), r, ranks)) for r in range(ranks)]
        own += _F64 * max(per_rank, default=0) * v * naux
        biggest = max(biggest, _F64 * max(sizes, default=0) * v * naux)
    vmax = max(nvir, default=0)
    energy = 3 * _F64 * vmax * occ_block * vmax  # T, T/Δ and T' of one row against a block
    metric, metric_build = _F64 * naux * naux, 4 * _F64 * naux * naux
    # One process with B in memory pairs its blocks in place; otherwise two block buffers travel.
    in_memory = MemoryPlan(
        metric, metric_build, integrals, own, 2 * biggest if ranks > 1 else 0, energy, budget,
        b_block=biggest, b_row=row,
    )
    if stream is None:
        stream = not in_memory.fits()
    if not stream:
        return in_memory
    return MemoryPlan(
        metric, metric_build, integrals, 0, 2 * biggest, energy, budget,
        streamed=True, disk=own, b_block=biggest, b_row=row,
    )
