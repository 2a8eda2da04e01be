"""Forms that an eighteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own: a stage of a
time integrator whose constants are module globals read at trace time by a helper the kernel calls
(a public spectral solver exports its three Runge-Kutta stage kernels from one process, changing
the globals in between, with arguments of the same shapes each time).

The program cache (keyed, like ``nki.jit``'s, by the kernel and its arguments) replayed the first
stage's program for the later stages: the stage constants compiled into it were stale, silently.
Now the plain-data globals that the helpers on the stack under the kernel's instructions read are
remembered with the program, as the kernel's own globals already were (Known Issue
``kernel-cache-purity``, NKI 0.3.0 release notes, Known Issues, "Caching": under 0.3.0 the stale
replay is the hardware's cache and is refused at the helper's line; under 0.4.0-0.6.0, whose notes
no longer list the issue, the kernel is traced again with the new value). References: NumPy.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from trncore.sim import cache_info, clear_cache, known_issues, nisa, nl, simulate, versions
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS
RULE = "kernel-cache-purity"
THIS = sys.modules[__name__]

STAGE_A = 1.0 / 3.0  # the Runge-Kutta stage constants, read at trace time by _rk_update
STAGE_B = 0.0
UNUSED_GAIN = 1.0  # read only by _gain, which the kernel calls when gain=True


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    monkeypatch.setattr(THIS, "STAGE_A", 1.0 / 3.0)
    monkeypatch.setattr(THIS, "STAGE_B", 0.0)
    monkeypatch.setattr(THIS, "UNUSED_GAIN", 1.0)


def _tile(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


def _scaled(t, c):
    """c * t, in a helper of its own (the instruction is issued here, not by the helper reading
    the constants)."""
    o = _tile(t.shape)
    nisa.tensor_scalar(dst=o, data=t, op0=nl.multiply, operand0=c)
    return o


def _sum(x, y):
    o = _tile(x.shape)
    nisa.tensor_tensor(dst=o, data1=x, data2=y, op=nl.add)
    return o


def _rk_update(s, d, f):
    """d' = b d + f; s' = s + a d' with the stage constants of the module."""
    a, b = float(STAGE_A), float(STAGE_B)  # ISSUE
    d_new = _sum(_scaled(d, b), f)
    return _sum(s, _scaled(d_new, a)), d_new


def _gain(t):
    return _scaled(t, float(UNUSED_GAIN))


def rk_stage(s, d, f, gain=False):
    """One low-storage Runge-Kutta stage on [P, F] fp32 tiles: (s + a (b d + f), b d + f)."""
    tiles = []
    for src in (s, d, f):
        t = _tile(src.shape)
        nisa.dma_copy(dst=t, src=src)
        tiles.append(t)
    s_new, d_new = _rk_update(*tiles)
    if gain:
        s_new = _gain(s_new)
    outs = []
    for t in (s_new, d_new):
        o = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t)
        outs.append(o)
    return outs[0], outs[1]


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1801)
    return tuple(rng.integers(-8, 8, (16, 32)).astype(np.float32) for _ in range(3))


def _reference(s, d, f, a, b):
    d_new = b * d + f
    return s + a * d_new, d_new


