"""Warnings and errors shared by every trnsci library."""

from __future__ import annotations

__all__ = ["NkiDispatchError", "NkiFallbackWarning"]


class NkiFallbackWarning(RuntimeWarning):
    """The NKI route could not run an operation, so its PyTorch reference ran instead.

    Emitted once per (library, operation, cause) in a process; the message names the cause.
    Set ``<LIB>_REQUIRE_NKI=1`` (or ``TRNSCI_REQUIRE_NKI=1``) to turn fallbacks into errors.
    """


class NkiDispatchError(RuntimeError):
    """The NKI route was required (``*_REQUIRE_NKI``) but could not run; ``__cause__`` says why."""
