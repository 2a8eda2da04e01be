"""Forms that a thirteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: a decode step written in the ``nl.*`` layer whose ``nl.matmul`` operands must
pair as ``nc_matmul``'s do, and ``nl.broadcast_to`` widening one SBUF row or column as a
``tensor_tensor`` operand."""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import DtypeError, ShapeError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1301)

# ------------------------------------------------------------------ nl.matmul operand dtypes
# nki.language.matmul (NKI 0.3.0-0.6.0) gives "x @ y" of SBUF tiles and says nothing of dtypes or
# casts; it runs on the Tensor Engine, and nki.isa.nc_matmul (same releases): "if one of the input
# tiles is tfloat32/float32, the other tile must also be tfloat32/float32". A public grouped-query
# decode kernel multiplies float32 probabilities by bf16 values through nl.matmul; the emulator
# refuses that at the nl.matmul line (docs/emulator.md, "Readings chosen").


def decode_step(q, k, v, prob_dtype):
    """softmax(q.T k / sqrt(d)) v.T for one KV tile, written with nl.load / nl.matmul /
    nl.transpose. ``q`` [d, g], ``k`` and ``v`` [d, S]; returns [g, d] float32. The probabilities
    are copied out of PSUM in ``prob_dtype`` (float32 next to bf16 values is the neighbour)."""
    d, g = q.shape
    q_sb = nl.load(q)
    k_sb = nl.load(k)
    v_sb = nl.load(v)
    s_ps = nl.matmul(q_sb, k_sb, transpose_x=True)
    s = nl.ndarray(s_ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=s_ps, op0=nl.multiply, operand0=1.0 / float(np.sqrt(d)))
    top = nl.max(s, axis=1, keepdims=True)
    shifted = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=shifted, data=s, op0=nl.subtract, operand0=top)
    e = nl.exp(shifted)
    inv = nl.reciprocal(nl.sum(e, axis=1, keepdims=True))
    p = nl.ndarray(e.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=p, data=e, op0=nl.multiply, operand0=inv)
    p_t_ps = nl.transpose(p)
    p_t = nl.ndarray(p_t_ps.shape, dtype=prob_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=p_t, src=p_t_ps)
    v_t_ps = nl.transpose(v_sb)
    v_t = nl.ndarray(v_t_ps.shape, dtype=v_sb.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v_t, src=v_t_ps)
    o_ps = nl.matmul(p_t, v_t, transpose_x=True)  # HERE
    o = nl.ndarray(o_ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=o_ps)
    out = nl.ndarray(o.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=o)
    return out


def _decode_ref(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q.T @ k / np.sqrt(q.shape[0])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p @ v.T


@pytest.mark.parametrize(
    ("in_dtype", "prob_dtype", "tol"),
    [(np.float32, nl.float32, 1e-5), (ml_dtypes.bfloat16, nl.bfloat16, 2e-2)],
)
def test_nl_matmul_paired_operands_match_numpy(target: str, in_dtype, prob_dtype, tol) -> None:
    d, g, s = 64, 4, 128
    q, k, v = (rng.standard_normal(shape).astype(in_dtype) for shape in ((d, g), (d, s), (d, s)))
    if target == "trn1" and in_dtype is not np.float32:
        # narrow nl.matmul operands on trn1 run warned (test_wild_styles24.py)
        with pytest.warns(UserWarning, match="nl.matmul of bfloat16 and bfloat16 operands on trn1"):
            got = run_kernel(decode_step, [q, k, v, prob_dtype], target=target)
    else:
        got = run_kernel(decode_step, [q, k, v, prob_dtype], target=target)
    np.testing.assert_allclose(got, _decode_ref(q, k, v), rtol=tol, atol=tol)


def test_nl_matmul_float32_with_bf16_is_refused_at_its_line(target: str) -> None:
    d, g, s = 64, 4, 128
    bf16 = ml_dtypes.bfloat16
    q, k, v = (rng.standard_normal(shape).astype(bf16) for shape in ((d, g), (d, s), (d, s)))
    # on trn1 the first (bf16) nl.matmul is warned first (test_wild_styles24.py)
    first = (
        pytest.warns(UserWarning, match="nl.matmul of bfloat16 and bfloat16 operands on trn1")
        if target == "trn1"
        else contextlib.nullcontext()
    )
    with first, pytest.raises(DtypeError, match="matmul-fp32-pairing") as info:
        run_kernel(decode_step, [q, k, v, nl.float32], target=target)
    assert "stationary float32, moving bfloat16" in str(info.value)
    assert_reported_at(info.value, decode_step)


# ------------------------------------------------------ nl.broadcast_to as a tensor_tensor operand
# nki.language.broadcast_to (NKI 0.3.0-0.6.0) widens a tile's size-1 dims to ``shape``; public
# kernels of an equivariant network widen a (B, 1) column of SBUF along the free dim and one row
# (any partition) of a [K, K] constant over B partitions, and feed both to nisa.tensor_tensor.
# Widening a dim that is not 1 is no broadcast: refused at the line.


def outer_rows(m, table, row, width):
    """out[b, j] = m[b, row] * table[row, j] for the first ``m.shape[0]`` partitions, through two
    broadcast_to operands; ``width`` other than 1 widens a 2-column slice (the neighbour)."""
    b, k = m.shape
    m_sb = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=m_sb[0:b, 0:k], src=m)
    t_sb = nl.ndarray((k, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t_sb, src=table)
    col = nl.broadcast_to(m_sb[0:b, row : row + width], shape=(b, k))  # HERE
    line = nl.broadcast_to(t_sb[row : row + 1, 0:k], shape=(b, k))
    res = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=res[0:b, 0:k], data1=col, data2=line, op=nl.multiply)
    out = nl.ndarray((b, k), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res[0:b, 0:k])
    return out


@pytest.mark.parametrize(("b", "row"), [(128, 0), (37, 5), (3, 24)])
def test_broadcast_row_and_column_operands_match_numpy(target: str, b: int, row: int) -> None:
    k = 25
    m = rng.standard_normal((b, k)).astype(np.float32)
    table = rng.standard_normal((k, k)).astype(np.float32)
    got = run_kernel(outer_rows, [m, table, row, 1], target=target)
    np.testing.assert_allclose(got, np.outer(m[:, row], table[row]), rtol=1e-6, atol=1e-6)


def test_broadcast_of_a_wider_slice_is_refused_at_its_line(target: str) -> None:
    k = 25
    m = rng.standard_normal((37, k)).astype(np.float32)
    table = rng.standard_normal((k, k)).astype(np.float32)
    with pytest.raises(ShapeError, match="broadcast-shape") as info:
        run_kernel(outer_rows, [m, table, 5, 2], target=target)
    assert_reported_at(info.value, outer_rows)
