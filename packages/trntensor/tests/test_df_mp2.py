"""DF-MP2 building blocks against NumPy/SciPy references and against PySCF on water/cc-pVDZ."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trntensor import ao_to_mo_transform, apply_metric, metric_inverse_sqrt, mp2_energy


def _rng(seed=0):
    return np.random.default_rng(seed)


def _mp2_reference(b, eo, ev):
    """Closed-shell DF-MP2 energy in NumPy, every (i, j) pair formed explicitly."""
    t = np.einsum("iaP,jbP->iajb", b, b)
    denom = (
        eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
    )
    return float(np.sum(t * (2 * t - t.transpose(0, 3, 2, 1)) / denom))


def _mp2_inputs(nocc, nvir, naux, seed=0):
    rng = _rng(seed)
    b = rng.standard_normal((nocc, nvir, naux)) * 0.1
    eo = -1.0 - rng.random(nocc)
    ev = 0.2 + rng.random(nvir)
    return b, eo, ev


@pytest.mark.parametrize(
    ("nocc", "nvir", "naux"), [(1, 1, 1), (7, 7, 7), (5, 129, 128), (13, 9, 127), (40, 6, 3)]
)
def test_mp2_energy_matches_a_full_numpy_evaluation(nocc, nvir, naux):
    b, eo, ev = _mp2_inputs(nocc, nvir, naux)
    got = mp2_energy(torch.from_numpy(b), torch.from_numpy(eo), torch.from_numpy(ev))
    assert got.dtype == torch.float64 and got.shape == ()
    assert got.item() == pytest.approx(_mp2_reference(b, eo, ev), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("budget", [1, 5_000, 10**6, None])
def test_mp2_energy_is_independent_of_the_memory_budget(budget):
    b, eo, ev = _mp2_inputs(23, 11, 17, seed=1)
    got = mp2_energy(torch.from_numpy(b), torch.from_numpy(eo), torch.from_numpy(ev), memory_budget=budget)
    assert got.item() == pytest.approx(_mp2_reference(b, eo, ev), rel=1e-12)


@settings(max_examples=80)
@given(
    st.integers(1, 9),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(0, 9),
    st.sampled_from([None, 1, 700, 5_000]),
    st.integers(0, 2**31 - 1),
)
def test_mp2_energy_any_sizes_frozen_and_budget(nocc, nvir, naux, frozen, budget, seed):
    frozen = min(frozen, nocc)
    b, eo, ev = _mp2_inputs(nocc, nvir, naux, seed=seed)
    got = mp2_energy(
        torch.from_numpy(b), torch.from_numpy(eo), torch.from_numpy(ev), frozen=frozen, memory_budget=budget
    )
    expected = _mp2_reference(b[frozen:], eo[frozen:], ev) if frozen < nocc else 0.0
    assert got.item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_mp2_energy_frozen_core_drops_the_lowest_occupied_orbitals():
    b, eo, ev = _mp2_inputs(9, 8, 10, seed=2)
    got = mp2_energy(torch.from_numpy(b), torch.from_numpy(eo), torch.from_numpy(ev), frozen=3)
    assert got.item() == pytest.approx(_mp2_reference(b[3:], eo[3:], ev), rel=1e-12)
    everything = mp2_energy(torch.from_numpy(b), torch.from_numpy(eo), torch.from_numpy(ev), frozen=9)
    assert everything.item() == 0.0


def test_mp2_energy_float32_stays_float32_and_non_contiguous_inputs_work():
    b, eo, ev = _mp2_inputs(6, 10, 12, seed=3)
    b32 = torch.from_numpy(b.transpose(2, 1, 0).copy()).float().permute(2, 1, 0)  # non-contiguous
    assert not b32.is_contiguous()
    got = mp2_energy(b32, torch.from_numpy(eo).float(), torch.from_numpy(ev).float())
    assert got.dtype == torch.float32
    assert got.item() == pytest.approx(_mp2_reference(b, eo, ev), rel=1e-5)


def test_ao_to_mo_dense_layout_matches_numpy():
    rng = _rng(4)
    n, naux, nocc, nvir = 11, 13, 3, 8
    eri = rng.standard_normal((n, n, naux))
    eri = eri + eri.transpose(1, 0, 2)
    co, cv = rng.standard_normal((n, nocc)), rng.standard_normal((n, nvir))
    got = ao_to_mo_transform(torch.from_numpy(eri), torch.from_numpy(co), torch.from_numpy(cv))
    np.testing.assert_allclose(got.numpy(), np.einsum("mnP,mi,na->iaP", eri, co, cv), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 7, 16])
def test_ao_to_mo_packed_layout_matches_the_dense_result(n):
    rng = _rng(5)
    naux, nocc, nvir = 9, 2, max(n - 2, 1)
    eri = rng.standard_normal((naux, n, n))
    eri = eri + eri.transpose(0, 2, 1)
    rows, cols = np.tril_indices(n)  # row-major lower triangle: PySCF's pair order
    packed = eri[:, rows, cols]
    co, cv = rng.standard_normal((n, nocc)), rng.standard_normal((n, nvir))
    got = ao_to_mo_transform(torch.from_numpy(packed), torch.from_numpy(co), torch.from_numpy(cv))
    np.testing.assert_allclose(got.numpy(), np.einsum("Pmn,mi,na->iaP", eri, co, cv), rtol=1e-12, atol=1e-12)


def test_ao_to_mo_packed_layout_in_several_auxiliary_chunks(monkeypatch):
    from trntensor import _pytorch

    monkeypatch.setattr(_pytorch, "REFERENCE_UNPACK_BYTES", 3 * 7 * 7 * 8)  # three aux functions per chunk
    rng = _rng(8)
    n, naux = 7, 10
    eri = rng.standard_normal((naux, n, n))
    eri = eri + eri.transpose(0, 2, 1)
    rows, cols = np.tril_indices(n)
    co, cv = rng.standard_normal((n, 3)), rng.standard_normal((n, 4))
    got = ao_to_mo_transform(torch.from_numpy(eri[:, rows, cols]), torch.from_numpy(co), torch.from_numpy(cv))
    np.testing.assert_allclose(got.numpy(), np.einsum("Pmn,mi,na->iaP", eri, co, cv), rtol=1e-12, atol=1e-12)


def test_ao_to_mo_promotes_and_keeps_the_device():
    eri = torch.empty(5, 5, 4, device="meta", dtype=torch.float32)
    co = torch.empty(5, 2, device="meta", dtype=torch.float64)
    cv = torch.empty(5, 3, device="meta", dtype=torch.float64)
    got = ao_to_mo_transform(eri, co, cv)
    assert got.device.type == "meta" and got.dtype == torch.float64 and got.shape == (2, 3, 4)


def test_metric_inverse_sqrt_matches_scipy_and_apply_metric_fits():
    rng = _rng(6)
    a = rng.standard_normal((12, 12))
    j = a @ a.T + 12 * np.eye(12)
    got = metric_inverse_sqrt(torch.from_numpy(j))
    ref = scipy.linalg.fractional_matrix_power(j, -0.5)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)
    b = rng.standard_normal((3, 4, 12))
    fitted = apply_metric(torch.from_numpy(b), torch.from_numpy(j)).numpy()
    lhs = np.einsum("iaQ,jbQ->iajb", fitted, fitted)
    rhs = np.einsum("iaP,PQ,jbQ->iajb", b, np.linalg.inv(j), b)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: mp2_energy(torch.ones(2, 3), torch.ones(2), torch.ones(3)), ValueError, "B must have 3"),
        (lambda: mp2_energy(torch.ones(2, 3, 4), torch.ones(3), torch.ones(3)), ValueError, "eps_occ has 3"),
        (lambda: mp2_energy(torch.ones(2, 3, 4), -torch.ones(2), torch.ones(2)), ValueError, "eps_vir has 2"),
        (
            lambda: mp2_energy(torch.ones(2, 3, 4), torch.ones(2), torch.ones(3)),
            ValueError,
            "below the lowest",
        ),
        (
            lambda: mp2_energy(torch.ones(2, 3, 4), -torch.ones(2), torch.ones(3), frozen=3),
            ValueError,
            "frozen=3",
        ),
        (
            lambda: mp2_energy(torch.ones(2, 3, 4), -torch.ones(2), torch.ones(3), frozen=-1),
            ValueError,
            ">= 0",
        ),
        (
            lambda: mp2_energy(torch.ones(2, 3, 4, dtype=torch.int64), -torch.ones(2), torch.ones(3)),
            TypeError,
            "B must",
        ),
        (
            lambda: mp2_energy(np.ones((2, 3, 4)), -torch.ones(2), torch.ones(3)),
            TypeError,
            "B must be a torch",
        ),
        (
            lambda: mp2_energy(torch.ones(2, 3, 4), -torch.ones(2, device="meta"), torch.ones(3)),
            ValueError,
            "eps_occ is on meta",
        ),
        (
            lambda: ao_to_mo_transform(torch.ones(4, 4, 2), torch.ones(3, 1), torch.ones(3, 2)),
            ValueError,
            "expected",
        ),
        (
            lambda: ao_to_mo_transform(torch.ones(2, 5), torch.ones(3, 1), torch.ones(3, 2)),
            ValueError,
            "packed",
        ),
        (
            lambda: ao_to_mo_transform(torch.ones(3, 1), torch.ones(3, 1), torch.ones(4, 2)),
            ValueError,
            "C_vir has 4",
        ),
        (
            lambda: ao_to_mo_transform(torch.ones(3), torch.ones(3, 1), torch.ones(3, 2)),
            ValueError,
            "must be",
        ),
        (lambda: metric_inverse_sqrt(torch.ones(2, 3)), ValueError, "square"),
        (lambda: metric_inverse_sqrt(-torch.eye(2)), ValueError, "positive definite"),
        (lambda: apply_metric(torch.ones(2, 3), torch.eye(4)), ValueError, "must match"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --------------------------------------------------------------------------- PySCF


@pytest.fixture(scope="module")
def water():
    pyscf = pytest.importorskip("pyscf")
    from pyscf import df, gto, scf
    from pyscf.mp import dfmp2

    mol = gto.M(atom="O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-12)
    energies = {}
    for frozen in (0, 1):
        pt = dfmp2.DFMP2(mf, frozen=frozen or None)
        pt.with_df = df.DF(mol, auxbasis="cc-pvdz-ri")
        pt.kernel()
        energies[frozen] = pt.e_corr
    assert pyscf is not None
    return mol, mf, energies


@pytest.mark.pyscf
@pytest.mark.parametrize("frozen", [0, 1])
def test_water_dfmp2_matches_pyscf_from_cholesky_cderi(water, frozen):
    from pyscf import df

    mol, mf, energies = water
    nocc = mol.nelectron // 2
    c, e = torch.from_numpy(mf.mo_coeff), torch.from_numpy(mf.mo_energy)
    cderi = torch.from_numpy(np.asarray(df.incore.cholesky_eri(mol, auxbasis="cc-pvdz-ri")))
    b = ao_to_mo_transform(cderi, c[:, :nocc], c[:, nocc:])
    energy = mp2_energy(b, e[:nocc], e[nocc:], frozen=frozen)
    assert energy.dtype == torch.float64
    assert abs(energy.item() - energies[frozen]) < 1e-8


@pytest.mark.pyscf
def test_water_dfmp2_matches_pyscf_from_dense_integrals_and_metric(water):
    from pyscf import df

    mol, mf, energies = water
    nocc = mol.nelectron // 2
    auxmol = df.addons.make_auxmol(mol, "cc-pvdz-ri")
    eri3c = df.incore.aux_e2(mol, auxmol, intor="int3c2e", aosym="s1").reshape(mol.nao, mol.nao, -1)
    metric = auxmol.intor("int2c2e")
    c, e = torch.from_numpy(mf.mo_coeff), torch.from_numpy(mf.mo_energy)
    b = ao_to_mo_transform(torch.from_numpy(eri3c), c[:, :nocc], c[:, nocc:], metric=torch.from_numpy(metric))
    energy = mp2_energy(b, e[:nocc], e[nocc:], memory_budget=20_000)  # forces many blocks
    assert abs(energy.item() - energies[0]) < 1e-8


@pytest.mark.pyscf
def test_packed_pair_order_is_pyscfs():
    from pyscf import lib

    rng = _rng(7)
    n = 6
    sym = rng.standard_normal((3, n, n))
    sym = sym + sym.transpose(0, 2, 1)
    packed = lib.pack_tril(sym)
    co, cv = np.eye(n)[:, :2], np.eye(n)[:, 2:]
    got = ao_to_mo_transform(torch.from_numpy(packed), torch.from_numpy(co), torch.from_numpy(cv))
    np.testing.assert_allclose(got.numpy(), sym[:, :2, 2:].transpose(1, 2, 0), rtol=0, atol=1e-15)
