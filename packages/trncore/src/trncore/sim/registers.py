"""Virtual registers and register-driven loops: ``nisa.register_alloc/move/load/store``,
``nl.dynamic_range`` and ``while reg:`` (NKI language guide, "Dynamic Control Flow", and the
nki.isa register pages, NKI 0.3.0 / SDK 2.29).

On hardware these loops run on the engine sequencers and are not unrolled. The emulator runs the
kernel eagerly, so a register holds a concrete value when the trace reaches it: a
``dynamic_range`` over registers runs its body once per iteration and ``while reg:`` tests the
value. A register loaded from device data (``register_load``) makes the control flow depend on
that data, so such a program is not replayed: the next call traces again (the recorded
instruction list is only right for the data it was traced with). A trace without data (a cost
report from shapes) cannot know those values and raises NotImplementedError.

Rules checked at the kernel line: ``register_load``/``register_store`` move one 32-bit element
(a tensor of exactly one element in SBUF or HBM, at most 4 bytes wide); ``register_move`` takes
an int or a register; ``dynamic_range``'s step is a positive compile-time int; reading a
register that was never written is an error. Two Known Issues of the NKI release notes are
applied by target release (:mod:`trncore.sim.known_issues`): ``dynamic-range-index`` (0.3.0) and
``nested-dynamic-range`` (0.4.0-0.6.0: a register value carried across the iterations of a nest of
``dynamic_range`` loops, see :class:`_OpenLoop`); the loops and register tests are also the events that
``lnc2-control-flow`` (0.3.0) compares between the cores of an LNC=2 launch
(:mod:`trncore.sim.lnc_control`).
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from trncore.sim import context, dtypes, known_issues, lnc_control
from trncore.sim.errors import BufferError, LanguageError, ShapeError, site_suffix
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_instruction import dynamic_scope, refuse_in_no_reorder
from trncore.sim.nki_object import NKIObject
from trncore.sim.tensor import NkiTensor

__all__ = [
    "LOOP_EXIT",
    "IterationRegister",
    "ScalarInduction",
    "VirtualRegister",
    "dynamic_range",
    "loop_exit_error",
    "register_alloc",
    "register_load",
    "register_move",
    "register_store",
]


class _OpenLoop:
    """One running ``nl.dynamic_range`` loop, for the Known Issue ``nested-dynamic-range``.

    The NKI 0.4.0 release notes (Known Issues, carried forward by 0.5.0 and 0.6.0): "Nested
    ``nl.dynamic_range`` loops with loop-carried values fail to compile with a "Could not find
    register" error". The language guide (NKI 0.4.0-0.6.0) says that only ``nki.isa`` calls and
    ``dynamic_range`` loops survive specialization, and that a ``VirtualRegister`` "represents a
    scalar value stored in a hardware register": a loop body is specialized once, so the runtime
    values a loop can carry from one iteration to the next are register values (a tensor is
    memory, the same buffer in every iteration). A register write is stamped with the loops open
    at the write and their iterations (:func:`_stamp`); a read is of a carried value when one of
    those loops has moved to a later iteration or has ended since (:meth:`VirtualRegister.read`),
    and the issue applies when that loop is part of a nest (:attr:`nested`). Plain nested loops
    (accumulating into a tensor, reading registers written before the nest or earlier in the
    same iteration) are not the note's case and run.
    """

    __slots__ = ("closed", "iteration", "nested")

    def __init__(self, nested: bool) -> None:
        self.iteration = 0
        self.closed = False
        #: a dynamic_range was opened inside this one's body, or this one inside another's
        self.nested = nested


def _open_loops(ctx: Any) -> list[_OpenLoop]:
    """The running instance's open ``dynamic_range`` loops, outermost first. Kept per instance:
    the two cores of an LNC=2 launch share one context and take turns where they meet."""
    by_instance: dict[int, list[_OpenLoop]] = ctx.engine_state.setdefault("dynamic_loops", {})
    return by_instance.setdefault(ctx.program_id, [])


def _stamp() -> tuple[tuple[_OpenLoop, int], ...]:
    """The ``dynamic_range`` loops open now, each with its iteration (a register write's stamp)."""
    ctx = context.maybe_current()
    if ctx is None or not ctx.engine_state.get("dynamic_loops"):
        return ()
    return tuple((loop, loop.iteration) for loop in _open_loops(ctx))


class VirtualRegister(NKIObject):
    """A 32-bit engine-sequencer register (``nisa.register_alloc``)."""

    def __init__(self, value: int | float | None = None, from_data: bool = False) -> None:
        self.value = value
        self.from_data = from_data  # holds (or was copied from) a value read from device data
        #: the dynamic_range loops open at the last write, with their iterations (_OpenLoop)
        self.written_in: tuple[tuple[_OpenLoop, int], ...] = _stamp() if value is not None else ()

    def write(self, value: int | float, from_data: bool) -> None:
        """Set the register's value (``register_move`` / ``register_load``)."""
        self.value, self.from_data = value, from_data
        self.written_in = _stamp()

    def _check_carried(self, site: Any) -> None:
        """Apply ``nested-dynamic-range`` to a read of a value carried by a loop of a nest."""
        for loop, iteration in self.written_in:
            if loop.nested and (loop.closed or loop.iteration != iteration):
                when = "after it ended" if loop.closed else "in a later iteration"
                known_issues.check(
                    "nested-dynamic-range",
                    f"a register written inside a nested dynamic_range loop is read {when} "
                    "(a loop-carried value)",
                    site,
                )
                return

    def read(self, site: Any) -> int | float:
        """The register's value at this point of the trace (marks data-dependent control flow)."""
        if self.value is None:
            raise LanguageError("register-uninitialized", "a register is read before any "
                                "register_move/register_load wrote it", site)  # fmt: skip
        if self.written_in:
            self._check_carried(site)
        if self.from_data:
            ctx = context.current()
            ctx.engine_state["data_dependent"] = True
        return self.value

    def as_scalar_offset(self) -> int:
        """The register as an access pattern's ``scalar_offset``: its value at this point of the
        trace (NKI language guide, "Dynamic Control Flow", SDK 2.29 / NKI 0.3.0: a VirtualRegister
        can be "a scalar_offset in a tensor access pattern for dynamic indexing"). The view's
        bounds are checked where it is read or written, as for a static offset."""
        site = context.user_site()
        value = self.read(site)
        if isinstance(value, float) and not value.is_integer():
            raise LanguageError("register-offset", f"a register used as a scalar_offset holds "
                                f"{value!r}, not an integer", site)  # fmt: skip
        return int(value)

    def __bool__(self) -> bool:
        # `while reg:` — the guide's dynamic while loop: runs while the register is non-zero;
        # deprecated in NKI 0.6.0 (release notes: NKI warns, use nl.while_loop)
        from trncore.sim import versions

        site = context.user_site()
        versions.require("while reg:", site)
        taken = bool(self.read(site))
        lnc_control.record("test", taken, site)  # LNC=2: both cores must test alike (0.3.0)
        return taken

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value!r})"


