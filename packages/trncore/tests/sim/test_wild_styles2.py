"""Forms that a second batch of public third-party NKI 0.3.0 kernels write (docs/third-party-kernels.md,
"Second batch"), in kernels of our own, each next to its invalid neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import DtypeError, LanguageError
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2030)


def row_scale_sliced(x, gamma):
    """Rows times a per-column gain, tiled over rows with slices (the NKI 0.3.0 form)."""
    t_rows, h = x.shape
    out = nl.ndarray((t_rows, h), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray((128, h), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap(pattern=[[0, 128], [1, h]], offset=0))
    for t in nl.affine_range((t_rows + 127) // 128):
        rows = min(128, t_rows - t * 128)
        xs = nl.ndarray((128, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs[0:rows, 0:h], src=x[t * 128 : t * 128 + rows, 0:h])
        nisa.tensor_tensor(dst=xs[0:rows, 0:h], data1=xs[0:rows, 0:h], data2=g[0:rows, 0:h], op=nl.multiply)
        nisa.dma_copy(dst=out[t * 128 : t * 128 + rows, 0:h], src=xs[0:rows, 0:h])
    return out


def row_scale_mgrid(x, gamma):
    """The same with a Beta-2 ``nl.mgrid`` mask, as a generated kernel of the batch writes it."""
    t_rows, h = x.shape
    out = nl.ndarray((t_rows, h), dtype=x.dtype, buffer=nl.shared_hbm)
    ix = nl.mgrid[0:128, 0:h]
    for t in nl.affine_range((t_rows + 127) // 128):
        xs = nl.load(x[t * 128 : t * 128 + 128, 0:h], mask=(ix.p + t * 128 < t_rows))
        nl.store(out[t * 128 : t * 128 + 128, 0:h], xs, mask=(ix.p + t * 128 < t_rows))
    return out


def test_row_tail_by_slices_runs(target: str) -> None:
    x = rng.standard_normal((200, 96)).astype(np.float32)
    gamma = rng.standard_normal((96,)).astype(np.float32)
    np.testing.assert_allclose(simulate(row_scale_sliced)(x, gamma), x * gamma[None, :], rtol=1e-6)


def test_indexing_mgrid_says_it_was_removed(target: str) -> None:
    # AWS NKI docs, NKI Beta 2 migration guide: nl.mgrid / nl.arange index grids are removed;
    # nki.language of NKI 0.3.0 has no mgrid. Indexed (its Beta-1 use), it used to fail with
    # Python's "'function' object is not subscriptable"; the AttributeError NKI raises now says
    # what replaced it.
    x = np.ones((200, 96), np.float32)
    with pytest.raises(AttributeError, match=r"nl\.mgrid is an index grid, removed in Beta 2"):
        simulate(row_scale_mgrid)(x, np.ones((96,), np.float32))


def row_normalise(x, sums, divide):
    """Rows divided by a per-row sum: by ``op0=nl.divide`` (not an ISA operator) or by a multiply
    with the reciprocal, the form a third-party attention kernel of the batch settled on."""
    p, f = x.shape
    xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    s = nl.ndarray((p, 1), dtype=sums.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=sums)
    o = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    if divide:
        nisa.tensor_scalar(dst=o, data=xs, op0=nl.divide, operand0=s)  # DIVIDE
    else:
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=s)
        nisa.tensor_scalar(dst=o, data=xs, op0=nl.multiply, operand0=inv)
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_multiplying_by_the_reciprocal_runs(target: str) -> None:
    x = rng.standard_normal((96, 40)).astype(np.float32)
    sums = (rng.random((96, 1)) + 0.5).astype(np.float32)
    np.testing.assert_allclose(simulate(row_normalise)(x, sums, False), x / sums, rtol=1e-5)


def test_divide_as_an_isa_operator_is_refused_at_its_line(target: str) -> None:
    # AWS NKI docs, "Supported Math Operators for NKI ISA" (NKI 0.3.0; the 0.6.0 table too): the
    # operators an instruction's op fields take; there is no divide (the kernel's author reports
    # the compiler's "unsupported operator 'divide'"). The emulator used to compute it.
    x = np.ones((96, 40), np.float32)
    with pytest.raises(LanguageError) as info:
        simulate(row_normalise)(x, np.ones((96, 1), np.float32), True)
    assert info.value.rule == "isa-divide"
    assert_reported_at(info.value, row_normalise, "# DIVIDE")


def test_nl_divide_wrapper_still_runs_where_known_issues_allow_it(target: str) -> None:
    # nl.divide (the nki.language wrapper) is a Known Issue of the release, not the ISA check:
    # with known_issues="off" it computes as before.
    def wrapped(x, y):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=y)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=nl.divide(a, b))
        return out

    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = (rng.random((32, 8)) + 0.5).astype(np.float32)
    np.testing.assert_allclose(simulate(wrapped, known_issues="off")(x, y), x / y, rtol=1e-6)


def digit_of(keys, shifts, float_shift):
    """The 2-bit digit ``(key >> shift[p]) & 3`` of int32 keys, the shift a per-partition vector
    tile (a radix-sort pass of the batch writes it so); ``float_shift`` passes it as float32."""
    p, f = keys.shape
    k = nl.ndarray((p, f), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=k, src=keys)
    sh = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sh, src=shifts)
    if float_shift:
        shf = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=shf, src=sh)
        sh = shf
    d = nl.ndarray((p, f), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(  # SHIFT
        dst=d, data=k, op0=nl.right_shift, operand0=sh, op1=nl.bitwise_and, operand1=3
    )
    out = nl.ndarray((p, f), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


def test_bitvec_tensor_scalar_takes_an_integer_vector_operand(target: str) -> None:
    # AWS NKI docs, nki.isa.tensor_scalar (NKI 0.3.0): operands are (data.shape[0], 1) tiles or
    # constants, for bitvec operators as for arithmetic ones; bitvec elements are bit patterns.
    # The emulator raised NotImplementedError for a tile operand with bitvec operators.
    keys = rng.integers(-(2**31), 2**31 - 1, (64, 48), dtype=np.int64).astype(np.int32)
    shifts = rng.integers(0, 31, (64, 1)).astype(np.int32)
    want = ((keys.view(np.uint32) >> shifts.astype(np.uint32)) & 3).astype(np.int32)
    np.testing.assert_array_equal(simulate(digit_of)(keys, shifts, False), want)


def test_bitvec_tensor_scalar_refuses_a_float_vector_operand(target: str) -> None:
    keys = np.zeros((64, 48), np.int32)
    with pytest.raises(DtypeError) as info:
        simulate(digit_of)(keys, np.zeros((64, 1), np.int32), True)
    assert info.value.rule == "bitvec-int"
    assert_reported_at(info.value, digit_of, "# SHIFT")


def count_matches(ids, wanted, op):
    """Per partition, how many of ``ids`` equal that partition's ``wanted`` value, with the one-hot
    mask kept: ``tensor_scalar_reduce(op0=op, reduce_op=nl.add)`` (a MoE routing probe of the batch
    counts tokens per expert so)."""
    p, f = ids.shape
    x = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=ids)
    w = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=wanted)
    onehot = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    cnt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(  # COUNT
        dst=onehot, data=x, op0=op, operand0=w, reduce_op=nl.add, reduce_res=cnt
    )
    out = nl.ndarray((p, f + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, 0:f], src=onehot)
    nisa.dma_copy(dst=out[:, f : f + 1], src=cnt)
    return out


def test_tensor_scalar_reduce_takes_a_comparison(target: str) -> None:
    # AWS NKI docs, nki.isa.tensor_scalar_reduce (NKI 0.3.0): op0 is "any arithmetic operator" of
    # "Supported Math Operators for NKI ISA", whose arithmetic group holds the comparisons; the
    # emulator allowed only add .. power and abs.
    ids = rng.integers(0, 6, (128, 40)).astype(np.float32)
    wanted = rng.integers(0, 6, (128, 1)).astype(np.float32)
    got = simulate(count_matches)(ids, wanted, nl.equal)
    onehot = (ids == wanted).astype(np.float32)
    np.testing.assert_array_equal(got[:, :40], onehot)
    np.testing.assert_array_equal(got[:, 40], onehot.sum(axis=1))


def test_tensor_scalar_reduce_refuses_a_bitvec_operator(target: str) -> None:
    # The same page: "Bitvec operators are not supported in this API".
    x = np.zeros((128, 40), np.float32)
    with pytest.raises(LanguageError) as info:
        simulate(count_matches)(x, np.zeros((128, 1), np.float32), nl.bitwise_and)
    assert info.value.rule == "op-token"
    assert_reported_at(info.value, count_matches, "# COUNT")
