"""``nisa.range_select`` with ``reduce_cmd`` chaining the Vector Engine accumulator (the
``nki.isa.range_select`` and ``nki.isa.reduce_cmd`` pages, NKI 0.3.0; ``reduce_res=None`` keeping
the result in the registers, NKI 0.6.0 page): a running row maximum over column chunks, the way
a flash-attention kernel masks and reduces one block at a time, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, TargetError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

FMIN = float(np.finfo(np.float32).min)


def chunked_max(x, lo, hi, chunk, first_cmd="reset_reduce"):
    """Masked copy of ``x`` chunk by chunk; the row maximum accumulated across the chunks and
    written once, by the last call. Output: the masked tile, then the maximum column."""
    p, f = x.shape
    b0 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b0, src=lo)
    b1 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b1, src=hi)
    m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    out = nl.ndarray((p, f + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    starts = list(range(0, f, chunk))
    for k, s in enumerate(starts):
        w = min(chunk, f - s)
        t = nl.ndarray((p, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, s : s + w])
        d = nl.ndarray((p, w), dtype=nl.float32, buffer=nl.sbuf)
        cmd = getattr(nisa.reduce_cmd, first_cmd) if k == 0 else nisa.reduce_cmd.reduce
        last = k == len(starts) - 1
        nisa.range_select(dst=d, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=b0, bound1=b1, reduce_cmd=cmd, reduce_res=m if last else None,
                          reduce_op=nl.maximum, range_start=s)  # fmt: skip
        nisa.dma_copy(dst=out[:, s : s + w], src=d)
    nisa.dma_copy(dst=out[:, f : f + 1], src=m)
    return out


def reference(x, lo, hi):
    idx = np.arange(x.shape[1], dtype=np.float32)[None, :]
    sel = np.where((idx >= lo) & (idx < hi), x, np.float32(FMIN))
    return sel, sel.max(axis=1, keepdims=True)


@pytest.mark.parametrize(("p", "f", "chunk"), [(128, 512, 128), (37, 300, 64), (8, 10, 10)])
def test_running_maximum_over_chunks(p: int, f: int, chunk: int) -> None:
    rng = np.random.default_rng(p + f)
    x = rng.standard_normal((p, f)).astype(np.float32)
    lo = rng.integers(0, f // 2, (p, 1)).astype(np.float32)
    hi = lo + rng.integers(1, f // 2 + 1, (p, 1)).astype(np.float32)
    sel, mx = reference(x, lo, hi)
    for _ in range(2):  # traced, then replayed: the registers start afresh on every run
        got = run_kernel(chunked_max, [x, lo, hi, chunk], target="trn2")
        np.testing.assert_array_equal(got[:, :f], sel)
        np.testing.assert_array_equal(got[:, f:], mx)


def test_reset_only_then_reduce() -> None:
    # reset: registers to their initial state without this call's values; the later calls reduce
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 96)).astype(np.float32)
    lo = np.zeros((16, 1), np.float32)
    hi = np.full((16, 1), 96, np.float32)
    got = run_kernel(chunked_max, [x, lo, hi, 32, "reset"], target="trn2")
    np.testing.assert_array_equal(got[:, 96:], x[:, 32:].max(axis=1, keepdims=True))


def test_invalid_neighbours() -> None:
    x = np.zeros((8, 16), np.float32)
    b = np.zeros((8, 1), np.float32)
    with pytest.raises(NotImplementedError, match="load_reduce"):
        run_kernel(chunked_max, [x, b, b, 8, "load_reduce"], target="trn2")

    with pytest.raises(TargetError, match=r"range-select-target.*test_isa_range_select_chain"):
        run_kernel(chunked_max, [x, b, b, 8], target="trn1")


def _cmd_as_given(cmd):
    """One ``range_select`` over the whole row with ``reduce_cmd`` exactly as given; output: the
    masked tile, then the row maximum written through ``reduce_res``."""

    def kernel(x, lo, hi):
        p, f = x.shape
        t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        b0 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b0, src=lo)
        b1 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b1, src=hi)
        d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=d, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b0, bound1=b1, reduce_cmd=cmd, reduce_res=m, reduce_op=nl.maximum)  # HERE  # noqa: E501  # fmt: skip
        out = nl.ndarray((p, f + 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:f], src=d)
        nisa.dma_copy(dst=out[:, f : f + 1], src=m)
        return out

    return kernel


def test_raw_integer_reduce_cmd_runs_as_the_member_with_a_warning() -> None:
    # As every enum parameter (docs/emulator.md, Readings chosen): the NKI 0.3.0 update guide
    # refuses raw integers, AWS's NKI Library passes them; 3 is reduce_cmd.reset_reduce's value
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    lo = np.full((16, 1), 4, np.float32)
    hi = rng.integers(10, 40, size=(16, 1)).astype(np.float32)
    kernel = _cmd_as_given(3)
    with pytest.warns(UserWarning, match=r"range_select: reduce_cmd=3 is a raw integer") as record:
        got = run_kernel(kernel, [x, lo, hi], target="trn2")
    line = marked_line(kernel)
    assert any(f":{line})" in str(w.message) and "reset_reduce" in str(w.message) for w in record)
    idx = np.arange(40)[None, :]
    want = np.where((idx >= lo) & (idx < hi), x, FMIN)
    np.testing.assert_array_equal(got[:, :40], want)
    np.testing.assert_array_equal(got[:, 40:], want.max(axis=1, keepdims=True))


@pytest.mark.parametrize("cmd", [7, "reset_reduce", 3.0, True])
def test_reduce_cmd_values_no_member_has_are_refused_at_the_line(cmd) -> None:
    x = np.zeros((8, 16), np.float32)
    b = np.zeros((8, 1), np.float32)
    kernel = _cmd_as_given(cmd)
    with pytest.raises(LanguageError, match="reduce_cmd must be a nisa.reduce_cmd member") as info:
        run_kernel(kernel, [x, b, b], target="trn2")
    assert info.value.rule == "enum-member"
    assert_reported_at(info.value, kernel)