def _check_register(reg: Any, op: str, what: str) -> VirtualRegister:
    if isinstance(reg, IterationRegister):
        return reg  # type: ignore[return-value]  # fori_loop's i: a register passed by value
    if isinstance(reg, LoopInduction):
        # AWS NKI Language Guide, "Dynamic Control Flow" (NKI 0.6.0): "The induction variable of
        # a dynamic_range loop is also a VirtualRegister, but it is frozen: you cannot write to
        # it with register_move or register_load"; reading it (register_store) is allowed
        site = context.user_site()
        if what == "dst":
            raise LanguageError("register-frozen", f"nisa.{op}: the nl.dynamic_range loop "
                                "variable is frozen; it cannot be written (AWS NKI Language "
                                "Guide, Dynamic Control Flow)", site)  # fmt: skip
        if isinstance(reg, ScalarInduction):  # 0.3.0: a scalar, not a register (Known Issue)
            known_issues.check("dynamic-range-index", f"the induction variable as nisa.{op} {what}", site)
        return VirtualRegister(int(reg))
    if not isinstance(reg, VirtualRegister):
        raise TypeError(f"nisa.{op}: {what} must be a register from nisa.register_alloc, got {reg!r}")
    return reg


def _check_scalar(t: Any, op: str, what: str, site: Any) -> NkiTensor:
    if not isinstance(t, NkiTensor):
        raise TypeError(f"nisa.{op}: {what} must be a tensor, got {t!r}{site_suffix(site)}")
    if t.size != 1:
        raise ShapeError(f"{op}-one-element", f"nisa.{op} {what} must hold exactly one element "
                         f"(shape [1] or [1, 1]), got {t.describe()}", site)  # fmt: skip
    if t.buffer.name == "psum":  # a buffer rule (nki.isa.register_load / _store: "HBM or SBUF")
        raise BufferError(f"{op}-buffer", f"nisa.{op} {what} must be in SBUF or HBM, got "
                         f"{t.describe()}", site)  # fmt: skip
    if dtypes.itemsize(t.dtype) > 4 or dtypes.is_packed(t.dtype):
        raise ShapeError(f"{op}-width", f"nisa.{op} moves one 32-bit value; {t.describe()} is "
                         "wider", site)  # fmt: skip
    return t


