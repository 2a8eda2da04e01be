"""The Python subset of the NKI compiler, checked in kernels and their helpers (trncore.sim.python_subset).

Each refused construct is written here once in a helper the kernel calls and, for several, in
the kernel itself, on the line marked ``# HERE``: the emulator must report it at that line, a
:class:`PythonSubsetWarning` naming the rule. Sources: the NKI 0.3.0 update guide and release
notes (``is`` / ``is not``: "write == / != instead"), AWS's NKI front end KLR
(``interop/klr/gather.c``, ``KLR/NKI/Simplify.lean`` at 7ccd18c) for the others. The accepted
neighbours (``x is None``, ``in``, ``f(*args)``, a plain ``for``, ``assert``...) are what AWS's
NKI Library writes in its kernels, which compile: they must stay silent. Results are compared
with NumPy (a copy), so a reported kernel still runs as Python runs it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from trncore.sim import clear_cache, nisa, nl, simulate, strict_mode
from trncore.sim import python_subset as ps
from trncore.sim.errors import LanguageError
from trncore.sim.python_subset import PythonSubsetWarning
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

COPY, OTHER = "copy", "b"
OLD = "0.3.0"  # (an inner def is accepted from NKI 0.6.0, whose fori_loop page writes one)
X = np.arange(32, dtype=np.float32).reshape(4, 8)


@pytest.fixture(autouse=True)
def _fresh_programs() -> None:
    """Reports are made while tracing: start each test without cached programs."""
    clear_cache()


def _copy(t: Any) -> None:
    nisa.tensor_copy(dst=t, src=t)


# ---- helpers, one refused construct each (the instruction comes after it) ----


def h_raise(t: Any, bad: bool = False) -> None:
    if bad:
        raise ValueError("never raised")  # HERE
    _copy(t)


def h_is(t: Any, flag: bool = True) -> None:
    if flag is True:  # HERE
        _copy(t)


def h_is_not(t: Any, mode: str = "a") -> None:
    if mode is not OTHER:  # HERE
        _copy(t)


def h_listcomp(t: Any) -> None:
    rows = [i for i in range(2)]  # HERE
    assert len(rows) == 2
    _copy(t)


def h_genexp(t: Any) -> None:
    total = sum(i for i in range(3))  # HERE
    assert total == 3
    _copy(t)


def h_dictcomp(t: Any) -> None:
    d = {str(i): i for i in range(2)}  # HERE
    assert d["1"] == 1
    _copy(t)


def h_lambda(t: Any) -> None:
    f = lambda v: v  # HERE  # noqa: E731
    f(t)
    _copy(t)


def h_nested_def(t: Any) -> None:
    def inner(v: Any) -> Any:  # HERE
        return v

    _copy(inner(t))


def h_nested_class(t: Any) -> None:
    class Inner:  # HERE
        pass

    assert Inner
    _copy(t)


def h_try(t: Any) -> None:
    try:  # HERE
        n = 1
    except KeyError:
        n = 0
    assert n == 1
    _copy(t)


def h_del(t: Any) -> None:
    scratch = 1
    del scratch  # HERE
    _copy(t)


def h_import(t: Any) -> None:
    import math  # HERE

    assert math.pi > 3
    _copy(t)


def h_for_else(t: Any) -> None:
    for _ in range(1):
        pass
    else:  # (the node's line is the for's)
        pass
    _copy(t)


def h_while_else(t: Any) -> None:
    n = 0
    while n < 1:  # HERE
        n += 1
    else:
        pass
    _copy(t)


def h_set(t: Any) -> None:
    s = {1, 2}  # HERE
    assert 1 in s
    _copy(t)


def h_walrus(t: Any) -> None:
    if (n := 2) > 1:  # HERE
        assert n == 2
    _copy(t)


def h_kwargs_call(t: Any) -> None:
    kw = {"t": t}
    _copy(**kw)  # HERE


def h_starred_tuple(t: Any) -> None:
    a = (1, 2)
    b = (*a, 3)  # HERE
    assert b == (1, 2, 3)
    _copy(t)


def h_format_spec(t: Any) -> None:
    assert t.shape[0] == 4, f"{t.shape[0]:04d} rows"  # HERE
    _copy(t)


def h_varargs(*ts: Any) -> None:  # HERE
    _copy(ts[0])


def h_with_as(t: Any) -> None:
    with warnings.catch_warnings() as w:  # HERE
        assert w is None
    _copy(t)


def h_global(t: Any) -> None:
    global X  # HERE
    assert X is not None
    _copy(t)


# (the for ... else node's line is the for's, so its marker sits there)
h_for_else.__doc__ = "for/else"

HELPERS: list[tuple[Callable[..., Any], str]] = [
    (h_raise, "python-raise"),
    (h_is, "python-is"),
    (h_is_not, "python-is"),
    (h_listcomp, "python-comprehension"),
    (h_genexp, "python-comprehension"),
    (h_dictcomp, "python-comprehension"),
    (h_lambda, "python-lambda"),
    (h_nested_def, "python-nested-def"),
    (h_nested_class, "python-nested-class"),
    (h_try, "python-try"),
    (h_del, "python-del"),
    (h_import, "python-import"),
    (h_while_else, "python-loop-else"),
    (h_set, "python-set"),
    (h_walrus, "python-walrus"),
    (h_kwargs_call, "python-kwargs-call"),
    (h_starred_tuple, "python-starred"),
    (h_format_spec, "python-format-spec"),
    (h_varargs, "python-varargs"),
    (h_with_as, "python-with"),
    (h_global, "python-global"),
]


def _kernel_calling(helper: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(x: Any) -> Any:
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        helper(t)
        nisa.dma_copy(dst=out, src=t)
        return out

    return kernel


def _reports(run: Callable[[], Any]) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run()
    return result, [w for w in caught if issubclass(w.category, PythonSubsetWarning)]


@pytest.mark.parametrize(("helper", "rule"), HELPERS, ids=[h.__name__ for h, _ in HELPERS])
def test_helper_construct_reported_at_its_line(helper: Callable[..., Any], rule: str) -> None:
    out, found = _reports(lambda: simulate(_kernel_calling(helper), nki_version=OLD)(X.copy()))
    np.testing.assert_array_equal(out, X)  # the kernel still runs as Python runs it
    line = marked_line(helper)
    assert [(w.filename, w.lineno) for w in found] == [(__file__, line)], [str(w.message) for w in found]
    text = str(found[0].message)
    assert f"[{rule}]" in text and f"{helper.__name__}()" in text and "Write " in text
    assert text.endswith(f"(at {__file__}:{line})")


def test_for_else_reported_at_the_for() -> None:
    _, found = _reports(lambda: simulate(_kernel_calling(h_for_else), nki_version=OLD)(X.copy()))
    line = marked_line(h_for_else, "for _ in range(1):")
    assert [(w.lineno, "[python-loop-else]" in str(w.message)) for w in found] == [(line, True)]


def test_evidence_named() -> None:
    """A page-backed rule names the page; a KLR-only one names KLR."""
    _, found = _reports(lambda: simulate(_kernel_calling(h_is))(X.copy()))
    assert "NKI 0.3.0 update guide" in str(found[0].message)
    _, found = _reports(lambda: simulate(_kernel_calling(h_try))(X.copy()))
    assert "KLR" in str(found[0].message)


# ---- kernels with the construct in their own body ----


def k_raise(x: Any) -> Any:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    if x.shape[0] > 128:
        raise ValueError("too many rows")  # HERE
    nisa.dma_copy(dst=out, src=x)
    return out


def k_is(x: Any, mode: str = COPY) -> Any:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    if mode is COPY:  # HERE
        nisa.dma_copy(dst=out, src=x)
    return out


def k_listcomp(x: Any) -> Any:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tiles = [nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf) for _ in range(2)]  # HERE
    nisa.dma_copy(dst=tiles[0], src=x)
    nisa.dma_copy(dst=out, src=tiles[0])
    return out


def k_nested_def(x: Any) -> Any:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)

    def move(dst: Any, src: Any) -> None:  # HERE
        nisa.dma_copy(dst=dst, src=src)

    move(out, x)
    return out


KERNELS = [(k_raise, "python-raise"), (k_is, "python-is"), (k_listcomp, "python-comprehension"),
           (k_nested_def, "python-nested-def")]  # fmt: skip


@pytest.mark.parametrize(("kernel", "rule"), KERNELS, ids=[k.__name__ for k, _ in KERNELS])
def test_kernel_construct_reported_at_its_line(kernel: Callable[..., Any], rule: str) -> None:
    out, found = _reports(lambda: simulate(kernel, nki_version=OLD)(X.copy()))
    np.testing.assert_array_equal(out, X)
    lines = [w.lineno for w in found if f"[{rule}]" in str(w.message)]
    assert lines == [marked_line(kernel)], [str(w.message) for w in found]
    assert all(w.filename == __file__ for w in found)


# ---- accepted neighbours: what AWS's NKI Library writes in kernel code ----


def h_accepted(t: Any, bias: Any = None, names: tuple[str, ...] = ("a", "b"), **opts: Any) -> None:
    if bias is None and opts.get("bias") is not None:
        return
    if None is not bias:
        return
    assert "a" in names and "c" not in names, f"names {names!r}"
    args = (t,)
    _copy(*args)
    for _ in range(1):
        continue
    table = {"k": (1, 2)}
    first, second = table["k"]
    assert first + second == 3 and not (first == second)


def k_accepted(x: Any, flag: bool = True) -> Any:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    if flag == True:  # noqa: E712  (the update guide's replacement for `is True`)
        nisa.dma_copy(dst=t, src=x)
    n = 0
    while n < 1:
        n += 1
    h_accepted(t)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("release", ["0.3.0", "0.6.0"])
def test_accepted_neighbours_silent(release: str) -> None:
    out, found = _reports(lambda: simulate(k_accepted, nki_version=release)(X.copy()))
    np.testing.assert_array_equal(out, X)
    assert found == [], [str(w.message) for w in found]


@pytest.mark.parametrize(("release", "reported"), [("0.3.0", True), ("0.5.0", True), ("0.6.0", False)])
def test_inner_def_accepted_from_0_6(release: str, reported: bool) -> None:
    """NKI 0.6.0's nki.language.fori_loop page and migration guide write the loop body as a
    ``def body(i):`` inside the kernel; KLR (before NKI 0.3.0) refuses an inner def."""
    out, found = _reports(lambda: simulate(k_nested_def, nki_version=release)(X.copy()))
    np.testing.assert_array_equal(out, X)
    assert [w.lineno for w in found] == ([marked_line(k_nested_def)] if reported else [])


def test_function_without_source_skipped() -> None:
    """A helper made by exec (no source to read) is not reported, nor does the check fail."""
    space: dict[str, Any] = {"_copy": _copy}
    exec("def h_exec(t):\n    if t is t:\n        _copy(t)\n", space)
    out, found = _reports(lambda: simulate(_kernel_calling(space["h_exec"]))(X.copy()))
    np.testing.assert_array_equal(out, X)
    assert found == []


# ---- strict mode: the page-backed rule is an error, KLR-only ones stay warnings ----


def test_strict_mode_refuses_is_at_its_line() -> None:
    with strict_mode(), pytest.raises(LanguageError) as info:
        simulate(k_is)(X.copy())
    assert info.value.rule == "python-is"
    assert (info.value.filename, info.value.lineno) == (__file__, marked_line(k_is))
    with strict_mode(), pytest.raises(LanguageError) as info:
        simulate(_kernel_calling(h_is))(X.copy())
    assert (info.value.filename, info.value.lineno) == (__file__, marked_line(h_is))


def test_strict_mode_keeps_klr_only_rules_warnings() -> None:
    with strict_mode():
        out, found = _reports(lambda: simulate(k_raise)(X.copy()))
    np.testing.assert_array_equal(out, X)
    assert [w.lineno for w in found] == [marked_line(k_raise)]


# ---- cost: a code object's source is read once per process ----


def test_source_read_once_per_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def h_once(t: Any) -> None:
        _copy(t)

    reads: list[Any] = []
    real = ps.inspect.getsourcelines

    def counting(obj: Any) -> Any:
        reads.append(obj)
        return real(obj)

    monkeypatch.setattr(ps.inspect, "getsourcelines", counting)
    kernel = _kernel_calling(h_once)
    for shape in ((4, 8), (2, 8), (4, 4)):  # three traces (three cache keys)
        clear_cache()
        simulate(kernel)(np.ones(shape, np.float32))
    codes = [c for c in reads if not callable(c)]  # (marked_line reads functions)
    # (the kernel's and _copy's code may have been read by an earlier test of this process)
    assert h_once.__code__ in codes and len(codes) == len(set(codes)), codes


def test_one_shot_program_reports_its_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that runs once (a cache budget of 0, as the conformance runner sets) is checked
    too: its kernel's first trace collects the helpers."""
    monkeypatch.setenv("TRNSCI_SIM_CACHE_MIB", "0")
    clear_cache()
    out, found = _reports(lambda: simulate(_kernel_calling(h_try))(X.copy()))
    np.testing.assert_array_equal(out, X)
    assert [w.lineno for w in found] == [marked_line(h_try)]
