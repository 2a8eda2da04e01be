"""Helpers for tests of kernels on the emulator: "this kernel is refused at that line".

An emulator rule reports the kernel's own source line (``NkiValidationError.filename`` /
``.lineno``, docs/emulator.md). A test that a kernel is refused where it breaks the rule has to
name that line without hard-coding a number that moves when the file is edited: mark the line
with a comment (``# HERE``) and look it up::

    def bad(x):
        t = nl.ndarray(...)
        nisa.memset(dst=t, value=0.5)  # HERE

    with pytest.raises(DtypeError) as exc:
        run_kernel(bad, x)
    assert_reported_at(exc.value, bad, "# HERE")

These helpers read only the test's source (``inspect``); they do not depend on the emulator's
state, so they are an independent check of where an error points.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from trncore.sim.errors import NkiValidationError

__all__ = ["assert_reported_at", "marked_line"]


def marked_line(fn: Callable[..., Any], marker: str = "# HERE") -> int:
    """The line number (in ``fn``'s file) of the one line of ``fn``'s source containing ``marker``.

    Raises ``ValueError`` when no line or more than one line of ``fn`` carries ``marker``: a
    marker that matches twice would make the test's expectation ambiguous.
    """
    if not callable(fn):
        raise TypeError(f"marked_line: fn must be a function, got {type(fn).__name__}")
    if not isinstance(marker, str) or not marker:
        raise TypeError(f"marked_line: marker must be a non-empty str, got {marker!r}")
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    if len(hits) != 1:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ValueError(
            f"marked_line: {len(hits)} lines of {name} contain {marker!r}, expected exactly one"
        )
    return hits[0]


def assert_reported_at(
    error: BaseException, fn: Callable[..., Any], marker: str = "# HERE", *, below: int = 0
) -> None:
    """Assert that the emulator ``error`` names the line of ``fn`` marked ``marker``.

    ``below`` counts lines under the marked one (for a call written over several lines whose
    reported line is not the one that can carry the comment). Checks the file too: a line number
    in the emulator's own source would otherwise pass by coincidence.
    """
    if not isinstance(error, NkiValidationError):
        raise AssertionError(f"expected an emulator rule error, got {type(error).__name__}: {error}")
    expected_file = inspect.getsourcefile(fn)
    expected_line = marked_line(fn, marker) + below
    if error.filename != expected_file or error.lineno != expected_line:
        raise AssertionError(
            f"error reported at {error.filename}:{error.lineno}, expected "
            f"{expected_file}:{expected_line} ({marker!r} in {getattr(fn, '__qualname__', fn)}): {error}"
        )
