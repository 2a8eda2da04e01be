"""The emulator's fast conversions give exactly what ml_dtypes' own conversions give."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import dtypes

BYTE_FLOATS = {
    "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
}


@pytest.mark.parametrize("name", sorted(BYTE_FLOATS))
def test_byte_float_casts_match_ml_dtypes(name: str) -> None:
    target = np.dtype(BYTE_FLOATS[name])
    # every top-16-bit pattern of float32 (signs, zeros, subnormals, inf, NaN, every rounding
    # position) with low halves that are zero, the smallest, a half and the largest
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    rng = np.random.default_rng(3)
    for low in (0, 1, 0x8000, 0xFFFF, *rng.integers(2, 0xFFFF, 4)):
        x = (hi | np.uint32(low)).view(np.float32)
        with np.errstate(all="ignore"):
            expected = x.astype(target).view(np.uint8)
        np.testing.assert_array_equal(dtypes.cast(x, name).view(np.uint8), expected)
    # reading: all 256 bit patterns, bit for bit (NaN payloads included)
    every = np.arange(256, dtype=np.uint8).view(target).reshape(16, 16)
    got = dtypes.to_f32(every)
    assert got.dtype == np.float32 and got.shape == (16, 16)
    np.testing.assert_array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))
    # a strided view reads the elements it shows
    np.testing.assert_array_equal(dtypes.to_f32(every[::2, 1::3]), every[::2, 1::3].astype(np.float32))


@pytest.mark.parametrize("name", ["bfloat16", "float16", *sorted(BYTE_FLOATS)])
def test_strided_views_convert_as_ml_dtypes_converts_them(name: str) -> None:
    """Strided (non-contiguous) views read and written through the engines' fp32 give, bit for
    bit, what ml_dtypes' own ``astype`` gives on them (the emulator copies them contiguous first)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((16, 64)) * 50).astype(np.float32)
    x[0, :8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, 3e38, -7.5]
    target = np.dtype(dtypes.storage_dtype(name))
    word = f"u{target.itemsize}"
    with np.errstate(all="ignore"):
        stored = x.astype(target)
        for view in (x[:, ::3], x.T, x[::2, 1:40]):
            np.testing.assert_array_equal(dtypes.cast(view, name).view(word), view.astype(target).view(word))
        for view in (stored[:, ::3], stored.T, stored[::2, 1:40]):
            got = dtypes.to_f32(view)
            np.testing.assert_array_equal(got.view(np.uint32), view.astype(np.float32).view(np.uint32))


def test_to_f32_leaves_float32_alone() -> None:
    x = np.ones((4, 4), np.float32)
    assert dtypes.to_f32(x) is x
    b = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(dtypes.to_f32(b), x)


