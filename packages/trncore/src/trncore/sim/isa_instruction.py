"""``nisa.NkiInstruction``: the handle an ``nki.isa`` call returns, and its ``depends_on`` edges.

AWS NKI docs, nki.isa (NKI 0.6.0 / SDK 2.32), class ``NkiInstruction``: ISA operations return an
opaque handle to the traced instruction; ``consumer.depends_on(*producers)`` adds scheduling
dependencies (the consumer runs after every producer completes) and returns the consumer, so
calls chain. The page's rule: an edge lowers to a semaphore wait fixed at compile time, so both
instructions sit at the same dynamic-loop nesting, or the producer in an enclosing scope; no edge
may be wired into or out of a dynamic loop (``nl.fori_loop`` / ``nl.while_loop``); static Python
loops are unrolled and do not count.

Emulation: :func:`returning_handle` wraps each ``nisa`` instruction (in :mod:`trncore.sim.modules`)
so that a call that recorded instructions returns a handle to them (calls that return a value,
such as ``register_alloc``, are unchanged). The emulator runs instructions in program order, so
every producer has already run when ``depends_on`` is called; the edge is checked (the release,
the argument types, one kernel instance, no self edge, the loop-nesting rule) and recorded on the
consumer's instructions (``meta["after"]``), where the modelled schedule
(:mod:`trncore.sim.schedule`) makes the consumer wait for the producer. Dynamic-loop scopes are
counted by :func:`dynamic_scope`, entered by ``nl.fori_loop``, ``nl.while_loop`` and
``nl.dynamic_range`` once per iteration (each iteration of the emulator's eager loop is the
loop body of the hardware: an edge from one iteration to the next is an edge into the loop).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from trncore.sim import checks, context, from_nki_0_2
from trncore.sim.errors import LanguageError, site_suffix

__all__ = ["NO_REORDER_DEPTH", "NkiInstruction", "dynamic_scope", "refuse_in_no_reorder", "returning_handle"]

_SCOPE = "dynamic_scope"
_COUNTER = "dynamic_scope_count"
#: ``engine_state`` key: how many ``nl.no_reorder()`` blocks the trace is inside.
NO_REORDER_DEPTH = "no_reorder_depth"


def refuse_in_no_reorder(kind: str, site: Any) -> None:
    """A dynamic loop (``kind``: its API) opened inside an ``nl.no_reorder()`` block is refused at
    its line: nki.language.no_reorder, NKI 0.3.0: "Dynamic loops (``nl.dynamic_range``) are not
    supported inside a ``no_reorder`` block"; NKI 0.6.0: "Register-based dynamic loops
    (``nl.fori_loop``, ``nl.while_loop``) are not supported inside a ``no_reorder`` block" (from
    NKI 0.4.0 ``dynamic_range`` is register-based too). Static loops are allowed."""
    ctx = context.maybe_current()
    if ctx is not None and ctx.engine_state.get(NO_REORDER_DEPTH, 0) > 0:
        raise LanguageError(
            "no-reorder-dynamic-loop",
            f"{kind} inside an nl.no_reorder() block: dynamic loops are not supported there "
            "(nki.language.no_reorder); use a static loop (range / nl.static_range) or move "
            "the loop out of the block",
            site,
        )


@contextlib.contextmanager
def dynamic_scope(kind: str) -> Iterator[None]:
    """One iteration of a dynamic loop (``kind``: its API) in the current trace."""
    ctx = context.maybe_current()
    if ctx is None:
        yield
        return
    state = ctx.engine_state
    state[_COUNTER] = count = state.get(_COUNTER, 0) + 1
    outer = state.get(_SCOPE, ())
    state[_SCOPE] = (*outer, (kind, count))
    try:
        yield
    finally:
        state[_SCOPE] = outer


def ran_dynamic_loop(engine_state: dict[str, Any]) -> bool:
    """Whether the trace whose ``engine_state`` this is ran an iteration of a dynamic loop."""
    return bool(engine_state.get(_COUNTER, 0))


def _scope_text(scope: tuple[tuple[str, int], ...]) -> str:
    return " > ".join(f"{kind} #{n}" for kind, n in scope) or "the kernel's top level"


class NkiInstruction:
    """Opaque handle to the instruction(s) one ``nisa`` call recorded (NKI 0.6.0)."""

    __slots__ = ("_ctx", "_core", "_first", "_end", "_scope", "_site", "_op")

    def __init__(self, ctx: Any, first: int, end: int, site: Any, op: str) -> None:
        self._ctx = ctx
        self._core = ctx.program_id  # (an int on every trace context)
        self._first, self._end = first, end
        self._scope: tuple[tuple[str, int], ...] = ctx.engine_state.get(_SCOPE, ())
        self._site = site
        self._op = op

    def __repr__(self) -> str:
        where = f" at {self._site[0]}:{self._site[1]}" if self._site else ""
        return f"NkiInstruction({self._op}{where})"

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        """This instruction runs after every one of ``producers`` completes; returns ``self``."""
        from trncore.sim import versions

        site = context.user_site()
        versions.require("nisa.NkiInstruction.depends_on", site)
        for k, p in enumerate(producers):
            if not isinstance(p, NkiInstruction):
                raise TypeError(f"NkiInstruction.depends_on: producer {k} must be an NkiInstruction "
                                f"(what an nki.isa call returns), got {type(p).__name__}")  # fmt: skip
            if p._ctx is not self._ctx or p._core != self._core:
                raise LanguageError("depends-on-kernel", f"{self!r} cannot depend on {p!r}: it "
                                    "belongs to another kernel instance", site)  # fmt: skip
            if p is self or p._first == self._first:
                raise LanguageError("depends-on-cycle", f"{self!r} cannot depend on itself", site)
            if p._first > self._first:
                raise NotImplementedError(
                    f"NkiInstruction.depends_on: {self!r} on {p!r}, traced after it: trncore.sim "
                    "runs instructions in program order and cannot wait for a later one"
                )
            if self._scope[: len(p._scope)] != p._scope:
                raise LanguageError(
                    "depends-on-dynamic-loop",
                    f"{self!r} (in {_scope_text(self._scope)}) cannot depend on {p!r} (in "
                    f"{_scope_text(p._scope)}): an edge cannot go into or out of a dynamic loop "
                    "(nl.fori_loop / nl.while_loop / nl.dynamic_range); the producer must be at "
                    "the same dynamic-loop nesting or in an enclosing scope",
                    site,
                )
        instrs = self._ctx.instrs
        after = tuple(pos for p in producers for pos in range(p._first, p._end))
        for pos in range(self._first, self._end):
            ins = instrs[pos]
            ins.meta = {**ins.meta, "after": tuple(ins.meta.get("after", ())) + after}
        return self


def _signature_error(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: TypeError,
    namespace: str = "nisa",
) -> Exception | None:
    """A TypeError naming the instruction's parameters and the kernel's line when the call does
    not match the instruction's signature (Python's own message names neither; a parameter of
    another API, such as ``tensor_copy(dtype=...)``, is a common slip), else None. A parameter of
    NKI 0.2.0 that 0.3.0 removed is a ``VersionError`` saying what to write instead, and an API
    whose argument order 0.3.0 changed says so (:mod:`trncore.sim.from_nki_0_2`)."""
    signature = inspect.signature(fn)
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        pass
    else:  # the call binds: an operand check refused it
        return _shifted_operand_error(fn, signature, args, kwargs, exc)
    api = f"{namespace}.{fn.__name__}"
    site = context.user_site()
    removed = from_nki_0_2.removed_parameter_error(api, kwargs, site)
    if removed is not None:
        return removed
    names = ", ".join(signature.parameters)
    shown = "nki.isa" if namespace == "nisa" else namespace
    return TypeError(
        f"{shown}.{fn.__name__}: {exc}; its parameters are ({names})"
        f"{_missing_dst_hint(fn.__name__, signature, args, kwargs)}"
        f"{_mask_hint(signature, kwargs)}{from_nki_0_2.order_hint(api)}{site_suffix(site)}"
    )


def _mask_hint(signature: inspect.Signature, kwargs: dict[str, Any]) -> str:
    """NKI Beta 1's ``mask=`` (``nl.load(x[i_p, i_f], mask=(i_p < n))``, AWS's older tutorials, the
    examples of AWS's NKI front end's tests): the NKI Beta 2 migration guide, "Deprecation of
    masking", removed it; NKI 0.3.0-0.6.0 signatures have no such parameter."""
    if "mask" not in kwargs or "mask" in signature.parameters:
        return ""
    return (
        "; mask= is NKI Beta 1's, removed in Beta 2 (NKI Beta 2 migration guide, Deprecation of "
        "masking): index the tile that is in range instead (a slice or nl.ds of the valid size)"
    )


