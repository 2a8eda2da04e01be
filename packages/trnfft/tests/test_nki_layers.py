"""Complex GEMM and the complex layers on the NKI route (trncore.sim emulator).

Forward results are checked against independent complex references; the NKI route's analytic
backward against the gradients the PyTorch route computes for the same layer and input (float32),
and the analytic formulas themselves by float64 gradcheck on the PyTorch route.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trnfft_helpers import fill_parameters, random_tensor, rel_err

import trncore.sim as sim
import trnfft
from trnfft import ComplexBatchNorm1d, ComplexConv1d, ComplexLinear, ComplexModReLU, ComplexTensor
from trnfft._ops import complex_matmul

pytestmark = pytest.mark.simulator
TOL = 1e-5


@pytest.fixture
def nki_route(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNFFT_REQUIRE_NKI", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    yield
    trnfft.set_backend(previous)


def _on_pytorch_route(fn):
    previous = trnfft.get_backend()
    trnfft.set_backend("pytorch")
    try:
        return fn()
    finally:
        trnfft.set_backend(previous)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 129, 5), (200, 257, 513), (128, 128, 512)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_complex_matmul_any_shape(nki_route, monkeypatch, target, m, k, n, trans_a, trans_b):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    a = random_tensor((k, m) if trans_a else (m, k), torch.complex64, seed=m + k)
    b = random_tensor((n, k) if trans_b else (k, n), torch.complex64, seed=n)
    bias = random_tensor((n,), torch.complex64, seed=3)
    with sim.count_keys() as keys:
        cr, ci = complex_matmul(
            a.real.contiguous(),
            a.imag.contiguous(),
            b.real.contiguous(),
            b.imag.contiguous(),
            bias.real,
            bias.imag,
            trans_a,
            trans_b,
        )
    assert keys
    a64, b64 = a.numpy().astype(np.complex128), b.numpy().astype(np.complex128)
    want = (a64.T if trans_a else a64) @ (b64.T if trans_b else b64) + bias.numpy()
    assert rel_err(torch.complex(cr, ci), want) <= TOL


def _grads(layer, z):
    """Output and gradients (input planes and parameters) of a fixed real loss."""
    x = ComplexTensor(z.real.clone().requires_grad_(), z.imag.clone().requires_grad_())
    layer.zero_grad()
    out = layer(x)
    weights = torch.linspace(-1, 1, out.real.numel()).reshape(out.real.shape)
    loss = (out.real * weights).sum() + (out.imag * weights.flip(-1) ** 2).sum()
    loss.backward()
    grads = [x.real.grad, x.imag.grad] + [p.grad.clone() for p in layer.parameters()]
    return out.to_torch().detach(), grads


def _compare_routes(layer, z):
    with sim.count_keys() as keys:
        out, grads = _grads(layer, z)
    assert len(keys) >= 2, "forward and backward kernels did not run"
    ref_out, ref_grads = _on_pytorch_route(lambda: _grads(layer, z))
    assert rel_err(out, ref_out.numpy()) <= TOL
    for g, r in zip(grads, ref_grads):
        assert rel_err(g, r.numpy()) <= TOL


@pytest.mark.parametrize("shape", [(1, 7), (3, 129), (2, 5, 200)])
def test_linear_forward_and_backward(nki_route, shape):
    layer = ComplexLinear(shape[-1], 9)
    fill_parameters(layer, seed=0)
    z = random_tensor(shape, torch.complex64, seed=1)
    out = layer(z)
    want = z.numpy().astype(np.complex128) @ layer.weight.detach().numpy().T.astype(np.complex128)
    want = want + torch.complex(layer.bias_real, layer.bias_imag).detach().numpy()
    assert rel_err(out, want) <= TOL
    _compare_routes(layer, z)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(stride=2, padding=3, dilation=2),
        dict(padding="same", bias=False),
        dict(padding=1, padding_mode="circular"),
    ],
)
def test_conv1d_forward_and_backward(nki_route, kw):
    layer = ComplexConv1d(3, 5, 4, **kw)
    fill_parameters(layer, seed=1)
    z = random_tensor((2, 3, 30), torch.complex64, seed=2)
    out = layer(z)
    ref = _on_pytorch_route(lambda: layer(z)).detach()
    assert rel_err(out, ref.numpy()) <= TOL
    _compare_routes(layer, z)
    unbatched = layer(z[0])
    assert rel_err(unbatched, ref[0].numpy()) <= TOL


@pytest.mark.parametrize(
    "num_features,shape", [(None, (4, 9)), (3, (5, 3)), (3, (2, 3, 70)), (130, (2, 130))]
)
def test_modrelu_forward_and_backward(nki_route, num_features, shape):
    layer = ComplexModReLU(num_features, bias_init=-0.5)
    with torch.no_grad():
        layer.bias.copy_(torch.linspace(-0.8, 0.6, layer.bias.numel()))
    z = random_tensor(shape, torch.complex64, seed=4)
    z.view(-1)[::5] = 0  # zeros: output and gradient 0 there
    out = layer(z)
    mag = np.abs(z.numpy().astype(np.complex128))
    bias = layer.bias.detach().numpy().astype(np.float64)
    b = bias[0] if num_features is None else bias.reshape([-1] + [1] * (len(shape) - 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(mag > 0, np.maximum(mag + b, 0) / np.where(mag > 0, mag, 1), 0) * z.numpy()
    assert rel_err(out, want) <= TOL
    _compare_routes(layer, z)


def test_modrelu_gradcheck_float64():
    layer = ComplexModReLU(3, dtype=torch.float64)
    with torch.no_grad():
        layer.bias.copy_(torch.tensor([-0.3, 0.2, 0.5], dtype=torch.float64))
    z = random_tensor((4, 3, 2), torch.complex128, seed=5)
    params = [layer.bias.detach().clone().requires_grad_()]
    xr, xi = z.real.clone().requires_grad_(), z.imag.clone().requires_grad_()

    def run(xr, xi, bias):
        out = torch.func.functional_call(layer, {"bias": bias}, (ComplexTensor(xr, xi),))
        return out.real, out.imag

    assert torch.autograd.gradcheck(run, (xr, xi, *params), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("shape", [(6, 3), (4, 130, 5), (2, 2, 2100)])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_forward_and_backward(nki_route, shape, affine):
    layer = ComplexBatchNorm1d(shape[1], affine=affine)
    fill_parameters(layer, seed=2, add=True)  # away from the identity initialisation
    z = random_tensor(shape, torch.complex64, seed=6) * (1 + 0.5j) + 0.2
    reference = ComplexBatchNorm1d(shape[1], affine=affine)
    reference.load_state_dict(layer.state_dict())
    _compare_routes(layer, z)  # training mode: batch statistics (updates running stats)
    _on_pytorch_route(lambda: reference(z))
    _on_pytorch_route(lambda: reference(z))
    for name in ("running_mean", "running_cov"):
        torch.testing.assert_close(getattr(layer, name), getattr(reference, name), rtol=1e-5, atol=1e-6)
    layer.eval()
    _compare_routes(layer, z)  # running statistics


def test_batchnorm_whitens_on_the_nki_route(nki_route):
    layer = ComplexBatchNorm1d(3, affine=False)
    z = random_tensor((500, 3), torch.complex64, seed=7) * (2 - 1j) + (0.5 + 0.3j)
    out = layer(z).detach().numpy().astype(np.complex128)
    for ch in range(3):
        planes = np.stack([out[:, ch].real, out[:, ch].imag])
        np.testing.assert_allclose(planes.mean(1), 0, atol=1e-5)
        np.testing.assert_allclose(np.cov(planes, bias=True), np.eye(2), atol=1e-4)
