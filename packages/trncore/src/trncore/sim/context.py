"""The trace context: the kernel call being traced, and where in the user's source it is.

Exactly one context is active while a kernel body runs. ISA calls made outside a kernel (with no
active context) raise, as they would on hardware where they only exist inside a compiled kernel.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "ScopedSetting",
    "adopt_thread_state",
    "current",
    "inherited_local",
    "maybe_current",
    "pins_site",
    "pop",
    "push",
    "thread_state",
    "user_site",
]

_SIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_state = threading.local()
_INHERITED: list[threading.local] = []


def inherited_local() -> threading.local:
    """A per-thread settings object that a launch's helper threads inherit from the launching thread.

    The target NKI release, the known-issues mode and the float-to-int cast mode are per thread (a
    scoped block in one thread must not change another's kernels), but the second logical core of
    an LNC=2 launch is traced in a thread of its own (trncore.sim.lnc) and must see the settings of
    the thread that launched the kernel: :func:`thread_state` / :func:`adopt_thread_state` carry
    them across.
    """
    local = threading.local()
    _INHERITED.append(local)
    return local


class ScopedSetting:
    """A per-thread setting made by nested ``with`` blocks: the innermost block's value wins.

    Inherited by a launch's helper threads like :func:`inherited_local`. Used for the target NKI
    release (``versions.nki_version``) and the known-issues mode (``known_issues.mode``).
    """

    def __init__(self) -> None:
        self._local = inherited_local()

    @contextlib.contextmanager
    def scope(self, value: Any) -> Iterator[Any]:
        """Inside the block (this thread), :meth:`innermost` is ``value``."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append(value)
        try:
            yield value
        finally:
            stack.pop()

    def innermost(self) -> Any:
        """The innermost open block's value, or None outside every block."""
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None


def thread_state() -> list[dict[str, Any]]:
    """A copy of this thread's inherited settings (lists, the scoped-block stacks, copied too)."""
    return [
        {k: list(v) if isinstance(v, list) else v for k, v in vars(local).items()}
        for local in _INHERITED
    ]


def adopt_thread_state(state: list[dict[str, Any]]) -> None:
    """Install settings taken by :func:`thread_state` in another thread into this one."""
    for local, values in zip(_INHERITED, state):
        vars(local).update(values)


#: The site of each (code object, instruction offset) asked for so far, by (identity of the
#: code, offset); the code object is kept with it, so an identity is never taken for a dead
#: code's. A frame's ``f_lineno`` is worked out by scanning the code's line table from its
#: start, which in a long kernel function (AWS's are hundreds of lines) costs microseconds, for
#: every instruction and allocation of every loop iteration at the same few offsets. Only
#: frames outside the package are entered (the kernel's own lines).
_LINES: dict[tuple[int, int], tuple[Any, tuple[str, int]]] = {}

#: Whether a module's ``__file__`` is in the package's directory, by the file name: every
#: frame of the walk asks, and a dictionary hit on the (hash-cached) string costs less than the
#: prefix test it remembers. Module files are few; the table is bounded all the same.
_OUR_FILES: dict[str, bool] = {}

#: While a kernel whose program may be cached is traced (:mod:`trncore.sim.cache_purity`): the
#: user's functions found on the stack under the kernel's instructions and allocations, as
#: {identity of the code: (code, its module globals)}. None when nothing collects them.
helper_sink: dict[int, tuple[Any, dict[str, Any]]] | None = None

#: The last (innermost code, its caller's frame, the caller's offset) walked by
#: :func:`_note_callers`: the same again (a helper calling the same function in a loop, an
#: instruction and the allocations of one call) has nothing new above it.
_helper_last: tuple[int, int, int] | None = None

#: The code found running at (identity of a frame's module globals, the frame's offset) in this
#: collection: a caller's code without ``frame.f_code``, whose audit event costs a Python call of
#: trncore.config's hook (two functions of one module calling at the same offset would be taken
#: for one: a helper missed, never one added).
_helper_codes: dict[tuple[int, int], Any] = {}


def collect_helpers(sink: dict[int, tuple[Any, dict[str, Any]]] | None) -> None:
    """Start (a dict) or stop (None) collecting the user's functions under the traced kernel."""
    global helper_sink, _helper_last
    helper_sink, _helper_last = sink, None
    _helper_codes.clear()


#: An object's identity without ``id()``: the default hash is the object's address (rotated),
#: the same for the object's lifetime and distinct between live objects. ``id()``, like
#: ``frame.f_code`` and ``sys._getframe``, raises an audit event (Python's audit hooks, PEP 578),
#: and a process with a Python-level audit hook (:mod:`trncore.config` installs one) pays a
#: Python call for each: up to seven per kernel line asked for, hundreds of thousands per trace.
_identity = object.__hash__


#: The kernel line of the ``nl.*`` call this thread is inside (:func:`pins_site`), if any.
_pins = threading.local()
_UNPINNED = object()


def pins_site(fn: Any) -> Any:
    """``fn`` (an ``nl.*`` function that issues further emulator calls, e.g. an allocation and an
    instruction) finding the kernel's line once: every :func:`user_site` inside it, on this
    thread, returns the line found on entry instead of walking the stack again. Only emulator
    code runs inside, so the innermost frame outside the package stays the same one."""

    @functools.wraps(fn)
    def pinned(*args: Any, **kwargs: Any) -> Any:
        pins = _pins
        if getattr(pins, "site", _UNPINNED) is not _UNPINNED:
            return fn(*args, **kwargs)  # inside another pinned call: its line stands
        pins.site = user_site()
        try:
            return fn(*args, **kwargs)
        finally:
            del pins.site

    return pinned


def user_site() -> tuple[str, int] | None:
    """(file, line) of the innermost stack frame outside ``trncore.sim``: the kernel's own line.

    A frame is inside ``trncore.sim`` when its code's file is in the package's directory. The
    emulator's own frames (every ISA call passes through three to five) are recognised by their
    module's ``__file__`` (``frame.f_globals``), which raises no audit event; only the frame
    found outside is asked for its code (its file, and the line). Code that a module of the
    package made with ``exec`` (a dataclass's ``__init__``) counts as the package's.
    """
    pinned = getattr(_pins, "site", _UNPINNED)
    if pinned is not _UNPINNED:
        return pinned  # type: ignore[return-value]
    frame: Any = sys._getframe(1)
    while frame is not None:
        module_file = frame.f_globals.get("__file__")
        if type(module_file) is str:
            ours = _OUR_FILES.get(module_file)
            if ours is None:
                if len(_OUR_FILES) > 4096:
                    _OUR_FILES.clear()  # bound the memory
                ours = _OUR_FILES[module_file] = module_file.startswith(_SIM_DIR)
            if ours:
                frame = frame.f_back
                continue
        code = frame.f_code
        key = (_identity(code), frame.f_lasti)
        known = _LINES.get(key)
        if known is not None and known[0] is code and sys.gettrace() is None:
            if helper_sink is not None:
                _note_callers(frame, code, helper_sink)
            return known[1]  # (only a code outside the package is remembered)
        filename = code.co_filename
        if filename.startswith(_SIM_DIR):  # (code compiled under the package's file name)
            frame = frame.f_back
            continue
        if helper_sink is not None:
            _note_callers(frame, code, helper_sink)
        if sys.gettrace() is not None:  # a tracer (a debugger) may set f_lineno itself
            return filename, frame.f_lineno
        site = (filename, frame.f_lineno)
        if len(_LINES) > 65536:
            _LINES.clear()  # bound the memory
        _LINES[key] = (code, site)
        return site
    return None


def _note_callers(frame: Any, code: Any, sink: dict[int, tuple[Any, dict[str, Any]]]) -> None:
    """Record in ``sink`` the user's functions on the stack from ``frame`` (the innermost frame
    outside the package, running ``code``) out to the first frame of the package (the launch)."""
    global _helper_last
    parent = frame.f_back
    ident = _identity(code)
    mark = (ident, _identity(parent), parent.f_lasti) if parent is not None else (ident, 0, -1)
    if mark == _helper_last:
        return
    _helper_last = mark
    if ident not in sink:
        sink[ident] = (code, frame.f_globals)  # (the code is kept: its identity stays its own)
    frame = parent
    while frame is not None:
        glb = frame.f_globals
        module_file = glb.get("__file__")
        if type(module_file) is str and module_file.startswith(_SIM_DIR):
            return
        where = (_identity(glb), frame.f_lasti)
        code = _helper_codes.get(where)
        if code is None:
            code = _helper_codes[where] = frame.f_code
        if code.co_filename.startswith(_SIM_DIR):
            return
        ident = _identity(code)
        if ident not in sink:
            sink[ident] = (code, glb)  # (the code is kept: its identity stays its own)
        frame = frame.f_back


def push(ctx: Any) -> None:
    """Make ``ctx`` the active trace context of this thread (entering a kernel body)."""
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(ctx)


def pop() -> None:
    """Deactivate the innermost trace context of this thread (leaving a kernel body)."""
    _state.stack.pop()


def maybe_current() -> Any:
    """The active trace context, or ``None`` outside a kernel (unlike :func:`current`, never raises)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def current() -> Any:
    """The active trace context; raises when an NKI call is made outside a kernel."""
    stack = getattr(_state, "stack", None)  # (maybe_current inlined: every instruction asks)
    if stack:
        return stack[-1]
    from trncore.sim.errors import site_suffix

    # the caller's line: an SDK 2.28 nki-library test builds a kernel's constants with NKI calls
    # on the host (thirtieth batch), and the error had named this file
    raise RuntimeError(
        "NKI language/ISA calls only run inside a kernel executed by the emulator "
        "(call the kernel through nki.jit, nki.simulate or trncore.sim)" + site_suffix(user_site())
    )
