"""Forms that a fifth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/conformance.md, "Third-party kernels"), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.errors import BoundsError
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2051)


def matmul_at_runtime_slices(w, x, idx):
    """``out[:, i, :] = w[:, idx[i], :].T @ x[:, idx[i], :]``: both matmul operands selected at an
    index read from SBUF (``select`` with an NkiTensor index)."""
    _, s, d = x.shape
    out = nl.ndarray((128, s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.ndarray((128, s, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    x_sb = nl.ndarray((128, s, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    i_sb = nl.ndarray((1, s), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    o_sb = nl.ndarray((128, s, d), dtype=nl.float32, buffer=nl.sbuf)
    for i in range(s):
        t = i_sb.ap(pattern=[[s, 1], [1, 1]], offset=i)
        ps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=w_sb.select(1, t), moving=x_sb.select(1, t))  # HERE
        nisa.tensor_copy(dst=o_sb[:, i, :], src=ps)
    nisa.dma_copy(dst=out, src=o_sb)
    return out


def test_nc_matmul_reads_dynamically_selected_operands_at_their_index() -> None:
    # The Access Patterns deep dive (NKI 0.6.0): select with a runtime index "picks one slice along
    # dim at an index resolved at runtime". nc_matmul read such stationary/moving views at index 0
    # (their storage offset without the runtime index), silently multiplying the wrong slices.
    bf16 = ml_dtypes.bfloat16
    w = rng.standard_normal((128, 6, 128)).astype(bf16)
    x = rng.standard_normal((128, 6, 4)).astype(bf16)
    idx = np.array([[5, 0, 3, 5, 2, 1]], np.int32)
    got = jit(matmul_at_runtime_slices)(w, x, idx)
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    want = np.stack([w64[:, j].T @ x64[:, j] for j in idx[0]], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_nc_matmul_operand_index_past_the_tile_is_reported_at_the_matmul() -> None:
    # The neighbour: an index past the selected dimension reads outside the tile.
    w = rng.standard_normal((128, 4, 128)).astype(np.float32)
    x = rng.standard_normal((128, 4, 4)).astype(np.float32)
    idx = np.array([[0, 1, 9, 2]], np.int32)
    with pytest.raises(BoundsError, match="scalar_offset value 9") as info:
        jit(matmul_at_runtime_slices)(w, x, idx)
    assert_reported_at(info.value, matmul_at_runtime_slices)
