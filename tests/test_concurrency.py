"""Runs that share a checkout: two DF-MP2 runs at once, two emulator runs at once, and a run
interrupted with Ctrl-C midway. Nothing may be left half-written, the next run must succeed and no
run may hang (every wait below has a timeout)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = [sys.executable, str(ROOT / "examples" / "df_mp2.py"), "--json", "--check"]

pytestmark = pytest.mark.pyscf


def _start(args: list[str], scratch: Path) -> subprocess.Popen[str]:
    # PySCF keeps its SCF scratch (chkfile) in PYSCF_TMPDIR: one directory per run lets the test
    # see what a run leaves on disk.
    scratch.mkdir()
    env = {**os.environ, "PYSCF_TMPDIR": str(scratch), "TMPDIR": str(scratch)}
    return subprocess.Popen(
        [*EXAMPLE, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    """In the child, before exec: SIGINT at its default, as a run started at a terminal has it.

    A shell starts a background job (`cmd &`, `nohup cmd &`, a CI runner's job) with SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler: the run would finish and
    the Ctrl-C test would fail for the way the suite was launched, not for the example.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.mark.parametrize("route", [[], ["--backend", "nki", "--simulator", "--dtype", "float32"]],
                         ids=["pytorch", "emulator"])
def test_two_runs_at_once_both_succeed_and_agree(tmp_path, route):
    procs = [_start(route, tmp_path / f"run{i}") for i in range(2)]
    results = [_finish(p) for p in procs]
    for code, _, err in results:
        assert code == 0, err
    energies = [json.loads(out)["e_corr"] for _, out, _ in results]
    assert energies[0] == energies[1]  # same inputs, same deterministic computation
    for i in range(2):
        assert not list((tmp_path / f"run{i}").iterdir()), "scratch left behind"


def test_ctrl_c_midway_leaves_nothing_and_the_next_run_succeeds(tmp_path):
    scratch = tmp_path / "interrupted"
    proc = _start([], scratch)
    deadline = time.monotonic() + 120
    while not any(scratch.iterdir()):  # midway: PySCF has created its SCF scratch file
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "the run never started its SCF"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    code, out, err = _finish(proc)
    assert code == 130 and "interrupted" in err, (code, err)
    assert out == "", "an interrupted run printed results"
    assert not list(scratch.iterdir()), "the interrupted run left its scratch file"
    code, out, err = _finish(_start([], tmp_path / "next"))
    assert code == 0, err
    assert json.loads(out)["agrees"] is True
