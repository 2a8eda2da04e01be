"""The NKI route of the transforms on the trncore.sim emulator, against numpy.fft in float64.

Every test forces the kernel route (backend ``nki``, simulator, ``TRNFFT_REQUIRE_NKI=1``), so a
silent fall back to torch.fft fails; ``count_keys`` shows the kernels really ran. Accuracy bound of
the issue: relative L2 error <= 1e-5 for float32 data.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from _trnfft_helpers import random_tensor, rel_err

import trncore.sim as sim
import trnfft
from trncore.dispatch import reset_fallback_warnings
from trncore.errors import NkiDispatchError, NkiFallbackWarning
from trnfft._drivers import fft as _nki
from trnfft.kernels import geometry

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


@pytest.fixture
def variant():
    options = _nki.KERNEL_OPTIONS
    saved = (options.grouping, options.gauss, options.onchip)
    yield options
    options.grouping, options.gauss, options.onchip = saved


def _np(x):
    return x.numpy().astype(np.complex128 if x.is_complex() else np.float64)


# powers of two, odd, primes (Bluestein), 13-smooth (mixed radix), the DFT-GEMM bound 128 +- 1
SIZES = (1, 2, 7, 16, 97, 127, 128, 129, 200, 256, 360, 1009, 1024, 4096)


@pytest.mark.parametrize("n", SIZES)
def test_fft_and_ifft_match_numpy(nki_route, n):
    batch = 3 if n <= 1024 else 2
    x = random_tensor((batch, n), torch.complex64, seed=n)
    with sim.count_keys() as keys:
        y = trnfft.fft(x)
        z = trnfft.ifft(x)
    assert keys, "the kernel did not run"
    assert y.dtype == torch.complex64 and z.dtype == torch.complex64
    assert rel_err(y, np.fft.fft(_np(x))) <= TOL
    assert rel_err(z, np.fft.ifft(_np(x))) <= TOL


@pytest.mark.parametrize("n", (5, 64, 130, 1000, 2048))
def test_rfft_and_irfft_match_numpy(nki_route, n):
    x = random_tensor((2, n), torch.float32, seed=n)
    assert rel_err(trnfft.rfft(x), np.fft.rfft(_np(x))) <= TOL
    spectrum = random_tensor((2, n // 2 + 1), torch.complex64, seed=n + 1)
    out = trnfft.irfft(spectrum, n=n)
    assert out.dtype == torch.float32
    assert rel_err(out, np.fft.irfft(_np(spectrum), n=n)) <= TOL


@pytest.mark.parametrize("norm", (None, "backward", "ortho", "forward"))
def test_norms_n_and_dim(nki_route, norm):
    x = random_tensor((6, 40, 3), torch.complex64, seed=3)
    for n in (None, 33, 64):
        ref = np.fft.fft(_np(x), n=n, axis=1, norm=norm)
        assert rel_err(trnfft.fft(x, n=n, dim=1, norm=norm), ref) <= TOL
        ref = np.fft.ifft(_np(x), n=n, axis=-3, norm=norm)
        assert rel_err(trnfft.ifft(x, n=n, dim=-3, norm=norm), ref) <= TOL
    real = random_tensor((5, 21), torch.float32, seed=4)
    assert (
        rel_err(trnfft.rfft(real, n=30, dim=0, norm=norm), np.fft.rfft(_np(real), n=30, axis=0, norm=norm))
        <= TOL
    )
    assert (
        rel_err(trnfft.irfft(x, n=9, dim=1, norm=norm), np.fft.irfft(_np(x), n=9, axis=1, norm=norm)) <= TOL
    )


def test_real_and_non_contiguous_inputs(nki_route):
    x = random_tensor((50, 24), torch.float32, seed=5).t()  # (24, 50), non-contiguous
    assert not x.is_contiguous()
    assert rel_err(trnfft.fft(x), np.fft.fft(_np(x))) <= TOL
    y = random_tensor((9, 31), torch.complex64, seed=6)[::2, 1::3]
    assert rel_err(trnfft.fft(y), np.fft.fft(_np(y))) <= TOL


def test_fft2_ifft2_fftn(nki_route):
    x = random_tensor((2, 12, 129), torch.complex64, seed=7)
    assert rel_err(trnfft.fft2(x), np.fft.fft2(_np(x))) <= TOL
    assert (
        rel_err(trnfft.ifft2(x, s=(16, 100), norm="ortho"), np.fft.ifft2(_np(x), s=(16, 100), norm="ortho"))
        <= TOL
    )
    assert rel_err(trnfft.fftn(x, dim=(0, 2)), np.fft.fftn(_np(x), axes=(0, 2))) <= TOL
    assert rel_err(trnfft.ifftn(x, s=(3, 5, 7)), np.fft.ifftn(_np(x), s=(3, 5, 7), axes=(0, 1, 2))) <= TOL


def test_complex_tensor_input(nki_route):
    x = random_tensor((4, 200), torch.complex64, seed=8)
    out = trnfft.fft(trnfft.ComplexTensor.from_torch(x))
    assert isinstance(out, trnfft.ComplexTensor)
    assert rel_err(out.to_torch(), np.fft.fft(_np(x))) <= TOL


@pytest.mark.parametrize("grouping,gauss", [("plan", False), ("plan", True), ("fused", False)])
@pytest.mark.parametrize("n", (24, 256, 1000, 1031))
def test_kernel_variants(nki_route, variant, grouping, gauss, n):
    variant.grouping, variant.gauss, variant.onchip = grouping, gauss, False  # the staged kernel
    x = random_tensor((3, n), torch.complex64, seed=n)
    assert rel_err(trnfft.fft(x), np.fft.fft(_np(x))) <= TOL


@pytest.mark.parametrize("n", (7, 200, 1024))
def test_trn1_target(nki_route, monkeypatch, n):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    x = random_tensor((129, n), torch.complex64, seed=n)  # batch beyond one tile
    assert rel_err(trnfft.fft(x), np.fft.fft(_np(x))) <= TOL


def test_plan_tables_built_once_and_keys_stay_few(nki_route):
    trnfft.clear_plan_cache()
    x = random_tensor((5, 300), torch.complex64, seed=9)
    trnfft.fft(x)
    plan = trnfft.create_plan(300)
    setup = plan.kernel_setup(_nki.KERNEL_OPTIONS.grouping)
    keys_before = dict(plan.kernel_keys)
    assert len(keys_before) == 1
    with sim.count_keys() as keys:
        for batch in (5, 6, 7, 8):  # one bucket of batch sizes: one compiled kernel
            trnfft.fft(random_tensor((batch, 300), torch.complex64, seed=batch))
    assert len(keys) == 1
    assert plan.kernel_setup(_nki.KERNEL_OPTIONS.grouping) is setup
    assert plan.kernel_keys == keys_before


def test_float64_is_never_computed_in_float32(monkeypatch):
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNFFT_FORCE_BACKEND", "nki")
    x = random_tensor((2, 16), torch.complex128, seed=10)
    reset_fallback_warnings()
    with pytest.warns(NkiFallbackWarning, match="float64 stays float64"):
        y = trnfft.fft(x)
    assert y.dtype == torch.complex128
    assert rel_err(y, np.fft.fft(_np(x))) <= 1e-12
    monkeypatch.setenv("TRNFFT_REQUIRE_NKI", "1")
    with pytest.raises(NkiDispatchError):
        trnfft.fft(x)


def test_group_radices_and_geometry():
    assert geometry.group_radices((8, 8, 8, 8)) == (64, 64)
    assert geometry.group_radices((8, 8, 4)) == (64, 4)
    assert geometry.group_radices((8, 8, 4), "plan") == (8, 8, 4)
    assert geometry.group_radices((8, 3, 3, 5)) == (72, 5)
    with pytest.raises(ValueError, match="grouping"):
        geometry.group_radices((8,), "other")
    geo = geometry.kernel_geometry(4096, (64, 64))
    assert [s.partitions for s in geo.stages] == [128, 128]
    for batch in (1, 2, 3, 64, 65, 200):
        padded = geo.padded_batch(batch)
        assert padded >= batch and padded % geo.batch_multiple == 0
        assert padded % geo.tile_for(padded) == 0


def test_stage_tables_are_the_twiddled_dft():
    """Block ``(kl, bh)`` of chunk ``c`` is ``F_R diag(w^{k p})`` transposed, from its definition."""
    geo = geometry.kernel_geometry(48, (4, 12))
    t0, t1 = geometry.build_stage_tables(geo, dtype=torch.float64)
    stage = geo.stages[1]  # L = 4, R = 12
    w = (t0 + 1j * t1).numpy()[stage.offset :].reshape(stage.chunks, stage.partitions, stage.partitions)
    for c in range(stage.chunks):
        for kl in range(stage.gk):
            for bh in range(stage.gb):
                k = c * stage.gk + kl
                g = (kl * stage.gb + bh) * stage.R
                p = np.arange(12)[:, None]
                j = np.arange(12)[None, :]
                expected = np.exp(-2j * np.pi * j * p / 12) * np.exp(-2j * np.pi * k * p / 48)
                np.testing.assert_allclose(w[c, g : g + 12, g : g + 12], expected, atol=1e-12)
    assert np.count_nonzero(w[0]) == stage.gk * stage.gb * 144


@pytest.mark.parametrize(
    "fn,n",
    [
        ("fft", 12),
        ("ifft", 200),
        ("rfft", 130),  # even lengths: the half-length real transforms
        ("irfft", 64),
        ("hfft", 38),
        ("ihfft", 50),
        ("irfft", 31),  # odd: the full-length ones
        ("rfft", 45),
        ("fft2", None),
    ],
)
def test_gradients_through_the_kernels_match_torch(nki_route, fn, n):
    shape = (3, 10, 7) if fn == "fft2" else (3, 40)
    dtype = torch.float32 if fn in ("rfft", "ihfft") else torch.complex64
    x = random_tensor(shape, dtype, seed=12)
    kwargs = {} if n is None else {"n": n}
    weights = random_tensor(
        (3, 10, 7) if fn == "fft2" else (3, n // 2 + 1 if fn in ("rfft", "ihfft") else n), torch.float32, 13
    )

    def grad(module):
        leaf = x.clone().requires_grad_()
        out = getattr(module, fn)(leaf, norm="ortho", **kwargs)
        (out.abs() * weights).sum().backward()
        return leaf.grad

    with sim.count_keys() as keys:
        mine = grad(trnfft)
    assert len(keys) >= 1
    assert rel_err(mine, grad(torch.fft).numpy()) <= TOL


@pytest.mark.parametrize(
    ("call", "kwargs"),
    [
        (trnfft.fft, {"n": 0}),
        (trnfft.fft, {"dim": 3}),
        (trnfft.ifft, {"norm": "unitary"}),
        (trnfft.rfft, {}),  # complex input: torch.fft.rfft rejects it
        (trnfft.fft2, {"s": (4, -2)}),
    ],
)
def test_bad_arguments_on_the_kernel_route_give_torchs_error(nki_route, monkeypatch, call, kwargs):
    x = random_tensor((4, 8), torch.complex64)
    with pytest.raises(Exception) as from_torch:
        getattr(torch.fft, call.__name__)(x, **kwargs)
    with monkeypatch.context() as m:  # the same call on the PyTorch route, for the message
        m.setenv("TRNFFT_FORCE_BACKEND", "pytorch")
        with pytest.raises(type(from_torch.value)) as on_pytorch:
            call(x, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a fallback warning ...
        with pytest.raises(type(from_torch.value)) as on_kernel:
            call(x, **kwargs)
    assert not isinstance(on_kernel.value, trnfft.NkiDispatchError)  # ... nor a dispatch error
    assert str(on_kernel.value) == str(on_pytorch.value)


# ------------------------------------------------------------------ stages kept on chip


@pytest.mark.parametrize("onchip", (True, False))
@pytest.mark.parametrize(
    ("n", "batch"), [(200, 3), (256, 130), (360, 5), (1000, 2), (1009, 3), (4096, 2), (8192, 3)]
)
def test_onchip_and_staged_kernels_match_numpy(nki_route, variant, onchip, n, batch):
    """Aligned and ragged lengths (13-smooth, prime through Bluestein) and batches that are not a
    multiple of the on-chip kernel's row group, on both kernels."""
    variant.onchip = onchip
    x = random_tensor((batch, n), torch.complex64, seed=n + batch)
    with sim.count_keys() as keys:
        y = trnfft.fft(x)
        z = trnfft.ifft(x, norm="ortho")
    assert keys
    assert rel_err(y, np.fft.fft(_np(x))) <= TOL
    assert rel_err(z, np.fft.ifft(_np(x), norm="ortho")) <= TOL


