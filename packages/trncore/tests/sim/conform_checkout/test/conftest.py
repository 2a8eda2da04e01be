"""A small harness in the style of nki-library's: simulation mode runs kernels on nki_cpu_simulator."""

import sys

import numpy as np
import pytest


class ValidationException(Exception):
    """The kernel's output differs from the reference beyond the case's tolerance."""


def pytest_addoption(parser):
    parser.addoption("--test-mode", default="compile-only")
    parser.addoption("--platform-target", default="trn2")
    parser.addoption("--output-directory", default="out")


def pytest_configure(config):
    if config.getoption("--test-mode") == "simulation":
        import nki_cpu_simulator.nki as sim_nki
        import nki_cpu_simulator.nki.isa as sim_nisa
        import nki_cpu_simulator.nki.language as sim_nl

        sys.modules["nki"] = sim_nki
        sys.modules["nki.language"] = sim_nl
        sys.modules["nki.isa"] = sim_nisa


def pytest_collection_modifyitems(config, items):
    if config.getoption("--test-mode") == "simulation":
        for item in items:
            if item.get_closest_marker("slow_simulation"):
                item.add_marker(pytest.mark.skip(reason="slow in simulation"))


class Orchestrator:
    def execute(self, kernel, inputs, reference, lnc=1, rtol=1e-5, atol=1e-6):
        import nki

        outputs = nki.cpu_simulate(kernel)[lnc](**inputs)
        expected = reference(**inputs)
        try:
            np.testing.assert_allclose(np.asarray(outputs, dtype=np.float32), expected, rtol=rtol, atol=atol)
        except AssertionError as e:
            raise ValidationException(str(e)) from e


@pytest.fixture
def test_manager():
    return Orchestrator()