def _check(got, s, d, f, a, b) -> None:
    want = _reference(s.astype(np.float64), d.astype(np.float64), f.astype(np.float64), a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("release", RELEASES)
def test_stage_constants_read_by_a_helper(release: str) -> None:
    s, d, f = _inputs()
    listed = release in known_issues.issue(RULE).releases
    with versions.nki_version(release):
        _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
        THIS.STAGE_A, THIS.STAGE_B = 15.0 / 16.0, -5.0 / 9.0  # the next stage, same shapes
        if not listed:
            _check(simulate(rk_stage)(s, d, f), s, d, f, 15.0 / 16.0, -5.0 / 9.0)
            return
        with pytest.raises(KnownIssueError) as info:
            simulate(rk_stage)(s, d, f)
        # the hardware's cache runs the program compiled with the first stage's constants
        THIS.STAGE_A, THIS.STAGE_B = 1.0 / 3.0, 0.0
        with known_issues.mode("off"):
            simulate(rk_stage)(s, d, f)
            THIS.STAGE_A, THIS.STAGE_B = 15.0 / 16.0, -5.0 / 9.0
            _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
    exc = info.value
    assert exc.rule == RULE and exc.lineno == marked_line(_rk_update, "# ISSUE"), str(exc)
    assert "STAGE_A read here was 0.333" in str(exc) and "is 0.9375 now" in str(exc)


def test_unchanged_helper_constants_replay() -> None:
    s, d, f = _inputs()
    with versions.nki_version("0.3.0"):
        first = simulate(rk_stage)(s, d, f)
        second = simulate(rk_stage)(s, d, f)
    assert cache_info()["traces"] == 1 and cache_info()["replays"] == 1
    for g, h in zip(first, second):
        np.testing.assert_array_equal(g, h)


@pytest.mark.parametrize("release", ["0.3.0", "0.6.0"])
def test_global_of_a_helper_the_trace_did_not_run(release: str) -> None:
    """A helper the kernel did not call (gain=False) compiled nothing in: its global changing is
    neither the stale cache (0.3.0) nor a reason to trace again."""
    s, d, f = _inputs()
    with versions.nki_version(release):
        simulate(rk_stage)(s, d, f)
        THIS.UNUSED_GAIN = 4.0
        _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
    assert cache_info()["traces"] == 1
    # with gain=True the helper runs and its global is then compared
    with versions.nki_version("0.6.0"):
        got = simulate(rk_stage)(s, d, f, gain=True)
        THIS.UNUSED_GAIN = 0.5
        got2 = simulate(rk_stage)(s, d, f, gain=True)
    want = _reference(s.astype(np.float64), d.astype(np.float64), f.astype(np.float64), 1.0 / 3.0, 0.0)
    np.testing.assert_allclose(got[0], 4.0 * want[0], rtol=1e-6)
    np.testing.assert_allclose(got2[0], 0.5 * want[0], rtol=1e-6)


HELPER_TRACES = {"n": 0}  # a helper's own count of its traces
HELPER_CALLS = 0


def _counted_scaled(t):
    global HELPER_CALLS
    HELPER_TRACES["n"] += 1
    HELPER_CALLS += 1
    return _scaled(t, float(STAGE_A))


def counted_stage(s):
    t = _tile(s.shape)
    nisa.dma_copy(dst=t, src=s)
    o = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=_counted_scaled(t))
    return o


def test_state_a_helper_keeps_itself_is_not_stale() -> None:
    """A helper's own counters (a dict it mutates, a global it assigns) change with every trace,
    of any key: a program traced before is still replayed, under 0.3.0 too."""
    s, _, _ = _inputs()
    with versions.nki_version("0.3.0"):
        first = simulate(counted_stage)(s)
        simulate(counted_stage)(s[:8])  # another key: its trace moves both counters on
        again = simulate(counted_stage)(s)
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, s / 3.0, rtol=1e-6)
    assert cache_info()["traces"] == 2 and cache_info()["replays"] == 1


def test_a_program_run_once_collects_helpers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A call whose arguments exceed the cache's byte budget runs once and is never replayed
    # (trncore.sim.lending): nothing it reads can go stale, so only the kernel's first such trace
    # walks over the helpers on the stack (for the Python-subset check of their source,
    # trncore.sim.python_subset); later ones skip the walk. Correct either way, and a cached
    # call after the cache is cleared collects them again.
    from trncore.sim import context

    seen: list[bool] = []
    real = _rk_update

    def spying_update(*tiles):
        seen.append(context.helper_sink is not None)
        return real(*tiles)

    monkeypatch.setattr(THIS, "_rk_update", spying_update)
    s, d, f = _inputs()
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "0")
    clear_cache()
    _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
    _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "1024")
    clear_cache()
    _check(simulate(rk_stage)(s, d, f), s, d, f, 1.0 / 3.0, 0.0)
    assert seen == [True, False, True]