def _shifted_operand_error(
    fn: Callable[..., Any],
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: TypeError,
) -> TypeError | None:
    """The Beta 1 value-returning form with enough positional arguments to bind: its operands
    land one parameter early and the instruction's operand check refuses the second, ``dst``
    holding the first (``nisa.tensor_scalar(tile, np.multiply, 5.0, False, np.subtract, 1.0,
    False)``, the evaluation kernels of AWS's NKI front end, leanprover/KLR
    ``interop/test/eval/kernels.py``): that refusal with :func:`_shifted_dst_hint`, else None.
    Recognised only when the message is about the parameter after ``dst``."""
    params = list(signature.parameters)
    if len(args) < 2 or len(params) < 2 or params[0] != "dst" or "dst" in kwargs:
        return None
    text = str(exc)
    if not text.startswith(f"{fn.__name__}: {params[1]} must be"):
        return None
    hint = _shifted_dst_hint(fn.__name__, signature, args, kwargs)
    if not hint:
        return None
    return TypeError(f"nki.isa.{_before_site(text, hint)}")


def _beta1_hinted(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], exc: TypeError
) -> TypeError:
    """A refused bool switch (:func:`trncore.sim.checks.check_bool_arguments`) with
    :func:`_shifted_dst_hint` when the call is Beta 1's value-returning form: positional, and the
    argument after ``dst`` not a tile (``nisa.tensor_scalar(tile, np.multiply, 5.0, False,
    np.subtract, 1.0, False)`` puts an operator where ``reverse0`` is), else ``exc`` itself."""
    if len(args) < 2 or hasattr(args[1], "shape"):
        return exc
    hint = _shifted_dst_hint(fn.__name__, inspect.signature(fn), args, kwargs)
    if not hint:
        return exc
    return TypeError(_before_site(str(exc), hint))


