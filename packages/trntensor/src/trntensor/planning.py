"""Contraction planning: opt_einsum's order, with each pairwise step laid out as a GEMM.

A plan depends only on the subscripts, the operand shapes and dtypes and the backend, so it is
computed once and cached. Planning happens in two stages:

1. Each operand is reduced on its own: repeated labels become a diagonal (a strided view),
   size-1 dimensions that broadcast against a larger size are dropped (the operand is constant
   along them), and labels no other operand or the output needs are summed.
2. opt_einsum orders the pairwise contractions of what remains. Each step is classified as a GEMM,
   a batched GEMM or an elementwise (outer or Hadamard) product, and its operands' label orders are
   chosen so that each side reaches the GEMM as a view, transposed by a flag rather than a copy,
   whenever its memory layout allows.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import opt_einsum
import torch

from trntensor._checks import check_int
from trntensor._library import library
from trntensor.subscripts import ParsedSubscripts, label_name, parse_subscripts

__all__ = [
    "ContractionPlan",
    "ContractionStep",
    "OperandPrep",
    "clear_plan_cache",
    "estimate_flops",
    "plan_cache_info",
    "plan_contraction",
]

GEMM = "gemm"
BATCHED_GEMM = "batched_gemm"
ELEMENTWISE = "elementwise"
REDUCTION = "reduction"

# Exhaustive search is cheap up to a handful of operands and the plan is cached; beyond that
# opt_einsum's dynamic programming and random-greedy searches keep planning time bounded.
_OPTIMAL_UP_TO = 6


def _names(labels: Sequence[int]) -> str:
    return "".join(label_name(x) if x < 52 else f"({label_name(x)})" for x in labels)


@dataclass(frozen=True)
class OperandPrep:
    """How one operand is reduced on its own before any pairwise step.

    Attributes
    ----------
    diagonal : tuple of tuple of int or None
        For each distinct label, the dimension positions carrying it (a repeated label takes the
        diagonal); ``None`` when no label repeats.
    squeeze : tuple of int
        Dimensions (after the diagonal) of size 1 that broadcast against a larger size.
    sum_dims : tuple of int
        Dimensions (after squeezing) summed because nothing else needs their label.
    labels : tuple of int
        The operand's labels after these reductions.
    """

    diagonal: tuple[tuple[int, ...], ...] | None
    squeeze: tuple[int, ...]
    sum_dims: tuple[int, ...]
    labels: tuple[int, ...]

    @property
    def is_identity(self) -> bool:
        """True when the operand enters the pairwise steps unchanged."""
        return self.diagonal is None and not self.squeeze and not self.sum_dims


@dataclass(frozen=True)
class ContractionStep:
    """One pairwise contraction of a plan, laid out as ``C[b, m, n] = Σ_k A[b, m, k] B[b, k, n]``.

    Attributes
    ----------
    operands : tuple of int
        Positions in the current operand list (opt_einsum's path convention: the two operands are
        removed and the result appended at the end).
    subscripts : str
        The step as an einsum expression (broadcast dimensions written ``(…0)``).
    strategy : str
        ``"gemm"``, ``"batched_gemm"`` (shared kept labels become the batch) or ``"elementwise"``
        (no summed label: an outer or Hadamard product).
    transpose_a, transpose_b : bool
        Whether A enters as ``K×M`` (B as ``N×K``) and is read transposed, so a layout that puts the
        summed labels first costs no copy.
    copy_a, copy_b : bool
        Whether the operand must be permuted into a copy first (its layout does not match the
        step's label order in either orientation).
    batch, m, n, k : int
        The GEMM sizes (products of the sizes of each label group).
    flops : int
        Floating-point operations of the step (a complex multiply-add counts as 8).
    """

    operands: tuple[int, ...]
    subscripts: str
    strategy: str
    transpose_a: bool
    transpose_b: bool
    copy_a: bool
    copy_b: bool
    batch: int
    m: int
    n: int
    k: int
    flops: int
    # Execution details, in label terms (private: they may change with the kernels).
    _perm_a: tuple[int, ...] | None = None  # None: no permutation
    _perm_b: tuple[int, ...] | None = None
    _view_a: tuple[int, ...] = ()  # the shape each operand is reshaped to (before a transpose)
    _view_b: tuple[int, ...] = ()
    _result_shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class ContractionPlan:
    """How an einsum is evaluated: per-operand reductions, then opt_einsum's pairwise order.

    Attributes
    ----------
    subscripts : str
        The expression as given.
    shapes : tuple of tuple of int
        The operand shapes the plan is for.
    dtype : torch.dtype
        The common (promoted) dtype the contraction runs in and returns.
    backend : str
        The library backend in effect when the plan was made (part of the cache key).
    path : tuple of tuple of int
        opt_einsum's contraction path over the reduced operands.
    steps : tuple of ContractionStep
        One entry per pairwise contraction, in order.
    prep : tuple of OperandPrep
        The single-operand reductions applied first.
    output_shape : tuple of int
        Shape of the result.
    flops : int
        Estimated floating-point operations of the whole evaluation (reductions and steps).
    naive_flops : int
        opt_einsum's estimate for contracting everything in one loop nest, for comparison.
    largest_intermediate : int
        Number of elements of the largest tensor the plan creates (including the result).
    """

    subscripts: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: torch.dtype
    backend: str
    path: tuple[tuple[int, ...], ...]
    steps: tuple[ContractionStep, ...]
    prep: tuple[OperandPrep, ...]
    output_shape: tuple[int, ...]
    flops: int
    naive_flops: int
    largest_intermediate: int
    _final_perm: tuple[int, ...] | None = None  # None: already in output order

    def __str__(self) -> str:
        lines = [
            f"ContractionPlan {self.subscripts!r} ({str(self.dtype).removeprefix('torch.')}, "
            f"backend {self.backend}): {self.flops:,} flops (naive {self.naive_flops:,}), "
            f"largest intermediate {self.largest_intermediate:,} elements"
        ]
        for i, p in enumerate(self.prep):
            if not p.is_identity:
                lines.append(f"  operand {i}: {REDUCTION} (diagonal/squeeze/sum) -> {_names(p.labels)}")
        for s in self.steps:
            flags = "".join(
                text
                for text, on in (
                    (" A^T", s.transpose_a),
                    (" B^T", s.transpose_b),
                    (" copy A", s.copy_a),
                    (" copy B", s.copy_b),
                )
                if on
            )
            lines.append(
                f"  {s.operands}: {s.subscripts:<20} {s.strategy:<13} b={s.batch} m={s.m} n={s.n} "
                f"k={s.k}{flags}"
            )
        return "\n".join(lines)


def _global_sizes(parsed: ParsedSubscripts, shapes: Sequence[Sequence[int]]) -> dict[int, int]:
    """The broadcast size of every label; ValueError when two sizes are incompatible."""
    sizes: dict[int, int] = {}
    for i, (labels, shape) in enumerate(zip(parsed.inputs, shapes)):
        seen: dict[int, int] = {}
        for label, n in zip(labels, shape):
            if label in seen and seen[label] != n:
                raise ValueError(
                    f"einsum: operand {i} repeats subscript {label_name(label)} on dimensions of sizes "
                    f"{seen[label]} and {n}; a diagonal needs equal sizes"
                )
            seen[label] = n
            old = sizes.get(label)
            if old is None or old == 1:
                sizes[label] = n
            elif n not in (1, old):
                raise ValueError(
                    f"einsum: subscript {label_name(label)} has size {n} in operand {i} but {old} "
                    "elsewhere; sizes must match or be 1 (broadcast)"
                )
    return sizes


def _prepare(
    parsed: ParsedSubscripts, shapes: Sequence[Sequence[int]], sizes: dict[int, int]
) -> tuple[list[OperandPrep], int]:
    """Single-operand reductions of every operand, and their FLOPs."""
    after_squeeze: list[tuple[int, ...]] = []
    stage: list[tuple[tuple[tuple[int, ...], ...] | None, tuple[int, ...]]] = []
    for labels, shape in zip(parsed.inputs, shapes):
        distinct = tuple(dict.fromkeys(labels))
        diagonal = None
        if len(distinct) != len(labels):
            diagonal = tuple(tuple(p for p, x in enumerate(labels) if x == d) for d in distinct)
        dsize = {x: n for x, n in zip(labels, shape)}
        squeeze = tuple(p for p, x in enumerate(distinct) if dsize[x] == 1 and sizes[x] != 1)
        kept = tuple(x for p, x in enumerate(distinct) if p not in squeeze)
        after_squeeze.append(kept)
        stage.append((diagonal, squeeze))
    counts = Counter(x for kept in after_squeeze for x in kept)
    output = set(parsed.output)
    preps = []
    flops = 0
    for (diagonal, squeeze), kept in zip(stage, after_squeeze):
        sum_dims = tuple(p for p, x in enumerate(kept) if counts[x] == 1 and x not in output)
        if sum_dims:
            flops += math.prod(sizes[x] for x in kept)
        labels = tuple(x for p, x in enumerate(kept) if p not in sum_dims)
        preps.append(OperandPrep(diagonal, squeeze, sum_dims, labels))
    return preps, flops


def _layout(
    current: tuple[int, ...], batch: list[int], free: list[int], summed: list[int], summed_first: bool
) -> tuple[tuple[int, ...], bool, bool]:
    """Permutation bringing an operand to GEMM order, whether it is read transposed, and whether
    that permutation needs a copy (assuming the operand is contiguous in its current order)."""
    plain = batch + (summed + free if summed_first else free + summed)
    flipped = batch + (free + summed if summed_first else summed + free)
    if tuple(plain) == current:
        return tuple(current.index(x) for x in plain), False, False
    if tuple(flipped) == current and summed and free:
        return tuple(current.index(x) for x in flipped), True, False
    return tuple(current.index(x) for x in plain), False, True


def _step(
    position: tuple[int, ...],
    a: tuple[int, ...],
    b: tuple[int, ...],
    keep: set[int],
    sizes: dict[int, int],
    flop_factor: int,
) -> tuple[ContractionStep, tuple[int, ...]]:
    """Lay out the contraction of operands with labels ``a`` and ``b`` as one (batched) GEMM."""
    in_a, in_b = set(a), set(b)
    # Batch and summed labels follow the larger operand's order, so it is the one read as a view.
    ref = b if math.prod(sizes[x] for x in b) > math.prod(sizes[x] for x in a) else a
    batch = [x for x in ref if x in in_a and x in in_b and x in keep]
    summed = [x for x in ref if x in in_a and x in in_b and x not in keep]
    free_a = [x for x in a if x not in in_b]
    free_b = [x for x in b if x not in in_a]
    nb = math.prod(sizes[x] for x in batch)
    m = math.prod(sizes[x] for x in free_a)
    n = math.prod(sizes[x] for x in free_b)
    k = math.prod(sizes[x] for x in summed)
    if summed:
        perm_a, trans_a, copy_a = _layout(a, batch, free_a, summed, summed_first=False)
        perm_b, trans_b, copy_b = _layout(b, batch, free_b, summed, summed_first=True)
        strategy = BATCHED_GEMM if batch else GEMM
        flops = 2 * nb * m * n * k * flop_factor
    else:
        perm_a, _, copy_a = _layout(a, batch, free_a, [], summed_first=False)
        perm_b, _, copy_b = _layout(b, batch, free_b, [], summed_first=False)
        trans_a = trans_b = False
        strategy = ELEMENTWISE
        flops = nb * m * n * flop_factor
    result = tuple(batch + free_a + free_b)
    lead = (nb,) if batch else ()
    if strategy == ELEMENTWISE:
        view_a, view_b = (*lead, m, 1), (*lead, 1, n)
    else:
        view_a = (*lead, k, m) if trans_a else (*lead, m, k)
        view_b = (*lead, n, k) if trans_b else (*lead, k, n)
    return ContractionStep(
        operands=position,
        subscripts=f"{_names(a)},{_names(b)}->{_names(result)}",
        strategy=strategy,
        transpose_a=trans_a,
        transpose_b=trans_b,
        copy_a=copy_a,
        copy_b=copy_b,
        batch=nb,
        m=m,
        n=n,
        k=k,
        flops=flops,
        _perm_a=None if perm_a == tuple(range(len(a))) else perm_a,
        _perm_b=None if perm_b == tuple(range(len(b))) else perm_b,
        _view_a=view_a,
        _view_b=view_b,
        _result_shape=tuple(sizes[x] for x in result),
    ), result


def _path(
    labels: list[tuple[int, ...]], output: tuple[int, ...], sizes: dict[int, int]
) -> tuple[list[tuple[int, ...]], int]:
    """opt_einsum's path and its naive cost for the reduced operands."""
    sym = {x: opt_einsum.get_symbol(i) for i, x in enumerate(sizes)}
    eq = ",".join("".join(sym[x] for x in t) for t in labels) + "->" + "".join(sym[x] for x in output)
    shapes = [tuple(sizes[x] for x in t) for t in labels]
    optimize = "optimal" if len(labels) <= _OPTIMAL_UP_TO else "auto-hq"
    path, info = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=optimize)
    return [tuple(int(i) for i in p) for p in path], int(info.naive_cost)


