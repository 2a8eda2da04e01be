"""scripts/public_trnblas.py classifies each kernel of a trnblas wheel correctly.

The real trnblas 0.5.4 wheel is not ours and CI has no network, so these tests build a small
"wheel" of our own with the wheel's kernel names (so the script's references apply): a correct
GEMM (PASS), a SYRK that reads an HBM argument on a compute engine (RULE at its marked line), an
MP2 energy kernel that never computes (FAIL), a kernel calling an API the emulator does not
emulate (NOTIMPL), one with a Python bug (ERROR) and a kernel the script has no reference for
(NOCASE). The expected outcomes come from how the kernels are written, not from the script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trncore.sim as sim

pytestmark = pytest.mark.simulator

_spec = importlib.util.spec_from_file_location(
    "_public_trnblas_script", Path(__file__).resolve().parents[1] / "scripts" / "public_trnblas.py"
)
assert _spec is not None and _spec.loader is not None
script = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = script  # (dataclasses look their module up)
_spec.loader.exec_module(script)

FAKE_DISPATCH = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def _gemm_kernel_128_128_512(a, b):
    M, K = a.shape
    _, N = b.shape
    TN = N if N <= 512 else 512
    c = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    for m in range(M // 128):
        for n in range(N // TN):
            acc = nl.ndarray((128, TN), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // 128):
                at = nl.load_transpose2d(a[m * 128:(m + 1) * 128, k * 128:(k + 1) * 128])
                bt = nl.load(b[k * 128:(k + 1) * 128, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=at, moving=bt, accumulate=k > 0)
            res = nl.ndarray((128, TN), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nl.store(c[m * 128:(m + 1) * 128, n * TN:(n + 1) * TN], value=res)
    return c


_gemm_kernel = _gemm_kernel_128_128_512  # an alias, as the wheel has: counted once


@nki.jit
def _gemm_kernel_64_128_128(a, b):
    # shards M over the launch grid: each program computes its half of the rows at LNC=2
    M, K = a.shape
    _, N = b.shape
    TN = N if N <= 128 else 128
    rows = M // nl.num_programs(0)
    TM = rows if rows <= 64 else 64
    base = nl.program_id(0) * rows
    c = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    for m in range(rows // TM):
        r0 = base + m * TM
        for n in range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // 128):
                at = nl.load_transpose2d(a[r0:r0 + TM, k * 128:(k + 1) * 128])
                bt = nl.load(b[k * 128:(k + 1) * 128, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=at, moving=bt, accumulate=k > 0)
            res = nl.ndarray((TM, TN), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nl.store(c[r0:r0 + TM, n * TN:(n + 1) * TN], value=res)
    return c


@nki.jit
def _syrk_kernel(a):
    M, K = a.shape
    c = nl.ndarray((M, M), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, K), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=a[0:128, 0:K])  # HERE: a compute engine reading HBM
    return c


@nki.jit
def _mp2_energy_kernel(T_flat, eps_occ_chunk, eps_occ_full, eps_vir_col, eps_vir_row):
    NVIR = eps_vir_row.shape[1]
    IC = eps_occ_chunk.shape[1]
    NOCC = eps_occ_full.shape[1]
    P = min(NVIR, 128)
    while NVIR % P != 0:
        P -= 1
    out = nl.ndarray((P, IC * NOCC), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:P, 0:IC * NOCC], value=nl.zeros((P, IC * NOCC), dtype=nl.float32))
    return out


@nki.jit
def _batched_pair_kernel(B, eps_occ_row, eps_vir_col, eps_vir_row):
    nki.baremetal()
    return B


@nki.jit
def _j_batched_kernel(b_i, B, eps_occ_i, eps_occ_row, eps_vir_col, eps_vir_row):
    NOCC = B.shape[3]  # BUG: B has three axes
    return NOCC


@nki.jit
def _extra_kernel(a):
    return a


def nki_gemm(A, B):
    # an entry point as the wheel writes them: pad, run through nki.simulate, slice
    import numpy as np
    import torch

    M, K = A.shape
    N = B.shape[1]
    a = np.zeros((-(-M // 128) * 128, -(-K // 128) * 128), dtype=np.float32)
    a[:M, :K] = A.numpy()
    b = np.zeros((a.shape[1], N if N <= 512 else -(-N // 512) * 512), dtype=np.float32)
    b[:K, :N] = B.numpy()
    return torch.from_numpy(np.asarray(nki.simulate(_gemm_kernel_128_128_512)(a, b)))[:M, :N]


def nki_syrk(A):
    return nki.simulate(_syrk_kernel)(A.numpy())  # the kernel breaks a rule: RULE here too
"""


@pytest.fixture
def fake_wheel(tmp_path: Path) -> Iterator[Path]:
    """An unpacked wheel: trnblas/__init__.py (with a relative import, as the real one has),
    trnblas/nki/dispatch.py with the kernels above, and a dist-info METADATA."""
    pkg = tmp_path / "wheel" / "trnblas"
    (pkg / "nki").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .nki import dispatch as _dispatch\n")
    (pkg / "nki" / "__init__.py").write_text("from .dispatch import _gemm_kernel\n")
    (pkg / "nki" / "dispatch.py").write_text(FAKE_DISPATCH)
    meta = tmp_path / "wheel" / "trnblas-9.9.9.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: trnblas\nVersion: 9.9.9\n")
    yield tmp_path / "wheel"
    sim.uninstall()
    for name in [n for n in sys.modules if n.startswith(script.ALIAS)]:
        del sys.modules[name]


