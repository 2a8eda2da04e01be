"""Forms that a fifth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import jit, nisa, nl, strict_mode
from trncore.sim.errors import BoundsError, LanguageError, PartitionError, UninitializedReadError
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2051)


def matmul_at_runtime_slices(w, x, idx):
    """``out[:, i, :] = w[:, idx[i], :].T @ x[:, idx[i], :]``: both matmul operands selected at an
    index read from SBUF (``select`` with an NkiTensor index)."""
    _, s, d = x.shape
    out = nl.ndarray((128, s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.ndarray((128, s, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    x_sb = nl.ndarray((128, s, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    i_sb = nl.ndarray((1, s), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    o_sb = nl.ndarray((128, s, d), dtype=nl.float32, buffer=nl.sbuf)
    for i in range(s):
        t = i_sb.ap(pattern=[[s, 1], [1, 1]], offset=i)
        ps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=w_sb.select(1, t), moving=x_sb.select(1, t))  # HERE
        nisa.tensor_copy(dst=o_sb[:, i, :], src=ps)
    nisa.dma_copy(dst=out, src=o_sb)
    return out


def test_nc_matmul_reads_dynamically_selected_operands_at_their_index() -> None:
    # The Access Patterns deep dive (NKI 0.6.0): select with a runtime index "picks one slice along
    # dim at an index resolved at runtime". nc_matmul read such stationary/moving views at index 0
    # (their storage offset without the runtime index), silently multiplying the wrong slices.
    bf16 = ml_dtypes.bfloat16
    w = rng.standard_normal((128, 6, 128)).astype(bf16)
    x = rng.standard_normal((128, 6, 4)).astype(bf16)
    idx = np.array([[5, 0, 3, 5, 2, 1]], np.int32)
    got = jit(matmul_at_runtime_slices)(w, x, idx)
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    want = np.stack([w64[:, j].T @ x64[:, j] for j in idx[0]], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_nc_matmul_operand_index_past_the_tile_is_reported_at_the_matmul() -> None:
    # The neighbour: an index past the selected dimension reads outside the tile.
    w = rng.standard_normal((128, 4, 128)).astype(np.float32)
    x = rng.standard_normal((128, 4, 4)).astype(np.float32)
    idx = np.array([[0, 1, 9, 2]], np.int32)
    with pytest.raises(BoundsError, match="scalar_offset value 9") as info:
        jit(matmul_at_runtime_slices)(w, x, idx)
    assert_reported_at(info.value, matmul_at_runtime_slices)


def gather_slots_by_register(blob, idx, cnt):
    """A device loop over ``cnt`` slots: ``buf <- blob[idx[u]]`` through ``select(0, register)``
    with ``oob_mode=skip`` (an index past the blob leaves ``buf`` as the slot before left it), then
    ``out[:, u, :] = 2 * buf`` and ``acc[:, idx[u] % 4, :] += buf`` (a register-selected SBUF
    operand of compute instructions)."""
    e_n, _, f = blob.shape
    u_n = idx.shape[1]
    out = nl.ndarray((128, u_n, f), dtype=nl.float32, buffer=nl.shared_hbm)
    i_sb = nl.ndarray((1, u_n), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    m_sb = nl.ndarray((1, u_n), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=m_sb, data=i_sb, op0=nl.bitwise_and, operand0=3)
    c_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=cnt)
    o_sb = nl.ndarray((128, u_n, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=o_sb, value=0.0)
    acc = nl.ndarray((128, 4, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    buf = nl.ndarray((128, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=buf, value=7.0)
    n = nisa.register_alloc()
    nisa.register_load(n, c_sb)
    for u in nl.dynamic_range(n):
        e = nisa.register_alloc()
        nisa.register_load(e, i_sb.ap(pattern=[[u_n, 1], [1, 1]], offset=u))
        nisa.dma_copy(dst=buf, src=blob.select(0, e), oob_mode=nisa.oob_mode.skip)
        nisa.tensor_scalar(dst=o_sb.select(1, u), data=buf, op0=nl.multiply, operand0=2.0)
        r = nisa.register_alloc()
        nisa.register_load(r, m_sb.ap(pattern=[[u_n, 1], [1, 1]], offset=u))
        nisa.tensor_tensor(dst=acc.select(1, r), data1=acc.select(1, r), data2=buf, op=nl.add)
    nisa.tensor_tensor(dst=o_sb[:, 0:4, :], data1=o_sb[:, 0:4, :], data2=acc, op=nl.add)
    nisa.dma_copy(dst=out, src=o_sb)
    return out


def _gather_slots_reference(blob: np.ndarray, idx: np.ndarray, cnt: int) -> np.ndarray:
    u_n, f = idx.shape[1], blob.shape[2]
    out = np.zeros((128, u_n, f))
    acc = np.zeros((128, 4, f))
    buf = np.full((128, f), 7.0)
    for u in range(cnt):
        e = int(idx[0, u])
        if e < blob.shape[0]:
            buf = blob[e].astype(np.float64)
        out[:, u] = 2 * buf
        acc[:, e & 3] += buf
    out[:, 0:4] += acc
    return out


@pytest.mark.filterwarnings("ignore:nl.dynamic_range is deprecated")
def test_select_at_a_register_indexes_dmas_and_compute_operands() -> None:
    # The deep dive (NKI 0.6.0): select builds "the same access pattern that the .ap() forms
    # produce", and .ap's scalar_offset may be "a VirtualRegister"; nki.isa.dma_copy (NKI
    # 0.3.0-0.6.0) skips a transfer whose dynamic address is out of bounds under oob_mode=skip.
    # select(dim, register) raised TypeError, and a register-offset DMA past the tensor raised
    # even under oob_mode=skip.
    blob = rng.standard_normal((5, 128, 16)).astype(np.float32)
    idx = np.array([[4, 1, 9, 2, 6, 0]], np.int32)
    for cnt in (6, 2):
        got = jit(gather_slots_by_register)(blob, idx, np.array([[cnt]], np.int32))
        np.testing.assert_allclose(got, _gather_slots_reference(blob, idx, cnt), rtol=1e-5, atol=1e-6)


def copy_by_register(blob, idx, skip):
    """``blob.select(0, register)`` copied out, with or without ``oob_mode=skip``."""
    _, p, f = blob.shape
    out = nl.ndarray((p, f), dtype=blob.dtype, buffer=nl.shared_hbm)
    i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    buf = nl.ndarray((p, f), dtype=blob.dtype, buffer=nl.sbuf)
    nisa.memset(dst=buf, value=-1.0)
    e = nisa.register_alloc()
    nisa.register_load(e, i_sb)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_copy(dst=buf, src=blob.select(0, e), oob_mode=mode)  # HERE
    nisa.dma_copy(dst=out, src=buf)
    return out


def test_register_select_out_of_bounds_is_skipped_or_reported_at_the_dma() -> None:
    # The neighbour: without oob_mode=skip an out-of-bounds register index is an error of the
    # instruction that reads the view (nki.isa.dma_copy: oob_mode.error is the default).
    blob = rng.standard_normal((3, 8, 4)).astype(np.float32)
    got = jit(copy_by_register)(blob, np.array([[5]], np.int32), True)
    np.testing.assert_array_equal(got, np.full((8, 4), -1.0, np.float32))
    np.testing.assert_array_equal(jit(copy_by_register)(blob, np.array([[2]], np.int32), False), blob[2])
    with pytest.raises(BoundsError, match="reaches flat elements") as info:
        jit(copy_by_register)(blob, np.array([[5]], np.int32), False)
    assert_reported_at(info.value, copy_by_register)


def register_select_on_partitions(x):
    """``select(0, register)`` on an SBUF tile: dim 0 is its partition dim."""
    out = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nisa.register_alloc(2)
    row = t.select(0, r)  # HERE
    nisa.dma_copy(dst=out, src=row)
    return out


def test_register_select_of_an_on_chip_partition_dim_is_refused_at_its_line() -> None:
    # nki.language.NkiTensor.select (NKI 0.5.0-0.6.0): "Dynamic on-chip: dim must not be 0
    # (partition dim)".
    x = rng.standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(PartitionError, match="partition dim") as info:
        jit(register_select_on_partitions)(x)
    assert_reported_at(info.value, register_select_on_partitions)


def select_by_a_float(x):
    t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((4,), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t.select(1, 2.0))  # HERE
    return out


def test_select_with_a_float_index_names_the_accepted_kinds_and_the_line() -> None:
    x = rng.standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(TypeError, match="int, an NkiTensor .* or a VirtualRegister") as info:
        jit(select_by_a_float)(x)
    assert f"test_wild_styles5.py:{marked_line(select_by_a_float)})" in str(info.value)


def row_softmax(x, cmd):
    """Row softmax whose row sums come from ``activation``'s ``reduce_res`` under ``cmd``."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    nm = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=nm, op=nl.maximum, data=s, axis=1, negate=True, keepdims=True)
    e = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    add, exp = nl.add, nl.exp
    nisa.activation(dst=e, op=exp, data=s, bias=nm, reduce_op=add, reduce_res=total, reduce_cmd=cmd)  # HERE
    nisa.reciprocal(dst=total, data=total)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=total)
    nisa.dma_copy(dst=out, src=e)
    return out


