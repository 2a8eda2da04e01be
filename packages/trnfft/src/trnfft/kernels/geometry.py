"""Host-side geometry and constant tables of the FFT stage kernel (:mod:`trnfft.kernels.fft`).

A transform of length ``n`` runs as Stockham autosort stages. Before stage ``s`` the data holds,
for every ``k < L`` (``L`` = product of the earlier radices), the length-``L`` DFTs of the ``L``
interleaved subsequences; stage ``s`` with radix ``R`` and ``rest = n / (L R)`` computes

    out[j L rest + k rest + q] = sum_p  F_R[j, p] w_{L R}^{k p}  in[k R rest + p rest + q]

(``j, p < R``, ``q < rest``), so after the last stage ``out`` is the DFT in natural order.

On the Tensor Engine a stage is a matmul that contracts over the partition dimension: ``p`` sits on
the partitions, the columns are ``(batch, q)``, and the twiddles ``w^{k p}`` are multiplied into the
stationary matrix (twiddles fused, no vector work). A matmul costs its moving columns whatever number
of the 128 PE rows it uses (AWS Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0): matmul II ≈
max(N, 64)), so ``G = 128 // R`` independent groups share one pass through a block-diagonal stationary:
``Gk`` consecutive ``k`` (each with its own twiddled block) times ``Gb`` batch slices (identical
blocks). Group over ``k`` first: blocks for ``Gk`` values of ``k`` share one stationary, and the batch
groups only multiply the columns' reach.

Stage radices come from the plan (radix 8 and 4 for powers of two, 2/3/5/7/11/13 for mixed radix);
``grouping="fused"`` (the default) multiplies consecutive plan radices while the product stays
<= 128 (a radix-64 stage is two radix-8 stages done in one Tensor Engine pass, and costs one pass);
``grouping="plan"`` runs one kernel stage per plan radix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trncore.keys import bucket_dim

__all__ = [
    "PARTITIONS",
    "KernelGeometry",
    "KernelStage",
    "OnChip3Geometry",
    "OnChipGeometry",
    "build_matrix_tables",
    "build_onchip3_tables",
    "build_onchip_tables",
    "build_stage_tables",
    "group_radices",
    "kernel_geometry",
    "onchip3_geometry",
    "onchip_geometry",
]

#: Partitions of SBUF/PSUM and rows of the PE array (``nl.tile_size.pmax``, AWS NKI docs, NKI 0.3.0).
PARTITIONS = 128
#: Largest moving free size of one ``nc_matmul`` (one PSUM bank of fp32, AWS NKI docs, nki.isa.nc_matmul
#: (NKI 0.3.0)).
MOVING_MAX = 512
#: Elements of one plane a batch tile may hold (``batch_tile * n``): 8 KiB per partition per plane.
_TILE_ELEMENTS = 1 << 18
#: SBUF bytes per partition one chunk group's tiles may use (of 180224 on trn1, docs/hardware.md).
_GROUP_BYTES = 128 * 1024


@dataclass(frozen=True)
class KernelStage:
    """One Stockham stage as the kernel runs it (all compile-time integers).

    ``L``: product of the earlier radices; ``R``: this stage's radix; ``rest = n / (L R)``;
    ``gk`` twiddle groups and ``gb`` batch groups per pass (``(gk * gb) * R`` partitions used);
    ``chunks = L / gk`` stationaries; ``group`` chunks per SBUF load; ``offset``: where the stage's
    stationaries start in the flat tables.
    """

    L: int
    R: int
    rest: int
    gk: int
    gb: int
    group: int
    offset: int

    @property
    def partitions(self) -> int:
        """Partitions one pass uses."""
        return self.gk * self.gb * self.R

    @property
    def chunks(self) -> int:
        """Number of distinct stationary matrices (one per ``gk`` consecutive ``k``)."""
        return self.L // self.gk

    def as_tuple(self) -> tuple[int, ...]:
        """The kernel's compile-time form."""
        return (self.L, self.R, self.rest, self.gk, self.gb, self.group, self.offset)