def _before_site(text: str, hint: str) -> str:
    """``text`` (a refusal's message) with ``hint`` put before its kernel-line suffix, if any."""
    suffix = site_suffix(context.user_site())
    if suffix and text.endswith(suffix):
        text = text[: -len(suffix)]
    return f"{text}{hint}{suffix}"


def signature_checked(fn: Callable[..., Any], namespace: str) -> Callable[..., Any]:
    """``fn`` (an API of ``namespace``, e.g. ``nki.collectives``) raising :func:`_signature_error`
    when a call does not match its signature, as the ``nisa`` instructions do."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            better = _signature_error(fn, args, kwargs, exc, namespace)
            if better is None:
                raise
            raise better from None

    return call


def _missing_dst_hint(
    name: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """Why an output parameter is missing, when one is: the value-returning form
    ``out[...] = nisa.nc_matmul(stationary=..., moving=...)`` of NKI Beta 1. NKI Beta 2 migration
    guide (NKI 0.2.0, kept by the 0.3.0-0.6.0 pages): "all of the ISA functions now require a
    ``dst`` parameter instead of returning a result"."""
    missing = [
        p.name
        for k, p in enumerate(signature.parameters.values())
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name not in kwargs
        and (p.kind is inspect.Parameter.KEYWORD_ONLY or k >= len(args))
    ]
    outputs = [m for m in missing if m == "dst" or m.startswith("dst_") or m.endswith("_dst")]
    if not outputs:
        return _shifted_dst_hint(name, signature, args, kwargs)
    given = ", ".join(f"{o}=..." for o in outputs)
    return (
        f"; no {' / '.join(repr(o) for o in outputs)} given: nki.isa instructions write their "
        f"result into it and return no value (NKI Beta 2 migration guide: all of the ISA functions "
        f"require a dst parameter instead of returning a result), so write nisa.{name}({given}, ...) "
        f"rather than out[...] = nisa.{name}(...)"
    )


def _shifted_dst_hint(
    name: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """The positional Beta 1 form ``psum[...] += nisa.nc_matmul(stationary, moving)``: its
    operands land one parameter early (``dst`` takes the stationary tile) and the last operand
    parameter is reported missing, which Python's message (and AWS's simulator's) leaves
    unexplained: a public solver read it as a minimum free size of ``moving``. Recognised when
    the call binds once a ``dst`` is put in front of its arguments, and, for a matmul, its first
    argument is not in PSUM (where a matmul's dst lies: then an operand is missing instead)."""
    params = list(signature.parameters.values())
    if not args or not params or params[0].name != "dst" or "dst" in kwargs:
        return ""
    if name.startswith("nc_matmul") and getattr(getattr(args[0], "buffer", None), "name", "") == "psum":
        return ""
    try:
        signature.bind(None, *args, **kwargs)
    except TypeError:
        return ""
    shifted = ", ".join(p.name for p in params[1 : len(args) + 1])
    return (
        f"; if this is NKI Beta 1's form, the {len(args)} positional argument(s) read as "
        f"({shifted}) when a dst goes first: nki.isa instructions take the output tile as their "
        f"first argument dst and return no value (NKI Beta 2 migration guide: all of the ISA "
        f"functions require a dst parameter instead of returning a result), so write "
        f"nisa.{name}(dst, {shifted}, ...) rather than out[...] = nisa.{name}({shifted})"
        + (" or out[...] += ...: accumulate=True adds into dst (NKI 0.3.0 update guide)"
           if "accumulate" in signature.parameters else "")
    )  # fmt: skip


def returning_handle(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an ``nisa`` instruction) returning an :class:`NkiInstruction` for what it recorded
    when it would return None; its ``bool`` switches are checked first
    (:func:`trncore.sim.checks.check_bool_arguments`)."""

    flags = checks.bool_parameters(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if flags:
            try:
                checks.check_bool_arguments(fn.__name__, flags, args, kwargs)
            except TypeError as exc:
                raise _beta1_hinted(fn, args, kwargs, exc) from None
        ctx = context.maybe_current()
        try:
            if ctx is None:
                return fn(*args, **kwargs)
            instrs = ctx.instrs
            first = len(instrs)
            out = fn(*args, **kwargs)
        except TypeError as exc:
            better = _signature_error(fn, args, kwargs, exc)
            if better is None:
                raise
            raise better from None
        end = len(instrs)
        if out is None and end > first:
            ins = instrs[first]
            return NkiInstruction(ctx, first, end, ins.site, ins.op)
        return out

    call.__trncore_handle__ = True  # type: ignore[attr-defined]
    return call
