"""Forms that a second batch of public third-party NKI 0.3.0 kernels write (docs/conformance.md,
"Third-party kernels", "Second batch"), in kernels of our own, each next to its invalid neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2030)


def row_scale_sliced(x, gamma):
    """Rows times a per-column gain, tiled over rows with slices (the NKI 0.3.0 form)."""
    t_rows, h = x.shape
    out = nl.ndarray((t_rows, h), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray((128, h), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap(pattern=[[0, 128], [1, h]], offset=0))
    for t in nl.affine_range((t_rows + 127) // 128):
        rows = min(128, t_rows - t * 128)
        xs = nl.ndarray((128, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs[0:rows, 0:h], src=x[t * 128 : t * 128 + rows, 0:h])
        nisa.tensor_tensor(dst=xs[0:rows, 0:h], data1=xs[0:rows, 0:h], data2=g[0:rows, 0:h], op=nl.multiply)
        nisa.dma_copy(dst=out[t * 128 : t * 128 + rows, 0:h], src=xs[0:rows, 0:h])
    return out


def row_scale_mgrid(x, gamma):
    """The same with a Beta-2 ``nl.mgrid`` mask, as a generated kernel of the batch writes it."""
    t_rows, h = x.shape
    out = nl.ndarray((t_rows, h), dtype=x.dtype, buffer=nl.shared_hbm)
    ix = nl.mgrid[0:128, 0:h]
    for t in nl.affine_range((t_rows + 127) // 128):
        xs = nl.load(x[t * 128 : t * 128 + 128, 0:h], mask=(ix.p + t * 128 < t_rows))
        nl.store(out[t * 128 : t * 128 + 128, 0:h], xs, mask=(ix.p + t * 128 < t_rows))
    return out


def test_row_tail_by_slices_runs(target: str) -> None:
    x = rng.standard_normal((200, 96)).astype(np.float32)
    gamma = rng.standard_normal((96,)).astype(np.float32)
    np.testing.assert_allclose(simulate(row_scale_sliced)(x, gamma), x * gamma[None, :], rtol=1e-6)


def test_indexing_mgrid_says_it_was_removed(target: str) -> None:
    # AWS NKI docs, NKI Beta 2 migration guide: nl.mgrid / nl.arange index grids are removed;
    # nki.language of NKI 0.3.0 has no mgrid. Indexed (its Beta-1 use), it used to fail with
    # Python's "'function' object is not subscriptable".
    x = np.ones((200, 96), np.float32)
    with pytest.raises(NotImplementedError, match=r"nl\.mgrid was removed in Beta 2"):
        simulate(row_scale_mgrid)(x, np.ones((96,), np.float32))
