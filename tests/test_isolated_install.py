"""The libraries as users install them: alone, on the torch and numpy the registry serves today and
on the lowest versions the packages declare, on every Python the packages declare.

Each case runs ``scripts/check-isolated-install`` (a fresh venv per case, outside the development
environment): every library installed alone, one result on the PyTorch route and one on the
emulator checked against NumPy. The newest Python's case and the floors' case then also run the
pure-PyTorch tests against the installed packages (the other Pythons get the smoke test only, which
keeps the cost at about a minute per Python with uv's cache warm). trncore is also installed alone,
as a kernel author installs the emulator: no torch comes with it (seconds, nothing large to fetch).
The expectations come from the packages' own metadata (their declared floors and Python
classifiers) and from the registry's answer, not from this script. The versions each case
installed appear in the "reported by tests" section of pytest's summary.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("trncore", "trnblas", "trnfft", "trntensor")


def _metadata(lib: str) -> dict:
    text = (ROOT / "packages" / lib / "pyproject.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["project"]


def _declared_pythons() -> list[str]:
    """The X.Y of every 'Programming Language :: Python :: X.Y' classifier (the same in all four)."""
    found = [
        sorted(
            (c.rsplit(" ", 1)[1] for c in _metadata(lib)["classifiers"] if re.search(r":: 3\.\d+$", c)),
            key=lambda v: tuple(map(int, v.split("."))),
        )
        for lib in LIBRARIES
    ]
    assert all(f == found[0] for f in found), found
    return found[0]


def _floor(name: str) -> str:
    """The lowest version of ``name`` any of the packages declares (``>=X``), extras included."""
    floors = set()
    for lib in LIBRARIES:
        project = _metadata(lib)
        extras = [dep for deps in project.get("optional-dependencies", {}).values() for dep in deps]
        for dep in project["dependencies"] + extras:
            req = Requirement(dep)
            if req.name.lower().replace("_", "-") == name.replace("_", "-"):
                floors |= {s.version for s in req.specifier if s.operator == ">="}
    assert len(floors) == 1, (name, floors)
    return floors.pop()


def _run(*args: str) -> str:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check-isolated-install"), *args],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return out.stdout


def _alone_lines(stdout: str) -> dict[str, str]:
    lines = {m.group(1): m.group(0) for m in re.finditer(r"^(trn\w+) \S+ alone: .*$", stdout, re.M)}
    assert set(lines) == {"trnblas", "trnfft", "trntensor"}, stdout
    for line in lines.values():  # both routes were checked against NumPy
        assert "PyTorch route; emulator route" in line, line
    return lines


def _installed(line: str, name: str) -> str:
    match = re.search(rf"\b{name} (\S+?)[,;]", line)
    assert match, line
    return match.group(1).split("+")[0]  # 2.15.0+cu132 -> 2.15.0


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))  # "2.2" and "2.2.0" are the same release


def _versions(stdout: str) -> str:
    """What the case ran on and how long it took, for the run's log."""
    keep = r"^(python \d|registry's newest|trn\w+ \S+ alone|tests on torch|isolated install|\d+ passed)"
    return "\n".join(line for line in stdout.splitlines() if re.match(keep, line))


@pytest.mark.slow
@pytest.mark.parametrize("python", _declared_pythons())
def test_newest_torch_from_the_registry(python: str, report: Callable[[str], None]) -> None:
    with_tests = python == _declared_pythons()[-1]  # the pure-PyTorch tests on the newest Python
    stdout = _run("--python", python, *(["--tests"] if with_tests else []))
    report(_versions(stdout))
    newest = re.search(rf"registry's newest torch for python {re.escape(python)}: (\S+)", stdout)
    assert newest and newest.group(1) != "unknown", stdout
    for line in _alone_lines(stdout).values():
        assert "HAS_NKI=False" in line and f"python {python}." in line
        assert _installed(line, "torch") == newest.group(1), (line, newest.group(1))
        assert _release(_installed(line, "numpy")) >= (2,), line
    if with_tests:
        assert re.search(rf"^tests on torch {re.escape(newest.group(1))}\b", stdout, re.M), stdout
    assert f"isolated install (highest, python {python}): ok" in stdout


@pytest.mark.slow
def test_lowest_declared_versions_on_the_lowest_python(report: Callable[[str], None]) -> None:
    python = _declared_pythons()[0]
    stdout = _run("--python", python, "--lowest", "--tests")
    report(_versions(stdout))
    for line in _alone_lines(stdout).values():
        for name in ("torch", "numpy", "ml_dtypes"):
            assert _release(_installed(line, name)) == _release(_floor(name)), (name, line)
        assert f"python {python}." in line
    assert re.search(rf"^tests on torch {re.escape(_floor('torch'))}", stdout, re.M), stdout
    assert f"isolated install (lowest-direct, python {python}): ok" in stdout


@pytest.mark.slow
@pytest.mark.parametrize("lowest", [False, True], ids=["newest", "floors"])
def test_trncore_alone_is_the_emulator_without_torch(lowest: bool, report: Callable[[str], None]) -> None:
    """``pip install trncore``: no torch in the venv (it is the ``torch`` extra), a kernel and the
    command line run on the emulator against NumPy, and dispatch names the extra to install. The
    newest NumPy and ml_dtypes on the newest Python, and their declared floors on the oldest."""
    assert "torch" not in {Requirement(d).name for d in _metadata("trncore")["dependencies"]}
    python = _declared_pythons()[0 if lowest else -1]
    stdout = _run("--python", python, *(["--lowest"] if lowest else []), "trncore")
    report(_versions(stdout))
    line = re.search(r"^trncore \S+ alone \(no torch\): .*$", stdout, re.M)
    assert line, stdout
    assert "kernels match NumPy" in line.group(0) and f"python {python}." in line.group(0), line.group(0)
    if lowest:
        for name in ("numpy", "ml_dtypes"):
            assert _release(_installed(line.group(0), name)) == _release(_floor(name)), (name, line)
    else:
        assert _release(_installed(line.group(0), "numpy")) >= (2,), line.group(0)
    resolution = "lowest-direct" if lowest else "highest"
    assert f"isolated install ({resolution}, python {python}): ok" in stdout