def _rows_kernel(inner: list[list[int]], offset: int):  # type: ignore[no-untyped-def]
    """Gather the elements of the in-row pattern ``inner`` (``[step, num]`` pairs) at ``offset``
    of the rows of ``a`` named by a per-partition row index (``vector_offset``), then scatter
    them to the same places in a copy of ``b``."""
    from trncore.sim import nisa, nl

    def k(a, rows, b):  # type: ignore[no-untyped-def]
        p = rows.shape[0]
        idx = nl.ndarray(rows.shape, rows.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        g = nl.ndarray((p, *(n for _, n in inner)), a.dtype, buffer=nl.sbuf)
        src = a.ap([[a.shape[1], p], *inner], offset=offset, vector_offset=idx)
        nisa.dma_copy(dst=g, src=src)
        out = nl.ndarray(b.shape, b.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        dst = out.ap([[b.shape[1], p], *inner], offset=offset, vector_offset=idx)
        nisa.dma_copy(dst=dst, src=g)
        gout = nl.ndarray(g.shape, g.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=gout, src=g)
        return gout, out

    return k


@pytest.mark.parametrize(
    ("pattern", "offset"),
    [([1, 16], 0), ([1, 6], 5), ([2, 6], 3)],  # whole rows, a run inside rows, every other column
)
def test_vector_offset_rows_match_numpy(pattern: list[int], offset: int) -> None:
    """vector_offset gathers and scatters (AWS NKI Access Patterns deep dive, NKI 0.3.0) give
    NumPy's row indexing, whether a row's elements are one contiguous run or strided."""
    from trncore.sim import simulate

    rng = np.random.default_rng(5)
    a = rng.standard_normal((10, 16)).astype(np.float32)
    b = rng.standard_normal((10, 16)).astype(np.float32)
    rows = np.array([[7], [0], [3], [3], [9]], dtype=np.int32)  # a repeated row included
    step, n = pattern
    cols = offset + step * np.arange(n)
    kernel = _rows_kernel([pattern], offset)
    got, scattered = simulate(kernel)(a, rows, b)
    np.testing.assert_array_equal(got, a[rows[:, 0]][:, cols])
    expected = b.copy()
    for p, r in enumerate(rows[:, 0]):  # in partition order: a repeated row keeps the last write
        expected[r, cols] = got[p]
    np.testing.assert_array_equal(scattered, expected)


@pytest.mark.parametrize(
    ("inner", "offset"),
    [
        ([[4, 2], [1, 4]], 2),  # a run of 8 in row-major order: the row path
        ([[1, 4], [4, 2]], 2),  # the same 8 elements taken column-major: the element path
        ([[8, 2], [1, 3]], 1),  # two runs of 3: the element path
        ([[4, 1], [1, 5]], 0),  # a count-1 dim, then a run of 5: the row path
    ],
)
def test_vector_offset_two_dim_rows_match_numpy(inner: list[list[int]], offset: int) -> None:
    """vector_offset gathers and scatters whose in-row pattern has two dims give NumPy's
    indexing in the view's row-major order (AWS NKI Access Patterns deep dive, NKI 0.3.0), on
    the row path (one contiguous run per row) and the element path alike."""
    from trncore.sim import simulate

    rng = np.random.default_rng(6)
    a = rng.standard_normal((10, 16)).astype(np.float32)
    b = rng.standard_normal((10, 16)).astype(np.float32)
    rows = np.array([[7], [0], [3], [9]], dtype=np.int32)
    (s1, n1), (s2, n2) = inner
    cols = offset + s1 * np.arange(n1)[:, None] + s2 * np.arange(n2)[None, :]
    got, scattered = simulate(_rows_kernel(inner, offset))(a, rows, b)
    np.testing.assert_array_equal(got, a[rows[:, 0]][:, cols])
    expected = b.copy()
    for p, r in enumerate(rows[:, 0]):
        expected[r, cols] = got[p]
    np.testing.assert_array_equal(scattered, expected)


def test_vector_offset_row_out_of_range_still_refused() -> None:
    from trncore.sim import simulate
    from trncore.sim.errors import BoundsError

    a = np.zeros((10, 16), np.float32)
    kernel = _rows_kernel([[1, 6]], 5)
    with pytest.raises(BoundsError, match="vector_offset row index 10"):
        simulate(kernel)(a, np.array([[1], [10]], dtype=np.int32), a)


# ---------------------------------------------------------------- allocation, views, collector


@pytest.mark.parametrize("name", sorted(dtypes.NKI_DTYPES))
def test_new_tiles_hold_the_sentinel_bits_numpy_assigns(name: str) -> None:
    """A tile read before any write shows NaN (floats) or 4 (integers), the vendor simulator's
    fill (AWS NKI docs, NKI CPU Simulator, NKI 0.3.0), bit for bit as NumPy assigns those
    values, however the emulator writes them."""
    from trncore.sim import nisa, nl, simulate

    def k(a):  # type: ignore[no-untyped-def]
        t = nl.ndarray((8, 6), name, buffer=nl.sbuf)
        out = nl.ndarray((8, 6), name, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    storage = dtypes.storage_dtype(name)
    expected = np.empty((8, 6), dtype=storage)
    expected[...] = np.nan if dtypes.is_float(name) else 4
    got = simulate(k)(np.zeros((1, 1), np.float32))
    assert got.dtype == storage
    word = f"u{storage.itemsize}"
    np.testing.assert_array_equal(got.view(word), expected.view(word))


def _nki_shape(shape: tuple[int, ...], key: tuple, on_chip: bool) -> tuple[int, ...]:  # type: ignore[type-arg]
    """The shape NKI gives ``t[key]`` (AWS NKI Indexing overview, NKI 0.3.0; NKI guide "Tensor
    Indexing", SDK 2.31): an integer drops its dim, except on the partition dim of an on-chip
    tensor (kept at 1); an on-chip view keeps at least 2 dims (the last dropped one, at 1)."""
    out: list[int] = []
    dropped = False
    for axis, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            out.append(len(range(*k.indices(n))))
        elif on_chip and axis == 0:
            out.append(1)
        elif on_chip:
            dropped = True
    if on_chip and dropped and len(out) < 2:
        out.append(1)
    return tuple(out)


@pytest.mark.parametrize("buffer", ["sbuf", "private_hbm"])
def test_views_of_slices_and_ints_match_numpy(buffer: str) -> None:
    """Keys of unit-step slices and integers (the emulator's direct path) give NumPy's elements
    in NKI's shape, and the same view as the same key spelled so that the general path builds
    it (an explicit step 1); a negative index counts from the end either way."""
    import itertools

    from trncore.sim.tensor import Allocation, Buffer, NkiTensor

    shape = (4, 5, 6)
    alloc = Allocation(0, Buffer(buffer), "float32", shape, "t", None, "input", 0, False)
    alloc.flat[...] = np.arange(alloc.size, dtype=np.float32)
    t = NkiTensor.whole(alloc)
    ref = alloc.flat.reshape(shape)
    on_chip = buffer == "sbuf"
    choices = [slice(None), slice(1, 3), slice(2, None), slice(None, 2), slice(3, 3), 0, 2, -1]
    for key in itertools.product(choices, repeat=3):
        want = _nki_shape(shape, key, on_chip)
        view = t[key]
        assert view.shape == want, key
        np.testing.assert_array_equal(view.array(), ref[key].reshape(want))
        general = tuple(slice(k.start, k.stop, 1) if isinstance(k, slice) else k for k in key)
        other = t[general]
        assert (other.offset, other.dims, other.shape) == (view.offset, view.dims, view.shape), key
    # an index past the end is refused on either path
    from trncore.sim.errors import BoundsError

    for bad in ((slice(None), 5, 0), (slice(0, 5), 0, 0), (4, 0, 0)):
        with pytest.raises(BoundsError):
            t[bad]


def test_a_tile_is_recycled_only_when_its_last_view_is_gone() -> None:
    """Storage is reused once no Python object names a tile any more (docs/emulator.md, Trace
    once, replay many times): a surviving sub-view keeps its tile's storage from reuse."""
    import trncore.sim as sim
    from trncore.sim import nisa, nl

    def tiles(a, keep):  # type: ignore[no-untyped-def]
        kept = []
        for _ in nl.static_range(3):
            t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            if keep:
                kept.append(t[0:64, 2:4])
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    # (without keeping, tile i is still named by `t` while tile i + 1 is allocated: two storages)
    for keep, distinct in ((True, 3), (False, 2)):
        prog = sim.trace(tiles, ((128, 8), "float32"), keep=keep)
        storages = {id(x.storage) for x in prog.allocs if x.buffer.name == "sbuf"}
        assert len(storages) == distinct


def test_the_collector_is_paused_while_tracing_and_restored() -> None:
    """Automatic cyclic collection is off while a kernel is traced and back as it was after."""
    import gc

    import trncore.sim as sim
    from trncore.sim import nisa, nl, simulate

    seen: list[bool] = []

    def k(a):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    a = np.ones((4, 4), np.float32)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            sim.clear_cache()
            np.testing.assert_array_equal(simulate(k)(a), a)
            assert seen[-1] is False and gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def _reused_tile_cases(a, start):  # type: ignore[no-untyped-def]
    """Four tiles, each on the storage of a dead tile that held 1.0s (recycled), each first
    touched differently; every tile is copied out whole."""
    from trncore.sim import nisa, nl

    p, f = a.shape
    out = nl.ndarray((4 * p, f), nl.float32, buffer=nl.shared_hbm)

    def recycled():  # type: ignore[no-untyped-def]
        primer = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=primer, src=a)
        del primer  # its storage goes to the next tile of its size
        return nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)

    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    read_first = recycled()  # (a) first read whole, before any write
    copy = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=copy, src=read_first)
    nisa.dma_copy(dst=out[0:p, :], src=copy)
    overwritten = recycled()  # (b) first written whole
    nisa.memset(dst=overwritten, value=2.0)
    nisa.dma_copy(dst=out[p : 2 * p, :], src=overwritten)
    half = recycled()  # (c) first written in part
    nisa.memset(dst=half[0 : p // 2, :], value=3.0)
    nisa.dma_copy(dst=out[2 * p : 3 * p, :], src=half)
    skipped = recycled()  # (d) first "written" by a transfer that oob_mode=skip may drop
    src = a.ap([[f, p], [1, f]], scalar_offset=s, indirect_dim=0)
    nisa.dma_copy(dst=skipped, src=src, oob_mode=nisa.oob_mode.skip)
    nisa.dma_copy(dst=out[3 * p :, :], src=skipped)
    return out


def test_sentinel_fills_are_dropped_only_where_nothing_can_see_them() -> None:
    """A new tile reads as NaN until written (AWS NKI docs, NKI CPU Simulator, NKI 0.3.0), also on
    recycled storage, traced and replayed: the emulator may leave out a fill only when the first
    instruction on the tile overwrites all of it."""
    import trncore.sim as sim
    from trncore.sim import simulate

    a = np.ones((32, 8), np.float32)
    nan = np.full((32, 8), np.nan, np.float32)
    half = np.concatenate([np.full((16, 8), 3.0, np.float32), nan[16:]])
    prog = sim.trace(_reused_tile_cases, a, np.zeros((1, 1), np.int32))
    tiles = [x for x in prog.allocs if x.buffer.name == "sbuf" and x.shape == (32, 8)]
    assert len({id(x.storage) for x in tiles}) < len(tiles) - 2  # the cases reuse primers' storage
    sim.clear_cache()
    for start, last in ((0, a), (1, nan)):  # (d): in bounds, then skipped (32 rows from row 1)
        for _ in range(2):  # traced, then replayed
            got = simulate(_reused_tile_cases)(a, np.array([[start]], np.int32)).reshape(4, 32, 8)
            np.testing.assert_array_equal(got[0], nan)
            np.testing.assert_array_equal(got[1], np.full((32, 8), 2.0, np.float32))
            np.testing.assert_array_equal(got[2], half)
            np.testing.assert_array_equal(got[3], last)


# ---------------------------------------------------------------- data work (issue 13, round 4)


def test_strided_bf16_moves_and_direct_matmuls_match_numpy_bit_for_bit() -> None:
    """The data-work shortcuts change no bit: a bfloat16 dma_transpose from a strided slice of a
    tile (copied contiguous, then moved as 16-bit words), a bfloat16 copy between strided views
    with NaN payloads and -0.0 (same bytes), and an overwriting matmul written straight into a
    (M, N) view of a wider PSUM tile (AWS NKI docs, nki.isa.dma_transpose and nki.isa.nc_matmul,
    NKI 0.3.0: dst[a, b, c, d] = src[d, b, c, a]; dst = stationary.T @ moving in fp32)."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import run_kernel

    def k(x, w):  # type: ignore[no-untyped-def]
        big = nl.ndarray((128, 2048), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=big, src=x)
        tr = nl.ndarray((128, 1, 4, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        view = big.ap(pattern=[[2048, 128], [0, 1], [128, 4], [1, 128]], offset=512)
        nisa.dma_transpose(dst=tr, src=view)
        moved = nl.ndarray((128, 2, 256), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=moved[:, 1, :], src=big[:, 1000:1256])
        nisa.dma_copy(dst=moved[:, 0, :], src=big[:, 0:256])
        ws = nl.ndarray((64, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, 100:356], stationary=ws, moving=big[0:64, 1500:1756])
        prod = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=prod, src=acc[:, 100:356])
        o1 = nl.ndarray((128, 1, 4, 128), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 2, 256), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=tr)
        nisa.dma_copy(dst=o2, src=moved)
        nisa.dma_copy(dst=o3, src=prod)
        return o1, o2, o3

    rng = np.random.default_rng(7)
    bf16 = ml_dtypes.bfloat16
    x = rng.standard_normal((128, 2048)).astype(bf16)
    words = x.view(np.uint16)
    words[3, 1000:1010] = np.arange(0x7FC1, 0x7FCB)  # NaNs with payloads
    words[5, 0:4] = 0x8000  # -0.0
    w = rng.standard_normal((64, 128)).astype(bf16)
    for _ in range(2):  # the traced run and a replay
        o1, o2, o3 = run_kernel(k, [x, w], target="trn2")
        sub = x[:, 512:1024].reshape(128, 1, 4, 128)
        np.testing.assert_array_equal(o1.view(np.uint16), np.transpose(sub, (3, 1, 2, 0)).view(np.uint16))
        expected = np.stack([x[:, 0:256], x[:, 1000:1256]], axis=1)
        np.testing.assert_array_equal(o2.view(np.uint16), expected.view(np.uint16))
        # the same float32 product NumPy computes (the same BLAS call), to the bit
        ref = w.astype(np.float32).T @ x[0:64, 1500:1756].astype(np.float32)
        np.testing.assert_array_equal(o3.view(np.uint32), ref.view(np.uint32))


def test_placed_ends_match_the_highest_end_on_each_partition() -> None:
    """The capacity sweep's per-partition end of the tiles placed at explicit addresses (grouped
    by row range for speed) is, partition by partition, the largest end byte of the places
    covering it and 0 elsewhere: checked against a direct loop over partitions and places."""
    from trncore.sim.program import _placed_ends

    rng = np.random.default_rng(7)
    pmax = 128
    ranges = [(0, 128), (0, 127), (0, 64), (64, 128), (32, 96), (5, 6), (0, 0)]
    for trial in range(200):
        count = int(rng.integers(0, 40))
        places = {}
        for _ in range(count):
            first, end = ranges[int(rng.integers(len(ranges)))]
            places[(first, end, int(rng.integers(0, 200_000)))] = 1
        expected = np.zeros(pmax, dtype=np.int64)
        for p in range(pmax):
            covering = [e for (a, b, e) in places if a <= p < b]
            expected[p] = max(covering, default=0)
        got = _placed_ends(places, pmax)
        assert got.dtype == np.int64, trial
        np.testing.assert_array_equal(got, expected)


def test_whole_views_share_row_major_patterns_numpy_agrees_with() -> None:
    """A new tensor's whole view has NumPy's C-order strides (in elements) for its shape, also
    when the pattern is shared with an earlier tensor of the same shape; slicing one tensor's
    view leaves the other's alone."""
    from trncore.sim.tensor import Allocation, Buffer, NkiTensor

    for shape in [(128, 512), (128, 4, 64), (7,), (3, 1, 5, 2)]:
        a = Allocation(0, Buffer("sbuf"), "bfloat16", shape, "a", None, "input", 0, False)
        b = Allocation(1, Buffer("sbuf"), "bfloat16", shape, "b", None, "input", 0, False)
        ta, tb = NkiTensor.whole(a), NkiTensor.whole(b)
        steps = tuple(s // 2 for s in np.empty(shape, dtype=np.uint16).strides)
        assert ta.dims == tb.dims == tuple(zip(steps, shape))
        assert ta.shape == shape and ta.offset == 0
        sub = ta[0:1, ...] if len(shape) > 1 else ta[0:3]
        assert tb.dims == tuple(zip(steps, shape)) and sub.dims != ta.dims


@pytest.mark.parametrize("placed_share", [0.0, 0.6, 1.0])
def test_sbuf_sweep_peak_matches_a_brute_force_over_its_events(placed_share: float) -> None:
    """The capacity sweep's SBUF peak (its shortcuts: placed ends by row range, the highest live
    end while no auto-placed tile is live, bytes counted per row segment) equals a direct count
    per partition at every tile's start: events
    in time order, ends before starts at one time, ties in allocation order (docs/emulator.md);
    per partition the auto-placed tiles' bytes summed plus the highest end byte of the placed
    tiles covering it; the peak is the fullest partition's."""
    from trncore.sim.program import TraceContext
    from trncore.sim.rules import rules_for
    from trncore.sim.tensor import SBUF, Allocation

    rules = rules_for("trn2")
    ctx = TraceContext(rules, strict=False, execute=False)
    rng = np.random.default_rng(11)
    # (placed_share 1.0: no auto-placed tile is ever live, so the sweep keeps the highest live
    # end by itself, from a heap of the live places' ends, recomputed as the highest one leaves)
    for trial in range(60):
        tiles, starts = [], []
        for i in range(int(rng.integers(1, 40))):
            cols = int(rng.integers(1, 2000))
            if rng.random() < placed_share:  # placed at an explicit address, on a row range
                first = int(rng.choice([0, 0, 0, 64, 32]))
                rows = int(rng.integers(1, 128 - first + 1))
                a = Allocation(i, SBUF, "float32", (rows, cols), "p", None, "sentinel", 0, False)
                a.partition_start = first
                a.address_bytes = int(rng.integers(0, 4)) * 8192
            else:  # auto-placed: the model picks its start partition (at most 64 rows: 0/64,
                # at most 32: 0/32/64/96, where the fullest partition is emptiest, first such)
                rows = int(rng.choice([128, 100, 64, 40, 33, 32, 7, 1]))
                a = Allocation(i, SBUF, "float32", (rows, cols), "a", None, "sentinel", 0, False)
            start = int(rng.integers(0, 30))
            a.last_use = start + int(rng.integers(0, 10))
            tiles.append(a)
            starts.append(start)
        keys = []
        for i, (a, s) in enumerate(zip(tiles, starts)):
            keys.append((2 * s + 1, 2 * i, i, True))
            keys.append((2 * (max(a.last_use, s) + 1), 2 * i + 1, i, False))
        live: set[int] = set()
        first_row: dict[int, int] = {}  # where each live auto-placed tile was put
        expected = 0
        for _, _, i, is_start in sorted(keys):
            if not is_start:
                live.discard(i)
                continue
            if tiles[i].address_bytes is None:
                used = np.zeros(128, dtype=np.int64)
                for j in live:
                    if tiles[j].address_bytes is None:
                        used[first_row[j] : first_row[j] + tiles[j].shape[0]] += tiles[j].partition_bytes
                p = tiles[i].shape[0]
                options = [0] if p > 64 else [0, 64] if p > 32 else [0, 32, 64, 96]
                first_row[i] = min(options, key=lambda r: used[r : r + p].max())
            live.add(i)
            used = np.zeros(128, dtype=np.int64)
            ends = np.zeros(128, dtype=np.int64)
            for j in live:
                b = tiles[j]
                if b.address_bytes is None:
                    used[first_row[j] : first_row[j] + b.shape[0]] += b.partition_bytes
                else:
                    rows = slice(b.partition_start, b.partition_start + b.shape[0])
                    ends[rows] = np.maximum(ends[rows], b.address_bytes + b.partition_bytes)
            expected = max(expected, int((used + ends).max()))
        assert ctx._sweep(tiles, starts, 10**9, "bytes") == expected, trial


def test_kernel_lines_are_the_source_lines_on_every_call() -> None:
    """``user_site`` remembers the line of each (code, instruction offset) it has seen: in a long
    function, calls from a loop at an early and a late line, many times over, and from the same
    lines again with a tracer set (which may own ``f_lineno``), report the lines of the source
    text that made them."""
    import sys

    from trncore.sim.context import user_site

    body = [f"    x{i} = {i}" for i in range(400)]
    early, late = 3, 380  # 0-based indices into body; the def is line 1
    body[early] = "    for _ in range(3): seen.append(user_site())"
    body[late] = "    for _ in range(3): seen.append(user_site())"
    source = "def long_kernel(seen):\n" + "\n".join(body) + "\n"
    namespace = {"user_site": user_site}
    exec(compile(source, "/tmp/kernel_src_for_test.py", "exec"), namespace)
    expected = [("/tmp/kernel_src_for_test.py", early + 2)] * 3
    expected += [("/tmp/kernel_src_for_test.py", late + 2)] * 3
    for _ in range(2):
        seen: list = []
        namespace["long_kernel"](seen)
        assert seen == expected
    previous = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        seen = []
        namespace["long_kernel"](seen)
    finally:
        sys.settrace(previous)
    assert seen == expected


# ---------------------------------------------------------------- data work (issue 13, round 5)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_direct_casts_into_strided_views_match_astype(name: str) -> None:
    """A float32 result assigned straight into a strided bfloat16/float16 view (the writer's
    shortcut) stores, bit for bit, what ``dtypes.cast`` (``astype``) gives: every top-16-bit
    pattern of float32 (signs, zeros, subnormals, inf, NaN payloads, every rounding position)
    with low halves that are zero, exactly half (ties), just below and above half and the
    largest; and reading every 16-bit pattern back from rows of a wider tile gives ``astype``."""
    target = np.dtype(dtypes.storage_dtype(name))
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    tile = np.zeros((256, 1024), dtype=target)
    for low in (0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF):
        x = (hi | np.uint32(low)).view(np.float32).reshape(256, 256)
        with np.errstate(all="ignore"):
            expected = dtypes.cast(x, name).view(np.uint16)
            view = tile[:, 300:556]
            view[...] = x
        np.testing.assert_array_equal(view.view(np.uint16), expected)
        np.testing.assert_array_equal(tile[:, :300].view(np.uint16), 0)  # nothing else written
    words = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    tile.view(np.uint16)[:, 500:756] = words
    rows = tile[:, 500:756]
    assert not rows.flags.c_contiguous
    got = dtypes.to_f32(rows)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint32), words.view(target).astype(np.float32).view(np.uint32))


