"""pytest plugin loaded into the child process of ``python -m trncore.sim conform``.

It makes an nki-library checkout's own test harness (or, with ``--suite pytest``, a project's
own pytest tests) run on trncore.sim and records one JSON line per case in the file named by
``TRNCORE_CONFORM_RESULTS``:

- the emulator is registered as ``nki`` before the tests' ``conftest.py`` is imported; for
  nki-library, stand-ins for absent modules (:mod:`trncore.sim.conform_stubs`) too (a project's
  own suite gets none: its feature tests must see what is really absent);
- a project's ``nki.simulate(kernel)(*arrays)`` calls are metered as the harness's are;
- each test call runs under a wall-clock limit (``TRNCORE_CONFORM_TIMEOUT`` seconds, SIGALRM)
  and a resident-memory limit (``TRNCORE_CONFORM_MEMORY`` bytes, a watchdog thread reading
  ``/proc/self/statm``): crossing one raises :class:`CaseTimeout` / :class:`CaseMemoryExceeded`
  in the test, which records TIMEOUT, or MEMORY / DATA as :func:`trncore.sim.conform_meter.memory_verdict`
  decides (inside the emulator, or the test's own inputs / reference);
- a ``start`` record precedes each case, so the parent knows which case a crash interrupted, and
  a ``phase`` record marks each entry into and exit from the emulator (with the case's meter);
- each result carries the case's meter: seconds inside the emulator, bytes of its inputs and
  outputs, resident memory at entry and exit and the peaks.

The outcome classes (:func:`classify`): PASS, FAIL (ran; the results differ from the reference),
RULE (an emulator rule refused the kernel: ``NkiValidationError``), NOTIMPL (an API trncore.sim
does not emulate), TIMEOUT, MEMORY (the emulator passed the memory limit), DATA (the test's own
data passed it outside the emulator), ERROR (anything else, e.g. a bug in the checkout), SKIP.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import pytest

from trncore import config
from trncore.config import read_verbatim
from trncore.sim import conform_meter, heap
from trncore.sim.conform_stubs import install_finder
from trncore.sim.modules import install

__all__ = [
    "CaseMemoryExceeded",
    "CaseTimeout",
    "classify",
    "per_rank_inference",
    "release_exception",
    "release_failure",
    "simulate_ranks",
]


RESULTS_ENV = "TRNCORE_CONFORM_RESULTS"
TIMEOUT_ENV = "TRNCORE_CONFORM_TIMEOUT"
MEMORY_ENV = "TRNCORE_CONFORM_MEMORY"
#: A file of node ids, one a line: the cases a run child keeps of what it collects.
SELECT_ENV = "TRNCORE_CONFORM_SELECT"
#: "1": keep the files a failed case wrote into the harness's output directory (``--keep-failed``).
KEEP_FAILED_ENV = "TRNCORE_CONFORM_KEEP_FAILED"
#: "nki-library" (AWS's harness, the default) or "pytest" (a project's own suite).
SUITE_ENV = "TRNCORE_CONFORM_SUITE"


class CaseTimeout(BaseException):
    """The case ran past the runner's per-case wall-clock limit.

    ``outcome`` is ``TIMEOUT`` (the emulator had run) or ``DATA`` (the test's own inputs took
    the time), see :func:`trncore.sim.conform_meter.time_verdict`.
    """

    def __init__(self, reason: str, outcome: str = "TIMEOUT") -> None:
        super().__init__(reason)
        self.outcome = outcome


class CaseMemoryExceeded(BaseException):
    """The process's resident memory passed the runner's per-case limit.

    ``outcome`` is ``MEMORY`` (the emulator's) or ``DATA`` (the test's own data), see
    :func:`trncore.sim.conform_meter.memory_verdict`.
    """

    def __init__(self, reason: str, outcome: str = "MEMORY") -> None:
        super().__init__(reason)
        self.outcome = outcome


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def classify(exc: BaseException | None) -> tuple[str, str]:
    """``(outcome, reason)`` for a case that raised ``exc`` (None: passed)."""
    from trncore.sim.errors import NkiValidationError

    if exc is None:
        return "PASS", ""
    chain = list(_chain(exc))
    for e in chain:
        if isinstance(e, (CaseMemoryExceeded, CaseTimeout)):
            return e.outcome, _first_line(e)
    for kind, label in (
        (MemoryError, "MEMORY"),
        (NkiValidationError, "RULE"),
        (NotImplementedError, "NOTIMPL"),
    ):
        for e in chain:
            if isinstance(e, kind):
                return label, _first_line(e)
    names = {type(e).__name__ for e in chain}
    if "ValidationException" in names or isinstance(exc, AssertionError):
        # the harness's comparison against its torch reference (or a test's own assert)
        return "FAIL", _first_line(exc)
    root = chain[-1]
    return "ERROR", f"{type(root).__name__}: {_first_line(root)}{_where(root)}"


def _where(exc: BaseException) -> str:
    """`` (at file:line)`` of the innermost frame that raised ``exc``."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f" (at {os.path.basename(code.co_filename)}:{tb.tb_lineno})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(exc).__name__


