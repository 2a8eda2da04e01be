"""Property-based tests: arbitrary shapes, dims, lengths and norms agree with numpy.fft / scipy.fft."""

from __future__ import annotations

import inspect

import numpy as np
import scipy.fft
import torch
from _trnfft_helpers import rel_err
from hypothesis import given
from hypothesis import strategies as st

import trnfft

NORMS = st.sampled_from([None, "backward", "forward", "ortho"])
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
REAL_INPUT = {"rfft", "ihfft", "rfftn", "ihfftn"}


@st.composite
def arrays(draw, max_dims=3, max_side=24):
    shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=1, max_size=max_dims)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@given(arrays(), st.sampled_from(ONE_D), st.data(), NORMS)
def test_one_dimensional(z, name, data, norm):
    x = z.real if name in REAL_INPUT else z
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 40)))
    if n is None and name in ("irfft", "hfft") and x.shape[dim] < 2:
        n = 2
    got = getattr(trnfft, name)(torch.from_numpy(x), n=n, dim=dim, norm=norm)
    assert rel_err(got, getattr(np.fft, name)(x, n=n, axis=dim, norm=norm)) < 1e-12


@given(arrays(max_dims=4, max_side=9), st.sampled_from(N_D), st.data(), NORMS)
def test_multi_dimensional(z, name, data, norm):
    x = z.real if name in REAL_INPUT else z
    dims = data.draw(
        st.lists(
            st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=x.ndim, unique_by=lambda d: d % x.ndim
        )
    )
    s = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 12), min_size=len(dims), max_size=len(dims))))
    if s is None and name in ("irfftn", "hfftn") and x.shape[dims[-1]] < 2:
        s = [x.shape[d] for d in dims[:-1]] + [2]
    got = getattr(trnfft, name)(torch.from_numpy(x), s=s, dim=dims, norm=norm)
    assert rel_err(got, getattr(scipy.fft, name)(x, s=s, axes=dims, norm=norm)) < 1e-12


@given(arrays(max_dims=3, max_side=40), NORMS)
def test_complex_tensor_round_trip_through_fft(z, norm):
    ct = trnfft.ComplexTensor.from_torch(torch.from_numpy(z))
    back = trnfft.ifftn(trnfft.fftn(ct, norm=norm), norm=norm)
    assert isinstance(back, trnfft.ComplexTensor)
    assert rel_err(back.to_torch(), z) < 1e-12


@given(st.integers(1, 300), st.integers(1, 4), st.booleans())
def test_float32_accuracy_and_dtype(n, batch, real):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((batch, n)).astype(np.float32)
    if not real:
        x = x + 1j * rng.standard_normal((batch, n)).astype(np.float32)
    got = trnfft.fft(torch.from_numpy(x))
    assert got.dtype == torch.complex64
    assert rel_err(got, np.fft.fft(x.astype(np.complex128))) < 1e-5


def test_every_public_symbol_is_documented():
    for name in trnfft.__all__:
        if name == "HAS_NKI":
            continue
        obj = getattr(trnfft, name)
        if isinstance(obj, str):
            continue
        assert inspect.getdoc(obj), f"trnfft.{name} has no docstring"
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member):
                    assert inspect.getdoc(member), f"trnfft.{name}.{attr} has no docstring"


def test_signatures_match_torch_fft():
    for name in ONE_D + N_D + ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]:
        params = list(inspect.signature(getattr(trnfft, name)).parameters)
        assert params == ["input", "n" if name in ONE_D else "s", "dim", "norm", "out"], name
