"""Forms that a ninth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: per-lane GpSimd random states (``nisa.rand_set_state`` /
``nisa.rand_get_state``) and the unique indices of a ``dma_compute`` scatter."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, ShapeError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2091)
P, F, WORDS = 128, 16, 6


# ---------------------------------------------------------------------- per-lane random states
# nki.isa.rand_set_state (NKI 0.3.0-0.6.0): "Each partition in the source tensor seeds the PRNG
# states for the corresponding compute lane inside the engine"; rand_get_state: "Each partition in
# the output tensor holds the PRNG states for the corresponding compute lane". An AWS RNG library
# kernel seeds every lane differently because lanes holding equal states emit equal streams.


def _seed_lanes_then(seeds, read_back: bool):
    """``seeds[p]`` into GpSimd lane ``p``; then either one ``[P, F]`` GpSimd draw or
    ``rand_get_state``, which must return lane ``p``'s state on partition ``p``."""
    s = nl.ndarray((P, WORDS), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seeds)
    nisa.rand_set_state(src_seeds=s, engine=nisa.gpsimd_engine)
    width = WORDS if read_back else F
    got = nl.ndarray((P, width), dtype=nl.uint32, buffer=nl.sbuf)
    if read_back:
        nisa.rand_get_state(dst=got, engine=nisa.gpsimd_engine)
    else:
        nisa.rng(dst=got, engine=nisa.gpsimd_engine)
    out = nl.ndarray((P, width), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=got)
    return out


def seed_lanes_then_draw(seeds):
    return _seed_lanes_then(seeds, read_back=False)


def seed_lanes_then_read_back(seeds):
    return _seed_lanes_then(seeds, read_back=True)


def partial_draw_then_full_draw(seed):
    """Every lane seeded alike; a draw on partitions 0-31 advances lanes 0-31 only, so the next
    full draw gives one row on lanes 0-31 and another on lanes 32-127."""
    s = nl.ndarray((1, WORDS), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    lanes = nl.ndarray((P, WORDS), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=lanes, src=nl.broadcast_to(s, (P, WORDS)))
    nisa.rand_set_state(src_seeds=lanes, engine=nisa.gpsimd_engine)
    first = nl.ndarray((32, F), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(dst=first, engine=nisa.gpsimd_engine)
    second = nl.ndarray((P, F), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(dst=second, engine=nisa.gpsimd_engine)
    out = nl.ndarray((P + 32, F), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0:32, :], src=first)
    nisa.dma_copy(dst=out[32:, :], src=second)
    return out


def float_seeds(seeds):
    """The neighbour: the page asks for uint32 seeds."""
    s = nl.ndarray((P, WORDS), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seeds)
    nisa.rand_set_state(src_seeds=s, engine=nisa.gpsimd_engine)  # HERE
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s[0:1, 0:1])
    return out


def _seeds(distinct: bool) -> np.ndarray:
    base = rng.integers(0, 2**32, size=(1, WORDS), dtype=np.uint32)
    if not distinct:
        return np.repeat(base, P, axis=0)
    lane = np.arange(P, dtype=np.uint64)[:, None] * np.uint64(0x9E3779)
    return ((base.astype(np.uint64) + lane) % (1 << 32)).astype(np.uint32)


def test_lanes_seeded_alike_draw_equal_rows() -> None:
    got = np.asarray(run_kernel(seed_lanes_then_draw, [_seeds(distinct=False)], target="trn2"))
    np.testing.assert_array_equal(got, np.repeat(got[0:1], P, axis=0))
    assert np.unique(got[0]).size == F  # a row still holds F different values


def test_lanes_seeded_apart_draw_different_rows() -> None:
    seeds = _seeds(distinct=True)
    got = np.asarray(run_kernel(seed_lanes_then_draw, [seeds], target="trn2"))
    assert np.unique(got[:, 0]).size == P
    # lane 0 keeps the base seed: its row is the row every lane draws when all hold that seed
    alike = np.asarray(run_kernel(seed_lanes_then_draw, [np.repeat(seeds[0:1], P, axis=0)], target="trn2"))
    np.testing.assert_array_equal(got[0], alike[0])


def test_rand_get_state_reads_each_lane_back() -> None:
    seeds = _seeds(distinct=True)
    got = run_kernel(seed_lanes_then_read_back, [seeds], target="trn2")
    np.testing.assert_array_equal(np.asarray(got), seeds)


def test_a_partial_draw_advances_its_lanes_only() -> None:
    got = np.asarray(run_kernel(partial_draw_then_full_draw, [_seeds(False)[0:1]], target="trn2"))
    first, second = got[:32], got[32:]
    np.testing.assert_array_equal(first, np.repeat(first[0:1], 32, axis=0))
    np.testing.assert_array_equal(second[:32], np.repeat(second[0:1], 32, axis=0))
    np.testing.assert_array_equal(second[32:], np.repeat(second[32:33], P - 32, axis=0))
    # lanes 32-127 had not drawn: their row is the first draw's row; lanes 0-31 moved on
    np.testing.assert_array_equal(second[32], first[0])
    assert np.mean(second[0] == first[0]) < 0.5


def test_float_seeds_are_refused_at_their_line() -> None:
    with pytest.raises(ShapeError) as info:
        run_kernel(float_seeds, [np.zeros((P, WORDS), np.float32)], target="trn2")
    assert "rand-set-state-state" in str(info.value)
    assert_reported_at(info.value, float_seeds)


# ------------------------------------------------------------- dma_compute scatter: unique rows
# nki.isa.dma_compute (NKI 0.3.0-0.6.0), scatter RMW "dst(HBM)[indices] = dst(HBM)[indices] +
# src(SB)": "unique_indices must be True (non-unique indices not yet supported)". A public
# histogram gives every partition its own bins so that one scatter never repeats a row.


def _count_into(table, values, shared: bool, skip: bool = False):
    bins = table.shape[0] // P
    out = nl.ndarray(table.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    z = nl.ndarray((P, bins), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0)
    nisa.dma_copy(dst=out.ap(pattern=[[bins, P], [1, bins]], offset=0), src=z)
    v = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=values)
    if not shared:  # partition p counts into rows p * bins .. p * bins + bins - 1
        base = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=base, pattern=[[0, 1]], offset=0, channel_multiplier=bins)
        nisa.tensor_tensor(dst=v, data1=v, data2=base, op=nl.add)
    ones = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1)
    dst = out.ap(pattern=[[1, P], [1, 1]], offset=0, vector_offset=v, indirect_dim=0)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_compute(dst=dst, srcs=[dst, ones], reduce_op=nl.add, oob_mode=mode)  # HERE
    return out


