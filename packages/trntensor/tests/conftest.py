"""trntensor test configuration."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    # The tests use tiny tensors on a shared 2-core machine: there, OpenMP threads spinning
    # against other processes make small ops 10-50x slower. One thread per test, restored after.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