def _int32_immediate(value: Any, op: str, name: str) -> int:
    """An immediate for a register, which holds 32 bits (nki.isa.register_alloc, NKI 0.3.0 and
    0.6.0: "64x 32-bit registers per engine sequencer"); a ValueError at the kernel's line outside
    int32. AWS's front end reads the immediate as an Int32 (KLR 7ccd18c, ``KLR/Trace/FromNKI.lean``,
    ``FromNKI Immediate``: ``i.toInt32``), which wraps a larger value silently; no page gives such
    a value a meaning, so it is refused (docs/emulator.md, Readings chosen)."""
    lo, hi = dtypes.int_range(np.dtype(np.int32))
    if not lo <= int(value) <= hi:
        raise ValueError(
            f"nisa.{op}: {name}={value} does not fit a 32-bit register (int32: {lo} to {hi})"
            f"{site_suffix(context.user_site())}"
        )
    return int(value)


def register_alloc(x: Any = None) -> VirtualRegister:
    """A new register, uninitialized or holding the immediate int ``x``."""
    if x is not None and (isinstance(x, bool) or not isinstance(x, (int, np.integer))):
        raise TypeError(f"nisa.register_alloc: x must be an int or None, got {x!r}")
    return VirtualRegister(None if x is None else _int32_immediate(x, "register_alloc", "x"))


def register_move(dst: Any, src: Any) -> None:
    """``dst = src`` for an immediate int or another register."""
    dst = _check_register(dst, "register_move", "dst")
    if isinstance(src, VirtualRegister):
        dst.write(src.read(context.user_site()), src.from_data)
        return
    if isinstance(src, bool) or not isinstance(src, (int, np.integer)):
        raise TypeError(f"nisa.register_move: src must be an int or a register, got {src!r}")
    dst.write(_int32_immediate(src, "register_move", "src"), False)


def register_load(dst: Any, src: Any) -> None:
    """Load the one element of ``src`` (SBUF/HBM) into register ``dst``."""
    ctx, site = _begin()
    dst = _check_register(dst, "register_load", "dst")
    src = _check_scalar(src, "register_load", "src", site)
    if not ctx.execute:
        raise NotImplementedError("nisa.register_load in a trace without data (a report from "
                                  "shapes): the register's value is read from the device")  # fmt: skip
    operand = src.operand(site)
    ctx.emit("register_load", "sync", site, [src], [], lambda: None, {"bytes": 4})
    value = np.asarray(operand.read()).reshape(-1)[0]
    dst.write(int(value) if dtypes.is_int(src.dtype) else float(value), True)


class IterationRegister(int):
    """The register ``nl.fori_loop`` and ``nl.while_loop`` pass their body (the iteration value,
    the current condition). The nki.language.fori_loop page
    (NKI 0.6.0): "The body receives the current iteration value ``i`` as a VirtualRegister, passed
    by value. Read it inside the body (for example, as a ``scalar_offset`` into a tensor)", and
    "writing to ``i`` has no effect on the loop". The loop runs eagerly, so the value is known: it
    is an int (slices, arithmetic) that the register operations also take (``register_store(dst,
    src=i)``, ``register_move``, ``.ap(scalar_offset=i)``, and as their ``dst``:
    ``register_load(i, t)``). A value written into ``i`` is what later register reads of ``i`` in
    the same iteration see; Python arithmetic on ``i`` keeps the iteration value (an int cannot
    change), and the loop's next iteration is unaffected, as the page says."""

    #: a value written into the register by the body (``None``: still the iteration value)
    value: int | float | None = None
    #: the written value came from device data (as :attr:`VirtualRegister.from_data`)
    from_data: bool = False

    def read(self, site: Any) -> int | float:
        """The register's value, as :meth:`VirtualRegister.read`."""
        if self.value is None:
            return int(self)
        if self.from_data:
            context.current().engine_state["data_dependent"] = True
        return self.value

    def write(self, value: int | float, from_data: bool) -> None:
        """A value written into ``i`` by the body (``register_move`` / ``register_load``)."""
        self.value, self.from_data = value, from_data

    def as_scalar_offset(self) -> int:
        """The value as ``.ap(scalar_offset=i)`` (called by :meth:`trncore.sim.tensor.NkiTensor.ap`)."""
        if self.value is None:
            return int(self)
        return VirtualRegister.as_scalar_offset(self)  # type: ignore[arg-type]


