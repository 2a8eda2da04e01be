"""nisa.sequence_bounds (AWS NKI docs, nki.isa.sequence_bounds, NKI 0.3.0 and 0.6.0) against a
loop-by-loop NumPy reference of the page's definition, and its rules at the kernel's line."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BoundsError, BufferError, DtypeError, PartitionError, ShapeError
from trncore.sim.runner import run_kernel
from trncore.sim.versions import nki_version

pytestmark = pytest.mark.simulator


def reference(ids: np.ndarray) -> np.ndarray:
    """The page's definition element by element: the first and one-past-last index of the run of
    equal IDs holding each element; ID 0 is padding with bounds (n, -1)."""
    n = ids.size
    out = np.zeros((1, 2, n), np.float64)
    for i, v in enumerate(ids):
        if v == 0:
            out[0, :, i] = (n, -1)
            continue
        lo = i
        while lo > 0 and ids[lo - 1] == v:
            lo -= 1
        hi = i + 1
        while hi < n and ids[hi] == v:
            hi += 1
        out[0, :, i] = (lo, hi)
    return out


def bounds_kernel(ids, out_dtype):
    n = ids.shape[1]
    s = nl.ndarray((1, n), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=ids)
    d = nl.ndarray((1, 2, n), dtype=out_dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=d, segment_ids=s)
    out = nl.ndarray((1, 2, n), dtype=out_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


def test_the_pages_example(target: str) -> None:
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.int32)
    got = run_kernel(bounds_kernel, [ids, nl.int32], target=target)
    # the values the page lists for this input
    np.testing.assert_array_equal(got[0, 0], [9, 1, 1, 3, 3, 3, 9, 7, 7])
    np.testing.assert_array_equal(got[0, 1], [-1, 3, 3, 6, 6, 6, -1, 9, 9])


@pytest.mark.parametrize("n", [512, 37, 1])
@pytest.mark.parametrize(("in_dtype", "out_dtype"), [(np.float32, nl.float32), (np.int32, nl.float32),
                                                     (np.float32, nl.int32)])  # fmt: skip
def test_random_segments_aligned_and_ragged(target: str, n: int, in_dtype, out_dtype) -> None:
    rng = np.random.default_rng(n)
    # sorted ids with padding runs at both ends and a repeated id split by padding
    ids = np.sort(rng.integers(0, max(2, n // 4), size=n)).astype(in_dtype).reshape(1, n)
    if n > 8:
        ids[0, n // 2 : n // 2 + 3] = 0
    got = run_kernel(bounds_kernel, [ids, out_dtype], target=target)
    np.testing.assert_array_equal(got, reference(ids[0]))


def test_same_id_in_two_runs_and_under_nki_0_3_0() -> None:
    ids = np.array([[5, 5, 0, 5, 7, 7, 7, 5]], np.float32)
    with nki_version("0.3"):
        got = run_kernel(bounds_kernel, [ids, nl.float32], target="trn1")
    np.testing.assert_array_equal(got, reference(ids[0]))
    np.testing.assert_array_equal(got[0, 0], [0, 0, 8, 3, 4, 4, 4, 7])


def test_invalid_neighbours() -> None:
    ids = np.ones((1, 16), np.float32)
    with pytest.raises(DtypeError, match=r"sequence-bounds-dtype.*test_isa_sequence"):
        run_kernel(bounds_kernel, [ids.astype(np.float16), nl.float32], target="trn2")
    with pytest.raises(DtypeError, match=r"sequence-bounds-dtype.*test_isa_sequence"):
        run_kernel(bounds_kernel, [ids, nl.bfloat16], target="trn2")

    def two_partitions(x):
        s = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        d = nl.ndarray((2, 2, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=s)
        return x

    with pytest.raises(PartitionError, match=r"sequence-bounds-partitions.*test_isa_sequence"):
        run_kernel(two_partitions, [np.ones((2, 8), np.float32)], target="trn2")

    def flat_dst(x):
        s = nl.ndarray((1, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        d = nl.ndarray((1, 32), dtype=nl.float32, buffer=nl.sbuf)  # needs (1, 2, 16)
        nisa.sequence_bounds(dst=d, segment_ids=s)
        return x

    with pytest.raises(ShapeError, match=r"sequence-bounds-shape.*test_isa_sequence"):
        run_kernel(flat_dst, [ids], target="trn1")

    def in_psum(x):
        s = nl.ndarray((1, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        d = nl.ndarray((1, 2, 16), dtype=nl.float32, buffer=nl.psum)  # GpSimd has no PSUM access
        nisa.sequence_bounds(dst=d, segment_ids=s)
        return x

    with pytest.raises(BufferError, match=r"sequence-bounds-sbuf.*test_isa_sequence"):
        run_kernel(in_psum, [ids], target="trn2")

    def from_hbm(x):
        d = nl.ndarray((1, 2, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=x)
        return x

    with pytest.raises(BufferError, match=r"compute-no-hbm.*test_isa_sequence"):
        run_kernel(from_hbm, [ids], target="trn2")

    negative = ids.copy()
    negative[0, 3] = -2  # IDs must be non-negative integers: data, checked when it runs
    with pytest.raises(BoundsError, match=r"sequence-bounds-ids.*segment_ids\[0, 3\].*test_isa_sequence"):
        run_kernel(bounds_kernel, [negative, nl.float32], target="trn2")
    fraction = ids.copy()
    fraction[0, 5] = 1.5
    with pytest.raises(BoundsError, match=r"sequence-bounds-ids"):
        run_kernel(bounds_kernel, [fraction, nl.float32], target="trn2")
