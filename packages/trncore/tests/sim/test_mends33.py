"""Consistency mends (issue 13, session 33).

- ``trncore.sim.errors.warn_at``: every warning the emulator gives about a kernel line is
  reported at that line (its file and line number, the ``(at file:line)`` suffix of the rule
  errors), in the kernel's module (so ``-W`` filters by module see it), once per line under
  Python's "default" filter, as ``warnings.warn`` from the kernel's own code would be.
- ``nisa.memset`` of a whole-number float (``0.0``, ``np.float32(2.0)``) into an integer tile runs
  as that int with a warning quoting the NKI 0.3.0 update guide (AWS's NKI Library writes it);
  fractions, nan/inf, values outside the type, bools and non-numbers stay refused at the line.
- ``t.shape`` equals a list of the same ints (AWS's guides assert it so) and is still the tuple.
- ``select`` at a run-time index (an SBUF tensor or a register) reads that row, and both index
  kinds are refused alike (one shared set of checks).

Each valid form is checked against an independent reference (NumPy, Python's ``warnings``
semantics), and each invalid neighbour is refused at the kernel's line.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from typing import Any

import numpy as np
import pytest

from trncore.sim import clear_cache, nisa, nl
from trncore.sim.errors import (
    BoundsError,
    DtypeError,
    LanguageError,
    PartitionError,
    site_suffix,
    warn_at,
)
from trncore.sim.known_issues import KnownIssueWarning
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = [pytest.mark.simulator]

RNG = np.random.default_rng(33)
A = RNG.standard_normal((128, 64)).astype(np.float32)


def _stored(t: Any) -> Any:
    """``t`` copied to a new ``shared_hbm`` output, the kernel's result."""
    out = nl.ndarray(tuple(t.shape), t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ------------------------------------------------------------------ warn_at: the shared helper
def raw_engine_in_a_loop(a):
    # a raw integer engine (the NKI 0.3.0 update guide: no longer accepted; it runs, warned)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    for _ in range(3):
        nisa.memset(dst=t, value=1.0, engine=0)  # HERE
    return _stored(t)


def accumulate_on_unwritten(a):
    # nc_matmul(accumulate=True) onto PSUM no matmul wrote (nki.isa.nc_matmul, NKI 0.6.0: undefined)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    ps = nl.zeros((64, 64), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=True)  # HERE
    s = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=ps)
    return _stored(s)


def sin_out_of_range(a):
    # activation(op=nl.sin) outside [-pi, pi] (Supported Activation Functions, NKI 0.6.0)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.sin, data=t, scale=10.0)  # HERE
    return _stored(t)


def _recorded(kernel: Any, action: str) -> list[warnings.WarningMessage]:
    clear_cache()  # traced afresh (a replayed program does not warn again)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        run_kernel(kernel, [A], target="trn2")
    return [w for w in caught if w.filename == __file__]


@pytest.mark.parametrize(
    ("kernel", "text", "expected"),
    [
        (raw_engine_in_a_loop, "raw integer", np.ones((128, 64), np.float32)),
        (accumulate_on_unwritten, "accumulate=True", None),
        (sin_out_of_range, "outside [-pi, pi]", np.sin(10.0 * A)),
    ],
)
def test_a_warning_is_reported_at_the_kernel_line(kernel: Any, text: str, expected: Any) -> None:
    clear_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run_kernel(kernel, [A], target="trn2")
    line = marked_line(kernel, "# HERE")
    hits = [w for w in caught if text in str(w.message)]
    assert hits, [str(w.message) for w in caught]
    for w in hits:
        assert (w.filename, w.lineno) == (__file__, line)
        assert w.category is UserWarning
        assert str(w.message).endswith(f" (at {__file__}:{line})")
    if expected is not None:
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-6)


def test_a_warning_in_a_traced_loop_shows_once_under_the_default_filter() -> None:
    # Python's "default" action: once per text and line, as warnings.warn from the kernel would be
    assert len(_recorded(raw_engine_in_a_loop, "default")) == 1
    assert len(_recorded(raw_engine_in_a_loop, "always")) == 3


