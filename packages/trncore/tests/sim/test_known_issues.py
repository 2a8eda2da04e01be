"""Each NKI release's Known Issues as emulator rules (trncore.sim.known_issues).

For every issue the emulator refuses, a kernel written here hits it on the line marked
``# ISSUE``: it must raise :class:`KnownIssueError` naming that line under each release whose
notes list the issue, and run (matching NumPy) under the releases that do not. Its documented
workaround must run under every release. Numerical issues are checked against what the hardware
computes (``nl.copy``'s float32 path: NumPy's float32 rounding of the integer). Source: the Known
Issues of the NKI release notes, Neuron SDK 2.29-2.32 (NKI 0.3.0-0.6.0).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from trncore.sim import clear_cache, errors, nisa, nl, simulate, uninstall, versions
from trncore.sim import known_issues as K
from trncore.sim.known_issues import KnownIssueError, KnownIssueWarning
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS  # 0.3.0 ... 0.6.0
F32 = np.float32
rng = np.random.default_rng(20)


@pytest.fixture(autouse=True)
def _fresh_programs() -> None:
    """Warnings are issued while tracing: start each test without cached programs."""
    clear_cache()


under = versions.nki_version  # target NKI release ``version`` inside the block


def _out(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


# ------------------------------------------------------------------ kernels hitting an issue
def divide_tiles(a, b):
    x, y = nl.load(a), nl.load(b)
    return _out(nl.divide(x, y))  # ISSUE


def divide_workaround(a, b):
    x, y = nl.load(a), nl.load(b)
    return _out(nl.multiply(x, nl.reciprocal(y)))


def fmod_tiles(a, b):
    x, y = nl.load(a), nl.load(b)
    return _out(nl.fmod(x, y))  # ISSUE


def mod_workaround(a, b):
    # ours (AWS documents none): x - y * floor(x * (1 / y)), exact here as y is a power of two
    x, y = nl.load(a), nl.load(b)
    q = nl.floor(nl.multiply(x, nl.reciprocal(y)))
    return _out(nl.subtract(x, nl.multiply(y, q)))


def power_scalar(a, b):
    x = nl.load(a)
    return _out(nl.power(x, 2.0))  # ISSUE


def power_workaround(a, b):
    x, e = nl.load(a), nl.full(a.shape, 2.0, nl.float32, buffer=nl.sbuf)
    return _out(nl.power(x, e))


def add_broadcast(a, b):
    x, c = nl.load(a), nl.load(b[:, 0:1])
    return _out(nl.add(x, c))  # ISSUE


def subtract_column_from_corner(a, b):
    # the pattern public kernels written against AWS's simulator use: (1, 1) - (P, 1)
    corner, col = nl.load(a[0:1, 0:1]), nl.load(b[:, 0:1])
    return _out(nl.subtract(corner, col))  # ISSUE


def add_broadcast_workaround(a, b):
    x, c = nl.load(a), nl.load(b[:, 0:1])
    s = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=x, op0=nl.add, operand0=c)
    return _out(s)


def softmax_call(a, b):
    x = nl.load(a)
    return _out(nl.softmax(x, axis=1))  # ISSUE


def rms_norm_call(a, b):
    x, w = nl.load(a), nl.load(b)
    return _out(nl.rms_norm(x, w, axis=1, n=a.shape[1]))  # ISSUE


def softmax_workaround(a, b):
    x = nl.load(a)
    p = x.shape[0]
    neg_max = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=x, axis=1, negate=True)
    e = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=e, op=nl.exp, data=x, bias=neg_max, reduce_op=nl.add, reduce_res=total,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    r = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=total)
    s = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=e, op0=nl.multiply, operand0=r)
    return _out(s)


def random_seed_scalar(a, b):
    nl.random_seed(42)  # ISSUE
    return _out(nl.load(a))


def random_seed_workaround(a, b):
    nl.random_seed(nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf))
    return _out(nl.load(a))


def matmul_no_transpose_x(a, b):
    x, y = nl.load(a), nl.load(b)  # x is (M, K)
    prod = nl.matmul(x, y)  # ISSUE
    s = nl.ndarray(prod.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=prod)
    return _out(s)


def matmul_workaround(a, b):
    xt, y = nl.load_transpose2d(a), nl.load(b)  # x pre-arranged as (K, M)
    prod = nl.matmul(xt, y, transpose_x=True)
    s = nl.ndarray(prod.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=prod)
    return _out(s)


def store_psum(a, b):
    ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=3.0)
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=ps)  # ISSUE
    return out


def store_psum_workaround(a, b):
    ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=3.0)
    sb = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    return _out(sb)


def dynamic_index_arithmetic(a, b):
    # 0.3.0: the dynamic_range induction variable is a scalar, unusable in offset arithmetic
    x = nl.load(a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(2):
        off = i * 12  # ISSUE
        nl.store(out[:, off : off + 12], value=x[:, off : off + 12])
    return out


def dynamic_index_workaround(a, b):
    x = nl.load(a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        off = i * 12
        nl.store(out[:, off : off + 12], value=x[:, off : off + 12])
    return out


def dynamic_scalar_offset(a, b):
    # 0.3.0: nor can the induction variable be an access pattern's scalar_offset
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    row = [[a.shape[1], 1], [1, a.shape[1]]]  # one row; scalar_offset selects it (indirect_dim 0)
    for i in nl.dynamic_range(a.shape[0]):
        t = nl.load(a.ap(row, scalar_offset=i))  # ISSUE
        nl.store(out.ap(row, scalar_offset=i), value=t)
    return out


def dynamic_scalar_offset_workaround(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    row = [[a.shape[1], 1], [1, a.shape[1]]]
    for i in nl.affine_range(a.shape[0]):
        t = nl.load(a.ap(row, scalar_offset=i))
        nl.store(out.ap(row, scalar_offset=i), value=t)
    return out


def _nested_trips(a):
    # the inner loop's trip count is a register the inner loop sets for the next outer
    # iteration: 1 trip, then 5 (a value carried across the outer loop's iterations)
    x = nl.load(a)
    acc = nl.zeros(a.shape, a.dtype, buffer=nl.sbuf)
    five = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=five, value=5)
    trips = nisa.register_alloc(1)
    return x, acc, five, trips


def nested_dynamic(a, b):
    # 0.4.0-0.6.0: nested dynamic_range loops with a loop-carried value do not compile
    x, acc, five, trips = _nested_trips(a)
    for _ in nl.dynamic_range(2):
        for _ in nl.dynamic_range(trips):  # ISSUE
            nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
            nisa.register_load(trips, five)
    return _out(acc)


def nested_dynamic_workaround(a, b):
    x, acc, five, trips = _nested_trips(a)
    for _ in nl.static_range(2):
        for _ in nl.dynamic_range(trips):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
            nisa.register_load(trips, five)
    return _out(acc)


def _gather_inputs(a):
    src = nl.load(a)
    index = nl.ndarray((a.shape[0], 1), nl.uint16, buffer=nl.sbuf)
    nisa.memset(dst=index, value=8)  # every index: element 8 of each partition's row
    return src, index


def local_gather_elems(a, b):
    src, index = _gather_inputs(a)
    dst = nl.ndarray((a.shape[0], 32), nl.float32, buffer=nl.sbuf)  # sized for all 16 indices
    nisa.memset(dst=dst, value=0.0)
    nisa.local_gather(dst=dst, src_buffer=src, index=index, num_elem_per_idx=2, num_valid_indices=4)  # ISSUE
    return _out(dst[:, 0:8])


def local_gather_workaround(a, b):
    src, index = _gather_inputs(a)
    dst = nl.ndarray((a.shape[0], 8), nl.float32, buffer=nl.sbuf)  # 4 indices x 2 elements
    nisa.local_gather(dst=dst, src_buffer=src, index=index, num_elem_per_idx=2, num_valid_indices=4)
    return _out(dst)


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    a = rng.uniform(0.5, 4.0, (16, 24)).astype(F32)
    if name == "fmod":
        a = rng.uniform(-10.0, 10.0, (16, 24)).astype(F32)
        return a, np.full_like(a, 4.0)
    if name == "matmul":
        return rng.standard_normal((16, 32)).astype(F32), rng.standard_normal((32, 8)).astype(F32)
    return a, rng.uniform(0.5, 4.0, (16, 24)).astype(F32)


def _rms(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return a / np.sqrt((a.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * w


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


#: (rule, kernel hitting it, documented workaround, data, NumPy reference for both)
REFUSED = [
    ("nl-divide", divide_tiles, divide_workaround, "div", lambda a, b: a / b),
    ("nl-fmod-mod", fmod_tiles, mod_workaround, "fmod", lambda a, b: np.fmod(a, b)),
    ("nl-power-scalar", power_scalar, power_workaround, "pos", lambda a, b: a**2),
    ("nl-binary-broadcast", add_broadcast, add_broadcast_workaround, "pos",
     lambda a, b: a + b[:, 0:1]),
    ("nl-binary-broadcast", subtract_column_from_corner, None, "pos",
     lambda a, b: a[0:1, 0:1] - b[:, 0:1]),
    ("nl-softmax-rms-norm", softmax_call, softmax_workaround, "pos", lambda a, b: _softmax(a)),
    ("nl-softmax-rms-norm", rms_norm_call, None, "pos", _rms),
    ("nl-random-seed-scalar", random_seed_scalar, random_seed_workaround, "pos",
     lambda a, b: a),
    ("nl-matmul-transpose-x", matmul_no_transpose_x, matmul_workaround, "matmul",
     lambda a, b: a @ b),
    ("nl-store-psum", store_psum, store_psum_workaround, "pos", lambda a, b: np.full_like(a, 3)),
    ("dynamic-range-index", dynamic_index_arithmetic, dynamic_index_workaround, "pos",
     lambda a, b: a),
    ("dynamic-range-index", dynamic_scalar_offset, dynamic_scalar_offset_workaround, "pos",
     lambda a, b: a),
    ("nested-dynamic-range", nested_dynamic, nested_dynamic_workaround, "pos",
     lambda a, b: a + a + a + a + a + a),
    ("local-gather-elem-per-idx", local_gather_elems, local_gather_workaround, "pos",
     lambda a, b: np.tile(a[:, 8:10], 4)),
]
IDS = [k.__name__ for _, k, *_ in REFUSED]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("rule", "kernel", "workaround", "data", "ref"), REFUSED, ids=IDS)
def test_refused_under_listing_releases(release, rule, kernel, workaround, data, ref) -> None:
    a, b = _data(data)
    entry = K.issue(rule)
    assert entry.status == "refused"
    with under(release):
        if release in entry.releases:
            with pytest.raises(KnownIssueError) as info:
                simulate(kernel)(a, b)
            exc = info.value
            assert exc.rule == rule and exc.lineno == marked_line(kernel, "# ISSUE"), str(exc)
            text = str(exc)
            assert f"{os.path.basename(__file__)}:{exc.lineno}" in text
            assert f"NKI {release}" in text and "Known Issues" in text
            assert entry.workaround in text
        elif rule == "nl-store-psum":
            # not a known issue after 0.3.0, but nl.store's page still takes an SBUF tile and
            # nisa.dma_copy cannot read PSUM (0.3.0 breaking change): the DMA rule refuses it
            with pytest.raises(errors.BufferError) as binfo:
                simulate(kernel)(a, b)
            assert binfo.value.rule == "dma-no-psum"
            assert binfo.value.lineno == marked_line(kernel, "# ISSUE")
        else:
            np.testing.assert_allclose(simulate(kernel)(a, b), ref(a, b), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("rule", "kernel", "workaround", "data", "ref"),
    [r for r in REFUSED if r[2] is not None],
    ids=[i for i, r in zip(IDS, REFUSED) if r[2] is not None],
)
def test_workaround_accepted_everywhere(release, rule, kernel, workaround, data, ref) -> None:
    a, b = _data(data)
    with under(release):
        got = simulate(workaround)(a, b)
    expected = np.mod(a, b) if rule == "nl-fmod-mod" else ref(a, b)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)


# ------------------------------------------------------------------ computed as the hardware does
def copy_int(a):
    return _out(nl.copy(nl.load(a)))


def copy_psum(a):
    ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=5.0)
    cp = nl.copy(ps)
    sb = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=cp)
    flag = nl.full((a.shape[0], 1), 1.0 if cp.buffer is nl.sbuf else 0.0, nl.float32)
    return _out(sb), _out(flag)


def copy_psum_workaround(a):
    ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=5.0)
    sb = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    return _out(sb)


@pytest.mark.parametrize("release", RELEASES)
def test_copy_large_int_computed_as_hardware(release: str) -> None:
    values = np.array([[2**24 + 1, 2**30 + 3, -(2**25) - 1, 7]], dtype=np.int32)
    with under(release):
        got = simulate(copy_int)(values)
    if release in K.issue("nl-copy-fp32").releases:
        # the Scalar Engine's float32 path: the integer rounded to float32 and back
        expected = values.astype(np.float32).astype(np.int32)
        assert not np.array_equal(expected, values)
    else:
        expected = values  # 0.6.0: a Vector Engine tensor_copy, bit-exact
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("release", RELEASES)
def test_copy_of_psum_stays_in_psum_until_06(release: str) -> None:
    a = np.zeros((8, 16), F32)
    with under(release):
        values, on_sbuf = simulate(copy_psum)(a)
        np.testing.assert_array_equal(simulate(copy_psum_workaround)(a), np.full_like(a, 5.0))
    np.testing.assert_array_equal(values, np.full_like(a, 5.0))
    listed = release in K.issue("nl-copy-cross-buffer").releases
    assert bool(on_sbuf[0, 0]) is (not listed)


# ------------------------------------------------------------------ the switch
def test_warn_mode_runs_as_aws_simulator_with_a_warning() -> None:
    a, b = _data("div")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = simulate(divide_tiles, known_issues="warn")(a, b)
    np.testing.assert_allclose(got, a / b, rtol=1e-6)
    hits = [w for w in caught if issubclass(w.category, KnownIssueWarning)]
    assert len(hits) == 1 and "nl-divide" in str(hits[0].message)
    assert f":{marked_line(divide_tiles, '# ISSUE')}" in str(hits[0].message)


@pytest.mark.parametrize(
    ("kernel", "data", "ref"),
    [
        (add_broadcast, "pos", lambda a, b: a + b[:, 0:1]),
        (subtract_column_from_corner, "pos", lambda a, b: a[0:1, 0:1] - b[:, 0:1]),
        (matmul_no_transpose_x, "matmul", lambda a, b: a @ b),
        (power_scalar, "pos", lambda a, b: a**2),
        (fmod_tiles, "fmod", np.fmod),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_off_mode_computes_silently(kernel, data, ref) -> None:
    a, b = _data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with K.mode("off"):
            got = simulate(kernel)(a, b)
    np.testing.assert_allclose(got, ref(a, b), rtol=2e-6, atol=1e-5)


def test_environment_variable_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _data("pos")
    monkeypatch.setenv("TRNSCI_SIM_KNOWN_ISSUES", "warn")
    with pytest.warns(KnownIssueWarning, match="nl-power-scalar"):
        np.testing.assert_allclose(simulate(power_scalar)(a, b), a**2, rtol=1e-6)
    monkeypatch.setenv("TRNSCI_SIM_KNOWN_ISSUES", "lenient")
    with pytest.raises(ValueError, match="TRNSCI_SIM_KNOWN_ISSUES"):
        simulate(power_scalar)(a, b)
    monkeypatch.delenv("TRNSCI_SIM_KNOWN_ISSUES")
    with pytest.raises(ValueError, match="known_issues"):
        simulate(power_scalar, known_issues="maybe")
    with pytest.raises(KnownIssueError):
        simulate(power_scalar)(a, b)


def test_mode_is_part_of_the_kernel_key() -> None:
    """A program traced leniently is not replayed for a strict call, and the other way round."""
    a, b = _data("div")
    with pytest.raises(KnownIssueError):
        simulate(divide_tiles)(a, b)
    np.testing.assert_allclose(simulate(divide_tiles, known_issues="off")(a, b), a / b, rtol=1e-6)
    with pytest.raises(KnownIssueError):
        simulate(divide_tiles)(a, b)


# ------------------------------------------------------------------ the catalogue and its table
def test_catalogue_is_complete_and_consistent() -> None:
    rules = [k.rule for k in K.CATALOGUE]
    assert len(rules) == len(set(rules)) == 19
    for k in K.CATALOGUE:
        assert k.status in ("refused", "computed", "not emulated"), k.rule
        assert k.releases and set(k.releases) <= set(RELEASES), k.rule
        # releases listing an issue form one run: listed until the release that fixed it
        idx = [RELEASES.index(r) for r in k.releases]
        assert idx == list(range(idx[0], idx[-1] + 1)), k.rule
    tested = {r[0] for r in REFUSED} | {"nl-copy-fp32", "nl-copy-cross-buffer"}
    tested |= {"lnc2-control-flow"}  # test_known_issues_lnc.py
    tested |= {"kernel-cache-purity"}  # test_known_issues_cache.py
    tested |= {"reinterpret-cast-vector-select"}  # test_vector_select.py
    tested |= {"nl-rand-engine"}  # test_isa_random.py
    assert tested == {k.rule for k in K.CATALOGUE if k.status != "not emulated"}


def test_docs_table_lists_every_issue() -> None:
    root = Path(__file__).resolve().parents[4]
    text = (root / "docs" / "emulator-releases.md").read_text(encoding="utf-8")
    section = text[text.index("## Known issues per release") :]
    for k in K.CATALOGUE:
        row = next((line for line in section.splitlines() if f"`{k.rule}`" in line), None)
        assert row is not None, k.rule
        assert k.status in row, k.rule
        for r in k.releases:
            assert r in row, (k.rule, r)


def test_warning_points_at_the_kernel_line() -> None:
    a, b = _data("pos")
    with pytest.warns(KnownIssueWarning) as caught:
        simulate(power_scalar, known_issues="warn")(a, b)
    assert caught[0].filename == __file__
    assert caught[0].lineno == marked_line(power_scalar, "# ISSUE")


def test_release_from_argument_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules follow the target release however it is chosen (argument, variable)."""
    a, b = _data("pos")
    with pytest.raises(KnownIssueError, match=r"NKI 0\.3\.0 \(Neuron SDK 2\.29\)"):
        simulate(softmax_call, nki_version="0.3")(a, b)
    np.testing.assert_allclose(simulate(softmax_call, nki_version="0.4")(a, b), _softmax(a),
                               rtol=2e-6)
    monkeypatch.setenv("TRNSCI_NKI_VERSION", "0.3.0")
    with pytest.raises(KnownIssueError):
        simulate(softmax_call)(a, b)
    np.testing.assert_allclose(
        simulate(softmax_call, known_issues="off")(a, b), _softmax(a), rtol=2e-6
    )


