"""``python -m trncore.sim conform``: the runner on a miniature checkout written in nkilib's styles.

The checkout (conform_checkout/, our own code) has one case per outcome: kernels that pass at
LNC=1 and LNC=2 (an NKIObject configuration, an optional argument tested with ``!= None``, a
memset with an int literal into a float tile, an assignment of ``nl.load`` into a tile), a
kernel with a wrong result, one that breaks the 128-partition rule, an API the emulator does
not emulate, a trace that never ends, a test process that dies, a skipped case and a test file
that does not import. A miniature project (conform_project/, our own code) has its own pytest
tests of its NKI kernels, for ``--suite pytest``.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from pathlib import Path

import pytest

from trncore.sim import conform
from trncore.sim.conform_plugin import CaseTimeout, classify
from trncore.sim.conform_stubs import pairwise
from trncore.sim.errors import PartitionError

CHECKOUT = Path(__file__).parent / "conform_checkout"
PROJECT = Path(__file__).parent / "conform_project"


def test_select_keeps_the_first_cases_of_each_function() -> None:
    ids = [
        ("t.py::a[1]", False), ("t.py::a[2]", True), ("t.py::a[3]", False), ("t.py::a[4]", False),
        ("t.py::b[1]", True), ("t.py::c", False),
    ]  # fmt: skip
    assert conform.select(ids, 2) == ["t.py::a[1]", "t.py::a[3]", "t.py::b[1]", "t.py::c"]
    assert conform.select(ids, 0) == [n for n, _ in ids]


def test_pairwise_covers_every_allowed_pair() -> None:
    params = [[1, 2, 3], ["a", "b"], [True, False], [0.5, 1.5]]

    def allowed(row: list[object]) -> bool:
        return not (len(row) >= 2 and row[0] == 3 and row[1] == "b")

    rows = list(pairwise(params, allowed))
    assert all(allowed(r) for r in rows)
    for i in range(len(params)):
        for j in range(i + 1, len(params)):
            for a in params[i]:
                for b in params[j]:
                    if (i, j, a, b) == (0, 1, 3, "b"):
                        assert not any(r[0] == 3 and r[1] == "b" for r in rows)
                        continue
                    assert any(r[i] == a and r[j] == b for r in rows), (i, j, a, b)
    assert len(rows) < 3 * 2 * 2 * 2  # fewer than the full product


def test_classify_follows_the_cause_chain() -> None:
    class InferenceException(Exception):
        pass

    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as e:
                raise InferenceException(str(e)) from e
        except InferenceException as outer:
            return outer

    rule = PartitionError("partition-dim-max", "129 > 128", ("k.py", 7))
    assert classify(wrapped(rule)) == ("RULE", str(rule))
    assert classify(wrapped(NotImplementedError("nisa.x is not emulated")))[0] == "NOTIMPL"
    assert classify(wrapped(CaseTimeout("slow")))[0] == "TIMEOUT"
    assert classify(wrapped(CaseTimeout("inputs", "DATA")))[0] == "DATA"
    assert classify(wrapped(MemoryError()))[0] == "MEMORY"
    assert classify(AssertionError("mismatch"))[0] == "FAIL"
    outcome, reason = classify(wrapped(KeyError("k")))
    assert outcome == "ERROR" and reason.startswith("KeyError") and "test_conform.py" in reason
    assert classify(None) == ("PASS", "")


FAILING_THEN_NEXT = """
import numpy as np

def test_fails_holding_a_large_array():
    big = np.ones(16_000_000)  # 128 MB, every page touched
    assert big.sum() == 0

def test_times_out_holding_a_large_array():
    import gc
    import sys

    from trncore.sim.conform_plugin import CaseTimeout

    held = [np.ones(16_000_000), sys._getframe()]  # a cycle through this frame, as traces make
    gc.collect()  # ... aged into the oldest generation, as a long trace's objects are
    raise CaseTimeout("the runner's time limit")  # a BaseException: pytest keeps no sys.last_*

def test_next():
    pass
