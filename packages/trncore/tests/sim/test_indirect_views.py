"""View methods on an indirect view (a dynamic ``select``, ``vector_select``, ``.ap`` with a
run-time offset).

AWS source: ``nki.language.NkiTensor`` (NKI 0.5.0 and 0.6.0): "Indirect views cannot be
re-indirected, and the dimension that participates in the indirection cannot be further sliced or
selected"; ``slice`` / ``select`` ("on an indirect view ... cannot target a dimension that
participates in the indirection"); after ``vector_select``, ``permute`` keeps dims[0] == 0. The
other dims take any view method. Valid forms against NumPy (the index read at run time, replayed
with other indices), invalid neighbours refused at the kernel's line.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator


def batch_rows(a, idx, lo: int, hi: int, transpose: bool):
    """Rows lo:hi of batch ``idx[0, 0]`` of ``a`` [B, R, C] (dynamic select, then slice), or
    that batch's [R, C] block transposed (permute)."""
    i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    batch = a.select(0, i)  # [R, C], its offset read at run time
    view = batch.permute((1, 0)) if transpose else batch.slice(0, lo, hi)
    t = nl.ndarray(tuple(view.shape), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=view)
    out = nl.ndarray(tuple(view.shape), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def gathered_columns(x, offs, lo: int, hi: int, bad: str):
    """Rows ``offs[:, 0]`` of ``x`` (vector_select), columns lo:hi (slice of the free dim)."""
    o = nl.ndarray(offs.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=offs)
    rows = x.vector_select(0, o)
    if bad == "slice":
        rows = rows.slice(0, 0, 2)  # SLICE
    elif bad == "permute":
        rows = rows.permute((1, 0))  # PERMUTE
    view = rows.slice(1, lo, hi)
    t = nl.ndarray(tuple(view.shape), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=view)
    out = nl.ndarray(tuple(view.shape), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("target", ["trn2", "trn1"])
def test_views_of_a_dynamic_select_match_numpy(target: str) -> None:
    a = np.arange(5 * 13 * 6, dtype=np.float32).reshape(5, 13, 6)  # ragged rows and columns
    for b in (4, 0, 2):  # traced, then replayed with other indices
        idx = np.array([[b]], np.int32)
        got = run_kernel(batch_rows, [a, idx], {"lo": 3, "hi": 11, "transpose": False}, target=target,
                         nki_version="0.6.0")  # fmt: skip
        np.testing.assert_array_equal(got, a[b, 3:11])
        got = run_kernel(batch_rows, [a, idx], {"lo": 0, "hi": 1, "transpose": True}, target=target,
                         nki_version="0.5.0")  # fmt: skip
        np.testing.assert_array_equal(got, a[b].T)


@pytest.mark.parametrize("target", ["trn2", "trn1"])
def test_free_dim_slice_of_a_vector_select_matches_numpy(target: str) -> None:
    x = np.arange(21 * 10, dtype=np.float32).reshape(21, 10)
    for rows in ([3, 20, 0, 7, 7], [1, 2, 3, 4, 5]):
        offs = np.array(rows, np.int32).reshape(-1, 1)
        got = run_kernel(gathered_columns, [x, offs], {"lo": 2, "hi": 9, "bad": ""}, target=target,
                         nki_version="0.6.0")  # fmt: skip
        np.testing.assert_array_equal(got, x[rows, 2:9])


def test_the_indirect_dim_is_refused_at_the_line() -> None:
    x = np.zeros((21, 10), np.float32)
    offs = np.zeros((5, 1), np.int32)
    with pytest.raises(LanguageError, match=r"NkiTensor.slice on the indirect view") as e:
        run_kernel(gathered_columns, [x, offs], {"lo": 2, "hi": 9, "bad": "slice"}, target="trn2")
    assert e.value.rule == "view-indirect-dim"
    assert_reported_at(e.value, gathered_columns, "# SLICE")
    with pytest.raises(LanguageError, match=r"NkiTensor.permute on the indirect view") as e:
        run_kernel(gathered_columns, [x, offs], {"lo": 2, "hi": 9, "bad": "permute"}, target="trn2")
    assert_reported_at(e.value, gathered_columns, "# PERMUTE")


def test_view_methods_need_nki_0_5() -> None:
    a = np.zeros((5, 13, 6), np.float32)
    with pytest.raises(VersionError, match="needs NKI 0.5.0"):
        run_kernel(batch_rows, [a, np.zeros((1, 1), np.int32)], {"lo": 3, "hi": 11, "transpose": False},
                   target="trn2", nki_version="0.4.0")  # fmt: skip


def ap_block(a, idx, cut_rows: bool):
    """Rows idx..idx+4 of ``a`` [N, C] by ``.ap(scalar_offset=, indirect_dim=0)``, then columns 1:5
    (a dim that does not step by the indirection's row), or rows 0:2 (one that does)."""
    i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    rows, cols = 4, a.shape[1]
    block = a.ap(pattern=[[cols, rows], [1, cols]], offset=0, scalar_offset=i, indirect_dim=0)
    view = block.slice(0, 0, 2) if cut_rows else block.slice(1, 1, 5)  # HERE
    t = nl.ndarray(tuple(view.shape), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=view)
    out = nl.ndarray(tuple(view.shape), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_views_of_a_scalar_offset_pattern() -> None:
    a = np.arange(11 * 7, dtype=np.float32).reshape(11, 7)
    for r in (0, 7, 3):
        got = run_kernel(ap_block, [a, np.array([[r]], np.int32)], {"cut_rows": False}, target="trn2",
                         nki_version="0.6.0")  # fmt: skip
        np.testing.assert_array_equal(got, a[r : r + 4, 1:5])
    with pytest.raises(LanguageError, match="would change the dimension") as e:
        run_kernel(ap_block, [a, np.array([[0]], np.int32)], {"cut_rows": True}, target="trn2")
    assert_reported_at(e.value, ap_block)


def ap_rows_past_the_end(a, idx, rows: int):
    """``rows`` rows of ``a`` [N, C] from row ``idx[0, 0]`` by ``.ap(scalar_offset=)``."""
    i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    cols = a.shape[1]
    view = a.ap(pattern=[[cols, rows], [1, cols]], offset=0, scalar_offset=i, indirect_dim=0)  # HERE
    t = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=view)
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_scalar_offset_pattern_past_the_tensor_is_refused_at_its_line() -> None:
    """The Access Patterns deep dive (NKI 0.3.0): the pattern at offset zero must lie inside the
    tensor before any run-time offset is added; ``N`` rows of an ``N``-row tensor fit (offset 0
    reads them all, as NumPy's ``a[0:N]``), ``N + 1`` do not, refused where ``.ap`` names them."""
    from trncore.sim.errors import BoundsError

    a = np.arange(11 * 7, dtype=np.float32).reshape(11, 7)
    got = run_kernel(ap_rows_past_the_end, [a, np.array([[0]], np.int32)], {"rows": 11}, target="trn2")
    np.testing.assert_array_equal(got, a)
    with pytest.raises(BoundsError, match="reaches flat elements") as e:
        run_kernel(ap_rows_past_the_end, [a, np.array([[0]], np.int32)], {"rows": 12}, target="trn2")
    assert_reported_at(e.value, ap_rows_past_the_end)
