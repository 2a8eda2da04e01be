"""The DF-MP2 example against PySCF's DF-MP2, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
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
    xyz.write_text("3\nwater\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n")
    r = results("--molecule", str(xyz))
    assert r["nocc"] == 5 and abs(r["e_corr"] - r["e_corr_pyscf"]) <= 1e-8


def test_bad_arguments_are_named():
    out = run("--molecule", "unobtainium")
    assert out.returncode == 2 and "--molecule must be one of water" in out.stderr
    out = run("--basis", "sto-3g")
    assert out.returncode == 2 and "no default RI basis" in out.stderr
    out = run("--memory", "-1")
    assert out.returncode == 2 and "--memory must be a positive" in out.stderr
