"""Every benchmark script still runs, at its smallest sizes, and writes what it says it writes.

The figures the docs quote come from these scripts; one that stopped running would leave numbers
nobody can reproduce. Each runs here at small sizes, with ``TRNSCI_BENCH_OUT`` pointing its
results and plots at a scratch directory (``benchmarks/_results.py``), so the committed figures
stay as they are. Speed targets are not checked (timings on a shared machine are noise): a
script's verdict is printed, and only ``dispatch_overhead.py`` turns its verdict into an exit code
(1 when over its target), which is accepted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (script, arguments, files under the scratch directory it must write). ``{out}`` is that
#: directory; scripts with a ``--json`` option get one there.
CASES: list[tuple[str, list[str], list[str]]] = [
    ("dispatch_overhead.py", ["--batches", "2", "--calls", "50", "--json", "{out}/dispatch.json"],
     ["dispatch.json"]),
    ("sim_gemm.py", ["--n", "256", "--repeats", "1"], []),
    ("sim_trace.py", ["--rounds", "1", "--repeats", "1"], []),
    ("sim_replay_small.py", ["--repeats", "1", "--inner", "1"], []),
    ("sim_schedule.py", ["--repeats", "1"],
     ["results/sim_schedule.json", "plots/timeline_gemm_1024_cli.png"]),
    ("trnblas_gemm.py", ["--size", "256", "--rounds", "1", "--json", "{out}/gemm.json"], ["gemm.json"]),
    ("trnblas_nki_report.py", ["--sizes", "256", "--json", "{out}/blas_nki.json"],
     ["blas_nki.json", "plots/trnblas_gemm_model.png"]),
    ("trnfft_nki_report.py", ["--sizes", "256", "--batch", "2", "--json", "{out}/fft_nki.json"],
     ["fft_nki.json"]),
    ("trnfft_r2r_ratio.py", ["--sizes", "16,97", "--rounds", "1", "--json", "{out}/r2r.json"], ["r2r.json"]),
    ("trnfft_ratio.py", ["--functions", "fft", "--rounds", "1", "--max-n", "256", "--json", "{out}/fft.json"],
     ["fft.json", "plots/trnfft_ratio.png"]),
    ("trntensor_einsum.py", ["--repeats", "1", "--json", "{out}/einsum.json"], ["einsum.json"]),
    ("trntensor_kernel_keys.py", ["--nocc", "3", "--nvir", "20", "--naux", "40", "--json", "{out}/keys.json"],
     ["keys.json"]),
    ("df_mp2.py", ["--molecules", "water", "--repeats", "1", "--emulator-molecules", "water"],
     ["results/df_mp2.json", "plots/df_mp2.png"]),
    ("df_mp2_ranks.py", ["--carbons", "1", "--repeats", "1"],
     ["results/df_mp2_ranks.json", "plots/df_mp2_ranks.png"]),
]


def test_every_script_has_a_case() -> None:
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert scripts == {c[0] for c in CASES}


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "writes"), CASES, ids=[c[0] for c in CASES])
def test_benchmark_runs_small(
    script: str, args: list[str], writes: list[str], tmp_path: Path, script_env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    committed = _committed_figures()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *(a.format(out=out) for a in args)],
        cwd=tmp_path, env={**script_env, "TRNSCI_BENCH_OUT": str(out)},
        capture_output=True, text=True, timeout=900,
    )
    allowed = (0, 1) if script == "dispatch_overhead.py" else (0,)
    assert proc.returncode in allowed, proc.stdout[-2000:] + proc.stderr[-3000:]
    for name in writes:
        path = out / name
        assert path.is_file() and path.stat().st_size > 0, f"{script} did not write {name}"
        if path.suffix == ".json":
            json.loads(path.read_text())
    assert not [p for p in tmp_path.iterdir() if p.name != "out"], "wrote outside TRNSCI_BENCH_OUT"
    assert _committed_figures() == committed, "changed the repository's own results or plots"


def _committed_figures() -> dict[str, int]:
    """The repository's benchmark results and plots, by path, with their modification times."""
    dirs = (ROOT / "benchmarks" / "results", ROOT / "docs" / "assets" / "bench")
    return {str(p): p.stat().st_mtime_ns for d in dirs if d.is_dir() for p in d.rglob("*") if p.is_file()}
