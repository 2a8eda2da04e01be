"""ComplexTensor: lossless conversion and acceptance by every trnfft function."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trnfft_helpers import random_tensor, rel_err

import trnfft
from trnfft import ComplexTensor


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 129), (2, 4, 5)])
def test_round_trip_is_lossless(dtype, shape):
    z = random_tensor(shape, dtype)
    ct = ComplexTensor.from_torch(z)
    assert ct.real.is_contiguous() and ct.imag.is_contiguous()
    assert ct.shape == z.shape and ct.dtype == dtype and ct.device == z.device
    back = ct.to_torch()
    assert back.dtype == dtype
    assert torch.equal(back, z)


def test_round_trip_of_non_contiguous_and_conjugated_inputs():
    z = random_tensor((6, 10), torch.complex128)
    for view in (z.t(), z[:, ::3], z.conj()):
        assert torch.equal(ComplexTensor.from_torch(view).to_torch(), view.resolve_conj())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_real_input_gets_zero_imaginary_plane(dtype):
    x = random_tensor((5,), dtype)
    ct = ComplexTensor.from_torch(x)
    assert torch.equal(ct.real, x) and torch.count_nonzero(ct.imag) == 0
    assert ComplexTensor(x).to_torch().imag.abs().max() == 0


def test_arithmetic_matches_torch_complex():
    a, b = random_tensor((4, 3), torch.complex128, 1), random_tensor((4, 3), torch.complex128, 2)
    ca, cb = ComplexTensor.from_torch(a), ComplexTensor.from_torch(b)
    torch.testing.assert_close((ca * cb).to_torch(), a * b)
    torch.testing.assert_close((ca + cb).to_torch(), a + b)
    torch.testing.assert_close((ca - cb).to_torch(), a - b)
    torch.testing.assert_close((2 * ca - 1).to_torch(), 2 * a - 1)
    torch.testing.assert_close((ca * (1 + 2j)).to_torch(), a * (1 + 2j))
    torch.testing.assert_close(ca.conj().to_torch(), a.conj())
    torch.testing.assert_close(ca.abs(), a.abs())
    torch.testing.assert_close(ca[1:, 0].to_torch(), a[1:, 0])
    assert len(ca) == 4 and ca.ndim == ca.dim() == 2 and ca.numel() == 12 and ca.size(1) == 3


def test_to_changes_precision_explicitly():
    ct = ComplexTensor.from_torch(random_tensor((3,), torch.complex64))
    assert ct.to(torch.complex128).dtype == torch.complex128
    assert ct.to(dtype=torch.float64).real.dtype == torch.float64
    with pytest.raises(TypeError, match="dtype"):
        ct.to(torch.int32)


@pytest.mark.parametrize(
    "real,imag,error",
    [
        ([1.0], None, TypeError),
        (torch.ones(3, dtype=torch.int64), None, TypeError),
        (torch.ones(3), torch.ones(3, dtype=torch.float64), TypeError),
        (torch.ones(3), torch.ones(4), ValueError),
        (torch.ones(3), "x", TypeError),
        (torch.ones(3, dtype=torch.float16), None, TypeError),
    ],
)
def test_bad_planes(real, imag, error):
    with pytest.raises(error):
        ComplexTensor(real, imag)


def test_from_torch_rejects_integers():
    with pytest.raises(TypeError, match="from_torch"):
        ComplexTensor.from_torch(torch.arange(3))


COMPLEX_IN = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "irfft", "hfft", "irfft2", "hfft2", "irfftn"]
COMPLEX_IN += ["hfftn"]


@pytest.mark.parametrize("name", COMPLEX_IN)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_every_complex_taking_function_accepts_complex_tensor(name, dtype):
    z = random_tensor((3, 6, 10), dtype)
    got = getattr(trnfft, name)(ComplexTensor.from_torch(z), norm="ortho")
    want = getattr(torch.fft, name)(z, norm="ortho")
    if want.is_complex():
        assert isinstance(got, ComplexTensor)  # complex result of a ComplexTensor input stays one
        assert got.dtype == dtype
        got = got.to_torch()
    else:
        assert type(got) is torch.Tensor  # a real result is a plain tensor
    assert rel_err(got, want.resolve_conj().numpy()) < 1e-6


def test_real_input_functions_take_real_tensors_only():
    x = random_tensor((8,), torch.float32)
    assert isinstance(trnfft.rfft(x), torch.Tensor)
    with pytest.raises(TypeError, match="must be real"):
        trnfft.rfft(ComplexTensor(x))  # a ComplexTensor is complex, as torch.fft.rfft would say


def test_gradients_flow_through_planes():
    re = random_tensor((16,), torch.float64).requires_grad_()
    im = random_tensor((16,), torch.float64, seed=1).requires_grad_()
    out = trnfft.fft(ComplexTensor(re, im))
    (out.real.sum() + 2 * out.imag.sum()).backward()
    # d/dre of sum(Re F x) + 2 sum(Im F x): columns sums of the DFT matrix, as NumPy computes.
    dft = np.fft.fft(np.eye(16), axis=0)
    np.testing.assert_allclose(re.grad.numpy(), dft.real.sum(0) + 2 * dft.imag.sum(0), atol=1e-10)
    np.testing.assert_allclose(im.grad.numpy(), -dft.imag.sum(0) + 2 * dft.real.sum(0), atol=1e-10)


def test_abs_matches_torch_including_gradient_at_zero():
    z = torch.tensor([0, 3 + 4j, 1e-30 + 0j, 1e30 - 1e30j], dtype=torch.complex128)
    re = z.real.clone().requires_grad_()
    im = z.imag.clone().requires_grad_()
    ComplexTensor(re, im).abs().sum().backward()
    zz = z.clone().requires_grad_()
    zz.abs().sum().backward()
    torch.testing.assert_close(ComplexTensor.from_torch(z).abs(), z.abs())
    torch.testing.assert_close(torch.complex(re.grad, im.grad), zz.grad)