def test_cli_switch(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from trncore.sim import cli

    src = tmp_path / "div_kernel.py"
    src.write_text(
        "import nki.language as nl\n\n\n"
        "def div(a, b):\n"
        "    q = nl.divide(nl.load(a), nl.load(b))\n"
        "    out = nl.ndarray(q.shape, q.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=q)\n"
        "    return out\n",
        encoding="utf-8",
    )
    argv = ["run", f"{src}::div", "--shapes", "8x16:float32,8x16:float32"]
    saved = {k: sys.modules.get(k) for k in ("nki", "nki.language", "nki.isa")}
    try:
        with pytest.raises(KnownIssueError) as info:
            cli.main(argv)
        assert info.value.filename == str(src) and info.value.lineno == 5
        with pytest.warns(KnownIssueWarning, match="nl-divide"):
            assert cli.main([*argv, "--known-issues", "warn"]) == 0
        assert "output[0]" in capsys.readouterr().out
    finally:  # the CLI installed the emulator as ``nki``: leave sys.modules as it was
        uninstall()
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def dynamic_index_plain(a, b):
    # the induction variable used directly, with no arithmetic in the kernel: fine in 0.3.0
    x = nl.load(a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(a.shape[1]):
        nl.store(out[:, i], value=x[:, i])
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_dynamic_range_index_without_arithmetic_runs(release: str) -> None:
    a, b = _data("pos")
    with under(release):
        np.testing.assert_array_equal(simulate(dynamic_index_plain)(a, b), a)
