"""trncore.sim.testing: the marked line is the line Python itself reports, and a rule error's
reported line is checked against it (file and line)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from trncore.sim import nisa, nl, run_kernel
from trncore.sim.errors import DtypeError
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator


def probe() -> int:
    frame = inspect.currentframe()
    assert frame is not None
    return frame.f_lineno  # HERE


def twice() -> None:
    x = 1  # TWICE
    y = 2  # TWICE
    del x, y


def half_into_int(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.5)  # MEMSET
    nisa.dma_copy(dst=out, src=t)  # COPY
    return out


def test_marked_line_is_the_line_python_reports() -> None:
    assert marked_line(probe) == probe()
    assert marked_line(probe, "# HERE") == probe()


def test_marked_line_needs_exactly_one_line() -> None:
    with pytest.raises(ValueError, match="2 lines of twice contain '# TWICE'"):
        marked_line(twice, "# TWICE")
    with pytest.raises(ValueError, match="0 lines of probe contain '# NOWHERE'"):
        marked_line(probe, "# NOWHERE")
    with pytest.raises(TypeError, match="fn must be a function"):
        marked_line(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="marker must be a non-empty str"):
        marked_line(probe, "")


def test_assert_reported_at_checks_the_line() -> None:
    with pytest.raises(DtypeError) as exc:
        run_kernel(half_into_int, [np.zeros((4, 4), np.int32)])
    assert exc.value.filename == __file__
    assert_reported_at(exc.value, half_into_int, "# MEMSET")
    with pytest.raises(AssertionError, match="expected .*test_testing_helpers.py"):
        assert_reported_at(exc.value, half_into_int, "# COPY")
    with pytest.raises(AssertionError, match="expected an emulator rule error"):
        assert_reported_at(ValueError("not a rule"), half_into_int, "# MEMSET")


def test_assert_reported_at_below() -> None:
    with pytest.raises(DtypeError) as exc:
        run_kernel(half_into_int, [np.zeros((4, 4), np.int32)])
    # the memset is the line just under the tile's allocation
    lines, start = inspect.getsourcelines(half_into_int)
    alloc = next(start + i for i, text in enumerate(lines) if "nl.int32" in text)
    assert exc.value.lineno == alloc + 1
    assert_reported_at(exc.value, half_into_int, "nl.int32", below=1)
