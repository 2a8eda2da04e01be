"""Known Issue ``kernel-cache-purity`` (NKI 0.3.0 release notes, Known Issues, "Caching"): "NKI
kernel caching assumes kernels are pure functions of their input arguments. If a kernel's output
depends on external state (such as global variables or closures over mutable objects), the cache
may return stale results." The 0.4.0 notes no longer list it.

A kernel reads a module global (or a list it captures), is run, the value changes, and the kernel
is run again with the same arguments. Under 0.3.0 the second call is refused at the line that
reads the value (``error``), or returns the stale result the cached kernel computes (``off``,
``warn``); under 0.4.0-0.6.0 it computes with the new value. The documented workaround (the value
as a kernel argument) gives the new value under every release. References: NumPy.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

from trncore.sim import clear_cache, known_issues, nisa, nl, simulate, versions
from trncore.sim.known_issues import KnownIssueError, KnownIssueWarning
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS
RULE = "kernel-cache-purity"
SCALE = 2.0  # read by scaled_by_global; the tests change it
THIS = sys.modules[__name__]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    monkeypatch.setattr(THIS, "SCALE", 2.0)


def _scaled(a, factor):
    x = nl.load(a)
    y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=factor)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=y)
    return out


def scaled_by_global(a):
    factor = SCALE  # ISSUE
    return _scaled(a, factor)


def scaled_by_argument(a, factor=2.0):
    """The workaround: the value is a (compile-time) argument, so it is part of the cache key."""
    return _scaled(a, factor)


def _make_closure(coeffs: list):
    def scaled_by_captured_list(a):
        return _scaled(a, coeffs[0])  # ISSUE

    return scaled_by_captured_list


def _a() -> np.ndarray:
    return np.random.default_rng(3).integers(-20, 20, (8, 16)).astype(np.float32)


@pytest.mark.parametrize("release", RELEASES)
def test_changed_global(release: str) -> None:
    a = _a()
    listed = release in known_issues.issue(RULE).releases
    with versions.nki_version(release):
        np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 2)
        THIS.SCALE = 3.0
        if not listed:
            np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 3)
            return
        with pytest.raises(KnownIssueError) as info:
            simulate(scaled_by_global)(a)
        # the hardware's cache: the kernel compiled with SCALE = 2.0 is run again (the mode is
        # part of the emulator's key, so the sequence is repeated in mode "off")
        THIS.SCALE = 2.0
        with known_issues.mode("off"):
            np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 2)
            THIS.SCALE = 3.0
            np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 2)
    exc = info.value
    assert exc.rule == RULE and exc.lineno == marked_line(scaled_by_global, "# ISSUE"), str(exc)
    text = str(exc)
    assert f"{os.path.basename(__file__)}:{exc.lineno}" in text
    assert "SCALE read here was 2.0" in text and "is 3.0 now" in text
    assert "NKI 0.3.0" in text and "Known Issues" in text
    assert known_issues.issue(RULE).workaround in text


@pytest.mark.parametrize("release", RELEASES)
def test_mutated_captured_list(release: str) -> None:
    a = _a()
    coeffs = [2.0]
    kernel = _make_closure(coeffs)
    listed = release in known_issues.issue(RULE).releases
    with versions.nki_version(release):
        np.testing.assert_array_equal(simulate(kernel)(a), a * 2)
        coeffs[0] = 5.0  # same list object: the cache key (by object) does not change
        if listed:
            with pytest.raises(KnownIssueError) as info:
                simulate(kernel)(a)
            assert info.value.lineno == marked_line(_make_closure, "# ISSUE")
            assert "coeffs read here was [2.0]" in str(info.value)
        else:
            np.testing.assert_array_equal(simulate(kernel)(a), a * 5)


@pytest.mark.parametrize("release", RELEASES)
def test_workaround_value_as_argument(release: str) -> None:
    a = _a()
    with versions.nki_version(release):
        np.testing.assert_array_equal(simulate(scaled_by_argument)(a, factor=2.0), a * 2)
        np.testing.assert_array_equal(simulate(scaled_by_argument)(a, factor=3.0), a * 3)
        # an unchanged global is a pure kernel's constant: replayed, never refused
        np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 2)
        np.testing.assert_array_equal(simulate(scaled_by_global)(a), a * 2)


def test_warn_mode_returns_the_stale_result() -> None:
    a = _a()
    with versions.nki_version("0.3.0"), known_issues.mode("warn"):
        simulate(scaled_by_global)(a)
        THIS.SCALE = 3.0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = simulate(scaled_by_global)(a)
    np.testing.assert_array_equal(got, a * 2)
    hits = [w for w in caught if issubclass(w.category, KnownIssueWarning)]
    assert len(hits) == 1 and RULE in str(hits[0].message)
    assert hits[0].lineno == marked_line(scaled_by_global, "# ISSUE")


TRACES = {"n": 0}


def counting(a):
    TRACES["n"] += 1  # a trace-time counter the kernel itself changes: not compiled-in state
    return _scaled(a, 2.0)


def test_state_the_kernel_changes_itself_is_not_stale() -> None:
    a = _a()
    with versions.nki_version("0.3.0"):
        first = simulate(counting)(a)
        simulate(counting)(a[:4])  # another key: a second trace moves the counter on
        np.testing.assert_array_equal(simulate(counting)(a), first)  # replayed, not refused
    np.testing.assert_array_equal(first, a * 2)
