"""Bullets of AWS's NKI release notes (0.3.0 -> 0.6.0) that the emulator did not follow.

The release notes (``release-notes/components/nki.rst`` of the Neuron SDK docs, SDK 2.29-2.32)
were audited bullet by bullet against ``trncore.sim`` (docs/emulator-releases.md, "Release-notes audit").
Each test here pins one bullet that had been missing: the valid form against NumPy under the
releases where it is valid, the invalid neighbour caught at the kernel's line where it is not.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(3601)


def _to_hbm(t):
    out = nl.ndarray(tuple(t.shape), dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---- NKI 0.6.0 (SDK 2.32), Bug Fixes: "tensor_copy_predicated and select_reduce now handle
# source, destination, and predicate operands with mismatched ranks but matching free-element
# counts (e.g. a 2D source with a 4D destination/predicate)"
def masked_scores(scores, keep, dst_shape, pred_shape):
    """Copy a [P, F] score tile into a ``dst_shape`` tile where ``keep`` is set (a 4-d causal mask
    beside a 2-d score tile, as an attention kernel holds them); -1 elsewhere."""
    s = nl.ndarray(tuple(scores.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=scores)
    m = nl.ndarray(pred_shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=keep.reshape(pred_shape))
    d = nl.ndarray(dst_shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-1.0)
    nisa.tensor_copy_predicated(dst=d, src=s, predicate=m)  # HERE
    return _to_hbm(d)


def masked_select(scores, keep, dst_shape, pred_shape):
    """``select_reduce`` of the same operands: on_true the 2-d scores, on_false -1, row maxima."""
    s = nl.ndarray(tuple(scores.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=scores)
    m = nl.ndarray(pred_shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=keep.reshape(pred_shape))
    d = nl.ndarray(dst_shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((scores.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=d, predicate=m, on_true=s, on_false=-1.0, reduce_res=r,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)  # fmt: skip
    return _to_hbm(d), _to_hbm(r)


_RANKS = [((8, 2, 3, 2), (8, 2, 3, 2)), ((8, 12), (8, 3, 4)), ((8, 3, 4), (8, 12))]


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize(("dst_shape", "pred_shape"), _RANKS)
def test_predicated_copy_of_another_rank_matches_numpy(
    target: str, version: str, dst_shape: tuple[int, ...], pred_shape: tuple[int, ...]
) -> None:
    scores = rng.standard_normal((8, 12)).astype(np.float32)
    keep = (rng.random((8, 12)) < 0.5).astype(np.uint8)
    got = run_kernel(masked_scores, [scores, keep], {"dst_shape": dst_shape, "pred_shape": pred_shape},
                     target=target, nki_version=version)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(got).reshape(8, 12), np.where(keep != 0, scores, -1.0))


@pytest.mark.parametrize(("dst_shape", "pred_shape"), _RANKS)
def test_select_reduce_of_another_rank_matches_numpy(
    target: str, dst_shape: tuple[int, ...], pred_shape: tuple[int, ...]
) -> None:
    scores = rng.standard_normal((8, 12)).astype(np.float32)
    keep = (rng.random((8, 12)) < 0.5).astype(np.uint8)
    got, rowmax = run_kernel(masked_select, [scores, keep], {"dst_shape": dst_shape,
                             "pred_shape": pred_shape}, target=target)  # fmt: skip
    want = np.where(keep != 0, scores, -1.0)
    np.testing.assert_array_equal(np.asarray(got).reshape(8, 12), want)
    np.testing.assert_array_equal(np.asarray(rowmax).reshape(8), want.max(axis=1))


def test_predicated_copy_with_another_element_count_is_refused() -> None:
    # the neighbour: the free-element counts differ (12 vs 10), which no release accepts
    scores = np.zeros((8, 12), np.float32)
    keep = np.ones((8, 10), np.uint8)
    with pytest.raises(Exception) as exc:
        run_kernel(masked_scores, [scores, keep], {"dst_shape": (8, 2, 5), "pred_shape": (8, 2, 5)},
                   target="trn2")  # fmt: skip
    assert getattr(exc.value, "rule", None) == "element-count"
    assert_reported_at(exc.value, masked_scores)


# ---- NKI 0.5.0 (SDK 2.31), New Features: "dma_transpose with scalar_offset now supports
# oob_mode.skip for runtime indirect indexing"
def transposed_rows(table, start, rows: int):
    """``rows`` rows of ``table`` [N, C] (bf16, HBM) from row ``start[0, 0]``, transposed into a
    [C, rows] tile that starts as zeros; oob_mode.skip leaves it zero when the block runs past N."""
    i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=start)
    cols = table.shape[1]
    block = table.ap(pattern=[[cols, rows], [1, cols]], offset=0, scalar_offset=i, indirect_dim=0)
    t = nl.ndarray((cols, rows), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0)
    nisa.dma_transpose(dst=t, src=block, oob_mode=nisa.oob_mode.skip)  # HERE
    return _to_hbm(t)


def _table() -> np.ndarray:
    return rng.standard_normal((40, 32)).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("version", ["0.5", "0.6"])
def test_scalar_offset_transpose_with_skip_matches_numpy(version: str) -> None:
    table = _table()
    for start in (0, 7, 24):
        got = run_kernel(transposed_rows, [table, np.array([[start]], np.int32)], {"rows": 16},
                         target="trn2", nki_version=version)  # fmt: skip
        np.testing.assert_array_equal(np.asarray(got), table[start : start + 16].T)


@pytest.mark.parametrize("version", ["0.5", "0.6"])
def test_scalar_offset_transpose_past_the_end_is_skipped(version: str) -> None:
    # rows 30..45 of a 40-row table: the transfer is skipped and the zeroed tile stays zero (it
    # had raised NumPy's "axes don't match array" from inside the emulator)
    got = run_kernel(transposed_rows, [_table(), np.array([[30]], np.int32)], {"rows": 16},
                     target="trn2", nki_version=version)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), np.zeros((32, 16), np.float32))


@pytest.mark.parametrize("version", ["0.3", "0.4"])
def test_scalar_offset_transpose_with_skip_needs_0_5(version: str) -> None:
    with pytest.raises(VersionError, match=r"needs NKI 0\.5\.0 \(Neuron SDK 2\.31\)") as exc:
        run_kernel(transposed_rows, [_table(), np.array([[3]], np.int32)], {"rows": 16},
                   target="trn2", nki_version=version)  # fmt: skip
    assert_reported_at(exc.value, transposed_rows)


# ---- NKI 0.4.0 (SDK 2.30), New Features, dma_compute oob_mode: "Validation ensures
# oob_mode.skip is used only with indirect indexing"
def summed(a, b, skip: bool):
    """``a + b`` by ``dma_compute`` from two SBUF tiles into HBM (no indirection)."""
    ta = nl.ndarray(tuple(a.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray(tuple(b.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    out = nl.ndarray(tuple(a.shape), dtype=nl.float32, buffer=nl.shared_hbm)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_compute(out, [ta, tb], nl.add, oob_mode=mode)  # HERE
    return out


@pytest.mark.parametrize("version", ["0.4", "0.6"])
def test_direct_dma_compute_matches_numpy(target: str, version: str) -> None:
    a, b = rng.standard_normal((2, 16, 24)).astype(np.float32)
    got = run_kernel(summed, [a, b], {"skip": False}, target=target, nki_version=version)
    np.testing.assert_array_equal(got, a + b)


@pytest.mark.parametrize("version", ["0.4", "0.5", "0.6"])
def test_direct_dma_compute_with_skip_is_refused(version: str) -> None:
    a = np.zeros((16, 24), np.float32)
    with pytest.raises(LanguageError) as exc:
        run_kernel(summed, [a, a], {"skip": True}, target="trn2", nki_version=version)
    assert exc.value.rule == "dma-compute-oob"
    assert_reported_at(exc.value, summed)


# ---- NKI 0.4.0 (SDK 2.30), Improvements: "nki.isa.dma_transpose with indirect indexing -
# Relaxed the src innermost dimension constraint from exactly 128 to <= 128 when src uses an
# indirect access pattern (vector_offset)"
def gathered_transpose(table, idx):
    """Rows ``table[idx]`` (bf16, HBM [N, C]) transposed into a [C, P] tile by one indirect
    dma_transpose, as an embedding lookup that wants the features on the partitions."""
    p, cols = idx.shape[0], table.shape[1]
    idx_sb = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx_sb, src=idx)
    dst = nl.ndarray((cols, p), dtype=table.dtype, buffer=nl.sbuf)
    view = table.ap(pattern=[[cols, p], [1, cols]], vector_offset=idx_sb, indirect_dim=0)
    nisa.dma_transpose(dst=dst, src=view, axes=(1, 0))  # HERE
    return _to_hbm(dst)


def _lookup(cols: int) -> tuple[np.ndarray, np.ndarray]:
    table = rng.standard_normal((50, cols)).astype(ml_dtypes.bfloat16)
    idx = rng.integers(0, 50, size=(16, 1)).astype(np.uint32)
    return table, idx


@pytest.mark.parametrize(("version", "cols"), [("0.3", 128), ("0.4", 64), ("0.6", 64), ("0.6", 128)])
def test_indirect_transpose_width_matches_numpy(version: str, cols: int) -> None:
    table, idx = _lookup(cols)
    got = run_kernel(gathered_transpose, [table, idx], target="trn2", nki_version=version)
    np.testing.assert_array_equal(np.asarray(got), table[idx[:, 0]].T)


def test_indirect_transpose_below_128_is_refused_under_0_3() -> None:
    table, idx = _lookup(64)
    with pytest.raises(Exception) as exc:
        run_kernel(gathered_transpose, [table, idx], target="trn2", nki_version="0.3")
    assert getattr(exc.value, "rule", None) == "dma-transpose-indirect"
    assert "must be exactly 128 under NKI 0.3.0" in str(exc.value)
    assert_reported_at(exc.value, gathered_transpose)


# ---- NKI 0.4.0 (SDK 2.30), Bug Fixes: "Fixed bool output tensors being returned as uint8 from
# PyTorch Native kernels. Bool dtype is now preserved end-to-end so output tensors are returned
# as torch.bool instead of torch.uint8" (nki.simulate takes torch tensors from 0.4.0)
def above(a, b):
    """``a > b`` element by element, as an ``nl.bool_`` output, and ``a + b`` as a float one."""
    ta = nl.ndarray(tuple(a.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray(tuple(b.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    mask = nl.ndarray(tuple(a.shape), dtype=nl.bool_, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=mask, data1=ta, data2=tb, op=nl.greater)
    total = nl.ndarray(tuple(a.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=ta, data2=tb, op=nl.add)
    return _to_hbm(mask), _to_hbm(total)


@pytest.mark.parametrize("version", ["0.4", "0.6"])
def test_simulate_returns_bool_outputs_as_torch_bool(version: str) -> None:
    torch = pytest.importorskip("torch")
    from trncore.sim import simulate

    a = torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32))
    mask, total = simulate(above, nki_version=version)(a, b)
    assert mask.dtype == torch.bool and total.dtype == torch.float32
    np.testing.assert_array_equal(mask.numpy(), a.numpy() > b.numpy())
    np.testing.assert_array_equal(total.numpy(), a.numpy() + b.numpy())


# ---- bullets that were emulated without a test of their own (probed in the audit)
# NKI 0.6.0 (SDK 2.32), Bug Fixes: "activation with a reduce_res tile that aliases dst no longer
# clobbers the reduction result"
def exp_rows_with_sum_in_column0(x):
    """``exp(x)`` into a tile whose column 0 then holds each row's sum of ``exp(x)``: the
    reduction's result lands inside ``dst`` (``reduce_res`` is ``dst[:, 0:1]``)."""
    t = nl.ndarray(tuple(x.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    d = nl.ndarray(tuple(x.shape), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=d[:, 0:1],
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
    return _to_hbm(d)


@pytest.mark.parametrize("version", ["0.3", "0.6"])
def test_activation_reduce_res_inside_dst_keeps_the_sum(target: str, version: str) -> None:
    x = rng.standard_normal((32, 20)).astype(np.float32)
    got = run_kernel(exp_rows_with_sum_in_column0, [x], target=target, nki_version=version)
    want = np.exp(x.astype(np.float64))
    want[:, 0] = want.sum(axis=1)
    np.testing.assert_allclose(got, want, rtol=2e-6)


# NKI 0.4.0 (SDK 2.30), Bug Fixes: "nki.isa.local_gather now produces correct results, including
# when the destination uses a sub-view or .ap() access pattern"
def gather_into_columns(src_hbm, index_hbm, lo: int, n: int, by_ap: bool):
    """``local_gather`` of ``n`` elements per partition (one per index) into columns ``lo:lo+n``
    of a zeroed [P, 3n] tile, addressed by a slice or by ``.ap()``."""
    src = nl.ndarray(tuple(src_hbm.shape), dtype=src_hbm.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_hbm)
    index = nl.ndarray(tuple(index_hbm.shape), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=index_hbm)
    p = src.shape[0]
    tile = nl.ndarray((p, 3 * n), dtype=src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=0)
    dst = tile.ap(pattern=[[3 * n, p], [1, n]], offset=lo) if by_ap else tile[:, lo : lo + n]
    nisa.local_gather(dst=dst, src_buffer=src, index=index, num_valid_indices=n)
    return _to_hbm(tile)


@pytest.mark.parametrize("by_ap", [False, True])
def test_local_gather_into_a_sub_view_matches_numpy(target: str, by_ap: bool) -> None:
    p, f, n, lo = 32, 48, 16, 8
    src = rng.standard_normal((p, f)).astype(np.float32)
    index = rng.integers(0, f, size=(p, 1)).astype(np.uint16)
    got = run_kernel(gather_into_columns, [src, index], {"lo": lo, "n": n, "by_ap": by_ap},
                     target=target)  # fmt: skip
    want = np.zeros((p, 3 * n), np.float32)
    for c in range(0, p, 16):  # each core's 16 indices, partition first, address its 16 partitions
        starts = index[c : c + 16, 0].astype(np.int64)
        want[c : c + 16, lo : lo + n] = src[c : c + 16][:, starts]
    np.testing.assert_array_equal(got, want)
