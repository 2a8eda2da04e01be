"""DCT and DST (types 1-4, inverses, n-D forms) on the PyTorch route against scipy.fft.

scipy.fft (pocketfft) is the independent reference: every case is compared in float64 to its
rounding (relative L2 error <= 1e-13) over odd, prime and power-of-two lengths, every ``norm``,
``orthogonalize`` on and off, ``n`` padding and cropping and several axes; float32 inputs stay
float32 with float32 accuracy. Gradients are checked with ``torch.autograd.gradcheck``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft as sf
import torch
from _trnfft_helpers import random_tensor, rel_err

import trnfft
from trnfft.errors import FFTArgumentError, FFTDimError, FFTTypeError

F64 = 1e-13
F32 = 2e-6
NORMS = (None, "backward", "forward", "ortho")
ORTHO = (None, True, False)
# odd, prime and power-of-two lengths, around the NKI route's matrix bound 128, and larger
LENGTHS = (2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 64, 97, 128, 131, 256, 1000)
CASES = [(kind, t, inv) for kind in ("dct", "dst") for t in (1, 2, 3, 4) for inv in (False, True)]


def _name(kind, inverse, nd=False):
    return ("i" if inverse else "") + kind + ("n" if nd else "")


@pytest.mark.parametrize(("kind", "type_", "inverse"), CASES)
def test_one_dimensional_matches_scipy_in_float64(kind, type_, inverse):
    ours, ref = getattr(trnfft, _name(kind, inverse)), getattr(sf, _name(kind, inverse))
    for n in LENGTHS:
        x = random_tensor((3, n), torch.float64, seed=n)
        for norm in NORMS:
            for ortho in ORTHO:
                got = ours(x, type=type_, norm=norm, orthogonalize=ortho)
                want = ref(x.numpy(), type=type_, norm=norm, orthogonalize=ortho)
                assert got.dtype == torch.float64
                assert rel_err(got, want) <= F64, (n, norm, ortho)


@pytest.mark.parametrize(("kind", "type_", "inverse"), CASES)
def test_n_axis_dim_and_float32(kind, type_, inverse):
    ours, ref = getattr(trnfft, _name(kind, inverse)), getattr(sf, _name(kind, inverse))
    x = random_tensor((5, 12, 3), torch.float64, seed=7)
    for n in (None, 2, 9, 12, 29):  # crop and pad along the axis
        for axis in (0, 1, -1, -3):
            want = ref(x.numpy(), type=type_, n=n, axis=axis, norm="ortho")
            assert rel_err(ours(x, type=type_, n=n, axis=axis, norm="ortho"), want) <= F64
            assert rel_err(ours(x, type_, n, dim=axis, norm="ortho"), want) <= F64
    x32 = x.float()
    got = ours(x32, type_, None, 1, "forward")
    assert got.dtype == torch.float32
    assert rel_err(got, ref(x32.numpy().astype(np.float64), type=type_, axis=1, norm="forward")) <= F32


@pytest.mark.parametrize(("kind", "type_"), [(k, t) for k in ("dct", "dst") for t in (1, 2, 3, 4)])
def test_inverse_undoes_the_forward_transform(kind, type_):
    x = random_tensor((4, 33), torch.float64, seed=type_)
    fwd, inv = getattr(trnfft, kind), getattr(trnfft, "i" + kind)
    for norm in NORMS:
        for ortho in ORTHO:
            y = inv(fwd(x, type_, norm=norm, orthogonalize=ortho), type_, norm=norm, orthogonalize=ortho)
            assert rel_err(y, x.numpy()) <= F64


def test_complex_input_transforms_real_and_imaginary_parts_as_scipy():
    z = random_tensor((3, 21), torch.complex128, seed=4)
    for kind in ("dct", "dst", "idct", "idst"):
        for t in (1, 2, 3, 4):
            got = getattr(trnfft, kind)(z, t, norm="ortho")
            assert got.dtype == torch.complex128
            assert rel_err(got, getattr(sf, kind)(z.numpy(), t, norm="ortho")) <= F64
    ct = trnfft.ComplexTensor.from_torch(z.to(torch.complex64))
    out = trnfft.dct(ct)
    assert isinstance(out, trnfft.ComplexTensor)
    assert rel_err(out.to_torch(), sf.dct(z.numpy())) <= F32


def test_integer_input_is_promoted_like_torch_fft():
    x = torch.arange(10)
    got = trnfft.dst(x, 2)
    assert got.dtype == torch.get_default_dtype()
    assert rel_err(got, sf.dst(np.arange(10.0), 2)) <= F32


@pytest.mark.parametrize(("kind", "type_", "inverse"), CASES)
def test_n_dimensional_matches_scipy(kind, type_, inverse):
    ours, ref = getattr(trnfft, _name(kind, inverse, True)), getattr(sf, _name(kind, inverse, True))
    x = random_tensor((6, 5, 7), torch.float64, seed=11)
    a = x.numpy()
    for norm in NORMS:
        assert rel_err(ours(x, type_, norm=norm), ref(a, type_, norm=norm)) <= F64
    checks = [
        (dict(s=(4, 9)), dict(s=(4, 9))),  # the last len(s) axes
        (dict(axes=(0, 2)), dict(axes=(0, 2))),
        (dict(dim=(2, 0)), dict(axes=(2, 0))),
        (dict(axes=-2), dict(axes=-2)),
        (dict(s=(3, -1), axes=(2, 1)), dict(s=(3, 5), axes=(2, 1))),
        (dict(s=(8,), dim=(0,), orthogonalize=True), dict(s=(8,), axes=(0,), orthogonalize=True)),
    ]
    for kw, ref_kw in checks:
        assert rel_err(ours(x, type_, norm="ortho", **kw), ref(a, type_, norm="ortho", **ref_kw)) <= F64, kw
    same = ours(x, type_, axes=())
    assert torch.equal(same, x) and same.data_ptr() != x.data_ptr()


@pytest.mark.parametrize(("kind", "type_", "inverse"), CASES)
def test_gradcheck(kind, type_, inverse):
    fn = getattr(trnfft, _name(kind, inverse))
    for n in (4, 5):  # the short-length matrix, every normalisation
        x = random_tensor((2, n), torch.float64, seed=n).requires_grad_()
        for norm, ortho in ((None, None), ("ortho", None), ("forward", True)):
            args = (type_, n + 1, 1, norm)
            assert torch.autograd.gradcheck(lambda t, a=args, o=ortho: fn(t, *a, orthogonalize=o), (x,))
    for n in (129, 130):  # the FFT algorithms (> 128 points), odd and even
        x = random_tensor((1, n), torch.float64, seed=n).requires_grad_()
        assert torch.autograd.gradcheck(lambda t: fn(t, type_, None, 1, "ortho"), (x,))
    fn_nd = getattr(trnfft, _name(kind, inverse, True))
    x = random_tensor((3, 4), torch.float64, seed=1).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: fn_nd(t, type_, s=(3, 6), norm="ortho"), (x,))


def test_bad_arguments_raise_clear_errors():
    x = random_tensor((4, 6), torch.float32)
    with pytest.raises(FFTArgumentError, match="type must be 1, 2, 3 or 4"):
        trnfft.dct(x, type=5)
    with pytest.raises(TypeError, match="type must be an int"):
        trnfft.dst(x, type=2.0)
    with pytest.raises(FFTArgumentError, match="norm"):
        trnfft.idct(x, norm="unitary")
    with pytest.raises(FFTArgumentError, match="positive"):
        trnfft.dct(x, n=0)
    with pytest.raises(TypeError, match="n must be an int"):
        trnfft.dct(x, n=4.5)
    with pytest.raises(FFTArgumentError, match="DCT-I needs at least 2 points"):
        trnfft.dct(x, type=1, n=1)
    assert trnfft.dst(x, type=1, n=1).shape == (4, 1)  # DST-I of one point is defined (scipy too)
    with pytest.raises(FFTDimError, match="axis=2"):
        trnfft.dct(x, axis=2)
    with pytest.raises(FFTArgumentError, match="disagree"):
        trnfft.dct(x, axis=0, dim=1)
    with pytest.raises(TypeError, match="orthogonalize"):
        trnfft.dct(x, orthogonalize="yes")
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        trnfft.dct(np.ones(4))
    with pytest.raises(FFTTypeError, match="float16"):
        trnfft.dct(x.half())
    with pytest.raises(FFTArgumentError, match="must not repeat"):
        trnfft.dctn(x, axes=(0, -2))
    with pytest.raises(FFTArgumentError, match="must match"):
        trnfft.dstn(x, s=(3, 3), axes=(0,))
    with pytest.raises(FFTArgumentError, match="entries but the input has"):
        trnfft.idctn(x, s=(3, 3, 3))
    with pytest.raises(FFTDimError):
        trnfft.idstn(x, axes=(0, 5))
    with pytest.raises(FFTArgumentError, match="positive"):
        trnfft.dctn(x, s=(0, 4))
    with pytest.raises(FFTArgumentError, match="length along axis 0 is 0"):
        trnfft.dct(torch.empty(0, 3), axis=0)
