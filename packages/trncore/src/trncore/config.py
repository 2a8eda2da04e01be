"""Backend names and the environment variables that steer the suite: the one reader of the environment.

Every module of trncore (the emulator :mod:`trncore.sim` included) and of the libraries takes
environment variables from here. Every variable is read when it is
needed, not at import, so a test or a notebook can change it between calls. A library-specific
variable (``TRNBLAS_USE_SIMULATOR``) overrides the suite-wide one (``TRNSCI_USE_SIMULATOR``).
Invalid values raise ``ValueError`` naming the variable and the values it accepts; booleans have
one parser (:func:`parse_bool`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BACKENDS",
    "ENV_TRACKED",
    "GENERATION",
    "KNOWN_ISSUES_ENV",
    "KNOWN_ISSUES_MODES",
    "NKI_VERSION_ENV",
    "SUITE_PREFIX",
    "TARGET_ENV",
    "Backend",
    "EnvSettings",
    "bump_generation",
    "check_backend",
    "check_known_issues_mode",
    "current_target",
    "env_settings",
    "environment",
    "known_issues_setting",
    "nki_version_setting",
    "normalize_nki_version",
    "parse_bool",
    "pjrt_device",
    "process_environment",
    "read_bool",
    "read_choice",
    "read_library_text",
    "read_text",
    "read_verbatim",
    "steering_keys",
    "steering_unset",
    "variable_set",
]

Backend = Literal["auto", "pytorch", "nki"]
BACKENDS: tuple[str, ...] = ("auto", "pytorch", "nki")
SUITE_PREFIX = "TRNSCI"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def check_backend(name: object, *, what: str = "backend") -> Backend:
    """Validate a backend name; ``what`` names the argument or variable in the error."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a string, one of {', '.join(BACKENDS)}; got {name!r}")
    value = name.strip().lower()
    if value not in BACKENDS:
        raise ValueError(f"{what}={name!r} is not a backend; allowed values: {', '.join(BACKENDS)}")
    return value  # type: ignore[return-value]


def _lookup(library: str, suffix: str) -> tuple[str, str] | None:
    """The (variable name, value) in effect for ``suffix``: library-specific first, then suite."""
    for prefix in (library.upper(), SUITE_PREFIX):
        name = f"{prefix}_{suffix}"
        value = os.environ.get(name)
        if value is not None:
            return name, value
    return None


def parse_bool(name: str, raw: str) -> bool:
    """The boolean value ``raw`` of the variable ``name`` (1/true/yes/on, 0/false/no/off or empty).

    Anything else is a ``ValueError`` naming the variable: a mistyped switch must not silently
    read as off.
    """
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{name}={raw!r} is not a boolean; allowed values: {', '.join(_TRUE)} or {', '.join(_FALSE[:-1])}"
    )


def read_bool(library: str, suffix: str) -> bool:
    """A boolean variable such as ``TRNBLAS_REQUIRE_NKI`` (unset means False)."""
    found = _lookup(library, suffix)
    if found is None:
        return False
    return parse_bool(*found)


def read_text(name: str, default: str = "") -> str:
    """The variable ``name`` as stripped lower-case text (``default`` when unset or empty)."""
    return os.environ.get(name, "").strip().lower() or default


def read_verbatim(name: str, default: str = "") -> str:
    """The variable ``name`` exactly as set (``default`` when unset): paths and numbers, which the
    caller parses and validates."""
    return os.environ.get(name, default)


def process_environment() -> dict[str, str]:
    """A copy of the whole environment, for a child process the caller adjusts and starts."""
    return dict(os.environ)


@contextlib.contextmanager
def variable_set(name: str, value: str) -> Iterator[None]:
    """The variable ``name`` set to ``value`` inside the block, restored (or unset) after it.

    For tools that take a setting from the environment only (NKI 0.3.0's simulator reads the
    hardware target from :data:`TARGET_ENV`).
    """
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def pjrt_device() -> str:
    """``PJRT_DEVICE`` in upper case (``""`` when unset): torch-xla's device plugin choice."""
    return os.environ.get("PJRT_DEVICE", "").upper()


