"""Plans: cached per (n, dtype, device, norm), the documented algorithm rule, correct twiddle tables."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
import torch
from _trnfft_helpers import random_tensor, rel_err, staged_fft
from hypothesis import given, settings
from hypothesis import strategies as st

import trnfft
from trnfft import plan as plan_module


@pytest.fixture(autouse=True)
def _fresh_cache():
    trnfft.clear_plan_cache()
    yield
    trnfft.clear_plan_cache()


def test_same_arguments_give_the_same_plan_object():
    a = trnfft.create_plan(1024)
    b = trnfft.create_plan(1024, dtype=torch.complex64, device="cpu", norm=None)
    assert a is b
    info = trnfft.plan_cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert trnfft.create_plan(1024, dtype=torch.float32) is a  # float32 is single precision too


def test_different_arguments_give_different_plans():
    base = trnfft.create_plan(64)
    others = [
        trnfft.create_plan(65),
        trnfft.create_plan(64, dtype=torch.complex128),
        trnfft.create_plan(64, norm="ortho"),
        trnfft.create_plan(64, device="meta"),
    ]
    assert all(o is not base for o in others)
    assert len({id(o) for o in others}) == len(others)
    assert trnfft.plan_cache_info().currsize == 5


def test_twiddles_are_built_once(monkeypatch):
    calls = []
    real_builder = plan_module._build_twiddles

    def counting(plan):
        calls.append(plan.n)
        return real_builder(plan)

    monkeypatch.setattr(plan_module, "_build_twiddles", counting)
    plan = trnfft.create_plan(4096)
    assert calls == []  # creating a plan is cheap; tables come on first use
    first = plan.twiddles
    for _ in range(3):
        assert trnfft.create_plan(4096).twiddles is first
    assert calls == [4096]


def _largest_prime(n: int) -> int:
    return max(sympy.factorint(n)) if n > 1 else 1


@given(st.integers(min_value=1, max_value=2_000_000))
def test_algorithm_rule(n):
    algorithm, radices = trnfft.choose_algorithm(n)
    if n <= 128:
        assert (algorithm, radices) == ("dft_gemm", (n,))
    elif n & (n - 1) == 0:
        assert algorithm == "stockham" and set(radices) <= {4, 8} and int(np.prod(radices)) == n
        assert radices.count(4) <= 2  # as many radix-8 stages as possible
    elif _largest_prime(n) <= 13:
        assert algorithm == "mixed_radix" and int(np.prod(radices)) == n
        assert all(_largest_prime(r) == r or r in (4, 8) for r in radices)
    else:
        m = trnfft.create_plan(n).inner_length
        assert algorithm == "bluestein"
        assert m & (m - 1) == 0 and 2 * n - 1 <= m < 4 * n
        assert set(radices) <= {4, 8} and int(np.prod(radices)) == m


CASES = [1, 2, 7, 127, 128, 129, 256, 1000, 1024, 2 * 127, 3 * 128, 4093, 4096]


@pytest.mark.parametrize("n", CASES)
def test_staged_arithmetic_with_the_plan_tables_matches_numpy(n):
    """The tables are right: the NKI route's stage arithmetic on them reproduces numpy.fft."""
    x = random_tensor((3, n), torch.complex128, seed=n)
    want = np.fft.fft(x.numpy())
    assert rel_err(staged_fft(x, trnfft.create_plan(n, dtype=torch.complex128)), want) < 1e-13
    # single precision tables and arithmetic: the bound for the kernels, 1e-5 relative L2
    assert rel_err(staged_fft(x.to(torch.complex64), trnfft.create_plan(n)), want) < 1e-5


