"""trntensor.dfmp2: DF-MP2 energies and spin components of RHF and UHF references against PySCF
(DFMP2 / DFUMP2 on the same fitting basis), frozen orbitals as PySCF takes them, SCS, the memory
plan, and runs over 1-4 gloo ranks that agree to the last bit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyscf")
from pyscf import df, gto, scf
from pyscf.mp import dfmp2, dfump2

from trntensor.dfmp2 import OCC_BLOCK, DFMP2Energy, dfmp2_energy, memory_plan

pytestmark = pytest.mark.pyscf

AUX = "cc-pvdz-ri"
WATER = "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587"
OPEN_SHELLS = {  # (geometry, 2S): two radicals and a triplet
    "OH": ("O 0 0 0; H 0 0 0.97", 1),
    "HCO": ("C 0 0 0; O 0 0 1.18; H 0 0.94 -0.58", 1),
    "CH2 triplet": ("C 0 0 0; H 0 0.99 0.45; H 0 -0.99 0.45", 2),
}


def _scf(atom: str, spin: int = 0, basis: str = "cc-pvdz"):
    mol = gto.M(atom=atom, basis=basis, spin=spin, verbose=0)
    return (scf.UHF(mol) if spin else scf.RHF(mol)).density_fit().run()


def _pyscf(mf, frozen=None):
    cls = dfump2.DFUMP2 if isinstance(mf, scf.uhf.UHF) else dfmp2.DFMP2
    pt = cls(mf, frozen=frozen)
    pt.with_df = df.DF(mf.mol, auxbasis=AUX)
    pt.kernel()
    return pt


@pytest.fixture(scope="module")
def water():
    return _scf(WATER)


@pytest.mark.parametrize("frozen", [None, 1, [0, 3], [0, 20]], ids=str)
def test_rhf_energy_and_spin_components_match_pyscf(water, frozen):
    ours, ref = dfmp2_energy(water, AUX, frozen=frozen), _pyscf(water, frozen)
    assert isinstance(ours, DFMP2Energy) and not ours.unrestricted
    assert abs(ours.e_corr - ref.e_corr) < 1e-8
    assert abs(ours.e_os - ref.e_corr_os) < 1e-8 and abs(ours.e_ss - ref.e_corr_ss) < 1e-8
    # SCS-MP2 (Grimme 2003): 6/5 E_os + 1/3 E_ss, and adjustable scales
    assert abs(ours.scs() - (1.2 * ref.e_corr_os + ref.e_corr_ss / 3)) < 1e-8
    assert abs(ours.scs(1.0, 1.0) - ref.e_corr) < 1e-8


def test_frozen_lists_are_honoured(water):
    full = dfmp2_energy(water, AUX)
    core = dfmp2_energy(water, AUX, frozen=[0])
    assert core.nocc == (full.nocc[0] - 1,) and core.nvir == full.nvir
    virt = dfmp2_energy(water, AUX, frozen=[23])  # a virtual orbital
    assert virt.nocc == full.nocc and virt.nvir == (full.nvir[0] - 1,)
    assert dfmp2_energy(water, AUX, frozen=1).e_corr == core.e_corr  # a count is the lowest ones


@pytest.mark.parametrize("name", sorted(OPEN_SHELLS))
def test_uhf_energy_and_spin_components_match_pyscf(name):
    atom, spin = OPEN_SHELLS[name]
    mf = _scf(atom, spin)
    for frozen in (None, 1):
        ours, ref = dfmp2_energy(mf, AUX, frozen=frozen), _pyscf(mf, frozen)
        assert ours.unrestricted and len(ours.nocc) == 2
        assert abs(ours.e_corr - ref.e_corr) < 1e-8
        assert abs(ours.e_os - ref.e_corr_os) < 1e-8 and abs(ours.e_ss - ref.e_corr_ss) < 1e-8


def test_uhf_frozen_pair_of_lists():
    mf = _scf(*OPEN_SHELLS["OH"])
    frozen = [[0, 1], [0]]
    ours, ref = dfmp2_energy(mf, AUX, frozen=frozen), _pyscf(mf, frozen)
    assert ours.nocc == (3, 3) and abs(ours.e_corr - ref.e_corr) < 1e-8


def test_memory_plan_and_budget(water):
    seen = []
    r = dfmp2_energy(water, AUX, on_plan=seen.append)
    assert seen == [r.plan] and r.plan.fits() and r.plan.total > 0
    assert "memory per rank" in r.plan.describe()
    with pytest.raises(MemoryError, match="does not fit: memory per rank"):
        dfmp2_energy(water, AUX, memory=1024)
    one = memory_plan(200, [64], [136], 800, 1)  # 64 / OCC_BLOCK occupied blocks
    four = memory_plan(200, [64], [136], 800, 4)
    assert four.b_own * 4 == one.b_own and one.b_visiting == 0  # one process receives nothing
    assert four.b_visiting == 2 * one.b_own // (64 // OCC_BLOCK)  # two blocks
    b_parts = [p.b_own + p.b_visiting for p in (four, one)]
    assert b_parts[0] <= 0.4 * b_parts[1] and four.integrals == one.integrals


def test_bad_arguments(water):
    with pytest.raises(ValueError, match="outside 0..23"):
        dfmp2_energy(water, AUX, frozen=[99])
    with pytest.raises(TypeError, match="frozen must be"):
        dfmp2_energy(water, AUX, frozen="core")
    with pytest.raises(ValueError, match="occ_block must be a positive int"):
        dfmp2_energy(water, AUX, occ_block=0)
    with pytest.raises(ValueError, match="memory must be a positive"):
        dfmp2_energy(water, AUX, memory=-5)
    rohf = scf.ROHF(gto.M(atom=OPEN_SHELLS["OH"][0], basis="cc-pvdz", spin=1, verbose=0)).run()
    with pytest.raises(ValueError, match="run scf.UHF"):
        dfmp2_energy(rohf, AUX)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["water", "HCO"])
def test_one_to_four_ranks_give_the_same_bits(tmp_path, name):
    atom, spin = (WATER, 0) if name == "water" else OPEN_SHELLS[name]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    results = {}
    for ranks in (1, 2, 3, 4):
        out = tmp_path / f"r{ranks}"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("_dfmp2_rank.py")), str(ranks),
             str(tmp_path / f"init{ranks}"), str(out), atom, str(spin)],
            capture_output=True, text=True, timeout=600, env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = {Path(f"{out}.{r}").read_text(encoding="utf-8") for r in range(ranks)}
        assert len(lines) == 1, lines  # every rank returns the same number
        *energies, reported = lines.pop().split()
        assert int(reported) == ranks
        results[ranks] = tuple(energies)
        # ... and the same SCF without any process group gives those bits too
        assert tuple(Path(f"{out}.alone").read_text(encoding="utf-8").split()) == results[ranks]
    assert len(set(results.values())) == 1, results  # bitwise, whatever the rank count
    e_corr = float.fromhex(results[1][0])
    assert abs(e_corr - _pyscf(_scf(atom, spin)).e_corr) < 1e-8
