"""Forms that public third-party NKI 0.3+ kernels write (checked against the emulator, see
docs/third-party-kernels.md), in kernels of our own, each next to its invalid neighbour."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate, strict_mode
from trncore.sim.errors import AccumulationError, BoundsError, BufferError, LanguageError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2027)


def partial_sums(a, b, k_tile):
    """Snapshots of one PSUM accumulation after every K step (accumulate=None throughout)."""
    k_total, m = a.shape
    n = b.shape[1]
    steps = k_total // k_tile
    snaps = nl.ndarray((steps, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for s in nl.static_range(steps):
        at = nl.ndarray((k_tile, m), dtype=a.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((k_tile, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a[s * k_tile : (s + 1) * k_tile, 0:m])
        nisa.dma_copy(dst=bt, src=b[s * k_tile : (s + 1) * k_tile, 0:n])
        nisa.nc_matmul(dst=acc, stationary=at, moving=bt)  # GROUP
        snap = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=snap, src=acc)
        nisa.dma_copy(dst=snaps[s, 0:m, 0:n], src=snap)
    return snaps


def test_reading_psum_mid_accumulation_keeps_the_group(target: str) -> None:
    # AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0): accumulate=None, "the first write to a PSUM
    # location overwrites, and subsequent writes to the same location accumulate". Copying the
    # tile out between matmuls does not end the group: the snapshots are the running sums.
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 96)).astype(np.float32)
    with pytest.warns(UserWarning, match="accumulation group was already read"):
        got = simulate(partial_sums)(a, b, 64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.stack([a64[: 64 * (s + 1)].T @ b64[: 64 * (s + 1)] for s in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_reading_psum_mid_accumulation_is_refused_in_strict_mode(target: str) -> None:
    # The likely bug (a tile reused for a new product without accumulate=False) stays catchable.
    a = np.ones((128, 32), np.float32)
    b = np.ones((128, 32), np.float32)
    with strict_mode(), pytest.raises(AccumulationError) as info:
        simulate(partial_sums)(a, b, 64)
    assert info.value.rule == "accumulate-group-reuse"
    assert info.value.lineno == marked_line(partial_sums, "# GROUP")
    assert "(strict mode)" in str(info.value)  # says why it is not the default warning


def test_accumulate_false_starts_a_new_group_without_warning(target: str) -> None:
    def two_products(a, b):
        out = nl.ndarray((2, 32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.psum)
        for i in nl.static_range(2):
            at = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=at, src=a[i])
            bt = nl.ndarray((128, 32), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=bt, src=b[i])
            nisa.nc_matmul(dst=acc, stationary=at, moving=bt, accumulate=False)
            res = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[i], src=res)
        return out

    a = rng.standard_normal((2, 128, 32)).astype(np.float32)
    b = rng.standard_normal((2, 128, 32)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = simulate(two_products)(a, b)
    want = np.einsum("ikm,ikn->imn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def gather_rows(table, idx):
    """Per partition, pick columns of a [P, 4, 16] table by int32 index (flattened free dims)."""
    p = table.shape[0]
    k = idx.shape[1]
    out = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.shared_hbm)
    picked = nl.gather_flattened(nl.load(table), nl.load(idx))  # GATHER
    nl.store(out, value=picked)
    return out


def test_gather_flattened_picks_within_each_partition(target: str) -> None:
    # AWS NKI docs, nki.language.gather_flattened (NKI 0.3.0): the index value selects from the
    # free dimension of data (flattened); lowered onto nki.isa.nc_n_gather.
    table = rng.standard_normal((96, 4, 16)).astype(np.float32)
    idx = rng.integers(0, 64, (96, 40)).astype(np.int32)
    got = simulate(gather_rows)(table, idx)
    want = np.take_along_axis(table.reshape(96, 64), idx.astype(np.int64), axis=1)
    np.testing.assert_array_equal(got, want)


def test_gather_flattened_index_outside_the_partition_is_refused(target: str) -> None:
    # nki.isa.nc_n_gather: "The indices' values must be within the range
    # [0, data.size / data.shape[0])"; checked where the kernel gathers.
    table = np.zeros((8, 4, 16), np.float32)
    idx = np.full((8, 3), 64, np.int32)
    with pytest.raises(BoundsError) as info:
        simulate(gather_rows)(table, idx)
    assert info.value.lineno == marked_line(gather_rows, "# GATHER")


def test_gather_flattened_from_psum_is_refused(target: str) -> None:
    def gather_psum(idx):
        data = nl.zeros((8, 16), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.gather_flattened(data, nl.load(idx)))  # PSUM
        return out

    with pytest.raises(BufferError) as info:
        simulate(gather_psum)(np.zeros((8, 4), np.int32))
    assert info.value.lineno == marked_line(gather_psum, "# PSUM")


def test_gather_flattened_other_axis_is_not_emulated() -> None:
    # the page describes axis only as "axis along which to gather"; only the default is defined
    def gather_axis1(table, idx):
        out = nl.ndarray(idx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.gather_flattened(nl.load(table), nl.load(idx), axis=1))
        return out

    with pytest.raises(NotImplementedError, match=r"gather_flattened with axis=1.*default axis=0"):
        simulate(gather_axis1)(np.zeros((8, 16), np.float32), np.zeros((8, 4), np.int32))


def row_by_register(table, which):
    """out[0, :] = table[which[0, 0], :], the row picked on the device through a register."""
    rows, cols = table.shape
    w = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=which)
    reg = nisa.register_alloc()
    nisa.register_load(dst=reg, src=w)
    row = nl.ndarray((1, cols), dtype=table.dtype, buffer=nl.sbuf)
    view = table.ap(pattern=[[cols, 1], [1, cols]], scalar_offset=reg, indirect_dim=0)
    nisa.dma_copy(dst=row, src=view)  # ROW
    out = nl.ndarray((1, cols), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


def test_register_as_scalar_offset(target: str) -> None:
    # NKI language guide, "Dynamic Control Flow" (SDK 2.29, NKI 0.3.0): a VirtualRegister can be
    # "a scalar_offset in a tensor access pattern for dynamic indexing".
    table = rng.standard_normal((10, 24)).astype(np.float32)
    for r in (0, 7, 9):
        got = simulate(row_by_register)(table, np.array([[r]], np.int32))
        np.testing.assert_array_equal(got, table[r : r + 1])


def test_register_offset_past_the_tensor_is_refused(target: str) -> None:
    table = np.zeros((10, 24), np.float32)
    with pytest.raises(BoundsError) as info:
        simulate(row_by_register)(table, np.array([[10]], np.int32))
    assert info.value.lineno == marked_line(row_by_register, "# ROW")


def test_unwritten_register_as_scalar_offset_is_refused(target: str) -> None:
    def unset(table):
        reg = nisa.register_alloc()
        row = nl.ndarray((1, 24), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=table.ap(pattern=[[24, 1], [1, 24]], scalar_offset=reg))  # UNSET
        return row

    with pytest.raises(LanguageError) as info:
        simulate(unset)(np.zeros((10, 24), np.float32))
    assert info.value.rule == "register-uninitialized"
    assert info.value.lineno == marked_line(unset, "# UNSET")


def reversed_rows(x, count):
    """out[j] = x[n-1-j] for j < count (count from the device), each index kept in SBUF."""
    n, cols = x.shape
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    upper = nisa.register_alloc()
    nisa.register_load(dst=upper, src=c)
    out = nl.ndarray((n, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    zeros = nl.zeros((n, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zeros)

    def body(i):
        pos = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(dst=pos, src=i)  # STORE
        src_row = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=src_row, data=pos, op0=nl.multiply, operand0=-1, op1=nl.add, operand1=n - 1)
        r = nisa.register_alloc()
        nisa.register_load(dst=r, src=src_row)
        row = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x.ap(pattern=[[cols, 1], [1, cols]], scalar_offset=r, indirect_dim=0))
        nisa.dma_copy(dst=out.ap(pattern=[[cols, 1], [1, cols]], scalar_offset=i, indirect_dim=0), src=row)

    nl.fori_loop(0, upper, body)
    return out


def test_fori_loop_iteration_value_is_a_register(target: str) -> None:
    # nki.language.fori_loop (NKI 0.6.0): "The body receives the current iteration value i as a
    # VirtualRegister ... Read it inside the body (for example, as a scalar_offset into a tensor)".
    x = rng.standard_normal((6, 16)).astype(np.float32)
    got = simulate(reversed_rows)(x, np.array([[4]], np.int32))
    want = np.zeros_like(x)
    want[:4] = x[::-1][:4]
    np.testing.assert_array_equal(got, want)


def test_register_store_of_a_plain_int_is_refused() -> None:
    def store_int(a):
        pos = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(dst=pos, src=3)
        return pos

    with pytest.raises(TypeError, match="src must be a register"):
        simulate(store_int)(np.zeros((1, 1), np.float32))


def packed_ids(rows):
    """The int32 packed in the last two bf16 columns of each row, read through a view of a slice."""
    n = rows.shape[0]
    ids = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ids, src=rows[:, -2:].view(nl.int32))  # VIEW
    last = nl.ndarray((1, rows.shape[1]), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=last, src=rows[-1:, :])
    out = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=ids)
    tail = nl.ndarray((1, rows.shape[1]), dtype=rows.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=tail, src=last)
    return out, tail


def test_negative_indices_and_view_of_a_slice(target: str) -> None:
    # nki.language.NkiTensor (NKI 0.6.0): __getitem__ "Supports ... negative indices"; view(dtype)
    # needs only "the last dimension ... contiguous in memory".
    import ml_dtypes

    ids = rng.integers(-5, 1 << 20, 24).astype(np.int32)
    rows = rng.standard_normal((24, 10)).astype(ml_dtypes.bfloat16)
    rows[:, 8:] = ids.view(np.uint16).reshape(24, 2).view(ml_dtypes.bfloat16)
    got_ids, got_tail = simulate(packed_ids)(rows)
    np.testing.assert_array_equal(got_ids[:, 0], ids)
    np.testing.assert_array_equal(got_tail, rows[-1:])


def test_index_past_the_front_is_refused(target: str) -> None:
    def too_far(a):
        t = nl.ndarray((1, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:1, -9:-5])  # FAR
        return t

    with pytest.raises(BoundsError) as info:
        simulate(too_far)(np.zeros((2, 8), np.float32))
    assert info.value.lineno == marked_line(too_far, "# FAR")


def test_view_of_a_strided_last_dim_is_refused(target: str) -> None:
    def strided(a):
        t = nl.ndarray((4, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, ::2].view(nl.int32))  # STRIDED
        return t

    with pytest.raises(LanguageError) as info:
        simulate(strided)(np.zeros((4, 8), np.float16))
    assert info.value.rule == "view-contiguous"
    assert info.value.lineno == marked_line(strided, "# STRIDED")


def chunked_cumsum(x, chunk):
    """Row-wise running sum over free-dim chunks: chunk 0 resets, later chunks continue the
    VectorE accumulator (reduce_cmd=reduce); a second pass restarts from a carried column."""
    p, f = x.shape
    xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    run = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.static_range(f // chunk):
        cmd = nisa.reduce_cmd.reset_reduce if c == 0 else nisa.reduce_cmd.reduce
        nisa.tensor_scalar_cumulative(dst=run[:, c * chunk : (c + 1) * chunk],
                                      src=xs[:, c * chunk : (c + 1) * chunk],
                                      op0=nl.multiply, op1=nl.add, imm0=1.0, reduce_cmd=cmd)
    carry = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=carry, src=run[:, f - 1 : f])
    again = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=again, src=xs, op0=nl.add, op1=nl.maximum, imm0=0.5,
                                  imm1=carry, reduce_cmd=nisa.reduce_cmd.load_reduce)
    out = nl.ndarray((2, p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0], src=run)
    nisa.dma_copy(dst=out[1], src=again)
    return out


def test_tensor_scalar_cumulative(target: str) -> None:
    # nki.isa.tensor_scalar_cumulative (NKI 0.3.0): reg = op1(op0(src[i], imm0), reg); dst[i] = reg;
    # reset_reduce / reduce / load_reduce(imm1). The accumulator is the VectorE one (0.6.0 page).
    # its own generator: the module's draws depend on which tests ran before (-k selections)
    x = np.random.default_rng(303).standard_normal((64, 48)).astype(np.float32)
    got = simulate(chunked_cumsum)(x, 16)
    run = np.cumsum(x.astype(np.float64), axis=1)
    # 48 float32 additions in sequence: within 48 * eps(float32) * sum|x| of the exact sums
    bound = 48 * np.finfo(np.float32).eps * np.cumsum(np.abs(x.astype(np.float64)), axis=1)
    assert np.all(np.abs(got[0] - run) <= bound)
    again = np.maximum.accumulate(np.concatenate([run[:, -1:], x + 0.5], axis=1), axis=1)[:, 1:]
    np.testing.assert_allclose(got[1], again, rtol=1e-6, atol=1e-6)


def test_tensor_scalar_cumulative_on_int32_is_refused(target: str) -> None:
    from trncore.sim.errors import DtypeError

    with pytest.raises(DtypeError) as info:
        simulate(chunked_cumsum)(np.zeros((8, 32), np.int32), 16)
    assert info.value.rule == "cumulative-dtype"
    # the first instruction that meets the int32 tile: the chunk loop's call
    lines, start = inspect.getsourcelines(chunked_cumsum)
    first = start + next(i for i, t in enumerate(lines) if "nisa.tensor_scalar_cumulative(" in t)
    assert info.value.lineno == first


def rmw_scatter_gather(table, rows, idx):
    """table[idx[p]] += rows[p] (scatter RMW into HBM), then acc[p] = rows[p] + table[idx[p]]
    (gather RMW into SBUF), both through nisa.dma_compute."""
    n, h = table.shape
    out = nl.ndarray((n, h), dtype=table.dtype, buffer=nl.shared_hbm)
    whole = nl.ndarray((n, h), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=whole, src=table)
    nisa.dma_copy(dst=out, src=whole)
    i_sb = nl.ndarray((rows.shape[0], 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    r_sb = nl.ndarray(rows.shape, dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r_sb, src=rows)
    view = out.ap(pattern=[[h, rows.shape[0]], [1, h]], offset=0, vector_offset=i_sb, indirect_dim=0)
    nisa.dma_compute(dst=view, srcs=[view, r_sb], reduce_op=nl.add)
    acc = nl.ndarray(rows.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=acc, src=r_sb)
    nisa.dma_compute(dst=acc, srcs=[acc, view], reduce_op=nl.add)
    got = nl.ndarray(rows.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=got, src=acc)
    return out, got


def test_dma_compute_scatter_and_gather_rmw(target: str) -> None:
    # nki.isa.dma_compute (NKI 0.3.0): "Scatter RMW: dst(HBM)[indices] = dst(HBM)[indices] +
    # src(SB)"; "Gather RMW: dst(SB) = dst(SB) + src(HBM)[indices]".
    table = rng.standard_normal((40, 24)).astype(np.float32)
    rows = rng.standard_normal((16, 24)).astype(np.float32)
    idx = rng.permutation(40)[:16].astype(np.int32).reshape(16, 1)
    out, got = simulate(rmw_scatter_gather)(table, rows, idx)
    want = table.astype(np.float64).copy()
    want[idx[:, 0]] += rows
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, rows + want[idx[:, 0]], rtol=1e-6, atol=1e-6)


def test_dma_compute_rmw_outside_the_two_forms_is_refused(target: str) -> None:
    def three_sources(table, idx):
        i_sb = nl.ndarray((8, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=idx)
        acc = nl.zeros((8, 24), dtype=nl.float32, buffer=nl.sbuf)
        view = table.ap(pattern=[[24, 8], [1, 24]], offset=0, vector_offset=i_sb, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[acc, view, acc], reduce_op=nl.add)  # THREE
        return acc

    from trncore.sim.errors import LanguageError as LE

    with pytest.raises(LE) as info:
        simulate(three_sources)(np.zeros((40, 24), np.float32), np.zeros((8, 1), np.int32))
    assert info.value.rule == "dma-compute-rmw"
    assert info.value.lineno == marked_line(three_sources, "# THREE")


def test_dma_compute_gather_rmw_skips_out_of_bounds_rows(target: str) -> None:
    # nki.isa.dma_compute(oob_mode=) (NKI 0.4.0): oob_mode.skip "Silently skips any operations
    # involving out-of-bounds indices"; the default raises at the kernel's line.
    def gather_add(table, idx, skip):
        i_sb = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=idx)
        acc = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=1.0)
        view = table.ap(pattern=[[8, 4], [1, 8]], offset=0, vector_offset=i_sb, indirect_dim=0)
        mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
        nisa.dma_compute(dst=acc, srcs=[acc, view], reduce_op=nl.add, oob_mode=mode)  # OOB
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    table = rng.standard_normal((6, 8)).astype(np.float32)
    idx = np.array([[5], [9], [0], [-1]], np.int32)
    got = simulate(gather_add)(table, idx, True)
    want = np.ones((4, 8))
    want[0] += table[5]
    want[2] += table[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(BoundsError) as info:
        simulate(gather_add)(table, idx, False)
    assert info.value.lineno == marked_line(gather_add, "# OOB")
