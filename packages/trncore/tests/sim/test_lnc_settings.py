"""The second core of an LNC=2 launch is traced in a thread of its own (trncore.sim.lnc); it must
check the kernel against the same NKI release and known-issues mode as the launching thread.

Each kernel below takes a path only on core 1, so a setting lost on the way to that thread would
show: core 1 would check against the default release (0.6.0) or the default mode (error).
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import known_issues, nl, versions
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.runner import run_kernel
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator


def divide_on_core_one(a, b):
    """Core 0 multiplies by the reciprocal (valid everywhere); core 1 uses nl.divide (a known issue)."""
    rows, cols = a.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    x = nl.load(a[me * half : (me + 1) * half, :])
    y = nl.load(b[me * half : (me + 1) * half, :])
    if me == 1:
        q = nl.divide(x, y)
    else:
        q = nl.multiply(x, nl.reciprocal(y))
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[me * half : (me + 1) * half, :], value=q)
    return out


def fori_loop_on_core_one(a):
    """Core 1 runs an nl.fori_loop (NKI 0.6.0); core 0 does not."""
    rows, cols = a.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    t = nl.load(a[me * half : (me + 1) * half, :])
    if me == 1:
        nl.fori_loop(0, 1, lambda i: None)
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[me * half : (me + 1) * half, :], value=t)
    return out


def _operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.uniform(1.0, 2.0, (64, 8)).astype(np.float32)
    b = np.full((64, 8), 4.0, dtype=np.float32)  # a power of two: the reciprocal is exact
    return a, b


def test_known_issues_mode_reaches_the_second_core() -> None:
    a, b = _operands()
    with pytest.raises(KnownIssueError, match="nl-divide"):
        run_kernel(divide_on_core_one, [a, b], target="trn2", lnc=2)
    with known_issues.mode("off"):
        out = run_kernel(divide_on_core_one, [a, b], target="trn2", lnc=2)
    np.testing.assert_allclose(out, a / b, rtol=1e-6)
    out = run_kernel(divide_on_core_one, [a, b], target="trn2", lnc=2, known_issues="off")
    np.testing.assert_allclose(out, a / b, rtol=1e-6)


def test_target_release_reaches_the_second_core() -> None:
    a, _ = _operands()
    np.testing.assert_array_equal(run_kernel(fori_loop_on_core_one, [a], target="trn2", lnc=2), a)
    with versions.nki_version("0.3.0"), pytest.raises(VersionError, match="nl.fori_loop needs NKI 0.6.0"):
        run_kernel(fori_loop_on_core_one, [a], target="trn2", lnc=2)
    with pytest.raises(VersionError, match="nl.fori_loop needs NKI 0.6.0"):
        run_kernel(fori_loop_on_core_one, [a], target="trn2", lnc=2, nki_version="0.3.0")
