"""Names users of the public trnsci ``trntensor`` type: ``to_xla``/``from_xla``,
``estimate_flops``, ``plan_cache_info`` and ``clear_plan_cache``."""

from __future__ import annotations

import pytest
import torch

import trncore.xla
import trntensor


def test_xla_helpers_are_trncores():
    # One implementation of residency (trncore.xla); trntensor re-exports it under the suite's names.
    assert trntensor.to_xla is trncore.xla.to_xla and trntensor.from_xla is trncore.xla.from_xla
    cpu = torch.ones(3)
    assert trntensor.from_xla(cpu) is cpu  # a host tensor passes through
    with pytest.raises(TypeError, match="from_xla expects a torch.Tensor"):
        trntensor.from_xla([1.0])


@pytest.mark.xla
def test_xla_round_trip():
    x = torch.arange(6.0).reshape(2, 3)
    on_xla = trntensor.to_xla(x)
    assert on_xla.device.type == "xla"
    back = trntensor.from_xla(on_xla)
    assert back.device.type == "cpu" and torch.equal(back, x)


@pytest.mark.parametrize(
    ("expr", "shapes", "dtype", "want"),
    [
        # A GEMM: m·n·k multiply-adds, two operations each (eight for complex data).
        ("ij,jk->ik", [(3, 4), (4, 5)], torch.float32, 2 * 3 * 4 * 5),
        ("ij,jk->ik", [(3, 4), (4, 5)], torch.complex64, 8 * 3 * 4 * 5),
        # A batched GEMM over b.
        ("bij,bjk->bik", [(7, 3, 4), (7, 4, 5)], torch.float64, 2 * 7 * 3 * 4 * 5),
        # A chain: opt_einsum contracts (ij,jk) first, 2·2·10·3, then (ik,kl) 2·2·3·4.
        ("ij,jk,kl->il", [(2, 10), (10, 3), (3, 4)], torch.float32, 2 * 2 * 10 * 3 + 2 * 2 * 3 * 4),
    ],
)
def test_estimate_flops_counts_the_planned_path(expr, shapes, dtype, want):
    operands = [torch.zeros(s, dtype=dtype) for s in shapes]
    assert trntensor.estimate_flops(expr, *operands) == want
    assert trntensor.estimate_flops(expr, *shapes, dtype=dtype) == want  # shapes alone


def test_plan_cache_info_and_clear_plan_cache():
    trntensor.clear_plan_cache()
    assert trntensor.plan_cache_info().currsize == 0
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 4, generator=g), torch.randn(4, 5, generator=g)
    trntensor.einsum("ij,jk->ik", a, b)
    first = trntensor.plan_cache_info()
    trntensor.einsum("ij,jk->ik", a, b)
    again = trntensor.plan_cache_info()
    assert first.currsize == 1 and again.currsize == 1 and again.hits == first.hits + 1
    trntensor.clear_plan_cache()
    assert trntensor.plan_cache_info().currsize == 0