@dataclass(frozen=True)
class KernelGeometry:
    """Every compile-time fact of one transform length: stages, batch tiling, table size."""

    n: int
    stages: tuple[KernelStage, ...]
    batch_multiple: int
    batch_tile: int
    table_elements: int

    def padded_batch(self, batch: int) -> int:
        """The batch the kernel runs for ``batch`` rows (a multiple of every stage's batch groups).

        Geometric buckets (a power of two times the batch multiple, then whole batch tiles) keep
        the number of compiled kernels per length logarithmic in the batch (``trncore.keys``).
        """
        padded = bucket_dim(batch, self.batch_multiple, geometric=True)
        if padded <= self.batch_tile:
            return padded
        return bucket_dim(batch, self.batch_tile)

    def tile_for(self, padded: int) -> int:
        """The batch tile the kernel loops over for a padded batch."""
        return min(padded, self.batch_tile)

    def stage_params(self) -> tuple[tuple[int, ...], ...]:
        """Stages as nested tuples of ints (kernel parameters must be hashable constants)."""
        return tuple(s.as_tuple() for s in self.stages)


def group_radices(radices: tuple[int, ...], grouping: str = "fused") -> tuple[int, ...]:
    """Kernel stage radices: the plan's (``"plan"``), or runs of them multiplied up to 128."""
    if grouping == "plan":
        return tuple(radices)
    if grouping != "fused":
        raise ValueError(f"grouping must be 'fused' or 'plan', got {grouping!r}")
    out: list[int] = []
    for r in radices:
        if out and out[-1] * r <= PARTITIONS:
            out[-1] *= r
        else:
            out.append(r)
    return tuple(out)


def _largest_divisor_at_most(value: int, bound: int) -> int:
    for d in range(min(value, bound), 0, -1):
        if value % d == 0:
            return d
    return 1


