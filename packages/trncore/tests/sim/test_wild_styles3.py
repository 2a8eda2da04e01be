"""Forms that public third-party NKI 0.4-0.6 kernels write (checked against the emulator, see
docs/conformance.md, "Third-party kernels"), in kernels of our own, each next to its invalid
neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2031)


def halves_by_program(x):
    """Each program (LNC core) doubles its half of the rows; program_id(0) picks the half."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs(0)
    r0 = nl.program_id(0) * half
    t = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r0 : r0 + half, 0:cols])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[r0 : r0 + half, 0:cols], src=t)
    return out


def test_one_axis_tuple_grid_is_the_lnc_grid() -> None:
    # nki.language.program_id / num_programs (NKI 0.6.0) index "the launch grid"; a one-axis grid
    # written as a tuple is the same LNC=2 launch as kernel[2] (NKI 0.6.0 "LNC Overview").
    x = rng.standard_normal((64, 32)).astype(np.float32)
    got = jit(halves_by_program)[(2,)](x)
    np.testing.assert_array_equal(got, 2.0 * x)
    np.testing.assert_array_equal(jit(halves_by_program)[2](x), 2.0 * x)


def test_two_axis_spmd_grid_is_reported_as_not_emulated() -> None:
    # A ragged paged-attention kernel launched kernel[(requests, heads)] reads program_id(1). The
    # 0.6.0 nki.language pages describe an N-D SPMD launch grid (program_ndim), so this is no error
    # of the kernel: the emulator says it does not run such a grid, at the launching line.
    x = rng.standard_normal((64, 32)).astype(np.float32)
    kernel = jit(halves_by_program)
    with pytest.raises(NotImplementedError, match=r"N-D SPMD launch grid is not emulated") as info:
        kernel[(2, 2)]  # HERE
    line = marked_line(test_two_axis_spmd_grid_is_reported_as_not_emulated)
    assert f"{__file__}:{line})" in str(info.value)
    np.testing.assert_array_equal(kernel(x), 2.0 * x)
