"""Fixtures for the emulator tests: every test that takes ``target`` runs on trn1 and trn2."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simulator: kernels on the trncore.sim emulator")


@pytest.fixture(params=["trn1", "trn2"])
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hardware target, also exported as NEURON_PLATFORM_TARGET_OVERRIDE."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", request.param)
    return request.param
