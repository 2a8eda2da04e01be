"""The suite's NKI kernels declare NKI 0.3.0 as the oldest release they need (so Neuron SDK 2.29
users can run them), compute bit-identical results under NKI 0.3.0 and the newest release,
0.6.0, on the emulator, and keep to the Python subset the NKI compiler takes. The kernels and
their argument shapes are those of test_kernel_schedules.py (every kernel of the four
``kernels`` packages, ragged shapes)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import versions
from trncore.sim.python_subset import PythonSubsetWarning

pytestmark = pytest.mark.simulator

_spec = importlib.util.spec_from_file_location(
    "_kernel_cases", Path(__file__).with_name("test_kernel_schedules.py")
)
assert _spec is not None and _spec.loader is not None
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
KERNELS, CASES = _cases.KERNELS, _cases.CASES
#: the smaller case per kernel (the ragged one; onchip3 needs long transforms either way)
SMALL = {name: min(cases, key=lambda c: sum(np.prod(s) for s, _ in c[0])) for name, cases in CASES.items()}


def test_every_suite_kernel_declares_nki_030() -> None:
    assert KERNELS
    assert {name: versions.kernel_release(fn) for name, fn in KERNELS.items()} == {
        name: "0.3.0" for name in KERNELS
    }


def _arrays(specs: list, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        a = rng.standard_normal(shape).astype(np.float32)
        out.append(a.astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else a)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_results_under_030_and_060(name: str) -> None:
    specs, params = SMALL[name]
    results = {}
    for v in ("0.3.0", "0.6.0"):
        arrays = _arrays(specs, seed=3)
        out = sim.run_kernel(KERNELS[name], arrays, params, target="trn2", nki_version=v)
        outs = out if isinstance(out, tuple) else (out,)
        results[v] = [np.asarray(o).copy() for o in outs] + arrays  # outputs and written inputs
    for a, b in zip(results["0.3.0"], results["0.6.0"], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(CASES))
def test_in_the_nki_python_subset(name: str) -> None:
    """No construct the NKI compiler refuses (a comprehension, ``raise``, ``del``, ...) in the
    kernel or in any helper its trace runs (docs/emulator.md, "The Python subset of the NKI
    compiler"): the emulator's ``PythonSubsetWarning`` fails the test."""
    specs, params = SMALL[name]
    sim.clear_cache()  # a cached program is not traced again, and only a trace is checked
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonSubsetWarning)
        sim.run_kernel(KERNELS[name], _arrays(specs, seed=3), params, target="trn2", nki_version="0.3.0")
