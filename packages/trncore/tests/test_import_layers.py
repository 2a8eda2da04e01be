"""The emulator is the bottom layer: importing and running it needs NumPy, not torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_import_and_run_the_emulator_without_torch() -> None:
    done = _run(
        """
        import sys
        import numpy as np
        import trncore.sim as sim
        from trncore.sim import nl

        @sim.jit
        def add_kernel(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.add(nl.load(a), nl.load(b)))
            return out

        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        got = sim.simulate(add_kernel)(a, a)  # nki.simulate(kernel)(*arrays), as in NKI 0.3.0
        assert np.array_equal(got, a + a), got
        assert "torch" not in sys.modules, "trncore.sim imported torch"
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_library_names_still_resolve_from_the_top_level() -> None:
    done = _run(
        """
        import trncore
        from trncore import Library, Operation, TilePolicy, reset_fallback_warnings
        from trncore.dispatch import Library as direct
        assert Library is direct
        assert set(trncore.__all__) <= set(dir(trncore))
        try:
            trncore.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError("unknown attribute did not raise")
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# Each module of trncore that imports torch, and the message it must give where torch is absent.
TORCH_MODULES = (
    "trncore.dispatch",
    "trncore.gemm_driver",
    "trncore.marshal",
    "trncore.padding",
    "trncore.precision",
    "trncore.xla",
)


def test_without_torch_each_module_that_needs_it_names_what_to_install() -> None:
    # sys.modules["torch"] = None makes `import torch` fail as on a machine without it
    # (ModuleNotFoundError, name "torch") and importlib.util.find_spec("torch") return None.
    done = _run(
        f"""
        import importlib, subprocess, sys
        sys.modules["torch"] = None
        import numpy as np
        import trncore, trncore.sim
        from trncore.kernels import gemm_kernel

        a = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
        b = np.ones((5, 3), dtype=np.float32)
        got = trncore.sim.simulate(gemm_kernel)(a, b, 0, 0, 1.0)
        assert np.allclose(got, a @ b), got
        for name in {TORCH_MODULES!r}:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                assert f"{{name}} needs PyTorch" in str(exc), str(exc)
                assert 'pip install "trncore[torch]"' in str(exc), str(exc)
                assert exc.name == "torch" and isinstance(exc.__cause__, ModuleNotFoundError)
            else:
                raise AssertionError(name + " imported without torch")
        try:
            trncore.TilePolicy
        except ImportError as exc:
            assert "trncore.padding needs PyTorch" in str(exc), str(exc)
        else:
            raise AssertionError("trncore.TilePolicy resolved without torch")
        from trncore import doctor
        assert doctor.collect()["target"] in ("trn1", "trn2")
        from trncore.sim import cli
        try:
            cli.main(["conform", "."])
        except SystemExit as exc:
            assert "python -m trncore.sim conform needs PyTorch" in str(exc.code), exc.code
        else:
            raise AssertionError("the conformance runner started without torch")
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_broken_torch_keeps_its_own_error() -> None:
    from trncore import platform

    broken = ModuleNotFoundError("No module named 'torch._C'", name="torch._C")
    assert platform.missing_torch("trncore.dispatch", broken) is None  # the caller re-raises it
    absent = ModuleNotFoundError("No module named 'torch'", name="torch")
    with pytest.raises(ImportError, match=r'trncore\.dispatch needs PyTorch.*trncore\[torch\]'):
        platform.missing_torch("trncore.dispatch", absent)
