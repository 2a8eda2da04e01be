"""Tracing's structural shortcuts (docs/emulator-speed.md, ninth round): ``dma_copy``'s
static checks keyed without the views' element offsets, and ``nl.ndarray``'s memo also keeping
the sizes every tile of one shape and dtype computes. A loop whose SECOND pass through a line
brings another signature (offset, partition count, dtype, shape) is still refused at that line,
or computes what NumPy computes."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, run_kernel, simulate
from trncore.sim.errors import BoundsError, BufferError, ShapeError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2039)


def _tile_loop(plan):
    """Per step ``(row, col, rows, cols)``: the HBM region ``a[row:row+rows, col:col+cols]``
    moved to SBUF and back to the same region of the output, each through one kernel line."""

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        sb = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        for row, col, rows, cols in plan:
            nisa.dma_copy(dst=sb[0:rows, 0:cols], src=a[row : row + rows, col : col + cols])  # IN
            nisa.dma_copy(dst=out[row : row + rows, col : col + cols], src=sb[0:rows, 0:cols])  # OUT
        return out

    return kernel


def test_dma_loop_over_offsets_matches_numpy(target: str) -> None:
    # one signature at ever new offsets (the offset-free key hits from the second step), then
    # other shapes at the same line
    plan = [(r, c, 32, 16) for r in (0, 32, 96) for c in (0, 16, 48)] + [(0, 0, 128, 64), (5, 3, 7, 9)]
    a = rng.standard_normal((128, 64)).astype(np.float32)
    got = simulate(_tile_loop(plan))(a)
    want = np.full_like(a, np.nan)
    for row, col, rows, cols in plan:
        want[row : row + rows, col : col + cols] = a[row : row + rows, col : col + cols]
    np.testing.assert_array_equal(got, want)


def test_dma_second_iteration_other_count_refused(target: str) -> None:
    # the second pass reads another region whose element count differs from dst's: refused at
    # the line, although the first pass (another offset, same dst) passed the checks
    def kernel(a):
        sb = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.sbuf)
        for row, rows in ((0, 64), (64, 32)):
            nisa.dma_copy(dst=sb, src=a[row : row + rows, :])  # DMA
        return a

    with pytest.raises(ShapeError) as info:
        simulate(kernel)(rng.standard_normal((128, 64)).astype(np.float32))
    assert info.value.rule == "element-count"
    assert info.value.lineno == marked_line(kernel, "# DMA")


def test_dma_second_iteration_other_partitions_refused(target: str) -> None:
    # the same element count at another offset, but the second pass's source spans 32 partitions
    # of 128 elements where the first spanned 64 of 64: the count still matches, the shapes of
    # the views differ (another signature), and a PSUM destination is refused at the line
    def kernel(a):
        sb = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.sbuf)
        ps = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.psum)
        for dst, row in ((sb, 0), (sb, 64), (ps, 32)):
            nisa.dma_copy(dst=dst, src=a[row : row + 64, :])  # DMA
        return a

    with pytest.raises(BufferError) as info:
        simulate(kernel)(rng.standard_normal((128, 64)).astype(np.float32))
    assert info.value.rule == "dma-no-psum"
    assert info.value.lineno == marked_line(kernel, "# DMA")


def test_dma_second_iteration_ap_out_of_bounds_refused(target: str) -> None:
    # an .ap() view's bounds are checked when the DMA reads it: the second pass's offset puts the
    # pattern past the tensor's end (same pattern, same line, only the offset differs)
    def kernel(a):
        sb = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.sbuf)
        for offset in (0, 64 * 64, 128 * 64 - 64):
            src = a.ap([[64, 64], [1, 64]], offset=offset)
            nisa.dma_copy(dst=sb, src=src)  # DMA
        return a

    with pytest.raises(BoundsError) as info:
        simulate(kernel)(rng.standard_normal((128, 64)).astype(np.float32))
    assert info.value.rule == "access-in-bounds"
    assert info.value.lineno == marked_line(kernel, "# DMA")


def test_dma_second_iteration_other_dtype_casts(target: str) -> None:
    # the same line and offsets, the second pass into a float16 tile: a cast, not a raw copy
    def kernel(a):
        out = nl.ndarray((2, 64, 64), dtype=nl.float16, buffer=nl.shared_hbm)
        for i, dt in enumerate((nl.float32, nl.float16)):
            sb = nl.ndarray((64, 64), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb, src=a[i])  # DMA
            nisa.dma_copy(dst=out[i], src=sb)
        return out

    a = rng.standard_normal((2, 64, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel)(a), a.astype(np.float16))


def _alloc_loop(plan):
    """Per step ``(shape, dtype)``: a tile allocated through one kernel line, filled from the
    top-left ``shape`` block of ``a[i]`` (cast to its dtype) and stored to its own output slot,
    row-major."""

    def kernel(a):
        out = nl.ndarray((len(plan), 64 * 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i, (shape, dt) in enumerate(plan):
            t = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)  # ALLOC
            n = shape[0] * shape[1]
            nisa.dma_copy(dst=t, src=a[i][0 : shape[0], 0 : shape[1]])
            nisa.dma_copy(dst=out[i][0:n].reshape(shape), src=t)
        return out

    return kernel


def test_allocation_loop_of_shapes_and_dtypes_matches_numpy(target: str) -> None:
    # one allocation line: the sizes the memo keeps belong to each pass's own shape and dtype
    # (float16 rounds the float32 values; the int32 steps get whole numbers, which every cast
    # mode keeps exactly)
    plan = [
        ((64, 64), nl.float32), ((64, 64), nl.float16), ((64, 64), nl.float32),
        ((32, 16), nl.float32), ((32, 16), nl.int32), ((64, 64), nl.int32), ((64, 64), nl.float16),
    ]  # fmt: skip
    a = (rng.standard_normal((len(plan), 64, 64)) * 3000).astype(np.float32)
    for i, (_shape, dt) in enumerate(plan):
        if dt is nl.int32:
            a[i] = np.round(a[i])
    got = simulate(_alloc_loop(plan))(a)
    for i, (shape, dt) in enumerate(plan):
        n = shape[0] * shape[1]
        want = a[i, 0 : shape[0], 0 : shape[1]]
        if dt is nl.float16:
            want = want.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(got[i, 0:n].reshape(shape), want, err_msg=f"step {i}")


_TWICE = 1 + 2**-11 + 2**-30


def test_memset_loop_values_dtypes_and_signed_zero_match_numpy(target: str) -> None:
    # one memset line: each pass's own value, dtype and shape (the fill arrays are shared per
    # trace by (shape, dtype, value): -0.0 and 0.0 are equal with equal hashes, 1 and 1.0 too)
    plan = [
        (nl.float32, (64, 32), 0.0), (nl.float32, (64, 32), -0.0), (nl.float32, (64, 32), 0.0),
        (nl.float16, (64, 32), -0.0), (nl.int32, (64, 32), 1), (nl.float32, (64, 32), 1),
        (nl.float32, (32, 32), 2.5), (nl.float32, (64, 32), 2.5), (nl.float16, (64, 32), 2.5),
        # rounded to float32 first, this value would round to 1.0 in float16 (a tie, to even);
        # rounded once, as the memset casts it, it is float16's next value above 1
        (nl.float32, (64, 32), _TWICE), (nl.float16, (64, 32), _TWICE),
    ]  # fmt: skip
    numpy_type = {nl.float32: np.float32, nl.float16: np.float16, nl.int32: np.int32}

    def kernel(a):
        out = nl.ndarray((len(plan), 64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        for i, (dt, shape, value) in enumerate(plan):
            t = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
            nisa.memset(dst=t, value=value)  # MEMSET
            f = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=f, value=7.0)
            nisa.tensor_copy(dst=f[0 : shape[0], :], src=t)
            nisa.dma_copy(dst=out[i], src=f)
        return out

    got = simulate(kernel)(np.zeros((1, 1), np.float32))
    assert np.float16(np.float32(_TWICE)) != np.float16(_TWICE)  # (the case above is one)
    for i, (dt, shape, value) in enumerate(plan):
        want = np.full((64, 32), 7.0, np.float32)
        want[0 : shape[0]] = np.float32(numpy_type[dt](value))
        np.testing.assert_array_equal(got[i], want, err_msg=f"step {i}")
        # the sign of zero survives (assert_array_equal treats -0.0 == 0.0)
        np.testing.assert_array_equal(np.signbit(got[i]), np.signbit(want), err_msg=f"step {i}")


def test_matmul_flags_remade_from_the_summary(target: str) -> None:
    # nki.isa.nc_matmul (NKI 0.3.0 and 0.6.0), accumulate=None: "the first write to a PSUM
    # location overwrites, and subsequent writes to the same location accumulate" (per element
    # from 0.6.0). A whole-tile matmul leaves no per-element flags (the tile's summary says
    # "all written by a matmul"); a later partial copy must remake them as all set before
    # clearing its columns, so the next matmul overwrites those columns and accumulates the rest.
    def kernel(s, m1, m2):
        st = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        a1 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        a2 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=s)
        nisa.dma_copy(dst=a1, src=m1)
        nisa.dma_copy(dst=a2, src=m2)
        z = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        ps = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=st, moving=a1)
        nisa.tensor_copy(dst=ps[:, 0:32], src=z)
        nisa.nc_matmul(dst=ps, stationary=st, moving=a2)
        sb = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=sb)
        return out

    s = rng.integers(-4, 5, (128, 64)).astype(np.float32)
    m1, m2 = (rng.integers(-4, 5, (128, 128)).astype(np.float32) for _ in range(2))
    got = simulate(kernel, nki_version="0.6.0")(s, m1, m2)
    want = s.T @ m1 + s.T @ m2
    want[:, 0:32] = (s.T @ m2)[:, 0:32]
    np.testing.assert_array_equal(got, want)


def test_dma_second_iteration_vector_offset_with_hwdge_refused() -> None:
    # NKI DGE deep dive (SDK 2.29 and 2.32): a gather (.ap(vector_offset=...)) takes dge_mode
    # unknown or swdge. The same line, the same pattern and dge_mode=hwdge: the first pass reads a
    # static view (valid on trn2), the second the gather, refused at the line.
    def kernel(data, indices):
        idx = nl.ndarray((32, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        dst = nl.ndarray((32, 16), dtype=data.dtype, buffer=nl.sbuf)
        for gather in (False, True):
            if gather:
                view = data.ap(pattern=[[16, 32], [1, 16]], vector_offset=idx, indirect_dim=0)
            else:
                view = data.ap(pattern=[[16, 32], [1, 16]], offset=0)
            nisa.dma_copy(dst=dst, src=view, dge_mode=nisa.dge_mode.hwdge)  # DMA
        return data

    from trncore.sim.errors import LanguageError

    data = rng.standard_normal((64, 16)).astype(np.float32)
    rows = rng.permutation(64)[:32].astype(np.uint32).reshape(32, 1)
    with pytest.raises(LanguageError) as info:
        run_kernel(kernel, [data, rows], target="trn2")
    assert info.value.rule == "dma-copy-indirect-dge"
    assert info.value.lineno == marked_line(kernel, "# DMA")


def test_dma_loop_of_register_offsets_matches_numpy(target: str) -> None:
    # one line, one pattern, another register offset value each pass (the key holds the
    # offset's kind; its value is read when the DMA runs)
    def kernel(a, rows):
        out = nl.ndarray((4, 8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in range(4):
            r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=r, src=rows[i : i + 1, :])
            sb = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
            src = a.ap([[16, 8], [1, 16]], offset=0, scalar_offset=r, indirect_dim=0)
            nisa.dma_copy(dst=sb, src=src)  # DMA
            nisa.dma_copy(dst=out[i], src=sb)
        return out

    a = rng.standard_normal((64, 16)).astype(np.float32)
    rows = np.array([[3], [40], [0], [56]], dtype=np.int32)
    want = np.stack([a[r : r + 8] for r in rows[:, 0]])
    np.testing.assert_array_equal(simulate(kernel)(a, rows), want)


def _dynamic_source_kernel(mode):
    """A register-offset ``dma_copy`` (``oob_mode`` ``mode``) from rows ``start..start+1`` of
    ``base`` into (a) a whole tile and (b) the left half of a tile, both on recycled storage (a
    dead tile held ones); each tile copied out whole."""

    def kernel(base, start):
        p, f = 2, base.shape[1]
        h = f // 2
        out = nl.ndarray((2 * p, f), nl.float32, buffer=nl.shared_hbm)
        spare = nl.ndarray((p, f), nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=start)

        def recycled():
            primer = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=primer, value=1.0)
            nisa.dma_copy(dst=spare, src=primer)
            del primer  # its storage goes to the next tile of its size
            return nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)

        whole = recycled()
        rows = base.ap([[f, p], [1, f]], scalar_offset=s, indirect_dim=0)
        nisa.dma_copy(dst=whole, src=rows, oob_mode=mode)
        nisa.dma_copy(dst=out[0:p, :], src=whole)
        half = recycled()
        left = base.ap([[f, p], [1, h]], scalar_offset=s, indirect_dim=0)
        nisa.dma_copy(dst=half[:, 0:h], src=left, oob_mode=mode)
        nisa.dma_copy(dst=out[p : 2 * p, :], src=half)
        return out

    return kernel


def test_dynamic_source_dma_fills_only_what_a_replay_can_leave_unwritten() -> None:
    # A dma_copy with oob_mode=error writes all of its dst or raises (nki.isa.dma_copy, NKI
    # 0.3.0: out-of-bounds dynamic addresses are an error unless oob_mode=skip), so a tile it
    # writes whole needs no sentinel fill even with a register-offset source; under
    # oob_mode=skip a replay whose offset is out of bounds skips the transfer and the tile must
    # read as the sentinel (NaN), not as the recycled storage's ones. The trace is made with an
    # offset in bounds (where both modes write), the later calls replay it with other offsets.
    import trncore.sim as sim

    base = rng.standard_normal((16, 8)).astype(np.float32)
    nan_half = np.full((2, 4), np.nan, np.float32)
    sim.clear_cache()
    error = simulate(_dynamic_source_kernel(nisa.oob_mode.error))
    skip = simulate(_dynamic_source_kernel(nisa.oob_mode.skip))
    for first in (3, 9, 14):  # traced at 3, replayed at 9 and 14
        half = np.concatenate([base[first : first + 2, :4], nan_half], axis=1)
        want = np.concatenate([base[first : first + 2], half])
        for kernel in (error, skip):
            np.testing.assert_array_equal(kernel(base, np.array([[first]], np.int32)), want)
    for first in (15, -1):  # out of bounds: error refuses, skip leaves both tiles at NaN
        with pytest.raises(BoundsError, match=f"scalar_offset value {first}"):
            error(base, np.array([[first]], np.int32))
        got = skip(base, np.array([[first]], np.int32))
        np.testing.assert_array_equal(got, np.full((4, 8), np.nan, np.float32))


_FP32_MIN = float(np.finfo(np.float32).min)


def _range_select_loop(plan):
    """Per pass a dict of changes to one ``range_select`` call (the same kernel line): ``start``
    (range_start), ``ops`` (the two comparisons), ``rows`` (the dst/source partitions used from
    ``first``), ``first``, ``false`` (on_false_value), ``cmd`` (reduce_cmd), ``bound`` (bound0's
    dtype); each pass's selection and row maximum copied out."""

    def kernel(x, lo, hi):
        p, f = x.shape
        out = nl.ndarray((len(plan), p, f + 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        b1 = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b1, src=hi)
        for k, step in enumerate(plan):
            first, rows = step.get("first", 0), step.get("rows", p)
            b0 = nl.ndarray((p, 1), step.get("bound", nl.float32), buffer=nl.sbuf)
            nisa.dma_copy(dst=b0, src=lo)
            d = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=d, value=0.0)
            m = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=m, value=0.0)
            op0, op1 = step.get("ops", (nl.greater_equal, nl.less))
            r = slice(first, first + rows)
            nisa.range_select(dst=d[r, :], on_true_tile=t[r, :], comp_op0=op0, comp_op1=op1, bound0=b0[r, :], bound1=b1[r, :], reduce_cmd=step.get("cmd", nisa.reduce_cmd.reset_reduce), reduce_res=m[r, :], reduce_op=nl.maximum, range_start=step.get("start", 0), on_false_value=step.get("false", _FP32_MIN))  # SELECT  # noqa: E501  # fmt: skip
            nisa.dma_copy(dst=out[k, :, 0:f], src=d)
            nisa.dma_copy(dst=out[k, :, f : f + 1], src=m)
        return out

    return kernel