def test_assign_moves_words_and_keeps_nan_payloads() -> None:
    """``dtypes.assign`` of same-type bfloat16/fp8 copies the bytes (NaN payloads, -0.0) and
    casts other pairs as NumPy's assignment does."""
    bf16 = ml_dtypes.bfloat16
    src = np.arange(0x7F80, 0x7F80 + 4096, dtype=np.uint16).view(bf16).reshape(64, 64)
    src.view(np.uint16)[0, :4] = [0x8000, 0x7FC1, 0xFFFF, 0x0001]
    dst = np.zeros((64, 128), dtype=bf16)[:, ::2]
    dtypes.assign(dst, src)
    np.testing.assert_array_equal(dst.view(np.uint16), src.view(np.uint16))
    f8 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3)
    out8 = np.empty_like(f8)
    dtypes.assign(out8, f8)
    np.testing.assert_array_equal(out8.view(np.uint8), np.arange(256, dtype=np.uint8))
    f32 = np.empty((64, 64), np.float32)
    dtypes.assign(f32, src)
    np.testing.assert_array_equal(f32.view(np.uint32), src.astype(np.float32).view(np.uint32))


def test_owned_buffer_tensor_scalar_and_activation_match_numpy() -> None:
    """tensor_scalar (two ops, both orders), tensor_tensor (a bfloat16 operand on either side)
    and activation (scale, bias, exp, row sums) on a
    bfloat16 tile computed into the instruction's own float32 buffer give, bit for bit, NumPy's
    float32 arithmetic rounded once to bfloat16 (AWS NKI docs, nki.isa.tensor_scalar and
    nki.isa.activation, NKI 0.3.0: dst = (data op0 operand0) op1 operand1; dst = op(data *
    scale + bias)); a float32 source tile is read, not written."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import run_kernel

    def k(x, c, f):  # type: ignore[no-untyped-def]
        t = nl.ndarray((64, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:512], src=x)
        cs = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=cs, src=c)
        fs = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=fs, src=f)
        a = nl.ndarray((64, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=a, data=t[:, 0:512], op0=nl.subtract, operand0=cs, op1=nl.multiply, operand1=0.37
        )
        b = nl.ndarray((64, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=b, data=fs, op0=nl.subtract, operand0=cs, reverse0=True, op1=nl.add, operand1=1.5
        )
        e = nl.ndarray((64, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        s = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(
            dst=e, op=nl.exp, data=t[:, 0:512], reduce_op=nl.add, reduce_res=s, bias=cs, scale=0.5
        )
        g = nl.ndarray((64, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=g, data1=fs, data2=t[:, 0:512], op=nl.subtract)
        h = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=h, data1=t[:, 0:512], data2=a, op=nl.maximum)
        outs = []
        for tile in (a, b, e, s, fs, g, h):
            o = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=tile)
            outs.append(o)
        return tuple(outs)

    rng = np.random.default_rng(11)
    bf16 = ml_dtypes.bfloat16
    x = (rng.standard_normal((64, 512)) * 4).astype(bf16)
    x.view(np.uint16)[0, :8] = [0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x8001]
    c = rng.standard_normal((64, 1)).astype(np.float32)
    c[1, 0] = 0.0
    f = (rng.standard_normal((64, 512)) * 3).astype(np.float32)
    f[1, :4] = [np.nan, -0.0, 0.0, 1e-42]
    with np.errstate(all="ignore"):
        xf = x.astype(np.float32)
        ref_a = ((xf - c) * np.float32(0.37)).astype(bf16)
        ref_b = (c - f + np.float32(1.5)).astype(bf16)
        pre = xf * np.float32(0.5) + c
        ref_e32 = np.exp(pre)
        ref_e = ref_e32.astype(bf16)
        ref_s = ref_e32.sum(axis=1, dtype=np.float32, keepdims=True)
        ref_g = (f - xf).astype(bf16)
        ref_h = np.maximum(xf, ref_a.astype(np.float32))
    f_before = f.copy()
    for _ in range(2):  # the traced run and a replay
        a, b, e, s, fs, g, h = run_kernel(k, [x, c, f], target="trn2")
        np.testing.assert_array_equal(a.view(np.uint16), ref_a.view(np.uint16))
        np.testing.assert_array_equal(b.view(np.uint16), ref_b.view(np.uint16))
        np.testing.assert_array_equal(e.view(np.uint16), ref_e.view(np.uint16))
        np.testing.assert_array_equal(s.view(np.uint32), ref_s.view(np.uint32))
        np.testing.assert_array_equal(fs.view(np.uint32), f_before.view(np.uint32))
        np.testing.assert_array_equal(g.view(np.uint16), ref_g.view(np.uint16))
        np.testing.assert_array_equal(h.view(np.uint32), ref_h.view(np.uint32))


def test_dma_copies_that_cast_or_reshape_match_numpy() -> None:
    """dma_copy float32 -> bfloat16 (cast straight into the tile) rounds as ``astype`` does
    (ties, subnormals, inf, NaN), and a same-type bfloat16 copy whose source must be reshaped
    (a [128, 2, 32] HBM view into a [128, 64] tile) keeps every bit (NaN payloads, -0.0)
    (AWS NKI docs, nki.isa.dma_copy, NKI 0.3.0: element counts must match; a DMA converts
    between element types)."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import run_kernel

    def k(f, b):  # type: ignore[no-untyped-def]
        t = nl.ndarray((128, 2, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 1, :], src=f)
        r = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=r, src=b[:, 1:3, :])
        o1 = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=t[:, 1, :])
        o2 = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o2, src=r)
        return o1, o2

    rng = np.random.default_rng(5)
    hi = rng.integers(0, 1 << 16, 128 * 512, dtype=np.uint32) << np.uint32(16)
    low = rng.choice(np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32), hi.size)
    f = (hi | low).view(np.float32).reshape(128, 512)
    f[0, :6] = [np.inf, -np.inf, np.nan, -0.0, 1e-40, 3.4e38]
    bf16 = ml_dtypes.bfloat16
    b = rng.integers(0, 1 << 16, (128, 4, 32), dtype=np.uint32).astype(np.uint16).view(bf16)
    with np.errstate(all="ignore"):
        ref1 = f.astype(bf16)
    for _ in range(2):  # the traced run and a replay
        o1, o2 = run_kernel(k, [f, b], target="trn2")
        np.testing.assert_array_equal(o1.view(np.uint16), ref1.view(np.uint16))
        np.testing.assert_array_equal(o2.view(np.uint16), b[:, 1:3, :].reshape(128, 64).view(np.uint16))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float8_e4m3"])
