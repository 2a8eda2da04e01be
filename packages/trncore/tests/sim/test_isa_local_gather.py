"""``nisa.local_gather`` against the NumPy reference of AWS's page, and its rules' neighbours.

AWS NKI docs, nki.isa.local_gather (NKI 0.3.0 through 0.6.0) and its example
``test_nki_isa_local_gather.py``: per GpSimd core (16 partitions) the indices of the core's
``index`` slice, flattened partition dimension first, the first ``num_valid_indices`` of them;
each partition takes ``src_buffer[p, i : i + num_elem_per_idx]`` for each index ``i`` (the
example's indices are pre-multiplied by ``num_elem_per_idx``).
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import errors, nisa, nl, simulate, versions
from trncore.sim.known_issues import KnownIssueError

pytestmark = pytest.mark.simulator


def gather(src_hbm, index_hbm, elems, valid, out_free):
    src = nl.load(src_hbm)
    index = nl.load(index_hbm)
    dst = nl.ndarray((src.shape[0], out_free), dtype=src.dtype, buffer=nl.sbuf)
    nisa.local_gather(dst=dst, src_buffer=src, index=index, num_elem_per_idx=elems,
                      num_valid_indices=valid)  # fmt: skip
    out = nl.ndarray(dst.shape, dtype=dst.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=dst)
    return out


def reference(src, index, elems, valid):
    """The page's NumPy semantics, written for (P, F) sources and element-offset indices."""
    p, f = src.shape
    out = np.empty((p, valid, elems), src.dtype)
    for c in range(0, p, 16):
        starts = index[c : c + 16].flatten(order="F")[:valid].astype(np.int64)
        rows = src[c : c + 16].reshape(16, f // elems, elems)
        out[c : c + 16] = np.take(rows, starts // elems, axis=1)
    return out.reshape(p, valid * elems)


@pytest.mark.parametrize(("elems", "valid"), [(4, 64), (1, 48), (2, 30), (32, 8)])
def test_matches_the_pages_numpy_reference(target: str, elems: int, valid: int) -> None:
    rng = np.random.default_rng(elems * 100 + valid)
    src = (rng.random((128, 2048)) * 100).astype(np.float32)
    per_core = rng.integers(0, 2048 // elems, size=(16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1)) * np.uint16(elems)  # as the page's example: one list per core
    index[16:32] = rng.integers(0, 2048 // elems, size=(16, 4)) * elems  # core 1: its own list
    got = simulate(gather)(src, index, elems, valid, valid * elems)
    np.testing.assert_array_equal(got, reference(src, index, elems, valid))


def test_bf16_kept_and_default_valid_count(target: str) -> None:
    import ml_dtypes

    rng = np.random.default_rng(1)
    src = rng.standard_normal((32, 64)).astype(ml_dtypes.bfloat16)
    index = rng.integers(0, 64, size=(32, 2)).astype(np.uint16)
    got = simulate(gather)(src, index, 1, None, 32)  # default: 16 partitions x 2 indices
    assert got.dtype == src.dtype
    np.testing.assert_array_equal(got, reference(src, index, 1, 32))


@pytest.mark.parametrize(
    ("case", "error", "rule"),
    [
        ("index int32", errors.DtypeError, "local-gather-index-dtype"),
        ("24 partitions", errors.ShapeError, "local-gather-partitions"),
        ("65 valid of 64", errors.ShapeError, "local-gather-indices"),
        ("dst too small", errors.ShapeError, "local-gather-dst"),
        ("index past the row", errors.BoundsError, "local-gather-index-range"),
    ],
)
def test_invalid_neighbours_are_refused_at_the_kernel_line(case, error, rule) -> None:
    src = np.ones((32, 64), np.float32)
    index = np.zeros((32, 4), np.uint16)
    args: tuple = (src, index, 1, 64, 64)
    if case == "index int32":
        args = (src, index.astype(np.int32), 1, 64, 64)
    elif case == "24 partitions":
        args = (src[:24], index[:24], 1, 64, 64)
    elif case == "65 valid of 64":
        args = (src, index, 1, 65, 65)
    elif case == "dst too small":
        args = (src, index, 1, 64, 63)
    elif case == "index past the row":
        index = index.copy()
        index[5, 1] = 63
        args = (src, index, 2, 32, 64)  # elements 63 and 64 of a 64-element row
    with pytest.raises(error) as info:
        simulate(gather)(*args)
    assert info.value.rule == rule
    assert info.value.filename.endswith("test_isa_local_gather.py")
    with pytest.raises(ValueError, match="num_elem_per_idx"):
        simulate(gather)(src, index, 3, 16, 48)


def test_known_issue_off_mode_gathers_one_element_per_index() -> None:
    # NKI 0.6.0 release notes, Known Issues: num_elem_per_idx is ignored unless
    # num_valid_indices * num_elem_per_idx == dst.size / dst.shape[0]
    rng = np.random.default_rng(2)
    src = rng.standard_normal((16, 64)).astype(np.float32)
    index = (rng.integers(0, 32, size=(16, 1)) * 2).astype(np.uint16)
    with versions.nki_version("0.6.0"):
        with pytest.raises(KnownIssueError):
            simulate(gather)(src, index, 2, 16, 64)
        got = simulate(gather, known_issues="off")(src, index, 2, 16, 64)
    np.testing.assert_array_equal(got[:, :16], reference(src, index, 1, 16))
    with versions.nki_version("0.5.0"):  # not listed: the documented semantics
        got = simulate(gather)(src, index, 2, 16, 64)
    np.testing.assert_array_equal(got[:, :32], reference(src, index, 2, 16))
