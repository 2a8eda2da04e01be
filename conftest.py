"""Suite-wide pytest configuration: XLA on the CPU, hardware tests that skip (never error), and a
"reported by tests" section in the summary."""

from __future__ import annotations

import os
import re
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


#: Routing and emulator settings a developer's shell may carry (<LIB>_FORCE_BACKEND and the like,
#: the emulator's TRNSCI_SIM_* and release, the simulator's target): a script run as a user would
#: run it must not inherit them.
_ROUTING = re.compile(
    r"^(TRN\w*_(FORCE_BACKEND|USE_SIMULATOR|REQUIRE_NKI|ALLOW_FP32_COMPUTE)|TRNSCI_SIM_\w+"
    r"|TRNSCI_NKI_VERSION|NEURON_PLATFORM_TARGET_OVERRIDE)$"
)


@pytest.fixture
def script_env() -> dict[str, str]:
    """The environment for a subprocess that runs a script as a user would: this process's,
    without the suite's routing and emulator settings, XLA on the CPU, matplotlib file-only."""
    env = {k: v for k, v in os.environ.items() if not _ROUTING.match(k)}
    env.update(PJRT_DEVICE="CPU", MPLBACKEND="Agg")
    return env


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
