"""Property-based GEMM checks (hypothesis): any shape, flags, layout and scalars against SciPy."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import blas as sb

import trnblas

DIM = st.integers(min_value=1, max_value=140)
TRANS = st.sampled_from([0, 1, 2])


def _tensor(
    rng: np.random.Generator, shape: tuple[int, int], fortran: bool
) -> tuple[torch.Tensor, np.ndarray]:
    array = rng.standard_normal(shape)
    if fortran:
        return torch.from_numpy(np.ascontiguousarray(array.T)).mT, array
    return torch.from_numpy(array.copy()), array


@given(
    m=DIM,
    k=DIM,
    n=DIM,
    trans_a=TRANS,
    trans_b=TRANS,
    fortran=st.booleans(),
    alpha=st.floats(-4, 4, allow_nan=False),
    beta=st.sampled_from([0.0, 1.0, -0.5]),
    seed=st.integers(0, 2**16),
)
def test_gemm_any_shape_matches_scipy(m, k, n, trans_a, trans_b, fortran, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    a, a_np = _tensor(rng, (m, k) if trans_a == 0 else (k, m), fortran)
    b, b_np = _tensor(rng, (k, n) if trans_b == 0 else (n, k), not fortran)
    c, c_np = _tensor(rng, (m, n), fortran)
    got = trnblas.gemm(alpha, a, b, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b)
    want = sb.dgemm(alpha, a_np, b_np, beta=beta, c=c_np, trans_a=trans_a, trans_b=trans_b)
    assert got.shape == (m, n) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12 * np.sqrt(k) * (1 + abs(alpha)))


@given(
    batch_a=st.lists(st.integers(1, 3), max_size=2),
    batch_b=st.lists(st.integers(1, 3), max_size=2),
    m=st.integers(1, 20),
    k=st.integers(0, 20),
    n=st.integers(1, 20),
    seed=st.integers(0, 2**16),
)
def test_batched_gemm_broadcasts_like_matmul(batch_a, batch_b, m, k, n, seed):
    # Make the batch shapes broadcast-compatible: where both have a dimension, one of them is 1 or equal.
    width = min(len(batch_a), len(batch_b))
    for i in range(1, width + 1):
        if batch_a[-i] != batch_b[-i]:
            batch_b[-i] = 1
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch_a, m, k, generator=gen, dtype=torch.float64)
    b = torch.randn(*batch_b, k, n, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(trnblas.batched_gemm(a, b), torch.matmul(a, b), rtol=1e-12, atol=1e-12)
