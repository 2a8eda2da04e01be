"""Binding ``nki``/``nl``/``nisa`` of a kernel (and the helpers it calls) to the emulator.

Library kernels import their NKI modules through :mod:`trncore.lang`, which gives the real package
on a Trainium host and the emulator elsewhere. When the emulator runs a kernel on a host where the
real package is installed, the kernel's globals still point at the real modules, so the emulator
rebuilds the function with a copy of its module globals in which

* every real ``nki``/``nki.language``/``nki.isa``/``nki.typing`` module is replaced by the
  emulator's module of the same name, and
* every plain Python function whose own globals reference a real NKI module (a helper kernel or a
  shared building block) is replaced by its rebound copy, recursively (memoized), and
* every other module whose namespace references a real NKI module (``import trncore.blocks as
  blocks`` followed by ``blocks.load_tile(...)``) is replaced by a proxy module that hands out
  rebound copies of its functions.

Limits, kept on purpose: closure cells and attributes reached through other objects (classes,
``functools.partial``) are not rewritten, and global *assignments* inside a rebound function go to
the copy. Kernels are pure functions of their arguments, so neither matters in practice. Where the
real package is absent (every CI machine) nothing is rebuilt: the kernel already sees the emulator.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from trncore import platform

__all__ = ["EMULATED", "rebind"]

_memo: dict[int, Callable[..., Any]] = {}

#: Real module name -> emulator module (``"nki.language"`` -> ``nl``). Filled by
#: :mod:`trncore.sim.modules` when it builds the namespaces (they sit above the runner that
#: rebinds kernels, so the table is handed down rather than imported).
EMULATED: dict[str, types.ModuleType] = {}


def _emulator_for(value: Any) -> Any:
    if not isinstance(value, types.ModuleType) or getattr(value, "__trncore_emulator__", False):
        return None
    return EMULATED.get(value.__name__)


def _mentions_real_nki(g: dict[str, Any]) -> bool:
    return any(_emulator_for(v) is not None for v in g.values())


def rebind(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its NKI names bound to the emulator (``fn`` itself when nothing to change)."""
    if not platform.real_nki_available():
        return fn
    return _rebind(fn)


def _rebind(fn: Callable[..., Any]) -> Callable[..., Any]:
    if not isinstance(fn, types.FunctionType) or not _mentions_real_nki(fn.__globals__):
        return fn
    key = id(fn)
    if key in _memo:
        return _memo[key]
    new_globals: dict[str, Any] = dict(fn.__globals__)
    clone = types.FunctionType(
        fn.__code__, new_globals, fn.__name__, fn.__defaults__, fn.__closure__
    )
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__dict__.update(fn.__dict__)
    clone.__qualname__ = fn.__qualname__
    clone.__module__ = fn.__module__
    _memo[key] = clone
    for name, value in list(new_globals.items()):
        replacement = _emulator_for(value)
        if replacement is not None:
            new_globals[name] = replacement
        elif isinstance(value, types.FunctionType) and value is not fn:
            new_globals[name] = _rebind(value)
        elif isinstance(value, types.ModuleType) and _mentions_real_nki(vars(value)):
            new_globals[name] = _proxy(value)
        elif hasattr(value, "func") and isinstance(value.func, types.FunctionType):
            inner = value.func  # an nki.jit Kernel object wrapping a helper
            rebound = _rebind(inner)
            if rebound is not inner:
                new_globals[name] = rebound
    return clone


_proxies: dict[str, types.ModuleType] = {}


class _RebindingModule(types.ModuleType):
    """A stand-in for a helper module: attribute reads return emulator-bound functions."""

    def __init__(self, original: types.ModuleType) -> None:
        super().__init__(original.__name__, original.__doc__)
        self.__dict__["_original"] = original

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["_original"], name)
        replacement = _emulator_for(value)
        if replacement is not None:
            return replacement
        if isinstance(value, types.FunctionType):
            return _rebind(value)
        return value


def _proxy(module: types.ModuleType) -> types.ModuleType:
    if module.__name__ not in _proxies:
        _proxies[module.__name__] = _RebindingModule(module)
    return _proxies[module.__name__]