def register_store(dst: Any, src: Any) -> None:
    """Store register ``src`` into the one element of ``dst`` (SBUF/HBM)."""
    ctx, site = _begin()
    src = _check_register(src, "register_store", "src")
    dst = _check_scalar(dst, "register_store", "dst", site)
    value = src.read(site)
    operand = dst.operand(site)
    name = dst.dtype

    def run() -> None:
        operand.write(dtypes.cast(np.array([value]), name))

    ctx.emit("register_store", "sync", site, [], [dst], run, {"bytes": 4})


_SIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class LoopInduction(int):
    """A ``dynamic_range`` induction variable: a device register, not a Python int.

    AWS NKI Dynamic Loops deep dive ("Hardware Lowering", the same text in the SDK 2.29 / NKI
    0.3.0 and SDK 2.32 / NKI 0.6.0 docs): "The loop variable is a device register, not a Python
    ``int``. You cannot use it in host-side Python expressions (e.g., ``if i == 0:``)". The loop
    runs eagerly here, so the value is an int (slice bounds, ``.ap(scalar_offset=i)``); a
    comparison or a truth test written in the kernel is refused at its line
    (``dynamic-range-host-expr``). The emulator's own code compares it freely.
    """

    __hash__ = int.__hash__

    def _host(self, other: Any, op: str, fn: Any) -> Any:
        if not sys._getframe(2).f_code.co_filename.startswith(_SIM_DIR):
            raise LanguageError(
                "dynamic-range-host-expr",
                f"the nl.dynamic_range loop variable is a device register, not a Python int: "
                f"'{op}' on it is a host-side expression (AWS NKI Dynamic Loops deep dive, "
                "NKI 0.3.0 / 0.6.0); use device-side operations, or a static_range loop",
                context.user_site(),
            )
        return fn(int(self), other)

    def __eq__(self, o: object) -> Any:
        return self._host(o, "==", int.__eq__)

    def __ne__(self, o: object) -> Any:
        return self._host(o, "!=", int.__ne__)

    def __lt__(self, o: Any) -> Any:
        return self._host(o, "<", int.__lt__)

    def __le__(self, o: Any) -> Any:
        return self._host(o, "<=", int.__le__)

    def __gt__(self, o: Any) -> Any:
        return self._host(o, ">", int.__gt__)

    def __ge__(self, o: Any) -> Any:
        return self._host(o, ">=", int.__ge__)

    def __bool__(self) -> bool:
        return bool(self._host(None, "truth test", lambda v, _o: v != 0))


class ScalarInduction(LoopInduction):
    """A ``dynamic_range`` induction variable under NKI 0.3.0: a scalar, not a register.

    The 0.3.0 notes list as a Known Issue (``dynamic-range-index``) that it cannot be a
    ``scalar_offset`` in access patterns or take part in arithmetic computing tile offsets; the
    arithmetic operators and ``.ap(scalar_offset=)`` apply that rule at the kernel's line
    (:func:`trncore.sim.known_issues.check`), then compute as ints. Plain use (a slice bound, a
    comparison) is unaffected. The 0.4.0 notes fix it (the variable became a register).
    """

    def _arith(self, other: Any, op: str, fn: Any) -> Any:
        # only the kernel's own arithmetic; the emulator's slicing code may add to an index
        if not sys._getframe(2).f_code.co_filename.startswith(_SIM_DIR):
            known_issues.check("dynamic-range-index", f"the induction variable in '{op}'")
        return fn(int(self), other)

    def as_scalar_offset(self) -> int:
        """Its value as ``.ap(scalar_offset=...)``: the 0.3.0 notes name that use too (called by
        :meth:`trncore.sim.tensor.NkiTensor.ap`)."""
        known_issues.check("dynamic-range-index", "the induction variable as .ap(scalar_offset=)")
        return int(self)

    def __add__(self, o: Any) -> Any:
        return self._arith(o, "+", int.__add__)

    def __radd__(self, o: Any) -> Any:
        return self._arith(o, "+", int.__radd__)

    def __sub__(self, o: Any) -> Any:
        return self._arith(o, "-", int.__sub__)

    def __rsub__(self, o: Any) -> Any:
        return self._arith(o, "-", int.__rsub__)

    def __mul__(self, o: Any) -> Any:
        return self._arith(o, "*", int.__mul__)

    def __rmul__(self, o: Any) -> Any:
        return self._arith(o, "*", int.__rmul__)

    def __floordiv__(self, o: Any) -> Any:
        return self._arith(o, "//", int.__floordiv__)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._arith(o, "//", int.__rfloordiv__)

    def __mod__(self, o: Any) -> Any:
        return self._arith(o, "%", int.__mod__)

    def __rmod__(self, o: Any) -> Any:
        return self._arith(o, "%", int.__rmod__)


