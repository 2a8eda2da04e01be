"""Every NKI kernel of the suite, scheduled by the emulator's cost model: the modelled time lies
within the bounds (busiest lane ≤ modelled ≤ everything back to back), on aligned and ragged
shapes, on trn1 and trn2. The kernels are discovered from the four packages' ``kernels`` modules,
so a new kernel without an entry here fails the test."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import trncore.sim as sim
from trncore.sim.schedule import schedule

pytestmark = pytest.mark.simulator

F32, BF16 = "float32", "bfloat16"


def _fft_specs(n: int, kind: str = "stages") -> tuple[list, dict]:
    """The arguments trnfft's NKI route passes for a batch-8 complex64 transform of length n, to
    the staged kernel (``kind="stages"``) or the on-chip kernels (``"onchip"``, ``"onchip3"``)."""
    import trnfft

    setup = trnfft.create_plan(n, dtype=torch.complex64).kernel_setup("plan")
    geo = setup.geometry
    if kind == "stages":
        padded = geo.padded_batch(8)
        tables = setup.tables
        params = {"stages": geo.stage_params(), "batch_tile": geo.tile_for(padded), "gauss": False}
    else:
        onchip = setup.onchip if kind == "onchip" else setup.onchip3
        assert onchip is not None, f"n={n} has no {kind} geometry"
        padded = onchip.padded_batch(8)
        tables = setup.onchip_tables if kind == "onchip" else setup.onchip3_tables
        params = dict(onchip.params(padded))
    specs = [((padded, geo.n), F32)] * 2 + [(tuple(t.shape), F32) for t in tables]
    return specs, {**params, "scale": 1.0}


def _cases() -> dict[str, list[tuple[list, dict]]]:
    """Per kernel name: (argument specs, compile-time parameters), aligned then ragged."""
    def planes(c, m, extra):
        return [((c, m), F32)] * 2 + extra

    def block(ni, nj, naux, na, nb):
        return [((ni, naux, na), F32), ((nj, naux, nb), F32), ((nj, naux, na), F32),
                ((ni, naux, nb), F32), ((ni, na), F32), ((nj, nb), F32)]

    return {
        "gemm_kernel": [([((256, 384), BF16), ((384, 1024), BF16)], {}),
                        ([((200, 130), F32), ((300, 130), F32)], {"trans_b": 1})],
        "gemm_update_kernel": [([((256, 256), F32), ((256, 512), F32), ((256, 512), F32)], {}),
                               ([((130, 70), F32), ((130, 90), F32), ((70, 90), F32)], {"trans_a": 1})],
        "syrk_kernel": [([((256, 128), F32)], {"trans": 0, "lower": 1}),
                        ([((100, 200), F32)], {"trans": 1, "lower": 0})],
        "complex_matmul_kernel": [
            ([((128, 256), F32)] * 2 + [((256, 512), F32)] * 2 + [((512,), F32)] * 2, {}),
            ([((70, 33), F32)] * 2 + [((33, 90), F32)] * 2 + [((90,), F32)] * 2, {}),
        ],
        "batchnorm_forward_kernel": [(planes(128, 512, [((128, 5), F32)] * 2), {}),
                                     (planes(37, 100, [((37, 5), F32)] * 2), {})],
        "batchnorm_backward_kernel": [(planes(128, 512, planes(128, 512, [((128, 5), F32)] * 2)), {}),
                                      (planes(37, 100, planes(37, 100, [((37, 5), F32)] * 2)), {})],
        "modrelu_kernel": [(planes(128, 512, [((128,), F32)]), {}),
                           (planes(37, 100, [((37,), F32)]), {})],
        "modrelu_backward_kernel": [(planes(128, 512, [((128,), F32), *planes(128, 512, [])]), {}),
                                    (planes(37, 100, [((37,), F32), *planes(37, 100, [])]), {})],
        "fft_stages_kernel": [_fft_specs(256), _fft_specs(48)],
        "fft_onchip_kernel": [_fft_specs(256, "onchip"), _fft_specs(200, "onchip")],
        "fft_onchip3_kernel": [_fft_specs(32768, "onchip3"), _fft_specs(20000, "onchip3")],
        "ao_to_mo_kernel": [([((128, 128 * 64), F32), ((128, 8), F32), ((128, 120), F32)], {}),
                            ([((30, 30 * 20), F32), ((30, 5), F32), ((30, 25), F32)], {})],
        "mp2_energy_block_kernel": [(block(2, 2, 128, 128, 128), {}), (block(3, 2, 70, 25, 19), {})],
    }


def _suite_kernels() -> dict[str, object]:
    found = {}
    for package in ("trncore.kernels", "trnblas.kernels", "trnfft.kernels", "trntensor.kernels"):
        mod = importlib.import_module(package)
        modules = [mod] + [
            importlib.import_module(f"{package}.{info.name}")
            for info in pkgutil.iter_modules(mod.__path__)
        ]
        for m in modules:
            for name, fn in vars(m).items():
                if name.endswith("_kernel") and inspect.isfunction(fn) and fn.__module__ == m.__name__:
                    found[name] = fn
    return found


KERNELS = _suite_kernels()
CASES = _cases()


def test_every_suite_kernel_has_cases() -> None:
    assert set(KERNELS) == set(CASES)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_modelled_time_lies_within_the_bounds(name: str, target: str) -> None:
    for specs, params in CASES[name]:
        prog = sim.trace(KERNELS[name], *specs, target=target, **params)
        rep = prog.report()
        assert 0 < rep.lower_bound_s <= rep.modelled_s * (1 + 1e-9)
        assert rep.modelled_s <= rep.upper_bound_s * (1 + 1e-9)
        assert 0.0 <= rep.overlap <= 1.0
        sched = schedule(prog)
        assert sched.makespan_s == rep.modelled_s
        assert sched.critical and sched.instrs[sched.critical[-1]].end_s == sched.makespan_s
