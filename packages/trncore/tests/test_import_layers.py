"""The emulator is the bottom layer: importing and running it needs NumPy, not torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
