"""The data-work fast paths (docs/emulator-speed.md, "Data work, eighth round") against
NumPy references written here, on the layouts each path takes and the ones it leaves to the
general code: wide and short rows, strided views, in-place and separate dst, NaN, +-inf, -0.0,
subnormals, ties.

- max8 (nki.isa.max8, NKI 0.3.0): the 8 largest values per partition, descending; the
  reference is a stable descending sort (equal values, 0.0 and -0.0 among them, in column
  order), NaN last.
- nc_match_replace8 (nki.isa.nc_match_replace8, NKI 0.3.0): the first occurrence of each value
  replaced, duplicates in vals take successive occurrences, slots 7, 6, ... first; the
  reference is a loop over each row.
- range_select (nki.isa.range_select, NKI 0.3.0): the page's NumPy equivalent.
- activation (nki.isa.activation, NKI 0.3.0): ``op(data * scale + bias)`` in float32.
- float to int casts (docs/emulator.md, Numerics): round to nearest even (or truncate before
  0.6.0), saturate, NaN to 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import dtypes, nisa, nl, simulate

pytestmark = pytest.mark.simulator

F32_MIN = np.float32(-3.4028235e38)


def _rows(kind: str, p: int, f: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.standard_normal((p, f)).astype(np.float32)
    if kind == "ties":  # few distinct values, zeros of both signs among them
        x = rng.integers(-2, 3, (p, f)).astype(np.float32)
        x[rng.random((p, f)) < 0.3] = -0.0
        return x
    if kind == "mostly_neg_inf":  # fewer than 8 groups above -inf in some rows
        x = np.full((p, f), -np.inf, np.float32)
        x[:, rng.integers(0, f, 5)] = 2.0
        x[0, 3] = 7.0
        return x
    if kind == "nan":
        x = rng.standard_normal((p, f)).astype(np.float32)
        x[rng.random((p, f)) < 0.002] = np.nan
        return x
    if kind == "inf_and_zero":
        x = rng.standard_normal((p, f)).astype(np.float32) - 4.0
        x[rng.random((p, f)) < 0.01] = np.inf
        x[:, 1] = 0.0
        x[:, 2] = -0.0
        return x
    assert kind == "subnormal"
    return (rng.standard_normal((p, f)) * 1e-40).astype(np.float32)


def _top8_reference(x: np.ndarray) -> np.ndarray:
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]  # NaN (-NaN too) sorts last
    return np.take_along_axis(x, order, axis=1)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """NaN at the same places, every other element the same bits (the sign of a zero too)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[keep], want.view(np.uint32)[keep])


def _max8_kernel(x, lo, hi):
    p, f = x.shape
    big = nl.ndarray((p, f + 40), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=big, value=-5.0)
    nisa.dma_copy(dst=big[:, 40 : 40 + f], src=x)
    top = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=big[:, 40 + lo : 40 + hi])  # a strided view (rows f + 40 apart)
    out = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=top)
    return out


@pytest.mark.parametrize("kind", ["normal", "ties", "mostly_neg_inf", "nan", "inf_and_zero", "subnormal"])
@pytest.mark.parametrize("f", [16, 600, 2608, 2051])
def test_max8_matches_a_stable_descending_sort(kind: str, f: int) -> None:
    x = _rows(kind, 32, f, seed=f)
    got = simulate(_max8_kernel)(x, 0, f)
    want = _top8_reference(x)
    # bit for bit: the sign of a zero and every NaN position
    _same_bits(got, want)
    # a window of the row (start and end not multiples of 8)
    got = simulate(_max8_kernel)(x, 3, f - 5)
    want = _top8_reference(x[:, 3 : f - 5])
    _same_bits(got, want)


def _replace_reference(x: np.ndarray, v: np.ndarray, imm: float) -> tuple[np.ndarray, np.ndarray]:
    out = x.copy()
    idx = np.full(v.shape, 0xFFFFFFFF, dtype=np.uint32)
    for r in range(x.shape[0]):
        taken: set[int] = set()
        for i in reversed(range(8)):  # slots 7, 6, ... take the occurrences in column order
            for c in range(x.shape[1]):
                if x[r, c] == v[r, i] and c not in taken:
                    taken.add(c)
                    idx[r, i] = c
                    out[r, c] = imm
                    break
    return out, idx