def test_onchip_kernel_runs_by_default_and_moves_data_through_hbm_once(nki_route):
    from trnfft.kernels.fft import fft_onchip_kernel

    trnfft.clear_plan_cache()
    trnfft.fft(random_tensor((4, 1024), torch.complex64, seed=1))
    plan = trnfft.create_plan(1024)
    assert [ident[2] for ident in plan.kernel_keys] == ["fft_onchip_kernel"]
    geo = plan.kernel_setup().onchip
    assert (geo.n1, geo.n2) == (8, 128)
    specs = [((16, 1024), "float32")] * 2 + [
        (tuple(t.shape), "float32") for t in plan.kernel_setup().onchip_tables
    ]
    report = sim.report(fft_onchip_kernel, *specs, target="trn1", **geo.params(16), scale=1.0)
    # inputs, tables and outputs cross HBM once: no scratch round trip between the stages
    assert report.traffic_over_min == pytest.approx(1.0)


def test_onchip_geometry_limits():
    assert geometry.onchip_geometry(128) is None  # one stage: the DFT GEMM
    assert geometry.onchip_geometry(16384).n1 == 128
    assert geometry.onchip_geometry(32768) is None  # three stages: the staged kernel
    assert geometry.onchip_geometry(13**3) is None  # no factorisation into two factors <= 128
    for n in (129 * 2, 360, 1000, 4096):
        g = geometry.onchip_geometry(n)
        assert g.n1 * g.n2 == n and g.group * g.n1 <= 128 and g.batch_tile % g.group == 0


