"""``NkiTensor.vector_select`` (nki.language.NkiTensor, NKI 0.5.0) and the Known Issue
``reinterpret-cast-vector-select`` (NKI 0.5.0 and 0.6.0 release notes: "reinterpret_cast +
vector_select: Combined usage is not yet supported").

vector_select is a gather along dim 0 of an HBM tensor: output partition ``p`` reads row
``offsets[p, 0]``; references are NumPy fancy indexing. The combination with reinterpret_cast is
refused at the kernel's line under both releases listing it (no release fixed it); under 0.3.0 and
0.4.0 neither method exists (a release error). Our workaround (AWS documents none): the ``.ap()``
form with ``vector_offset`` and ``dtype``, the access-pattern page's "indirect access and dtype
reinterpret" escape hatch, accepted under every release.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from trncore.sim import errors, known_issues, nisa, nl, simulate, versions
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.testing import marked_line
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

RELEASES = versions.VERSIONS
RULE = "reinterpret-cast-vector-select"


def _offsets(idx):
    sb = nl.ndarray(idx.shape, nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=idx)
    return sb


def _copy_out(src, dtype):
    out = nl.ndarray(src.shape, dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=src)
    return out


def gather_rows(a, idx):
    return _copy_out(a.vector_select(0, _offsets(idx)), a.dtype)


def gather_rows_of_a_slice(a, idx):
    # the selected rows of columns 8..15 only: the view's own offset and dims are kept
    return _copy_out(a[:, 8:16].vector_select(0, _offsets(idx)), a.dtype)


def reinterpret_then_select(a, idx):
    offsets = _offsets(idx)
    src = a.reinterpret_cast(nl.int32).vector_select(0, offsets)  # ISSUE
    return _copy_out(src, nl.int32)


def select_then_reinterpret(a, idx):
    offsets = _offsets(idx)
    src = a.vector_select(0, offsets).reinterpret_cast(nl.int32)  # ISSUE
    return _copy_out(src, nl.int32)


def ap_gather_with_dtype(a, idx):
    """Workaround: one .ap() with vector_offset and dtype (AWS NKI Access Patterns deep dive)."""
    offsets = _offsets(idx)
    rows, cols = idx.shape[0], a.shape[1]
    src = a.ap([[cols, rows], [1, cols]], 0, vector_offset=offsets, indirect_dim=0, dtype=nl.int32)
    return _copy_out(src, nl.int32)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(55)
    a = rng.standard_normal((16, 24)).astype(np.float32)
    idx = np.array([[3], [0], [15], [3], [7], [1], [12], [9]], dtype=np.int32)
    return a, idx


@pytest.mark.parametrize("release", RELEASES)
def test_vector_select_gathers_rows(release: str) -> None:
    a, idx = _data()
    with versions.nki_version(release):
        if release < "0.5.0":
            with pytest.raises(VersionError, match="NkiTensor.vector_select needs NKI 0.5.0"):
                simulate(gather_rows)(a, idx)
            return
        np.testing.assert_array_equal(simulate(gather_rows)(a, idx), a[idx[:, 0]])
        np.testing.assert_array_equal(
            simulate(gather_rows_of_a_slice)(a, idx), a[idx[:, 0]][:, 8:16]
        )


def test_vector_select_index_out_of_bounds_is_caught_when_read() -> None:
    a, idx = _data()
    idx[2, 0] = 16  # one past the last row
    with pytest.raises(errors.BoundsError, match="row index 16"):
        simulate(gather_rows)(a, idx)


def _bad_dim(a, idx):
    return _copy_out(a.vector_select(1, _offsets(idx)), a.dtype)


def _bad_sbuf(a, idx):
    t = nl.load(a)
    return _copy_out(t.vector_select(0, _offsets(idx)), a.dtype)


def _bad_twice(a, idx):
    offsets = _offsets(idx)
    return _copy_out(a.vector_select(0, offsets).vector_select(0, offsets), a.dtype)


def _bad_offset_shape(a, idx):
    offsets = nl.ndarray((1, 8), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=offsets, value=0)
    return _copy_out(a.vector_select(0, offsets), a.dtype)


@pytest.mark.parametrize(
    ("kernel", "rule"),
    [
        (_bad_dim, "vector-select-dim"),
        (_bad_sbuf, "vector-select-hbm"),
        (_bad_twice, "vector-select-indirect"),
        (_bad_offset_shape, "vector-select-offsets"),
    ],
    ids=["dim", "sbuf", "twice", "offset_shape"],
)
def test_vector_select_constraints(kernel, rule) -> None:
    """The page's constraints, each at the kernel's line."""
    a, idx = _data()
    with pytest.raises(errors.NkiValidationError) as info:
        simulate(kernel)(a, idx)
    assert info.value.rule == rule
    assert info.value.filename == __file__


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kernel", [reinterpret_then_select, select_then_reinterpret])
def test_reinterpret_cast_with_vector_select(release: str, kernel) -> None:
    a, idx = _data()
    with versions.nki_version(release):
        if release not in known_issues.issue(RULE).releases:
            with pytest.raises(VersionError, match="needs NKI 0.5.0"):
                simulate(kernel)(a, idx)
            return
        with pytest.raises(KnownIssueError) as info:
            simulate(kernel)(a, idx)
    exc = info.value
    assert exc.rule == RULE and exc.lineno == marked_line(kernel, "# ISSUE"), str(exc)
    text = str(exc)
    assert f"{os.path.basename(__file__)}:{exc.lineno}" in text
    assert f"NKI {release}" in text and "Known Issues" in text


def test_off_mode_runs_the_reinterpreted_gather_as_aws_simulator() -> None:
    a, idx = _data()
    with known_issues.mode("off"):
        got = simulate(reinterpret_then_select)(a, idx)
    np.testing.assert_array_equal(got, a.view(np.int32)[idx[:, 0]])


@pytest.mark.parametrize("release", RELEASES)
def test_ap_workaround_everywhere(release: str) -> None:
    a, idx = _data()
    with versions.nki_version(release):
        got = simulate(ap_gather_with_dtype)(a, idx)
    np.testing.assert_array_equal(got, a.view(np.int32)[idx[:, 0]])
