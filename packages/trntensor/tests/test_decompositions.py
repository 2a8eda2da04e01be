"""CP, Tucker and TT decompositions: fit no worse than 1% above tensorly's on the same inputs and ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trntensor import (
    CPDecomposition,
    TTDecomposition,
    TuckerDecomposition,
    cp_decompose,
    cp_reconstruct,
    tt_decompose,
    tt_reconstruct,
    tucker_decompose,
    tucker_reconstruct,
)

tl = pytest.importorskip("tensorly")
from tensorly.decomposition import parafac, tensor_train, tucker  # noqa: E402

tl.set_backend("numpy")

SHAPES = [(7, 8, 9), (1, 7, 5), (129, 7, 4), (128, 5, 3), (127, 3, 6), (5, 6, 7, 4)]


def _low_rank_plus_noise(shape, rank, noise=0.1, seed=0):
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    x = tl.cp_to_tensor((np.ones(rank), factors))
    return x + noise * np.linalg.norm(x) / np.sqrt(x.size) * rng.standard_normal(shape)


def _rel(x, approx):
    return float(np.linalg.norm(x - approx) / np.linalg.norm(x))


def _ours_rel(x, approx: torch.Tensor):
    return _rel(x, approx.double().numpy())


@pytest.mark.filterwarnings("ignore:Trying to compute SVD:UserWarning")  # tensorly on a size-1 mode
@pytest.mark.parametrize("shape", SHAPES)
def test_cp_fit_is_within_one_percent_of_tensorly(shape):
    rank = 3
    x = _low_rank_plus_noise(shape, rank)
    ours = cp_decompose(torch.from_numpy(x), rank, n_iter_max=200, tol=1e-10)
    ref = parafac(x, rank, n_iter_max=200, tol=1e-10, init="svd")
    ours_err = _ours_rel(x, cp_reconstruct(ours))
    assert ours_err <= 1.01 * _rel(x, tl.cp_to_tensor(ref)) + 1e-12
    assert ours.rel_error == pytest.approx(ours_err, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", ["hosvd", "hooi"])
def test_tucker_fit_is_within_one_percent_of_tensorly(shape, method):
    ranks = [min(3, n) for n in shape]
    x = _low_rank_plus_noise(shape, 3, seed=1)
    ours = tucker_decompose(torch.from_numpy(x), ranks, method=method)
    # tensorly's tucker starts from the truncated HOSVD; with no iteration it is the HOSVD.
    ref = tucker(x, ranks, n_iter_max=100 if method == "hooi" else 0, tol=1e-8)
    ours_err = _ours_rel(x, tucker_reconstruct(ours))
    assert ours_err <= 1.01 * _rel(x, tl.tucker_to_tensor(ref)) + 1e-12
    assert ours.rel_error == pytest.approx(ours_err, rel=1e-6, abs=1e-9)
    for u in ours.factors:  # orthonormal columns
        torch.testing.assert_close(u.mT @ u, torch.eye(u.shape[1], dtype=u.dtype), rtol=0, atol=1e-10)


@pytest.mark.parametrize("shape", SHAPES)
def test_tt_fit_is_within_one_percent_of_tensorly(shape):
    x = _low_rank_plus_noise(shape, 2, seed=2)
    ours = tt_decompose(torch.from_numpy(x), 2)
    ref = tensor_train(x, [1] + [2] * (len(shape) - 1) + [1])
    ours_err = _ours_rel(x, tt_reconstruct(ours))
    assert ours_err <= 1.01 * _rel(x, tl.tt_to_tensor(ref)) + 1e-12
    assert ours.rel_error == pytest.approx(ours_err, rel=1e-9, abs=1e-12)
    assert max(ours.ranks) <= 2 and ours.ranks[0] == ours.ranks[-1] == 1


def test_exact_low_rank_tensors_are_recovered():
    x = _low_rank_plus_noise((6, 7, 8), 2, noise=0.0, seed=3)
    xt = torch.from_numpy(x)
    assert cp_decompose(xt, 2, n_iter_max=500, tol=1e-14).rel_error < 1e-6
    assert tucker_decompose(xt, 2).rel_error < 1e-10
    assert tt_decompose(xt, 2).rel_error < 1e-10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_is_preserved(dtype):
    x = torch.from_numpy(_low_rank_plus_noise((6, 5, 4), 2, seed=4)).to(dtype)
    cp = cp_decompose(x, 2)
    tk = tucker_decompose(x, 2)
    tt = tt_decompose(x, 2)
    assert cp.weights.dtype == dtype and all(f.dtype == dtype for f in cp.factors)
    assert tk.core.dtype == dtype and all(f.dtype == dtype for f in tk.factors)
    assert all(c.dtype == dtype for c in tt.cores)
    assert cp_reconstruct(cp).dtype == tucker_reconstruct(tk).dtype == tt_reconstruct(tt).dtype == dtype


def test_non_contiguous_input_matches_its_contiguous_copy():
    x = torch.from_numpy(_low_rank_plus_noise((8, 6, 5), 2, seed=5)).permute(2, 0, 1)
    assert not x.is_contiguous()
    assert tucker_decompose(x, 2).rel_error == pytest.approx(tucker_decompose(x.contiguous(), 2).rel_error)
    assert cp_decompose(x, 2).rel_error == pytest.approx(cp_decompose(x.contiguous(), 2).rel_error)


def test_iteration_limit_and_tolerance_are_honoured():
    x = torch.from_numpy(_low_rank_plus_noise((9, 8, 7), 4, seed=6))
    one = cp_decompose(x, 4, n_iter_max=1, tol=0.0)
    assert one.n_iter == 1 and not one.converged
    loose = cp_decompose(x, 4, n_iter_max=500, tol=1e-2)
    tight = cp_decompose(x, 4, n_iter_max=500, tol=1e-9)
    assert loose.converged and tight.converged and loose.n_iter <= tight.n_iter
    assert tight.rel_error <= loose.rel_error + 1e-12
    assert tucker_decompose(x, 3, n_iter_max=2, tol=0.0).n_iter == 2


def test_tt_tolerance_truncates_ranks_and_bounds_the_error():
    x = torch.from_numpy(_low_rank_plus_noise((6, 7, 8, 5), 2, noise=0.01, seed=7))
    full = tt_decompose(x, 50)
    truncated = tt_decompose(x, 50, tol=0.05)
    assert truncated.rel_error <= 0.05
    assert sum(truncated.ranks) < sum(full.ranks)
    assert tt_decompose(x, [1, 2, 3, 2, 1]).ranks == (1, 2, 3, 2, 1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: cp_decompose(torch.ones(3), 1), ValueError, "at least 2 dimensions"),
        (lambda: cp_decompose(torch.ones(3, 3, dtype=torch.int64), 1), TypeError, "real floating"),
        (lambda: cp_decompose(torch.ones(3, 0), 1), ValueError, "empty"),
        (lambda: cp_decompose(torch.ones(3, 3), 0), ValueError, "rank must be >= 1"),
        (lambda: cp_decompose(torch.ones(3, 3), 1, init="nope"), ValueError, "init must be"),
        (lambda: cp_decompose(torch.ones(3, 3), 1, n_iter_max=0), ValueError, "n_iter_max"),
        (lambda: cp_decompose(torch.ones(3, 3), 1, tol=-1), ValueError, "tol"),
        (lambda: tucker_decompose(torch.ones(3, 3), [2]), ValueError, "one value per mode"),
        (lambda: tucker_decompose(torch.ones(3, 3), [4, 2]), ValueError, "exceeds"),
        (lambda: tucker_decompose(torch.ones(3, 3), 2, method="x"), ValueError, "method"),
        (lambda: tt_decompose(torch.ones(3, 3, 3), [2, 2, 2, 2]), ValueError, "start and end with 1"),
        (lambda: tt_decompose(torch.ones(3, 3, 3), [2, 2, 2]), ValueError, "internal"),
        (lambda: cp_reconstruct("x"), TypeError, "CPDecomposition"),
        (
            lambda: tucker_reconstruct(TuckerDecomposition(torch.ones(2, 2), [torch.ones(3, 2)], 0, 0, True)),
            ValueError,
            "needs 2 factors",
        ),
        (lambda: tt_reconstruct(TTDecomposition([torch.ones(2, 3, 1)], 0.0)), ValueError, "rank 1"),
        (
            lambda: cp_reconstruct(CPDecomposition(torch.ones(2), [torch.ones(3, 3)], 0, 0, True)),
            ValueError,
            "factor 0",
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