def test_a_warning_is_in_the_kernels_module_for_filters() -> None:
    # a filter naming the kernel's module (-W error::UserWarning:<module>) applies to it
    clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", category=UserWarning, module=__name__)
        with pytest.raises(UserWarning, match="raw integer"):
            run_kernel(raw_engine_in_a_loop, [A], target="trn2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", category=UserWarning, module="no_such_module")
        clear_cache()
        run_kernel(raw_engine_in_a_loop, [A], target="trn2")


def _warn_without_site() -> None:
    warn_at("no kernel here", None, KnownIssueWarning)


def test_without_a_site_it_warns_at_the_callers_caller() -> None:
    with pytest.warns(KnownIssueWarning, match="^no kernel here$") as record:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        _warn_without_site()
    assert [(w.filename, w.lineno) for w in record] == [(__file__, line)]


def test_with_a_site_the_category_and_suffix_are_kept() -> None:
    site = (__file__, 7)
    with pytest.warns(KnownIssueWarning) as record:
        warn_at("a known issue", site, KnownIssueWarning)
    assert [str(w.message) for w in record] == ["a known issue" + site_suffix(site)]
    assert [(w.filename, w.lineno) for w in record] == [site]
    assert sys.modules[__name__].__file__ == __file__


# ------------------------------------------------------------------ memset: a whole float into an int tile
# The NKI 0.3.0 update guide ("nisa.memset - Strict Type Matching"): the value "must match the
# destination tensor's dtype ... For integer-typed tensors, pass an integer literal"; AWS's NKI
# Library of the same release zeroes uint32 tiles with value=0.0 (cross_partition_copy). As for a
# raw integer enum value, the library's form runs, warned at the line with the guide's words.
def _memset_kernel(dtype: Any, value: Any, assign: bool = False) -> Any:
    def kernel(a):
        t = nl.ndarray((8, 16), dtype, buffer=nl.sbuf)
        if assign:
            t[...] = value  # ASSIGN
        else:
            nisa.memset(dst=t, value=value)  # MEMSET
        return _stored(t)

    return kernel


_NP = {nl.int8: np.int8, nl.int16: np.int16, nl.int32: np.int32, nl.uint8: np.uint8,
       nl.uint16: np.uint16, nl.uint32: np.uint32}  # fmt: skip
Z = np.zeros((8, 16), np.float32)


@pytest.mark.parametrize(
    ("dtype", "value", "want"),
    [(nl.uint32, 0.0, 0), (nl.int32, 3.0, 3), (nl.int32, np.float32(2.0), 2), (nl.int8, -128.0, -128),
     (nl.uint8, 255.0, 255), (nl.uint32, 4294967295.0, 4294967295), (nl.int16, -0.0, 0),
     (nl.uint16, np.float64(7.0), 7)],
)  # fmt: skip
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_whole_float_into_an_int_tile_runs_as_the_int_warned(
    target: str, dtype: Any, value: Any, want: int
) -> None:
    kernel = _memset_kernel(dtype, value)
    with pytest.warns(UserWarning, match="Strict Type Matching") as record:
        got = run_kernel(kernel, [Z], target=target)
    np.testing.assert_array_equal(got, np.full((8, 16), want, _NP[dtype]))
    assert np.asarray(got).dtype == _NP[dtype]
    line = marked_line(kernel, "# MEMSET")
    hits = [w for w in record if "Strict Type Matching" in str(w.message)]
    assert [(w.filename, w.lineno) for w in hits] == [(__file__, line)]
    assert f"pass value={want}" in str(hits[0].message)
    assert "must match the destination tensor's dtype" in str(hits[0].message)


