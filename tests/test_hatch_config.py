"""The hatch environments (for contributors who use hatch) agree with what the packages declare:
``hatch test`` covers the declared torch floor and the newest torch, and every environment installs
the four workspace packages."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _environments() -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "hatch", "env", "show", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _torch_floor() -> str:
    pyproject = ROOT / "packages" / "trncore" / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    torch_extra = project["optional-dependencies"]["torch"]  # trncore[torch]; the libraries say the same
    (spec,) = [Requirement(d).specifier for d in torch_extra if Requirement(d).name == "torch"]
    (floor,) = [s.version for s in spec if s.operator == ">="]
    return floor


def test_hatch_test_matrix_covers_the_declared_floor_and_the_newest_torch():
    envs = _environments()
    tests = {name: env for name, env in envs.items() if name.startswith("hatch-test.")}
    floor = _torch_floor()
    pins = {
        name: [d for d in env.get("extra-dependencies", []) if Requirement(d).name == "torch"]
        for name, env in tests.items()
    }
    assert any(pin == [f"torch=={floor}.*"] for pin in pins.values()), pins  # the floor
    assert any(pin == [] for pin in pins.values()), pins  # unpinned: the newest the registry has
    for name in [*tests, "default", "docs"]:
        members = envs[name]["workspace"]["members"]
        assert members == ["packages/*"], (name, members)
