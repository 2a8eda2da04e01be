"""einsum on named cases (the expressions the earlier public suite got wrong), its options and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trntensor
from trntensor import _ops, _pytorch, einsum

SIZES = [1, 7, 127, 128, 129]


def _randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("eq", ["ij,jk->ik", "ij,jk->ki", "ji,jk->ik", "ij,kj->ik", "ji,kj->ki"])
def test_matrix_products_with_every_transpose_on_ragged_sizes(eq, n):
    terms = eq.split("->")[0].split(",")
    size = {"i": n, "j": n + 3, "k": max(n - 2, 1)}
    a = _randn(*[size[c] for c in terms[0]], seed=1)
    b = _randn(*[size[c] for c in terms[1]], seed=2)
    torch.testing.assert_close(einsum(eq, a, b), torch.einsum(eq, a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [3, 128])
def test_square_batched_product_with_permuted_operand(n):
    # "bij,bkj->bik" on square operands: a planner that ignores label order gets this wrong.
    a, b = _randn(2, n, n, seed=3), _randn(2, n, n, seed=4)
    torch.testing.assert_close(einsum("bij,bkj->bik", a, b), torch.einsum("bij,bkj->bik", a, b))
    torch.testing.assert_close(einsum("bij,bkj->kbi", a, b), torch.einsum("bij,bkj->kbi", a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_dtypes_are_kept(dtype):
    a, b, c = _randn(5, 6, dtype=dtype), _randn(6, 7, dtype=dtype, seed=1), _randn(7, 2, dtype=dtype, seed=2)
    got = einsum("ij,jk,kl->li", a, b, c)
    assert got.dtype == dtype
    tol = 1e-5 if dtype in (torch.float32, torch.complex64) else 1e-12
    torch.testing.assert_close(got, torch.einsum("ij,jk,kl->li", a, b, c), rtol=tol, atol=tol)


def test_mixed_dtypes_promote_without_losing_precision():
    a = _randn(4, 5, dtype=torch.float32)
    b = _randn(5, 3, dtype=torch.float64, seed=1)
    c = _randn(3, dtype=torch.complex64, seed=2)
    got = einsum("ij,jk,k->i", a, b, c)
    assert got.dtype == torch.complex128
    ref = torch.einsum("ij,jk,k->i", *(t.to(torch.complex128) for t in (a, b, c)))
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_integer_operands_stay_integer():
    a = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    b = torch.arange(20, dtype=torch.int32).reshape(4, 5)
    got = einsum("ij,jk->i", a, b)
    assert got.dtype == torch.int32
    expected = torch.from_numpy(np.einsum("ij,jk->i", a.numpy(), b.numpy())).to(torch.int32)
    assert torch.equal(got, expected)
    scaled = einsum("ij,jk->i", a, b, alpha=2.0)
    assert scaled.dtype == torch.int32 and torch.equal(scaled, 2 * expected)


def test_non_contiguous_and_offset_views():
    base = _randn(9, 10, 11)
    a = base[1:, ::2, 3:].transpose(0, 2)  # strided, offset, permuted
    b = _randn(8, 8, seed=1).t()
    assert not a.is_contiguous() and not b.is_contiguous()
    torch.testing.assert_close(einsum("kji,ik->jk", a, b), torch.einsum("kji,ik->jk", a, b))
    torch.testing.assert_close(einsum("iik->k", a[:5, :5]), torch.einsum("iik->k", a[:5, :5]))


def test_larger_multi_operand_chain():
    a, b, c, d = _randn(64, 300), _randn(300, 200, seed=1), _randn(200, 5, seed=2), _randn(5, 64, seed=3)
    ref = torch.einsum("ij,jk,kl,lm->im", a, b, c, d)
    torch.testing.assert_close(einsum("ij,jk,kl,lm->im", a, b, c, d), ref, rtol=1e-10, atol=1e-10)


def test_list_and_sublist_forms():
    a, b = _randn(3, 4), _randn(4, 5, seed=1)
    ref = torch.einsum("ij,jk->ki", a, b)
    torch.testing.assert_close(einsum("ij,jk->ki", [a, b]), ref)
    torch.testing.assert_close(einsum(a, [0, 1], b, [1, 2], [2, 0]), ref)
    torch.testing.assert_close(einsum(a, [0, 1], b, [1, 2]), torch.einsum(a, [0, 1], b, [1, 2]))
    for left, right in (([0, 30], [30, 1]), ([27, 3], [3, 26]), ([51, 0], [0, 25])):  # implicit order
        torch.testing.assert_close(einsum(a, left, b, right), torch.einsum(a, left, b, right))
    x = _randn(2, 3, 4, seed=2)
    torch.testing.assert_close(einsum(x, [..., 0]), torch.einsum(x, [..., 0]))


def test_scalar_operands_and_outputs():
    s = torch.tensor(2.5, dtype=torch.float64)
    v = _randn(4)
    torch.testing.assert_close(einsum(",i->i", s, v), torch.einsum(",i->i", s, v))
    torch.testing.assert_close(einsum("i,i", v, v), torch.einsum("i,i", v, v))
    assert einsum("->", s).shape == ()


def test_results_stay_on_the_operands_device():
    # The meta device stands in for an accelerator: any allocation on the CPU would fail to mix.
    a = torch.empty(4, 5, device="meta", dtype=torch.float64)
    b = torch.empty(5, 3, device="meta", dtype=torch.float64)
    c = torch.empty(3, 3, device="meta", dtype=torch.float64)
    got = einsum("ij,jk,kk->ik", a, b, c)
    assert got.device.type == "meta" and got.dtype == torch.float64 and got.shape == (4, 3)
    out = torch.empty(4, 3, device="meta", dtype=torch.float64)
    assert einsum("ij,jk->ik", a, b, alpha=2.0, beta=1.0, out=out) is out


def test_alpha_beta_out_blas_semantics():
    a, b = _randn(3, 4), _randn(4, 5, seed=1)
    out = torch.full((3, 5), float("nan"), dtype=torch.float64)
    einsum("ij,jk->ik", a, b, alpha=2.0, out=out)  # beta = 0: NaN in out is not read
    torch.testing.assert_close(out, 2.0 * (a @ b))
    c = _randn(3, 5, seed=2)
    out = c.clone()
    einsum("ij,jk->ik", a, b, alpha=-1.0, beta=0.5, out=out)
    torch.testing.assert_close(out, -(a @ b) + 0.5 * c)
    torch.testing.assert_close(einsum("ij,jk->ik", a, b, alpha=3), 3 * (a @ b))


def test_out_may_alias_an_operand():
    a = _randn(4, 4)
    expected = a.t().clone()
    einsum("ij->ji", a, out=a)
    torch.testing.assert_close(a, expected)


def test_every_gemm_shaped_step_goes_through_the_gemm_entry_point(monkeypatch):
    calls = []

    def counting(a, b):
        calls.append((tuple(a.shape), tuple(b.shape)))
        return _pytorch.gemm(a, b)

    monkeypatch.setattr(_ops, "contract_gemm", counting)
    a, b, c = _randn(6, 7), _randn(7, 8, seed=1), _randn(8, 2, seed=2)
    got = einsum("ij,jk,kl->il", a, b, c)
    torch.testing.assert_close(got, a @ b @ c)
    assert len(calls) == 2
    x, y = _randn(3, 6, 7), _randn(3, 7, 2, seed=1)
    einsum("bij,bjk->bki", x, y)
    assert calls[-1] == ((3, 6, 7), (3, 7, 2))


def test_multi_einsum_matches_and_stages_shared_operands_once(monkeypatch):
    from trntensor import contraction as einsum_module

    staged = []
    original = einsum_module._stage

    def counting(t, dtype):
        staged.append(id(t))
        return original(t, dtype)

    monkeypatch.setattr(einsum_module, "_stage", counting)
    shared = _randn(5, 6, dtype=torch.float32)
    b, c = _randn(6, 4, dtype=torch.float32, seed=1), _randn(6, dtype=torch.float32, seed=2)
    r1, r2, r3 = trntensor.multi_einsum(("ij,jk->ik", shared, b), ("ij,j->i", shared, c), ("ij->ji", shared))
    torch.testing.assert_close(r1, shared @ b)
    torch.testing.assert_close(r2, shared @ c)
    torch.testing.assert_close(r3, shared.t())
    assert staged.count(id(shared)) == 1
    assert len(staged) == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("ij,jk->ik", torch.ones(2, 3)), {}, ValueError, "2 operand"),
        (("ij,jk->ik", torch.ones(2, 3), torch.ones(4, 5)), {}, ValueError, "subscript j has size"),
        (("ij->ii", torch.ones(2, 2)), {}, ValueError, "repeat"),
        (("ij->k", torch.ones(2, 2)), {}, ValueError, "appear in no operand"),
        (("i2->i", torch.ones(2, 2)), {}, ValueError, "invalid character"),
        (("ijk->i", torch.ones(2, 2)), {}, ValueError, "has 2 dimension"),
        (("ij->i", [[1.0]]), {}, TypeError, "must be a torch.Tensor"),
        ((5, torch.ones(2)), {}, TypeError, "subscripts must be a str"),
        ((torch.ones(2), 5), {}, TypeError, "sublist 0 must be a list"),
        (("ij->i", torch.ones(2, 2, dtype=torch.bool)), {}, TypeError, "bool"),
        (("i,i->", torch.ones(2), torch.ones(2, device="meta")), {}, ValueError, "operand 1 is on meta"),
        (("ij->i", torch.ones(2, 2)), {"beta": 1.0}, ValueError, "beta=1.0 needs out"),
        (("ij->i", torch.ones(2, 2)), {"out": torch.ones(3)}, ValueError, "out has shape"),
        (("ij->i", torch.ones(2, 2)), {"out": torch.ones(2, dtype=torch.float64)}, TypeError, "dtype"),
        (("ij->i", torch.ones(2, 2)), {"alpha": "2"}, TypeError, "alpha must be a number"),
        (("ij->i", torch.ones(2, 2)), {"alpha": 1j}, TypeError, "complex"),
        (("ij->i", torch.ones(2, 2, dtype=torch.int64)), {"alpha": 0.5}, TypeError, "not an integer"),
        (("ij->i",), {}, ValueError, "at least one operand"),
    ],
)
def test_bad_input_raises_a_clear_error(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        einsum(*args, **kwargs)


def test_gradients_match_torch_einsum():
    x = _randn(4, 4).requires_grad_()
    y = _randn(4, 5, seed=1).requires_grad_()
    ours = torch.autograd.grad(einsum("ii,ij->j", x, y).square().sum(), (x, y))
    ref = torch.autograd.grad(torch.einsum("ii,ij->j", x, y).square().sum(), (x, y))
    for g, r in zip(ours, ref):
        torch.testing.assert_close(g, r)


def test_many_operands_use_the_heuristic_search_and_stay_right():
    sizes = [5, 6, 7, 3, 8, 2, 9, 4]
    ops = [_randn(sizes[i], sizes[(i + 1) % 8], seed=i) for i in range(8)]
    eq = "ab,bc,cd,de,ef,fg,gh,ha->"
    torch.testing.assert_close(einsum(eq, *ops), torch.einsum(eq, *ops), rtol=1e-10, atol=1e-10)
    assert len(trntensor.plan_contraction(eq, *ops).steps) == 7


def test_ellipsis_only_in_the_output():
    a = _randn(2, 3)
    torch.testing.assert_close(einsum("ij->...ji", a), torch.einsum("ij->...ji", a))


def test_folded_transposes_reach_the_gemm_as_views_of_the_inputs(monkeypatch):
    seen = []

    def capture(a, b):
        seen.append((a, b))
        return _pytorch.gemm(a, b)

    monkeypatch.setattr(_ops, "contract_gemm", capture)
    a, b = _randn(6, 5), _randn(7, 5, seed=1)  # "ij,kj": B is stored N×K, read transposed
    torch.testing.assert_close(einsum("ij,kj->ik", a, b), a @ b.t())
    a2, b2 = seen[-1]
    assert a2.data_ptr() == a.data_ptr() and b2.data_ptr() == b.data_ptr()
    assert b2.shape == (5, 7) and b2.mT.is_contiguous()
    x, y = _randn(3, 5, 6), _randn(3, 5, 4, seed=2)  # "bki,bkj": A is stored K×M per batch
    torch.testing.assert_close(einsum("bki,bkj->bij", x, y), x.mT @ y)
    x2, y2 = seen[-1]
    assert x2.data_ptr() == x.data_ptr() and x2.shape == (3, 6, 5) and x2.mT.is_contiguous()
