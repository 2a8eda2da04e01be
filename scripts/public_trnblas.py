"""Run the NKI kernels of the public trnblas 0.5.4 wheel on trncore.sim against NumPy.

    ./scripts/python scripts/public_trnblas.py PATH/TO/trnblas-0.5.4-py3-none-any.whl
        [--target trn1 trn2] [--nki-version 0.3] [--json results.json]

PATH is the wheel (``pip download --no-deps trnblas==0.5.4``; nothing downloads here) or a
directory holding its unpacked ``trnblas`` package. The wheel's package is imported under a
private name (it would otherwise clash with this repository's ``trnblas``) with the emulator
installed as ``nki``; its source is not changed. Every ``@nki.jit`` kernel it defines runs on
small aligned and ragged shapes on each target, and at LNC=2 too on trn2 where the kernel
shards (reads ``nl.program_id`` / ``nl.num_programs``). A ragged shape is padded with zeros the
way the wheel's own host wrappers pad it (its kernels' docstrings make tile multiples the
caller's duty) and the padding is sliced off the result. Each result is compared with a NumPy
float64 reference written here from what the kernel computes (GEMM, SYRK, the DF-MP2 pair
energies). One line per kernel x shape x target:

* ``PASS``: it ran and matches the reference (relative error at most ``--tol``);
* ``FAIL``: it ran and does not match;
* ``RULE``: the emulator refused it for a documented NKI rule, at the kernel's own line, with
  the AWS page the rule comes from where the message names one;
* ``NOTIMPL``: it calls an API the emulator does not emulate;
* ``ERROR``: anything else (with the wheel line it came from);
* ``NOCASE``: a kernel this script has no reference for (a newer wheel).

Then the wheel's public entry points (``nki_gemm``, ``nki_syrk``, ``nki_trsm``,
``nki_mp2_energy``, the pair-energy functions, ...) run on ragged shapes with the wheel's own
switches set while it is imported (``TRNBLAS_USE_SIMULATOR=1``: its kernels go through
``nki.simulate``, here the emulator; ``TRNBLAS_REQUIRE_NKI=1``: a kernel error is raised, not
hidden by its fallback to torch; ``TRNBLAS_AUTOTUNE=0``): its own padding and slicing are
checked too, against the same kind of NumPy reference.

Warnings the emulator raises at a kernel line (behaviour AWS's pages leave undefined) are
listed under the line; they do not change the status. Not part of CI: the wheel is not ours and
CI has no network (tests/test_public_trnblas.py tests this script on a small wheel of our own).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The name the wheel's package is imported under (never ``trnblas``: that is ours).
ALIAS = "_public_trnblas"
TARGETS = ("trn1", "trn2")
STATUSES = ("PASS", "FAIL", "RULE", "NOTIMPL", "ERROR", "NOCASE")
#: Set while the wheel is imported: its entry points run their kernels through ``nki.simulate``
#: (the emulator), re-raise kernel errors instead of falling back to torch, and skip the
#: hardware-only tile autotuner (the wheel's own switches).
WHEEL_ENV = {"TRNBLAS_USE_SIMULATOR": "1", "TRNBLAS_REQUIRE_NKI": "1", "TRNBLAS_AUTOTUNE": "0"}


# --------------------------------------------------------------------------- the wheel
def package_root(path: Path, scratch: Path) -> Path:
    """The directory holding the wheel's ``trnblas`` package: ``path`` itself, its parent, or the
    wheel unpacked into ``scratch``."""
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise ValueError(f"wheel: {path} is neither a wheel (zip) nor a directory")
        with zipfile.ZipFile(path) as whl:
            whl.extractall(scratch)
        path = scratch
    if (path / "trnblas" / "__init__.py").is_file():
        return path
    if path.name == "trnblas" and (path / "__init__.py").is_file():
        return path.parent
    raise ValueError(f"wheel: no trnblas package (trnblas/__init__.py) in {path}")


def wheel_version(root: Path) -> str:
    """The ``Version:`` of the wheel's dist-info METADATA ("?" for a bare package)."""
    for meta in sorted(root.glob("trnblas-*.dist-info/METADATA")):
        found = re.search(r"^Version:\s*(\S+)", meta.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    return "?"


def load_kernels(root: Path) -> dict[str, Any]:
    """Import the wheel's modules that define ``@nki.jit`` kernels, with the emulator as ``nki``;
    each distinct kernel by its function name (aliases such as ``_gemm_kernel`` counted once)."""
    import trncore.sim as sim
    from trncore.sim.runner import Kernel

    sim.install(force=True)
    pkg = root / "trnblas"
    saved = {k: os.environ.get(k) for k in WHEEL_ENV}
    os.environ.update(WHEEL_ENV)  # the wheel reads them once, at import
    try:
        kernels = _import_kernels(pkg, Kernel)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return kernels


def _import_kernels(pkg: Path, kernel_type: Any) -> dict[str, Any]:
    """Import ``pkg`` as :data:`ALIAS`, then each of its modules that mentions ``nki.jit``; the
    ``kernel_type`` instances they define, by function name."""
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        del sys.modules[name]  # a second wheel in the same process (the tests)
    spec = importlib.util.spec_from_file_location(
        ALIAS, pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[ALIAS] = module
    spec.loader.exec_module(module)
    kernels: dict[str, Any] = {}
    for path in sorted(pkg.rglob("*.py")):
        if "nki.jit" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        parts = path.relative_to(pkg).with_suffix("").parts
        dotted = ".".join((ALIAS, *(p for p in parts if p != "__init__")))
        for value in vars(importlib.import_module(dotted)).values():
            if isinstance(value, kernel_type):
                kernels.setdefault(value.func.__name__, value)
    return kernels


def shards(func: Callable[..., Any]) -> bool:
    """Whether the kernel reads its launch grid (so an LNC=2 launch splits its work)."""
    source = inspect.getsource(func)
    return bool(re.search(r"\b(program_id|num_programs|program_ndim)\s*\(", source))


# --------------------------------------------------------------------------- references
@dataclass
class Case:
    """One shape of one kernel: its arguments, the reference, and how to read the output."""

    label: str
    args: tuple[Any, ...]
    expect: np.ndarray
    read: Callable[[Any], np.ndarray]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _pad(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` zero-padded at the end of each axis to ``shape`` (float32)."""
    out = np.zeros(shape, dtype=np.float32)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


def top_left(rows: int, cols: int) -> Callable[[Any], np.ndarray]:
    """Read an output without the padding rows and columns the caller added."""
    return lambda out: np.asarray(out, np.float64)[:rows, :cols]


def column_sums(out: Any) -> np.ndarray:
    """Read a (partition, pair) output of energy partials: one energy per pair (the host's sum)."""
    return np.asarray(out, np.float64).sum(axis=0)


def _up(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def pair_terms(t: np.ndarray, eo_sum: float, ev: np.ndarray) -> np.ndarray:
    """The DF-MP2 energy terms ``T_ab (2 T_ab - T_ba) / (e_i + e_j - e_a - e_b)`` of one pair."""
    t = t.astype(np.float64)
    denom = eo_sum - ev.astype(np.float64)[:, None] - ev.astype(np.float64)[None, :]
    return t * (2.0 * t - t.T) / denom


def _energies(nocc: int, nvir: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Occupied energies in [-1, -0.5] and virtual ones in [0.2, 1]: denominators <= -1.4."""
    rng = _rng(seed)
    eo = rng.uniform(-1.0, -0.5, nocc).astype(np.float32)
    ev = rng.uniform(0.2, 1.0, nvir).astype(np.float32)
    return eo, ev


def gemm_cases(tile_m: int, tile_k: int, tile_n: int) -> Iterator[Case]:
    """``c = a @ b``; the wrapper pads M, K to tiles and N to ``tile_n`` only above it."""
    for i, (m, k, n) in enumerate(
        ((2 * tile_m, 2 * tile_k, 2 * tile_n), (tile_m + 37, 200, tile_n + 100), (tile_m, 128, 77))
    ):
        rng = _rng(10 + i)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        mp, kp = _up(m, tile_m), _up(k, tile_k)
        np_ = n if n <= tile_n else _up(n, tile_n)
        label = f"M={m} K={k} N={n}" + (f" (padded {mp}x{kp}x{np_})" if (mp, kp, np_) != (m, k, n) else "")
        yield Case(
            label,
            (_pad(a, (mp, kp)), _pad(b, (kp, np_))),
            a.astype(np.float64) @ b.astype(np.float64),
            top_left(m, n),
        )


def syrk_cases() -> Iterator[Case]:
    """``c = a @ a.T``; M, K padded to 128 (M <= 512 here: one output column tile)."""
    for i, (m, k) in enumerate(((256, 256), (200, 100))):
        a = _rng(20 + i).standard_normal((m, k), dtype=np.float32)
        mp, kp = _up(m, 128), _up(k, 128)
        label = f"M={m} K={k}" + (f" (padded {mp}x{kp})" if (mp, kp) != (m, k) else "")
        a64 = a.astype(np.float64)
        yield Case(label, (_pad(a, (mp, kp)),), a64 @ a64.T, top_left(m, m))


def mp2_energy_cases() -> Iterator[Case]:
    """Per-pair energies of ``T[i, j, a, b] = T_flat[i*nvir + a, j*nvir + b]``, i < IC, j < NOCC.

    No padding: the kernel strips nvir by its largest divisor <= 128 (nvir=200: strips of 100).
    The output's partition axis holds partials; summing it gives one energy per (i, j).
    """
    for i, (ic, nocc, nvir) in enumerate(((2, 3, 128), (2, 3, 200))):
        rng = _rng(30 + i)
        t_flat = (0.1 * rng.standard_normal((ic * nvir, nocc * nvir))).astype(np.float32)
        eo, ev = _energies(nocc, nvir, 31 + i)
        want = [
            pair_terms(
                t_flat[p * nvir : (p + 1) * nvir, q * nvir : (q + 1) * nvir], float(eo[p]) + float(eo[q]), ev
            ).sum()
            for p in range(ic)
            for q in range(nocc)
        ]
        yield Case(
            f"IC={ic} NOCC={nocc} NVIR={nvir}",
            (t_flat, eo[None, :ic].copy(), eo[None, :], ev[:, None].copy(), ev[None, :].copy()),
            np.array(want),
            column_sums,
        )


def _padded_b(nocc: int, nvir: int, naux: int, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """DF factors B (nocc, nvir, naux), B zero-padded to 128 multiples, and the shape label."""
    b = (0.1 * _rng(seed).standard_normal((nocc, nvir, naux))).astype(np.float32)
    vp, ap = _up(nvir, 128), _up(naux, 128)
    label = f"NVIR={nvir} NAUX={naux}" + (f" (padded {vp}x{ap})" if (vp, ap) != (nvir, naux) else "")
    return b, _pad(b, (nocc, vp, ap)), label


def _ev_feeds(ev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Virtual energies as the (NVIR_pad, 1) column and (1, NVIR_pad) row the kernels read."""
    vp = _up(ev.size, 128)
    return _pad(ev[:, None], (vp, 1)), _pad(ev[None, :], (1, vp))


def _pair(b: np.ndarray, eo: np.ndarray, ev: np.ndarray, i: int, j: int) -> np.ndarray:
    t = b[i].astype(np.float64) @ b[j].astype(np.float64).T
    return pair_terms(t, float(eo[i]) + float(eo[j]), ev)


def fused_gemm_energy_cases() -> Iterator[Case]:
    """One pair (i, j): the kernel's (NVIR_pad, 1) output holds the row sums over b."""
    for i, (nvir, naux) in enumerate(((256, 128), (200, 100))):
        b, bp, label = _padded_b(2, nvir, naux, 40 + i)
        eo, ev = _energies(2, nvir, 41 + i)
        col, row = _ev_feeds(ev)
        eo_sum = np.array([[float(eo[0]) + float(eo[1])]], dtype=np.float32)
        want = _pair(b, eo, ev, 0, 1).sum(axis=1, keepdims=True)
        yield Case(label, (bp[0], bp[1], eo_sum, col, row), want, top_left(nvir, 1))


def batched_pair_cases() -> Iterator[Case]:
    """All pairs: column i*NOCC + j of the (128, NOCC^2) output sums to the (i, j) energy."""
    for i, (nocc, nvir, naux) in enumerate(((2, 128, 256), (3, 150, 60))):
        b, bp, label = _padded_b(nocc, nvir, naux, 50 + i)
        eo, ev = _energies(nocc, nvir, 51 + i)
        col, row = _ev_feeds(ev)
        want = [_pair(b, eo, ev, p, q).sum() for p in range(nocc) for q in range(nocc)]
        yield Case(f"NOCC={nocc} {label}", (bp, eo[None, :].copy(), col, row), np.array(want), column_sums)


def j_batched_cases() -> Iterator[Case]:
    """The pairs (i, j) of one i (the host's loop variable): column j sums to their energy."""
    for i, (nocc, nvir, naux) in enumerate(((2, 128, 256), (3, 150, 60))):
        b, bp, label = _padded_b(nocc, nvir, naux, 60 + i)
        eo, ev = _energies(nocc, nvir, 61 + i)
        col, row = _ev_feeds(ev)
        occ = nocc - 1
        want = [_pair(b, eo, ev, occ, q).sum() for q in range(nocc)]
        args = (bp[occ].copy(), bp, eo[None, occ : occ + 1].copy(), eo[None, :].copy(), col, row)
        yield Case(f"i={occ} NOCC={nocc} {label}", args, np.array(want), column_sums)


def cases_for(name: str) -> list[Case] | None:
    """The cases of the wheel's kernel ``name`` (None: this script has no reference for it)."""
    gemm = re.fullmatch(r"_gemm_kernel_(\d+)_(\d+)_(\d+)", name)
    if gemm:
        return list(gemm_cases(*(int(g) for g in gemm.groups())))
    table: dict[str, Callable[[], Iterator[Case]]] = {
        "_syrk_kernel": syrk_cases,
        "_mp2_energy_kernel": mp2_energy_cases,
        "_fused_gemm_energy_kernel": fused_gemm_energy_cases,
        "_batched_pair_kernel": batched_pair_cases,
        "_j_batched_kernel": j_batched_cases,
    }
    return list(table[name]()) if name in table else None


def entry_cases() -> Iterator[tuple[str, Case]]:
    """The wheel's public NKI entry points (``trnblas.nki.nki_*``) on ragged shapes: its own host
    code pads, launches the kernel through ``nki.simulate`` and slices (arrays become torch)."""
    rng = _rng(70)
    a, b = (
        rng.standard_normal((165, 200), dtype=np.float32),
        rng.standard_normal((200, 612), dtype=np.float32),
    )
    yield "nki_gemm", Case("M=165 K=200 N=612", (a, b), a.astype(np.float64) @ b, _array)
    a, b = (
        rng.standard_normal((2, 100, 130), dtype=np.float32),
        rng.standard_normal((2, 130, 70), dtype=np.float32),
    )
    yield "nki_batched_gemm", Case("batch=2 M=100 K=130 N=70", (a, b), a.astype(np.float64) @ b, _array)
    a = rng.standard_normal((200, 100), dtype=np.float32)
    yield "nki_syrk", Case("M=200 K=100", (a,), a.astype(np.float64) @ a.T, _array)
    # upper triangular, unit-dominant diagonal: well conditioned; two 128-row blocks
    tri = (np.triu(0.1 * rng.standard_normal((200, 200))) + np.diag(rng.uniform(1, 2, 200))).astype(
        np.float32
    )
    rhs = rng.standard_normal((200, 30), dtype=np.float32)
    want = np.linalg.solve(tri.astype(np.float64), rhs.astype(np.float64))
    yield "nki_trsm", Case("left upper, M=200 NRHS=30", (tri, rhs), want, _array)
    ic, nocc, nvir = 2, 3, 200
    t_flat = (0.1 * rng.standard_normal((ic * nvir, nocc * nvir))).astype(np.float32)
    eo, ev = _energies(nocc, nvir, 71)
    total = sum(
        pair_terms(
            t_flat[p * nvir : (p + 1) * nvir, q * nvir : (q + 1) * nvir], float(eo[p]) + float(eo[q]), ev
        ).sum()
        for p in range(ic)
        for q in range(nocc)
    )
    yield (
        "nki_mp2_energy",
        Case(f"IC={ic} NOCC={nocc} NVIR={nvir}", (t_flat, eo[:ic], eo, ev), np.array(total), _array),
    )
    b3 = (0.1 * rng.standard_normal((2, 200, 100))).astype(np.float32)
    eo, ev = _energies(2, 200, 72)
    args = (b3[0], b3[1], float(eo[0]), float(eo[1]), ev)
    yield (
        "nki_fused_gemm_energy",
        Case("NVIR=200 NAUX=100", args, np.array(_pair(b3, eo, ev, 0, 1).sum()), _array),
    )
    # the wheel runs one kernel for all pairs up to 4096 estimated loop iterations (NOCC^2 x
    # N_A^2 x N_K), the per-i kernel above: NOCC=33 with NVIR=150 (N_A=2), NAUX=60 gives 4356
    for nocc in (3, 33):
        b3 = (0.1 * rng.standard_normal((nocc, 150, 60))).astype(np.float32)
        eo, ev = _energies(nocc, 150, 73)
        total = sum(_pair(b3, eo, ev, p, q).sum() for p in range(nocc) for q in range(nocc))
        route = "one kernel" if nocc == 3 else "per-i kernel"
        yield (
            "nki_batched_pair_energy",
            Case(f"NOCC={nocc} NVIR=150 NAUX=60 ({route})", (b3, eo, ev), np.array(total), _array),
        )


def _array(out: Any) -> np.ndarray:
    """A torch (or NumPy) result as a float64 array."""
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    return np.asarray(out, np.float64)


# --------------------------------------------------------------------------- running
@dataclass
class Outcome:
    """One kernel x shape x target (x LNC) run."""

    kernel: str
    shape: str
    target: str
    lnc: int
    status: str
    detail: str = ""
    warnings: list[str] = field(default_factory=list)


def _where(filename: str | None, lineno: int | None, root: Path) -> str:
    """``trnblas/nki/dispatch.py:1569`` for a file of the wheel."""
    if not filename:
        return "?"
    path = Path(filename)
    shown = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
    return f"{shown}:{lineno}"


def aws_page(message: str) -> str:
    """The AWS page a rule message cites (``AWS NKI docs, <page>, NKI x.y.z``), or ""."""
    found = re.search(r"AWS NKI docs?, ([^;:)]+)", message)
    return found.group(1).strip() if found else ""


def run_case(kernel: Any, case: Case, target: str, lnc: int, version: str, root: Path, tol: float) -> Outcome:
    """Run one kernel case and classify it (see the module docstring)."""
    from trncore.sim.runner import run_kernel

    def call() -> Any:
        args = [a.copy() for a in case.args]
        return run_kernel(kernel.func, args, target=target, lnc=lnc if lnc > 1 else None, nki_version=version)

    outcome = Outcome(kernel.func.__name__, case.label, target, lnc, "PASS")
    return classify(outcome, call, case, root, tol)


def classify(outcome: Outcome, call: Callable[[], Any], case: Case, root: Path, tol: float) -> Outcome:
    """Fill ``outcome`` from running ``call`` and comparing its output with ``case.expect``."""
    import traceback

    from trncore.sim import NkiValidationError, clear_cache

    clear_cache()  # trace every case: an emulator warning comes with the trace, not a replay
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = call()
        except NkiValidationError as exc:
            page = aws_page(str(exc))
            outcome.status = "RULE"
            outcome.detail = (
                f"[{exc.rule}] at {_where(exc.filename, exc.lineno, root)}: "
                f"{exc.detail} (page: {page or 'none named in the message'})"
            )
            out = None
        except NotImplementedError as exc:
            outcome.status, outcome.detail, out = "NOTIMPL", str(exc), None
        except Exception as exc:  # every other failure is reported, not raised
            frames = [
                f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).is_relative_to(root)
            ]
            where = _where(frames[-1].filename, frames[-1].lineno, root) if frames else "?"
            outcome.status, outcome.detail, out = "ERROR", f"{type(exc).__name__}: {exc} ({where})", None
    seen = set()
    for w in caught:
        message = str(w.message).splitlines()[0].replace(f"{root}/", "")  # the wheel's paths as trnblas/...
        text = f"{_where(w.filename, w.lineno, root)}: {message}"
        if Path(w.filename).is_relative_to(root) and text not in seen:
            seen.add(text)
            outcome.warnings.append(text)
    if out is None:
        return outcome
    got = case.read(out)
    scale = max(float(np.max(np.abs(case.expect))), 1e-30)
    err = float(np.max(np.abs(got - case.expect))) / scale if got.shape == case.expect.shape else np.inf
    if not err <= tol:  # NaN (an unwritten output) fails too
        shape = (
            "" if got.shape == case.expect.shape else f" (shape {got.shape}, expected {case.expect.shape})"
        )
        outcome.status, outcome.detail = "FAIL", f"max relative error {err:.2e} > {tol:.0e}{shape}"
    else:
        outcome.detail = f"max relative error {err:.1e}"
    return outcome


def _echo(res: Outcome, what: str, echo: Callable[[str], None]) -> None:
    """One line per run, then its warnings (shortened; in full in --json)."""
    echo(f"  {res.status:<7} {what}: {res.detail}")
    for text in res.warnings:
        page = aws_page(text)
        short = text if len(text) <= 150 else text[:147] + "..."
        echo(f"          warning at {short}" + (f" (page: {page})" if page else ""))


def run_wheel(
    root: Path, targets: tuple[str, ...], version: str, tol: float, echo: Callable[[str], None] = print
) -> list[Outcome]:
    """Every kernel of the wheel at ``root`` x its cases x ``targets`` (and LNC=2 on trn2 where
    it shards), each printed as it finishes."""
    outcomes = []
    for name, kernel in sorted(load_kernels(root).items()):
        cases = cases_for(name)
        if cases is None:
            outcomes.append(Outcome(name, "-", "-", 1, "NOCASE", "no reference in this script"))
            echo(f"  NOCASE  {name}")
            continue
        lncs = (1, 2) if shards(kernel.func) else (1,)
        for case in cases:
            for target in targets:
                for lnc in lncs if target == "trn2" else (1,):
                    res = run_case(kernel, case, target, lnc, version, root, tol)
                    outcomes.append(res)
                    at = f" LNC={lnc}" if lnc > 1 else ""
                    _echo(res, f"{name} [{case.label}] {target}{at}", echo)
    return outcomes


def run_entry(
    func: Callable[..., Any], name: str, case: Case, target: str, version: str, root: Path, tol: float
) -> Outcome:
    """Call the wheel's entry point ``func`` on ``case`` (NumPy arrays passed as torch tensors) with
    the emulator checking ``target`` and ``version``, and classify it."""
    import torch

    from trncore.config import TARGET_ENV
    from trncore.sim.versions import nki_version

    def call() -> Any:
        args = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in case.args]
        saved = os.environ.get(TARGET_ENV)
        os.environ[TARGET_ENV] = target  # nki.simulate checks the target this names
        try:
            with nki_version(version):
                return func(*args)
        finally:
            if saved is None:
                os.environ.pop(TARGET_ENV, None)
            else:
                os.environ[TARGET_ENV] = saved

    return classify(Outcome(name, case.label, target, 1, "PASS"), call, case, root, tol)


def run_entries(
    root: Path, targets: tuple[str, ...], version: str, tol: float, echo: Callable[[str], None] = print
) -> list[Outcome]:
    """Every entry point of :func:`entry_cases` the wheel defines x ``targets``, printed as run
    (after :func:`load_kernels` imported the wheel)."""
    modules = [m for n, m in sorted(sys.modules.items()) if n == ALIAS or n.startswith(ALIAS + ".")]
    outcomes = []
    for name, case in entry_cases():
        func = next((getattr(m, name) for m in modules if callable(getattr(m, name, None))), None)
        if func is None:
            echo(f"  (the wheel has no {name})")
            continue
        for target in targets:
            res = run_entry(func, name, case, target, version, root, tol)
            outcomes.append(res)
            _echo(res, f"{name} [{case.label}] {target}", echo)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("wheel", type=Path, help="trnblas-0.5.4 wheel, or its unpacked directory")
    parser.add_argument("--target", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument(
        "--nki-version",
        default="0.3.0",
        help="NKI release the kernels are checked against (the wheel's: 0.3.0)",
    )
    parser.add_argument("--tol", type=float, default=1e-4, help="max error relative to max |reference|")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.wheel.exists():
        parser.error(f"wheel: {args.wheel} does not exist")
    from trncore.sim.versions import release, resolve

    version = resolve(args.nki_version)
    with tempfile.TemporaryDirectory(prefix="public_trnblas_") as scratch:
        root = package_root(args.wheel.resolve(), Path(scratch)).resolve()
        found = wheel_version(root)
        print(f"{args.wheel} (trnblas {found}) under {release(version).label} on {', '.join(args.target)}")
        outcomes = run_wheel(root, tuple(args.target), version, args.tol)
        print("the wheel's entry points (its own padding; kernels through nki.simulate):")
        entries = run_entries(root, tuple(args.target), version, args.tol)
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    entry_counts = {s: sum(o.status == s for o in entries) for s in STATUSES}
    warned = sum(bool(o.warnings) for o in outcomes if o.status == "PASS")
    print(
        "summary: kernels "
        + ", ".join(f"{s} {n}" for s, n in counts.items() if n)
        + (f" ({warned} PASS with a warning)" if warned else "")
        + "; entry points "
        + (", ".join(f"{s} {n}" for s, n in entry_counts.items() if n) or "none")
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "wheel": str(args.wheel),
                    "version": found,
                    "nki_version": version,
                    "targets": args.target,
                    "counts": counts,
                    "runs": [vars(o) for o in outcomes],
                    "entry_counts": entry_counts,
                    "entry_points": [vars(o) for o in entries],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
