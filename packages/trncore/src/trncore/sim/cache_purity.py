"""The kernel cache and the state a kernel reads besides its arguments (Known Issue
``kernel-cache-purity``).

The NKI 0.3.0 release notes (Known Issues, "Caching"): "NKI kernel caching assumes kernels are
pure functions of their input arguments. If a kernel's output depends on external state (such as
global variables or closures over mutable objects), the cache may return stale results. This is
undefined behavior." The 0.4.0 notes no longer list it.

The emulator's program cache is keyed like ``nki.jit``'s: by the kernel and its arguments
(:class:`trncore.keys.KernelKey`; plain values captured in closures are keyed too). What the key
cannot see is the *current value* of a module global the kernel reads, or the contents of a
mutable object (a list, a dict, an array) it captures. This module remembers those values when a
program is traced and compares them when the cached program is about to be replayed:

- under a release whose notes list the issue (0.3.0), a changed value is the hardware's stale
  cache: :func:`trncore.sim.known_issues.check` refuses it at the kernel line that reads the
  value (``error``), or the cached program is replayed, as the hardware's cache would run it,
  with a warning (``warn``) or silently (``off``): the result is the stale one;
- under the later releases the cached program is not used: the kernel is traced again with the
  new value (the result a pure re-evaluation gives, as AWS's simulator computes it).

What is compared: the names the kernel's own code (and functions defined inside it) loads as
globals, and its closure cells, whose values are plain data (numbers, strings, bytes, None,
NumPy arrays and scalars, and lists/tuples/dicts/sets of those); and the module globals of plain
data loaded by the helper functions the trace ran through: every function of the user's on the
stack under one of the kernel's instructions or allocations (:func:`trncore.sim.context.user_site`
records them while a trace collects). A public spectral solver's RK3 stage reads its stage
constants in such a helper and exports one kernel per stage in one process, changing them in
between. Modules, functions, classes and other objects are not compared; nor are a helper's
closure cells, the lists, dicts and sets it reads and the globals it assigns (a helper may keep
its own state there: its value before the trace is not known, so the trace's own change could
not be told from a stale one), nor the globals of a helper that returned before any instruction
of its own or of the functions it called.
"""

from __future__ import annotations

import dis
import hashlib
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from trncore.sim import context, known_issues

__all__ = ["abandon", "before_trace", "changed", "forget", "remember", "stale_replay"]

_RULE = "kernel-cache-purity"
_DEPTH = 4  # nesting levels of containers fingerprinted
_MAX_ITEMS = 65536  # larger containers are compared by identity only

#: Per code object: [(kind, name or cell index, line of its first load)], kind "global"/"cell".
_reads: dict[types.CodeType, list[tuple[str, Any, int]]] = {}
#: Per code object: the names of the globals it assigns.
_stores: dict[types.CodeType, frozenset[str]] = {}
#: Per program digest: {(kind, name): (fingerprint, short repr, where)} at trace time; ``where`` is
#: None for the kernel's own reads, else (module globals, name, site) of a helper's global.
_snapshots: dict[str, dict[tuple[str, Any], tuple[str, str, Any]]] = {}
_lock = threading.Lock()


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out.extend(_codes(const))
    return out


def _external_reads(fn: Any) -> list[tuple[str, Any, int]]:
    """The globals and closure cells ``fn``'s code loads, each with the line of its first load."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    return _external_reads_of(code)


def _external_reads_of(code: types.CodeType) -> list[tuple[str, Any, int]]:
    """The globals and closure cells ``code`` (and the code nested in it) loads, first lines."""
    found = _reads.get(code)
    if found is not None:
        return found
    first: dict[tuple[str, Any], int] = {}
    for sub in _codes(code):
        current = sub.co_firstlineno
        for ins in dis.get_instructions(sub):
            pos = getattr(ins, "positions", None)  # Python 3.11+
            if pos is not None and pos.lineno is not None:
                line = pos.lineno
            else:
                start = ins.starts_line  # an int on Python 3.10
                if isinstance(start, int) and not isinstance(start, bool):
                    current = start
                line = current
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                first.setdefault(("global", ins.argval), line)
            elif ins.opname == "LOAD_DEREF" and sub is code and ins.argval in code.co_freevars:
                first.setdefault(("cell", code.co_freevars.index(ins.argval)), line)
    found = sorted(((k, n, line) for (k, n), line in first.items()), key=lambda r: r[2])
    _reads[code] = found
    return found


def _helper_values(
    fn: Any, sink: dict[int, tuple[types.CodeType, dict[str, Any]]]
) -> dict[tuple[str, Any], tuple[str, str, Any]]:
    """The plain-data module globals the traced helpers load: {("helper", (module, name)):
    (fingerprint, repr, (globals, name, site))}. The kernel's own code is left to :func:`_values`."""
    own = set(_codes(fn.__code__)) if getattr(fn, "__code__", None) is not None else set()
    out: dict[tuple[str, Any], tuple[str, str, Any]] = {}
    for code, glb in sink.values():
        if code in own:
            continue
        written = _global_stores(code)
        for kind, name, line in _external_reads_of(code):
            if kind != "global" or name not in glb or name in written:
                continue
            key = ("helper", (glb.get("__name__"), name))
            if key in out:
                continue
            value = glb[name]
            if isinstance(value, (list, dict, set)):
                # (a helper may keep its own state in one, e.g. a count of its traces: the
                # value before the trace is not known, so a change could not be told apart)
                continue
            fp = _fingerprint(value)
            if fp is not None:
                out[key] = (fp, _short_repr(value), (glb, name, (code.co_filename, line)))
    return out


