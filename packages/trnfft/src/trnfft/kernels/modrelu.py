"""modReLU forward and backward kernels: ``y = relu(|z| + b) z / |z|`` with a bias per channel.

Layout: channels on the partitions (``(C, M)`` planes, the driver moves the channel dimension
first), so the per-channel bias is the ``(P, 1)`` per-partition operand that ``tensor_scalar``
broadcasts along the free dimension (AWS NKI docs, nki.isa.tensor_scalar and
nki.isa.scalar_tensor_tensor, NKI 0.3.0). C is tiled by 128 partitions and M by chunks of at most 2048
elements; ragged edges are clipped tiles.

With ``r = |z|``, ``s = (r + b) / r`` on the active set (``r > 0`` and ``r + b > 0``, else 0) and
``d = Re(conj(g) z) = g_r x + g_i v``, the analytic backward is

    grad_x = g_r s - (b / r³) x d,   grad_v = g_i s - (b / r³) v d,   grad_b = Σ_M d / r (active).

``|z|`` is ``sqrt(max(x² + v², 1e-30))``: the Scalar Engine's ``sqrt`` is only valid from 2^-116
(AWS NKI API Common Fields (NKI 0.3.0)), and the active mask zeroes the guarded points.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import spans
from trncore.lang import nisa, nl

__all__ = ["modrelu_backward_kernel", "modrelu_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"

_TILE_F = 2048
_TINY = 1e-30


def _tile(shape: tuple[int, int]) -> Any:
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


def _load(src: Any, c0: int, p: int, f0: int, f: int) -> Any:
    t = _tile((p, f))
    nisa.dma_copy(dst=t, src=src[c0 : c0 + p, f0 : f0 + f])
    return t


def _modulus_and_mask(x: Any, v: Any, bias: Any, p: int, f: int) -> tuple[Any, Any, Any]:
    """``r`` (guarded), ``1 / r`` and the active mask (1.0 / 0.0) of one tile."""
    r2 = _tile((p, f))
    t = _tile((p, f))
    nisa.tensor_tensor(dst=r2, data1=x, data2=x, op=nl.multiply)
    nisa.tensor_tensor(dst=t, data1=v, data2=v, op=nl.multiply)
    nisa.tensor_tensor(dst=r2, data1=r2, data2=t, op=nl.add)
    nonzero = _tile((p, f))
    nisa.tensor_scalar(dst=nonzero, data=r2, op0=nl.greater, operand0=0.0)
    r = _tile((p, f))
    nisa.tensor_scalar(dst=t, data=r2, op0=nl.maximum, operand0=_TINY)
    nisa.activation(dst=r, op=nl.sqrt, data=t)
    inv = _tile((p, f))
    nisa.reciprocal(dst=inv, data=r)
    # active = (r + b > 0) * (x² + v² > 0)
    mask = _tile((p, f))
    nisa.tensor_scalar(dst=mask, data=r, op0=nl.add, operand0=bias, op1=nl.greater, operand1=0.0)
    nisa.tensor_tensor(dst=mask, data1=mask, data2=nonzero, op=nl.multiply)
    return r, inv, mask


def _scale(r: Any, inv: Any, mask: Any, bias: Any, p: int, f: int) -> Any:
    """``s = (r + b) / r`` on the active set, else 0."""
    s = _tile((p, f))
    nisa.tensor_scalar(dst=s, data=r, op0=nl.add, operand0=bias)
    nisa.tensor_tensor(dst=s, data1=s, data2=inv, op=nl.multiply)
    nisa.tensor_tensor(dst=s, data1=s, data2=mask, op=nl.multiply)
    return s


def _bias_column(b: Any, c0: int, p: int) -> Any:
    col = _tile((p, 1))
    nisa.dma_copy(dst=col, src=b.ap([[1, p], [1, 1]], offset=c0))
    return col


def modrelu_kernel(xr: Any, xi: Any, b: Any) -> Any:
    """Forward: ``(yr, yi)`` for ``(C, M)`` float32 planes and a ``(C,)`` bias."""
    channels, m = xr.shape
    yr = nl.ndarray((channels, m), dtype=nl.float32, buffer=nl.shared_hbm)
    yi = nl.ndarray((channels, m), dtype=nl.float32, buffer=nl.shared_hbm)
    for c0, p in spans(channels, 128):
        bias = _bias_column(b, c0, p)
        for f0, f in spans(m, _TILE_F):
            x, v = _load(xr, c0, p, f0, f), _load(xi, c0, p, f0, f)
            r, inv, mask = _modulus_and_mask(x, v, bias, p, f)
            s = _scale(r, inv, mask, bias, p, f)
            for src, dst in ((x, yr), (v, yi)):
                out = _tile((p, f))
                nisa.tensor_tensor(dst=out, data1=src, data2=s, op=nl.multiply)
                nisa.dma_copy(dst=dst[c0 : c0 + p, f0 : f0 + f], src=out)
    return yr, yi


def modrelu_backward_kernel(xr: Any, xi: Any, b: Any, gr: Any, gi: Any) -> Any:
    """Backward: ``(grad_xr, grad_xi, grad_b)`` for output gradients ``gr, gi`` of shape ``(C, M)``."""
    channels, m = xr.shape
    f32 = nl.float32
    gxr = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    gxi = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    gb = nl.ndarray((channels, 1), dtype=f32, buffer=nl.shared_hbm)
    for c0, p in spans(channels, 128):
        bias = _bias_column(b, c0, p)
        total = _tile((p, 1))
        nisa.memset(dst=total, value=0.0)
        for f0, f in spans(m, _TILE_F):
            x, v = _load(xr, c0, p, f0, f), _load(xi, c0, p, f0, f)
            g_r, g_i = _load(gr, c0, p, f0, f), _load(gi, c0, p, f0, f)
            r, inv, mask = _modulus_and_mask(x, v, bias, p, f)
            s = _scale(r, inv, mask, bias, p, f)
            d = _tile((p, f))
            t = _tile((p, f))
            nisa.tensor_tensor(dst=d, data1=g_r, data2=x, op=nl.multiply)
            nisa.tensor_tensor(dst=t, data1=g_i, data2=v, op=nl.multiply)
            nisa.tensor_tensor(dst=d, data1=d, data2=t, op=nl.add)
            # grad_b: sum over the free dim of d / r on the active set
            nisa.tensor_tensor(dst=t, data1=d, data2=inv, op=nl.multiply)
            nisa.tensor_tensor(dst=t, data1=t, data2=mask, op=nl.multiply)
            part = _tile((p, 1))
            nisa.tensor_reduce(dst=part, op=nl.add, data=t, axis=1)
            nisa.tensor_tensor(dst=total, data1=total, data2=part, op=nl.add)
            # coef = b (mask / r)³ d: the mask first, so a guarded point's 1/r³ never overflows
            coef = _tile((p, f))
            masked = _tile((p, f))
            nisa.tensor_tensor(dst=masked, data1=inv, data2=mask, op=nl.multiply)
            nisa.tensor_tensor(dst=coef, data1=masked, data2=masked, op=nl.multiply)
            nisa.tensor_tensor(dst=coef, data1=coef, data2=masked, op=nl.multiply)
            nisa.tensor_scalar(dst=coef, data=coef, op0=nl.multiply, operand0=bias)
            nisa.tensor_tensor(dst=coef, data1=coef, data2=d, op=nl.multiply)
            for g, z, dst in ((g_r, x, gxr), (g_i, v, gxi)):
                out = _tile((p, f))
                nisa.tensor_tensor(dst=out, data1=g, data2=s, op=nl.multiply)
                nisa.tensor_tensor(dst=t, data1=coef, data2=z, op=nl.multiply)
                nisa.tensor_tensor(dst=out, data1=out, data2=t, op=nl.subtract)
                nisa.dma_copy(dst=dst[c0 : c0 + p, f0 : f0 + f], src=out)
        nisa.dma_copy(dst=gb[c0 : c0 + p, 0:1], src=total)
    return gxr, gxi, gb