def _replace_kernel(x, v, in_place):
    p, f = x.shape
    big = nl.ndarray((p, f + 24), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=big, value=0.0)
    d = big[:, 8 : 8 + f]  # a strided view of the tile
    nisa.dma_copy(dst=d, src=x)
    vals = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vals, src=v)
    idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.sbuf)
    if in_place:
        dst = d
    else:
        dst = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=dst, data=d, vals=vals, imm=-7.5, dst_idx=idx)
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    out_idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_idx, src=idx)
    return out, out_idx


@pytest.mark.parametrize("in_place", [True, False])
def test_match_replace8_in_place_and_separate_dst_match_the_loop(in_place: bool) -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(-20, 20, (6, 530)).astype(np.float32)
    x[0, 5] = -0.0
    x[1, :4] = np.nan
    v = np.stack([np.sort(r[~np.isnan(r)])[::-1][:8] for r in x]).astype(np.float32)
    v[2] = [3, 3, 3, 50, 50, -1, 0.0, 3]  # duplicates; 50 is absent; 0.0 matches -0.0 too
    v[3] = np.nan  # matches nothing
    v[4] = [x[4, 0]] * 8  # more duplicates than occurrences of a value, maybe
    got, got_idx = simulate(_replace_kernel)(x, v, in_place)
    want, want_idx = _replace_reference(x, v, -7.5)
    np.testing.assert_array_equal(got_idx, want_idx)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_match_replace8_duplicates_beside_nan_rows_match_the_loop() -> None:
    # vals distinct in every row (a top-k round) while the data repeats values (20.0 three
    # times, 0.0 and -0.0); then one row with a duplicated value and another with two NaN
    # values: the count of equal pairs is that of a call without either, yet the duplicate
    # must take the value's second occurrence
    rng = np.random.default_rng(23)
    x = rng.standard_normal((16, 700)).astype(np.float32)
    x[0, [10, 20, 30]] = 9.0
    v = -np.sort(-x, axis=1)[:, :8]
    x[2, [5, 50, 500]] = 20.0  # a value of row 2 occurring 3 times; its vals stay distinct
    x[3, [7, 9]] = -0.0
    x[3, 8] = 0.0
    v_distinct = -np.sort(-x, axis=1)[:, :8]
    v_distinct[[0, 2], 1:3] = [[1234.0, 1236.0], [1235.0, 1237.0]]  # 9.0 / 20.0 once; absent
    v_distinct[3, 7] = 0.0  # matches -0.0 (column 7 first)
    v_distinct[4, 5] = np.nan  # matches nothing
    v = -np.sort(-x, axis=1)[:, :8]
    v[0] = [9, 9, 8, 7, 6, 5, 4, 3]
    v[1, 2:4] = np.nan
    v[2:4] = v_distinct[2:4]  # (rows without NaN or duplicates)
    for vals in (v_distinct, v):
        for in_place in (True, False):
            got, got_idx = simulate(_replace_kernel)(x, vals, in_place)
            want, want_idx = _replace_reference(x, vals, -7.5)
            np.testing.assert_array_equal(got_idx, want_idx)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _find_kernel(x, v):
    p, f = x.shape
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=x)
    vals = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vals, src=v)
    idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=d, vals=vals)
    out = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=idx)
    return out


def test_find_index8_distinct_vals_over_repeated_data_match_the_loop() -> None:
    # nki.isa.nc_find_index8: the first occurrence of each value (0.0 matches -0.0), all ones for
    # a value not present; vals distinct in every row, the 8 largest of their row (few
    # candidates per row), while the data repeats some of them
    rng = np.random.default_rng(29)
    x = rng.standard_normal((12, 900)).astype(np.float32)
    x[0, [700, 30, 400]] = 8.0
    x[5, [12, 3]] = -0.0
    v = -np.sort(-x, axis=1)[:, :8]
    v[0, 1:3] = [50.0, 60.0]  # 8.0 once; absent values
    v[5, 7] = 0.0
    want = np.full(v.shape, 0xFFFFFFFF, dtype=np.uint32)
    for r in range(x.shape[0]):
        for i in range(8):
            hits = np.flatnonzero(x[r] == v[r, i])
            if hits.size:
                want[r, i] = hits[0]
    np.testing.assert_array_equal(simulate(_find_kernel)(x, v), want)