def _write(record: dict[str, Any]) -> None:
    path = config.read_verbatim(RESULTS_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


class _Guard:
    """Per-case wall-clock and resident-memory limits, raised in the main thread."""

    def __init__(self, timeout: float, memory: int) -> None:
        self.timeout = timeout
        self.memory = memory
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.hit_memory = False

    def _on_alarm(self, signum: int, frame: Any) -> None:
        outcome, reason = conform_meter.time_verdict(self.timeout)
        raise CaseTimeout(reason, outcome)

    def _on_memory(self, signum: int, frame: Any) -> None:
        outcome, reason = conform_meter.memory_verdict(self.memory)
        raise CaseMemoryExceeded(reason, outcome)

    def _watch(self) -> None:
        meter = conform_meter.meter()
        while not self._stop.wait(0.05):
            rss = conform_meter.rss_bytes()
            meter.sample(rss)
            if self.memory > 0 and rss > self.memory:
                self.hit_memory = True
                os.kill(os.getpid(), signal.SIGUSR1)
                return

    def __enter__(self) -> _Guard:
        if self.timeout > 0:
            signal.signal(signal.SIGALRM, self._on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
        if self.memory > 0:
            signal.signal(signal.SIGUSR1, self._on_memory)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _limits() -> tuple[float, int]:
    timeout, memory = config.read_verbatim(TIMEOUT_ENV, "0"), config.read_verbatim(MEMORY_ENV, "0")
    return float(timeout or 0), int(memory or 0)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: Any, args: Any) -> None:
    # before the checkout's conftest is imported: stand-ins for absent modules, and the
    # emulator as ``nki`` (the harness imports nki.isa before its simulation setup aliases nki)
    if read_verbatim(SUITE_ENV, "nki-library") == "pytest":
        install(force=True)  # the project's ``import nki`` is the emulator, even beside AWS's
        _meter_simulate()
    else:
        install_finder()
        install()
    # each instruction's NumPy temporaries reuse the heap instead of fresh pages, from the
    # first case on (trncore.sim.heap; TRNSCI_SIM_HEAP=system leaves glibc's settings alone)
    heap.configure()


def _meter_simulate() -> None:
    """Meter the emulated ``nki.simulate(kernel)(*args)`` calls of a project's own tests, as the
    nki-library harness's ``cpu_simulate`` calls are (:mod:`trncore.sim.conform_stubs`)."""
    from trncore.sim import modules

    simulate = modules.nki.simulate
    if getattr(simulate, "metered", False):
        return

    def metered(kernel: Any, *options: Any, **settings: Any) -> Callable[..., Any]:
        run = simulate(kernel, *options, **settings)

        def call(*args: Any, **kwargs: Any) -> Any:
            with conform_meter.emulator_call(args, kwargs) as result:
                out = run(*args, **kwargs)
                result(out)
            return out

        return call

    metered.metered = True  # type: ignore[attr-defined]
    metered.__doc__ = simulate.__doc__
    modules.nki.simulate = metered  # type: ignore[attr-defined]


class _XdistHookspecs:
    """pytest-xdist's hook the harness's conftest implements, declared when xdist is absent."""

    @pytest.hookspec
    def pytest_configure_node(self, node: Any) -> None:
        """Configure a worker node (pytest-xdist)."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("xdist"):
        pluginmanager.add_hookspecs(_XdistHookspecs)


def pytest_sessionstart(session: pytest.Session) -> None:
    # The harness's simulation mode skips compilation, which is what sets
    # Orchestrator._compiled_kernel, then reads it after inference (nki-library 2026-04-13):
    # give the attribute its "nothing compiled" value so the harness goes on to validation.
    import sys

    module = sys.modules.get("test.utils.test_orchestrator")
    orchestrator = getattr(module, "Orchestrator", None)
    if orchestrator is not None and not hasattr(orchestrator, "_compiled_kernel"):
        orchestrator._compiled_kernel = None
    original = getattr(orchestrator, "_run_simulator_inference", None)
    if orchestrator is not None and original is not None and not getattr(original, "per_rank", False):
        orchestrator._run_simulator_inference = per_rank_inference(module, original)


def per_rank_inference(module: Any, original: Any) -> Any:
    """The harness's simulation step, extended to collective tests (``collective_ranks > 1``).

    nki-library's simulation mode calls the simulator once with ``kernel_input`` as keyword
    arguments; its collective tests pass a per-rank input generator there (``for_rank(r)``) and
    a rank count in ``inference_args.collective_ranks``, and its validator reads rank ``r``'s
    outputs from ``output_worker_{r}/`` of the inference artifacts, as a hardware run leaves
    them. For such tests every rank runs in this process (:func:`trncore.sim.runner.run_ranks`)
    and each rank's outputs, named after the test's golden outputs for that rank, are written
    where the validator looks; other tests take the harness's own path.
    """

    def run(self: Any, kernel_under_test: Any) -> Any:
        ranks = int(getattr(kernel_under_test.inference_args, "collective_ranks", 1) or 1)
        if ranks <= 1:
            return original(self, kernel_under_test)
        try:
            per_rank = simulate_ranks(kernel_under_test, ranks, module.normalize_golden_output)
            tensors = {
                f"output_worker_{rank}/{name}": value
                for rank, outputs in enumerate(per_rank)
                for name, value in outputs.items()
            }
            base = os.path.join(self.fs_config.artifacts_output_directory_path, module.INF_ARTIFACT_DIR_NAME)
            for rank in range(ranks):
                os.makedirs(os.path.join(base, f"output_worker_{rank}"), exist_ok=True)
            return self._dump_output_tensors(tensors)
        except Exception as exc:
            raise module.InferenceException(str(exc)) from exc

    run.per_rank = True  # type: ignore[attr-defined]
    return run


def simulate_ranks(
    kernel_under_test: Any, ranks: int, golden_for: Callable[..., Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Run a collective test's kernel as ``ranks`` ranks; each rank's outputs by golden name.

    ``kernel_input`` is a dict (the same for every rank) or a per-rank generator
    (``for_rank(r)``); the launch grid is the test's ``logical_nc_config``; the outputs are
    matched in order to the golden outputs ``golden_for(golden_output, rank_id=r)`` gives for the
    rank (the harness's ``normalize_golden_output``) and given their dtypes, as the harness does
    for one rank.
    """
    import numpy as np

    from trncore.sim.runner import run_ranks

    given = kernel_under_test.kernel_input or {}
    inputs = [given.for_rank(r) if hasattr(given, "for_rank") else dict(given) for r in range(ranks)]
    inputs = [{k.removesuffix(".must_alias_input"): v for k, v in one.items()} for one in inputs]
    func = getattr(kernel_under_test.kernel_func, "func", kernel_under_test.kernel_func)
    lnc = int(kernel_under_test.compiler_input.logical_nc_config)
    arrays = [v for one in inputs for v in one.values() if isinstance(v, np.ndarray)]
    with conform_meter.emulator_call(arrays, {}) as result:
        results = run_ranks(func, inputs, lnc=lnc)
        result(tuple(x for r in results for x in (r if isinstance(r, tuple) else (r,))))
    golden = kernel_under_test.validation_args.golden_output
    per_rank = []
    for rank, out in enumerate(results):
        outputs = [] if out is None else list(out) if isinstance(out, (tuple, list)) else [out]
        expected = golden_for(golden, rank_id=rank)
        if len(outputs) != len(expected):
            raise RuntimeError(
                f"rank {rank}: the kernel returned {len(outputs)} outputs, the test expects "
                f"{len(expected)} ({', '.join(expected)})"
            )
        per_rank.append(
            {name: np.asarray(o, dtype=g.dtype) for (name, g), o in zip(expected.items(), outputs)}
        )
    return per_rank


#: Markers by which the harness runs a case through the Neuron compiler instead of the simulator.
COMPILER_MARKERS = ("trace_only", "compile_only", "compile_and_infer")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    harness = read_verbatim(SUITE_ENV, "nki-library") != "pytest"
    for item in items if harness else ():
        marker = next((m for m in COMPILER_MARKERS if item.get_closest_marker(m)), None)
        if marker is not None:
            reason = f"marked {marker}: the harness runs it through the Neuron compiler, not a simulator"
            item.add_marker(pytest.mark.skip(reason=reason))
    select = read_verbatim(SELECT_ENV)  # this hook's `config` is pytest's
    if select and not config.getoption("collectonly", False):
        # The run child collects what the collect child did (same folder, same -k) and keeps the
        # selected cases: nki-library draws some parameters with `random` at import time, so
        # importing only the selected files would draw other parameters (other node ids).
        with open(select, encoding="utf-8") as fh:
            wanted = set(fh.read().splitlines())
        keep = [item for item in items if item.nodeid in wanted]
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        return
    if not config.getoption("collectonly", False):
        return
    for item in items:
        skip = item.get_closest_marker("skip")
        _write({"event": "collected", "nodeid": item.nodeid, "skip": skip is not None})


def pytest_collection_finish(session: pytest.Session) -> None:
    # nki-library's harness collects thousands of parametrized cases; every full collection of
    # the cyclic garbage collector then walks them all (0.65 s each, 14 s of a 21 s attention
    # case). They live until the session ends: move them out of the collector's sight.
    import gc

    gc.collect()
    gc.freeze()


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        text = str(report.longrepr).strip().splitlines()
        reason = next((ln for ln in reversed(text) if ln.startswith("E ")), text[-1] if text else "")
        _write({"event": "collect-error", "nodeid": report.nodeid, "reason": reason[:300]})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    conform_meter.release_before_case()
    _write({"event": "start", "nodeid": item.nodeid})
    conform_meter.reset()

    def phase(m: conform_meter.CaseMeter) -> None:
        _write({"event": "phase", "nodeid": item.nodeid, "meter": m.record()})

    conform_meter.on_phase = phase
    item.stash[_START] = time.perf_counter()
    outdir = _output_directory(item.config)
    before = _entries(outdir)
    yield
    conform_meter.on_phase = None
    failed = item.stash.get(_FAILED, False)
    if not (failed and config.read_verbatim(KEEP_FAILED_ENV, "0") == "1"):
        _remove_new_entries(outdir, before)
    if release_failure() or failed:
        conform_meter.release_memory(full=True)


def _output_directory(config: pytest.Config) -> str | None:
    """The harness's ``--output-directory`` (the runner passes one in its work directory)."""
    try:
        value = config.getoption("--output-directory")
    except (ValueError, AttributeError):
        return None
    return str(value) if value else None


def _entries(outdir: str | None) -> set[str]:
    if outdir is None or not os.path.isdir(outdir):
        return set()
    return set(os.listdir(outdir))


def _remove_new_entries(outdir: str | None, before: set[str]) -> None:
    """Delete what a case added to the output directory.

    The harness writes every case's inputs, outputs and golden arrays there; a run over all cases
    of a few kernels left 5-6 GB (334 attention cases) and filled the disk, and the files of the
    default sample's failed cases alone came to about 3 GB per run (its large-input TIMEOUT and
    DATA cases), left in a temporary directory nobody cleans. A failed case's files stay only
    when the run asks for them (``--keep-failed``; re-run the one case with ``-k`` to look at it).
    """
    import shutil

    if outdir is None:
        return
    for name in _entries(outdir) - before:
        path = os.path.join(outdir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except OSError:
                pass


def release_exception(exc: BaseException) -> None:
    """Clear the frames of ``exc``'s traceback and of every exception it chains.

    A failed case's traceback holds the frames it ran through, and their locals: in nkilib's
    tests the inputs, the emulator's trace (instructions, tiles) and the torch reference, GBs.
    The frames also form reference cycles with the exception (a frame's local naming it), which
    only a full collection frees, once they have aged into the oldest generation. Clearing the
    frames drops their locals at once; the report pytest already made keeps the text.
    """
    import traceback

    for e in _chain(exc):
        if e.__traceback__ is not None:
            traceback.clear_frames(e.__traceback__)
            e.__traceback__ = None


def release_failure() -> bool:
    """Drop what pytest keeps of the last failure; True when there was something to drop.

    pytest keeps the last ``Exception`` of a test call in ``sys.last_type/last_value/
    last_traceback`` (and ``sys.last_exc``) until the next one, so the next cases started that
    much higher and were blamed for it (DATA). Its frames are cleared
    (:func:`release_exception`) and the references dropped. (The runner's own limits,
    :class:`CaseTimeout` and :class:`CaseMemoryExceeded`, are ``BaseException``: pytest does not
    keep those there; :func:`pytest_runtest_makereport` clears them from the call's report.)
    """
    import sys
    import traceback

    found = False
    for name in ("last_value", "last_exc"):
        exc = getattr(sys, name, None)
        if isinstance(exc, BaseException):
            found = True
            release_exception(exc)
    tb = getattr(sys, "last_traceback", None)
    if tb is not None:
        found = True
        traceback.clear_frames(tb)
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    return found


_START = pytest.StashKey[float]()
_OUTCOME = pytest.StashKey[tuple[str, str]]()
_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    timeout, memory = _limits()
    with _Guard(timeout, memory):
        outcome = yield
    exc = outcome.excinfo[1] if outcome.excinfo else None
    item.stash[_OUTCOME] = classify(exc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    elapsed = time.perf_counter() - item.stash.get(_START, time.perf_counter())
    if report.when == "setup" and (report.skipped or report.failed):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            result = ("SKIP", str(reason)[:300])
        else:
            result = classify(call.excinfo.value if call.excinfo else None)
            if result[0] == "PASS":
                result = ("ERROR", "setup failed")
        _write({"event": "result", "nodeid": item.nodeid, "outcome": result[0],
                "reason": result[1], "seconds": elapsed,
                "meter": conform_meter.meter().record()})  # fmt: skip
    elif report.when == "call":
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            result = ("SKIP", str(reason)[:300])
        else:
            result = item.stash.get(_OUTCOME, ("PASS", "") if report.passed else ("ERROR", ""))
            if report.passed:
                result = ("PASS", "")
        _write({"event": "result", "nodeid": item.nodeid, "outcome": result[0],
                "reason": result[1], "seconds": elapsed,
                "meter": conform_meter.meter().record()})  # fmt: skip
    if call.excinfo is not None and not report.skipped:
        # the report holds the failure as text now: free the frames (and the case's data)
        item.stash[_FAILED] = True
        release_exception(call.excinfo.value)
