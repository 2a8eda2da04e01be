"""Complex layers against independent complex references, with torch.autograd.gradcheck in float64."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from _trnfft_helpers import fill_parameters, random_tensor

import trnfft
from trnfft import ComplexBatchNorm1d, ComplexConv1d, ComplexLinear, ComplexModReLU, ComplexTensor


def _gradcheck_layer(layer, z):
    """gradcheck the layer's output planes with respect to the input planes and every parameter."""
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in layer.named_parameters()]
    xr = z.real.detach().clone().requires_grad_()
    xi = z.imag.detach().clone().requires_grad_()

    def run(xr, xi, *values):
        out = torch.func.functional_call(layer, dict(zip(names, values)), (ComplexTensor(xr, xi),))
        return out.real, out.imag

    assert torch.autograd.gradcheck(run, (xr, xi, *params), eps=1e-6, atol=1e-5)


# --------------------------------------------------------------------------- linear


@pytest.mark.parametrize("shape", [(1, 7), (5, 127), (2, 3, 128), (129, 129)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_complex_matmul(shape, bias):
    layer = ComplexLinear(shape[-1], 9, bias=bias, dtype=torch.float64)
    z = random_tensor(shape, torch.complex128)
    want = z @ layer.weight.detach().T
    if bias:
        want = want + torch.complex(layer.bias_real, layer.bias_imag).detach()
    got = layer(z)
    assert got.dtype == torch.complex128
    torch.testing.assert_close(got.detach(), want)
    as_ct = layer(ComplexTensor.from_torch(z))
    assert isinstance(as_ct, ComplexTensor)
    torch.testing.assert_close(as_ct.to_torch().detach(), want)


def test_linear_single_precision_and_non_contiguous_input():
    layer = ComplexLinear(16, 4)
    z = random_tensor((16, 10), torch.complex64).T  # non-contiguous
    want = z.to(torch.complex128) @ layer.weight.detach().to(torch.complex128).T
    want = want + torch.complex(layer.bias_real, layer.bias_imag).detach().to(torch.complex128)
    got = layer(z)
    assert got.dtype == torch.complex64
    torch.testing.assert_close(got.detach().to(torch.complex128), want, rtol=1e-5, atol=1e-5)


def test_linear_gradcheck():
    _gradcheck_layer(ComplexLinear(5, 3, dtype=torch.complex128), random_tensor((4, 5), torch.complex128))


def test_linear_initial_weight_variance():
    layer = ComplexLinear(400, 400)
    var = layer.weight.detach().abs().pow(2).mean().item()
    assert var == pytest.approx(1 / (3 * 400), rel=0.05)  # same as nn.Linear's real weights


# --------------------------------------------------------------------------- conv1d

CONV_CASES = [
    {"kernel_size": 3},
    {"kernel_size": 5, "stride": 2, "padding": 2},
    {"kernel_size": 4, "padding": "same"},
    {"kernel_size": 3, "padding": "valid", "dilation": 2},
    {"kernel_size": 3, "groups": 2, "padding": 1},
    {"kernel_size": 3, "padding": 2, "padding_mode": "circular"},
    {"kernel_size": 4, "padding": "same", "padding_mode": "reflect"},
    {"kernel_size": 3, "padding": 1, "padding_mode": "replicate", "bias": False},
]


def _reference_conv(layer, z):
    """Complex conv1d computed by torch on complex tensors, padding applied the nn.Conv1d way."""
    w = layer.weight.detach()
    conv = torch.nn.Conv1d(
        layer.in_channels,
        layer.out_channels,
        layer.kernel_size,
        layer.stride,
        layer.padding,
        layer.dilation,
        layer.groups,
        bias=False,
        padding_mode=layer.padding_mode,
        dtype=torch.complex128,
    )
    with torch.no_grad():
        conv.weight.copy_(w)
        out = conv(z)
    if layer.bias_real is not None:
        out = out + torch.complex(layer.bias_real, layer.bias_imag).detach()[:, None]
    return out


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # the torch reference's own warning
@pytest.mark.parametrize("cfg", CONV_CASES)
@pytest.mark.parametrize("length", [7, 129])
def test_conv1d_matches_torch_complex_conv(cfg, length):
    layer = ComplexConv1d(4, 6, dtype=torch.float64, **cfg)
    z = random_tensor((2, 4, length), torch.complex128)
    torch.testing.assert_close(layer(z).detach(), _reference_conv(layer, z))
    unbatched = layer(ComplexTensor.from_torch(z[0]))
    assert isinstance(unbatched, ComplexTensor)
    torch.testing.assert_close(unbatched.to_torch().detach(), _reference_conv(layer, z[:1])[0])


def test_conv1d_against_numpy_correlation():
    layer = ComplexConv1d(1, 1, 5, bias=False, dtype=torch.float64)
    z = random_tensor((1, 1, 50), torch.complex128)
    w = layer.weight.detach()[0, 0].numpy()
    want = np.correlate(z[0, 0].numpy(), w.conj(), mode="valid")  # numpy conjugates its second argument
    np.testing.assert_allclose(layer(z).detach()[0, 0].numpy(), want, atol=1e-12)


def test_conv1d_gradcheck():
    layer = ComplexConv1d(2, 3, 3, padding=1, dtype=torch.float64)
    _gradcheck_layer(layer, random_tensor((2, 2, 6), torch.complex128))


# --------------------------------------------------------------------------- batch norm


def _numpy_whitened(z, eps):
    """Per channel: centre, multiply by the inverse matrix square root of the 2x2 covariance."""
    z = np.moveaxis(z, 1, 0).reshape(z.shape[1], -1)
    out = np.empty_like(z)
    for c, row in enumerate(z):
        parts = np.stack([row.real, row.imag])
        centred = parts - parts.mean(axis=1, keepdims=True)
        cov = np.cov(centred, bias=True) + eps * np.eye(2)
        white = np.real(scipy.linalg.inv(scipy.linalg.sqrtm(cov))) @ centred
        out[c] = white[0] + 1j * white[1]
    return out


@pytest.mark.parametrize("shape", [(64, 3), (8, 5, 20), (7, 1, 129)])
def test_batchnorm_whitens_like_numpy(shape):
    bn = ComplexBatchNorm1d(shape[1], affine=False, dtype=torch.float64)
    z = random_tensor(shape, torch.complex128)
    z = z * torch.complex(torch.tensor(2.0), torch.tensor(0.5)) + 0.7 * z.conj() + (1 - 3j)  # non-circular
    got = bn(z).detach().numpy()
    want = _numpy_whitened(z.numpy(), bn.eps)
    np.testing.assert_allclose(np.moveaxis(got, 1, 0).reshape(shape[1], -1), want, atol=1e-10)


def test_batchnorm_affine_and_running_statistics():
    bn = ComplexBatchNorm1d(3, momentum=0.5, dtype=torch.float64)
    with torch.no_grad():
        bn.gamma_rr.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.gamma_ri.copy_(torch.tensor([0.1, -0.2, 0.0]))
        bn.bias_real.fill_(0.3)
        bn.bias_imag.fill_(-1.0)
    z = random_tensor((40, 3), torch.complex128) * 2 + 1j
    got = bn(z).detach().numpy()
    white = _numpy_whitened(z.numpy(), bn.eps).T
    g = np.array([[1.0, 0.1], [2.0, -0.2], [0.5, 0.0]])  # (gamma_rr, gamma_ri) per channel
    gii = 2**-0.5
    want_re = g[:, 0] * white.real + g[:, 1] * white.imag + 0.3
    want_im = g[:, 1] * white.real + gii * white.imag - 1.0
    np.testing.assert_allclose(got.real, want_re, atol=1e-10)
    np.testing.assert_allclose(got.imag, want_im, atol=1e-10)
    # running stats: half-way from the initial (0, identity) towards the batch's unbiased statistics
    zr = z.numpy()
    np.testing.assert_allclose(bn.running_mean[0].numpy(), 0.5 * zr.real.mean(0), atol=1e-12)
    np.testing.assert_allclose(bn.running_mean[1].numpy(), 0.5 * zr.imag.mean(0), atol=1e-12)
    for c in range(3):
        cov = np.cov(np.stack([zr[:, c].real, zr[:, c].imag]))  # unbiased
        np.testing.assert_allclose(
            bn.running_cov[:, c].numpy(), 0.5 * np.array([1 + cov[0, 0], 1 + cov[1, 1], cov[0, 1]])
        )
    assert int(bn.num_batches_tracked) == 1
    # eval mode normalises with the running statistics
    bn.eval()
    mean = bn.running_mean.numpy()
    cov = bn.running_cov.numpy()
    sample = random_tensor((5, 3), torch.complex128, seed=9)
    out = bn(sample).detach().numpy()
    for c in range(3):
        v = np.array([[cov[0, c], cov[2, c]], [cov[2, c], cov[1, c]]]) + bn.eps * np.eye(2)
        parts = np.stack([sample[:, c].real.numpy() - mean[0, c], sample[:, c].imag.numpy() - mean[1, c]])
        w = np.real(scipy.linalg.inv(scipy.linalg.sqrtm(v))) @ parts
        re = g[c, 0] * w[0] + g[c, 1] * w[1] + 0.3
        np.testing.assert_allclose(out[:, c].real, re, atol=1e-10)


def test_batchnorm_cumulative_momentum_and_no_tracking():
    bn = ComplexBatchNorm1d(2, momentum=None, dtype=torch.float64)
    batches = [random_tensor((10, 2), torch.complex128, seed=s) + s for s in range(3)]
    for b in batches:
        bn(b)
    np.testing.assert_allclose(
        bn.running_mean[0].numpy(), np.mean([b.real.mean(0).numpy() for b in batches], axis=0), atol=1e-12
    )
    free = ComplexBatchNorm1d(2, track_running_stats=False, affine=False, dtype=torch.float64).eval()
    out = free(batches[0])  # no running stats: batch statistics even in eval mode
    np.testing.assert_allclose(
        out.detach().numpy().T, _numpy_whitened(batches[0].numpy(), free.eps), atol=1e-10
    )


def test_batchnorm_gradcheck():
    bn = ComplexBatchNorm1d(2, dtype=torch.float64)
    _gradcheck_layer(bn, random_tensor((6, 2, 3), torch.complex128) * (1 + 0.5j) + 0.2)


# --------------------------------------------------------------------------- modReLU


@pytest.mark.parametrize("bias", [-0.5, 0.0, 0.3])
@pytest.mark.parametrize("shape", [(7,), (4, 7), (2, 7, 129)])
def test_modrelu_against_numpy(bias, shape):
    layer = ComplexModReLU(7, bias_init=bias, dtype=torch.float64)
    z = random_tensor(shape, torch.complex128)
    z[(0,) * len(shape)] = 0  # an exact zero maps to zero
    zn = z.numpy()
    mag = np.abs(zn)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(mag > 0, np.maximum(mag + bias, 0) * zn / mag, 0)
    np.testing.assert_allclose(layer(z).detach().numpy(), want, atol=1e-12)
    shared = ComplexModReLU(bias_init=bias, dtype=torch.float64)
    np.testing.assert_allclose(
        shared(ComplexTensor.from_torch(z)).to_torch().detach().numpy(), want, atol=1e-12
    )


def test_modrelu_gradcheck():
    layer = ComplexModReLU(3, bias_init=-0.3, dtype=torch.float64)
    z = random_tensor((4, 3), torch.complex128)
    z = z * (1 + 0.5 / z.abs())  # keep |z| away from the kink at |z| = 0.3
    _gradcheck_layer(layer, z)


# --------------------------------------------------------------------------- bad inputs


def test_layers_reject_bad_inputs():
    layer = ComplexLinear(4, 2)
    with pytest.raises(TypeError, match="complex"):
        layer(random_tensor((3, 4), torch.float32))
    with pytest.raises(TypeError, match="precision"):
        layer(random_tensor((3, 4), torch.complex128))  # no silent downcast
    with pytest.raises(ValueError, match="4"):
        layer(random_tensor((3, 5), torch.complex64))
    with pytest.raises(ValueError, match="meta"):
        layer(torch.zeros(3, 4, dtype=torch.complex64, device="meta"))
    with pytest.raises(ValueError, match="channels"):
        ComplexConv1d(3, 2, 3)(random_tensor((1, 4, 9), torch.complex64))
    with pytest.raises(ValueError, match="more than one value"):
        ComplexBatchNorm1d(2)(random_tensor((1, 2), torch.complex64))
    with pytest.raises(ValueError, match="channels"):
        ComplexModReLU(3)(random_tensor((2, 4), torch.complex64))


@pytest.mark.parametrize(
    "factory",
    [
        lambda: ComplexLinear(0, 3),
        lambda: ComplexLinear(3, 3, dtype=torch.int32),
        lambda: ComplexConv1d(3, 2, 3, groups=2),
        lambda: ComplexConv1d(2, 2, 3, padding="full"),
        lambda: ComplexConv1d(2, 2, 3, stride=2, padding="same"),
        lambda: ComplexConv1d(2, 2, 3, padding_mode="mirror"),
        lambda: ComplexConv1d(2, 2, 3, padding=-1),
        lambda: ComplexBatchNorm1d(2, eps=0),
        lambda: ComplexBatchNorm1d(2, momentum=2.0),
        lambda: ComplexModReLU(0),
    ],
)
def test_layers_reject_bad_construction(factory):
    with pytest.raises((ValueError, TypeError)):
        factory()


def test_layers_work_in_a_model_with_fft():
    model = torch.nn.Sequential(
        ComplexConv1d(1, 4, 5, padding="same"), ComplexModReLU(4), ComplexBatchNorm1d(4)
    )
    fill_parameters(model[0], seed=0)
    x = random_tensor((8, 1, 64), torch.float32)
    spectrum = trnfft.fft(x)
    out = model(spectrum)
    loss = trnfft.ifft(out).real.pow(2).mean()
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_modrelu_gradient_at_zero_is_finite():
    layer = ComplexModReLU(bias_init=0.5, dtype=torch.float64)
    re = torch.tensor([0.0, 3.0], dtype=torch.float64, requires_grad=True)
    im = torch.tensor([0.0, 4.0], dtype=torch.float64, requires_grad=True)
    out = layer(ComplexTensor(re, im))
    (out.real.sum() + out.imag.sum()).backward()
    assert torch.isfinite(re.grad).all() and torch.isfinite(im.grad).all()
    assert re.grad[0] == 0 and im.grad[0] == 0

    # away from zero: d/dre of (re + im) * (|z| + b)/|z| at (3, 4), |z| = 5, by finite differences
    def f(a, b):
        m = np.hypot(a, b)
        return (a + b) * (m + 0.5) / m

    h = 1e-6
    assert re.grad[1].item() == pytest.approx((f(3 + h, 4) - f(3 - h, 4)) / (2 * h), rel=1e-6)
    assert layer.bias.grad.item() == pytest.approx((3 + 4) / 5)