def _global_stores(code: types.CodeType) -> frozenset[str]:
    """The globals ``code`` (and the code nested in it) assigns: a helper's own state."""
    found = _stores.get(code)
    if found is None:
        found = _stores[code] = frozenset(
            ins.argval
            for sub in _codes(code)
            for ins in dis.get_instructions(sub)
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")
        )
    return found


def _short_repr(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fingerprint(value: Any, depth: int = 0) -> str | None:
    """A text that changes when plain data changes; None for values not compared."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, np.generic):
        return f"np.{value.dtype}:{value!r}"
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).view(np.uint8).reshape(-1).tobytes()
        return f"nd:{value.dtype}:{value.shape}:{hashlib.sha256(data).hexdigest()}"
    if not isinstance(value, (list, tuple, dict, set, frozenset)):
        return None
    if depth >= _DEPTH or len(value) > _MAX_ITEMS:
        return f"{type(value).__name__}@{id(value)}:{len(value)}"
    if isinstance(value, dict):
        items = sorted((repr(k), _fingerprint(v, depth + 1)) for k, v in value.items())
        return "dict{" + ",".join(f"{k}={v}" for k, v in items) + "}"
    parts = [_fingerprint(v, depth + 1) or "?" for v in value]
    if isinstance(value, (set, frozenset)):
        parts.sort()
    return f"{type(value).__name__}[" + ",".join(parts) + "]"


def _values(fn: Any) -> dict[tuple[str, Any], tuple[str, str, int]]:
    """The kernel's external plain data now: {(kind, name): (fingerprint, repr, line)}."""
    out: dict[tuple[str, Any], tuple[str, str, int]] = {}
    reads = _external_reads(fn)
    if not reads:
        return out
    glb = getattr(fn, "__globals__", {})
    cells = getattr(fn, "__closure__", None) or ()
    for kind, name, line in reads:
        if kind == "global":
            if name not in glb:
                continue
            value = glb[name]
            label = name
        else:
            try:
                value = cells[name].cell_contents
            except (IndexError, ValueError):
                continue
            label = fn.__code__.co_freevars[name]
        fp = _fingerprint(value)
        if fp is not None:
            out[(kind, label)] = (fp, _short_repr(value), line)
    return out


def before_trace(
    fn: Callable[..., Any], helpers: bool = True
) -> dict[tuple[str, Any], tuple[str, str, int]]:
    """The external plain data ``fn`` reads, just before it is traced (pass to :func:`remember`);
    with ``helpers``, from now until :func:`remember` or :func:`abandon`, the helpers the trace
    runs through are collected (:data:`trncore.sim.context.helper_sink`). A program that will run
    once and never be replayed (``helpers=False``) skips that walk over the stack, 3-8 % of its
    tracing: nothing it read can go stale."""
    context.collect_helpers({} if helpers else None)
    return _values(fn)


def abandon() -> None:
    """Stop collecting helpers (the trace begun after :func:`before_trace` failed)."""
    context.collect_helpers(None)


def remember(
    fn: Callable[..., Any], digest: str, before: dict[tuple[str, Any], tuple[str, str, int]]
) -> None:
    """Record the values the program ``digest`` was traced with. A value the trace itself changed
    (the kernel mutates it, e.g. a call counter) is not recorded: no single value was compiled in,
    and a later change is the kernel's own doing, not stale state. (A helper's globals are read
    after the trace: the helpers are known only then.)"""
    sink = context.helper_sink
    context.collect_helpers(None)
    after = _values(fn)
    kept: dict[tuple[str, Any], tuple[str, str, Any]] = {
        k: (fp, text, None) for k, (fp, text, _) in before.items() if after.get(k, ("",))[0] == fp
    }
    if sink:
        for k, entry in _helper_values(fn, sink).items():
            kept.setdefault(k, entry)
    with _lock:
        if kept:
            _snapshots[digest] = kept
        else:
            _snapshots.pop(digest, None)


def forget() -> None:
    """Drop every snapshot (the program cache was cleared)."""
    with _lock:
        _snapshots.clear()


def changed(fn: Callable[..., Any], digest: str) -> tuple[str, str, str, tuple[str, int]] | None:
    """The first external value that differs from its value at trace time, as
    ``(name, then, now, site)``; None if all are unchanged (or nothing was recorded)."""
    then = _snapshots.get(digest)
    if not then:
        return None
    now: dict[tuple[str, Any], tuple[str, str, int]] | None = None
    filename = fn.__code__.co_filename
    for key, (fp, text, where) in then.items():
        if where is not None:  # a helper's module global
            glb, name, site = where
            if name in glb:
                value = glb[name]
                cur_fp = _fingerprint(value)
                if cur_fp == fp:
                    continue
                now_text = _short_repr(value)
            else:
                now_text = "<gone>"
            return name, text, now_text, site
        if now is None:
            now = _values(fn)
        cur = now.get(key)
        if cur is None or cur[0] != fp:
            line = cur[2] if cur is not None else fn.__code__.co_firstlineno
            return key[1], text, (cur[1] if cur is not None else "<gone>"), (filename, line)
    return None


def stale_replay(fn: Callable[..., Any], digest: str) -> bool:
    """Whether the cached program ``digest`` may be replayed for this call.

    True when the kernel's external plain data is as traced, or when it changed under a release
    listing the issue and the mode lets the stale replay through (``warn``/``off``); raises
    :class:`trncore.sim.known_issues.KnownIssueError` in ``error`` mode. False when it changed
    under a release that does not list the issue: the caller traces again.
    """
    diff = changed(fn, digest)
    if diff is None:
        return True
    name, then, now, site = diff
    if not known_issues.listed(_RULE):
        return False
    known_issues.check(
        _RULE,
        f"{name} read here was {then} when the kernel was compiled and is {now} now; the "
        f"cached kernel still computes with {then}",
        site,
    )
    return True