def _range_select_kernel(x, b0, b1, dst_dtype, in_place):
    p, f = x.shape
    src = nl.ndarray((p, f + 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=src, value=0.0)
    s = src[:, 16 : 16 + f]
    nisa.dma_copy(dst=s, src=x)
    lo = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=lo, src=b0)
    hi = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=hi, src=b1)
    if in_place:
        d = s
    else:
        big = nl.ndarray((p, f + 8), dtype=dst_dtype, buffer=nl.sbuf)
        d = big[:, 8 : 8 + f]
    mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=d, on_true_tile=s, comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=lo, bound1=hi, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                      reduce_res=mx, reduce_op=nl.maximum, range_start=3)  # fmt: skip
    out = nl.ndarray((p, f), dtype=dst_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    out_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_max, src=mx)
    return out, out_max


@pytest.mark.parametrize(
    ("dst_dtype", "in_place"), [(nl.float32, False), (nl.float32, True), (nl.bfloat16, False)]
)
def test_range_select_matches_the_pages_numpy_equivalent(dst_dtype: str, in_place: bool) -> None:
    # (trn2: NeuronCore-v3 has range_select)
    rng = np.random.default_rng(5)
    p, f = 8, 70
    x = rng.standard_normal((p, f)).astype(np.float32)
    x[0, 10:13] = [np.inf, -np.inf, -0.0]
    x[1, 20] = np.nan
    b0 = rng.integers(0, 40, (p, 1)).astype(np.float32)
    b1 = b0 + rng.integers(0, 40, (p, 1)).astype(np.float32)
    b0[2] = np.nan  # no element selected in that row
    b1[3] = np.inf
    got, got_max = simulate(_range_select_kernel)(x, b0, b1, dst_dtype, in_place)
    index = (3 + np.arange(f)).astype(np.float32)[None, :]
    want = np.where((index >= b0) & (index < b1), x, F32_MIN).astype(np.float32)
    want_max = want.max(axis=1, keepdims=True)
    expect = want if dst_dtype == nl.float32 else want.astype(dtypes.storage_dtype("bfloat16"))
    word = f"u{expect.itemsize}"
    np.testing.assert_array_equal(np.asarray(got).view(word), expect.view(word))
    np.testing.assert_array_equal(got_max, want_max)


def _activation_kernel(x, bias, op, scale):
    p, f = x.shape
    t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    b = None
    if bias is not None:
        b = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=bias)
    y = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=op, data=t, bias=b, scale=scale)
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    again = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=again, src=t)  # the source tile is not written by the instruction
    return out, again


@pytest.mark.parametrize(("op", "ref", "with_bias", "scale"), [
    (nl.exp, np.exp, True, 1.0),
    (nl.exp, np.exp, False, 1.0),
    (nl.copy, lambda v: v, True, 1.0),
    (nl.copy, lambda v: v, False, 1.0),
    (nl.tanh, np.tanh, True, 0.5),
])  # fmt: skip
def test_activation_with_a_unit_scale_matches_the_page(
    target: str, op, ref, with_bias: bool, scale: float
) -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    x[0, :6] = [np.inf, -np.inf, np.nan, -0.0, 1e-42, -1e-42]  # subnormals, -0.0
    bias = rng.standard_normal((16, 1)).astype(np.float32) if with_bias else None
    if bias is not None:
        bias[1] = -0.0
    got, src = simulate(lambda a, b: _activation_kernel(a, b, op, scale))(x, bias)
    with np.errstate(all="ignore"):
        pre = x * np.float32(scale)
        if bias is not None:
            pre = pre + bias
        want = np.asarray(ref(pre), dtype=np.float32)
    np.testing.assert_array_equal(got, want)  # NaN where NaN; the values and zeros' signs:
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[finite], want.view(np.uint32)[finite])
    np.testing.assert_array_equal(src.view(np.uint32), x.view(np.uint32))


