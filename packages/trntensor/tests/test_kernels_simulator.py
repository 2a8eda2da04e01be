"""trntensor's NKI kernels on the trncore.sim emulator, against independent references.

Every call runs with TRNTENSOR_REQUIRE_NKI=1, so a kernel that cannot run fails the test instead
of quietly falling back to PyTorch; ``count_keys`` confirms that kernels were launched. References
are float64 torch / NumPy computations (and PySCF for water). Shapes are small but ragged (1, 7,
127, 129, 200 …) to keep the emulator's share of the suite small; big shapes are in
benchmarks/trntensor_kernel_keys.py.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trncore.sim as sim
import trntensor
from trntensor import NkiDispatchError, NkiFallbackWarning, _pytorch
from trntensor import _drivers as kernels_driver
from trntensor.kernels import mp2_energy_block_kernel

pytestmark = pytest.mark.simulator


@pytest.fixture
def nki_sim(monkeypatch):
    """The NKI backend on the emulator, every fallback an error, the default trn2 target."""
    for var in (
        "TRNSCI_USE_SIMULATOR",
        "TRNSCI_REQUIRE_NKI",
        "TRNSCI_FORCE_BACKEND",
        "TRNTENSOR_FORCE_BACKEND",
        "TRNTENSOR_ALLOW_FP32_COMPUTE",
        "TRNSCI_ALLOW_FP32_COMPUTE",
        "NEURON_PLATFORM_TARGET_OVERRIDE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRNTENSOR_USE_SIMULATOR", "1")
    monkeypatch.setenv("TRNTENSOR_REQUIRE_NKI", "1")
    trntensor.set_backend("nki")
    yield monkeypatch
    trntensor.set_backend("auto")


@contextlib.contextmanager
def _nki_env():
    """The nki_sim settings for a hypothesis test (function-scoped fixtures do not reset per case)."""
    with pytest.MonkeyPatch.context() as mp:
        for var in ("TRNSCI_FORCE_BACKEND", "TRNTENSOR_FORCE_BACKEND", "TRNTENSOR_ALLOW_FP32_COMPUTE",
                    "TRNSCI_ALLOW_FP32_COMPUTE", "NEURON_PLATFORM_TARGET_OVERRIDE"):
            mp.delenv(var, raising=False)
        mp.setenv("TRNTENSOR_USE_SIMULATOR", "1")
        mp.setenv("TRNTENSOR_REQUIRE_NKI", "1")
        trntensor.set_backend("nki")
        try:
            yield
        finally:
            trntensor.set_backend("auto")


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


# --------------------------------------------------------------------------- einsum GEMM steps

EINSUMS = [
    ("ij,jk->ik", [(7, 5), (5, 3)]),  # tiny, ragged everywhere
    ("ij,jk->ki", [(129, 200), (200, 127)]),  # permuted output; K crosses a 128 tile
    ("ji,jk->ik", [(130, 40), (130, 600)]),  # A read transposed; N crosses a 512 tile
    ("bij,bkj->bik", [(3, 33, 20), (3, 17, 20)]),  # batched, B read transposed
    ("ij,jk,kl->il", [(9, 31), (31, 64), (64, 2)]),  # two steps in opt_einsum's order
    ("i,i->", [(200,), (200,)]),  # a dot product: a 1x1 GEMM
]


@pytest.mark.parametrize(("eq", "shapes"), EINSUMS)
def test_einsum_gemm_steps_run_the_kernel_and_match_torch(nki_sim, eq, shapes):
    ops = [_randn(*s, seed=i) for i, s in enumerate(shapes)]
    with sim.count_keys() as keys:
        got = trntensor.einsum(eq, *ops)
    assert keys, "no kernel was launched"
    expected = torch.einsum(eq, *[op.double() for op in ops])
    assert got.dtype == torch.float32 and got.shape == expected.shape
    scale = expected.abs().max().item() + 1.0
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-6 * scale * shapes[0][-1] ** 0.5)


@st.composite
def _float32_contractions(draw):
    """Two or three float32 operands over up to five labels, sizes 1 to 40, any output order."""
    labels = draw(st.lists(st.sampled_from("abcde"), min_size=2, max_size=5, unique=True))
    size = {x: draw(st.sampled_from([1, 3, 7, 33, 40])) for x in labels}
    terms = [
        draw(st.lists(st.sampled_from(labels), min_size=1, max_size=3, unique=True))
        for _ in range(draw(st.integers(2, 3)))
    ]
    used = sorted({x for t in terms for x in t})
    out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
    eq = ",".join("".join(t) for t in terms) + "->" + "".join(out)
    return eq, [tuple(size[x] for x in t) for t in terms], draw(st.integers(0, 1000))


@settings(max_examples=25)
@given(_float32_contractions())
def test_generated_float32_einsums_on_the_kernel_route_match_torch(case):
    eq, shapes, seed = case
    ops = [_randn(*s, seed=seed + i) for i, s in enumerate(shapes)]
    with _nki_env():
        got = trntensor.einsum(eq, *ops)
    expected = torch.einsum(eq, *[op.double() for op in ops])
    assert got.dtype == torch.float32 and got.shape == expected.shape
    scale = expected.abs().max().item() + 1.0
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-5 * scale)


def test_einsum_bfloat16_on_trn1(nki_sim):
    nki_sim.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    a, b = _randn(70, 150, dtype=torch.bfloat16), _randn(150, 33, seed=1, dtype=torch.bfloat16)
    with sim.count_keys() as keys:
        got = trntensor.einsum("ij,jk->ik", a, b)
    assert keys and got.dtype == torch.bfloat16
    expected = a.double() @ b.double()  # bf16 inputs are exact in float64; fp32 accumulation
    torch.testing.assert_close(got.double(), expected, rtol=1e-2, atol=1e-2)


def test_float64_falls_back_with_the_reason_unless_float32_is_opted_into(nki_sim):
    a, b = _randn(20, 30, dtype=torch.float64), _randn(30, 10, seed=1, dtype=torch.float64)
    with pytest.raises(NkiDispatchError, match="stays float64"):
        trntensor.einsum("ij,jk->ik", a, b)
    nki_sim.delenv("TRNTENSOR_REQUIRE_NKI")
    trntensor.set_backend("nki")
    from trncore.dispatch import reset_fallback_warnings

    reset_fallback_warnings()
    with pytest.warns(NkiFallbackWarning, match="float64"):
        exact = trntensor.einsum("ij,jk->ik", a, b)
    assert exact.dtype == torch.float64
    torch.testing.assert_close(exact, a @ b, rtol=1e-14, atol=1e-14)  # the float64 reference ran
    nki_sim.setenv("TRNTENSOR_REQUIRE_NKI", "1")
    nki_sim.setenv("TRNTENSOR_ALLOW_FP32_COMPUTE", "1")
    with sim.count_keys() as keys:
        opted = trntensor.einsum("ij,jk->ik", a, b)
    assert keys and opted.dtype == torch.float64
    err = (opted - a @ b).abs().max().item()
    assert 0 < err < 1e-4  # float32 compute: close, but not float64-exact


# --------------------------------------------------------------------------- AO -> MO


def _ao_inputs(n, nocc, nvir, naux, seed=0):
    eri = _randn(n, n, naux, seed=seed, dtype=torch.float64)
    eri = eri + eri.transpose(0, 1)  # (μν|P) is symmetric in μν, as the packed layout assumes
    c = _randn(n, nocc + nvir, seed=seed + 1, dtype=torch.float64)
    return eri, c[:, :nocc], c[:, nocc:]


@pytest.mark.parametrize(
    ("n", "nocc", "nvir", "naux"), [(1, 1, 1, 1), (7, 2, 5, 13), (24, 5, 19, 84), (40, 9, 129, 33)]
)
@pytest.mark.parametrize("packed", [False, True])
def test_ao_to_mo_kernel_matches_the_float64_transform(nki_sim, n, nocc, nvir, naux, packed):
    eri, co, cv = _ao_inputs(n, nocc, nvir, naux)
    expected = torch.einsum("mi,na,mnp->iap", co, cv, eri)
    if packed:
        rows, cols = torch.tril_indices(n, n)
        eri_in = eri[rows, cols].T.contiguous()  # PySCF order: (0,0), (1,0), (1,1), …
    else:
        eri_in = eri
    with sim.count_keys() as keys:
        got = trntensor.ao_to_mo_transform(eri_in.float(), co.float(), cv.float())
    assert len(keys) == 1
    assert got.shape == (nocc, nvir, naux) and got.dtype == torch.float32
    scale = expected.abs().max().item()
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-5 * scale)


def test_ao_to_mo_many_aux_chunks_and_occupied_blocks_use_one_kernel_on_trn1(nki_sim):
    nki_sim.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    nki_sim.setattr(_pytorch, "UNPACK_BUDGET", 32 * 32 * 32 * 4)  # 32 aux functions per chunk
    n, nocc, nvir, naux = 9, 131, 4, 70  # 3 aux chunks (32, 32, 6) × 2 occupied blocks (128, 3)
    eri, co, cv = _ao_inputs(n, nocc, nvir, naux, seed=4)
    with sim.count_keys() as keys:
        got = trntensor.ao_to_mo_transform(eri.float(), co.float(), cv.float())
    assert len(keys) == 1
    expected = torch.einsum("mi,na,mnp->iap", co, cv, eri)
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ao_to_mo_both_kernel_paths_and_dtypes(nki_sim, wide, dtype):
    """Wide blocks, and the K-blocked path for n too long for SBUF (forced small here); bfloat16
    inputs meet the float32 intermediate in pass 2, where the kernel must load both as float32."""
    from trntensor.kernels import ao_to_mo as ao_kernel_module

    if not wide:
        nki_sim.setattr(ao_kernel_module, "_WIDE_BYTES", 1024)  # no wide block fits
    sim.clear_cache()  # module constants are not part of a kernel key
    try:
        eri, co, cv = (t.to(dtype).double() for t in _ao_inputs(11, 3, 7, 9, seed=2))
        with sim.count_keys() as keys:
            got = trntensor.ao_to_mo_transform(eri.to(dtype), co.to(dtype), cv.to(dtype))
    finally:
        sim.clear_cache()
    assert len(keys) == 1 and got.dtype == dtype
    expected = torch.einsum("mi,na,mnp->iap", co, cv, eri)  # of the inputs as rounded to dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2  # bfloat16 keeps 8 bits of the result
    torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol * expected.abs().max().item())


# --------------------------------------------------------------------------- energy


def _mp2_numpy(b, eo, ev):
    t = np.einsum("iaP,jbP->iajb", b, b)
    d = eo[:, None] - ev[None, :]
    den = d[:, :, None, None] + d[None, None, :, :]
    return float(np.sum(t * (2 * t - t.transpose(0, 3, 2, 1)) / den))


@pytest.mark.parametrize(
    ("nocc", "nvir", "naux", "frozen"),
    [(1, 1, 1, 0), (5, 19, 84, 0), (11, 40, 129, 1), (8, 32, 128, 0), (3, 600, 7, 0)],
)
def test_mp2_energy_kernel_matches_a_float64_evaluation(nki_sim, nocc, nvir, naux, frozen):
    rng = np.random.default_rng(nocc * 1000 + nvir)
    b = rng.standard_normal((nocc, nvir, naux)) * 0.1
    eo, ev = -1.0 - rng.random(nocc), 0.2 + rng.random(nvir)
    with sim.count_keys() as keys:
        got = trntensor.mp2_energy(
            torch.from_numpy(b).float(), torch.from_numpy(eo).float(), torch.from_numpy(ev).float(),
            frozen=frozen,
        )
    assert len(keys) == 1
    assert got.dtype == torch.float32 and got.shape == ()
    expected = _mp2_numpy(b[frozen:], eo[frozen:], ev)
    assert got.item() == pytest.approx(expected, rel=2e-5)


def test_mp2_energy_virtual_chunks_and_trn1(nki_sim):
    """Chunk pairs (A, B) of the virtual space, including the A > B skip, on the trn1 rules."""
    nki_sim.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    nki_sim.setattr(kernels_driver, "_SBUF_FACTOR_ELEMENTS", 18 * 32)  # (2·8 + 2) slices, 32 wide
    rng = np.random.default_rng(5)
    nocc, nvir, naux = 10, 70, 20  # 2 occupied blocks × 3 virtual chunks
    b = rng.standard_normal((nocc, nvir, naux)) * 0.1
    eo, ev = -1.0 - rng.random(nocc), 0.2 + rng.random(nvir)
    with sim.count_keys() as keys:
        got = trntensor.mp2_energy(torch.from_numpy(b).float(), torch.from_numpy(eo).float(),
                                   torch.from_numpy(ev).float())
    assert len(keys) == 1
    assert got.item() == pytest.approx(_mp2_numpy(b, eo, ev), rel=2e-5)


def test_mp2_energy_bfloat16_factors(nki_sim):
    rng = np.random.default_rng(9)
    b = torch.from_numpy(rng.standard_normal((6, 37, 29)) * 0.1).bfloat16()
    eo = torch.from_numpy(-1.0 - rng.random(6)).bfloat16()
    ev = torch.from_numpy(0.2 + rng.random(37)).bfloat16()
    with sim.count_keys() as keys:
        got = trntensor.mp2_energy(b, eo, ev)
    assert keys and got.dtype == torch.bfloat16
    expected = _mp2_numpy(b.double().numpy(), eo.double().numpy(), ev.double().numpy())
    assert got.item() == pytest.approx(expected, rel=1e-2)  # the result is rounded to bfloat16


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_mp2_energy_kernel_on_a_ragged_block_reads_what_it_wrote_and_writes_four_bytes(target):
    """The energy kernel itself on one ragged block (nvir 131, a prime past one 128-partition tile;
    naux 40): the float64 NumPy energy; strict mode (no instruction reads memory the kernel did not
    write); and 4 bytes written to HBM: the amplitudes T and their exchange partners never leave
    the chip."""
    rng = np.random.default_rng(17)
    nocc, nvir, naux = 3, 131, 40
    b = rng.standard_normal((nocc, nvir, naux)) * 0.1
    eo, ev = -1.0 - rng.random(nocc), 0.2 + rng.random(nvir)
    bt = np.ascontiguousarray(b.transpose(0, 2, 1), dtype=np.float32)  # bt[i, P, a]
    d = (eo[:, None] - ev[None, :]).astype(np.float32)  # ε_i − ε_a
    args = [bt, bt, bt, bt, d, d]  # I = J = every occupied orbital, A = B = every virtual one
    with sim.strict_mode():
        got = sim.run_kernel(mp2_energy_block_kernel, args, target=target)
    assert got.shape == (1, 1)
    assert float(got[0, 0]) == pytest.approx(_mp2_numpy(b, eo, ev), rel=2e-5)
    rep = sim.report(mp2_energy_block_kernel, *[(a.shape, "float32") for a in args], target=target)
    assert rep.dma_bytes_out == 4


def test_mp2_energy_float64_keeps_float64_and_says_why(nki_sim):
    b = torch.from_numpy(np.random.default_rng(1).standard_normal((3, 5, 4)) * 0.1)
    eo, ev = torch.tensor([-1.0, -0.9, -0.8], dtype=torch.float64), torch.linspace(0.2, 1.0, 5).double()
    with pytest.raises(NkiDispatchError, match="stays float64"):
        trntensor.mp2_energy(b, eo, ev)
    nki_sim.setenv("TRNTENSOR_ALLOW_FP32_COMPUTE", "1")
    with sim.count_keys() as keys:
        got = trntensor.mp2_energy(b, eo, ev)
    assert keys and got.dtype == torch.float64
    assert got.item() == pytest.approx(_mp2_numpy(b.numpy(), eo.numpy(), ev.numpy()), rel=1e-5)


def _df_mp2_keys(nocc, nvir=23, naux=45, n=30, seed=0):
    """A whole DF-MP2 run on the kernels (dense integrals, fitted with a metric), its keys."""
    eri, co, cv = _ao_inputs(n, nocc, nvir, naux, seed=seed)
    eri = eri / n
    r = _randn(naux, naux, seed=seed + 7, dtype=torch.float64)
    metric = torch.eye(naux, dtype=torch.float64) + 0.1 * r @ r.T / naux  # well conditioned SPD
    eo = -1.0 - torch.rand(nocc, generator=torch.Generator().manual_seed(seed)).double()
    ev = 0.3 + torch.rand(nvir, generator=torch.Generator().manual_seed(seed + 1)).double()
    with sim.count_keys() as keys:
        b = trntensor.ao_to_mo_transform(eri.float(), co.float(), cv.float(), metric=metric.float())
        e = trntensor.mp2_energy(b, eo.float(), ev.float())
    w, v = np.linalg.eigh(metric.numpy())
    b_ref = np.einsum("mi,na,mnp->iap", co.numpy(), cv.numpy(), eri.numpy()) @ (v / np.sqrt(w)) @ v.T
    assert e.item() == pytest.approx(_mp2_numpy(b_ref, eo.numpy(), ev.numpy()), rel=1e-4)
    return keys


def test_a_whole_df_mp2_uses_a_constant_number_of_kernel_keys(nki_sim):
    small, large = _df_mp2_keys(6), _df_mp2_keys(21, seed=1)
    # The transform, the metric GEMM and the energy: one key each, whatever nocc is.
    assert len(small) == len(large) == 3


# --------------------------------------------------------------------------- PySCF


@pytest.mark.pyscf
def test_water_float32_kernels_match_pyscf_dfmp2(nki_sim):
    pytest.importorskip("pyscf")
    from pyscf import df, gto, scf
    from pyscf.mp import dfmp2

    mol = gto.M(atom="O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-12)
    pt = dfmp2.DFMP2(mf)
    pt.with_df = df.DF(mol, auxbasis="cc-pvdz-ri")
    pt.kernel()
    nocc = mol.nelectron // 2
    cderi = np.asarray(df.incore.cholesky_eri(mol, auxbasis="cc-pvdz-ri"))  # PySCF's packed layout
    c, e = torch.from_numpy(mf.mo_coeff).float(), torch.from_numpy(mf.mo_energy).float()
    with sim.count_keys() as keys:
        b = trntensor.ao_to_mo_transform(torch.from_numpy(cderi).float(), c[:, :nocc], c[:, nocc:])
        energy = trntensor.mp2_energy(b, e[:nocc], e[nocc:])
    assert len(keys) == 2
    assert energy.dtype == torch.float32
    assert abs(energy.item() - pt.e_corr) < 1e-5
