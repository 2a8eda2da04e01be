"""Known Issue ``lnc2-control-flow`` (NKI 0.3.0 release notes, Known Issues, "Multi-Core (LNC2)"):
"LNC2 requires identical control flow across cores ... Programs with dynamic control flow that
differs across cores may deadlock or produce incorrect results. This constraint is not enforced at
compile time." The 0.4.0 notes no longer list it; AWS's LNC overview (Using Logical Neuron Cores,
still in the SDK 2.32 / NKI 0.6.0 docs) still calls such a kernel's behaviour undefined.

Each kernel reads a per-core count into a register (nkilib's dynamic style) and loops on it. With
different counts on the two cores the dynamic control flow differs: refused under 0.3.0 at the
line where the cores diverge; under 0.4.0-0.6.0 a warning at that line, then computed per core
(checked against NumPy), and refused in strict mode. With
equal counts (the workaround: keep the register-driven control flow identical) it runs under every
release, even though each core works on its own rows. A Python branch on ``nl.program_id`` is not
dynamic control flow (resolved at trace time, AWS "Using Logical Neuron Cores", NKI 0.3.0).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from trncore.sim import known_issues, nisa, nl, strict_mode, versions
from trncore.sim.errors import LanguageError
from trncore.sim.known_issues import KnownIssueError, KnownIssueWarning
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS
RULE = "lnc2-control-flow"


def _my_count(counts):
    """This core's entry of ``counts`` (shape (2, 1) int32) in a register."""
    me = nl.program_id(0)
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=counts[me : me + 1, 0:1])
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    return me, reg


def add_count_per_core(x, counts):
    """Core p adds 1 to its half of x once per iteration of a dynamic_range over counts[p]."""
    me, reg = _my_count(counts)
    half = x.shape[0] // 2
    acc = nl.ndarray((half, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[me * half : (me + 1) * half, :])
    for _ in nl.dynamic_range(0, reg, 1):  # DIVERGE
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=acc)
    return out


def countdown_per_core(x, counts):
    """Core p counts counts[p] down in a ``while reg:`` loop, adding 1 to its half each time."""
    me, reg = _my_count(counts)
    half = x.shape[0] // 2
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=counts[me : me + 1, 0:1])
    acc = nl.ndarray((half, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[me * half : (me + 1) * half, :])
    while reg:  # DIVERGE
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, cond)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=acc)
    return out


def extra_loop_on_core_zero(x, counts):
    """Only core 0 (a trace-time branch) runs a dynamic loop: core 1 finishes without it."""
    me, reg = _my_count(counts)
    half = x.shape[0] // 2
    acc = nl.ndarray((half, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[me * half : (me + 1) * half, :])
    if me == 0:
        for _ in nl.dynamic_range(0, reg, 1):  # DIVERGE
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=acc)
    return out


def branch_on_program_id(x, counts):
    """Trace-time branches on program_id with identical dynamic loops: the workaround's shape."""
    me, reg = _my_count(counts)
    half = x.shape[0] // 2
    acc = nl.ndarray((half, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[me * half : (me + 1) * half, :])
    if me == 1:
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=1.0)
    for _ in nl.dynamic_range(0, reg, 1):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=acc)
    return out


def _x() -> np.ndarray:
    # whole numbers: adding 1 n times equals adding n exactly in float32
    return np.random.default_rng(26).integers(-50, 50, (8, 16)).astype(np.float32)


def _expected(x: np.ndarray, counts: tuple[int, int], core0_only: bool = False) -> np.ndarray:
    out = x.copy()
    out[:4] += counts[0]
    if not core0_only:
        out[4:] += counts[1]
    return out


def _run(kernel, x: np.ndarray, counts: tuple[int, int], **kw) -> np.ndarray:
    c = np.array([[counts[0]], [counts[1]]], dtype=np.int32)
    return run_kernel(kernel, [x, c], target="trn2", lnc=2, **kw)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("kernel", "counts", "core"),
    [
        (add_count_per_core, (2, 3), 1),  # core 1 loops 3 times where core 0 looped twice
        (countdown_per_core, (3, 1), 1),  # core 1's second register test is false, core 0's true
        (extra_loop_on_core_zero, (2, 2), 0),  # core 1 ends without core 0's loop
    ],
    ids=["dynamic_range", "while_reg", "missing_loop"],
)
def test_divergent_dynamic_control_flow(release, kernel, counts, core) -> None:
    x = _x()
    listed = release in known_issues.issue(RULE).releases
    with versions.nki_version(release):
        if not listed:
            # AWS's LNC overview still calls it undefined: a warning at the line, then each core
            # runs its own way (an error in strict mode, test_divergence_is_refused_in_strict_mode)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = _run(kernel, x, counts)
            ref = _expected(x, counts, core0_only=kernel is extra_loop_on_core_zero)
            np.testing.assert_array_equal(got, ref)
            hits = [w for w in caught if "dynamic control flow differs" in str(w.message)]
            assert len(hits) == 1 and hits[0].lineno == marked_line(kernel, "# DIVERGE")
            assert f"core {core} runs" in str(hits[0].message) and "LNC overview" in str(hits[0].message)
            return
        with pytest.raises(KnownIssueError) as info:
            _run(kernel, x, counts)
    exc = info.value
    assert exc.rule == RULE and exc.lineno == marked_line(kernel, "# DIVERGE"), str(exc)
    text = str(exc)
    assert f"{os.path.basename(__file__)}:{exc.lineno}" in text
    assert f"core {core} runs" in text and "NKI 0.3.0" in text and "Known Issues" in text
    assert "identical" in text  # the hardware's requirement is stated


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("kernel", "counts"),
    [(add_count_per_core, (3, 3)), (countdown_per_core, (2, 2)), (branch_on_program_id, (1, 1))],
    ids=["dynamic_range", "while_reg", "program_id_branch"],
)
def test_identical_dynamic_control_flow_runs_everywhere(release, kernel, counts) -> None:
    x = _x()
    with versions.nki_version(release):
        got = _run(kernel, x, counts)
    np.testing.assert_array_equal(got, _expected(x, counts))


def test_warn_mode_runs_each_core_its_own_way() -> None:
    x = _x()
    with versions.nki_version("0.3.0"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run(add_count_per_core, x, (2, 3), known_issues="warn")
    np.testing.assert_array_equal(got, _expected(x, (2, 3)))
    hits = [w for w in caught if issubclass(w.category, KnownIssueWarning)]
    assert len(hits) == 1 and RULE in str(hits[0].message)
    assert hits[0].lineno == marked_line(add_count_per_core, "# DIVERGE")


def test_single_core_launch_is_not_compared() -> None:
    """LNC=1: the same kernel's loop is plain dynamic control flow on one core."""
    x = _x()
    c = np.array([[2], [5]], dtype=np.int32)
    with versions.nki_version("0.3.0"):
        got = run_kernel(add_count_per_core, [x, c], target="trn2")
    ref = x.copy()
    ref[:4] += 2
    np.testing.assert_array_equal(got[:4], ref[:4])


@pytest.mark.parametrize("release", [r for r in RELEASES if r not in known_issues.issue(RULE).releases])
def test_divergence_is_refused_in_strict_mode(release) -> None:
    x = _x()
    with versions.nki_version(release), strict_mode(), pytest.raises(LanguageError) as info:
        _run(add_count_per_core, x, (2, 3))
    assert info.value.rule == "lnc-control-flow"
    assert info.value.lineno == marked_line(add_count_per_core, "# DIVERGE")
