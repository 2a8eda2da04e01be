"""Two readings decided in session 33 (issue 13): nested ``nl.dynamic_range`` loops and
``.ap(offset=N)`` on a view that has an offset of its own.

Nested dynamic loops. The NKI 0.4.0 release notes (Known Issues, carried forward by 0.5.0 and
0.6.0): "Nested ``nl.dynamic_range`` loops with loop-carried values fail to compile with a "Could
not find register" error". The emulator refuses exactly that under those releases: a register
value carried from one iteration of a loop of a nest to a later one, or out of it, at the line
that reads it. Plain nested loops run, and are checked against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import clear_cache, nisa, nl, simulate, versions
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

F32 = np.float32
RELEASES = versions.VERSIONS  # 0.3.0 ... 0.6.0
LISTING = ("0.4.0", "0.5.0", "0.6.0")  # the releases whose notes carry nested-dynamic-range
rng = np.random.default_rng(33)


@pytest.fixture(autouse=True)
def _fresh_programs() -> None:
    clear_cache()


def _row(a, reg):
    """Row ``reg`` (a register) of HBM ``a`` in a new [1, C] SBUF tile."""
    c = a.shape[1]
    t = nl.ndarray((1, c), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[c, 1], [1, c]], scalar_offset=reg))
    return t


def _int_cell(value):
    cell = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=cell, value=value)
    return cell


def _store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ------------------------------------------------------------------ plain nests: they run
def nest_accumulating_into_a_tile(a, nxt):
    """A tensor accumulated across both loops: memory, not a carried register value."""
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    acc = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.dynamic_range(2):
        for _ in nl.dynamic_range(3):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
    return _store(acc)


def nest_reading_registers_set_before_it(a, nxt):
    """The inner trip count and the row are registers written before the nest (loop-invariant)."""
    trips = nisa.register_alloc(3)
    row = nisa.register_alloc(2)
    acc = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.dynamic_range(2):
        for _ in nl.dynamic_range(trips):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=_row(a, row), op=nl.add)
    return _store(acc)


def nest_writing_a_register_before_each_read(a, nxt):
    """A register written and then read in the same inner iteration: nothing is carried."""
    four = _int_cell(4)
    row = nisa.register_alloc()
    acc = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.dynamic_range(2):
        for _ in nl.dynamic_range(3):
            nisa.register_load(row, four)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=_row(a, row), op=nl.add)
    return _store(acc)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("kernel", "ref"),
    [
        (nest_accumulating_into_a_tile, lambda a, nxt: 6 * a),
        (nest_reading_registers_set_before_it, lambda a, nxt: 6 * a[2:3]),
        (nest_writing_a_register_before_each_read, lambda a, nxt: 6 * a[4:5]),
    ],
)
def test_plain_nested_dynamic_loops_run_on_every_release(release, kernel, ref) -> None:
    a, nxt = _data()
    with versions.nki_version(release):
        got = simulate(kernel)(a, nxt)
    np.testing.assert_allclose(got, ref(a, nxt), rtol=1e-5, atol=1e-5)  # float32 sums of 6 rows


# ------------------------------------------------------------------ carried values: refused
def _chase(a, nxt, outer):
    """Follow ``nxt`` from row 0 for 2 x 3 steps, summing the rows visited: the register ``row``
    is written in one inner iteration and read in the next (a loop-carried value)."""
    nxt_sb = nl.ndarray(nxt.shape, nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=nxt_sb, src=nxt)
    n = nxt.shape[1]
    row = nisa.register_alloc(0)
    acc = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in outer(2):
        for _ in nl.dynamic_range(3):
            t = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], 1], [1, a.shape[1]]], scalar_offset=row))  # HERE
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
            nisa.register_load(row, nxt_sb.ap([[n, 1], [1, 1]], scalar_offset=row, indirect_dim=1))
    return _store(acc)


def chase_in_a_nest(a, nxt):
    return _chase(a, nxt, nl.dynamic_range)


def chase_under_a_static_loop(a, nxt):
    # the notes' workaround: a static outer loop; one dynamic loop carrying a value is no nest
    return _chase(a, nxt, nl.static_range)


def live_out_of_the_inner_loop(a, nxt):
    """An outer register updated inside the inner loop and read after that loop ends."""
    seven = _int_cell(7)
    count = nisa.register_alloc(0)
    cell = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    for _ in nl.dynamic_range(2):
        for _ in nl.dynamic_range(3):
            nisa.register_load(count, seven)
        nisa.register_store(cell, count)  # HERE
    return _store(cell)


def _data() -> tuple[np.ndarray, np.ndarray]:
    a = rng.standard_normal((8, 24)).astype(F32)
    nxt = np.array([[3, 6, 0, 5, 2, 1, 7, 4]], np.int32)
    return a, nxt


def _chase_ref(a: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    row, acc = 0, np.zeros((1, a.shape[1]), np.float64)
    for _ in range(6):
        acc += a[row]
        row = int(nxt[0, row])
    return acc


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("kernel", "ref"),
    [
        (chase_in_a_nest, _chase_ref),
        (live_out_of_the_inner_loop, lambda a, nxt: np.array([[7]], np.int32)),
    ],
)
def test_a_register_carried_in_a_nest_is_refused_at_its_read_where_listed(release, kernel, ref) -> None:
    a, nxt = _data()
    with versions.nki_version(release):
        if release in LISTING:
            with pytest.raises(KnownIssueError) as info:
                simulate(kernel)(a, nxt)
            assert info.value.rule == "nested-dynamic-range"
            assert "loop-carried" in str(info.value) and f"NKI {release}" in str(info.value)
            assert_reported_at(info.value, kernel if kernel is live_out_of_the_inner_loop else _chase)
        else:  # 0.3.0 lists no such issue: the nest runs and computes the chase
            np.testing.assert_allclose(simulate(kernel)(a, nxt), ref(a, nxt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("release", RELEASES)
def test_the_same_carried_register_under_a_static_outer_loop_runs(release) -> None:
    a, nxt = _data()
    with versions.nki_version(release):
        got = simulate(chase_under_a_static_loop)(a, nxt)
    np.testing.assert_allclose(got, _chase_ref(a, nxt), rtol=1e-5, atol=1e-5)  # float32 sums of 6 rows
