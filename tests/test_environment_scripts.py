"""The environment scripts as a new user meets them: failures name the package at fault."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_failed_install_stops_with_a_message_naming_the_package(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    (repo / "requirements").mkdir()
    # A real, tiny package first, then one that does not exist on the index.
    lock = repo / "requirements" / "dev.lock"
    lock.write_text("six==1.16.0\ntrnsci-no-such-package==0.0.1\n", encoding="utf-8")
    out = subprocess.run(
        [str(repo / "scripts" / "python"), "-c", "pass"],
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin:" + str(Path.home() / ".pyenv/shims"),
            "HOME": str(Path.home()),
            "TRNSCI_ENV_ROOT": str(tmp_path / "envs"),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode != 0
    assert "failed to install package 'trnsci-no-such-package==0.0.1'" in out.stderr
    assert not list((tmp_path / "envs").glob("dev-*/.ready"))  # a broken environment is never marked ready


def test_test_script_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1].strip() == "exec ./scripts/test"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "./scripts/test" in readme
