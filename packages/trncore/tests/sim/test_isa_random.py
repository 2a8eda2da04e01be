"""Random numbers (trncore.sim.isa_random): ``nisa.rng``, ``nisa.set_rng_seed``,
``nisa.rand_set_state`` / ``rand_get_state``, ``nl.rand`` / ``nl.random_seed`` (nki.isa and
nki.language API reference), and the Known Issue ``nl-rand-engine`` (NKI 0.3.0-0.6.0 notes).

The hardware's bits are not reproducible, so the tests check what the pages and the emulator's
documented guarantees say: the same seed gives the same sequence, successive draws differ,
``rng`` keeps the least significant bits of 32-bit values, the values are uniformly distributed
(SciPy's Kolmogorov-Smirnov and chi-square tests at a fixed seed), a saved state restores a
sequence, and the page constraints are raised at the kernel's line.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trncore.sim import errors, known_issues, nisa, nl, versions
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS
P, F = 128, 256


def _store_all(tiles, dtype):
    out = nl.ndarray((len(tiles), P, F), dtype, buffer=nl.shared_hbm)
    for i, t in enumerate(tiles):
        nl.store(out[i], value=t)
    return out


def _bits(dtype, engine=nisa.vector_engine):
    t = nl.ndarray((P, F), dtype, buffer=nl.sbuf)
    nisa.rng(t, engine=engine)
    return t


def seeded_draws(seed, dtype="uint32"):
    """seed, draw, draw, seed again, draw: the first and third draws must agree."""
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    nisa.set_rng_seed(s)
    a, b = _bits(dtype), _bits(dtype)
    nisa.set_rng_seed(s)
    c = _bits(dtype)
    return _store_all([a, b, c], dtype)


def _run(kernel, *args, target="trn1", dtype=None, **kw):
    kwargs = {} if dtype is None else {"dtype": dtype}  # a compile-time argument of the kernel
    return run_kernel(kernel, list(args), kwargs, target=target, **kw)


def test_same_seed_same_sequence_and_draws_differ() -> None:
    got = _run(seeded_draws, np.array([[42]], np.int32))
    np.testing.assert_array_equal(got[0], got[2])
    assert np.mean(got[0] == got[1]) < 0.01
    other = _run(seeded_draws, np.array([[43]], np.int32))
    assert np.mean(other[0] == got[0]) < 0.01
    # a run is reproducible: the replayed program gives the traced run's values
    np.testing.assert_array_equal(_run(seeded_draws, np.array([[42]], np.int32)), got)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "int32"])
def test_rng_keeps_the_least_significant_bits(dtype: str) -> None:
    """nki.isa.rng: 32 random bits per element, truncated to the dtype's least significant bits."""
    seed = np.array([[7]], np.int32)
    wide = _run(seeded_draws, seed, dtype="uint32")
    narrow = _run(seeded_draws, seed, dtype=dtype)
    width = np.dtype(dtype).itemsize * 8
    expected = (wide & np.uint32((1 << width) - 1)).astype(f"uint{width}").view(dtype)
    np.testing.assert_array_equal(narrow, expected)