def _int_reference(v: float, lo: int, hi: int, truncate: bool) -> int:
    if np.isnan(v):
        return 0
    if np.isinf(v):
        return hi if v > 0 else lo
    r = int(np.trunc(v)) if truncate else int(np.rint(v))
    return min(max(r, lo), hi)


@pytest.mark.parametrize("name", ["int8", "int16", "int32", "uint8", "uint16", "uint32"])
@pytest.mark.parametrize("truncate", [False, True])
def test_float_to_int_cast_rounds_saturates_and_zeroes_nan(name: str, truncate: bool) -> None:
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, -0.0, np.nan, np.inf, -np.inf, 1e10,
                       -1e10, 127.5, 128.0, -128.5, 65535.4, 4294967295.0, 2147483647.0,
                       -2147483649.0, 1e-40], dtype=np.float32)  # fmt: skip
    info = np.iinfo(dtypes.storage_dtype(name))
    with dtypes.float_to_int_truncation(truncate):
        got = dtypes.cast(values, name)
        got_2d = dtypes.cast(values.reshape(3, 7), name)
        got_0d = dtypes.cast(np.float32(np.nan), name)
    want = [_int_reference(float(v), int(info.min), int(info.max), truncate) for v in values]
    assert got.dtype == dtypes.storage_dtype(name)
    np.testing.assert_array_equal(got.astype(np.int64), want)
    np.testing.assert_array_equal(got_2d.reshape(-1), got)
    assert int(got_0d) == 0


@pytest.mark.parametrize("name", ["int8", "int32", "uint16", "uint32"])
@pytest.mark.parametrize("source", ["int64", "uint64", "uint32", "int32"])
def test_int_to_int_cast_saturates_every_source_value(name: str, source: str) -> None:
    # every source type's extremes and values around the target's ends, as Python integers
    # saturated at the target's range (uint64 above 2^63 too: no wrap through int64)
    src, dst = np.iinfo(source), np.iinfo(dtypes.storage_dtype(name))
    picks = {int(src.min), int(src.max), 0, 1, int(src.max) // 2 + 1}
    picks |= {v + d for v in (int(dst.min), int(dst.max)) for d in (-1, 0, 1)}
    values = sorted(v for v in picks if int(src.min) <= v <= int(src.max))
    got = dtypes.cast(np.array(values, dtype=source), name)
    assert got.dtype == dtypes.storage_dtype(name)
    assert [int(v) for v in got] == [min(max(v, int(dst.min)), int(dst.max)) for v in values]


def _pieces_kernel(a, b):
    """Tiles on recycled storage (a dead tile held ``a``), written in pieces (column halves) by
    overwriting instructions, read at different points; every tile copied out whole."""
    p, f = a.shape
    h = f // 2
    out = nl.ndarray((4 * p, f), nl.float32, buffer=nl.shared_hbm)
    iout = nl.ndarray((p, f), nl.int32, buffer=nl.shared_hbm)
    src = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=b)

    def recycled(dtype=nl.float32):
        primer = nl.ndarray((p, f), dtype, buffer=nl.sbuf)
        nisa.memset(dst=primer, value=1)
        nisa.dma_copy(dst=out[3 * p :, :] if dtype == nl.float32 else iout, src=primer)
        del primer  # its storage goes to the next tile of its size
        return nl.ndarray((p, f), dtype, buffer=nl.sbuf)

    two = recycled()  # (a) two halves by two instructions, then read whole
    nisa.memset(dst=two[:, 0:h], value=2.0)
    nisa.tensor_copy(dst=two[:, h:f], src=src[:, h:f])
    nisa.dma_copy(dst=out[0:p, :], src=two)
    between = recycled()  # (b) a half, a read of that half only, the other half, read whole
    nisa.tensor_scalar(dst=between[:, h:f], data=src[:, h:f], op0=nl.add, operand0=1.0)
    mid = nl.ndarray((p, h), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=mid, src=between[:, h:f])
    nisa.tensor_tensor(dst=between[:, 0:h], data1=mid, data2=mid, op=nl.add)
    nisa.dma_copy(dst=out[p : 2 * p, :], src=between)
    window = recycled()  # (c) a half, then a read reaching into the unwritten half
    nisa.memset(dst=window[:, 0:h], value=4.0)
    nisa.tensor_copy(dst=mid, src=window[:, 2 : h + 2])  # h - 2 written columns, 2 not
    nisa.memset(dst=window[:, h:f], value=5.0)
    nisa.dma_copy(dst=out[2 * p : 3 * p, 0:h], src=mid)
    nisa.dma_copy(dst=out[2 * p : 3 * p, h:f], src=window[:, h:f])
    ints = recycled(nl.int32)  # (d) an integer tile written in part, read whole
    nisa.memset(dst=ints[:, 0:h], value=7)
    nisa.dma_copy(dst=iout, src=ints)
    return out, iout


