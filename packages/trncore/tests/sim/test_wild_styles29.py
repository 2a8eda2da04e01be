"""Forms a twenty-ninth batch of public third-party NKI kernels (a university course's Wan2.2
RMSNorm, LayerNorm and RoPE kernels, docs/third-party-kernels.md) writes, in kernels
of our own, next to the neighbours their repository's history records the device compiler
refusing (its MLIR verifier's messages are quoted in the fixing commits):

- a row statistic broadcast along the free axis with ``nisa.tensor_scalar`` and a ``(P, 1)``
  operand runs; the same product by ``nisa.tensor_tensor`` ("'dst' free total elements H !=
  'rhs' free total elements 1" on the device) is refused at its line;
- a per-column weight as ``tensor_scalar``'s ``operand0`` of shape ``(1, H)`` ("'operand0' free
  dimensions total elements must be 1") is refused at its line;
- ``activation(bias=eps)`` with a Python float runs on trn2; a ``(1, 1)`` SBUF tile as bias
  ("'bias' partition total elements 1 != 'dst' partition total elements 128") is refused at its
  line; on trn1 the float is refused (``nki.isa.activation``: "In NeuronCore-v2, the bias must be
  a [N, 1] vector"), and a ``(P, 1)`` tile runs there;
- the pair swap of a rotary embedding through 4-D ``reshape`` views of an SBUF tile runs on a
  partial tile; ``reshape`` of a step-2 view is refused at its line.

None of these changed the emulator: they pin that its refusals are the device's.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, ShapeError, TargetError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2929)


def _row_rms_scale(x, eps, bias_form, product_form):
    """``x / sqrt(mean(x^2) + eps)`` per row of ``x`` [R, H] (R <= 128), in float32."""
    rows, width = x.shape
    out = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    sq = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=sq, data=t, op=nl.square)
    ssum = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=ssum, data=sq, op=nl.add, axis=(1,))
    inv = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    if bias_form == "float":
        nisa.activation(dst=inv, data=ssum, op=nl.rsqrt, scale=1.0 / width, bias=eps)  # FLOAT
    elif bias_form == "column":
        col = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=col, value=eps)
        nisa.activation(dst=inv, data=ssum, op=nl.rsqrt, scale=1.0 / width, bias=col)
    else:
        one = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=one, value=eps)
        nisa.activation(dst=inv, data=ssum, op=nl.rsqrt, scale=1.0 / width, bias=one)  # ONE
    y = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    if product_form == "scalar":
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=inv)
    else:
        nisa.tensor_tensor(dst=y, data1=t, data2=inv, op=nl.multiply)  # TT
    nisa.dma_copy(dst=out, src=y)
    return out


def rms_float_bias(x, eps):
    return _row_rms_scale(x, eps, "float", "scalar")


def rms_column_bias(x, eps):
    return _row_rms_scale(x, eps, "column", "scalar")


def rms_one_by_one_bias(x, eps):
    return _row_rms_scale(x, eps, "one", "scalar")


def rms_tensor_tensor_product(x, eps):
    return _row_rms_scale(x, eps, "float", "tensor")


def scaled_by_row_vector(x, w):
    """``x * w`` with ``w`` [1, H] as tensor_scalar's operand0: refused (one value per partition)."""
    rows, width = x.shape
    out = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    t = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    wt = nl.ndarray((1, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    nisa.tensor_scalar(dst=out, data=t, op0=nl.multiply, operand0=wt)  # ROW
    res = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=res, src=out)
    return res


def _pair_swapped(x, view_form):
    """Each (2k, 2k+1) pair of the first ``H // 2`` columns of ``x`` [R, H] swapped, the rest 0."""
    rows, width = x.shape
    half = width // 2
    out = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((rows, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0.0)
    if view_form == "slice":
        src = t[0:rows, 0:half].reshape((rows, half // 2, 2))
    else:
        src = t[0:rows, 0:width:2].reshape((rows, half // 2, 2))  # STRIDED
    dst = s[0:rows, 0:half].reshape((rows, half // 2, 2))
    nisa.tensor_copy(dst=dst[0:rows, 0 : half // 2, 0:1], src=src[0:rows, 0 : half // 2, 1:2])
    nisa.tensor_copy(dst=dst[0:rows, 0 : half // 2, 1:2], src=src[0:rows, 0 : half // 2, 0:1])
    nisa.dma_copy(dst=out, src=s)
    return out


def pair_swap_slice(x):
    return _pair_swapped(x, "slice")


def pair_swap_strided(x):
    return _pair_swapped(x, "strided")


def _rms_reference(x: np.ndarray, eps: float) -> np.ndarray:
    xf = x.astype(np.float64)
    return xf / np.sqrt((xf**2).mean(axis=1, keepdims=True) + eps)


@pytest.mark.parametrize(
    ("kernel", "target"), [(rms_float_bias, "trn2"), (rms_column_bias, "trn1"), (rms_column_bias, "trn2")]
)
def test_row_rms_with_a_float_or_column_bias_matches_numpy(kernel, target):
    x = rng.standard_normal((72, 256)).astype(np.float32)
    got = run_kernel(kernel, [x, 1e-2], target=target)
    np.testing.assert_allclose(got, _rms_reference(x, 1e-2), rtol=2e-5, atol=1e-6)


_W = rng.standard_normal((1, 256)).astype(np.float32)


@pytest.mark.parametrize(
    ("kernel", "extra", "target", "error", "rule", "where", "marker"),
    [
        (rms_float_bias, 1e-2, "trn1", TargetError, "activation-scalar-bias", _row_rms_scale, "# FLOAT"),
        (rms_one_by_one_bias, 1e-2, "trn2", ShapeError, "activation-bias-shape", _row_rms_scale, "# ONE"),
        (rms_tensor_tensor_product, 1e-2, "trn2", ShapeError, "element-count", _row_rms_scale, "# TT"),
        (scaled_by_row_vector, _W, "trn2", ShapeError, "vector-operand-shape", scaled_by_row_vector, "# ROW"),
    ],
)
def test_refused_at_the_kernels_line(kernel, extra, target, error, rule, where, marker):
    """The device compiler's three refusals (and the trn1 bias rule), each at the marked line."""
    x = rng.standard_normal((128, 256)).astype(np.float32)
    with pytest.raises(error) as exc:
        run_kernel(kernel, [x, extra], target=target)
    assert exc.value.rule == rule
    assert_reported_at(exc.value, where, marker)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_pair_swap_through_4d_reshape_views_matches_numpy(target):
    x = rng.standard_normal((38, 64)).astype(np.float32)
    got = run_kernel(pair_swap_slice, [x], target=target)
    want = np.zeros_like(x)
    want[:, :32] = x[:, :32].reshape(38, 16, 2)[:, :, ::-1].reshape(38, 32)
    np.testing.assert_array_equal(got, want)


def test_reshape_of_a_strided_view_is_refused_at_its_line():
    x = rng.standard_normal((38, 64)).astype(np.float32)
    with pytest.raises(LanguageError) as exc:
        run_kernel(pair_swap_strided, [x], target="trn2")
    assert exc.value.rule == "reshape-contiguous"
    assert_reported_at(exc.value, _pair_swapped, "# STRIDED")