def test_bits_are_uniform() -> None:
    got = _run(seeded_draws, np.array([[1]], np.int32), dtype="uint8")[0].reshape(-1)
    counts = np.bincount(got, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-3


def uniform_tile(a):
    t = nl.rand((P, F), dtype=nl.float32)
    out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_nl_rand_is_uniform_on_0_1(release: str) -> None:
    with versions.nki_version(release):
        x = _run(uniform_tile, np.zeros((1, 1), np.float32)).reshape(-1)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert stats.kstest(x, "uniform").pvalue > 1e-3
    assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.005


def seed_then_rand(a):
    # the nki.language.random_seed page's example: same seed, same values
    seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
    nl.random_seed(seed)
    x = nl.rand((P, F), dtype=nl.float32)  # ISSUE
    nl.random_seed(seed)
    y = nl.rand((P, F), dtype=nl.float32)
    return _store_all([x, y], nl.float32)


def vector_seed_then_rng(a):
    """Our workaround: seed and draw on one engine with the nki.isa instructions (set_rng_seed's
    page: the same seed gives the same sequence with nisa.rng on the Vector engine)."""
    seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
    nisa.set_rng_seed(seed)
    x = _bits(nl.uint32)
    nisa.set_rng_seed(seed)
    y = _bits(nl.uint32)
    return _store_all([x, y], nl.uint32)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_rand_after_random_seed_is_the_known_issue(release: str, target: str) -> None:
    a = np.zeros((1, 1), np.float32)
    assert release in known_issues.issue("nl-rand-engine").releases
    with versions.nki_version(release):
        with pytest.raises(KnownIssueError) as info:
            _run(seed_then_rand, a, target=target)
        assert info.value.rule == "nl-rand-engine"
        assert info.value.lineno == marked_line(seed_then_rand, "# ISSUE")
        assert "before trn3" in str(info.value) and f"NKI {release}" in str(info.value)
        # AWS's simulator's leniency: the seed takes effect
        x, y = _run(seed_then_rand, a, target=target, known_issues="off")
        np.testing.assert_array_equal(x, y)
        # the workaround, everywhere
        u, v = _run(vector_seed_then_rng, a, target=target)
        np.testing.assert_array_equal(u, v)


def save_and_restore_state(a):
    saved = nl.ndarray((P, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(saved)
    x = _bits(nl.uint32, engine=nisa.gpsimd_engine)
    nisa.rand_set_state(saved)
    y = _bits(nl.uint32, engine=nisa.gpsimd_engine)
    z = _bits(nl.uint32, engine=nisa.gpsimd_engine)
    return _store_all([x, y, z], nl.uint32)


def test_state_round_trip_on_gpsimd() -> None:
    x, y, z = _run(save_and_restore_state, np.zeros((1, 1), np.float32), target="trn2")
    np.testing.assert_array_equal(x, y)
    assert np.mean(y == z) < 0.01


def _rng_float(a):
    _bits(nl.float32)


def _rng_gpsimd(a):
    _bits(nl.uint32, engine=nisa.gpsimd_engine)


def _rng_gpsimd_psum(a):
    t = nl.ndarray((P, F), nl.uint32, buffer=nl.psum)
    nisa.rng(t, engine=nisa.gpsimd_engine)


def _seed_shape(a):
    nisa.set_rng_seed(nl.full((1, 2), 1, dtype=nl.int32, buffer=nl.sbuf))


def _state_shape(a):
    nisa.rand_get_state(nl.ndarray((P, 4), nl.uint32, buffer=nl.sbuf))


def _state_vector_engine(a):
    nisa.rand_get_state(nl.ndarray((P, 6), nl.uint32, buffer=nl.sbuf), engine=nisa.vector_engine)


@pytest.mark.parametrize(
    ("kernel", "target", "error", "rule"),
    [
        (_rng_float, "trn1", errors.DtypeError, "rng-dtype"),
        (_rng_gpsimd, "trn1", errors.TargetError, "rng-engine"),
        (_rng_gpsimd_psum, "trn2", errors.BufferError, "rng-gpsimd-psum"),
        (_seed_shape, "trn1", errors.ShapeError, "set-rng-seed-seed"),
        (_state_shape, "trn2", errors.ShapeError, "rand-get-state-state"),
        (_state_shape, "trn1", errors.TargetError, "rand-get-state-target"),
        (_state_vector_engine, "trn2", errors.TargetError, "rand-get-state-engine"),
    ],
    ids=["rng_float", "rng_gpsimd_trn1", "rng_gpsimd_psum", "seed_shape", "state_shape",
         "state_trn1", "state_vector"],
)
def test_page_constraints(kernel, target, error, rule) -> None:
    with pytest.raises(error) as info:
        _run(kernel, np.zeros((1, 1), np.float32), target=target)
    assert info.value.rule == rule
    assert info.value.filename == __file__


# ------------------------------------------------------------------ dropout
def dropout_rows(x, probs):
    """nisa.dropout with one drop probability per partition."""
    t, p = nl.load(x), nl.load(probs)
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=out, data=t, prob=p)
    return _store_all([out], t.dtype)


def dropout_scalar(x, rate=0.3):
    t = nl.load(x)
    return _store_all([nl.dropout(t, rate)], t.dtype)


def dropout_then_bits(x, rate=0.3):
    """The same seed before a dropout and before an rng draw: the dropped elements are those whose
    uniform value (24 high bits of the draw times 2^-24) is below the rate."""
    seed = nl.full((1, 1), 9, dtype=nl.int32, buffer=nl.sbuf)
    nisa.set_rng_seed(seed)
    kept = nl.dropout(nl.load(x), rate)
    nisa.set_rng_seed(seed)
    bits = _bits(nl.uint32)
    return _store_all([kept], nl.float32), _store_all([bits], nl.uint32)


def test_dropout_per_partition_probabilities() -> None:
    x = np.random.default_rng(4).uniform(1.0, 2.0, (P, F)).astype(np.float32)
    probs = np.where(np.arange(P) % 2 == 0, 0.0, 1.0).astype(np.float32).reshape(P, 1)
    probs[5, 0] = 0.25
    got = _run(dropout_rows, x, probs)[0]
    even = np.arange(P) % 2 == 0
    np.testing.assert_array_equal(got[even], x[even])  # probability 0.0 keeps every element
    odd = ~even
    odd[5] = False
    assert not got[odd].any()  # probability 1.0 replaces every element with zero
    kept = got[5] != 0
    np.testing.assert_array_equal(got[5][kept], x[5][kept])
    assert 0.1 < 1 - kept.mean() < 0.4


def test_dropout_rate_and_reproducibility() -> None:
    x = np.ones((P, F), np.float32)
    got = _run(dropout_scalar, x)[0]
    dropped = (got == 0).mean()
    assert abs(dropped - 0.3) < 0.01  # binomial sd ~ 0.003 over 32768 elements
    kept, bits = _run(dropout_then_bits, x)
    uniform = (bits[0] >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    np.testing.assert_array_equal(kept[0] == 0, uniform < np.float32(0.3))


def test_dropout_integer_data_needs_float32_prob() -> None:
    x = np.arange(P * F, dtype=np.int32).reshape(P, F)
    ok = _run(dropout_rows, x, np.zeros((P, 1), np.float32))[0]
    np.testing.assert_array_equal(ok, x)
    with pytest.raises(errors.DtypeError) as info:
        _run(dropout_rows, x, np.zeros((P, 1), np.float16))
    assert info.value.rule == "dropout-prob-dtype" and info.value.filename == __file__