@pytest.mark.parametrize("dtype,part", [(torch.complex64, torch.float32), (torch.complex128, torch.float64)])
def test_twiddle_tables_layout_and_values(dtype, part):
    plan = trnfft.create_plan(1000, dtype=dtype)
    tables = plan.twiddles
    assert len(tables.stage_dft) == len(tables.stage_twiddles) == len(plan.radices)
    before = 1
    for r, (dre, dim), (tre, tim) in zip(plan.radices, tables.stage_dft, tables.stage_twiddles):
        for t in (dre, dim, tre, tim):
            assert t.dtype == part and t.is_contiguous() and t.device == plan.device
        np.testing.assert_allclose(dre.numpy() + 1j * dim.numpy(), np.fft.fft(np.eye(r)), atol=1e-6)
        k, p = np.meshgrid(np.arange(before), np.arange(r), indexing="ij")
        np.testing.assert_allclose(
            tre.numpy() + 1j * tim.numpy(), np.exp(-2j * np.pi * k * p / (before * r)), atol=1e-6
        )
        before *= r
    assert tables.chirp is None and tables.chirp_filter is None


def test_bluestein_tables():
    n = 131
    plan = trnfft.create_plan(n, dtype=torch.complex128)
    chirp = plan.twiddles.chirp
    k = np.arange(n)
    np.testing.assert_allclose(
        chirp[0].numpy() + 1j * chirp[1].numpy(), np.exp(-1j * np.pi * k**2 / n), atol=1e-12
    )
    assert plan.twiddles.chirp_filter[0].shape == (plan.inner_length,)


@pytest.mark.parametrize("norm", [None, "forward", "ortho"])
@pytest.mark.parametrize("n", [16, 129])
def test_plan_transforms(norm, n):
    plan = trnfft.create_plan(n, dtype=torch.complex128, norm=norm)
    x = random_tensor((n, 4), torch.complex128)
    assert rel_err(plan.fft(x, dim=0), np.fft.fft(x.numpy(), axis=0, norm=norm)) < 1e-12
    assert rel_err(plan.ifft(x, dim=0), np.fft.ifft(x.numpy(), axis=0, norm=norm)) < 1e-12
    assert rel_err(plan.fft(x.real), np.fft.fft(x.real.numpy(), n=n, norm=norm)) < 1e-12
    ct = trnfft.ComplexTensor.from_torch(x)
    assert isinstance(plan.fft(ct, dim=0), trnfft.ComplexTensor)


def test_plan_input_checks():
    plan = trnfft.create_plan(8)
    with pytest.raises(TypeError, match="complex128 but the plan is complex64"):
        plan.fft(torch.zeros(8, dtype=torch.complex128))
    with pytest.raises(TypeError, match="x must be"):
        plan.fft([0.0] * 8)
    with pytest.raises(ValueError, match="meta"):
        plan.fft(torch.zeros(8, device="meta"))


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"n": 0}, ValueError),
        ({"n": -4}, RuntimeError),
        ({"n": 8.0}, TypeError),
        ({"n": True}, TypeError),
        ({"n": 8, "dtype": torch.int32}, TypeError),
        ({"n": 8, "dtype": "complex64"}, TypeError),
        ({"n": 8, "norm": "unit"}, ValueError),
    ],
)
def test_bad_plan_arguments(kwargs, error):
    with pytest.raises(error):
        trnfft.create_plan(**kwargs)


def test_concurrent_creation_yields_one_plan():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        plans = list(pool.map(lambda _: trnfft.create_plan(2048, dtype=torch.float64), range(64)))
        tables = list(pool.map(lambda p: p.twiddles, plans))
    assert all(p is plans[0] for p in plans)
    assert all(t is tables[0] for t in tables)


@settings(max_examples=40)
@given(st.integers(min_value=1, max_value=4096))
def test_staged_float32_accuracy_for_any_length_up_to_4096(n):
    """The issue's accuracy bound for the kernels, met by their arithmetic on the plan's tables."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
    got = staged_fft(torch.from_numpy(x).to(torch.complex64), trnfft.create_plan(n))
    assert rel_err(got, np.fft.fft(x)) < 1e-5
