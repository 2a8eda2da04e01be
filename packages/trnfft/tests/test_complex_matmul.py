"""``trnfft.complex_matmul``: the public trnsci package's name, checked against torch's complex
matmul (PyTorch route and, on the emulator, the NKI kernel), its gradients, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trnfft_helpers import random_tensor, rel_err

import trnfft
from trnfft import ComplexTensor


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("mkn", [(1, 1, 1), (5, 7, 3), (128, 128, 128), (130, 65, 257)], ids=str)
def test_matches_torch_for_tensors_and_complex_tensors(dtype, mkn):
    m, k, n = mkn
    a, b = random_tensor((m, k), dtype), random_tensor((k, n), dtype, seed=1)
    want = (a.to(torch.complex128) @ b.to(torch.complex128)).numpy()
    tol = 1e-5 if dtype == torch.complex64 else 1e-13
    got = trnfft.complex_matmul(a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype
    assert rel_err(got.numpy(), want) <= tol
    ct = trnfft.complex_matmul(ComplexTensor.from_torch(a), b)
    assert isinstance(ct, ComplexTensor) and rel_err(ct.to_torch().numpy(), want) <= tol
    both = ComplexTensor.from_torch(a) @ ComplexTensor.from_torch(b)
    assert rel_err(both.to_torch().numpy(), want) <= tol
    assert rel_err((a @ ComplexTensor.from_torch(b)).to_torch().numpy(), want) <= tol


def test_real_operands_and_batches_broadcast_like_torch_matmul():
    a = random_tensor((3, 1, 4, 5), torch.complex128)
    b = random_tensor((2, 5, 6), torch.float64, seed=1)
    want = torch.matmul(a, b.to(torch.complex128))
    got = trnfft.complex_matmul(a, b)
    assert got.shape == want.shape == (3, 2, 4, 6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13, atol=1e-13)


def test_gradients_match_torch_and_pass_gradcheck():
    a = random_tensor((6, 4), torch.complex128).requires_grad_()
    b = random_tensor((4, 3), torch.complex128, seed=1).requires_grad_()
    assert torch.autograd.gradcheck(trnfft.complex_matmul, (a, b))
    g = random_tensor((6, 3), torch.complex128, seed=2)
    ours = torch.autograd.grad(trnfft.complex_matmul(a, b), (a, b), g)
    theirs = torch.autograd.grad(a @ b, (a, b), g)
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.simulator
def test_kernel_route_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNFFT_REQUIRE_NKI", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    try:
        for m, k, n in [(128, 128, 128), (70, 33, 90)]:
            a, b = random_tensor((m, k), torch.complex64), random_tensor((k, n), torch.complex64, seed=1)
            got = trnfft.complex_matmul(a, b)
            want = (a.to(torch.complex128) @ b.to(torch.complex128)).numpy()
            assert got.dtype == torch.complex64 and rel_err(got.numpy(), want) <= 1e-5
    finally:
        trnfft.set_backend(previous)


def test_errors_name_the_argument():
    a = random_tensor((3, 4), torch.complex64)
    with pytest.raises(TypeError, match="b must be a ComplexTensor or a torch.Tensor"):
        trnfft.complex_matmul(a, [[1.0]])
    with pytest.raises(TypeError, match="a is single precision"):
        trnfft.complex_matmul(a, random_tensor((4, 2), torch.complex128))
    with pytest.raises(TypeError, match="a must be complex64"):
        trnfft.complex_matmul(torch.ones(3, 4, dtype=torch.int64), a)
    with pytest.raises(ValueError, match="last dimension"):
        trnfft.complex_matmul(a, random_tensor((3, 2), torch.complex64))
    with pytest.raises(ValueError, match="at least 2-D"):
        trnfft.complex_matmul(a[0], a)