def test_nc_transpose_from_a_wide_tile_matches_numpy(dtype: str) -> None:
    """TensorE nc_transpose of a [128, 128] slice of a wide SBUF tile (copied contiguous first,
    then transposed) gives NumPy's ``.T``, bit for bit (NaN payloads, -0.0) (AWS NKI docs,
    nki.isa.nc_transpose, NKI 0.3.0: dst[f, p] = data[p, f], dst of data's dtype on trn2). A
    float8 transpose writes 16-bit PSUM elements on trn2 (Trainium2 Architecture Guide, "Built-in
    Transpose Support"), so its dst steps by 2."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import run_kernel

    w = 2 if dtype.startswith("float8") else 1  # PSUM elements per transposed element

    def k(x):  # type: ignore[no-untyped-def]
        big = nl.ndarray((128, 1024), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=big, src=x)
        pt = nl.ndarray((128, 2, 128 * w), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=pt[:, 1, 0 : 128 * w : w], data=big[:, 384:512])
        nisa.nc_transpose(dst=pt[:, 0, 0 : 128 * w : w], data=big[:, 0:128])
        sb = nl.ndarray((128, 2, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=pt[:, :, 0 : 128 * w : w])
        o = nl.ndarray((128, 2, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=sb)
        return o

    storage = dtypes.storage_dtype(dtype)
    word = np.dtype(f"u{storage.itemsize}")
    rng = np.random.default_rng(9)
    x = rng.integers(0, np.iinfo(word).max, (128, 1024), dtype=np.uint64).astype(word).view(storage)
    for _ in range(2):  # the traced run and a replay
        o = run_kernel(k, [x], target="trn2")
        np.testing.assert_array_equal(o[:, 1, :].view(word), x[:, 384:512].T.view(word))
        np.testing.assert_array_equal(o[:, 0, :].view(word), x[:, 0:128].T.view(word))


# ---------------------------------------------------------------- tracing (issue 13, round 6)


def _brute_covers(t) -> bool:  # type: ignore[no-untyped-def]
    """Whether view ``t`` names every element of its allocation exactly once, by listing the
    elements its pattern names with NumPy."""
    idx = np.array([t.offset])
    for step, num in t.dims:
        idx = (idx[:, None] + np.arange(num) * step).reshape(-1)
    return t.dtype == t.alloc.dtype and idx.size == t.alloc.size and bool(
        np.array_equal(np.sort(idx), np.arange(t.alloc.size))
    )


def test_whole_view_test_and_covers_agree_with_listing_the_elements() -> None:
    """``_covers`` (whether a first write overwrites a whole tile, so its sentinel fill can go)
    takes a shortcut for a view with the whole view's pattern (the whole view, a full slice);
    views with the same elements built other ways (a reshape, a permuted ``.ap()``) take the
    general path. Both agree with listing the elements each view names."""
    from trncore.sim.program import _covers
    from trncore.sim.tensor import SBUF, Allocation, NkiTensor

    for shape in [(128, 512), (64, 4, 32), (1, 7)]:
        a = Allocation(0, SBUF, "float32", shape, "a", None, "sentinel", 0, False)
        whole = NkiTensor.whole(a)
        full = whole[tuple(slice(0, n) for n in shape)]
        flat = whole.reshape(shape[0], -1)
        p, f = shape[0], a.row_elems
        swapped = whole.ap(pattern=[[f, p], [1, f]]) if len(shape) == 2 else flat
        part = whole[0 : max(1, p // 2), ...]
        skip = whole.ap(pattern=[[f, p], [2, f // 2]]) if f > 1 else part
        views = [whole, full, flat, swapped, part, skip]
        assert whole.is_whole_view() and full.is_whole_view() and part.is_whole_view() == (p == 1)
        for v in views:
            assert _covers(v) == _brute_covers(v), (shape, v.dims)
        assert _covers(whole) and _covers(full) and _covers(part) == (p == 1)
    empty = Allocation(1, SBUF, "float32", (128, 0), "e", None, "sentinel", 0, False)
    assert not NkiTensor.whole(empty).is_whole_view()  # (an empty tile: the general path decides)


def test_views_naming_one_region_share_its_array_and_see_each_others_writes() -> None:
    """Views of one tile built separately (``t[0:4, 2:6]`` twice) share one NumPy array; other
    regions, dtypes and tiles get their own. A matmul chain that names its PSUM region afresh in
    every step (as AWS's kernels do) accumulates what NumPy computes in float32."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import run_kernel
    from trncore.sim.tensor import SBUF, Allocation, NkiTensor

    a = Allocation(0, SBUF, "float32", (8, 16), "a", None, "sentinel", 0, False)
    b = Allocation(1, SBUF, "float32", (8, 16), "b", None, "sentinel", 0, False)
    ta, tb = NkiTensor.whole(a), NkiTensor.whole(b)
    one, two = ta[0:4, 2:6], ta[0:4, 2:6]
    assert one is not two and one.array() is two.array()
    assert ta[0:4, 3:7].array() is not one.array() and tb[0:4, 2:6].array() is not one.array()
    assert ta.view(nl.int32)[0:4, 2:6].array().dtype == np.int32
    a.flat[:] = np.arange(128, dtype=np.float32)
    np.testing.assert_array_equal(two.array(), a.flat.reshape(8, 16)[0:4, 2:6])
    one.array()[...] = -1.0
    assert (a.flat.reshape(8, 16)[0:4, 2:6] == -1.0).all()
    a.forget_arrays()
    assert ta[0:4, 2:6].array() is not one.array()  # a new array, the same memory
    assert np.shares_memory(ta[0:4, 2:6].array(), one.array())

    def k(x, w):  # type: ignore[no-untyped-def]
        xs = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        ws = nl.ndarray((128, 4, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w)
        acc = nl.ndarray((32, 128), dtype=nl.float32, buffer=nl.psum)
        for step in range(4):
            nisa.nc_matmul(dst=acc[0:32, 0:64], stationary=ws[:, step, :], moving=xs[:, step, :])
        res = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc[0:32, 0:64])
        out = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 4, 64)).astype(np.float32)
    w = rng.standard_normal((128, 4, 32)).astype(np.float32)
    expected = sum(w[:, s, :].T @ x[:, s, :] for s in range(4))
    for _ in range(2):  # the traced run and a replay
        np.testing.assert_allclose(run_kernel(k, [x, w], target="trn2"), expected, rtol=1e-5, atol=1e-4)