# ------------------------------------------------------------------ half-precision inputs


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("n", (7, 100, 129, 256, 1000, 1009, 4096))
def test_half_precision_inputs_at_any_length(nki_route, dtype, n):
    """The kernel computes in float32 what the half-precision values are: against the float64
    transform of those values the float32 bound holds; against the float64 data they were rounded
    from, the input rounding dominates, bounded by the unit roundoff (2^-8 bfloat16, 2^-11 float16)
    since the DFT scales every error alike."""
    data = random_tensor((3, n), torch.float64, seed=n)
    x = data.to(dtype)
    rounded = x.double().numpy()
    with sim.count_keys() as keys:
        y, r = trnfft.fft(x), trnfft.rfft(x)
    assert keys
    assert y.dtype == r.dtype == torch.complex64
    assert rel_err(y, np.fft.fft(rounded)) <= TOL
    assert rel_err(r, np.fft.rfft(rounded)) <= TOL
    input_rounding = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    assert rel_err(y, np.fft.fft(data.numpy())) <= input_rounding
    spectrum = torch.complex(x[:, : n // 2 + 1].float(), x[:, : n // 2 + 1].flip(-1).float())
    back = trnfft.irfft(spectrum.to(torch.complex32) if dtype == torch.float16 else spectrum, n=n)
    assert back.dtype == torch.float32
    assert rel_err(back, np.fft.irfft(spectrum.numpy().astype(np.complex128), n=n)) <= TOL


def test_half_precision_nd_and_gradients(nki_route):
    x = random_tensor((4, 20, 30), torch.float32, seed=2).to(torch.bfloat16)
    assert rel_err(trnfft.fftn(x, dim=(1, 2)), np.fft.fftn(_np(x.float()), axes=(1, 2))) <= TOL
    assert rel_err(trnfft.rfft2(x), np.fft.rfft2(_np(x.float()))) <= TOL
    leaf = x.detach().requires_grad_()
    trnfft.fft(leaf, norm="ortho").real.sum().backward()
    # d/dx sum(Re F x / sqrt n) = Re(F^T 1) / sqrt n = sqrt(n) at k = 0 for every row, 0 elsewhere
    assert leaf.grad.dtype == torch.bfloat16
    want = np.zeros((4, 20, 30))
    want[..., 0] = np.sqrt(30)
    assert rel_err(leaf.grad.float(), want) <= 1e-2  # the gradient is rounded to bfloat16


@pytest.mark.parametrize(
    ("n", "batch", "kernel"),
    [
        (4096, 141, "fft_onchip_kernel"),  # two on-chip batch tiles (140 rows each, padded)
        (32768, 13, "fft_onchip3_kernel"),  # three stages on chip, two batch tiles of 12 rows
        (3 * 128 * 128, 2, "fft_onchip3_kernel"),  # 49152 = 3 * 128 * 128
        (2197, 2, "fft_stages_kernel"),  # 13^3: no two factors <= 128, not above 16384
        (8209, 2, "fft_stages_kernel"),  # prime: Bluestein's m = 32768 runs staged
    ],
)
def test_kernel_choice_and_batch_tiles(nki_route, monkeypatch, n, batch, kernel):
    """Which kernel runs each length, against numpy on trn1."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    trnfft.clear_plan_cache()
    x = random_tensor((batch, n), torch.complex64, seed=batch)
    assert rel_err(trnfft.fft(x), np.fft.fft(_np(x))) <= TOL
    assert rel_err(trnfft.ifft(x, norm="forward"), np.fft.ifft(_np(x), norm="forward")) <= TOL
    names = {ident[2] for ident in trnfft.create_plan(n).kernel_keys}
    assert names == {kernel}


@pytest.mark.parametrize("twiddle_data", (False, True))
@pytest.mark.parametrize("n", (360, 1000, 2048))
def test_onchip_kernel_both_twiddle_placements(n, twiddle_data):
    """The kernel itself on the emulator: twiddles in the stage-2 stationaries or on the data."""
    from trnfft.kernels.fft import fft_onchip_kernel

    geo = geometry.onchip_geometry(n)
    tables = [t.numpy() for t in geometry.build_onchip_tables(geo)]
    params = {**geo.params(2 * geo.group), "twiddle_data": twiddle_data}
    rng = np.random.default_rng(n)
    xr, xi = (rng.standard_normal((2 * geo.group, n)).astype(np.float32) for _ in range(2))
    yr, yi = sim.simulate(fft_onchip_kernel)(xr, xi, *tables, **params, scale=0.5)
    assert rel_err(yr + 1j * yi, 0.5 * np.fft.fft(xr.astype(np.float64) + 1j * xi)) <= TOL


def test_auto_sends_small_half_precision_calls_to_the_kernel(monkeypatch):
    """torch.fft cannot take float16 on a CPU, so ``auto`` routes half precision to the kernel at
    any size (small float32 calls stay on torch.fft)."""
    monkeypatch.setenv("TRNFFT_USE_SIMULATOR", "1")
    previous = trnfft.get_backend()
    trnfft.set_backend("auto")
    try:
        x = random_tensor((2, 16), torch.float32, seed=3)
        with sim.count_keys() as keys:
            trnfft.fft(x)
        assert not keys  # below the threshold: torch.fft
        with sim.count_keys() as keys:
            y = trnfft.fft(x.half())
        assert keys and y.dtype == torch.complex64
        assert rel_err(y, np.fft.fft(x.half().double().numpy())) <= TOL
    finally:
        trnfft.set_backend(previous)


def test_onchip3_geometry_limits_and_real_transform(nki_route):
    assert geometry.onchip3_geometry(16384) is None  # two stages suffice
    g = geometry.onchip3_geometry(32768)
    assert (g.n1, g.n2, g.n3, g.group) == (2, 128, 128, 64)
    assert geometry.onchip3_geometry(1 << 18).batch_tile == 1
    assert geometry.onchip3_geometry(1 << 19) is None  # one row no longer fits the SBUF budget
    x = random_tensor((2, 65536), torch.float32, seed=5)  # rfft: a packed transform of 32768
    assert rel_err(trnfft.rfft(x), np.fft.rfft(_np(x))) <= TOL
