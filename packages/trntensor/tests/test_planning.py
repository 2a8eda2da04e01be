"""plan_contraction: opt_einsum's path, step strategies with transposes folded in, costs, caching."""

from __future__ import annotations

import opt_einsum
import pytest
import torch

import trntensor
from trntensor import plan_contraction


def test_path_is_opt_einsums_optimal_path_and_flops_are_counted():
    shapes = [(10, 300), (300, 20), (20, 400), (400, 5)]
    plan = plan_contraction("ij,jk,kl,lm->im", *shapes)
    path, info = opt_einsum.contract_path("ij,jk,kl,lm->im", *shapes, shapes=True, optimize="optimal")
    assert [tuple(p) for p in plan.path] == [tuple(p) for p in path]
    # Independent count: every step is a GEMM costing 2·m·n·k; opt_einsum's cost counts the same.
    assert plan.flops == sum(2 * s.m * s.n * s.k for s in plan.steps)
    assert plan.flops == int(info.opt_cost)
    assert plan.naive_flops >= plan.flops
    assert all(s.strategy == "gemm" for s in plan.steps)
    assert plan.output_shape == (10, 5)


def test_largest_intermediate_counts_elements_of_created_tensors():
    plan = plan_contraction("ij,jk,kl->il", (2, 50), (50, 60), (60, 3))
    sizes = [s.m * s.n * s.batch for s in plan.steps]
    assert plan.largest_intermediate == max([*sizes, 2 * 3])
    # Contracting (jk,kl) first creates 50×3; (ij,jk) first would create 2×60: the plan knows which.
    assert plan.largest_intermediate in (150, 120)


@pytest.mark.parametrize(
    ("eq", "shapes", "strategy", "trans_a", "trans_b", "copies"),
    [
        ("ij,jk->ik", [(4, 5), (5, 6)], "gemm", False, False, False),
        ("ji,jk->ik", [(5, 4), (5, 6)], "gemm", True, False, False),
        ("ij,kj->ik", [(4, 5), (6, 5)], "gemm", False, True, False),
        ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)], "batched_gemm", False, False, False),
        ("bji,bkj->bik", [(3, 5, 4), (3, 6, 5)], "batched_gemm", True, True, False),
        ("ij,ij->ij", [(4, 5), (4, 5)], "elementwise", False, False, False),
        ("i,j->ij", [(4,), (5,)], "elementwise", False, False, False),
        ("ijk,kjl->il", [(4, 5, 6), (6, 5, 7)], "gemm", False, False, True),
    ],
)
def test_step_strategy_and_folded_transposes(eq, shapes, strategy, trans_a, trans_b, copies):
    plan = plan_contraction(eq, *shapes)
    (step,) = plan.steps
    assert step.strategy == strategy
    assert (step.transpose_a, step.transpose_b) == (trans_a, trans_b)
    assert (step.copy_a or step.copy_b) == copies
    assert strategy in str(plan)


def test_single_operand_reductions_come_first():
    plan = plan_contraction("iij,jk->k", (3, 3, 4), (4, 5))
    assert plan.prep[0].diagonal is not None and plan.prep[0].sum_dims
    assert plan.steps[0].strategy == "gemm" and plan.steps[0].m == 1


def test_plans_are_cached_on_subscripts_shapes_dtypes_and_backend():
    a, b = torch.ones(3, 4), torch.ones(4, 5)
    first = plan_contraction("ij,jk->ik", a, b)
    assert plan_contraction("ij,jk->ik", a, b) is first
    assert plan_contraction("ij,jk->ik", (3, 4), (4, 5)) is first  # shapes default to float32
    assert plan_contraction("ij,jk->ik", a.double(), b) is not first
    assert plan_contraction("ij,jk->ik", a.double(), b).dtype == torch.float64
    assert plan_contraction("ij,jk->ik", torch.ones(3, 5), torch.ones(5, 5)) is not first
    previous = trntensor.get_backend()
    trntensor.set_backend("pytorch")
    try:
        other = plan_contraction("ij,jk->ik", a, b)
        assert other is not first and other.backend == "pytorch"
    finally:
        trntensor.set_backend(previous)


def test_complex_flops_count_real_operations():
    real = plan_contraction("ij,jk->ik", (4, 5), (5, 6))
    cplx = plan_contraction("ij,jk->ik", (4, 5), (5, 6), dtype=torch.complex64)
    assert cplx.flops == 4 * real.flops == 4 * 2 * 4 * 5 * 6


def test_bad_plan_arguments():
    with pytest.raises(ValueError, match="at least one operand"):
        plan_contraction("ij")
    with pytest.raises(TypeError, match="operand 0 must be a torch.Tensor or a shape"):
        plan_contraction("ij", "x")
    with pytest.raises(ValueError, match=">= 0"):
        plan_contraction("ij", (2, -1))
