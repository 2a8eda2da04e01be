"""Simulator engines: where the simulator route of dispatch runs a kernel.

Two engines sit behind one switch (``TRNSCI_SIM_ENGINE``):

``trncore``
    :mod:`trncore.sim`, this project's NKI emulator. Runs everywhere.
``nki``
    The vendor's ``nki.simulate``, available only where the real ``nki`` package is installed.

``auto`` (the default) picks ``nki`` where the real package imports and ``trncore`` otherwise.
Tests may register further engines (for example a NumPy stand-in) with :func:`register_engine`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from trncore import config, platform
from trncore.config import TARGET_ENV, current_target

__all__ = [
    "ENGINE_ENV",
    "TARGET_ENV",
    "SimulatorEngine",
    "VendorSimulator",
    "current_target",
    "engine_name",
    "get_engine",
    "register_engine",
    "unregister_engine",
]

ENGINE_ENV = "TRNSCI_SIM_ENGINE"


@runtime_checkable
class SimulatorEngine(Protocol):
    """Runs one NKI kernel on NumPy arrays and returns its output array(s)."""

    name: str

    def run(
        self,
        kernel: Callable[..., Any],
        args: Sequence[np.ndarray],
        params: Mapping[str, Any],
        *,
        target: str,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run ``kernel(*args, **params)`` checked against ``target`` and return its output(s)."""
        ...


class VendorSimulator:
    """The real ``nki.simulate``, for hosts where AWS's ``nki`` package is installed."""

    name = "nki"

    def run(
        self,
        kernel: Callable[..., Any],
        args: Sequence[np.ndarray],
        params: Mapping[str, Any],
        *,
        target: str,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run ``kernel`` through the vendor's ``nki.simulate`` with ``target`` set for the call."""
        import nki  # the real package; only reached where platform.real_nki_available()

        with config.variable_set(TARGET_ENV, target):  # nki 0.3.0 reads the target from there only
            return nki.simulate(kernel)(*args, **params)


_registered: dict[str, SimulatorEngine] = {}


def register_engine(engine: SimulatorEngine) -> None:
    """Make ``engine`` selectable by its ``name`` through ``TRNSCI_SIM_ENGINE``."""
    if not isinstance(engine, SimulatorEngine):
        raise TypeError(f"engine must provide .name and .run(kernel, args, params, target=), got {engine!r}")
    _registered[engine.name] = engine


def unregister_engine(name: str) -> None:
    """Remove an engine added with :func:`register_engine`."""
    _registered.pop(name, None)


def engine_name() -> str:
    """The engine the simulator route would use now (reads ``TRNSCI_SIM_ENGINE`` at call time)."""
    choice = config.read_text(ENGINE_ENV, "auto")
    allowed = ("auto", "trncore", "nki", *sorted(_registered))
    if choice not in allowed:
        raise ValueError(f"{ENGINE_ENV}={choice!r} is not valid; allowed values: {', '.join(allowed)}")
    if choice == "auto":
        return "nki" if platform.real_nki_available() else "trncore"
    return choice


def get_engine(name: str | None = None) -> SimulatorEngine:
    """The engine called ``name`` (default: :func:`engine_name`)."""
    name = name or engine_name()
    if name in _registered:
        return _registered[name]
    if name == "trncore":
        sim = importlib.import_module("trncore.sim")
        return sim.ENGINE
    if name == "nki":
        if not platform.real_nki_available():
            raise RuntimeError(
                f"{ENGINE_ENV}=nki needs AWS's nki package, which is not installed; use 'trncore'"
            )
        return VendorSimulator()
    raise ValueError(f"unknown simulator engine {name!r}")