def test_activation_reduce_res_with_reset_reduce_is_the_row_sum() -> None:
    # nki.isa.activation (NKI 0.3.0-0.6.0) pseudo-code: reset_reduce zeroes reduce_regs and adds
    # this call's reduction; reduce_res then reads reduce_regs.
    x = rng.standard_normal((64, 40)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jit(row_softmax)(x, nisa.reduce_cmd.reset_reduce)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_activation_reduce_res_with_idle_and_unset_registers_is_flagged_at_its_line() -> None:
    # The neighbour a public router kernel wrote: the default reduce_cmd=idle leaves reduce_regs
    # alone, so reduce_res reads registers nothing set (it got no row sums, and divided by them).
    x = rng.standard_normal((16, 8)).astype(np.float32)
    with pytest.warns(UserWarning, match="reduce_cmd=idle reads the Scalar Engine's reduce registers"):
        jit(row_softmax)(x, nisa.reduce_cmd.idle)
    with strict_mode(), pytest.raises(UninitializedReadError, match="scalar-regs-unset") as info:
        jit(row_softmax)(x, nisa.reduce_cmd.idle)
    assert_reported_at(info.value, row_softmax)
    assert "(strict mode)" in str(info.value)


def predicated_copy_into_a_runtime_slot(x, idx, mask):
    """``t[:, idx, :] = where(mask, x, t[:, idx, :])`` with ``t`` all -1 and ``idx`` read from SBUF."""
    p, s, d = x.shape
    out = nl.ndarray((p, s, d), dtype=x.dtype, buffer=nl.shared_hbm)
    xs = nl.ndarray((p, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x[:, 0, :])
    m = nl.ndarray((p, d), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=mask)
    i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)
    t = nl.ndarray((p, s, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=-1.0)
    nisa.tensor_copy_predicated(dst=t.select(1, i_sb), src=xs, predicate=m)  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def test_tensor_copy_predicated_writes_a_dynamic_dst_at_its_runtime_index() -> None:
    # Found while checking the nc_matmul fix's class: tensor_copy_predicated wrote its dst through
    # .array(), the storage view without the runtime index, so the copy landed in slot 0.
    x = rng.standard_normal((32, 3, 8)).astype(np.float32)
    mask = (rng.random((32, 8)) < 0.5).astype(np.uint8)
    got = jit(predicated_copy_into_a_runtime_slot)(x, np.array([[2]], np.int32), mask)
    want = np.full(x.shape, -1.0, np.float32)
    want[:, 2, :] = np.where(mask != 0, x[:, 0, :], -1.0)
    np.testing.assert_array_equal(got, want)


def test_tensor_copy_predicated_dst_index_past_the_tile_is_reported_at_the_copy() -> None:
    x = rng.standard_normal((32, 3, 8)).astype(np.float32)
    mask = np.ones((32, 8), np.uint8)
    with pytest.raises(BoundsError, match="scalar_offset value 3") as info:
        jit(predicated_copy_into_a_runtime_slot)(x, np.array([[3]], np.int32), mask)
    assert_reported_at(info.value, predicated_copy_into_a_runtime_slot)


def norms_with_nl_max(x, part_op):
    """Row max by ``tensor_scalar_reduce(reduce_op=nl.max)``, row min by ``tensor_reduce(op=nl.min)``,
    their elementwise max by ``tensor_tensor(op=nl.max)``, and a column reduction by
    ``tensor_partition_reduce(op=part_op)``."""
    p, f = x.shape
    out = nl.ndarray((p, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    col = nl.ndarray((1, f), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    r = nl.ndarray((p, 3), dtype=nl.float32, buffer=nl.sbuf)
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=s, op0=nl.multiply, operand0=1.0, reduce_op=nl.max,
                              reduce_res=r[:, 0:1])
    nisa.tensor_reduce(dst=r[:, 1:2], op=nl.min, data=s, axis=1, keepdims=True)
    nisa.tensor_tensor(dst=r[:, 2:3], data1=r[:, 0:1], data2=r[:, 1:2], op=nl.max)
    c = nl.ndarray((1, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=c, op=part_op, data=s)  # HERE
    nisa.dma_copy(dst=out, src=r)
    nisa.dma_copy(dst=col, src=c)
    return out, col


def test_nl_max_and_nl_min_are_the_maximum_and_minimum_operators() -> None:
    # nki.isa.tensor_scalar_reduce (NKI 0.3.0 and 0.6.0): "The reduce_op can be any of nl.add,
    # nl.multiply, nl.max or nl.min"; AWS's later nki-library foreach norm kernels pass nl.max as
    # tensor_reduce / tensor_tensor / tensor_partition_reduce op. They were refused as not operators.
    x = rng.standard_normal((16, 24)).astype(np.float32)
    got, col = jit(norms_with_nl_max)(x, nl.max)
    want = np.stack([x.max(1), x.min(1), np.maximum(x.max(1), x.min(1))], axis=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(col, x.max(0, keepdims=True))


def test_nl_min_where_minimum_is_not_an_operator_of_the_instruction_is_refused() -> None:
    # The neighbour: tensor_partition_reduce takes no minimum (its operator list), so neither nl.min.
    x = rng.standard_normal((16, 24)).astype(np.float32)
    with pytest.raises(LanguageError, match="op-token") as info:
        jit(norms_with_nl_max)(x, nl.min)
    assert_reported_at(info.value, norms_with_nl_max)
