"""Where benchmark scripts put what they measure: JSON under benchmarks/results, plots for the docs.

Every script records the machine it ran on next to its figures, so that a number in the docs can
be traced to a run; plots go to docs/assets/bench, which the Benchmarks page shows.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: ``TRNSCI_BENCH_OUT=DIR`` puts results in DIR/results and plots in DIR/plots instead of the
#: repository's own (tests/test_benchmarks_run.py runs every script at small sizes that way,
#: leaving the committed figures alone).
_OUT = os.environ.get("TRNSCI_BENCH_OUT")
RESULTS_DIR = Path(_OUT) / "results" if _OUT else ROOT / "benchmarks" / "results"
PLOTS_DIR = Path(_OUT) / "plots" if _OUT else ROOT / "docs" / "assets" / "bench"


def write_json(name: str, results: Any, path: Path | None = None, **extra: Any) -> Path:
    """Write ``results`` with the machine's description to ``benchmarks/results/<name>.json``."""
    path = path or RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        **extra,
        "results": results,
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display, no fonts from outside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_plot(fig: Any, name: str) -> Path:
    """Save ``fig`` as ``docs/assets/bench/<name>.png`` for the documentation."""
    PLOTS_DIR.mkdir(parents=True, exist_ok=True)
    path = PLOTS_DIR / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def shown(path: Path) -> str:
    """``path`` as a script prints or records it: relative to the repository when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
