"""The trace context: the kernel call being traced, and where in the user's source it is.

Exactly one context is active while a kernel body runs. ISA calls made outside a kernel (with no
active context) raise, as they would on hardware where they only exist inside a compiled kernel.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["current", "maybe_current", "pop", "push", "user_site"]

_SIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_state = threading.local()


def user_site() -> tuple[str, int] | None:
    """(file, line) of the innermost stack frame outside ``trncore.sim``: the kernel's own line."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SIM_DIR):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


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
    ctx = maybe_current()
    if ctx is None:
        raise RuntimeError(
            "NKI language/ISA calls only run inside a kernel executed by the emulator "
            "(call the kernel through nki.jit, nki.simulate or trncore.sim)"
        )
    return ctx