def _loop(lo: int, hi: int, step: int, ctx: Any) -> Iterator[int]:
    """The iterations, keeping this loop on the instance's stack of open loops while its body
    runs (:class:`_OpenLoop`)."""
    scalar = known_issues.listed("dynamic-range-index")
    loops: list[_OpenLoop] = _open_loops(ctx) if ctx is not None else []
    this = _OpenLoop(nested=bool(loops))
    if loops:
        loops[-1].nested = True
    loops.append(this)
    try:
        for n, i in enumerate(builtins.range(lo, hi, step)):
            this.iteration = n
            with dynamic_scope("nl.dynamic_range"):  # each iteration: the loop body (depends_on)
                yield ScalarInduction(i) if scalar else LoopInduction(i)
    except GeneratorExit:
        # closed before its last iteration: the body left the loop (`break`, `return`; or an
        # exception, which propagates by itself). Noted here, refused when the trace ends
        # (:func:`loop_exit_error`): an error raised while Python closes the generator is lost.
        if ctx is not None:
            ctx.engine_state.setdefault(LOOP_EXIT, context.user_site())
        raise
    finally:
        this.closed = True
        loops.remove(this)


#: engine_state key: the kernel line that left an ``nl.dynamic_range`` loop early
LOOP_EXIT = "dynamic_range_exit"


def loop_exit_error(ctx: Any) -> LanguageError | None:
    """The error for a trace whose kernel left an ``nl.dynamic_range`` loop by ``break`` or
    ``return`` (None if none did), reported at that statement's line.

    The NKI language guide (NKI 0.3.0 and 0.6.0, "Dynamic Control Flow"): a dynamic loop "is not
    expanded by the compiler, but lowered to equivalent Trainium control-flow instructions" and
    "will execute its body ... 10 times" for ``dynamic_range(10)``; the body is compiled once, so
    a Python ``break`` / ``return`` in it has no device meaning. AWS's NKI front end refuses both
    ("break not allowed within dynamic loop", leanprover/KLR ``KLR/Trace/NKI.lean`` @7ccd18c).
    The emulator runs the loop eagerly, so it used to stop after the iteration that broke.
    ``continue`` (also refused by KLR) cannot be told from the end of the body here and runs: a
    compile-time condition skips the rest of every iteration's body alike.
    """
    site = ctx.engine_state.pop(LOOP_EXIT, None)
    if site is None:
        return None
    return LanguageError(
        "dynamic-loop-exit",
        "break or return inside an nl.dynamic_range loop: the loop is lowered to a device loop "
        "that runs its body for every iteration (NKI language guide, Dynamic Control Flow), so "
        "it cannot be left early from kernel Python; bound the loop instead (a register as "
        "stop, or nl.while_loop / a register while loop for a data-dependent exit)",
        site,
    )


def dynamic_range(start: Any, stop: Any = None, step: Any = 1) -> Iterator[int]:
    """``nl.dynamic_range``: a device loop whose bounds may be registers; runs eagerly here.

    Known Issues of the NKI release notes applied here (by target release): a register value
    carried across the iterations of a nest of these loops (``nested-dynamic-range``,
    0.4.0-0.6.0, at the line reading it; see :class:`_OpenLoop`), and arithmetic on the induction
    variable (``dynamic-range-index``, 0.3.0; see :class:`ScalarInduction`).
    """
    site = context.user_site()
    # the Dynamic Loops deep dive (NKI 0.3.0 / 0.6.0): step "Must be a compile-time positive
    # int"; start / stop "Python int literals or VirtualRegister objects" (a float is neither)
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or int(step) <= 0:
        raise LanguageError("dynamic-range-step", f"nl.dynamic_range step must be a positive "
                            f"compile-time int, got {step!r}", site)  # fmt: skip
    for what, v in (("start", start), ("stop", stop)):
        if isinstance(v, bool) or (v is not None and not isinstance(v, (VirtualRegister, int, np.integer))):
            raise LanguageError("dynamic-range-bound", f"nl.dynamic_range {what} must be an int "
                                f"or a VirtualRegister, got {v!r}", site)  # fmt: skip
    refuse_in_no_reorder("nl.dynamic_range", site)
    ctx = context.maybe_current()

    def bound(v: Any) -> int:
        return int(v.read(site)) if isinstance(v, VirtualRegister) else int(v)

    lo, hi = (0, bound(start)) if stop is None else (bound(start), bound(stop))
    lnc_control.record("nl.dynamic_range", len(builtins.range(lo, hi, int(step))), site)
    return _loop(lo, hi, int(step), ctx)
