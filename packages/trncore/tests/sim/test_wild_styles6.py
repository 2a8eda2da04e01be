"""Forms that a sixth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import jit, nisa, nl
from trncore.sim.errors import LanguageError, ShapeError
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2061)


def column_total_through_psum(col):
    """The sum of a ``[T, 1]`` column: turned into a row by a Tensor Engine transpose into PSUM,
    copied to SBUF and reduced along the free axis."""
    t = col.shape[0]
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    c_sb = nl.ndarray((t, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=col)
    row_ps = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=row_ps, data=c_sb)
    row = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=row, src=row_ps)
    total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, data=row, op=nl.add, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


def column_total_into_sbuf(col):
    """The same, transposing straight into an SBUF row: with no ``engine=`` that is the Vector
    Engine's transpose, which takes at most [32, 32]."""
    t = col.shape[0]
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    c_sb = nl.ndarray((t, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_sb, src=col)
    row = nl.ndarray((1, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=row, data=c_sb)  # HERE
    total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, data=row, op=nl.add, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


@pytest.mark.parametrize("t", [1, 37, 128])
def test_column_transposed_through_psum_sums_like_numpy(t: int) -> None:
    col = rng.standard_normal((t, 1)).astype(np.float32)
    got = jit(column_total_through_psum)(col)
    np.testing.assert_allclose(got, col.astype(np.float64).sum().reshape(1, 1), rtol=1e-5, atol=1e-5)


def test_small_column_transposed_into_sbuf_sums_like_numpy() -> None:
    # Up to [32, 32] the Vector Engine transposes SBUF to SBUF (nki.isa.nc_transpose, NKI 0.6.0).
    col = rng.standard_normal((20, 1)).astype(np.float32)
    got = jit(column_total_into_sbuf)(col)
    np.testing.assert_allclose(got, col.astype(np.float64).sum().reshape(1, 1), rtol=1e-5, atol=1e-5)


def test_wide_transpose_into_sbuf_names_the_psum_route_at_its_line() -> None:
    # A third-party metadata kernel transposes a [T, 1] column into SBUF; for T > 32 neither engine
    # can (Tensor Engine writes PSUM, Vector Engine stops at 32). The error says why it was the
    # Vector Engine's and what to write instead.
    col = rng.standard_normal((37, 1)).astype(np.float32)
    with pytest.raises(ShapeError) as info:
        jit(column_total_into_sbuf)(col)
    assert_reported_at(info.value, column_total_into_sbuf)
    assert "32x32" in str(info.value) and "writes PSUM" in str(info.value)


def rows_of_batch_absolute(x, b):
    """Rows ``0..R-1`` of batch ``b`` of ``x[B, R, C]`` through ``.ap()`` on the whole tensor with
    the absolute offset: the same under every reading of ``offset``."""
    _, r, c = x.shape
    out = nl.ndarray((r, c), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((r, c), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[c, r], [1, c]], offset=b * r * c))
    nisa.dma_copy(dst=out, src=t)
    return out


def rows_of_batch_view(x, b):
    """The same rows through ``x[b].ap(pattern, offset=0)``: a view with its own offset and an
    explicit one, where AWS's texts differ."""
    _, r, c = x.shape
    out = nl.ndarray((r, c), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((r, c), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[b].ap(pattern=[[c, r], [1, c]], offset=0))  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def test_ap_with_an_absolute_offset_on_the_whole_tensor_reads_that_batch_silently() -> None:
    x = rng.standard_normal((3, 8, 16)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jit(rows_of_batch_absolute)(x, 2)
    np.testing.assert_array_equal(got, x[2])


def test_ap_offset_on_an_offset_view_warns_at_its_line_naming_both_readings() -> None:
    # A public GDN prefill kernel loads k[batch_id].ap(pattern, offset=...) and reports it
    # verified on a device; the emulator adds the offset to the view's (the NkiTensor.ap
    # reference, NKI 0.5.0-0.6.0), so batch 1 reads its own rows; the NKI 0.6.0 language guide and
    # Access Patterns deep dive count it from the tensor's start (batch 0's rows). Where the
    # readings part, the line says so; batch 0 (view offset 0) is the same under both and is quiet.
    x = rng.standard_normal((3, 8, 16)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = jit(rows_of_batch_view)(x, 1)
    np.testing.assert_array_equal(got, x[1])  # the reference's reading: offset 0 of the view
    lines = [w for w in caught if "NkiTensor.ap reference" in str(w.message)]
    assert lines and lines[0].lineno == marked_line(rows_of_batch_view)
    assert "element 128" in str(lines[0].message) and "(element 0)" in str(lines[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(jit(rows_of_batch_view)(x, 0), x[0])


def group_amax_by_abs_then_max(x):
    """Per-row magnitude maximum of each 128-column group: ``activation(op=nl.abs)`` then
    ``tensor_reduce(op=nl.maximum)`` (the fp8 quantisation step of a public block-fp8 linear)."""
    m, k = x.shape
    g = k // 128
    out = nl.ndarray((m, g), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((m, k), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    amax = nl.ndarray((m, g), dtype=nl.float32, buffer=nl.sbuf)
    for i in range(g):
        a = nl.ndarray((m, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=a, op=nl.abs, data=x_sb[:, i * 128:(i + 1) * 128])
        nisa.tensor_reduce(dst=amax[:, i:i + 1], op=nl.maximum, data=a, axis=1)
    nisa.dma_copy(dst=out, src=amax)
    return out


def group_amax_by_abs_max(x):
    """The same with ``op=nl.abs_max``: NeuronCore-v4 only and "Legal Reduction op: N" in the
    operator table (nki.language.abs_max; Supported Math Operators for NKI ISA, NKI 0.6.0)."""
    m, k = x.shape
    out = nl.ndarray((m, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((m, k), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    amax = nl.ndarray((m, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=amax, op=nl.abs_max, data=x_sb[:, 0:128], axis=1)  # HERE
    nisa.dma_copy(dst=out, src=amax)
    return out


def test_group_magnitude_maximum_by_abs_and_maximum_matches_numpy() -> None:
    x = rng.standard_normal((40, 384)).astype(np.float32)
    got = jit(group_amax_by_abs_then_max)(x)
    np.testing.assert_array_equal(got, np.abs(x).reshape(40, 3, 128).max(-1))


def test_abs_max_as_a_reduction_is_refused_at_its_line_by_name() -> None:
    # The message printed the emulator's stub as "<function _not_emulated.<locals>.fn at 0x...>".
    x = rng.standard_normal((8, 128)).astype(np.float32)
    with pytest.raises(LanguageError) as info:
        jit(group_amax_by_abs_max)(x)
    assert_reported_at(info.value, group_amax_by_abs_max)
    assert "op=nl.abs_max" in str(info.value) and "0x" not in str(info.value)


def sine_by_activation(x):
    """``sin`` of every element through ``nisa.activation(op=nl.sin)``."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=s, op=nl.sin, data=a)  # HERE
    nisa.dma_copy(dst=out, src=s)
    return out


def sine_by_nl_sin(x):
    """The same through ``nl.sin``, which range-reduces first (the 0.6.0 shared page)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=out, src=nl.sin(a))
    return out


def test_activation_sin_inside_its_valid_range_is_quiet_and_exact() -> None:
    x = np.linspace(-np.pi, np.pi, 256, dtype=np.float32).reshape(16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jit(sine_by_activation)(x)
    np.testing.assert_allclose(got, np.sin(x.astype(np.float64)), rtol=0, atol=1e-6)


def test_activation_sin_outside_its_valid_range_warns_at_its_line() -> None:
    # "Supported Activation Functions for NKI ISA" (NKI 0.6.0): no range reduction on the Scalar
    # Engine, sin(9.0) ~ 27.65 on hardware. A public vocoder kernel measured this on a device and
    # range-reduces first; the emulator, computing sin exactly, says where hardware would not.
    x = np.linspace(-9.0, 9.0, 256, dtype=np.float32).reshape(16, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jit(sine_by_activation)(x)
    hits = [w for w in caught if "outside [-pi, pi]" in str(w.message)]
    assert hits and hits[0].lineno == marked_line(sine_by_activation)


def test_nl_sin_range_reduces_and_is_quiet_outside_pi() -> None:
    x = np.linspace(-20.0, 20.0, 256, dtype=np.float32).reshape(16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jit(sine_by_nl_sin)(x)
    np.testing.assert_allclose(got, np.sin(x.astype(np.float64)), rtol=0, atol=2e-6)


def shift_rows_by_their_max(x):
    """``x - rowmax(x)`` with the ``[P, 1]`` row maxima as ``tensor_scalar``'s operand."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=a, axis=1)
    nisa.tensor_scalar(dst=a, data=a, op0=nl.subtract, operand0=m)
    nisa.dma_copy(dst=out, src=a)
    return out


def shift_rows_by_tensor_tensor(x):
    """The same with ``tensor_tensor`` and the ``[P, 1]`` column as ``data2``: no broadcast."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=a, axis=1)
    nisa.tensor_tensor(dst=a, data1=a, data2=m, op=nl.subtract)  # HERE
    nisa.dma_copy(dst=out, src=a)
    return out


def test_row_shift_by_tensor_scalar_matches_numpy() -> None:
    x = rng.standard_normal((100, 48)).astype(np.float32)
    np.testing.assert_array_equal(jit(shift_rows_by_their_max)(x), x - x.max(1, keepdims=True))


def test_tensor_tensor_with_a_column_operand_names_tensor_scalar_at_its_line() -> None:
    x = rng.standard_normal((100, 48)).astype(np.float32)
    with pytest.raises(ShapeError) as info:
        jit(shift_rows_by_tensor_tensor)(x)
    assert_reported_at(info.value, shift_rows_by_tensor_tensor)
    assert "does not broadcast" in str(info.value) and "nisa.tensor_scalar" in str(info.value)
