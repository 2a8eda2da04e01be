"""The LNC=2 race check's record index (trncore.sim.core_races._Store; docs/emulator-speed.md,
twelfth round): records filed once, by the byte-range bucket they start in. Against a
scan of every record: ``near`` finds exactly the records whose byte range meets the query's,
in the order a scan of every bucket each record spans gives (wide records first in filing
order, then by the first bucket of the query's range a record covers, then filing order), before
and after pruning."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim.core_races import _BUCKETS, _WIDE, _Footprint, _Record, _Store

pytestmark = pytest.mark.simulator


def _record(lo: int, nbytes: int) -> _Record:
    # a float32 run of nbytes // 4 elements from byte lo: [lo, lo + nbytes)
    return _Record(0, 0, False, _Footprint(4, lo // 4, ((1, nbytes // 4),)), "dma_copy", None)


def _scan(records: list[_Record], fp: _Footprint, bsize: int) -> list[_Record]:
    """The reference: every record checked, ordered as the bucket scan orders them."""
    first = fp.lo // bsize
    wide = [r for r in records if (r.fp.hi - 1) // bsize - r.fp.lo // bsize >= _WIDE]
    rest = [r for r in records if r not in wide]
    meets = [r for r in rest if r.fp.lo < fp.hi and fp.lo < r.fp.hi]
    meets.sort(key=lambda r: (max(r.fp.lo // bsize, first), records.index(r)))
    return [r for r in wide if r.fp.lo < fp.hi and fp.lo < r.fp.hi] + meets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_near_finds_the_records_a_full_scan_finds_in_its_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nbytes = 1 << 16
    store = _Store(nbytes)
    records = []
    for _ in range(300):
        # short runs (a few buckets), long runs (kept apart as wide) and single elements
        size = int(rng.choice([4, 4 * int(rng.integers(1, 200)), 4 * int(rng.integers(2000, 8000))]))
        lo = 4 * int(rng.integers(0, (nbytes - size) // 4 + 1))
        rec = _record(lo, size)
        store.add(rec)
        records.append(rec)
    assert store.wide and store.buckets  # both kinds are exercised
    for _ in range(200):
        size = 4 * int(rng.integers(1, 1200))
        fp = _Footprint(4, int(rng.integers(0, (nbytes - size) // 4 + 1)), ((1, size // 4),))
        assert store.near(fp) == _scan(records, fp, store.bsize)
    # pruning keeps the order of what is left
    keep = set(rng.choice(len(records), size=150, replace=False).tolist())
    kept = [r for k, r in enumerate(records) if k in keep]
    store.prune(lambda r: r in kept)
    for _ in range(100):
        size = 4 * int(rng.integers(1, 1200))
        fp = _Footprint(4, int(rng.integers(0, (nbytes - size) // 4 + 1)), ((1, size // 4),))
        assert store.near(fp) == _scan(kept, fp, store.bsize)


def test_a_record_starting_far_before_the_query_is_found() -> None:
    # a record spanning _WIDE - 1 buckets, met only at its last byte
    store = _Store(_BUCKETS * 64)
    long = _record(0, (_WIDE - 1) * store.bsize + 4)
    store.add(long)
    store.add(_record(8 * store.bsize, 4))
    query = _Footprint(4, ((_WIDE - 1) * store.bsize) // 4, ((1, 1),))
    assert store.near(query) == [long]
    assert store.near(_Footprint(4, ((_WIDE - 1) * store.bsize) // 4 + 1, ((1, 1),))) == []