@functools.lru_cache(maxsize=1024)
def cached_plan(
    subscripts: str, shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype, backend: str
) -> ContractionPlan:
    parsed = parse_subscripts(subscripts, [len(s) for s in shapes])
    sizes = _global_sizes(parsed, shapes)
    flop_factor = 4 if dtype.is_complex else 1
    preps, flops = _prepare(parsed, shapes, sizes)
    flops *= flop_factor
    current = [p.labels for p in preps]
    output = parsed.output
    output_shape = tuple(sizes[x] for x in output)
    largest = math.prod(output_shape)
    for p in preps:
        if not p.is_identity:
            largest = max(largest, math.prod(sizes[x] for x in p.labels))
    steps: list[ContractionStep] = []
    path: list[tuple[int, ...]] = []
    naive = flops
    if len(current) > 1:
        path, naive = _path(current, output, sizes)
        naive = naive * flop_factor
        for pos in path:
            if len(pos) != 2:  # opt_einsum paths over reduced operands are pairwise
                raise RuntimeError(f"einsum planner: unexpected path step {pos}")
            a, b = current[pos[0]], current[pos[1]]
            rest = [t for i, t in enumerate(current) if i not in pos]
            keep = set(output).union(*map(set, rest)) if rest else set(output)
            step, result = _step(pos, a, b, keep, sizes, flop_factor)
            steps.append(step)
            flops += step.flops
            largest = max(largest, math.prod(step._result_shape))
            current = [*rest, result]
    final = current[0]
    final_perm = tuple(final.index(x) for x in output)
    return ContractionPlan(
        subscripts=subscripts,
        shapes=shapes,
        dtype=dtype,
        backend=backend,
        path=tuple(path),
        steps=tuple(steps),
        prep=tuple(preps),
        output_shape=output_shape,
        flops=int(flops),
        naive_flops=int(max(naive, flops)),
        largest_intermediate=int(largest),
        _final_perm=None if final_perm == tuple(range(len(output))) else final_perm,
    )