def test_an_assignment_of_a_whole_float_into_an_int_tile_warns_at_the_assignment() -> None:
    # t[...] = 0.0 is a memset (the Beta-2 migration guide's assignment form)
    kernel = _memset_kernel(nl.int32, 0.0, assign=True)
    with pytest.warns(UserWarning, match="Strict Type Matching") as record:
        got = run_kernel(kernel, [Z], target="trn2")
    np.testing.assert_array_equal(got, np.zeros((8, 16), np.int32))
    assert [w.lineno for w in record if "Strict Type" in str(w.message)] == [marked_line(kernel, "# ASSIGN")]


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(nl.int32, 2), (nl.uint32, np.uint32(5)), (nl.float32, 2.0), (nl.float32, 0), (nl.bfloat16, 3.0)],
)
def test_an_int_into_an_int_tile_and_any_number_into_a_float_tile_do_not_warn(dtype: Any, value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_kernel(_memset_kernel(dtype, value), [Z], target="trn2")
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.full((8, 16), float(value)))


@pytest.mark.parametrize(
    ("dtype", "value", "text"),
    [(nl.int32, 0.5, "needs an int value, got 0.5"),
     (nl.uint32, np.float32(2.5), "needs an int value"),
     (nl.int32, float("nan"), "needs an int value, got nan"),
     (nl.int32, float("inf"), "needs an int value, got inf"),
     (nl.int16, -float("inf"), "needs an int value"),
     (nl.uint8, 256.0, "in [0, 255], got 256.0"),
     (nl.uint32, -1.0, "in [0, 4294967295], got -1.0"),
     (nl.int8, 128.0, "in [-128, 127], got 128.0"),
     (nl.int32, 2.0**31, "in [-2147483648, 2147483647]"),
     (nl.int32, True, "needs an int value, got True"),
     (nl.int32, np.bool_(False), "needs an int value"),
     (nl.int32, "0", "needs an int value, got '0'")],
)  # fmt: skip
def test_other_values_into_an_int_tile_are_refused_at_the_line(dtype: Any, value: Any, text: str) -> None:
    kernel = _memset_kernel(dtype, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not warned
        with pytest.raises(DtypeError) as exc:
            run_kernel(kernel, [Z], target="trn2")
    assert exc.value.rule == "memset-value-type"
    assert text in str(exc.value)
    assert_reported_at(exc.value, kernel, "# MEMSET")


# ------------------------------------------------------------------ t.shape compares with a list
# AWS's guides compare shapes with lists: the NKI 0.3.0 indexing overview (SDK 2.29, "Basic Tensor
# Indexing": `assert x[1].shape == [2, 2]`), the Access Patterns deep dive (`assert A.shape ==
# [512, 512]`), the performance guide (`in_tensor.shape == out_tensor.shape == [128, 1024]`).
def indexing_overview(a):
    # the guide's own assertions, traced on the emulator (an AssertionError fails the test)
    x = nl.ndarray((2, 2, 2), dtype=nl.float32, buffer=nl.hbm)
    assert x[1].shape == [2, 2]
    y = nl.ndarray((2, 128, 1024), dtype=nl.float32, buffer=nl.hbm)
    assert y[1, :, :].shape == [128, 1024]
    assert y[1, :, 0:512].shape == [128, 512]
    assert y[:, 1, 0:2].shape == [2, 2]
    assert a.shape == [512, 512]
    out = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
    assert t.shape == out.shape == [128, 1024]
    assert t.shape == (128, 1024) and [128, 1024] == t.shape and (128, 1024) == t.shape
    assert t.shape != [128, 512] and [1024, 128] != t.shape and t.shape != [128, 1024, 1]
    assert not (t.shape != [128, 1024]) and not (t.shape == [128.5, 1024])
    nisa.memset(dst=t, value=float(len(a.shape)))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_the_guides_list_comparisons_hold_in_a_kernel() -> None:
    got = run_kernel(indexing_overview, [np.zeros((512, 512), np.float32)], target="trn2")
    np.testing.assert_array_equal(got, np.full((128, 1024), 2.0, np.float32))


def test_a_wrong_list_fails_the_kernels_assertion() -> None:
    def kernel(a):
        assert a.shape == [512, 256]  # HERE
        return a

    with pytest.raises(AssertionError):
        run_kernel(kernel, [np.zeros((512, 512), np.float32)], target="trn2")


def _shape_of(dims: tuple[int, ...]) -> Any:
    captured: list[Any] = []

    def kernel(a):
        captured.append(a.shape)
        captured.append(a[0:2].shape)
        return a

    run_kernel(kernel, [np.zeros(dims, np.float32)], target="trn2")
    return captured


def test_a_shape_is_still_the_tuple_everywhere_else() -> None:
    shape, sliced = _shape_of((4, 6, 8))
    plain = (4, 6, 8)
    assert isinstance(shape, tuple) and shape == plain and plain == shape
    assert hash(shape) == hash(plain)
    assert {plain: "x"}[shape] == "x" and {shape: "y"}[plain] == "y"
    assert {shape, plain} == {plain}
    assert len(shape) == 3 and shape[0] == 4 and shape[-1] == 8 and list(shape) == [4, 6, 8]
    p, *free = shape
    assert (p, free) == (4, [6, 8])
    longer = shape + (2,)  # noqa: RUF005 (the concatenation is what is tested)
    assert longer == (4, 6, 8, 2) and type(longer) is tuple
    assert shape[1:] == (6, 8) and type(shape[1:]) is tuple
    assert shape < (5,) and shape > (4, 6) and sorted([shape, (1, 2)]) == [(1, 2), plain]
    assert repr(shape) == repr(plain) and str(shape) == str(plain)
    assert np.zeros(shape).shape == plain and np.empty(shape, np.int8).size == 192
    assert np.array_equal(np.array(shape), np.array(plain))
    assert sliced == [2, 6, 8] and sliced == (2, 6, 8) and sliced != [4, 6, 8]
    assert shape != [4, 6] and shape != "(4, 6, 8)" and shape != np.array(plain).tolist()[:2]
    with pytest.raises(TypeError):
        _ = shape < [5]  # ordering against a list stays the tuple's (a TypeError)


# ------------------------------------------------------------------ select at a run-time index
# nki.language.NkiTensor.select (NKI 0.5.0 and 0.6.0): an NkiTensor index "performs dynamic indirect
# selection where the index is resolved at runtime"; a VirtualRegister index reads as
# .ap(scalar_offset=reg) (docs/emulator.md, Readings chosen). Both share their checks: dim in range,
# one dynamic select per tensor, never the partition dim on chip, with the same messages.
def _select_kernel(kind: str, form: str) -> Any:
    def kernel(a, i):
        i_sb = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=i)
        index: Any = i_sb
        if kind == "register":
            index = nisa.register_alloc()
            nisa.register_load(index, i_sb)
        src = a
        if form == "partition":
            src = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=a)
        elif form == "twice":
            src = a.select(0, i_sb)
        dim = 3 if form == "dim" else 0
        v = src.select(dim, index)  # HERE
        return _stored(v)

    return kernel


