"""Smoke test of trncore installed alone: the NKI emulator's install, without torch.

Run by ``scripts/check-isolated-install trncore`` in a venv that holds trncore and what it declares
(NumPy, ml_dtypes). Checks that torch is not installed, runs a small NKI kernel and the suite's GEMM
kernel on the emulator against NumPy, runs the command line (``python -m trncore.sim run`` and
``report``, ``python -m trncore doctor``), and checks that what needs torch (dispatch, the
conformance runner) says what to install. Prints one line with the versions it ran on.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

INSTALL_HINT = 'pip install "trncore[torch]"'

# A kernel file as a kernel author writes it: `import nki`, which the command line resolves to the
# emulator where AWS's package is absent.
KERNEL_FILE = textwrap.dedent(
    """
    import nki
    import nki.language as nl


    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out
    """
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300)


def check_kernels() -> str:
    import trncore.sim as sim
    from trncore.kernels import gemm_kernel
    from trncore.sim import nl

    @sim.jit
    def add_kernel(a: Any, b: Any) -> Any:
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    np.testing.assert_array_equal(sim.simulate(add_kernel)(a, a), a + a)
    # The suite's GEMM kernel on a ragged shape, float32 products accumulated in float32.
    x = rng.standard_normal((200, 300)).astype(np.float32)
    y = rng.standard_normal((300, 130)).astype(np.float32)
    got = sim.simulate(gemm_kernel)(x, y, 0, 0, 0.5)
    want = 0.5 * (x.astype(np.float64) @ y.astype(np.float64))
    error = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert error < 1e-5, f"gemm_kernel on the emulator: relative error {error:.1e}"
    return f"add and gemm kernels match NumPy (gemm rel. error {error:.0e})"


def check_command_line(workdir: Path) -> str:
    kernel = workdir / "add.py"
    kernel.write_text(KERNEL_FILE, encoding="utf-8")
    shapes = ("--shapes", "128x512:float32,128x512:float32")
    run = _cli("trncore.sim", "run", f"{kernel}::add_kernel", *shapes)
    assert run.returncode == 0, run.stderr
    assert "output[0]: shape (128, 512) float32" in run.stdout, run.stdout
    report = _cli("trncore.sim", "report", f"{kernel}::add_kernel", *shapes, "--json")
    assert report.returncode == 0, report.stderr
    counts = json.loads(report.stdout)["instructions"]
    assert (counts["dma"], counts["vector"]) == (3, 1), counts  # two loads and a store; one add
    doctor = _cli("trncore", "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert "torch      not installed" in doctor.stdout, doctor.stdout
    conform = _cli("trncore.sim", "conform", str(workdir))
    assert conform.returncode != 0 and INSTALL_HINT in conform.stderr, (conform.stdout, conform.stderr)
    return "python -m trncore.sim run/report and trncore doctor run; conform asks for torch"


def check_torch_parts() -> str:
    import trncore

    for name in ("trncore.dispatch", "trncore.marshal", "trncore.gemm_driver"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            assert INSTALL_HINT in str(exc) and name in str(exc), str(exc)
        else:
            raise AssertionError(f"{name} imported without torch")
    try:
        trncore.Library  # noqa: B018 - the lazy name loads trncore.dispatch
    except ImportError as exc:
        assert INSTALL_HINT in str(exc), str(exc)
    else:
        raise AssertionError("trncore.Library resolved without torch")
    return "dispatch names what to install"


def main() -> None:
    for absent in ("torch", "torch_xla", "nki", "trnblas", "trnfft", "trntensor"):
        assert importlib.util.find_spec(absent) is None, f"{absent} is installed alongside trncore"
    import trncore

    with tempfile.TemporaryDirectory() as tmp:
        results = [check_kernels(), check_command_line(Path(tmp)), check_torch_parts()]
    assert "torch" not in sys.modules, "something imported torch"
    print(
        f"trncore {trncore.__version__} alone (no torch): {'; '.join(results)}; "
        f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
