"""``nl.fori_loop`` and ``nl.while_loop`` (NKI 0.6.0): structured loops, emulated for constant bounds.

On hardware both run at run time, driven by registers. With compile-time (Python int) bounds the
emulator runs the body once per iteration at trace time, so the recorded program is the unrolled
loop and replays bit-identically; the body's ``i`` is then a plain int, usable wherever NKI
accepts the induction register (``.ap(scalar_offset=i)``, slices). Bounds held in registers are
not emulated here and raise ``NotImplementedError`` naming the API. AWS pages:
``nki.language.fori_loop`` and ``nki.language.while_loop`` (NKI 0.6.0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MAX_WHILE_ITERATIONS", "fori_loop", "while_loop"]

#: A constant-condition while_loop whose body never returns 0 stops here with an error.
MAX_WHILE_ITERATIONS = 1 << 20


def _static(value: Any, api: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if hasattr(value, "__index__") and not hasattr(value, "alloc"):
            return int(value)
        raise NotImplementedError(
            f"{api} with a {what} of type {type(value).__name__} (a register or tensor) is not "
            "emulated by trncore.sim; pass a Python int"
        )
    return value


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[int], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` (``step`` a positive constant)."""
    if not callable(body_fun):
        raise TypeError(f"nl.fori_loop: body_fun must be callable, got {body_fun!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ValueError(f"nl.fori_loop: step must be a positive compile-time int, got {step!r}")
    lo = _static(lower, "nl.fori_loop", "lower bound")
    hi = _static(upper, "nl.fori_loop", "upper bound")
    for i in range(lo, hi, step):
        body_fun(i)


def while_loop(init: Any, body_fun: Callable[[Any], Any]) -> None:
    """``r = init; while r != 0: r = body_fun(r)`` for a constant (int) condition."""
    if not callable(body_fun):
        raise TypeError(f"nl.while_loop: body_fun must be callable, got {body_fun!r}")
    r = _static(init, "nl.while_loop", "condition")
    count = 0
    while r != 0:
        if count >= MAX_WHILE_ITERATIONS:
            raise RuntimeError(
                f"nl.while_loop: the condition was still nonzero after {MAX_WHILE_ITERATIONS} "
                "iterations (body_fun must return the next condition)"
            )
        r = _static(body_fun(r), "nl.while_loop", "condition returned by body_fun")
        count += 1
