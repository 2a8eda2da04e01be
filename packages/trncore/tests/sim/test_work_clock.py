"""The conformance meter's split of the emulator's seconds into data work and tracing.

Data work is what a replay of the recorded program does (the instructions' NumPy work, sentinel
fills, argument and output copies: trncore.sim.work_clock); tracing is the rest. Each test runs a
kernel whose results are checked against NumPy, so the seconds measured are those of a real run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trncore.sim import conform_meter, nisa, nl
from trncore.sim.conform import CaseResult, ConformRun
from trncore.sim.runner import clear_cache, run_kernel

pytestmark = pytest.mark.simulator


def scale_rows(x, rounds: int):
    """``rounds`` passes of (load, scale by 2, add 1, store) over ``x``'s 128-row tiles."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in range(rounds):
        for i in range(rows // 128):
            t = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=(x if r == 0 else out)[i * 128 : (i + 1) * 128, :])
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
    return out


def halves(x):
    """Each core of an LNC=2 launch doubles its half of the rows."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[me * half : (me + 1) * half, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=t)
    return out


def _expected(x: np.ndarray, rounds: int) -> np.ndarray:
    for _ in range(rounds):
        x = x * np.float32(2) + np.float32(1)
    return x


def _metered(x: np.ndarray, rounds: int) -> conform_meter.CaseMeter:
    m = conform_meter.reset()
    with conform_meter.emulator_call([x], {}) as result:
        got = run_kernel(scale_rows, [x, rounds], target="trn2")
        result(got)
    np.testing.assert_array_equal(got, _expected(x, rounds))
    return m


def test_a_trace_splits_its_seconds_into_data_work_and_tracing() -> None:
    clear_cache()
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    m = _metered(x, 8)  # 48 small instructions: mostly tracing
    assert 0 < m.data_seconds <= m.emulator_seconds
    assert m.tracing_seconds == pytest.approx(m.emulator_seconds - m.data_seconds, abs=1e-12)
    record = m.record()
    assert record["data_seconds"] == m.data_seconds
    assert record["tracing_seconds"] == m.tracing_seconds
    assert "data work" in m.where()
    # the same key again: a replay of the recorded program, no kernel Python runs; its data
    # work is the replay itself (the rest is binding the arguments and finding the program)
    again = _metered(x, 8)
    assert 0 < again.data_seconds <= again.emulator_seconds


def test_large_tiles_are_mostly_data_work_small_tiles_mostly_tracing() -> None:
    # 96 instructions on 128 x 8 tiles (tens of microseconds of Python apiece, a microsecond of
    # NumPy) against 6 on 128 x 8192 float32 tiles (4 MiB each: milliseconds of NumPy apiece).
    # Wall-clock seconds: a slice lost to another process on a busy machine lands in either
    # part, so each kernel is traced three times and the least-disturbed share is compared.
    rng = np.random.default_rng(1)
    small_x = rng.standard_normal((2048, 8)).astype(np.float32)
    big_x = rng.standard_normal((128, 8192)).astype(np.float32)

    def share(x: np.ndarray) -> list[float]:
        shares = []
        for _ in range(3):
            clear_cache()
            m = _metered(x, 2)
            shares.append(m.data_seconds / m.emulator_seconds)
        return shares

    assert min(share(small_x)) < 0.5
    assert max(share(big_x)) > 0.5


def test_data_work_of_an_lnc2_trace_is_counted_and_its_program_replays() -> None:
    # LNC=2 traces hand each instruction to the race check, which runs it: still data work
    clear_cache()
    x = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    m = conform_meter.reset()
    with conform_meter.emulator_call([x], {}):
        got = run_kernel(halves, [x], target="trn2", lnc=2)
    np.testing.assert_array_equal(got, 2 * x)
    assert 0 < m.data_seconds <= m.emulator_seconds
    np.testing.assert_array_equal(run_kernel(halves, [x + 1], target="trn2", lnc=2), 2 * (x + 1))


def test_the_runner_prints_each_case_s_data_work_and_their_median() -> None:
    metered = {"emulator_seconds": 3.0, "data_seconds": 1.25}
    case = CaseResult("t.py::test_a", "PASS", seconds=9.5, meter=metered)
    assert case.data_seconds == 1.25
    assert case.line() == "PASS       9.50s  t.py::test_a  [emulator 3.00 s, data work 1.25 s]"
    other = CaseResult("t.py::test_b", "PASS", seconds=2.0,
                       meter={"emulator_seconds": 0.5, "data_seconds": 0.25})  # fmt: skip
    old = CaseResult("t.py::test_c", "PASS", seconds=1.0, meter={"emulator_seconds": 0.4})
    assert old.data_seconds is None and "data work" not in old.line()
    timing = ConformRun(cases=[case, other, old]).timing()
    assert timing.endswith("; of which data work median 0.75 s, max 1.25 s")


# -------------------------------------------------------------------- the heap (trncore.sim.heap)
_HEAP_PROBE = """
import resource, sys
import numpy as np

def faults():
    # a tile-sized pattern of NumPy temporaries: three 1 MiB arrays made and freed, 50 times
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        xs = [np.ones(2**18, np.float32) for _ in range(3)]
        del xs
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
default = faults()
from trncore.sim import heap
if not heap.configure():  # TRNSCI_SIM_HEAP unset: retain
    sys.exit("not applied")
faults()
print(default, faults())
"""


def test_retained_heap_gives_temporaries_pages_already_touched() -> None:
    # glibc's defaults trim the heap top (or unmap the block) once the 3 MiB are freed, so each
    # round faults its pages in again (768 pages of 4 KiB); with the emulator's setting (the
    # default, TRNSCI_SIM_HEAP unset) the freed blocks stay in the heap and the same rounds fault
    # (almost) nothing
    env = {k: v for k, v in os.environ.items() if k != "TRNSCI_SIM_HEAP"}
    done = subprocess.run([sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    default, retained = (int(v) for v in done.stdout.split())
    assert default > 50 * 256  # at least a third of the pages faulted each round by default
    assert retained < 50


def test_heap_setting_names_its_variable_when_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    from trncore.sim import heap

    monkeypatch.setenv(heap.HEAP_ENV, "keep")
    with pytest.raises(ValueError, match="TRNSCI_SIM_HEAP must be 'retain' or 'system'"):
        heap.configure()


_SYSTEM_PROBE = _HEAP_PROBE.replace(
    'if not heap.configure():  # TRNSCI_SIM_HEAP unset: retain\n    sys.exit("not applied")',
    'if heap.configure():  # TRNSCI_SIM_HEAP=system\n    sys.exit("applied")',
)


def test_system_leaves_glibc_settings_alone() -> None:
    # the same rounds under TRNSCI_SIM_HEAP=system keep faulting their pages in
    assert _SYSTEM_PROBE != _HEAP_PROBE
    env = {**os.environ, "TRNSCI_SIM_HEAP": "system"}
    done = subprocess.run([sys.executable, "-c", _SYSTEM_PROBE], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    default, after = (int(v) for v in done.stdout.split())
    assert default > 50 * 256 and after > 50 * 256
