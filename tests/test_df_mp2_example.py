"""The DF-MP2 example against PySCF's DF-MP2, as a user runs it."""

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
EXAMPLE = ROOT / "examples" / "df_mp2.py"

pytestmark = pytest.mark.pyscf


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=900, cwd=ROOT
    )


def results(*args: str) -> dict:
    out = run(*args, "--json", "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_demo_command_checks_water_against_pyscf():
    out = subprocess.run([str(ROOT / "scripts" / "demo")], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "agrees" in out.stdout and "E_corr (PySCF)" in out.stdout


@pytest.mark.parametrize("molecule", ["water", "ammonia", "methane"])
def test_float64_pytorch_route_matches_pyscf_to_1e8(molecule):
    r = results("--molecule", molecule, "--backend", "pytorch")
    assert r["route"] == "pytorch" and r["dtype"] == "float64"
    assert abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8
    assert r["e_corr"] < -0.1  # a real correlation energy, not an empty sum
    assert r["e_total"] == pytest.approx(r["e_hf"] + r["e_corr"], abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("molecule", ["benzene", "naphthalene"])
def test_float64_larger_molecules_match_pyscf_to_1e8(molecule):
    r = results("--molecule", molecule, "--backend", "pytorch")
    assert abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8


def test_frozen_core_and_float32():
    r = results("--molecule", "water", "--frozen-core", "--dtype", "float32")
    assert r["frozen_core_orbitals"] == 1
    assert abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-5


@pytest.mark.simulator
@pytest.mark.parametrize("molecule", ["water", "ammonia"])
def test_float32_kernels_on_the_emulator_match_pyscf_to_1e5(molecule):
    r = results("--molecule", molecule, "--backend", "nki", "--simulator", "--dtype", "float32")
    assert r["route"] == "simulator" and r["fallbacks"] == []
    assert abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-5
    assert 1 <= r["kernel_keys"] <= 4
    for target in ("trn1", "trn2"):
        model = r["energy_step_model"][target]
        assert 0 < model["lower_s"] <= model["upper_s"]
        assert model["bound"] in ("tensor", "vector", "scalar", "gpsimd", "dma")


@pytest.mark.simulator
def test_float64_on_the_kernel_route_falls_back_and_says_so():
    out = run("--molecule", "water", "--backend", "nki", "--simulator", "--json", "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    r = json.loads(out.stdout)
    assert r["route"] == "pytorch (fallback)" and "float64" in r["fallbacks"][0]
    assert "warning:" in out.stderr and "ALLOW_FP32_COMPUTE" in out.stderr
    assert abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8  # the float64 reference ran


def test_xyz_input(tmp_path):
    xyz = tmp_path / "h2o.xyz"
    xyz.write_text(
        "3\nwater\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n", encoding="utf-8"
    )
    r = results("--molecule", str(xyz))
    assert r["nocc"] == 5 and abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8


def test_bad_arguments_are_named():
    out = run("--molecule", "unobtainium")
    assert out.returncode == 2 and "--molecule must be one of water" in out.stderr
    out = run("--basis", "sto-3g")
    assert out.returncode == 2 and "no default RI basis" in out.stderr
    out = run("--memory", "-1")
    assert out.returncode == 2 and "--memory must be a positive" in out.stderr


# ----------------------------------------------------------------------------- open shells, SCS, ranks


def test_open_shell_scs_and_frozen_list_match_pyscf():
    r = results("--molecule", "water", "--charge", "1", "--spin", "1", "--scs", "--frozen", "0,23")
    assert r["reference"] == "UHF" and r["frozen"] == [0, 23] and r["nocc"] == [4, 3]
    for part in ("e_corr", "e_os", "e_ss", "e_scs"):
        assert abs(r[part] - r[f"{part}_pyscf"]) <= 1e-8, part
    assert r["e_scs"] == pytest.approx(1.2 * r["e_os"] + r["e_ss"] / 3, abs=1e-15)


def _torchrun(ranks: int, *args: str, env: dict[str, str] | None = None, scratch: Path | None = None,
              launcher: tuple[str, ...] = (), **popen: object) -> subprocess.Popen:
    env = {**(os.environ if env is None else env), "OMP_NUM_THREADS": "1"}
    if scratch is not None:  # PySCF's SCF scratch (one chkfile per rank) goes there
        env.update(PYSCF_TMPDIR=str(scratch), TMPDIR=str(scratch))
    # --standalone: torchrun picks a free port itself, so runs on one machine at once never collide.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
           *launcher, str(EXAMPLE), *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


@pytest.mark.slow
def test_torchrun_ranks_give_the_one_process_energy_bit_for_bit():
    args = ("--molecule", "benzene", "--frozen-core", "--json", "--check")
    energies = {}
    for ranks in (1, 2):
        proc = _torchrun(ranks, *args)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        r = json.loads(out)
        assert r["ranks"] == ranks and r["agrees"]
        energies[ranks] = (r["e_corr"], r["e_os"], r["e_ss"])  # JSON floats round-trip exactly
    assert energies[1] == energies[2]


def _child_with_rank(parent: int, rank: int, deadline: float) -> int:
    """The pid of the torchrun worker with RANK=rank (waits for it to start)."""
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and f"RANK={rank}".encode() in environ:
                return int(pid)
        time.sleep(0.05)
    raise AssertionError(f"no worker with RANK={rank} started")


@pytest.mark.slow
def test_a_killed_rank_ends_the_run_with_an_error_and_no_energy(tmp_path):
    proc = _torchrun(2, "--molecule", "naphthalene", "--timeout", "60", scratch=tmp_path)
    deadline = time.monotonic() + 120
    victim = _child_with_rank(proc.pid, 1, deadline)
    while len(list(tmp_path.iterdir())) < 2:  # mid-run: both ranks have created their SCF scratch file
        assert proc.poll() is None, "the run ended before a rank could be killed"
        assert time.monotonic() < deadline, "the ranks never started their SCF"
        time.sleep(0.02)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)  # never hangs: torchrun stops the other rank
    assert proc.returncode != 0
    assert "E_corr" not in out and "Eh" not in out  # no energy is printed
    assert "rank: 1" in err or "rank 1" in err, err[-3000:]  # the failure names the dead rank


# ----------------------------------------------------------------------------- memory, progress, failures


def test_small_memory_puts_b_on_disk_and_the_plan_goes_to_stderr_unless_json(tmp_path):
    # water's B and one integral chunk need 0.35 MiB per rank (trntensor.dfmp2.memory_plan);
    # 0.0003 GiB does not hold them, but holds the chunk with B on disk
    args = ("--molecule", "water", "--memory", "0.0003", "--scratch", str(tmp_path))
    out = run(*args, "--json", "--check")
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout)
    assert r["b_on_disk"] and r["agrees"] and abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8
    assert "memory per rank" not in out.stderr  # --json: machine-readable, nothing on stderr
    text = run("--molecule", "water")  # (PySCF's SCF is slow at 0.3 MB; the plan needs no budget)
    assert text.returncode == 0 and "agrees" in text.stdout
    assert "memory per rank" in text.stderr and "no budget" in text.stderr  # before the expensive steps
    assert list(tmp_path.iterdir()) == []  # the scratch file went with the run


def test_kernel_route_options_are_refused_under_torchrun_with_the_reason():
    env = {**os.environ, "WORLD_SIZE": "2"}  # as torchrun sets it
    out = subprocess.run([sys.executable, str(EXAMPLE), "--dtype", "float32"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 2
    assert "--dtype float32 selects the kernel route" in out.stderr
    assert "every rank would repeat it" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("action", ["kill", "hang"])
def test_a_rank_that_dies_or_hangs_in_the_pair_stage_ends_the_run_without_an_energy(action):
    # TRNTENSOR_DFMP2_FAULT: rank 1 dies or stops answering when it is to send its first block
    # of the pair energies; rank 0 names it and the stage, and the run exits non-zero.
    env = {**os.environ, "TRNTENSOR_DFMP2_FAULT": f"{action}:1:pairs"}
    # torchrun polls its workers every 0.1 s by default and then SIGTERMs the survivors; on a
    # loaded machine that can end rank 0 before it has written its report of the lost rank (the
    # run still fails, with torchrun's own error naming rank 1). The slower poll lets the
    # library's message, which this test checks, always come first.
    proc = _torchrun(2, "--molecule", "water", "--timeout", "3", env=env,
                     launcher=("--monitor-interval", "5"))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "E_corr" not in out and "Eh" not in out  # no energy is printed
    assert "stage 'pairs': rank 0 of 2 lost rank 1" in err, err[-3000:]
    assert ("no answer within 3 s" if action == "hang" else "connection closed") in err
