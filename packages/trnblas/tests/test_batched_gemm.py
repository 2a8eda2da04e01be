"""batched_gemm against torch.matmul (and NumPy for complex scaling): broadcasting, flags, layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
# (batch of a, batch of b, m, k, n): equal batches, broadcasting on either side, 2-D against batched.
BATCHES = [
    ((3,), (3,), 7, 129, 1),
    ((2, 1), (1, 4), 128, 7, 127),
    ((), (5,), 129, 128, 7),
    ((4,), (), 1, 127, 129),
    ((1,), (2, 3), 7, 1, 128),
]


def _op(t: torch.Tensor, trans: int) -> torch.Tensor:
    if trans == 0:
        return t
    return t.transpose(-1, -2).conj() if trans == 2 else t.transpose(-1, -2)


@pytest.mark.parametrize("trans_b", [0, 1, 2])
@pytest.mark.parametrize("trans_a", [0, 1, 2])
@pytest.mark.parametrize("case", BATCHES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batched_gemm_matches_torch_matmul(h, rng, dtype, case, trans_a, trans_b):
    batch_a, batch_b, m, k, n = case
    order = ("C", "F", "strided")[(trans_a + trans_b + BATCHES.index(case)) % 3]
    a, _ = h.operand(rng, (*batch_a, *((m, k) if trans_a == 0 else (k, m))), dtype, order)
    b, _ = h.operand(rng, (*batch_b, *((k, n) if trans_b == 0 else (n, k))), dtype, order)
    expected = torch.matmul(_op(a, trans_a).resolve_conj(), _op(b, trans_b).resolve_conj())
    got = trnblas.batched_gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    h.check(got, expected.numpy(), dtype, k)
    # alpha, beta and a c that broadcasts over the batch (one matrix for every batch entry).
    c, c_np = h.operand(rng, expected.shape[-2:], dtype, order)
    alpha, beta = h.alpha_for(dtype), h.alpha_for(dtype, -1.5)
    got = trnblas.batched_gemm(a, b, alpha=alpha, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b)
    h.check(got, alpha * expected.numpy() + beta * c_np, dtype, k)


def test_batched_gemm_is_one_product_per_batch_entry(h, rng):
    a, a_np = h.operand(rng, (6, 7, 129), torch.float64, "F")
    b, b_np = h.operand(rng, (6, 129, 128), torch.float64)
    got = trnblas.batched_gemm(a, b)
    for i in range(6):  # independently of torch: SciPy's dgemm per batch entry
        h.check(got[i], h.ref("gemm", torch.float64)(1.0, a_np[i], b_np[i]), torch.float64, 129)


def test_batched_gemm_beta_zero_does_not_read_c_and_empty_batches():
    a = torch.ones(2, 3, 4, dtype=torch.float64)
    b = torch.ones(4, 5, dtype=torch.float64)
    c = torch.full((2, 3, 5), float("nan"), dtype=torch.float64)
    np.testing.assert_array_equal(trnblas.batched_gemm(a, b, c=c).numpy(), np.full((2, 3, 5), 4.0))
    got = trnblas.batched_gemm(a, b, alpha=0.0, beta=1.0, c=torch.ones(5, dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), np.ones((2, 3, 5)))
    assert trnblas.batched_gemm(torch.ones(0, 3, 4), torch.ones(4, 5)).shape == (0, 3, 5)
    got = trnblas.batched_gemm(torch.ones(2, 3, 0), torch.ones(2, 0, 5))
    np.testing.assert_array_equal(got.numpy(), np.zeros((2, 3, 5)))


def test_batched_gemm_half_precision(rng):
    a = torch.from_numpy(rng.standard_normal((3, 16, 32))).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal((3, 32, 8))).to(torch.bfloat16)
    got = trnblas.batched_gemm(a, b)
    assert got.dtype == torch.bfloat16
    np.testing.assert_allclose(got.double().numpy(), (a.double() @ b.double()).numpy(), rtol=2e-2, atol=0.1)
