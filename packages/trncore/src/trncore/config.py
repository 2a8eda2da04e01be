"""Backend names and the environment variables that steer dispatch.

Every variable is read when an operation is called, not at import, so a test or a notebook can
change it between calls. A library-specific variable (``TRNBLAS_USE_SIMULATOR``) overrides the
suite-wide one (``TRNSCI_USE_SIMULATOR``). Invalid values raise ``ValueError`` naming the
variable and the values it accepts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BACKENDS",
    "ENV_TRACKED",
    "GENERATION",
    "SUITE_PREFIX",
    "TARGET_ENV",
    "Backend",
    "EnvSettings",
    "bump_generation",
    "check_backend",
    "current_target",
    "env_settings",
    "read_bool",
    "read_choice",
    "read_text",
    "steering_keys",
    "steering_unset",
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


def read_bool(library: str, suffix: str) -> bool:
    """A boolean variable such as ``TRNBLAS_REQUIRE_NKI`` (unset means False)."""
    found = _lookup(library, suffix)
    if found is None:
        return False
    name, raw = found
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{name}={raw!r} is not a boolean; allowed values: {', '.join(_TRUE)} or {', '.join(_FALSE[:-1])}"
    )


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
# answer happens: an environment update, a backend or device-engine change. Environment updates
# are noticed by giving ``os.environ`` (one object) a subclass of its own class whose item
# assignment and deletion also bump a counter; every way of changing ``os.environ`` (``[...] =``,
# ``del``, ``update``, ``pop``, ``setdefault``, pytest's monkeypatch) goes through those two
# methods. Nothing else about ``os.environ`` changes. Where the class cannot be swapped (another
# tool replaced ``os.environ``), ``ENV_TRACKED`` is False and dispatch checks the variables on
# every call instead.

#: Bumped by every tracked environment change and by :func:`bump_generation`.
GENERATION: list[int] = [0]


def bump_generation() -> None:
    """Invalidate every remembered routing decision (backend or device-engine changes call this)."""
    GENERATION[0] += 1


class _TrackedEnviron(os._Environ):
    """``os.environ``'s class plus a change counter; behaviour is otherwise identical."""

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        GENERATION[0] += 1

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        GENERATION[0] += 1


def _track_environ() -> bool:
    # Only the standard class is swapped. Anything else (another tool's replacement, or the
    # subclass of an earlier import of this module, which bumps that import's counter) leaves
    # tracking off, and dispatch checks the variables on every call.
    if type(os.environ) is not os._Environ:
        return False
    try:
        os.environ.__class__ = _TrackedEnviron
    except TypeError:
        return False
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
#: "NKI 0.3.0 update guide" and the ``nki.simulate`` API page, Neuron SDK 2.29).
TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
_TARGET_ALIASES = {"trn1": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2"}


def current_target() -> str:
    """The hardware target kernels are checked against: ``trn1`` or ``trn2`` (default ``trn2``).

    NKI 0.3.0 reads ``NEURON_PLATFORM_TARGET_OVERRIDE``; its simulator defaults to trn3 when unset,
    which no library here targets, so this project defaults to trn2.
    """
    raw = os.environ.get(TARGET_ENV, "").strip().lower()
    if not raw:
        return "trn2"
    if raw not in _TARGET_ALIASES:
        raise ValueError(
            f"{TARGET_ENV}={raw!r} is not a supported target; allowed values: "
            + ", ".join(sorted(_TARGET_ALIASES))
        )
    return _TARGET_ALIASES[raw]


def read_text(library: str, suffix: str) -> str | None:
    """A free-form variable such as ``TRNTENSOR_DFMP2_FAULT`` (the library's first, then the
    suite's ``TRNSCI_`` one); unset or blank is None. The caller parses and validates the text."""
    found = _lookup(library, suffix)
    if found is None or not found[1].strip():
        return None
    return found[1].strip()