def test_matmul_accumulation_with_the_tiles_flag_summary_matches_the_documented_rule() -> None:
    """nc_matmul(accumulate=None) overwrites PSUM elements no matmul wrote since their last other
    write and adds to the others (AWS NKI docs, nki.isa.nc_matmul, NKI 0.3.0: "the first write
    to a PSUM location overwrites, and subsequent writes to the same location accumulate"); a
    memset is such an other write. The emulator answers "written?" from a per-tile summary where
    it holds (whole-tile writes, writes agreeing with it) and from the flags otherwise: random
    chains of matmuls and memsets on the whole tile and on its halves, against a NumPy model of
    the rule (integer data, so float32 sums are exact), traced and replayed."""
    from trncore.sim import nisa, nl
    from trncore.sim.runner import clear_cache, run_kernel

    rng = np.random.default_rng(19)
    x = rng.integers(-2, 3, (16, 64)).astype(np.float32)
    w = rng.integers(-2, 3, (16, 32)).astype(np.float32)
    halves = {"all": slice(0, 64), "lo": slice(0, 32), "hi": slice(32, 64)}
    for trial in range(12):
        ops: list[tuple[str, str, float]] = []
        flagged = {"lo": False, "hi": False}
        expected = np.full((32, 64), np.nan, dtype=np.float32)
        for _ in range(int(rng.integers(3, 10))):
            where = str(rng.choice(["all", "lo", "hi"]))
            if where == "all" and flagged["lo"] != flagged["hi"]:
                where = "lo"  # (a region part-written by matmuls is another release rule)
            cols = halves[where]
            parts = ["lo", "hi"] if where == "all" else [where]
            if rng.random() < 0.7:
                product = w.T @ x[:, cols]
                if flagged[parts[0]]:
                    expected[:, cols] += product
                else:
                    expected[:, cols] = product
                for p in parts:
                    flagged[p] = True
                ops.append(("mm", where, 0.0))
            else:
                value = float(rng.integers(-3, 4))
                expected[:, cols] = value
                for p in parts:
                    flagged[p] = False
                ops.append(("set", where, value))

        def k(xa, wa, ops=ops):  # type: ignore[no-untyped-def]
            xs = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xs, src=xa)
            ws = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=ws, src=wa)
            acc = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.psum)
            for kind, where, value in ops:
                cols = halves[where]
                if kind == "mm":
                    nisa.nc_matmul(dst=acc[:, cols], stationary=ws, moving=xs[:, cols])
                else:
                    nisa.memset(dst=acc if where == "all" else acc[:, cols], value=value)
            res = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            out = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=res)
            return out

        clear_cache()  # (the ops are not part of the kernel's key: each trial traces anew)
        for _ in range(2):  # the traced run and a replay
            got = run_kernel(k, [x, w], target="trn2")
            np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}: {ops}")