SEL = RNG.standard_normal((6, 8, 4)).astype(np.float32)


@pytest.mark.parametrize("kind", ["tensor", "register"])
def test_select_at_a_runtime_index_reads_that_row(kind: str) -> None:
    for row in (0, 4, 5):
        got = run_kernel(_select_kernel(kind, "valid"), [SEL, np.array([[row]], np.int32)],
                         target="trn2", nki_version="0.6")  # fmt: skip
        np.testing.assert_array_equal(got, SEL[row])


@pytest.mark.parametrize(
    ("form", "error", "rule"),
    [("partition", PartitionError, "view-partition-dim"), ("twice", LanguageError, "select-indirect"),
     ("dim", BoundsError, "view-dim")],
)  # fmt: skip
def test_select_at_a_runtime_index_is_refused_alike_for_both_index_kinds(
    form: str, error: type[Exception], rule: str
) -> None:
    messages = []
    for kind in ("tensor", "register"):
        kernel = _select_kernel(kind, form)
        with pytest.raises(error) as exc:
            run_kernel(kernel, [SEL, np.array([[1]], np.int32)], target="trn2", nki_version="0.6")
        assert exc.value.rule == rule  # type: ignore[attr-defined]
        assert_reported_at(exc.value, kernel)
        messages.append(str(exc.value))
    assert messages[0] == messages[1]  # the same words and the same line
