"""Forms that a fourth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.errors import BoundsError, ShapeError
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2041)


def gather_rows_per_head(x, rows):
    """``out[h] = x[h][rows[:, 0]]``: one vector-offset gather per head from the view ``x[h]``."""
    heads, _, d = x.shape
    p = rows.shape[0]
    out = nl.ndarray((heads, p, d), dtype=x.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    for h in range(heads):
        t = nl.ndarray((p, d), dtype=x.dtype, buffer=nl.sbuf)
        view = x[h].ap(pattern=[[d, p], [1, d]], vector_offset=idx, indirect_dim=0)
        nisa.dma_copy(dst=t, src=view)  # HERE
        nisa.dma_copy(dst=out[h], src=t)
    return out


def test_ap_on_an_indexed_view_keeps_its_offset_and_rows() -> None:
    # nki.language.NkiTensor.ap (SDK 2.31 and 2.32, NKI 0.5.0-0.6.0): "offset: ... When None
    # (default), inherits the current view's storage offset"; "indirect_dim: dimension in
    # self.shape whose stride scales the indirect scalar/vector offset". So x[h].ap(pattern,
    # vector_offset=rows) gathers rows of head h; it was read from head 0 with the whole tensor's
    # head stride (every index past 0 out of bounds).
    x = rng.standard_normal((3, 40, 16)).astype(np.float32)
    rows = rng.integers(0, 40, (24, 1)).astype(np.int32)
    got = jit(gather_rows_per_head)(x, rows)
    np.testing.assert_array_equal(got, x[:, rows[:, 0], :])


def test_ap_gather_past_the_tensor_is_reported_at_the_copy() -> None:
    # The neighbour: a row index past the last row of the tensor reads outside it (nki.isa.dma_copy,
    # NKI 0.3.0-0.6.0: out-of-bound dynamic indices are an error unless oob_mode=skip).
    x = rng.standard_normal((2, 40, 16)).astype(np.float32)
    rows = np.full((8, 1), 80, np.int32)
    with pytest.raises(BoundsError, match="reaches outside") as info:
        jit(gather_rows_per_head)(x, rows)
    assert_reported_at(info.value, gather_rows_per_head)


def window_of_head(x, start, h, n, explicit_offset):
    """Rows ``start .. start + n`` of ``x[h]`` by a scalar offset; with ``explicit_offset`` the
    pattern is given offset=0, which keeps the view's offset (the NkiTensor.ap reference,
    SDK 2.31-2.32: "offset=0 keeps the base")."""
    d = x.shape[2]
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    t = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.sbuf)
    if explicit_offset:
        view = x[h].ap(pattern=[[d, n], [1, d]], offset=0, scalar_offset=s, indirect_dim=0)
    else:
        view = x[h].ap(pattern=[[d, n], [1, d]], scalar_offset=s, indirect_dim=0)
    nisa.dma_copy(dst=t, src=view)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_ap_scalar_offset_on_a_view_with_and_without_an_offset() -> None:
    # The same page: no offset keeps the view (x[1], rows of its second dimension), and so does
    # offset=0 ("offset=0 keeps the base"); indirect_dim 0 is the view's own first dimension
    # ("dimension in self.shape"). The access-pattern deep dive reads an explicit offset against
    # the storage (x[2, 0:8] here); the emulator follows the reference (docs/emulator.md).
    x = rng.standard_normal((3, 40, 16)).astype(np.float32)
    start = np.array([[5]], np.int32)
    got = jit(window_of_head)(x, start, 1, 8, False)
    np.testing.assert_array_equal(got, x[1, 5:13])
    first = np.array([[2]], np.int32)
    got = jit(window_of_head)(x, first, 1, 8, True)
    np.testing.assert_array_equal(got, x[1, 2:10])


def cast_copy(x, with_dtype_keyword):
    """Copy a float32 tile to bfloat16: the cast is the destination's dtype (nki.isa.tensor_copy,
    NKI 0.3.0-0.6.0); ``dtype=`` is not one of its parameters."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    b = nl.ndarray((p, f), dtype=nl.bfloat16, buffer=nl.sbuf)
    if with_dtype_keyword:
        nisa.tensor_copy(dst=b, src=t, engine=nisa.vector_engine, dtype=nl.bfloat16)  # HERE
    else:
        nisa.tensor_copy(dst=b, src=t, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=b)
    return out


def test_an_isa_call_with_a_foreign_parameter_names_the_signature_and_line() -> None:
    # A public GEMM passes tensor_copy(dtype=...): Python's "unexpected keyword argument" named
    # neither the instruction's parameters nor the kernel's line; the valid form casts by dst.
    x = rng.standard_normal((64, 48)).astype(np.float32)
    got = jit(cast_copy)(x, False)
    np.testing.assert_array_equal(
        np.asarray(got, np.float32), x.astype(ml_dtypes.bfloat16).astype(np.float32)
    )
    with pytest.raises(TypeError, match=r"its parameters are \(dst, src, engine, name\)") as info:
        jit(cast_copy)(x, True)
    assert f"{__file__}:{marked_line(cast_copy)})" in str(info.value)