def _select_reference(x, lo, hi, start=0, ops=(np.greater_equal, np.less), first=0, rows=None):
    p, f = x.shape
    rows = p if rows is None else rows
    idx = start + np.arange(f, dtype=np.float32)[None, :]
    sel = np.where(ops[0](idx, lo) & ops[1](idx, hi), x, np.float32(_FP32_MIN))
    want = np.zeros((p, f + 1), np.float32)
    want[first : first + rows, :f] = sel[first : first + rows]
    want[first : first + rows, f:] = sel[first : first + rows].max(axis=1, keepdims=True)
    return want


def test_range_select_memo_second_pass_signatures() -> None:
    # range_select's static checks are memoised per line and signature: a second pass with
    # another range_start, other comparisons or other rows computes NumPy's values, and one
    # with another on_false_value, a bool range_start, a float reduce_cmd, a bfloat16 bound or
    # a start partition a 64-row access may not use is refused at the kernel's line
    # (nki.isa.range_select page, NKI 0.3.0; start partitions: AWS Trainium/Inferentia2
    # Architecture Guide for NKI, NKI 0.3.0)
    from trncore.sim.errors import DtypeError, LanguageError, PartitionError

    p, f = 128, 48
    x = rng.standard_normal((p, f)).astype(np.float32)
    lo = rng.integers(0, f // 2, (p, 1)).astype(np.float32)
    hi = lo + rng.integers(1, f // 2 + 1, (p, 1)).astype(np.float32)
    plan = [{}, {"start": 7}, {"ops": (nl.greater, nl.less_equal)}, {"first": 64, "rows": 64}]
    got = run_kernel(_range_select_loop(plan), [x, lo, hi], target="trn2")
    np.testing.assert_array_equal(got[0], _select_reference(x, lo, hi))
    np.testing.assert_array_equal(got[1], _select_reference(x, lo, hi, start=7))
    np.testing.assert_array_equal(got[2], _select_reference(x, lo, hi, ops=(np.greater, np.less_equal)))
    np.testing.assert_array_equal(got[3], _select_reference(x, lo, hi, first=64, rows=64))
    bad = [  # (first pass, second pass): equal (==) where a key could confuse them
        ({}, {"false": 0.0}, DtypeError, "on_false_value"),
        ({"start": 1}, {"start": True}, TypeError, "range_start"),
        ({}, {"cmd": 3.0}, LanguageError, "reduce_cmd"),  # (reduce_cmd.reset_reduce == 3.0)
        ({}, {"bound": nl.bfloat16}, DtypeError, "bound0 must be float32"),
        ({"rows": 64}, {"first": 16, "rows": 64}, PartitionError, "start"),
    ]
    for before, change, error, text in bad:
        kernel = _range_select_loop([before, change])
        with pytest.raises(error, match=text) as info:
            run_kernel(kernel, [x, lo, hi], target="trn2")
        if error is not TypeError:
            assert f":{marked_line(kernel, 'SELECT')}" in str(info.value)
    # a raw integer that is a member's value runs as the member, warned at the line: the
    # member's memo entry must not swallow the warning (Readings chosen, raw integer enums)
    kernel = _range_select_loop([{}, {"cmd": 3}])
    with pytest.warns(UserWarning, match="reduce_cmd=3 is a raw integer") as record:
        got = run_kernel(kernel, [x, lo, hi], target="trn2")
    assert any(f":{marked_line(kernel, 'SELECT')})" in str(w.message) for w in record)
    np.testing.assert_array_equal(got[1], _select_reference(x, lo, hi))
