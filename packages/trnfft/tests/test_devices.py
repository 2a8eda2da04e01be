"""Results stay on the input's device: transforms, ComplexTensor, stft and layers on an XLA device.

torch-xla runs on the PJRT CPU device here (the root conftest sets PJRT_DEVICE=CPU), a real
non-CPU torch device with its own tensors and compilation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trnfft_helpers import random_tensor, rel_err

import trnfft

pytestmark = pytest.mark.xla

torch_xla = pytest.importorskip("torch_xla")


@pytest.fixture(scope="module")
def device():
    return torch_xla.device()


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "fft2", "rfftn", "ihfft"])
def test_transforms_run_and_stay_on_the_device(device, name):
    z = random_tensor((4, 16), torch.complex64)
    x = z.real if name in ("rfft", "rfftn", "ihfft") else z
    got = getattr(trnfft, name)(x.to(device), norm="ortho")
    assert got.device == device
    ref = {"fft2": np.fft.fft2, "rfftn": np.fft.rfftn}.get(name) or getattr(np.fft, name)
    assert (
        rel_err(
            got.cpu(), ref(x.numpy().astype(np.complex128 if x.is_complex() else np.float64), norm="ortho")
        )
        < 1e-5
    )


def test_complex_tensor_and_plan_on_the_device(device):
    z = random_tensor((3, 32), torch.complex64)
    ct = trnfft.ComplexTensor.from_torch(z.to(device))
    out = trnfft.fft(ct)
    assert isinstance(out, trnfft.ComplexTensor) and out.device == device
    assert rel_err(out.to_torch().cpu(), np.fft.fft(z.numpy())) < 1e-5
    plan = trnfft.create_plan(32, device=device)
    assert plan.twiddles.stage_dft[0][0].device == device
    assert rel_err(plan.fft(z.to(device)).cpu(), np.fft.fft(z.numpy())) < 1e-5


def test_stft_and_layers_on_the_device(device):
    x = random_tensor((256,), torch.float32)
    window = torch.hann_window(32)
    spec = trnfft.stft(x.to(device), 32, 8, window=window.to(device))
    assert spec.device == device
    torch.testing.assert_close(
        spec.cpu(), torch.stft(x, 32, 8, window=window, return_complex=True), atol=1e-4, rtol=1e-4
    )
    layer = trnfft.ComplexLinear(16, 4, device=device)
    z = random_tensor((2, 16), torch.complex64)
    out = layer(z.to(device))
    assert out.device == device
    want = z @ layer.weight.detach().cpu().T + torch.complex(layer.bias_real, layer.bias_imag).detach().cpu()
    torch.testing.assert_close(out.detach().cpu(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["dct", "idst", "dctn"])
def test_real_to_real_transforms_stay_on_the_device(device, name):
    import scipy.fft as sf

    x = random_tensor((4, 9), torch.float32)
    got = getattr(trnfft, name)(x.to(device), type=3, norm="ortho")
    assert got.device == device and got.dtype == torch.float32
    assert rel_err(got.cpu(), getattr(sf, name)(x.numpy().astype(np.float64), type=3, norm="ortho")) < 1e-5