def first_n_of_row(scores, n, scalar_bound):
    """Keep the first ``n`` columns of each row (FP32_MIN elsewhere) and each row's max."""
    p, f = scores.shape
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    row_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=scores)
    lo = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=lo, value=0.0)
    hi = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=hi, value=float(n))
    sel = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    bound0 = 0.0 if scalar_bound else lo
    nisa.range_select(  # HERE
        sel, on_true_tile=s, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=bound0,
        bound1=hi, reduce_op=nl.maximum, reduce_res=mx, range_start=0,
    )
    nisa.dma_copy(dst=out, src=sel)
    nisa.dma_copy(dst=row_max, src=mx)
    return out, row_max


def test_range_select_bounds_are_tiles_and_a_number_is_reported_at_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # nki.isa.range_select (NKI 0.3.0-0.6.0): "bound0: tile with one element per partition"; a
    # public indexer passes bound0=0.0. The number was refused with a TypeError whose text showed
    # the site as a Python tuple; it is now the page's bound rule at the kernel's line.
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")  # NeuronCore-v3 and newer
    x = rng.standard_normal((16, 40)).astype(np.float32)
    got, mx = jit(first_n_of_row)(x, 25, False)
    fp32_min = np.float32(-3.4028235e38)
    want = np.where(np.arange(40)[None, :] < 25, x, fp32_min)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mx, want.max(axis=1, keepdims=True))
    with pytest.raises(ShapeError, match=r"bound0 must be a float32 tile .* not a float") as info:
        jit(first_n_of_row)(x, 25, True)
    assert_reported_at(info.value, first_n_of_row)


def memset_from_tensor(x):
    """memset with a tensor as its value (the page's value is a compile-time constant)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.memset(dst=t, value=t)  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def copy_from_a_list(x):
    """dma_copy with a Python list as its source (an operand must be an NKI tensor)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=[0.0])  # HERE
    return out


def scale_by_a_string(x):
    """tensor_scalar with a string operand (a number or a (P, 1) tensor)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0="2")  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def replace_with_a_string(x):
    """nc_match_replace8 with a string imm (a number)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    v = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.max8(dst=v, src=t)
    nisa.nc_match_replace8(dst=t, data=t, vals=v, imm="0")  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (memset_from_tensor, "compile-time constant"),
        (copy_from_a_list, "src must be an NKI tensor"),
        (scale_by_a_string, "operand0 must be a number or a"),
        (replace_with_a_string, "imm must be a number"),
    ],
)
def test_plain_type_errors_name_the_kernel_line_as_file_and_line(kernel, message) -> None:  # type: ignore[no-untyped-def]
    # The TypeErrors that name the kernel's line printed it as a Python tuple, "(at ('k.py', 7))";
    # they now end as the rule errors do, "(at k.py:7)".
    x = rng.standard_normal((8, 16)).astype(np.float32)
    with pytest.raises(TypeError, match=message) as info:
        jit(kernel)(x)
    assert str(info.value).endswith(f"(at {__file__}:{marked_line(kernel)})")


def row_sums(w):
    """One tensor_reduce(add) per 128-row tile of ``w``."""
    rows, cols = w.shape
    out = nl.ndarray((rows, 1), dtype=w.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(rows // 128):
        tile = nl.ndarray((128, cols), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=w[t * 128 : (t + 1) * 128, :])
        acc = nl.ndarray((128, 1), dtype=w.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=acc, data=tile, op=nl.add, axis=(1,))
        nisa.dma_copy(dst=out[t * 128 : (t + 1) * 128, :], src=acc)
    return out


def test_tensor_reduce_add_sums_left_to_right_in_float32_on_trn1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A published trn1 device run (NKI 0.6.0) of a per-bin sum kernel: tensor_reduce(op=nl.add)
    # over 128 float32 values per row equalled the sequential float32 sum on every one of 4096 rows
    # (two seeds), 1 ulp from the float64 sum at the median; nki.simulate's (and NumPy's) pairwise
    # sum does not. The reference here is a plain float32 loop. trn2 (unmeasured) keeps the
    # pairwise sum. Rows of 128 and of 3000 values (the two ways the emulator sums in order).
    for cols in (128, 3000):
        w = np.random.default_rng(3).random((256, cols), dtype=np.float32)
        seq = np.zeros(256, np.float32)
        for k in range(cols):
            seq += w[:, k]
        assert (seq != np.add.reduce(w, axis=1)).any()  # the two orders differ on this data
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
        np.testing.assert_array_equal(np.asarray(jit(row_sums)(w)).reshape(-1), seq)
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
        got = np.asarray(jit(row_sums)(w)).reshape(-1)
        np.testing.assert_array_equal(got, np.add.reduce(w, axis=1))
