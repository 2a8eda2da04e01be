"""Smoke test of one library installed alone (run by scripts/check-isolated-install).

Imports the library in a venv that holds only it, trncore and what they declare, checks that
nothing else came along (torch-xla, nki, the sibling libraries), and computes one small result on
the PyTorch route, compared with NumPy. Prints the versions it ran on.
"""

from __future__ import annotations

import importlib
import importlib.util
import platform
import sys

import numpy as np
import torch

LIBRARIES = ("trnblas", "trnfft", "trntensor")


def check(lib: str) -> str:
    rng = np.random.default_rng(0)
    if lib == "trnblas":
        import trnblas

        a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
        got = trnblas.gemm(1.5, torch.from_numpy(a), torch.from_numpy(b)).numpy()
        np.testing.assert_allclose(got, 1.5 * a @ b, rtol=1e-12, atol=1e-12)
        return "gemm matches NumPy"
    if lib == "trnfft":
        import trnfft

        x = rng.standard_normal(48) + 1j * rng.standard_normal(48)
        got = trnfft.fft(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, np.fft.fft(x), rtol=1e-10, atol=1e-10)
        return "fft matches numpy.fft"
    if lib == "trntensor":
        import trntensor

        a, b = rng.standard_normal((4, 5, 6)), rng.standard_normal((6, 5))
        got = trntensor.einsum("ijk,kj->i", torch.from_numpy(a), torch.from_numpy(b)).numpy()
        np.testing.assert_allclose(got, np.einsum("ijk,kj->i", a, b), rtol=1e-12, atol=1e-12)
        return "einsum matches numpy.einsum"
    raise SystemExit(f"unknown library {lib!r}; expected one of {', '.join(LIBRARIES)}")


def main() -> None:
    lib = sys.argv[1]
    for absent in ("torch_xla", "nki", *(other for other in LIBRARIES if other != lib)):
        assert importlib.util.find_spec(absent) is None, f"{absent} is installed alongside {lib}"
    module = importlib.import_module(lib)
    result = check(lib)
    assert "torch_xla" not in sys.modules, f"importing {lib} imported torch_xla"
    print(
        f"{lib} {module.__version__} alone: {result}; backend={module.get_backend()} "
        f"HAS_NKI={module.HAS_NKI}; torch {torch.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