"""


def test_a_failed_case_leaves_no_memory_to_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest keeps the last failure (sys.last_value and its traceback's frames, with the case's
    # locals) until the next failure, and a BaseException (the runner's limits) in a reference
    # cycle through its frames; the plugin releases both, so each next case starts near the
    # resident memory the first failed one started at, not 128 MB above it per failure. A pytest
    # session with the plugin runs in this process (a child process would cost seconds of imports).
    (tmp_path / "test_big.py").write_text(FAILING_THEN_NEXT, encoding="utf-8")
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("TRNCORE_CONFORM_RESULTS", str(results))
    monkeypatch.chdir(tmp_path)
    args = ["-q", "-p", "trncore.sim.conform_plugin", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path), str(tmp_path / "test_big.py")]  # fmt: skip
    try:
        pytest.main(args)
    finally:
        gc.unfreeze()  # the plugin freezes the collected objects for its session
        for name in ("last_type", "last_value", "last_traceback"):
            monkeypatch.delattr(sys, name, raising=False)
    records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    done = {r["nodeid"].rsplit("::", 1)[-1]: r for r in records if r["event"] == "result"}
    assert done["test_fails_holding_a_large_array"]["outcome"] == "FAIL"
    assert done["test_times_out_holding_a_large_array"]["outcome"] == "TIMEOUT"
    assert done["test_next"]["outcome"] == "PASS"
    start = {name: r["meter"]["rss_start"] for name, r in done.items()}
    before = start["test_fails_holding_a_large_array"]
    assert start["test_times_out_holding_a_large_array"] - before < 64 * 2**20, start
    assert start["test_next"] - before < 64 * 2**20, start


PASSING_WITH_OLD_CYCLES = """
import gc
import numpy as np
import pytest


class Holder:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it
        self.data = np.ones(8 * 2**20)  # 64 MiB, resident


@pytest.mark.parametrize("i", range(6))
def test_passes(i):
    h = Holder()
    gc.collect(1)  # alive through a young collection: in the oldest generation now
    del h  # garbage the young collections before the next case do not see
"""


def test_passing_cases_do_not_drift_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # cyclic garbage of passing cases that aged into the oldest generation is freed once the
    # resident memory at a case's start has drifted DRIFT_BYTES above the last full collection;
    # without that, each of these cases starts 64 MiB above the one before
    from trncore.sim import conform_meter

    (tmp_path / "test_cycles.py").write_text(PASSING_WITH_OLD_CYCLES, encoding="utf-8")
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("TRNCORE_CONFORM_RESULTS", str(results))
    monkeypatch.setattr(conform_meter, "DRIFT_BYTES", 100 * 2**20)
    monkeypatch.setattr(conform_meter, "_baseline", None)
    monkeypatch.chdir(tmp_path)
    args = ["-q", "-p", "trncore.sim.conform_plugin", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path), str(tmp_path / "test_cycles.py")]  # fmt: skip
    try:
        pytest.main(args)
    finally:
        gc.unfreeze()
        gc.collect()
    records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    done = [r for r in records if r["event"] == "result"]
    assert [r["outcome"] for r in done] == ["PASS"] * 6
    start = [r["meter"]["rss_start"] - done[0]["meter"]["rss_start"] for r in done]
    # at most DRIFT_BYTES plus one case's array above the first start (without it: 5 x 64 MiB)
    assert max(start) < 200 * 2**20, [s // 2**20 for s in start]


WRITING_OUTPUTS = """
import os


def _write(request, name):
    outdir = request.config.getoption("--output-directory")
    os.makedirs(os.path.join(outdir, name))
    with open(os.path.join(outdir, name, "out.npy"), "wb") as fh:
        fh.write(b"x" * 1024)


def test_passes(request):
    _write(request, "out-test_passes")


def test_fails(request):
    _write(request, "out-test_fails")
    assert False
"""

OUTPUT_OPTION = """
def pytest_addoption(parser):
    parser.addoption("--output-directory")
