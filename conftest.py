"""Suite-wide pytest configuration: XLA on the CPU, hardware tests that skip (never error), and a
"reported by tests" section in the summary."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

# torch-xla must see PJRT_DEVICE before it is imported; on a CPU machine XLA runs on the host.
if not os.path.exists("/dev/neuron0"):
    os.environ.setdefault("PJRT_DEVICE", "CPU")


try:
    from hypothesis import HealthCheck, settings

    # Reproducible CI: the same generated cases every run (a failure reproduces), no wall-clock
    # deadlines on a shared 2-core machine. `--hypothesis-profile=explore` draws fresh cases.
    settings.register_profile(
        "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is a test dependency; a bare install can still collect tests
    pass


_REPORTED = pytest.StashKey[list[str]]()


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``report(text)``: lines that go into the run's log whatever the outcome, in a "reported by
    tests" section of pytest's summary (a passing test's own output is not shown). For what a test
    ran against: the versions an isolated install resolved, a measured time."""
    lines = request.config.stash.setdefault(_REPORTED, [])

    def add(text: str) -> None:
        lines.extend(f"{request.node.nodeid}: {line}" for line in text.splitlines() if line.strip())

    return add


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_REPORTED, [])
    if lines:
        terminalreporter.section("reported by tests")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from trncore.platform import neuron_device_present

    needs_device = [item for item in items if item.get_closest_marker("neuron")]
    if needs_device and not neuron_device_present():
        skip = pytest.mark.skip(reason="needs a Neuron device (torch-xla reports none here)")
        for item in needs_device:
            item.add_marker(skip)
