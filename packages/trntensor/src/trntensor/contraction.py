"""einsum and multi_einsum: torch.einsum's semantics, evaluated along a cached contraction plan."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from trncore import xla
from trncore.dispatch import Route
from trntensor import _ops
from trntensor._checks import check_scalar
from trntensor._library import library
from trntensor.planning import ELEMENTWISE, ContractionPlan, ContractionStep, OperandPrep, cached_plan
from trntensor.subscripts import sublist_to_subscripts

__all__ = ["einsum", "multi_einsum"]


def _split_args(subscripts: Any, operands: Sequence[Any]) -> tuple[str, list[Any]]:
    """Accept ``einsum(eq, *ops)``, ``einsum(eq, [ops])`` and torch's sublist form."""
    if isinstance(subscripts, torch.Tensor):
        return sublist_to_subscripts([subscripts, *operands])
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str, got {type(subscripts).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        return subscripts, list(operands[0])
    return subscripts, list(operands)


def _check_operands(operands: Sequence[Any]) -> tuple[torch.device, torch.dtype]:
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    for i, op in enumerate(operands):
        if not isinstance(op, torch.Tensor):
            raise TypeError(f"einsum: operand {i} must be a torch.Tensor, got {type(op).__name__}")
        if op.dtype == torch.bool:
            raise TypeError(f"einsum: operand {i} is bool; einsum needs a numeric dtype")
    device = operands[0].device
    for i, op in enumerate(operands[1:], start=1):
        if op.device != device:
            raise ValueError(f"einsum: operand {i} is on {op.device} but operand 0 is on {device}")
    dtype = functools.reduce(torch.promote_types, (op.dtype for op in operands))
    return device, dtype


def _prep_operand(x: torch.Tensor, prep: OperandPrep) -> torch.Tensor:
    if prep.diagonal is not None:
        # A repeated label walks the dimensions together: a view whose stride is their sum.
        shape, stride = x.shape, x.stride()
        x = x.as_strided(
            [shape[g[0]] for g in prep.diagonal],
            [sum(stride[p] for p in g) for g in prep.diagonal],
            x.storage_offset(),
        )
    if prep.squeeze:
        x = x.squeeze(prep.squeeze)
    if prep.sum_dims:
        x = x.sum(prep.sum_dims, dtype=x.dtype)  # integer sums would otherwise widen to int64
    return x


def _gemm_operand(
    x: torch.Tensor, perm: tuple[int, ...] | None, view: tuple[int, ...], transposed: bool
) -> torch.Tensor:
    if perm is not None:
        x = x.permute(perm)
    x = x.reshape(view)
    return x.mT if transposed else x


def _run_step(step: ContractionStep, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a2 = _gemm_operand(a, step._perm_a, step._view_a, step.transpose_a)
    b2 = _gemm_operand(b, step._perm_b, step._view_b, step.transpose_b)
    c = a2 * b2 if step.strategy == ELEMENTWISE else _ops.contract_gemm(a2, b2)
    return c.reshape(step._result_shape)


def _execute(plan: ContractionPlan, operands: Sequence[torch.Tensor]) -> torch.Tensor:
    current = [_prep_operand(x, p) for x, p in zip(operands, plan.prep)]
    for step in plan.steps:
        i, j = step.operands
        a, b = current[i], current[j]
        current = [t for n, t in enumerate(current) if n not in (i, j)]
        current.append(_run_step(step, a, b))
    result = current[0]
    if plan._final_perm is not None:
        result = result.permute(plan._final_perm)
    return result


def _check_factor(value: object, name: str, dtype: torch.dtype) -> complex | float | int:
    value = check_scalar(value, name)
    if isinstance(value, complex) and not dtype.is_complex:
        raise TypeError(f"einsum: {name}={value} is complex but the result dtype is {dtype}")
    if not (dtype.is_floating_point or dtype.is_complex):
        if value != int(value.real):
            raise TypeError(f"einsum: {name}={value} is not an integer but the result dtype is {dtype}")
        return int(value.real)  # 2.0 * an int tensor would give a float tensor
    return value


def _scale_into(
    result: torch.Tensor,
    alpha: Any,
    beta: Any,
    out: torch.Tensor | None,
    plan: ContractionPlan,
    device: torch.device,
) -> torch.Tensor:
    """``alpha * result + beta * out`` (written into ``out`` when given), BLAS style."""
    alpha = _check_factor(alpha, "alpha", plan.dtype)
    beta = _check_factor(beta, "beta", plan.dtype)
    if out is None:
        if beta != 0:
            raise ValueError(f"einsum: beta={beta} needs out= (the tensor beta scales)")
        return result if alpha == 1 else result * alpha
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"einsum: out must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != plan.output_shape:
        raise ValueError(
            f"einsum: out has shape {tuple(out.shape)}, the result has shape {plan.output_shape}"
        )
    if out.dtype != plan.dtype:
        raise TypeError(f"einsum: out has dtype {out.dtype}, the result dtype is {plan.dtype}")
    if out.device != device:
        raise ValueError(f"einsum: out is on {out.device} but the operands are on {device}")
    if beta == 0:  # BLAS convention: out is not read, so NaN or garbage in it does not leak
        value = result if alpha == 1 else result * alpha
    else:
        value = torch.add(result if alpha == 1 else result * alpha, out, alpha=beta)
    if value.untyped_storage().data_ptr() == out.untyped_storage().data_ptr():
        value = value.clone()  # the result is a view of out (e.g. "ij->ji" on out itself)
    return out.copy_(value)


def einsum(
    subscripts: str,
    *operands: torch.Tensor,
    alpha: complex | float = 1.0,
    beta: complex | float = 0.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Einstein summation with torch.einsum's semantics and an optimal contraction order.

    Gives the same result as ``torch.einsum`` for every expression it accepts: permuted and
    implicit outputs, repeated labels (diagonals and traces), ellipsis broadcasting, size-1
    broadcasting, scalar outputs and any number of operands. Operands of different dtypes are
    promoted together as torch's type promotion does (``torch.einsum`` itself rejects them).
    The contraction order comes from opt_einsum (:func:`trntensor.plan_contraction`, cached);
    every GEMM-shaped step is one (batched) matrix multiply, the part NKI kernels take over.

    Parameters
    ----------
    subscripts : str
        The expression, e.g. ``"bij,bjk->bik"``; torch's sublist form
        ``einsum(A, [0, 1], B, [1, 2], [0, 2])`` and a single list of operands are accepted too.
    *operands : torch.Tensor
        The operands, all on one device.
    alpha, beta : number
        Scale factors: the result is ``alpha * einsum(...) + beta * out``. ``beta`` needs ``out``;
        with ``beta == 0`` the contents of ``out`` are not read.
    out : torch.Tensor, optional
        Tensor of the result's shape, dtype and device to write into (and return).

    Returns
    -------
    torch.Tensor
        The contraction, on the operands' device, in their promoted dtype. Like ``torch.einsum``
        it may be a view of an operand when nothing is computed (``"ij->ji"``).
    """
    subscripts, ops = _split_args(subscripts, operands)
    device, dtype = _check_operands(ops)
    plan = cached_plan(subscripts, tuple(tuple(op.shape) for op in ops), dtype, library.get_backend())
    ops = [op if op.dtype == dtype else op.to(dtype) for op in ops]
    result = _execute(plan, ops)
    if (
        out is None
        and type(alpha) in (int, float)
        and alpha == 1
        and type(beta) in (int, float)
        and beta == 0
    ):
        return result  # the common call: nothing to scale or write
    return _scale_into(result, alpha, beta, out, plan, device)


def multi_einsum(*expressions: Sequence[Any]) -> list[torch.Tensor]:
    """Evaluate several einsums that share operands, staging each distinct operand once.

    Each expression is a sequence ``(subscripts, operand, ...)``. An operand used by several
    expressions (the same tensor object) is converted to each dtype it is needed in only once
    and reused. When trntensor's kernels run on a Neuron device, every distinct operand is
    placed on the device once (:func:`trncore.xla.stage`) and stays resident across all the
    expressions' kernels; the results come back to the operands' device at the end.

    Parameters
    ----------
    *expressions : sequence
        ``(subscripts, *operands)`` per einsum, e.g. ``("ij,jk->ik", A, B)``.

    Returns
    -------
    list of torch.Tensor
        One result per expression, in order, on the device of the operands.
    """
    if not expressions:
        raise ValueError("multi_einsum: at least one expression is required")
    parsed = []
    for n, expr in enumerate(expressions):
        if not isinstance(expr, (list, tuple)) or not expr:
            raise TypeError(f"multi_einsum: expression {n} must be a tuple (subscripts, *operands)")
        subscripts, ops = _split_args(expr[0], expr[1:])
        device, dtype = _check_operands(ops)
        plan = cached_plan(subscripts, tuple(tuple(op.shape) for op in ops), dtype, library.get_backend())
        parsed.append((plan, ops, dtype, device))
    staged: dict[tuple[int, torch.dtype], torch.Tensor] = {}
    for _, ops, dtype, _ in parsed:
        for op in ops:
            if (id(op), dtype) not in staged:
                staged[id(op), dtype] = _stage(op, dtype)
    resident = library.explain()[0] is Route.DEVICE
    if resident:
        keys = list(staged)
        staged = dict(zip(keys, xla.stage([staged[k] for k in keys])))
    results = []
    for plan, ops, dtype, device in parsed:
        result = _execute(plan, [staged[id(op), dtype] for op in ops])
        results.append(xla.from_xla(result, device) if resident and device.type != "xla" else result)
    return results


def _stage(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bring one operand into the form the contractions read (once per multi_einsum call)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)
