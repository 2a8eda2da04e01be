"""Fixtures for the emulator tests: every test that takes ``target`` runs on trn1 and trn2."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simulator: kernels on the trncore.sim emulator")


@pytest.fixture(autouse=True)
def _default_release_and_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator's defaults (newest release, known issues refused), whatever the shell exports:
    a test that wants another release or mode sets it itself."""
    monkeypatch.delenv("TRNSCI_NKI_VERSION", raising=False)
    monkeypatch.delenv("TRNSCI_SIM_KNOWN_ISSUES", raising=False)


@pytest.fixture(autouse=True)
def _emulator_registration_undone() -> Iterator[None]:
    """A test that leaves the emulator registered as ``nki`` (the CLI's ``main`` installs it for
    the rest of its process) has it undone afterwards, so that a later test checking
    ``install``/``uninstall`` starts from the registration it would have alone."""
    import trncore.sim as sim

    before = sys.modules.get("nki")
    yield
    if before is not sim.nki and sys.modules.get("nki") is sim.nki:
        sim.uninstall()


@pytest.fixture(params=["trn1", "trn2"])
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hardware target, also exported as NEURON_PLATFORM_TARGET_OVERRIDE."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", request.param)
    return request.param

# A miniature nki-library-style checkout and a miniature project with its own NKI tests, which
# test_conform.py points the conformance runner at; their test files are for that runner, not
# for this suite.
collect_ignore = ["conform_checkout", "conform_project"]
