"""Whitening batch normalisation kernels (forward and analytic backward) for ComplexBatchNorm1d.

Channels sit on the partitions (``(C, M)`` planes; C tiled by 128, M streamed in chunks of at most
2048 elements), so every per-channel statistic is a free-dimension reduction (``tensor_reduce``,
AWS NKI docs, nki.isa.tensor_reduce, NKI 0.3.0) and every per-channel coefficient a ``(P, 1)`` operand
that ``tensor_scalar`` and ``scalar_tensor_tensor`` broadcast along the free dimension (AWS NKI docs,
nki.isa.tensor_scalar and nki.isa.scalar_tensor_tensor, NKI 0.3.0). The per-channel 2x2 algebra (inverse
square root, Sylvester solve) runs on ``(P, 1)`` tiles. The formulas are those of :mod:`trnfft._pytorch`
(the PyTorch references these kernels are tested against).

``params`` ``(C, 5)``: ``γ_rr, γ_ii, γ_ri, β_r, β_i``; ``stats`` ``(C, 5)``: ``μ_r, μ_i, V_rr, V_ii,
V_ri``.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import spans
from trncore.lang import nisa, nl

__all__ = ["batchnorm_backward_kernel", "batchnorm_forward_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"

_TILE_F = 2048


def _tile(shape: tuple[int, int]) -> Any:
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


def _bin(x: Any, y: Any, op: Any) -> Any:
    """``x op y`` for two ``(P, 1)`` tiles, a new tile."""
    out = _tile(tuple(x.shape))
    nisa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
    return out


def _affine(x: Any, scale: float, shift: float = 0.0) -> Any:
    """``x * scale + shift`` for a ``(P, 1)`` tile (compile-time constants), a new tile."""
    out = _tile(tuple(x.shape))
    nisa.tensor_scalar(
        dst=out, data=x, op0=nl.multiply, operand0=float(scale), op1=nl.add, operand1=float(shift)
    )
    return out


def _zeros(p: int) -> Any:
    out = _tile((p, 1))
    nisa.memset(dst=out, value=0.0)
    return out


def _accumulate(acc: Any, data: Any, p: int) -> None:
    """``acc += Σ_free data`` (one reduction, one add)."""
    part = _tile((p, 1))
    nisa.tensor_reduce(dst=part, op=nl.add, data=data, axis=1)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)


def _accumulate_product(acc: Any, x: Any, y: Any, p: int, f: int) -> None:
    prod = _tile((p, f))
    nisa.tensor_tensor(dst=prod, data1=x, data2=y, op=nl.multiply)
    _accumulate(acc, prod, p)


def _lin(x: Any, kx: Any, y: Any, ky: Any, shift: Any, p: int, f: int) -> Any:
    """``kx x + ky y (+ shift)`` with ``(P, 1)`` coefficients, a new ``(P, f)`` tile."""
    t = _tile((p, f))
    if shift is None:
        nisa.tensor_scalar(dst=t, data=y, op0=nl.multiply, operand0=ky)
    else:
        nisa.tensor_scalar(dst=t, data=y, op0=nl.multiply, operand0=ky, op1=nl.add, operand1=shift)
    out = _tile((p, f))
    nisa.scalar_tensor_tensor(dst=out, data=x, op0=nl.multiply, operand0=kx, op1=nl.add, operand1=t)
    return out


def _load(src: Any, c0: int, p: int, f0: int, f: int) -> Any:
    t = _tile((p, f))
    nisa.dma_copy(dst=t, src=src[c0 : c0 + p, f0 : f0 + f])
    return t


def _centred(x: Any, mean: Any, p: int, f: int) -> Any:
    out = _tile((p, f))
    nisa.tensor_scalar(dst=out, data=x, op0=nl.subtract, operand0=mean)
    return out


def _whitening(st: Any, eps: float, p: int) -> tuple[Any, Any, Any]:
    """``(a, d, b) = (W_rr, W_ii, W_ri)`` of ``(V + eps I)^(-1/2)`` from a ``(P, 5)`` stats tile."""
    vrr, vii, vri = _affine(st[:, 2:3], 1.0, eps), _affine(st[:, 3:4], 1.0, eps), st[:, 4:5]
    det = _bin(_bin(vrr, vii, nl.multiply), _bin(vri, vri, nl.multiply), nl.subtract)
    s = _tile((p, 1))
    nisa.activation(dst=s, op=nl.sqrt, data=det)
    t = _tile((p, 1))
    trace = _bin(_bin(vrr, vii, nl.add), _affine(s, 2.0), nl.add)
    nisa.activation(dst=t, op=nl.sqrt, data=trace)
    inv = _tile((p, 1))
    nisa.reciprocal(dst=inv, data=_bin(s, t, nl.multiply))
    a = _bin(_bin(vii, s, nl.add), inv, nl.multiply)
    d = _bin(_bin(vrr, s, nl.add), inv, nl.multiply)
    b = _affine(_bin(vri, inv, nl.multiply), -1.0)
    return a, d, b


def _chunk(xr: Any, xi: Any, gr: Any, gi: Any, at: tuple[int, int, int, int], st: Any, prm: Any) -> tuple:
    """Centred inputs ``c``, gradients ``g`` and ``h = Γ g`` of one chunk (``at``: c0, p, f0, f)."""
    c0, p, f0, f = at
    cr = _centred(_load(xr, c0, p, f0, f), st[:, 0:1], p, f)
    ci = _centred(_load(xi, c0, p, f0, f), st[:, 1:2], p, f)
    g_r, g_i = _load(gr, c0, p, f0, f), _load(gi, c0, p, f0, f)
    hr = _lin(g_r, prm[:, 0:1], g_i, prm[:, 2:3], None, p, f)
    hi = _lin(g_r, prm[:, 2:3], g_i, prm[:, 1:2], None, p, f)
    return cr, ci, g_r, g_i, hr, hi


def batchnorm_forward_kernel(
    xr: Any, xi: Any, params: Any, stats_in: Any, eps: float = 1e-5, batch_stats: bool = True
) -> Any:
    """``(yr, yi, stats)``: whitened, affinely mapped planes and the statistics used."""
    channels, m = xr.shape
    f32 = nl.float32
    yr = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    yi = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((channels, 5), dtype=f32, buffer=nl.shared_hbm)
    chunks = spans(m, _TILE_F)
    for c0, p in spans(channels, 128):
        prm = _load(params, c0, p, 0, 5)
        st = _tile((p, 5))
        if batch_stats:
            sums = [_zeros(p), _zeros(p)]
            for f0, f in chunks:
                for acc, src in zip(sums, (xr, xi)):
                    _accumulate(acc, _load(src, c0, p, f0, f), p)
            for j, acc in enumerate(sums):
                nisa.tensor_scalar(dst=st[:, j : j + 1], data=acc, op0=nl.multiply, operand0=1.0 / m)
            cov = [_zeros(p), _zeros(p), _zeros(p)]
            for f0, f in chunks:
                cr = _centred(_load(xr, c0, p, f0, f), st[:, 0:1], p, f)
                ci = _centred(_load(xi, c0, p, f0, f), st[:, 1:2], p, f)
                for acc, (u, v) in zip(cov, ((cr, cr), (ci, ci), (cr, ci))):
                    _accumulate_product(acc, u, v, p, f)
            for j, acc in enumerate(cov):
                nisa.tensor_scalar(dst=st[:, 2 + j : 3 + j], data=acc, op0=nl.multiply, operand0=1.0 / m)
        else:
            nisa.dma_copy(dst=st, src=stats_in[c0 : c0 + p, 0:5])
        a, d, b = _whitening(st, eps, p)
        g_rr, g_ii, g_ri = prm[:, 0:1], prm[:, 1:2], prm[:, 2:3]
        # K = Γ W and the offset β - K μ: y = K x + offset
        k11 = _bin(_bin(g_rr, a, nl.multiply), _bin(g_ri, b, nl.multiply), nl.add)
        k12 = _bin(_bin(g_rr, b, nl.multiply), _bin(g_ri, d, nl.multiply), nl.add)
        k21 = _bin(_bin(g_ri, a, nl.multiply), _bin(g_ii, b, nl.multiply), nl.add)
        k22 = _bin(_bin(g_ri, b, nl.multiply), _bin(g_ii, d, nl.multiply), nl.add)
        mr, mi = st[:, 0:1], st[:, 1:2]
        o_r = _bin(
            prm[:, 3:4], _bin(_bin(k11, mr, nl.multiply), _bin(k12, mi, nl.multiply), nl.add), nl.subtract
        )
        o_i = _bin(
            prm[:, 4:5], _bin(_bin(k21, mr, nl.multiply), _bin(k22, mi, nl.multiply), nl.add), nl.subtract
        )
        for f0, f in chunks:
            x, v = _load(xr, c0, p, f0, f), _load(xi, c0, p, f0, f)
            nisa.dma_copy(dst=yr[c0 : c0 + p, f0 : f0 + f], src=_lin(x, k11, v, k12, o_r, p, f))
            nisa.dma_copy(dst=yi[c0 : c0 + p, f0 : f0 + f], src=_lin(x, k21, v, k22, o_i, p, f))
        nisa.dma_copy(dst=stats[c0 : c0 + p, 0:5], src=st)
    return yr, yi, stats


def batchnorm_backward_kernel(
    xr: Any, xi: Any, gr: Any, gi: Any, params: Any, stats: Any, eps: float = 1e-5, batch_stats: bool = True
) -> Any:
    """``(grad_xr, grad_xi, grad_params)`` for output gradients ``gr, gi``."""
    channels, m = xr.shape
    f32 = nl.float32
    gxr = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    gxi = nl.ndarray((channels, m), dtype=f32, buffer=nl.shared_hbm)
    gparams = nl.ndarray((channels, 5), dtype=f32, buffer=nl.shared_hbm)
    chunks = spans(m, _TILE_F)
    for c0, p in spans(channels, 128):
        prm = _load(params, c0, p, 0, 5)
        st = _load(stats, c0, p, 0, 5)
        a, d, b = _whitening(st, eps, p)
        # accumulators: γ_rr, γ_ii, γ_ri, β_r, β_i grads; G11, G12, G21, G22; Σh_r, Σh_i, Σc_r, Σc_i
        acc = []
        for _ in range(13):
            acc.append(_zeros(p))

        for f0, f in chunks:
            cr, ci, g_r, g_i, hr, hi = _chunk(xr, xi, gr, gi, (c0, p, f0, f), st, prm)
            wr = _lin(cr, a, ci, b, None, p, f)  # ŷ = W c
            wi = _lin(cr, b, ci, d, None, p, f)
            _accumulate_product(acc[0], g_r, wr, p, f)
            _accumulate_product(acc[1], g_i, wi, p, f)
            _accumulate_product(acc[2], g_r, wi, p, f)
            _accumulate_product(acc[2], g_i, wr, p, f)
            _accumulate(acc[3], g_r, p)
            _accumulate(acc[4], g_i, p)
            if batch_stats:
                for j, (u, v) in enumerate(((hr, cr), (hr, ci), (hi, cr), (hi, ci))):
                    _accumulate_product(acc[5 + j], u, v, p, f)
                for j, u in enumerate((hr, hi, cr, ci)):
                    _accumulate(acc[9 + j], u, p)
        gp = _tile((p, 5))
        for j in range(5):
            nisa.tensor_copy(dst=gp[:, j : j + 1], src=acc[j])
        nisa.dma_copy(dst=gparams[c0 : c0 + p, 0:5], src=gp)
        if batch_stats:
            # Sylvester solve W Z + Z W = G + Gᵀ, then S = -W² Z W², all per channel
            r11, r22 = _affine(acc[5], 2.0), _affine(acc[8], 2.0)
            r12 = _bin(acc[6], acc[7], nl.add)
            inv_a, inv_d = _tile((p, 1)), _tile((p, 1))
            nisa.reciprocal(dst=inv_a, data=a)
            nisa.reciprocal(dst=inv_d, data=d)
            bb = _bin(b, b, nl.multiply)
            den = _bin(
                _bin(a, d, nl.add),
                _bin(_bin(bb, inv_a, nl.multiply), _bin(bb, inv_d, nl.multiply), nl.add),
                nl.subtract,
            )
            half_b = _affine(b, 0.5)
            num = _bin(
                r12,
                _bin(
                    _bin(_bin(half_b, r11, nl.multiply), inv_a, nl.multiply),
                    _bin(_bin(half_b, r22, nl.multiply), inv_d, nl.multiply),
                    nl.add,
                ),
                nl.subtract,
            )
            inv_den = _tile((p, 1))
            nisa.reciprocal(dst=inv_den, data=den)
            z12 = _bin(num, inv_den, nl.multiply)
            two_b_z = _bin(_affine(b, 2.0), z12, nl.multiply)
            z11 = _bin(_affine(_bin(r11, two_b_z, nl.subtract), 0.5), inv_a, nl.multiply)
            z22 = _bin(_affine(_bin(r22, two_b_z, nl.subtract), 0.5), inv_d, nl.multiply)
            p11 = _bin(_bin(a, a, nl.multiply), bb, nl.add)
            p12 = _bin(b, _bin(a, d, nl.add), nl.multiply)
            p22 = _bin(bb, _bin(d, d, nl.multiply), nl.add)
            q11 = _bin(_bin(z11, p11, nl.multiply), _bin(z12, p12, nl.multiply), nl.add)
            q12 = _bin(_bin(z11, p12, nl.multiply), _bin(z12, p22, nl.multiply), nl.add)
            q21 = _bin(_bin(z12, p11, nl.multiply), _bin(z22, p12, nl.multiply), nl.add)
            q22 = _bin(_bin(z12, p12, nl.multiply), _bin(z22, p22, nl.multiply), nl.add)
            # S / M (negated): s11, s12, s22
            s11 = _affine(_bin(_bin(p11, q11, nl.multiply), _bin(p12, q21, nl.multiply), nl.add), -1.0 / m)
            s12 = _affine(_bin(_bin(p11, q12, nl.multiply), _bin(p12, q22, nl.multiply), nl.add), -1.0 / m)
            s22 = _affine(_bin(_bin(p12, q12, nl.multiply), _bin(p22, q22, nl.multiply), nl.add), -1.0 / m)
            # mean of ∂ℓ/∂c: (W Σh + S Σc / M) / M
            sh_r, sh_i, sc_r, sc_i = acc[9], acc[10], acc[11], acc[12]
            mean_r = _affine(
                _bin(
                    _bin(_bin(a, sh_r, nl.multiply), _bin(b, sh_i, nl.multiply), nl.add),
                    _bin(_bin(s11, sc_r, nl.multiply), _bin(s12, sc_i, nl.multiply), nl.add),
                    nl.add,
                ),
                1.0 / m,
            )
            mean_i = _affine(
                _bin(
                    _bin(_bin(b, sh_r, nl.multiply), _bin(d, sh_i, nl.multiply), nl.add),
                    _bin(_bin(s12, sc_r, nl.multiply), _bin(s22, sc_i, nl.multiply), nl.add),
                    nl.add,
                ),
                1.0 / m,
            )
            neg_mean_r, neg_mean_i = _affine(mean_r, -1.0), _affine(mean_i, -1.0)
        for f0, f in chunks:
            cr, ci, g_r, g_i, hr, hi = _chunk(xr, xi, gr, gi, (c0, p, f0, f), st, prm)
            if batch_stats:
                out_r = _lin(cr, s11, ci, s12, neg_mean_r, p, f)
                out_i = _lin(cr, s12, ci, s22, neg_mean_i, p, f)
                for out, (ka, kb) in ((out_r, (a, b)), (out_i, (b, d))):
                    t = _tile((p, f))
                    nisa.scalar_tensor_tensor(
                        dst=t, data=hr, op0=nl.multiply, operand0=ka, op1=nl.add, operand1=out
                    )
                    nisa.scalar_tensor_tensor(
                        dst=out, data=hi, op0=nl.multiply, operand0=kb, op1=nl.add, operand1=t
                    )
            else:
                out_r = _lin(hr, a, hi, b, None, p, f)
                out_i = _lin(hr, b, hi, d, None, p, f)
            nisa.dma_copy(dst=gxr[c0 : c0 + p, f0 : f0 + f], src=out_r)
            nisa.dma_copy(dst=gxi[c0 : c0 + p, f0 : f0 + f], src=out_i)
    return gxr, gxi, gparams
