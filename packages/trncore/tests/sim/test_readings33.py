"""Two readings decided in session 33 (issue 13): nested ``nl.dynamic_range`` loops and
``.ap(offset=N)`` on a view that has an offset of its own.

Nested dynamic loops. The NKI 0.4.0 release notes (Known Issues, carried forward by 0.5.0 and
0.6.0): "Nested ``nl.dynamic_range`` loops with loop-carried values fail to compile with a "Could
not find register" error". The emulator refuses exactly that under those releases: a register
value carried from one iteration of a loop of a nest to a later one, or out of it, at the line
that reads it. Plain nested loops run, and are checked against NumPy.

``.ap(offset=N)`` on a view with an offset of its own (``k[b].ap(pattern, offset=N)``). AWS's
SDK 2.31-2.32 texts differ: the ``NkiTensor.ap`` reference adds ``N`` to the view's offset
("offset=0 keeps the base, offset=N shifts by N additional elements"); the language guide and
the Access Patterns deep dive count it from the storage's start. The emulator follows the
reference (a public GDN prefill kernel, reported verified on a device, needs it; AWS's NKI Library
never writes the form) and warns at the line with the other reading's start.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import clear_cache, nisa, nl, simulate, versions
from trncore.sim.errors import BoundsError
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.testing import assert_reported_at, marked_line

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


def chase_per_core_meeting_each_iteration(a, nxt):
    """LNC=2: each core follows ``nxt`` from row ``core`` in one dynamic loop (a register carried
    across its iterations, not a nest) and the cores meet in every iteration: the other core's
    open loop must not count as an enclosing one."""
    me = nl.program_id(0)
    nxt_sb = nl.ndarray(nxt.shape, nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=nxt_sb, src=nxt)
    n, c = nxt.shape[1], a.shape[1]
    row = nisa.register_alloc(me)
    acc = nl.ndarray((1, c), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    out = nl.ndarray((2, c), a.dtype, buffer=nl.shared_hbm)
    for _ in nl.dynamic_range(3):
        t = nl.ndarray((1, c), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[c, 1], [1, c]], scalar_offset=row))
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.register_load(row, nxt_sb.ap([[n, 1], [1, 1]], scalar_offset=row, indirect_dim=1))
        nisa.core_barrier(data=out, cores=(0, 1))
    nisa.dma_copy(dst=out[me : me + 1, :], src=acc)
    return out


@pytest.mark.parametrize("release", LISTING)
def test_one_dynamic_loop_per_lnc2_core_carrying_a_register_runs(release) -> None:
    from trncore.sim.runner import run_kernel

    a, nxt = _data()
    want = np.zeros((2, a.shape[1]))
    for core in (0, 1):
        row = core
        for _ in range(3):
            want[core] += a[row]
            row = int(nxt[0, row])
    with versions.nki_version(release):
        got = run_kernel(chase_per_core_meeting_each_iteration, [a, nxt], target="trn2", lnc=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

# ------------------------------------------------------------------ .ap(offset=) on a view
G = 4  # rows per group


def groups_of_each_batch(x):
    """Group ``g`` of batch ``b`` through ``x[b].ap(pattern, offset=g * G * D)`` (the GDN prefill's
    load): ``out[b, g]`` is rows ``g*G .. g*G+G`` of ``x[b]`` under the reference's reading."""
    nb, s, d = x.shape
    out = nl.ndarray((nb, s // G, G, d), x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(nb):
        for g in nl.affine_range(s // G):
            t = nl.ndarray((G, d), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[b].ap(pattern=[[d, G], [1, d]], offset=g * G * d))  # HERE
            nisa.dma_copy(dst=out[b, g], src=t)
    return out


def groups_from_the_tensor_start(x):
    """The language guide's reading of the same offsets, written on the whole tensor (where both
    readings agree): every batch reads batch 0's groups."""
    nb, s, d = x.shape
    out = nl.ndarray((nb, s // G, G, d), x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(nb):
        for g in nl.affine_range(s // G):
            t = nl.ndarray((G, d), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap(pattern=[[d, G], [1, d]], offset=g * G * d))
            nisa.dma_copy(dst=out[b, g], src=t)
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_an_explicit_offset_on_a_batch_view_counts_from_the_view(release) -> None:
    x = rng.standard_normal((3, 12, 16)).astype(F32)
    want = x.reshape(3, 3, G, 16)  # out[b, g] = x[b, g*G:(g+1)*G]
    with versions.nki_version(release), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = simulate(groups_of_each_batch)(x)
    np.testing.assert_array_equal(got, want)
    lines = [w for w in caught if "NkiTensor.ap reference" in str(w.message)]
    # batches 1 and 2 (view offsets 192 and 384) part the readings, batch 0 does not
    assert len(lines) == 2 * 3 and all(w.lineno == marked_line(groups_of_each_batch) for w in lines)
    text = str(lines[0].message)
    assert "element 192 of its tensor" in text and "(element 0)" in text, text


def test_the_other_reading_is_batch_zero_written_on_the_whole_tensor_silently() -> None:
    # the start the warning names for the guide's reading, written where the texts agree
    x = rng.standard_normal((3, 12, 16)).astype(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = simulate(groups_from_the_tensor_start)(x)
    np.testing.assert_array_equal(got, np.broadcast_to(x[0].reshape(1, 3, G, 16), (3, 3, G, 16)))


def window_of_a_view(x, start, h, shift):
    """``n`` rows of ``x[h]`` from row ``start`` (a runtime value) plus ``shift`` rows."""
    d = x.shape[2]
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    t = nl.ndarray((G, d), x.dtype, buffer=nl.sbuf)
    view = x[h].ap(pattern=[[d, G], [1, d]], offset=shift * d, scalar_offset=s, indirect_dim=0)
    nisa.dma_copy(dst=t, src=view)
    return _store(t)


def test_an_explicit_offset_and_a_scalar_offset_on_a_view_both_count_in_the_view() -> None:
    # indirect_dim is "dimension in self.shape whose stride scales the indirect ... offset"
    # (the reference): the view's rows, as without an offset
    x = rng.standard_normal((3, 12, 16)).astype(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = simulate(window_of_a_view)(x, np.array([[3]], np.int32), 2, 1)
    np.testing.assert_array_equal(got, x[2, 4:8])


def past_the_last_batch(x):
    """The last batch's view plus one batch: inside the tensor under the guide's reading (batch
    ``nb - 1`` from the start), past its end under the emulator's."""
    nb, s, d = x.shape
    t = nl.ndarray((s, d), x.dtype, buffer=nl.sbuf)
    view = x[nb - 1].ap(pattern=[[d, s], [1, d]], offset=s * d)
    nisa.dma_copy(dst=t, src=view)  # HERE
    return _store(t)


def test_an_offset_carrying_a_view_past_its_tensor_is_reported_where_it_is_read() -> None:
    x = rng.standard_normal((3, 12, 16)).astype(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(BoundsError) as info:
            simulate(past_the_last_batch)(x)
    assert_reported_at(info.value, past_the_last_batch)