def count_per_partition(table, values):
    """One scatter-add of ones, each partition into its own bins: no row repeats."""
    return _count_into(table, values, shared=False)


def count_shared(table, values):
    """The neighbour: every partition scatters into the same bins."""
    return _count_into(table, values, shared=True)


def count_with_sentinels(table, rows):
    """``rows`` given whole: the partitions holding one shared out-of-range sentinel are skipped,
    so they repeat nothing."""
    return _count_into(table, rows, shared=True, skip=True)


def gather_add_repeated_rows(table, idx):
    """Gather RMW ``acc += table[idx]`` with repeated rows: reads may repeat."""
    acc = nl.ndarray((P, table.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=1.0)
    i = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    src = table.ap(
        pattern=[[table.shape[1], P], [1, table.shape[1]]], offset=0, vector_offset=i, indirect_dim=0
    )
    nisa.dma_compute(dst=acc, srcs=[acc, src], reduce_op=nl.add)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_scatter_into_own_rows_matches_numpy() -> None:
    bins = 5
    values = rng.integers(0, bins, size=(P, 1)).astype(np.int32)
    got = np.asarray(run_kernel(count_per_partition, [np.zeros((P * bins, 1), np.int32), values],
                                target="trn2"))  # fmt: skip
    expected = np.zeros((P, bins), np.int32)
    expected[np.arange(P), values[:, 0]] = 1
    np.testing.assert_array_equal(got.reshape(P, bins), expected)
    np.testing.assert_array_equal(got.reshape(P, bins).sum(0), np.bincount(values[:, 0], minlength=bins))


def test_scatter_repeating_a_row_is_refused_at_its_line() -> None:
    values = rng.integers(0, 5, size=(P, 1)).astype(np.int32)
    with pytest.raises(LanguageError) as info:
        run_kernel(count_shared, [np.zeros((P * 5, 1), np.int32), values], target="trn2")
    assert "dma-compute-unique" in str(info.value)
    assert_reported_at(info.value, _count_into)


def test_skipped_sentinel_rows_repeat_nothing() -> None:
    bins = 3
    values = rng.integers(0, bins, size=(P, 1)).astype(np.int32)
    rows = values + np.arange(P, dtype=np.int32)[:, None] * bins
    rows[100:] = 1 << 30  # one sentinel past the table on partitions 100-127: skipped
    got = np.asarray(run_kernel(count_with_sentinels, [np.zeros((P * bins, 1), np.int32), rows],
                                target="trn2"))  # fmt: skip
    expected = np.zeros((P, bins), np.int32)
    expected[np.arange(100), values[:100, 0]] = 1
    np.testing.assert_array_equal(got.reshape(P, bins), expected)


def test_gather_add_may_repeat_rows() -> None:
    table = rng.normal(size=(6, 8)).astype(np.float32)
    idx = rng.integers(0, 6, size=(P, 1)).astype(np.int32)
    got = run_kernel(gather_add_repeated_rows, [table, idx], target="trn2")
    np.testing.assert_allclose(np.asarray(got), 1.0 + table[idx[:, 0]], rtol=1e-6, atol=1e-6)
