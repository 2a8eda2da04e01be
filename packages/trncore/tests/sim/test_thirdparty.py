"""Kernels written as an outside author would (``import nki``) run unchanged after install()."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import trncore.sim as sim
from trncore import platform

pytestmark = pytest.mark.simulator

HERE = Path(__file__).parent / "thirdparty"
rng = np.random.default_rng(99)


@pytest.fixture(scope="module")
def kernels():
    assert sim.install() is True
    assert sys.modules["nki"] is sim.nki and not platform.real_nki_available()
    mods = {}
    for path in sorted(HERE.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"thirdparty_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        mods[path.stem] = module
    yield mods
    sim.uninstall()


def test_vector_add_ragged(target: str, kernels) -> None:
    x, y = rng.standard_normal((300, 70), np.float32), rng.standard_normal((300, 70), np.float32)
    np.testing.assert_array_equal(kernels["vector_add"].vector_add(x, y), x + y)
    x, y = rng.standard_normal((128, 64), np.float32), rng.standard_normal((128, 64), np.float32)
    np.testing.assert_array_equal(kernels["vector_add"].vector_add_short(x, y), x + y)


@pytest.mark.parametrize("name", ["tiled_matmul", "blocked_matmul"])
def test_matmuls_bf16(target: str, kernels, name: str) -> None:
    a_t = rng.standard_normal((256, 256), np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 1024), np.float32).astype(ml_dtypes.bfloat16)
    expected = a_t.astype(np.float64).T @ b.astype(np.float64)
    got = getattr(kernels["tiled_matmul"], name)(a_t, b)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_transposes(target: str, kernels) -> None:
    x = rng.standard_normal((100, 48), np.float32)
    np.testing.assert_array_equal(kernels["transpose"].transpose_tile(x), x.T)
    x = rng.standard_normal((256, 384), np.float32)
    np.testing.assert_array_equal(kernels["transpose"].transpose_big(x), x.T)
    x = rng.standard_normal((32, 3 * 5), np.float32)
    got = kernels["transpose"].transpose_free_dims(x, 3, 5)
    np.testing.assert_array_equal(got, x.reshape(32, 3, 5).transpose(0, 2, 1).reshape(32, 15))


def test_softmax(target: str, kernels) -> None:
    x = rng.standard_normal((200, 300), np.float32) * 4
    e = np.exp(x - x.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(kernels["softmax"].softmax_rows(x), expected, rtol=1e-5, atol=1e-7)
    x = rng.standard_normal((64, 100), np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        kernels["softmax"].softmax_short(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7
    )


def test_lnc2_launch(target: str, kernels) -> None:
    x = rng.standard_normal((512, 64), np.float32)
    kernel = kernels["lnc_scale"].scale_rows
    np.testing.assert_array_equal(kernel(x), x * 2 + 1)  # LNC=1: one program does everything
    if target == "trn1":
        with pytest.raises(sim.errors.TargetError):
            kernel[2](x)
    else:
        np.testing.assert_array_equal(kernel[2](x), x * 2 + 1)
        np.testing.assert_array_equal(sim.nki.simulate(kernel[2])(x), x * 2 + 1)
        prog = sim.trace(kernel, ((512, 64), "float32"), lnc=2)
        assert len(prog) == 4 * 3  # two programs x two row tiles x (load, scale, store)


def test_pooling_with_5d_access_patterns(target: str, kernels) -> None:
    x = rng.standard_normal((16, 8, 12), np.float32)
    windows = x.reshape(16, 4, 2, 6, 2)
    np.testing.assert_allclose(
        kernels["pooling"].avg_pool2d(x), windows.mean(axis=(2, 4)), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_array_equal(kernels["pooling"].max_pool2d(x), windows.max(axis=(2, 4)))


def test_selective_scan(target: str, kernels) -> None:
    c, steps = 64, 40
    delta = rng.random((c, steps), np.float32) * 0.5
    u = rng.standard_normal((c, steps), np.float32)
    a = -rng.random((c, 1), np.float32)
    b = rng.standard_normal((1, steps), np.float32)
    expected = np.zeros((c, steps))
    h = np.zeros(c)
    for t in range(steps):
        h = np.exp(delta[:, t] * a[:, 0]) * h + delta[:, t] * u[:, t] * b[0, t]
        expected[:, t] = h
    got = kernels["selective_scan"].selective_scan(delta, u, a, b)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_two_outputs_from_strided_views(target: str, kernels) -> None:
    x = rng.standard_normal((96, 40), np.float32)
    even, odd = kernels["even_odd"].split_even_odd(x)
    np.testing.assert_array_equal(even, x[:, 0::2])
    np.testing.assert_array_equal(odd, x[:, 1::2])


def test_isa_constants_is_an_importable_submodule(kernels) -> None:
    # Production kernels import the ISA enumerations from nki.isa.constants (NKI 0.3.0 layout).
    import nki.isa
    from nki.isa.constants import engine, oob_mode

    assert engine is nki.isa.engine and oob_mode is nki.isa.oob_mode
    assert importlib.util.find_spec("nki.isa.constants") is not None