def _marked_line(marker: str) -> int:
    return next(i for i, ln in enumerate(FAKE_DISPATCH.splitlines(), 1) if marker in ln)


def test_each_outcome_is_classified(fake_wheel: Path) -> None:
    lines: list[str] = []
    outcomes = script.run_wheel(fake_wheel.resolve(), ("trn1", "trn2"), "0.3.0", 1e-4, lines.append)
    by_kernel: dict[str, set[str]] = {}
    for o in outcomes:
        by_kernel.setdefault(o.kernel, set()).add(o.status)
    assert by_kernel == {
        "_gemm_kernel_128_128_512": {"PASS"},
        "_gemm_kernel_64_128_128": {"PASS"},
        "_syrk_kernel": {"RULE"},
        "_mp2_energy_kernel": {"FAIL"},
        "_batched_pair_kernel": {"NOTIMPL"},
        "_j_batched_kernel": {"ERROR"},
        "_extra_kernel": {"NOCASE"},
    }
    # three GEMM shapes (aligned, ragged padded, N below the tile) x two targets; no LNC=2 (the
    # kernels do not read their grid); the GEMM starts each group with accumulate=False: no warning
    gemm = [o for o in outcomes if o.kernel == "_gemm_kernel_128_128_512"]
    assert sorted((o.shape, o.target) for o in gemm) == sorted(
        (s, t)
        for s in ("M=256 K=256 N=1024", "M=165 K=200 N=612 (padded 256x256x1024)", "M=128 K=128 N=77")
        for t in ("trn1", "trn2")
    )
    assert all(o.lnc == 1 and not o.warnings for o in gemm)
    # the sharding GEMM runs at LNC=1 on both targets and at LNC=2 on trn2 (NeuronCore-v3)
    sharded = [o for o in outcomes if o.kernel == "_gemm_kernel_64_128_128"]
    assert (
        sorted((o.target, o.lnc) for o in sharded)
        == [("trn1", 1)] * 3 + [("trn2", 1)] * 3 + [("trn2", 2)] * 3
    )
    rule_line = _marked_line("# HERE")
    for o in outcomes:
        if o.status == "RULE":
            assert o.detail.startswith(f"[compute-no-hbm] at trnblas/nki/dispatch.py:{rule_line}:")
            assert "(page: Memory hierarchy overview, NKI 0.3.0)" in o.detail
        if o.status == "ERROR":
            assert "IndexError" in o.detail
            assert f"(trnblas/nki/dispatch.py:{_marked_line('# BUG')})" in o.detail
        if o.status == "FAIL":
            assert "max relative error 1.00e+00" in o.detail
    assert sum(ln.startswith("  RULE") for ln in lines) == 4  # two syrk shapes x two targets


def test_wheel_file_cli_and_json(fake_wheel: Path, tmp_path: Path, capsys: Any) -> None:
    whl = tmp_path / "trnblas-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path in sorted(fake_wheel.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(fake_wheel))
    out = tmp_path / "r.json"
    env_before = {key: os.environ.get(key) for key in script.WHEEL_ENV}
    assert script.main([str(whl), "--target", "trn2", "--json", str(out)]) == 0
    assert {key: os.environ.get(key) for key in script.WHEEL_ENV} == env_before  # restored
    data = json.loads(out.read_text())
    assert data["version"] == "9.9.9"
    assert data["nki_version"] == "0.3.0"
    assert data["counts"] == {"PASS": 9, "FAIL": 2, "RULE": 2, "NOTIMPL": 2, "ERROR": 2, "NOCASE": 1}
    # the fake wheel's two entry points (the others are absent): its nki_gemm pads and slices
    # correctly; its nki_syrk launches the rule-breaking kernel
    assert [(e["kernel"], e["status"]) for e in data["entry_points"]] == [
        ("nki_gemm", "PASS"),
        ("nki_syrk", "RULE"),
    ]
    assert f"dispatch.py:{_marked_line('# HERE')}" in data["entry_points"][1]["detail"]
    printed = capsys.readouterr().out
    assert (
        "summary: kernels PASS 9, FAIL 2, RULE 2, NOTIMPL 2, ERROR 2, NOCASE 1; entry points PASS 1, RULE 1"
        in printed
    )
    assert "(the wheel has no nki_trsm)" in printed
    import trnblas  # ours, not shadowed by the wheel's package

    assert "packages" in Path(trnblas.__file__).parts


def test_bad_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "missing.whl")])
    junk = tmp_path / "junk.whl"
    junk.write_text("not a zip")
    with pytest.raises(ValueError, match="wheel: .* neither a wheel"):
        script.package_root(junk, tmp_path)
    with pytest.raises(ValueError, match="no trnblas package"):
        script.package_root(tmp_path, tmp_path)


def test_pair_terms_matches_the_mp2_formula() -> None:
    rng = np.random.default_rng(0)
    t = rng.standard_normal((3, 3))
    ev = np.array([0.3, 0.5, 0.9])
    eo_sum = -1.5
    got = script.pair_terms(t, eo_sum, ev)
    for a in range(3):
        for b in range(3):
            assert got[a, b] == pytest.approx(t[a, b] * (2 * t[a, b] - t[b, a]) / (eo_sum - ev[a] - ev[b]))
