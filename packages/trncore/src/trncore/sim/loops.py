"""``nl.fori_loop`` and ``nl.while_loop`` (NKI 0.6.0): structured loops, run eagerly.

On hardware both run at run time, driven by registers. The emulator runs the body once per
iteration while tracing, the way :mod:`trncore.sim.registers` runs a register ``dynamic_range``:

- with compile-time (Python int) bounds or condition the recorded program is the unrolled loop
  and replays bit-identically;
- a bound or condition held in a register (``nisa.register_alloc``) is read when the trace reaches
  the loop; a register loaded from device data (``nisa.register_load``) makes the program
  data-dependent, so the next call traces again (see :mod:`trncore.sim.registers`).

The body's ``i`` is an int that also serves as the induction register the fori_loop page
describes (:class:`trncore.sim.registers.IterationRegister`): ``.ap(scalar_offset=i)``,
``register_store(dst, src=i)``, ``register_load(i, t)``, slices. Both loops pass their register
by value, as the pages say: what the body writes into it does not steer the loop (while_loop's
next condition is the register the body returns). Anything else as a bound (a tensor, a float) is a TypeError
naming the argument. AWS pages: ``nki.language.fori_loop`` and ``nki.language.while_loop``
(NKI 0.6.0); the 0.6.0 release notes introduce them as the replacement of
``for i in nl.dynamic_range(...)`` and ``while reg:``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trncore.sim import context, lnc_control
from trncore.sim.isa_instruction import dynamic_scope, refuse_in_no_reorder
from trncore.sim.registers import IterationRegister, VirtualRegister

__all__ = ["MAX_WHILE_ITERATIONS", "fori_loop", "while_loop"]

#: A while_loop whose body never returns 0 stops here with an error.
MAX_WHILE_ITERATIONS = 1 << 20


def _value(value: Any, api: str, what: str) -> int:
    """A bound or condition as an int: a Python int, or a register's value at this point."""
    if isinstance(value, (VirtualRegister, IterationRegister)):
        v = value.read(context.user_site())
        if isinstance(v, float) and not v.is_integer():
            raise TypeError(f"{api}: the {what} register holds {v!r}, not an integer")
        return int(v)
    if isinstance(value, bool) or not isinstance(value, int):
        if hasattr(value, "__index__") and not hasattr(value, "alloc"):
            return int(value)
        raise TypeError(
            f"{api}: the {what} must be a Python int or a register (nisa.register_alloc), got "
            f"{type(value).__name__}"
        )
    return value


def _test(taken: bool, site: Any) -> bool:
    """A run-time condition test (an event of the cores' dynamic control flow under LNC=2)."""
    lnc_control.record("test", taken, site)
    return taken


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[int], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` (``step`` a positive constant;
    ``lower``/``upper`` ints or registers)."""
    if not callable(body_fun):
        raise TypeError(f"nl.fori_loop: body_fun must be callable, got {body_fun!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ValueError(f"nl.fori_loop: step must be a positive compile-time int, got {step!r}")
    refuse_in_no_reorder("nl.fori_loop", context.user_site())
    lo = _value(lower, "nl.fori_loop", "lower bound")
    hi = _value(upper, "nl.fori_loop", "upper bound")
    lnc_control.record("nl.fori_loop", len(range(lo, hi, step)), context.user_site())
    for i in range(lo, hi, step):
        with dynamic_scope("nl.fori_loop"):
            body_fun(IterationRegister(i))


def while_loop(init: Any, body_fun: Callable[[Any], Any]) -> None:
    """``r = init; while r != 0: r = body_fun(r)``; the condition an int or a register.

    The nki.language.while_loop page (NKI 0.6.0): "The body receives the current condition value
    ``r`` as a VirtualRegister, passed by value", and the next condition is the register the body
    returns. So each iteration's body gets a new register holding the condition's value (the body
    may ``register_load`` into it and return it; the caller's ``init`` register is not changed),
    also when ``init`` or the returned condition is a compile-time int. Like fori_loop's ``i`` it
    is an :class:`~trncore.sim.registers.IterationRegister`, so a body that counts down with
    Python arithmetic (``return r - 1``) also runs.
    """
    if not callable(body_fun):
        raise TypeError(f"nl.while_loop: body_fun must be callable, got {body_fun!r}")
    r = init
    count = 0
    site = context.user_site()
    refuse_in_no_reorder("nl.while_loop", site)
    while True:
        value = _value(r, "nl.while_loop", "condition" if count == 0 else
                       "condition returned by body_fun")  # fmt: skip
        if not _test(value != 0, site):
            break
        if count >= MAX_WHILE_ITERATIONS:
            raise RuntimeError(
                f"nl.while_loop: the condition was still nonzero after {MAX_WHILE_ITERATIONS} "
                "iterations (body_fun must return the next condition)"
            )
        with dynamic_scope("nl.while_loop"):
            r = body_fun(IterationRegister(value))
        count += 1