def _shape_of(value: object, i: int) -> tuple[tuple[int, ...], torch.dtype | None]:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype
    if isinstance(value, (tuple, list, torch.Size)):
        return tuple(check_int(n, f"shape {i} entry", minimum=0) for n in value), None
    raise TypeError(
        f"plan_contraction: operand {i} must be a torch.Tensor or a shape, got {type(value).__name__}"
    )


def plan_contraction(
    subscripts: str, *operands: torch.Tensor | Sequence[int], dtype: torch.dtype | None = None
) -> ContractionPlan:
    """Plan an einsum: the contraction order, each step's GEMM layout, FLOPs and peak size.

    Plans are cached on (subscripts, shapes, dtypes, backend), so planning the same contraction
    again costs a dictionary lookup. :func:`trntensor.einsum` uses the same plans.

    Parameters
    ----------
    subscripts : str
        An einsum expression in torch.einsum's grammar.
    *operands : torch.Tensor or sequence of int
        The operands, or only their shapes.
    dtype : torch.dtype, optional
        The dtype of operands given as shapes (default float32); tensors use their own dtypes,
        promoted together as torch's type promotion does.

    Returns
    -------
    ContractionPlan
        The path, the per-step strategies and the cost estimates.
    """
    if not operands:
        raise ValueError("plan_contraction: at least one operand (or shape) is required")
    shapes = []
    dtypes = []
    for i, op in enumerate(operands):
        shape, dt = _shape_of(op, i)
        shapes.append(shape)
        dtypes.append(dt if dt is not None else (dtype or torch.float32))
    return cached_plan(
        subscripts, tuple(shapes), functools.reduce(torch.promote_types, dtypes), library.get_backend()
    )


def estimate_flops(
    subscripts: str, *operands: torch.Tensor | Sequence[int], dtype: torch.dtype | None = None
) -> int:
    """Floating-point operations :func:`trntensor.einsum` performs for this contraction.

    The same number as ``plan_contraction(subscripts, *operands).flops``: the planned path's cost,
    two operations per real multiply-add and eight per complex one. (The public trnsci
    ``estimate_flops`` returned the product of every index size, i.e. multiply-adds of one loop
    nest; ``plan_contraction(...).naive_flops`` is that loop nest's cost in operations. See the
    docs page "Coming from the trnsci packages".)

    Parameters
    ----------
    subscripts : str
        An einsum expression in torch.einsum's grammar.
    *operands : torch.Tensor or sequence of int
        The operands, or only their shapes.
    dtype : torch.dtype, optional
        The dtype of operands given as shapes (default float32).
    """
    return plan_contraction(subscripts, *operands, dtype=dtype).flops


def plan_cache_info() -> Any:
    """Hits, misses and size of the contraction-plan cache (``functools.lru_cache`` statistics)."""
    return cached_plan.cache_info()


def clear_plan_cache() -> None:
    """Drop every cached contraction plan (later calls plan again)."""
    cached_plan.cache_clear()
