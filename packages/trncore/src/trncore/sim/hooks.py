"""The three calls from a lower layer of the emulator into a higher one, registered at import.

The emulator's modules import only their own layer or lower ones (docs/architecture.md, "The
emulator's layers"). Three behaviours of low-level objects belong to higher layers:

* calling an operator token, ``nl.add(x, y)`` (:class:`trncore.sim.alu.Op`), is the ``nl``
  compute wrapper of :mod:`trncore.sim.wrappers`;
* ``t[...] = value`` on a tensor (:mod:`trncore.sim.tensor`) is the DMA, ``tensor_copy`` or
  ``memset`` instruction of :mod:`trncore.sim.isa_movement`;
* ``Program.report()`` (:mod:`trncore.sim.program`) is the cost model of :mod:`trncore.sim.report`.

The higher module registers its function here when it is imported, and ``import trncore.sim``
(which runs before any of its submodules) imports all three, so a hook is always filled when a
kernel runs. An unfilled hook names the module that fills it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Hook", "call_token", "program_report", "write_region"]

F = TypeVar("F", bound=Callable[..., Any])


class Hook:
    """One upward call: ``what`` (for the error message) is provided by the module ``provider``."""

    def __init__(self, what: str, provider: str) -> None:
        self.what = what
        self.provider = provider
        self._fn: Callable[..., Any] | None = None

    def register(self, fn: F) -> F:
        """Install ``fn`` as the implementation (the provider calls this once, at import)."""
        self._fn = fn
        return fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self._fn
        if fn is None:
            raise RuntimeError(
                f"{self.what} is implemented by {self.provider}, which is not imported "
                "(import trncore.sim first)"
            )
        return fn(*args, **kwargs)


#: ``op(*args, **kwargs)`` for an operator token ``op``: :func:`trncore.sim.wrappers.call_token`.
call_token = Hook("calling an operator token (nl.add(x, y))", "trncore.sim.wrappers")
#: ``write_region(dst_view, value)`` for ``t[key] = value``: :mod:`trncore.sim.isa_movement`.
write_region = Hook("t[...] = value", "trncore.sim.isa_movement")
#: ``program_report(prog)``: :func:`trncore.sim.report.program_report`.
program_report = Hook("Program.report()", "trncore.sim.report")
