"""Forms that a sixth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/conformance.md, "Third-party kernels"), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.errors import ShapeError
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2061)


def column_total_through_psum(col):
    """The sum of a ``[T, 1]`` column: turned into a row by a Tensor Engine transpose into PSUM,
    copied to SBUF and reduced along the free axis."""
    t = col.shape[0]
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    c_sb = nl.ndarray((t, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=col)
    row_ps = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=row_ps, data=c_sb)
    row = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=row, src=row_ps)
    total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, data=row, op=nl.add, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


def column_total_into_sbuf(col):
    """The same, transposing straight into an SBUF row: with no ``engine=`` that is the Vector
    Engine's transpose, which takes at most [32, 32]."""
    t = col.shape[0]
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    c_sb = nl.ndarray((t, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=col)
    row = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=row, data=c_sb)  # HERE
    total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, data=row, op=nl.add, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


@pytest.mark.parametrize("t", [1, 37, 128])
def test_column_transposed_through_psum_sums_like_numpy(t: int) -> None:
    col = rng.standard_normal((t, 1)).astype(np.float32)
    got = jit(column_total_through_psum)(col)
    np.testing.assert_allclose(got, col.astype(np.float64).sum().reshape(1, 1), rtol=1e-5, atol=1e-5)


def test_small_column_transposed_into_sbuf_sums_like_numpy() -> None:
    # Up to [32, 32] the Vector Engine transposes SBUF to SBUF (nki.isa.nc_transpose, NKI 0.6.0).
    col = rng.standard_normal((20, 1)).astype(np.float32)
    got = jit(column_total_into_sbuf)(col)
    np.testing.assert_allclose(got, col.astype(np.float64).sum().reshape(1, 1), rtol=1e-5, atol=1e-5)


def test_wide_transpose_into_sbuf_names_the_psum_route_at_its_line() -> None:
    # A third-party metadata kernel transposes a [T, 1] column into SBUF; for T > 32 neither engine
    # can (Tensor Engine writes PSUM, Vector Engine stops at 32). The error says why it was the
    # Vector Engine's and what to write instead.
    col = rng.standard_normal((37, 1)).astype(np.float32)
    with pytest.raises(ShapeError) as info:
        jit(column_total_into_sbuf)(col)
    assert_reported_at(info.value, column_total_into_sbuf)
    assert "32x32" in str(info.value) and "writes PSUM" in str(info.value)