"""


@pytest.mark.parametrize("keep_failed", [False, True])
def test_cases_leave_no_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_failed: bool) -> None:
    # the harness writes each case's arrays into --output-directory (GBs over a wide run, ~3 GB
    # of failed cases per default run): the plugin removes what every case wrote, and keeps a
    # failed case's files only when asked (conform --keep-failed); what was there before stays
    module = tmp_path / f"test_outputs_{int(keep_failed)}.py"  # one module name per pytest.main
    module.write_text(WRITING_OUTPUTS, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(OUTPUT_OPTION, encoding="utf-8")
    outdir = tmp_path / "output"
    outdir.mkdir()
    (outdir / "kept-from-before").mkdir()
    monkeypatch.setenv("TRNCORE_CONFORM_RESULTS", str(tmp_path / "results.jsonl"))
    monkeypatch.setenv("TRNCORE_CONFORM_KEEP_FAILED", "1" if keep_failed else "0")
    monkeypatch.chdir(tmp_path)
    args = ["-q", "-p", "trncore.sim.conform_plugin", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path), "--output-directory", str(outdir),
            str(module)]  # fmt: skip
    try:
        pytest.main(args)
    finally:
        gc.unfreeze()
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            monkeypatch.delattr(sys, name, raising=False)
    want = ["kept-from-before", "out-test_fails"] if keep_failed else ["kept-from-before"]
    assert sorted(p.name for p in outdir.iterdir()) == want


def test_a_killed_case_reports_no_negative_data_work() -> None:
    # the child's last phase record: inside a call entered 12 s ago, its data-work clock at 500 s
    # (the child's own accumulator, far above this process's)
    record = {"phase": "emulator", "calls": 1, "emulator_seconds": 3.0, "data_seconds": 1.5,
              "entered": time.perf_counter() - 12.0, "data_entered": 500.0}  # fmt: skip
    outcome, reason = conform._killed_for_time(70.0, record, 30.0).split(":", 1)
    assert outcome == "TIMEOUT"
    inside = float(re.search(r"; ([0-9.]+) s inside the emulator", reason).group(1))  # type: ignore[union-attr]
    assert 14.9 < inside < 20  # the 3 s of finished calls and the 12 s of the running one
    assert "(1.5 s of them data work before the call it was killed in)" in reason


def test_keep_failed_reaches_the_child() -> None:
    parser = argparse.ArgumentParser()
    conform.add_arguments(parser)
    for argv, want in (([], "0"), (["--keep-failed"], "1")):
        args = parser.parse_args([str(CHECKOUT), *argv])
        env = conform._child_env(CHECKOUT, CHECKOUT / "results.jsonl", args)
        assert env["TRNCORE_CONFORM_KEEP_FAILED"] == want


@pytest.mark.simulator
@pytest.mark.slow  # four child processes (collect, run, after the kill, after the crash): ~15 s
def test_runner_on_a_miniature_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    conform.add_arguments(parser)
    args = parser.parse_args([str(CHECKOUT), "--per-test", "0", "--timeout", "1", "--grace", "1"])
    args.workdir = tmp_path
    run = conform.run_conformance(args, echo=True)
    got = {c.nodeid.rsplit("::", 1)[-1]: c for c in run.cases}
    lines = capsys.readouterr().out.splitlines()
    for lnc in (1, 2):
        for bias in ("False", "True"):
            assert got[f"test_scale_add[{bias}-{lnc}]"].outcome == "PASS"
    assert got["test_after_crash"].outcome == "PASS"  # a new child carried on after the crash
    assert got["test_swap_and_count"].outcome == "PASS"  # sendrecv, register loop, x4 storage
    assert got["test_scale_add_large"].outcome == "SKIP"
    assert got["test_off_by_one"].outcome == "FAIL"
    rule = got["test_too_many_partitions"]
    kernels = (CHECKOUT / "src" / "minilib" / "kernels.py").read_text().splitlines()
    line = next(i for i, t in enumerate(kernels, 1) if "(129, 4)" in t)
    assert rule.outcome == "RULE" and rule.reason.endswith(f"kernels.py:{line})")
    assert got["test_not_emulated"].outcome == "NOTIMPL"
    assert got["test_never_ends"].outcome == "TIMEOUT" and got["test_never_ends"].seconds < 5
    assert got["test_process_dies"].outcome == "CRASH"
    stuck = got["test_stuck_in_one_call"]  # killed by the runner, the next child carried on
    # it never reached the emulator: the test's own work took the time
    assert stuck.outcome == "DATA" and stuck.reason.startswith("killed after")
    assert "building the test's inputs" in stuck.reason
    assert [e.nodeid for e in run.collect_errors] == ["test/integration/test_broken_import.py"]
    assert run.passed == 6 and len(run.counted) == 13
    assert lines[-2] == run.summary() and lines[-2].startswith("conformance: 6 of 13 counted")
    assert lines[-1] == run.timing() and lines[-1].startswith("timing of 6 passing cases")
    # every passing case was metered: its seconds inside the emulator are part of its seconds
    for case in (c for c in run.cases if c.outcome == "PASS"):
        inside = case.emulator_seconds
        assert inside is not None and 0 < inside <= case.seconds
    assert sum(line.startswith(("PASS", "FAIL", "RULE", "NOTIMPL", "TIMEOUT", "DATA", "CRASH", "SKIP",
                                "ERROR")) for line in lines) == 14  # fmt: skip


def _project_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    conform.add_arguments(parser)
    return parser.parse_args([str(PROJECT), "--suite", "pytest", *argv])


def test_a_project_suite_gets_its_own_defaults_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRNSCI_SIM_CACHE_MIB", raising=False)
    args = _project_args("--set", "MINIPROJ_USE_SIMULATOR=1", "--nki-version", "0.3")
    conform._defaults(args)
    assert args.tests == "tests" and args.per_test == 0  # every case of the project's tests
    env = conform._child_env(PROJECT, PROJECT / "results.jsonl", args)
    assert env["MINIPROJ_USE_SIMULATOR"] == "1" and env["TRNSCI_NKI_VERSION"] == "0.3.0"
    assert env["TRNCORE_CONFORM_SUITE"] == "pytest"
    assert "TRNSCI_SIM_CACHE_MIB" not in env  # a library's repeated kernel calls are replays
    assert env["PYTHONPATH"].split(":")[1] == str(PROJECT)  # the project's package comes first
    cmd = conform._pytest_cmd(args, [])
    assert "--test-mode" not in cmd and "--output-directory" not in cmd  # no harness options
    args = _project_args("--set", "PYTHONPATH=/opt/sibling")
    paths = conform._child_env(PROJECT, PROJECT / "results.jsonl", args)["PYTHONPATH"].split(":")
    assert paths[1:3] == [str(PROJECT), "/opt/sibling"]  # added after the project, not instead
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        conform._settings(["MINIPROJ_USE_SIMULATOR"])
    nkilib = argparse.ArgumentParser()
    conform.add_arguments(nkilib)
    args = nkilib.parse_args([str(CHECKOUT), "--workdir", str(CHECKOUT / "work")])
    conform._defaults(args)
    assert args.tests == "test/integration" and args.per_test == 2
    assert conform._child_env(CHECKOUT, CHECKOUT / "r.jsonl", args)["TRNSCI_SIM_CACHE_MIB"] == "0"
    assert "--test-mode" in conform._pytest_cmd(args, [])


@pytest.mark.simulator
@pytest.mark.slow  # two child processes (collect, run): ~10 s
def test_runner_on_a_miniature_project(tmp_path: Path) -> None:
    args = _project_args(
        "--set", "MINIPROJ_USE_SIMULATOR=1", "--target", "trn1", "--nki-version", "0.3.0"
    )
    args.workdir = tmp_path
    run = conform.run_conformance(args, echo=False)
    got = {c.nodeid.rsplit("::", 1)[-1]: c for c in run.cases}
    # the project's own package (named like an installed one), switch, target and release
    for name in ("test_imports_this_project", "test_switch_is_set", "test_target_and_release"):
        assert got[name].outcome == "PASS", got[name].reason
    assert got["test_double"].outcome == "PASS"
    inside = got["test_double"].emulator_seconds  # its nki.simulate call was metered
    assert inside is not None and 0 < inside <= got["test_double"].seconds
    assert got["test_triple"].outcome == "FAIL"
    kernels = (PROJECT / "trnblas" / "kernels.py").read_text().splitlines()
    line = next(i for i, t in enumerate(kernels, 1) if "(129, 4), dtype=nl.float32" in t)
    rule = got["test_too_tall"]
    assert rule.outcome == "RULE" and rule.reason.endswith(f"kernels.py:{line})"), rule.reason
    assert got["test_subtract_reduce"].outcome == "NOTIMPL"
    assert got["test_on_hardware"].outcome == "SKIP"
    assert run.passed == 4 and len(run.counted) == 7
    assert run.summary().endswith("1 skipped by the project's tests; 8 selected of 8 collected")
