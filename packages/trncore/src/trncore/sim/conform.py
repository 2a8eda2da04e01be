"""``python -m trncore.sim conform PATH``: run an nki-library checkout's own tests on trncore.sim.

With ``--suite pytest`` PATH is any project whose own pytest tests run NKI kernels through
``import nki`` (``nki.simulate(kernel)(*arrays)``, or calling a kernel): the same runner, with
trncore.sim as ``nki``, the project's source first on the import path (so a package named like
an installed one is the project's), ``--set NAME=VALUE`` for the project's own switches, and
no nki-library harness options.

AWS's NKI Library (github aws-neuron/nki-library) is not on PyPI and its code does not belong in
this repository, so conformance is measured against a checkout the user points at. The runner
drives the checkout's own pytest harness in its CPU-simulation mode (``--test-mode simulation``:
the harness aliases ``nki`` to a simulator package and calls ``nki.cpu_simulate(kernel)[lnc]``;
here that package is trncore.sim), on the harness's own shapes, launch grids, torch references
and tolerances. It prints one line per case and a pass count.

Steps: collect in a child process (the checkout's conftest decides platform marks and skips its
slow simulation cases), keep at most ``--per-test`` cases of each test function, run them in a
child process with a per-case time limit and memory guard (:mod:`trncore.sim.conform_plugin`);
if the child dies (a crash or the kernel's out-of-memory killer), the interrupted case is
recorded as CRASH and a new child continues with the rest.

Counted cases are those that ran (not SKIP); the pass count is PASS over counted.
This runner is for users and for us, by hand: it is never part of CI (the checkout is not here).
It needs torch, which the emulator alone does not (``pip install "trncore[torch]"``): the harness
builds its inputs and references with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trncore import platform

if TYPE_CHECKING:
    from trncore.sim.conform_meter import CaseMeter

__all__ = ["CaseResult", "ConformRun", "add_arguments", "main", "run_conformance", "select"]

OUTCOMES = ("PASS", "FAIL", "RULE", "NOTIMPL", "TIMEOUT", "MEMORY", "DATA", "CRASH", "ERROR", "SKIP")


@dataclass
class CaseResult:
    """One case: pytest node id, outcome (see :data:`OUTCOMES`), reason, seconds.

    ``meter`` holds the case's :class:`trncore.sim.conform_meter.CaseMeter` fields when the child
    reported them: seconds inside the emulator, input/output bytes, resident memory.
    """

    nodeid: str
    outcome: str
    reason: str = ""
    seconds: float = 0.0
    meter: dict[str, object] | None = None

    @property
    def emulator_seconds(self) -> float | None:
        """Seconds the case spent inside the emulator (None when not measured)."""
        if not self.meter:
            return None
        return float(str(self.meter.get("emulator_seconds", 0.0)))

    @property
    def data_seconds(self) -> float | None:
        """Of :attr:`emulator_seconds`, those spent in data work: the instructions' NumPy
        arithmetic and copies (:mod:`trncore.sim.work_clock`); None when not measured."""
        if not self.meter or "data_seconds" not in self.meter:
            return None
        return float(str(self.meter["data_seconds"]))

    def line(self) -> str:
        """The case as the runner prints it: outcome, seconds, node id, the seconds inside the
        emulator and their data work (when the case reached it), and (unless it passed) why."""
        reason = f"  {self.reason}" if self.reason and self.outcome != "PASS" else ""
        inside, data = self.emulator_seconds, self.data_seconds
        emulator = ""
        if inside and data is not None:
            emulator = f"  [emulator {inside:.2f} s, data work {data:.2f} s]"
        return f"{self.outcome:<8}{self.seconds:7.2f}s  {self.nodeid}{emulator}{reason}"


@dataclass
class ConformRun:
    """All results of one run and the collection errors (files the harness could not import)."""

    cases: list[CaseResult] = field(default_factory=list)
    collect_errors: list[CaseResult] = field(default_factory=list)
    selected: int = 0
    collected: int = 0
    #: who skipped the SKIP cases, for the summary: nki-library's harness, or a project's tests
    skipped_by: str = "the harness"

    @property
    def counted(self) -> list[CaseResult]:
        """Cases that count towards the pass rate: all but the harness's own skips, plus collection errors."""
        return [c for c in self.cases if c.outcome != "SKIP"] + self.collect_errors

    @property
    def passed(self) -> int:
        """How many cases matched their reference."""
        return sum(c.outcome == "PASS" for c in self.cases)

    def summary(self) -> str:
        """The closing line: passes of counted cases, the count per outcome, skips and selection."""
        by: dict[str, int] = {}
        for c in self.counted:
            by[c.outcome] = by.get(c.outcome, 0) + 1
        parts = ", ".join(f"{k} {by[k]}" for k in OUTCOMES if k in by)
        skipped = sum(c.outcome == "SKIP" for c in self.cases)
        return (
            f"conformance: {self.passed} of {len(self.counted)} counted cases pass ({parts}); "
            f"{skipped} skipped by {self.skipped_by}; {self.selected} selected of {self.collected} collected"
        )

    def timing(self) -> str:
        """Per-case seconds of the passing cases: whole case and inside the emulator."""
        passed = [c for c in self.cases if c.outcome == "PASS"]
        if not passed:
            return "timing: no passing case"
        whole = sorted(c.seconds for c in passed)
        emu = sorted(e for c in passed if (e := c.emulator_seconds) is not None)
        data = sorted(d for c in passed if (d := c.data_seconds) is not None)

        def describe(xs: list[float]) -> str:
            over = sum(x > 1.0 for x in xs)
            return f"median {_median(xs):.2f} s, max {xs[-1]:.2f} s, {over} over 1 s"

        text = f"timing of {len(passed)} passing cases: whole case {describe(whole)}"
        if emu:
            text += f"; inside the emulator {describe(emu)}"
        if data:
            # the part no faster tracer removes (trncore.sim.work_clock)
            text += f"; of which data work median {_median(data):.2f} s, max {data[-1]:.2f} s"
        return text


