"""Forms that an eighth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2081)


def block_ramp_of_a_column_slice(width):
    """``[b, t] -> b`` for 3 blocks of 2 tiles, written by ``iota`` through a 3-D reshape of the
    first 6 columns of a wider one-partition tile (a MoE kernel's worklist of tile -> block). The
    reshaped free dims are contiguous; the partition dim steps by the tile's row, which a
    reshape keeps (NKI language guide, "Querying layout", NKI 0.6.0)."""
    out = nl.ndarray((1, 6), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, width), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t[:, 0:6].reshape((1, 3, 2)), pattern=[[1, 3], [0, 2]])
    nisa.dma_copy(dst=out, src=t[:, 0:6])
    return out


def column_slice_reshaped(x):
    """The first 12 columns of a ``[P, 16]`` tile viewed as ``[P, 3, 4]``, summed over the
    last dim: the free dims of ``t[:, 0:12]`` are contiguous on every partition."""
    p = x.shape[0]
    out = nl.ndarray((p, 3), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((p, 3), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t[:, 0:12].reshape((p, 3, 4)), axis=2)
    nisa.dma_copy(dst=out, src=s)
    return out


def strided_columns_merged(x):
    """The neighbour: ``t[:, :, 0:3]`` of a ``[P, 4, 4]`` tile merged into ``[P, 12]`` skips a
    column of every row, so the reshaped dims are not contiguous."""
    p = x.shape[0]
    out = nl.ndarray((p, 12), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, 4, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    flat = t[:, :, 0:3].reshape((p, 12))  # HERE
    nisa.dma_copy(dst=out, src=flat)
    return out


@pytest.mark.parametrize("width", [6, 8])
def test_iota_through_a_reshaped_column_slice_matches_numpy(width: int) -> None:
    got = run_kernel(block_ramp_of_a_column_slice, [width], target="trn2")
    np.testing.assert_array_equal(np.asarray(got), np.repeat(np.arange(3), 2)[None, :])


@pytest.mark.parametrize("p", [1, 5, 128])
def test_reshape_of_a_contiguous_column_slice_matches_numpy(p: int) -> None:
    x = rng.normal(size=(p, 16)).astype(np.float32)
    got = run_kernel(column_slice_reshaped, [x], target="trn2")
    np.testing.assert_allclose(np.asarray(got), x[:, :12].reshape(p, 3, 4).sum(axis=2), rtol=1e-6, atol=1e-6)


def test_reshape_merging_strided_columns_is_refused_at_its_line() -> None:
    x = rng.normal(size=(4, 4, 4)).astype(np.float32)
    with pytest.raises(LanguageError) as info:
        run_kernel(strided_columns_merged, [x], target="trn2")
    assert "reshape-contiguous" in str(info.value)
    assert_reported_at(info.value, strided_columns_merged)