def test_placed_only_sweeps_match_a_brute_force_count_and_refuse_at_the_same_tile() -> None:
    """When every tile is placed at an explicit address (AWS's modular allocators) the sweep
    takes no event loop: SBUF's peak is the highest place end, PSUM's the most distinct banks in
    use at a tile's start (running counts per bank). Both equal a direct count at every start
    (events in time order, ends first at one time, ties in allocation order), and past a limit
    both refuse at the first start that exceeds it, with that count and that tile."""
    from trncore.sim.errors import CapacityError
    from trncore.sim.program import TraceContext
    from trncore.sim.rules import rules_for
    from trncore.sim.tensor import PSUM, SBUF, Allocation

    rules = rules_for("trn2")
    ctx = TraceContext(rules, strict=False, execute=False)
    bank = rules.psum_bank_bytes
    rng = np.random.default_rng(23)
    for trial in range(80):
        psum = trial % 2 == 1
        tiles, starts = [], []
        for i in range(int(rng.integers(1, 30))):
            if psum:
                cols = int(rng.choice([64, 256, 512, 600]))  # float32: up to two banks
                a = Allocation(i, PSUM, "float32", (128, cols), "p", None, "sentinel", 0, False)
                a.address_bytes = int(rng.integers(0, 7)) * bank
            else:
                first = int(rng.choice([0, 0, 64, 32]))
                a = Allocation(i, SBUF, "float32", (int(rng.integers(1, 128 - first + 1)),
                               int(rng.integers(1, 3000))), "s", None, "sentinel", 0, False)  # fmt: skip
                a.partition_start = first
                a.address_bytes = int(rng.integers(0, 6)) * 8192
            start = int(rng.integers(0, 25))
            a.last_use = start + int(rng.integers(0, 8))
            tiles.append(a)
            starts.append(start)
        keys = []
        for i, (a, s) in enumerate(zip(tiles, starts)):
            keys.append((2 * s + 1, 2 * i, i, True))
            keys.append((2 * (max(a.last_use, s) + 1), 2 * i + 1, i, False))
        live: set[int] = set()
        counts = []  # (count at a start, tile) in event order
        for _, _, i, is_start in sorted(keys):
            if not is_start:
                live.discard(i)
                continue
            live.add(i)
            if psum:
                used = {b for j in live for b in range(tiles[j].address_bytes // bank,
                        (tiles[j].address_bytes + tiles[j].partition_bytes - 1) // bank + 1)}  # fmt: skip
                counts.append((len(used), i))
            else:
                ends = np.zeros(128, dtype=np.int64)
                for j in live:
                    b = tiles[j]
                    rows = slice(b.partition_start, b.partition_start + b.shape[0])
                    ends[rows] = np.maximum(ends[rows], b.address_bytes + b.partition_bytes)
                counts.append((int(ends.max()), i))
        unit = "banks" if psum else "bytes"
        peak = max(c for c, _ in counts)
        assert ctx._sweep(tiles, starts, 10**9, unit) == peak, trial
        limit = int(rng.integers(0, peak)) if peak else 0
        if peak > limit:
            count, i = next((c, i) for c, i in counts if c > limit)
            with pytest.raises(CapacityError) as err:
                ctx._sweep(tiles, starts, limit, unit)
            assert err.value.rule == ("psum-banks" if psum else "sbuf-capacity")
            assert str(err.value).count(f"{count} live ") == 1, (trial, str(err.value))
            assert f"when {tiles[i].label()} is allocated" in str(err.value), trial
