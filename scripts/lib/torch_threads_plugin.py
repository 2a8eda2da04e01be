"""pytest plugin for cross-checks: keep torch at ``OMP_NUM_THREADS`` intra-op threads for the whole
run, overriding the test suites' one-thread fixtures (docs/testing.md, "Cross-checking").

    OMP_NUM_THREADS=2 PYTHONPATH=scripts/lib ./scripts/python -m pytest -p torch_threads_plugin \\
        packages/trnblas/tests packages/trntensor/tests
"""

from __future__ import annotations

import os

import pytest
import torch

THREADS = int(os.environ.get("OMP_NUM_THREADS", "2"))
_set_num_threads = torch.set_num_threads


def _keep(nthreads: int) -> None:  # every request (the fixtures ask for 1) keeps THREADS
    _set_num_threads(THREADS)


_set_num_threads(THREADS)
torch.set_num_threads = _keep


def pytest_report_header() -> str:
    return f"torch intra-op threads held at {THREADS} (torch_threads_plugin)"


def pytest_sessionfinish(session: pytest.Session) -> None:
    assert torch.get_num_threads() == THREADS, torch.get_num_threads()
