"""Errors raised by the NKI emulator when a kernel breaks a hardware or language rule.

``NkiValidationError`` subclasses plain :class:`Exception` (not ``AssertionError``, which the vendor
simulator raises, and not ``ValueError``): a broken kernel is neither a failed assertion of the
caller nor a bad argument value, and ``python -O`` must not change behaviour. One subclass exists
per rule family so tests and callers can catch exactly the family they expect. Every message starts
with the rule name in brackets and ends with the kernel's ``file:line``.
"""

from __future__ import annotations

import sys
import warnings

__all__ = [
    "AccumulationError",
    "BoundsError",
    "BufferError",
    "CapacityError",
    "DtypeError",
    "HostReadError",
    "LanguageError",
    "NkiValidationError",
    "PartitionError",
    "RaceError",
    "ShapeError",
    "TargetError",
    "UninitializedReadError",
    "site_suffix",
    "warn_at",
    "warn_unless_strict",
]


def site_suffix(site: tuple[str, int] | None) -> str:
    """``" (at file:line)"`` for a kernel site (how every rule error ends), ``""`` without one: for
    the plain TypeErrors that name a kernel line too."""
    return f" (at {site[0]}:{site[1]})" if site else ""


#: The registry :func:`warn_at` gives ``warnings.warn_explicit``, as ``warnings.warn`` uses a
#: module's ``__warningregistry__``: under Python's "default" filter a warning is shown once per
#: text and line (a kernel line traced in a loop warns once), and a changed filter (``pytest.warns``,
#: ``warnings.catch_warnings``) clears it, so each such block sees its warnings again.
_REGISTRY: dict[str | tuple[str, type[Warning], int], int] = {}

#: The module name of each kernel file a warning was reported in (None when no module has it).
_MODULES: dict[str, str | None] = {}


def _module_of(filename: str) -> str | None:
    """The name of the imported module whose ``__file__`` is ``filename`` (``"__main__"`` for a
    script), so filters by module (``-W ignore::UserWarning:mykernels``, and Python's default
    filter that shows a DeprecationWarning only in ``__main__``) treat the warning as they treat
    one the kernel's module raised itself. Looked up once per file."""
    if filename not in _MODULES:
        found = None
        for name, module in list(sys.modules.items()):
            if getattr(module, "__file__", None) == filename:
                found = name
                break
        if len(_MODULES) > 4096:
            _MODULES.clear()  # bound the memory
        _MODULES[filename] = found
    return _MODULES[filename]


def warn_at(
    message: str,
    site: tuple[str, int] | None,
    category: type[Warning] = UserWarning,
    stacklevel: int = 2,
) -> None:
    """Warn ``message`` at the kernel's line ``site``: the warning carries the kernel's file and
    line (as an error of the rule would, :class:`NkiValidationError`) and its text ends with
    :func:`site_suffix`, so a warning printed without its location still names the line. Without
    a site (the call did not come from a kernel) it is an ordinary ``warnings.warn`` at
    ``stacklevel`` counted from the caller of this function, as the caller would pass it."""
    if site:
        # ``module`` is passed only when an imported module has the kernel's file: CPython's
        # ``warn_explicit`` returns at once for ``module=None`` (its mark of a warning given at
        # interpreter shutdown), under every filter, "always" included; without the argument the
        # module name comes from the file name, as for any ``warn_explicit`` caller. A
        # kernel in a file loaded by ``spec_from_file_location`` and not put in ``sys.modules``
        # (as benchmark harnesses load kernels), in ``exec``'d code or in a notebook cell lost
        # every warning at its lines.
        module = _module_of(site[0])
        text = message + site_suffix(site)
        if module is None:
            warnings.warn_explicit(text, category, site[0], site[1], registry=_REGISTRY)
        else:
            warnings.warn_explicit(text, category, site[0], site[1], module=module, registry=_REGISTRY)
    else:
        warnings.warn(message, category, stacklevel=stacklevel + 1)


def warn_unless_strict(
    strict: bool,
    error: type[NkiValidationError],
    rule: str,
    message: str,
    site: tuple[str, int] | None,
    *,
    instead: str = "",
    stacklevel: int = 2,
) -> None:
    """Raise ``error(rule, message)`` in strict mode, else warn ``message`` at the kernel's line.

    For a form the hardware runs but that is most likely a bug, or that AWS's pages leave open (a
    finished PSUM accumulation group reused, registers read that nothing set, LNC=2 cores whose
    dynamic control flow parts, ...): by default the kernel gets the documented result and a
    warning at its line; ``strict_mode()`` makes it the rule's error, its text ending in
    "(strict mode)" so the reader knows why it is not a warning here (docs/emulator.md, "What is
    checked"). ``instead`` ends the warning with what the emulator does; ``stacklevel`` is as
    :func:`warn_at` takes it, counted from the caller of this function.
    """
    if strict:
        raise error(rule, message + " (strict mode)", site)
    warn_at(message + instead, site, stacklevel=stacklevel + 1)


class NkiValidationError(Exception):
    """A kernel broke a documented NKI 0.3.0 hardware or language rule.

    Attributes: ``rule`` (short rule name), ``filename`` and ``lineno`` of the kernel source line
    that issued the offending call (``None`` when not known).
    """

    family = "nki"

    def __init__(self, rule: str, detail: str, site: tuple[str, int] | None = None) -> None:
        self.rule = rule
        self.detail = detail
        self.filename = site[0] if site else None
        self.lineno = site[1] if site else None
        where = f" (at {site[0]}:{site[1]})" if site else ""
        super().__init__(f"[{self.family}: {rule}] {detail}{where}")


class PartitionError(NkiValidationError):
    """Partition dimension above 128, a strided partition access or an illegal start partition."""

    family = "partition"


class ShapeError(NkiValidationError):
    """Instruction shape limits (``nc_matmul`` K/M/N, element counts, reduction axes)."""

    family = "shape"


class BufferError(NkiValidationError):
    """An operand in a buffer the instruction cannot use (HBM on a compute engine, PSUM DMA)."""

    family = "buffer"


class DtypeError(NkiValidationError):
    """A dtype an instruction does not accept (matmul dst not fp32, memset value type, ...)."""

    family = "dtype"


class CapacityError(NkiValidationError):
    """SBUF or PSUM capacity exceeded (bytes per partition, PSUM bank size, live banks)."""

    family = "capacity"


class BoundsError(NkiValidationError):
    """An index, slice, access pattern or dynamic offset outside its tensor."""

    family = "bounds"


class UninitializedReadError(NkiValidationError):
    """Strict mode: an instruction read memory no instruction had written."""

    family = "uninitialized"


class HostReadError(NkiValidationError):
    """The kernel's Python code read tensor data on the host (data-dependent control flow)."""

    family = "host-read"


class AccumulationError(NkiValidationError):
    """PSUM accumulation misuse (reusing a finished accumulation group with ``accumulate=None``)."""

    family = "accumulate"


class TargetError(NkiValidationError):
    """A feature the chosen target (trn1 = NeuronCore-v2, trn2 = v3) does not have."""

    family = "target"


class LanguageError(NkiValidationError):
    """NKI language rules: outputs not in shared_hbm, ``.ap`` on an indexed view, launch grid."""

    family = "language"


class RaceError(NkiValidationError):
    """The two cores of an LNC=2 launch touch the same shared HBM bytes, at least one writing,
    with nothing ordering the two accesses (rule ``lnc-race``, :mod:`trncore.sim.core_races`), or
    two programs of an N-D SPMD grid do (rule ``grid-race``, :mod:`trncore.sim.grid`)."""

    family = "race"