def _median(xs: Sequence[float]) -> float:
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2


def _function_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def select(nodeids: Sequence[tuple[str, bool]], per_test: int) -> list[str]:
    """The first ``per_test`` not-skipped cases of each test function, in collection order.

    ``nodeids`` are ``(nodeid, skipped)`` pairs; ``per_test <= 0`` keeps every case. Skipped cases
    (the harness's own slow-simulation skips) are kept only when a function has no other case,
    so that the function shows up as skipped in the listing.
    """
    if per_test <= 0:
        return [n for n, _ in nodeids]
    chosen: dict[str, list[str]] = {}
    skipped_first: dict[str, str] = {}
    for nodeid, skipped in nodeids:
        fn = _function_of(nodeid)
        if skipped:
            skipped_first.setdefault(fn, nodeid)
            continue
        bucket = chosen.setdefault(fn, [])
        if len(bucket) < per_test:
            bucket.append(nodeid)
    order = {n: i for i, (n, _) in enumerate(nodeids)}
    out = [n for bucket in chosen.values() for n in bucket]
    out += [n for fn, n in skipped_first.items() if fn not in chosen]
    return sorted(out, key=order.__getitem__)


#: The kinds of test suite the runner drives (``--suite``).
SUITES = ("nki-library", "pytest")
#: Tells the child's plugin which suite it runs in (the nki-library harness needs stand-ins).
SUITE_ENV = "TRNCORE_CONFORM_SUITE"


def _project_suite(args: argparse.Namespace) -> bool:
    """Whether the run drives a project's own pytest suite (``--suite pytest``), not nki-library's
    harness (callers that build the namespace themselves may leave ``suite`` out)."""
    return getattr(args, "suite", "nki-library") == "pytest"


