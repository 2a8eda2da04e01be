"""trncore.sim — a NumPy emulator of AWS's NKI kernel language, releases 0.3.0 to 0.6.0.

Run a kernel::

    from trncore.lang import nki, nl, nisa      # the emulator where the real nki is absent
    out = nki.simulate(kernel)(a, b)            # or kernel(a, b) for an @nki.jit kernel

Third-party files that ``import nki`` run after :func:`install`. Every ISA call is checked
against the target's rules (trn1 / trn2, from ``NEURON_PLATFORM_TARGET_OVERRIDE``, default trn2);
a violation raises an :class:`NkiValidationError` subclass naming the rule and the kernel line.
The first call of a kernel key traces it into an instruction list; later calls replay the list.
:func:`report` gives the program's modelled cost, :func:`timeline` its modelled schedule as
lanes of instructions over time. Kernels are checked against a target NKI release (0.3.0-0.6.0,
``nki_version=`` / :func:`nki_version` / ``TRNSCI_NKI_VERSION``, default the newest; see
:mod:`trncore.sim.versions`). See docs/emulator.md.
"""

from __future__ import annotations

from trncore.sim import errors
from trncore.sim.errors import NkiValidationError
from trncore.sim.launches import LaunchRecord, StepModel, record_launches
from trncore.sim.modules import install, nisa, nki, nl, uninstall
from trncore.sim.program import Program
from trncore.sim.report import Report, report
from trncore.sim.runner import (
    ENGINE,
    Kernel,
    cache_info,
    clear_cache,
    count_keys,
    jit,
    run_kernel,
    run_ranks,
    simulate,
    strict_mode,
    trace,
)
from trncore.sim.timeline import Timeline, timeline
from trncore.sim.versions import VersionError, nki_version, requires

__all__ = [
    "ENGINE",
    "Kernel",
    "LaunchRecord",
    "NkiValidationError",
    "Program",
    "Report",
    "StepModel",
    "Timeline",
    "VersionError",
    "cache_info",
    "clear_cache",
    "count_keys",
    "errors",
    "install",
    "jit",
    "nisa",
    "nki",
    "nki_version",
    "nl",
    "record_launches",
    "report",
    "requires",
    "run_kernel",
    "run_ranks",
    "simulate",
    "strict_mode",
    "timeline",
    "trace",
    "uninstall",
]
