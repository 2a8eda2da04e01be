"""Warnings and errors shared by every trnsci library."""

from __future__ import annotations

__all__ = ["CallerError", "NkiDispatchError", "NkiFallbackWarning"]


class NkiFallbackWarning(RuntimeWarning):
    """The NKI route could not run an operation, so its PyTorch reference ran instead.

    Emitted once per (library, operation, cause) in a process; the message names the cause.
    Set ``<LIB>_REQUIRE_NKI=1`` (or ``TRNSCI_REQUIRE_NKI=1``) to turn fallbacks into errors.
    """


class NkiDispatchError(RuntimeError):
    """The NKI route was required (``*_REQUIRE_NKI``) but could not run; ``__cause__`` says why."""


class CallerError(Exception):
    """Raised by a driver for the caller's mistake (a bad argument), carrying the error to report.

    Dispatch raises ``error`` to the caller unchanged: a bad argument is not a reason to fall back
    to PyTorch (no ``NkiFallbackWarning``) nor a kernel failure (no ``NkiDispatchError``). Drivers
    that want the reference's own message use :meth:`trncore.dispatch.KernelContext.caller_error`.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error
