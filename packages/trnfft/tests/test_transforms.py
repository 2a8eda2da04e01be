"""Every transform against numpy.fft / scipy.fft in float64 and against torch.fft."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch
from _trnfft_helpers import SIZES, random_tensor, rel_err, tol

import trnfft

NORMS = (None, "backward", "forward", "ortho")
REAL = (torch.float32, torch.float64)
COMPLEX = (torch.complex64, torch.complex128)

# (name, input kind, reference): the reference is NumPy's or SciPy's function of the same name.
ONE_D = [
    ("fft", "complex", np.fft.fft),
    ("ifft", "complex", np.fft.ifft),
    ("rfft", "real", np.fft.rfft),
    ("irfft", "complex", np.fft.irfft),
    ("hfft", "complex", np.fft.hfft),
    ("ihfft", "real", np.fft.ihfft),
]
N_D = [
    ("fft2", "complex", np.fft.fft2),
    ("ifft2", "complex", np.fft.ifft2),
    ("rfft2", "real", np.fft.rfft2),
    ("irfft2", "complex", np.fft.irfft2),
    ("hfft2", "complex", scipy.fft.hfft2),
    ("ihfft2", "real", scipy.fft.ihfft2),
    ("fftn", "complex", np.fft.fftn),
    ("ifftn", "complex", np.fft.ifftn),
    ("rfftn", "real", np.fft.rfftn),
    ("irfftn", "complex", np.fft.irfftn),
    ("hfftn", "complex", scipy.fft.hfftn),
    ("ihfftn", "real", scipy.fft.ihfftn),
]


def _input(kind, precision, shape, seed=0):
    if kind == "real":
        dtype = torch.float64 if precision == "double" else torch.float32
    else:
        dtype = torch.complex128 if precision == "double" else torch.complex64
    return random_tensor(shape, dtype, seed)


def _expected_dtype(name, precision):
    real_out = name.startswith(("irfft", "hfft"))
    if precision == "double":
        return torch.float64 if real_out else torch.complex128
    return torch.float32 if real_out else torch.complex64


@pytest.mark.parametrize("name,kind,ref", ONE_D)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("precision", ["single", "double"])
def test_one_dimensional_against_numpy(name, kind, ref, size, precision):
    if name in ("irfft", "hfft") and size == 1:
        size = 2  # default output length 2*(m-1) needs m >= 2
    x = _input(kind, precision, (3, size))
    got = getattr(trnfft, name)(x)
    assert got.dtype == _expected_dtype(name, precision)
    assert rel_err(got, ref(x.numpy().astype(np.complex128 if kind == "complex" else np.float64))) < tol(
        got.dtype
    )


@pytest.mark.parametrize("name,kind,ref", ONE_D)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [5, 16, 33])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_one_dimensional_norm_n_dim(name, kind, ref, norm, n, dim):
    x = _input(kind, "double", (20, 6), seed=1)
    got = getattr(trnfft, name)(x, n=n, dim=dim, norm=norm)
    assert rel_err(got, ref(x.numpy(), n=n, axis=dim, norm=norm)) < 1e-12
    torch.testing.assert_close(got, getattr(torch.fft, name)(x, n=n, dim=dim, norm=norm), rtol=0, atol=0)


@pytest.mark.parametrize("name,kind,ref", N_D)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("precision", ["single", "double"])
def test_multi_dimensional_defaults(name, kind, ref, norm, precision):
    x = _input(kind, precision, (4, 7, 10), seed=2)
    got = getattr(trnfft, name)(x, norm=norm)
    assert got.dtype == _expected_dtype(name, precision)
    assert rel_err(
        got, ref(x.numpy().astype(np.complex128 if kind == "complex" else np.float64), norm=norm)
    ) < (tol(got.dtype))


S_DIMS = [((5, 12), (0, 2)), ((3, 9), (-1, -3)), (None, (2, 0)), ((6,), (1,)), ((4, 4, 4), (0, 1, 2))]


@pytest.mark.parametrize(
    "name,kind,ref,s,dim",
    [(*case, s, dim) for case in N_D for s, dim in S_DIMS if len(dim) == 2 or not case[0].endswith("2")],
)
def test_multi_dimensional_s_and_dims(name, kind, ref, s, dim):
    x = _input(kind, "double", (6, 5, 8), seed=3)
    got = getattr(trnfft, name)(x, s=s, dim=dim, norm="ortho")
    assert rel_err(got, ref(x.numpy(), s=s, axes=dim, norm="ortho")) < 1e-12


@pytest.mark.parametrize("name,kind,ref", ONE_D)
def test_non_contiguous_inputs(name, kind, ref):
    base = _input(kind, "double", (40, 30), seed=4)
    for x in (base.t(), base[::3, 1::2], base.unsqueeze(0).expand(2, 40, 30)):
        assert not x.is_contiguous()
        got = getattr(trnfft, name)(x, dim=-1)
        assert rel_err(got, ref(x.numpy(), axis=-1)) < 1e-12


@pytest.mark.parametrize("size", [16, 17, 4096])
def test_real_and_integer_inputs_promote_like_torch(size):
    x = torch.arange(size)
    got = trnfft.fft(x)
    want = torch.fft.fft(x)
    assert got.dtype == want.dtype == torch.complex64
    assert rel_err(got, np.fft.fft(np.arange(size, dtype=np.float64))) < 2e-6


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("size", [1, 7, 128, 129])
def test_round_trips(norm, size):
    x = random_tensor((5, size), torch.complex128, seed=5)
    torch.testing.assert_close(trnfft.ifft(trnfft.fft(x, norm=norm), norm=norm), x)
    r = x.real
    torch.testing.assert_close(trnfft.irfft(trnfft.rfft(r, norm=norm), n=size, norm=norm), r)
    torch.testing.assert_close(trnfft.hfft(trnfft.ihfft(r, norm=norm), n=size, norm=norm), r)
    img = random_tensor((size, 6, 5), torch.float64, seed=6)
    torch.testing.assert_close(trnfft.irfftn(trnfft.rfftn(img, norm=norm), s=img.shape, norm=norm), img)


def test_out_argument():
    x = random_tensor((4, 16), torch.complex128)
    out = torch.empty(4, 16, dtype=torch.complex128)
    got = trnfft.fft(x, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert rel_err(out, np.fft.fft(x.numpy())) < 1e-12
    out2 = torch.empty(4, 9, dtype=torch.complex128)
    trnfft.rfft2(x.real, out=out2)
    assert rel_err(out2, np.fft.rfft2(x.real.numpy())) < 1e-12


def test_tensor_subclass_input():
    p = torch.nn.Parameter(random_tensor((8,), torch.float64))
    got = trnfft.rfft(p)
    assert rel_err(got, np.fft.rfft(p.detach().numpy())) < 1e-12
    got.abs().sum().backward()
    assert p.grad is not None


def test_autograd_matches_torch():
    x = random_tensor((3, 12), torch.complex128).requires_grad_()
    (trnfft.fft(x, norm="ortho").abs() ** 2).sum().backward()
    mine = x.grad.clone()
    x.grad = None
    (torch.fft.fft(x, norm="ortho").abs() ** 2).sum().backward()
    torch.testing.assert_close(mine, x.grad)


def test_results_stay_on_the_input_device():
    x = torch.empty(4, 32, device="meta")
    for name in ("fft", "rfft", "ihfft"):
        assert getattr(trnfft, name)(x).device.type == "meta"
    assert trnfft.fft2(x).device.type == "meta"


@pytest.mark.parametrize("n", [1, 7, 8])
@pytest.mark.parametrize("d", [1.0, 0.25])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_frequencies(n, d, dtype):
    got = trnfft.fftfreq(n, d, dtype=dtype)
    assert got.dtype == (dtype or torch.get_default_dtype())
    np.testing.assert_allclose(got.numpy(), np.fft.fftfreq(n, d), rtol=1e-6)
    np.testing.assert_allclose(trnfft.rfftfreq(n, d, dtype=dtype).numpy(), np.fft.rfftfreq(n, d), rtol=1e-6)


def test_frequencies_of_zero_points_are_empty():
    assert trnfft.fftfreq(0).numel() == torch.fft.fftfreq(0).numel() == 0
    assert trnfft.rfftfreq(0).shape == torch.fft.rfftfreq(0).shape


@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 6, 8)])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, -1)])
def test_shifts(shape, dim):
    x = random_tensor(shape, torch.complex128)
    axes = tuple(dim) if isinstance(dim, tuple) else dim
    np.testing.assert_array_equal(trnfft.fftshift(x, dim).numpy(), np.fft.fftshift(x.numpy(), axes))
    np.testing.assert_array_equal(trnfft.ifftshift(x, dim).numpy(), np.fft.ifftshift(x.numpy(), axes))
    ct = trnfft.ComplexTensor.from_torch(x)
    shifted = trnfft.fftshift(ct, dim)
    assert isinstance(shifted, trnfft.ComplexTensor)
    np.testing.assert_array_equal(shifted.to_torch().numpy(), np.fft.fftshift(x.numpy(), axes))


@pytest.mark.parametrize("name", [n for n, _, _ in ONE_D + N_D] + ["stft", "istft"])
def test_every_path_goes_through_the_operation_table(name, monkeypatch):
    """Every public function runs the declaration in trnfft._ops: on the PyTorch route its reference
    (called directly on the fast path or by the operation), so one declaration reroutes them all."""
    from trnfft import _ops, transforms

    calls = []
    operation = getattr(_ops, name)
    original = operation.reference

    def spy(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(operation, "reference", spy)
    if name in ("stft", "istft"):
        window = torch.hann_window(16, dtype=torch.float64)
        spec = trnfft.stft(random_tensor((64,), torch.float64), 16, window=window)
        trnfft.istft(spec, 16, window=window)
        assert calls == [name]
        return
    # The fast path's binding is the operation's reference itself, nothing of its own.
    assert getattr(transforms, f"_ref_{name}") is original
    monkeypatch.setattr(transforms, f"_ref_{name}", spy)
    z = random_tensor((4, 6), torch.complex128)
    x = z.real if name in ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn") else z
    fn = getattr(trnfft, name)
    fn(x)
    if name in [n for n, _, _ in ONE_D]:
        fn(x, None, 0)
    else:
        fn(x, dim=(0, 1))
    fn(x, norm="ortho")
    if name not in ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"):
        fn(trnfft.ComplexTensor.from_torch(z))
    assert len(calls) >= 3 and set(calls) == {name}


def test_the_fast_path_follows_a_route_change(monkeypatch):
    """After calls on the PyTorch route, a backend or environment change reaches the very next call."""
    import trncore.sim as sim

    x = random_tensor((4, 32), torch.complex64)
    trnfft.fft(x)
    trnfft.fft(x)  # the library now remembers that it runs torch.fft
    previous = trnfft.get_backend()
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    try:
        trnfft.set_backend("nki")
        with sim.count_keys() as keys:
            y = trnfft.fft(x)
        assert keys, "the kernel did not run after set_backend('nki')"
        np.testing.assert_allclose(y.numpy(), np.fft.fft(x.numpy().astype(np.complex128)), rtol=0, atol=1e-4)
        monkeypatch.setenv("TRNFFT_FORCE_BACKEND", "pytorch")  # an environment change alone
        with sim.count_keys() as keys:
            trnfft.fft(x)
        assert not keys
    finally:
        trnfft.set_backend(previous)
