"""Fixtures for trncore's own tests: a clean environment and stand-in engines."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from trncore import dispatch, simulator

ENV_SUFFIXES = ("FORCE_BACKEND", "USE_SIMULATOR", "REQUIRE_NKI")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No TRNSCI_* / TRNTEST_* steering variables, and fallback warnings reset."""
    for prefix in ("TRNSCI", "TRNTEST"):
        for suffix in ENV_SUFFIXES:
            monkeypatch.delenv(f"{prefix}_{suffix}", raising=False)
    monkeypatch.delenv(simulator.ENGINE_ENV, raising=False)
    dispatch.reset_fallback_warnings()
    return monkeypatch


class NumpyEngine:
    """A stand-in simulator engine: calls the 'kernel' directly on NumPy arrays and records calls."""

    name = "numpy-standin"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[tuple[int, ...], ...], dict, str]] = []

    def run(self, kernel, args, params, *, target):
        assert all(isinstance(a, np.ndarray) for a in args)
        self.calls.append((kernel.__name__, tuple(a.shape for a in args), dict(params), target))
        return kernel(*args, **params)


@pytest.fixture
def numpy_engine(clean_env: pytest.MonkeyPatch) -> Iterator[NumpyEngine]:
    engine = NumpyEngine()
    simulator.register_engine(engine)
    clean_env.setenv(simulator.ENGINE_ENV, engine.name)
    yield engine
    simulator.unregister_engine(engine.name)