def kernel_geometry(n: int, radices: tuple[int, ...]) -> KernelGeometry:
    """Stage layout, batch tiling and chunk grouping for length ``n`` with stage ``radices``."""
    if math.prod(radices) != n or any(r > PARTITIONS for r in radices):
        raise ValueError(f"radices {radices} do not factor n={n} into stages of at most {PARTITIONS}")
    raw = []
    length = 1
    for r in radices:
        groups = PARTITIONS // r
        gk = _largest_divisor_at_most(length, groups)
        raw.append((length, r, n // (length * r), gk, groups // gk))
        length *= r
    multiple = math.lcm(*(gb for *_, gb in raw))
    tile = max(multiple, (_TILE_ELEMENTS // n) // multiple * multiple)
    stages = []
    offset = 0
    for length, r, rest, gk, gb in raw:
        parts = gk * gb * r
        columns = (tile // gb) * rest  # moving columns per chunk (one batch tile)
        # per chunk: in, out (2 planes each) and one spare plane of data, 4 stationary planes
        per_chunk = 4 * (6 * columns + 4 * parts)
        chunks = length // gk
        group = max(1, min(chunks, _GROUP_BYTES // per_chunk))
        stages.append(KernelStage(length, r, rest, gk, gb, group, offset))
        offset += chunks * parts * parts
    return KernelGeometry(n, tuple(stages), multiple, tile, offset)


def _roots(exponent: torch.Tensor, denominator: int) -> torch.Tensor:
    """``exp(-2πi e / d)`` in complex128 with the integer exponent reduced first (exact angles)."""
    reduced = torch.remainder(exponent, denominator).to(torch.float64)
    return torch.polar(torch.ones_like(reduced), reduced * (-2.0 * math.pi / denominator))


def _stage_blocks(stage: KernelStage) -> torch.Tensor:
    """Stationaries of one stage, ``(chunks, P, P)`` complex128, block diagonal.

    Entry ``[(kl, bh, p), (kl, bh, j)]`` of chunk ``c`` is ``F_R[j, p] w_{L R}^{k p}`` with
    ``k = c gk + kl``: ``exp(-2πi p (j L + k) / (L R))``.
    """
    L, R, gk, gb = stage.L, stage.R, stage.gk, stage.gb
    k = torch.arange(L, dtype=torch.int64)
    p = torch.arange(R, dtype=torch.int64)
    j = torch.arange(R, dtype=torch.int64)
    # w[k, p, j] = exp(-2πi p (j L + k) / (L R))
    w = _roots(p[None, :, None] * (j[None, None, :] * L + k[:, None, None]), L * R)
    w = w.reshape(stage.chunks, gk, R, R)
    eye_k = torch.eye(gk, dtype=torch.complex128)
    eye_b = torch.eye(gb, dtype=torch.complex128)
    blocks = torch.einsum("ka,bd,ckpj->ckbpadj", eye_k, eye_b, w)
    return blocks.reshape(stage.chunks, stage.partitions, stage.partitions)


def build_stage_tables(
    geometry: KernelGeometry, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """The flat stationary planes ``(Re W, Im W)`` of every stage, rounded once from complex128.

    The kernel derives the third plane its complex products need on chip (``-Im W`` for four
    multiplications, ``Re W + Im W`` and ``Im W - Re W`` for three).
    """
    blocks = [_stage_blocks(s).reshape(-1) for s in geometry.stages]
    w = torch.cat(blocks) if blocks else torch.zeros(0, dtype=torch.complex128)
    return w.real.to(dtype).contiguous(), w.imag.to(dtype).contiguous()


def build_matrix_tables(
    geometry: KernelGeometry, matrix: torch.Tensor, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stationary planes that make a one-stage geometry apply ``matrix`` instead of the DFT.

    ``geometry`` must be the single stage of ``kernel_geometry(n, (n,))`` (the ``dft_gemm`` case);
    ``matrix`` is ``(n, n)``, real or complex, with ``y = matrix @ x`` per row. The block of batch
    group ``bh`` holds ``matrix[j, p]`` at ``[(bh, p), (bh, j)]``, exactly where
    :func:`build_stage_tables` puts ``F_n[j, p]``; the real-to-real transforms of n <= 128 use it
    with their whole (extension, twiddles, scaling) matrix folded into the stationary.
    """
    if len(geometry.stages) != 1 or geometry.stages[0].L != 1:
        raise ValueError("build_matrix_tables needs a one-stage geometry (n <= 128)")
    stage = geometry.stages[0]
    if tuple(matrix.shape) != (stage.R, stage.R):
        raise ValueError(f"matrix must be ({stage.R}, {stage.R}), got {tuple(matrix.shape)}")
    transposed = matrix.to(torch.complex128).T.contiguous()
    w = torch.kron(torch.eye(stage.gb, dtype=torch.complex128), transposed).reshape(-1)
    return w.real.to(dtype).contiguous(), w.imag.to(dtype).contiguous()


#: SBUF bytes per partition the on-chip kernel's data tiles may use (of 180224 on trn1,
#: docs/hardware.md): the rest holds its constant tables and per-chunk stationaries.
_ONCHIP_DATA_BYTES = 140 * 1024
#: Batch tiles of fewer rows take the on-chip kernel's ``twiddle_data`` form (see ``params``).
TWIDDLE_DATA_BELOW = 128


@dataclass(frozen=True)
class OnChipGeometry:
    """Compile-time facts of :func:`trnfft.kernels.fft.fft_onchip_kernel` for one length.

    ``n = n1 * n2`` (``n2`` the largest divisor of ``n`` not above 128, ``n1 <= 128``); ``group``
    rows share one stage-1 pass (``group * n1 <= 128`` contraction rows); ``batch_tile`` rows are
    transformed per SBUF load (a multiple of ``group``, at most 512, sized so that the input, the
    intermediate and the output of a tile fit ``_ONCHIP_DATA_BYTES`` per partition).
    """

    n: int
    n1: int
    n2: int
    group: int
    batch_tile: int

    @property
    def batch_multiple(self) -> int:
        """Batches are padded to a multiple of this."""
        return self.group

    def padded_batch(self, batch: int) -> int:
        """The batch the kernel runs for ``batch`` rows (geometric buckets, then whole tiles)."""
        padded = bucket_dim(batch, self.group, geometric=True)
        if padded <= self.batch_tile:
            return padded
        return bucket_dim(batch, self.batch_tile)

    def tile_for(self, padded: int) -> int:
        """The batch tile the kernel loops over for a padded batch."""
        return min(padded, self.batch_tile)

    def params(self, padded: int) -> dict[str, int | bool]:
        """The kernel's compile-time parameters for a padded batch.

        Tiles of fewer than :data:`TWIDDLE_DATA_BELOW` rows multiply the twiddles into the data
        (work proportional to the rows) rather than into ``n1`` stage-2 stationaries rebuilt for
        every tile (work independent of the rows); the cost model puts the crossover near 128
        rows (n = 4096: 35.1 against 41.6 us at 128 rows, 18.8 against 7.8 us at 8).
        """
        tile = self.tile_for(padded)
        return {
            "n1": self.n1,
            "n2": self.n2,
            "group": self.group,
            "batch_tile": tile,
            "twiddle_data": tile < TWIDDLE_DATA_BELOW,
        }


def onchip_geometry(n: int) -> OnChipGeometry | None:
    """The on-chip two-stage layout of length ``n``, or None where it does not apply.

    It applies to ``128 < n <= 128 * 128`` with a factorisation ``n = n1 * n2``, both factors at
    most 128, and a batch tile of at least ``group`` rows within the SBUF budget. Beyond (``n >
    16384``, or a factor above 128 such as ``2197 = 13^3``) the staged kernel runs, its stages
    exchanging data through HBM.
    """
    if n <= PARTITIONS or n > PARTITIONS * PARTITIONS:
        return None
    n2 = _largest_divisor_at_most(n, PARTITIONS)
    n1 = n // n2
    if n1 > PARTITIONS:
        return None
    group = PARTITIONS // n1
    # per row of a tile: input planes (re, im, re + im) hold n2 / group values per partition,
    # the intermediate (three planes) and the output (two) n1 each
    per_row = 4 * (3 * n2 / group + 5 * n1)
    tile = min(512, int(_ONCHIP_DATA_BYTES // per_row)) // group * group
    if tile < group:
        return None
    return OnChipGeometry(n, n1, n2, group, tile)


def build_onchip_tables(
    geometry: OnChipGeometry, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, ...]:
    """The on-chip kernel's constants as float32 planes, rounded once from complex128.

    ``(mr, mi)``: the stage-1 moving matrix, ``group`` copies of ``F_n1[j1, k1]`` on the diagonal
    (``(group n1, group n1)``); ``(fr, fi)``: ``F_n2[j2, k2]`` (``(n2, n2)``); ``(twr, twi)``: the
    twiddles ``w_n^{j2 k1}`` (``(n2, n1)``). ``n`` twiddles and two small DFT matrices in all,
    where the staged kernel's second stage loads ``n1`` twiddled stationaries.
    """
    n, n1, n2, group = geometry.n, geometry.n1, geometry.n2, geometry.group
    i1 = torch.arange(n1, dtype=torch.int64)
    i2 = torch.arange(n2, dtype=torch.int64)
    f1 = _roots(torch.outer(i1, i1), n1)
    moving = torch.kron(torch.eye(group, dtype=torch.complex128), f1)
    f2 = _roots(torch.outer(i2, i2), n2)
    tw = _roots(torch.outer(i2, i1), n)
    out: list[torch.Tensor] = []
    for table in (moving, f2, tw):
        out += [table.real.to(dtype).contiguous(), table.imag.to(dtype).contiguous()]
    return tuple(out)


@dataclass(frozen=True)
class OnChip3Geometry:
    """Compile-time facts of :func:`trnfft.kernels.fft.fft_onchip3_kernel` for one length.

    ``n = n1 * n2 * n3`` (``n3``, then ``n2``, the largest divisors not above 128); ``group``
    values of ``j3`` share a stage-1 pass (``group * n1 <= 128``); ``batch_tile`` rows per SBUF load
    (a tile's input, two intermediates and output within ``_ONCHIP_DATA_BYTES`` per partition).
    """

    n: int
    n1: int
    n2: int
    n3: int
    group: int
    batch_tile: int

    def padded_batch(self, batch: int) -> int:
        """The batch the kernel runs for ``batch`` rows (whole tiles)."""
        return bucket_dim(batch, self.batch_tile) if batch > self.batch_tile else max(1, batch)

    def tile_for(self, padded: int) -> int:
        """The batch tile the kernel loops over for a padded batch."""
        return min(padded, self.batch_tile)

    def params(self, padded: int) -> dict[str, int]:
        """The kernel's compile-time parameters for a padded batch."""
        return {
            "n1": self.n1,
            "n2": self.n2,
            "n3": self.n3,
            "group": self.group,
            "batch_tile": self.tile_for(padded),
        }


def onchip3_geometry(n: int) -> OnChip3Geometry | None:
    """The three-stage on-chip layout of length ``n > 128 * 128``, or None where it does not apply
    (a factor above 128, or not even one row fitting the SBUF budget: about ``n > 2^18``)."""
    if n <= PARTITIONS * PARTITIONS:
        return None
    n3 = _largest_divisor_at_most(n, PARTITIONS)
    n2 = _largest_divisor_at_most(n // n3, PARTITIONS)
    n1 = n // (n2 * n3)
    if n1 > PARTITIONS:
        return None
    group = _largest_divisor_at_most(n3, PARTITIONS // n1)
    per_row = 4 * (3 * n2 * n3 / group + 3 * n3 * n1 + 5 * n1 * n2)
    tile = min(512, int(_ONCHIP_DATA_BYTES // per_row))
    if tile < 1:
        return None
    return OnChip3Geometry(n, n1, n2, n3, group, tile)


def build_onchip3_tables(
    geometry: OnChip3Geometry, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, ...]:
    """The three-stage kernel's constants as float32 planes, rounded once from complex128:
    ``group`` copies of ``F_n1`` on a diagonal, ``F_n2``, ``F_n3``, the stage-1 twiddles
    ``w_n^{(n3 j2 + j3) k1}`` as ``(n2, n3 n1)`` and the stage-2 twiddles ``w_{n2 n3}^{j3 k2}`` as
    ``(n3, n2)``."""
    n, n1, n2, n3 = geometry.n, geometry.n1, geometry.n2, geometry.n3
    i1, i2, i3 = (torch.arange(v, dtype=torch.int64) for v in (n1, n2, n3))
    moving = torch.kron(torch.eye(geometry.group, dtype=torch.complex128), _roots(torch.outer(i1, i1), n1))
    f2 = _roots(torch.outer(i2, i2), n2)
    f3 = _roots(torch.outer(i3, i3), n3)
    big_j = n3 * i2[:, None] + i3[None, :]  # (n2, n3)
    ta = _roots(big_j[:, :, None] * i1[None, None, :], n).reshape(n2, n3 * n1)
    tb = _roots(torch.outer(i3, i2), n2 * n3)
    out: list[torch.Tensor] = []
    for table in (moving, f2, f3, ta, tb):
        out += [table.real.to(dtype).contiguous(), table.imag.to(dtype).contiguous()]
    return tuple(out)
