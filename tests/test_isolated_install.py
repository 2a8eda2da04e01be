"""Each library installs on its own into a venv that has only torch (issue: foundation)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_trnblas_installs_alone_without_torch_xla_or_nki():
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check-isolated-install"), "trnblas"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "trnblas 0.1.0: backend=auto HAS_NKI=False" in out.stdout
    assert "isolated install of trnblas: ok" in out.stdout
