"""Smoke test of one library installed alone (run by scripts/check-isolated-install).

Imports the library in a venv that holds only it, trncore and what they declare, checks that
nothing else came along (torch-xla, nki, the sibling libraries), and computes one small result on
each route a CPU machine has: the PyTorch route in float64, and the NKI route on the emulator
(trncore.sim, which runs on NumPy and ml_dtypes alone) in float32. Both are compared with NumPy.
Prints the versions it ran on, one line per library.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch

LIBRARIES = ("trnblas", "trnfft", "trntensor")


def case(lib: str) -> tuple[Callable[[ModuleType, np.ndarray, np.ndarray], object], Callable, str]:
    """(the library call on two arrays, the NumPy reference, what it is called)."""
    if lib == "trnblas":
        return (lambda m, a, b: m.gemm(1.5, torch.from_numpy(a), torch.from_numpy(b)),
                lambda a, b: 1.5 * a @ b, "gemm")
    if lib == "trnfft":
        return (lambda m, a, b: m.fft(torch.from_numpy(a[:, 0] + 1j * b[0, :])),
                lambda a, b: np.fft.fft(a[:, 0] + 1j * b[0, :]), "fft")
    if lib == "trntensor":
        return (lambda m, a, b: m.einsum("ik,kj->ij", torch.from_numpy(a), torch.from_numpy(b)),
                lambda a, b: np.einsum("ik,kj->ij", a, b), "einsum")
    raise SystemExit(f"unknown library {lib!r}; expected one of {', '.join(LIBRARIES)}")


def check(lib: str, module: ModuleType) -> str:
    call, reference, name = case(lib)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((48, 48)), rng.standard_normal((48, 48))
    # The PyTorch route, float64: the reference's rounding only.
    got = np.asarray(call(module, a, b))
    np.testing.assert_allclose(got, reference(a, b), rtol=1e-10, atol=1e-10)
    # The NKI route on the emulator, float32: a kernel must really run (REQUIRE_NKI: no fallback).
    from trncore import sim

    os.environ[f"{lib.upper()}_USE_SIMULATOR"] = "1"
    os.environ[f"{lib.upper()}_REQUIRE_NKI"] = "1"
    module.set_backend("nki")
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    with sim.count_keys() as keys:
        got = np.asarray(call(module, a32, b32))
    assert keys, f"{lib}.{name} ran no kernel on the emulator"
    want = reference(a, b)
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < 1e-5, f"{lib}.{name} on the emulator: relative error {error:.1e}"
    module.set_backend("auto")
    return f"{name} matches NumPy (PyTorch route; emulator route, rel. error {error:.0e})"


def main() -> None:
    lib = sys.argv[1]
    for absent in ("torch_xla", "nki", *(other for other in LIBRARIES if other != lib)):
        assert importlib.util.find_spec(absent) is None, f"{absent} is installed alongside {lib}"
    module = importlib.import_module(lib)
    backend, has_nki = module.get_backend(), module.HAS_NKI
    result = check(lib, module)
    assert "torch_xla" not in sys.modules, f"importing {lib} imported torch_xla"
    import ml_dtypes

    print(
        f"{lib} {module.__version__} alone: {result}; backend={backend} "
        f"HAS_NKI={has_nki}; torch {torch.__version__}, numpy {np.__version__}, "
        f"ml_dtypes {ml_dtypes.__version__}, python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
