"""Emulator rules that the wider nki-library sample showed refusing valid NKI (docs/conformance.md,
"Wider sample"), each with a kernel of our own: the valid form against NumPy, the invalid
neighbour still refused at its line.

Write/write races between the two cores of an LNC=2 launch (rule ``lnc-race``). The two cores run
at the same time on "two physical cores ... that have shared HBM memory" (AWS NKI docs, Using
Logical Neuron Cores, NKI 0.3.0 / SDK 2.29). Two cores writing the same HBM bytes with no
``nki.isa.core_barrier`` (NKI 0.3.0) between them leave, whatever the order, the last value one
of them wrote there: a kernel that computes the same result on both cores and, on each, zeroes an
output before writing into it (a scatter into zeros) ends the same in every order, and ran
refused because core 1's zeroing changed bytes core 0 had already written. A kernel whose cores
end with different values in the same bytes is still refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import RaceError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator


def zero_then_fill(x, shift: bool, barrier: bool):
    """Both cores zero all of ``out``, then write ``x``'s left half into its left half, no meeting
    between the cores (``barrier``: a core_barrier after, then both read ``out`` back). With
    ``shift`` core 1 writes ``x + 1`` there instead: the cores' last values differ."""
    rows, cols = x.shape
    half = cols // 2
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.dma_copy(dst=out, src=z)  # ZERO
    t = nl.ndarray((rows, half), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, 0:half])
    if shift:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=me * 1.0)
    nisa.dma_copy(dst=out[:, 0:half], src=t)  # FILL
    if barrier:
        nisa.core_barrier(data=out, cores=(0, 1))
        back = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=out)
    return out


def zero_then_own_rows(x):
    """Each core zeroes all of ``out``, then writes its own half of the rows, with no core_barrier
    between the zeroing and the writes: core 1's zeroing may land after core 0's rows."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.dma_copy(dst=out, src=z)  # ZERO
    t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[me * half : (me + 1) * half, :])
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=t)
    return out


@pytest.mark.parametrize("barrier", [False, True])
def test_both_cores_zero_then_write_the_same_values(barrier: bool) -> None:
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) + 1.0
    want = np.zeros_like(x)
    want[:, :3] = x[:, :3]
    got = run_kernel(zero_then_fill, [x], {"shift": False, "barrier": barrier}, target="trn2", lnc=2)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("barrier", [False, True])
def test_cores_ending_with_different_values_are_refused(barrier: bool) -> None:
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) + 1.0
    with pytest.raises(RaceError, match=r"lnc-race.*core 1 writes different values into") as info:
        run_kernel(zero_then_fill, [x], {"shift": True, "barrier": barrier}, target="trn2", lnc=2)
    # judged at core 1's meeting or the end of the trace, reported at its first write there
    assert info.value.lineno == marked_line(zero_then_fill, "# ZERO")
    assert "element [0, 0]" in str(info.value)


def test_zeroing_over_the_other_cores_rows_is_refused() -> None:
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4) + 1.0
    with pytest.raises(RaceError, match=r"core 1 writes different values into") as info:
        run_kernel(zero_then_own_rows, [x], target="trn2", lnc=2)
    assert info.value.lineno == marked_line(zero_then_own_rows, "# ZERO")
    assert "element [0, 0]" in str(info.value)  # core 0's first row, left zero by core 1