def _settings(pairs: Sequence[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` options as a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--set expects NAME=VALUE (an environment variable), got {pair!r}")
        out[name.strip()] = value
    return out


def _child_env(checkout: Path, results: Path, args: argparse.Namespace) -> dict[str, str]:
    from trncore.config import NKI_VERSION_ENV, TARGET_ENV, process_environment

    env = process_environment()
    paths = [str(checkout / "src"), str(checkout)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TRNCORE_CONFORM_RESULTS"] = str(results)
    env["TRNCORE_CONFORM_TIMEOUT"] = str(args.timeout)
    env["TRNCORE_CONFORM_MEMORY"] = str(int(args.memory * 2**30))
    env[TARGET_ENV] = args.target
    # the harness seeds its random case sampling from this variable: same cases every run
    env.setdefault("NEURON_PYTHONHASHSEED", str(args.seed))
    if not _project_suite(args):
        # each case calls its kernel once: the emulator's program cache would only hold the
        # case's memory (its HBM image) while the harness computes its reference. A project's
        # own tests call a kernel many times (a library's host loop over tiles): they keep it.
        env.setdefault("TRNSCI_SIM_CACHE_MIB", "0")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["TRNCORE_CONFORM_KEEP_FAILED"] = "1" if getattr(args, "keep_failed", False) else "0"
    env[SUITE_ENV] = "pytest" if _project_suite(args) else "nki-library"
    if getattr(args, "nki_version", None):
        from trncore.sim.versions import resolve

        env[NKI_VERSION_ENV] = resolve(args.nki_version)
    settings = _settings(getattr(args, "set", None) or ())
    extra_path = settings.pop("PYTHONPATH", "")
    if extra_path:
        # after the project's own source, before what the shell had: e.g. the release of a
        # sibling library the project imports, where this environment has one of that name
        paths.insert(2, extra_path)
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(settings)
    return env


def _inifile(checkout: Path) -> list[str]:
    """``-c FILE`` for the checkout's pytest.ini (nki-library keeps it in test/)."""
    for candidate in (checkout / "test" / "pytest.ini", checkout / "pytest.ini"):
        if candidate.is_file():
            return ["-c", str(candidate)]
    return []


def _pytest_cmd(args: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    common = [
        sys.executable, "-m", "pytest", "-p", "trncore.sim.conform_plugin",
        "-p", "no:cacheprovider", "-q", "--no-header", "-rN", "--tb=no",
        "--rootdir", str(args.path.resolve()), "--continue-on-collection-errors",
    ]  # fmt: skip
    if _project_suite(args):
        # the project's own configuration (its pytest.ini / pyproject, found from the rootdir)
        return [*common, *extra]
    return [
        *common,
        "--test-mode", "simulation", "--platform-target", args.target,
        *_inifile(args.path.resolve()),
        "--output-directory", str(args.workdir / "output"),
        "-o", f"artifacts_dir={args.workdir / 'artifacts'}",
        *extra,
    ]  # fmt: skip


def _read(results: Path) -> list[dict[str, object]]:
    if not results.exists():
        return []
    out = []
    for line in results.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _run_child(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, limit: float) -> int:
    with open(log, "ab") as fh:
        try:
            proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=fh, stderr=fh, timeout=limit)
        except subprocess.TimeoutExpired:
            return -9
    return proc.returncode


def _rss(pid: int) -> int:
    from trncore.sim.conform_meter import rss_bytes

    return rss_bytes(pid)


def _last_meter(last_meter: dict[str, object] | None) -> CaseMeter:
    """The meter of the case's last ``phase`` record (none: it never reached the emulator)."""
    from trncore.sim.conform_meter import CaseMeter

    if last_meter is None:
        return CaseMeter(phase="inputs")
    fields = {k: v for k, v in last_meter.items() if k in CaseMeter.__dataclass_fields__}
    fields["from_record"] = True
    return CaseMeter(**fields)  # type: ignore[arg-type]


def _killed_for_memory(rss: int, last_meter: dict[str, object] | None, limit: int) -> str:
    """``OUTCOME:reason`` for a child killed past the hard memory limit, judged by its last phase."""
    from trncore.sim.conform_meter import memory_verdict

    outcome, reason = memory_verdict(limit, _last_meter(last_meter))
    return f"{outcome}:killed at {rss / 2**30:.1f} GiB resident; {reason}"


def _killed_for_time(elapsed: float, last_meter: dict[str, object] | None, limit: float) -> str:
    """``OUTCOME:reason`` for a child killed stuck in one call, judged by its last phase."""
    from trncore.sim.conform_meter import time_verdict

    outcome, reason = time_verdict(limit, _last_meter(last_meter))
    return f"{outcome}:killed after {elapsed:.0f} s (stuck in one call); {reason}"


class _Watch:
    """Runs one child over ``todo`` cases, streams its results, kills it past the hard limits.

    The child stops a case itself (SIGALRM, memory watchdog) between Python bytecodes; a case
    stuck inside one long NumPy/torch call is killed from here after twice its time limit plus
    ``--grace`` seconds, or when the child's resident memory passes 1.25 times the limit, and recorded as
    TIMEOUT / MEMORY (or DATA, judged by the case's last ``phase`` record); a new child then
    carries on with the remaining cases.
    """

    def __init__(self, args: argparse.Namespace, run: ConformRun, echo: bool) -> None:
        self.args, self.run, self.echo = args, run, echo
        self.done: set[str] = set()

    def _record(self, case: CaseResult) -> None:
        self.done.add(case.nodeid)
        self.run.cases.append(case)
        if self.echo:
            print(case.line(), flush=True)

    def child(self, cmd: list[str], env: dict[str, str], cwd: Path, log: Path, results: Path) -> None:
        hard_time = 2 * self.args.timeout + self.args.grace if self.args.timeout > 0 else None
        hard_mem = int(1.25 * self.args.memory * 2**30) if self.args.memory > 0 else None
        started: tuple[str, float] | None = None
        last_meter: dict[str, object] | None = None
        seen = 0
        killed: str | None = None
        with open(log, "ab") as fh:
            proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=fh, stderr=fh)
            while True:
                finished = proc.poll() is not None
                records = _read(results)
                for r in records[seen:]:
                    if r["event"] == "start":
                        started = (str(r["nodeid"]), time.monotonic())
                        last_meter = None
                    elif r["event"] == "phase":
                        last_meter = r["meter"]  # type: ignore[assignment]
                    elif r["event"] == "result" and r["nodeid"] not in self.done:
                        self._record(CaseResult(str(r["nodeid"]), str(r["outcome"]),
                                                str(r["reason"]), float(str(r["seconds"])),
                                                r.get("meter")))  # type: ignore[arg-type]  # fmt: skip
                        started = None
                seen = len(records)
                if finished:
                    break
                if started is not None:
                    elapsed = time.monotonic() - started[1]
                    if hard_time is not None and elapsed > hard_time:
                        killed = _killed_for_time(elapsed, last_meter, self.args.timeout)
                    elif hard_mem is not None and (rss := _rss(proc.pid)) > hard_mem:
                        limit = int(self.args.memory * 2**30)
                        killed = _killed_for_memory(rss, last_meter, limit)
                    if killed is not None:
                        proc.kill()
                        proc.wait()
                        break
                time.sleep(0.2)
        if started is not None and started[0] not in self.done:
            outcome, _, reason = (killed or "CRASH:the test process died (see pytest.log)").partition(":")
            elapsed = time.monotonic() - started[1]
            self._record(CaseResult(started[0], outcome, reason, elapsed, last_meter))


def _require_torch() -> None:
    """Stop with what to install where torch is absent (trncore installed alone)."""
    if not platform.torch_available():
        why = "nki-library's tests build their inputs and references with torch"
        raise SystemExit(platform.torch_message("python -m trncore.sim conform", why))


def _defaults(args: argparse.Namespace) -> None:
    """Fill the options whose default depends on ``--suite`` (nki-library: its integration
    tests, 2 cases per test function; a project's own suite: ``tests``, every case)."""
    plain = _project_suite(args)
    if getattr(args, "tests", None) is None:
        args.tests = "tests" if plain else "test/integration"
    if getattr(args, "per_test", None) is None:
        args.per_test = 0 if plain else 2


def run_conformance(args: argparse.Namespace, echo: bool = True) -> ConformRun:
    """Collect, select and run the checkout's cases; returns every result (prints lines if echo)."""
    _defaults(args)
    plain = _project_suite(args)
    if not plain:
        _require_torch()
    checkout: Path = args.path.resolve()
    tests = checkout / args.tests
    if not tests.is_dir():
        expected = "a project with its tests there" if plain else "an nki-library checkout"
        raise SystemExit(f"{tests} is not a directory (expected {expected})")
    run = ConformRun(skipped_by="the project's tests" if plain else "the harness")
    results = args.workdir / "results.jsonl"
    log = args.workdir / "pytest.log"
    env = _child_env(checkout, results, args)
    collect_extra = ["--collect-only", str(tests)] + (["-k", args.k] if args.k else [])
    results.unlink(missing_ok=True)
    _run_child(_pytest_cmd(args, collect_extra), env, checkout, log, limit=900)
    records = _read(results)
    collected = [(str(r["nodeid"]), bool(r["skip"])) for r in records if r["event"] == "collected"]
    for r in records:
        if r["event"] == "collect-error" and all(e.nodeid != r["nodeid"] for e in run.collect_errors):
            err = CaseResult(str(r["nodeid"]), "ERROR", f"collection: {r['reason']}")
            run.collect_errors.append(err)
            if echo:
                print(err.line(), flush=True)
    run.collected = len(collected)
    todo = select(collected, args.per_test)
    run.selected = len(todo)
    watch = _Watch(args, run, echo)
    selection = args.workdir / "selected.txt"
    run_env = dict(env, TRNCORE_CONFORM_SELECT=str(selection))
    while todo:
        results.unlink(missing_ok=True)
        selection.write_text("\n".join(todo) + "\n", encoding="utf-8")
        # the same collection as above, narrowed by the plugin to ``todo`` (see SELECT_ENV)
        run_extra = ["-p", "no:randomly", str(tests)] + (["-k", args.k] if args.k else [])
        watch.child(_pytest_cmd(args, run_extra), env=run_env, cwd=checkout, log=log, results=results)
        remaining = [n for n in todo if n not in watch.done]
        if len(remaining) == len(todo):
            # the child died before it started a case (nothing to blame): record the first
            watch._record(CaseResult(remaining[0], "CRASH", "the test process died (see pytest.log)"))
            remaining = remaining[1:]
        todo = remaining
    if echo:
        print(run.summary(), flush=True)
        print(run.timing(), flush=True)
    return run


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``conform`` subcommand's options."""
    p.add_argument("path", type=Path,
                   help="an nki-library checkout (github aws-neuron/nki-library), or with "
                        "--suite pytest a project whose tests run NKI kernels")  # fmt: skip
    p.add_argument("--suite", default="nki-library", choices=SUITES,
                   help="nki-library: AWS's harness in its simulation mode (default); pytest: "
                        "the project's own pytest tests, with trncore.sim as nki")  # fmt: skip
    p.add_argument("--tests", default=None,
                   help="test folder inside PATH (default test/integration; tests with "
                        "--suite pytest)")  # fmt: skip
    p.add_argument("--target", default="trn2", choices=("trn1", "trn2"),
                   help="the chip the cases are checked against (default trn2)")  # fmt: skip
    p.add_argument("--nki-version", default=None, metavar="X.Y.Z",
                   help="the NKI release the kernels are checked against (default: "
                        "TRNSCI_NKI_VERSION or the newest emulated)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the tests, e.g. a project's switch to its "
                        "simulator path (repeatable); PYTHONPATH=DIR adds DIR after the "
                        "project's source")  # fmt: skip
    p.add_argument("--per-test", type=int, default=None, metavar="N",
                   help="cases kept per test function (0: all); default 2 (0 with "
                        "--suite pytest)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per case (default 30)")
    p.add_argument("--grace", type=float, default=30.0,
                   help="kill a case stuck in one call after 2 x timeout + this (default 30)")  # fmt: skip
    p.add_argument("--memory", type=float, default=8.0, help="GiB resident per case (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the harness's case sampling")
    p.add_argument("-k", default=None, help="pytest -k expression to narrow the cases")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where results.jsonl and pytest.log go (default: a new temporary dir)")  # fmt: skip
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    p.add_argument("--keep-failed", action="store_true",
                   help="keep the arrays the harness wrote for failed cases (WORKDIR/output; "
                        "GBs for large cases); by default every case's are deleted")  # fmt: skip


def main(args: argparse.Namespace) -> int:
    """Run the ``conform`` subcommand; exit code 0 when every counted case passes."""
    _defaults(args)
    if not _project_suite(args):
        _require_torch()
    _settings(args.set)  # a malformed --set stops here, before any child runs
    if args.workdir is None:
        args.workdir = Path(tempfile.mkdtemp(prefix="trncore-conform-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    what = "tests" if _project_suite(args) else "conformance run"
    print(f"{what} of {args.path} on trncore.sim ({args.target}); logs in {args.workdir}")
    start = time.perf_counter()
    run = run_conformance(args)
    print(f"wall time {time.perf_counter() - start:.0f} s")
    if args.json is not None:
        payload = {
            "summary": run.summary(),
            "timing": run.timing(),
            "cases": [c.__dict__ for c in run.collect_errors + run.cases],
        }
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0 if run.passed == len(run.counted) else 1