def environment(prefixes: tuple[str, ...], names: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables whose names start with one of ``prefixes`` or are in ``names``, sorted."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes) or k in names}


def read_choice(library: str, suffix: str) -> Backend | None:
    """A backend-valued variable such as ``TRNBLAS_FORCE_BACKEND`` (unset or empty means None)."""
    found = _lookup(library, suffix)
    if found is None or not found[1].strip():
        return None
    name, raw = found
    return check_backend(raw, what=name)


@dataclass(frozen=True)
class EnvSettings:
    """The environment as one library sees it at one call."""

    force_backend: Backend | None
    use_simulator: bool
    require_nki: bool


# On POSIX CPython ``os.environ`` keeps its contents in a dict of bytes (``_data``) that every
# ``os.environ`` update (including pytest's monkeypatch) goes through; reading it directly costs
# a tenth of ``os.environ.get``, which matters because dispatch checks the variables on every call.
_ENV_DATA: Any = getattr(os.environ, "_data", None)
_ENCODE: Any = getattr(os.environ, "encodekey", None)
_FAST_ENV = isinstance(_ENV_DATA, dict) and callable(_ENCODE)
_SUFFIXES = ("FORCE_BACKEND", "USE_SIMULATOR", "REQUIRE_NKI")
_keys: dict[str, tuple[object, ...]] = {}
_settings_cache: dict[str, tuple[tuple[object, ...], EnvSettings]] = {}


def _raw_values(library: str) -> tuple[object, ...]:
    """The raw values of every steering variable of ``library`` (a cheap change check)."""
    keys = _keys.get(library)
    if keys is None:
        names = _steering_names(library)
        keys = _keys[library] = tuple(_ENCODE(n) for n in names) if _FAST_ENV else names
    get: Any = _ENV_DATA.get if _FAST_ENV else os.environ.get
    return tuple(map(get, keys))


_names: dict[str, tuple[str, ...]] = {}
# A live view of the environment's keys: it follows every change without being rebuilt.
_ENV_KEY_VIEW = _ENV_DATA.keys() if _FAST_ENV else None


def steering_keys(library: str) -> frozenset[object]:
    """The keys, as the environment stores them, of every variable that steers ``library``."""
    names = _steering_names(library)
    return frozenset(_ENCODE(n) for n in names) if _FAST_ENV else frozenset(names)


def steering_unset(library: str, keys: frozenset[object] | None = None) -> bool:
    """True when none of ``library``'s steering variables (nor their ``TRNSCI_*`` defaults) is set.

    The common case on a plain CPU; dispatch checks it first so that a PyTorch-route call costs a
    fraction of a microsecond. ``isdisjoint`` against the live key view runs in C over the six names.
    ``keys`` is ``steering_keys(library)``, precomputed by callers on a hot path.
    """
    keys = steering_keys(library) if keys is None else keys
    if _ENV_KEY_VIEW is not None:
        return _ENV_KEY_VIEW.isdisjoint(keys)
    return not any(n in os.environ for n in keys)


# --------------------------------------------------------------------------- change generation
#
# Dispatch remembers "this library runs the reference" until something that could change the
# answer happens: an environment update, a backend or device-engine change. Environment updates are
# noticed by an audit hook (PEP 578): every change of ``os.environ`` (``[...] =``, ``del``,
# ``update``, ``pop``, ``setdefault``, pytest's monkeypatch) calls ``os.putenv`` or
# ``os.unsetenv``, which raise the audit events ``os.putenv`` / ``os.unsetenv``; the hook bumps a
# counter. ``os.environ`` itself is left alone. Where it has been replaced by an object that does
# not call ``os.putenv`` (another tool's mapping), ``ENV_TRACKED`` is False and dispatch checks
# the variables on every call instead.

#: Bumped by every environment change and by :func:`bump_generation`.
GENERATION: list[int] = [0]
_ENV_EVENTS = frozenset({"os.putenv", "os.unsetenv"})


def bump_generation() -> None:
    """Invalidate every remembered routing decision (backend or device-engine changes call this)."""
    GENERATION[0] += 1


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Runs for every audit event of the process: one set lookup, nothing else.
    if event in _ENV_EVENTS:
        GENERATION[0] += 1


def _track_environ() -> bool:
    if type(os.environ) is not os._Environ:
        return False
    sys.addaudithook(_audit)
    return True


#: Whether :data:`GENERATION` follows environment changes (see above).
ENV_TRACKED = _track_environ()


def _steering_names(library: str) -> tuple[str, ...]:
    names = _names.get(library)
    if names is None:
        names = _names[library] = tuple(
            f"{p}_{s}" for s in _SUFFIXES for p in (library.upper(), SUITE_PREFIX)
        )
    return names


def env_settings(library: str) -> EnvSettings:
    """Read ``<LIB>_FORCE_BACKEND``, ``<LIB>_USE_SIMULATOR``, ``<LIB>_REQUIRE_NKI`` (and TRNSCI_*).

    Called on every dispatch, so the parsed result is reused while the raw values are unchanged.
    """
    raw = _raw_values(library)
    cached = _settings_cache.get(library)
    if cached is not None and cached[0] == raw:
        return cached[1]
    settings = EnvSettings(
        force_backend=read_choice(library, "FORCE_BACKEND"),
        use_simulator=read_bool(library, "USE_SIMULATOR"),
        require_nki=read_bool(library, "REQUIRE_NKI"),
    )
    _settings_cache[library] = (raw, settings)
    return settings


#: The hardware target NKI checks kernels against. NKI 0.3.0 takes it from this variable only
#: (``nki.jit``'s ``platform_target=`` raises there), with the spellings below (AWS Neuron docs,
#: "NKI 0.3.0 update guide" and the ``nki.simulate`` API page, Neuron SDK 2.29; ``inf2``, also
#: NeuronCore-v2, from the NKI 0.6.0 ``nki.jit`` page: "trn1|inf2|gen2").
TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
#: every spelling of a target, to the name the emulator uses (trncore.sim.rules reads it too)
TARGET_ALIASES = {"trn1": "trn1", "gen2": "trn1", "inf2": "trn1", "trn2": "trn2", "gen3": "trn2"}


def current_target() -> str:
    """The hardware target kernels are checked against: ``trn1`` or ``trn2`` (default ``trn2``).

    NKI 0.3.0 reads ``NEURON_PLATFORM_TARGET_OVERRIDE``; its simulator defaults to trn3 when unset,
    which no library here targets, so this project defaults to trn2.
    """
    raw = read_text(TARGET_ENV)
    if not raw:
        return "trn2"
    if raw not in TARGET_ALIASES:
        raise ValueError(
            f"{TARGET_ENV}={raw!r} is not a supported target; allowed values: "
            + ", ".join(sorted(TARGET_ALIASES))
        )
    return TARGET_ALIASES[raw]


#: How the emulator treats the known issues of the targeted NKI release (trncore.sim.known_issues):
#: ``error`` (the default: refused at the kernel's line), ``warn`` or ``off``.
KNOWN_ISSUES_ENV = "TRNSCI_SIM_KNOWN_ISSUES"
KNOWN_ISSUES_MODES: tuple[str, ...] = ("error", "warn", "off")


def check_known_issues_mode(raw: object, *, what: str) -> str:
    """``raw`` as one of :data:`KNOWN_ISSUES_MODES`; ``what`` names the argument or variable."""
    if not isinstance(raw, str):
        raise TypeError(f"{what} must be one of {', '.join(KNOWN_ISSUES_MODES)}; got {raw!r}")
    value = raw.strip().lower()
    if value not in KNOWN_ISSUES_MODES:
        raise ValueError(
            f"{what}={raw!r} is not a known-issues mode; allowed values: "
            + ", ".join(KNOWN_ISSUES_MODES)
        )
    return value


def known_issues_setting() -> str:
    """The mode named by ``TRNSCI_SIM_KNOWN_ISSUES`` (``error`` when unset or empty)."""
    raw = os.environ.get(KNOWN_ISSUES_ENV, "")
    if not raw.strip():
        return "error"
    return check_known_issues_mode(raw, what=KNOWN_ISSUES_ENV)


#: The NKI release kernels are checked against by the emulator (trncore.sim.versions owns the
#: list of releases; this module only reads and spells the variable).
NKI_VERSION_ENV = "TRNSCI_NKI_VERSION"


def normalize_nki_version(raw: str, allowed: tuple[str, ...], *, what: str) -> str:
    """``raw`` (``"0.3"``, ``"0.3.0"``, ``"v0.6"``) as one of ``allowed`` (``"0.3.0"`` spellings).

    ``what`` names the argument or variable in the ``ValueError`` raised for anything else.
    """
    if not isinstance(raw, str):
        raise TypeError(f"{what} must be a string such as '0.6.0', got {raw!r}")
    text = raw.strip().lower().removeprefix("v")
    parts = text.split(".")
    if len(parts) == 2:
        parts.append("0")
    name = ".".join(parts)
    if name not in allowed:
        raise ValueError(
            f"{what}={raw!r} is not an NKI release the emulator knows; allowed values: "
            + ", ".join(allowed)
        )
    return name


def nki_version_setting(allowed: tuple[str, ...]) -> str | None:
    """The release named by ``TRNSCI_NKI_VERSION`` (None when unset or empty)."""
    raw = os.environ.get(NKI_VERSION_ENV)
    if raw is None or not raw.strip():
        return None
    return normalize_nki_version(raw, allowed, what=NKI_VERSION_ENV)


def read_library_text(library: str, suffix: str) -> str | None:
    """A free-form variable such as ``TRNTENSOR_DFMP2_FAULT`` (the library's first, then the
    suite's ``TRNSCI_`` one); unset or blank is None. The caller parses and validates the text."""
    found = _lookup(library, suffix)
    if found is None or not found[1].strip():
        return None
    return found[1].strip()