def test_partial_writes_show_the_sentinel_exactly_where_unwritten() -> None:
    """A new tile reads as NaN (float) or the integer sentinel until written (AWS NKI docs, NKI
    CPU Simulator, NKI 0.3.0), also on recycled storage and when written in pieces, traced and
    replayed: a left-out sentinel fill (trncore.sim.program.TraceContext._settle_fills) must not
    show, and a kept one shows exactly in the elements not written."""
    import trncore.sim as sim
    from trncore.sim.tensor import SENTINEL_INT

    p, f = 4, 8
    h = f // 2
    a = np.ones((p, f), np.float32)
    b = np.arange(p * f, dtype=np.float32).reshape(p, f) - 5.0
    prog = sim.trace(_pieces_kernel, a, b)
    tiles = [x for x in prog.allocs if x.buffer.name == "sbuf" and x.shape == (p, f)]
    assert len({id(x.storage) for x in tiles}) < len(tiles) - 2  # the cases reuse primers' storage
    sim.clear_cache()
    for _ in range(2):  # traced, then replayed
        out, iout = simulate(_pieces_kernel)(a, b)
        out = out.reshape(4, p, f)
        twos = np.full((p, h), 2.0, np.float32)
        np.testing.assert_array_equal(out[0], np.concatenate([twos, b[:, h:]], axis=1))
        plus = b[:, h:] + 1.0
        np.testing.assert_array_equal(out[1], np.concatenate([plus + plus, plus], axis=1))
        np.testing.assert_array_equal(out[2, :, : h - 2], np.full((p, h - 2), 4.0, np.float32))
        np.testing.assert_array_equal(out[2, :, h - 2 : h], np.full((p, 2), np.nan, np.float32))
        np.testing.assert_array_equal(out[2, :, h:], np.full((p, h), 5.0, np.float32))
        np.testing.assert_array_equal(iout[:, :h], np.full((p, h), 7, np.int32))
        np.testing.assert_array_equal(iout[:, h:], np.full((p, h), SENTINEL_INT, np.int32))


def test_match_replace8_zero_and_negative_zero_vals_are_duplicates() -> None:
    # nki.isa.nc_match_replace8 compares in fp32, where 0.0 == -0.0: vals holding both are
    # duplicates of one value and take successive occurrences of the zeros (slots 7, 6, ...
    # first); a row of NaN vals beside them matches nothing and must not hide the duplicate
    rng = np.random.default_rng(31)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    x[0, [4, 9, 40]] = [0.0, -0.0, 0.0]
    x[2, [1, 2]] = [-0.0, 0.0]
    v = -np.sort(-x, axis=1)[:, :8]
    v[0, 5:7] = [-0.0, 0.0]
    v[1] = np.nan
    v[2, 0] = 0.0
    v[2, 7] = -0.0
    for in_place in (True, False):
        got, got_idx = simulate(_replace_kernel)(x, v, in_place)
        want, want_idx = _replace_reference(x, v, -7.5)
        np.testing.assert_array_equal(got_idx, want_idx)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
