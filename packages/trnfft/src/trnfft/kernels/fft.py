"""The FFT stage kernel: Stockham autosort stages on the Tensor Engine, twiddles fused.

``fft_stages_kernel(xr, xi, tr, ti, [post_r, post_i, [pre_r, pre_i]], stages=..., ...)`` returns
the unnormalised forward DFT (times ``scale``) of every row of the ``(B, n)`` float32 planes
``xr + i xi``. One kernel serves every algorithm of a plan: ``dft_gemm`` is one stage of radix
``n`` (the DFT as one complex GEMM), ``stockham`` and ``mixed_radix`` are several. The stage
geometry and the stationary tables come from :mod:`trnfft.kernels.geometry`.

Per stage, per group of stationaries and per batch tile:

1. one DMA per plane brings the stage's input into SBUF with ``(k, batch group, p)`` on the
   partitions and ``(chunk, batch, q)`` along the free dimension (a multi-dimensional access
   pattern on the HBM side; no per-row DMAs);
2. for every chunk and every slice of at most 512 columns (§3.1: moving free size <= 512, one PSUM
   bank of fp32), the complex product with the chunk's twiddled block-diagonal DFT on the Tensor
   Engine: four real matmuls accumulating in PSUM (``Re = Wr x_r + (-Wi) x_i``,
   ``Im = Wi x_r + Wr x_i``), or with ``gauss=True`` three (``t1 = Wr (x_r + x_i)``,
   ``t2 = (Wr + Wi) x_i``, ``t3 = (Wi - Wr) x_r``; ``Re = t1 - t2``, ``Im = t1 + t3``) at the price
   of one GpSimd add and two Vector Engine combines;
3. PSUM is evicted to SBUF (§3.3: DMA cannot read PSUM) on the Scalar and Vector engines
   (:func:`trncore.kernels.evict`), with
   ``scale`` applied on the last stage, and one DMA per plane writes the stage output in autosorted
   order to an HBM scratch (or to the result after the last stage).

Optional pointwise tables (used by Bluestein's algorithm): ``pre`` multiplies the input (index
``i < n``) before the first stage, ``post`` multiplies the output after the last stage.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import evict
from trncore.lang import nisa, nl

__all__ = ["fft_stages_kernel"]

_MOVING_MAX = 512  # nc_matmul moving free size, v2/v3 (§3.1)


def _pointwise_multiply(dr: Any, di: Any, tr: Any, ti: Any, shape: tuple[int, ...]) -> None:
    """``d <- d * t`` for complex planes given as equally shaped SBUF views (Vector Engine)."""
    f32 = nl.float32
    a = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    b = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    c = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=a, data1=dr, data2=tr, op=nl.multiply)
    nisa.tensor_tensor(dst=b, data1=di, data2=ti, op=nl.multiply)
    nisa.tensor_tensor(dst=c, data1=dr, data2=ti, op=nl.multiply)
    nisa.tensor_tensor(dst=dr, data1=a, data2=b, op=nl.subtract)
    nisa.tensor_tensor(dst=a, data1=di, data2=tr, op=nl.multiply)
    nisa.tensor_tensor(dst=di, data1=c, data2=a, op=nl.add)


def _columns(tile: Any, at: tuple[int, int, int, int]) -> Any:
    """Columns ``[start, start + width)`` of a 2-D SBUF tile as a view (``at``: parts, free, start, width)."""
    parts, free, start, width = at
    return tile.ap([[free, parts], [1, width]], offset=start)


def _complex_pass(
    out_r: Any,
    out_i: Any,
    in_r: Any,
    in_i: Any,
    in_s: Any,
    t0: Any,
    t1: Any,
    t2: Any,
    parts: int,
    width: int,
    gauss: bool,
    scale: float,
) -> None:
    """One Tensor Engine pass: ``out = W x`` for ``width`` columns (views of SBUF tiles)."""
    f32 = nl.float32
    if gauss:
        s1 = nl.ndarray((parts, width), dtype=f32, buffer=nl.psum)
        s2 = nl.ndarray((parts, width), dtype=f32, buffer=nl.psum)
        s3 = nl.ndarray((parts, width), dtype=f32, buffer=nl.psum)
        nisa.nc_matmul(dst=s1, stationary=t0, moving=in_s, accumulate=False)
        nisa.nc_matmul(dst=s2, stationary=t1, moving=in_i, accumulate=False)
        nisa.nc_matmul(dst=s3, stationary=t2, moving=in_r, accumulate=False)
        common = nl.ndarray((parts, width), dtype=f32, buffer=nl.sbuf)
        evict(common, s1, scale=scale, on_scalar=True)
        nisa.scalar_tensor_tensor(
            dst=out_r, data=s2, op0=nl.multiply, operand0=-scale, op1=nl.add, operand1=common
        )
        nisa.scalar_tensor_tensor(
            dst=out_i, data=s3, op0=nl.multiply, operand0=scale, op1=nl.add, operand1=common
        )
        return
    pr = nl.ndarray((parts, width), dtype=f32, buffer=nl.psum)
    pi = nl.ndarray((parts, width), dtype=f32, buffer=nl.psum)
    nisa.nc_matmul(dst=pr, stationary=t0, moving=in_r, accumulate=False)
    nisa.nc_matmul(dst=pr, stationary=t2, moving=in_i, accumulate=True)
    nisa.nc_matmul(dst=pi, stationary=t1, moving=in_r, accumulate=False)
    nisa.nc_matmul(dst=pi, stationary=t0, moving=in_i, accumulate=True)
    evict(out_r, pr, scale=scale, on_scalar=True)
    evict(out_i, pi, scale=scale)


def fft_stages_kernel(
    xr: Any,
    xi: Any,
    tr: Any,
    ti: Any,
    post_r: Any = None,
    post_i: Any = None,
    pre_r: Any = None,
    pre_i: Any = None,
    stages: tuple[tuple[int, ...], ...] = (),
    batch_tile: int = 1,
    gauss: bool = False,
    scale: float = 1.0,
) -> Any:
    """Forward DFT (times ``scale``) of each row of ``xr + i xi``; returns ``(yr, yi)``.

    ``tr, ti`` are the flat stationary planes of :func:`trnfft.kernels.geometry.build_stage_tables`,
    ``stages`` the geometry's ``stage_params()``; the batch (rows) must be a
    multiple of ``batch_tile``, itself a multiple of every stage's batch groups.
    """
    f32 = nl.float32
    batch, n = xr.shape
    yr = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    yi = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    last = len(stages) - 1
    # Stage outputs ping-pong between two HBM scratch pairs: a stage permutes across partitions
    # (autosort), which on-chip engines cannot do in general (§2.5: partition access is contiguous).
    scratch = [
        (nl.ndarray((batch, n), dtype=f32, buffer=nl.hbm), nl.ndarray((batch, n), dtype=f32, buffer=nl.hbm))
        for _ in range(min(2, last))
    ]
    src = (xr, xi)
    for s, (L, R, rest, gk, gb, group, offset) in enumerate(stages):
        dst = (yr, yi) if s == last else scratch[s % 2]
        parts = gk * gb * R
        chunks = L // gk
        bc = batch_tile // gb  # batch rows per group within one tile
        cols = bc * rest  # moving columns of one chunk
        stage_scale = scale if s == last else 1.0
        for c0 in range(0, chunks, group):
            cg = min(group, chunks - c0)
            wr = nl.ndarray((parts, cg * parts), dtype=f32, buffer=nl.sbuf)
            wi = nl.ndarray((parts, cg * parts), dtype=f32, buffer=nl.sbuf)
            for tile, plane in ((wr, tr), (wi, ti)):
                nisa.dma_copy(
                    dst=tile,
                    src=plane.ap(
                        [[parts, parts], [parts * parts, cg], [1, parts]], offset=offset + c0 * parts * parts
                    ),
                )
            # The third stationary is derived on chip (a third of the table traffic saved):
            # -Wi for four-multiplication products; Wr + Wi and Wi - Wr for Gauss's three.
            extra = [
                nl.ndarray((parts, cg * parts), dtype=f32, buffer=nl.sbuf) for _ in range(2 if gauss else 1)
            ]
            if gauss:
                nisa.tensor_tensor(dst=extra[0], data1=wr, data2=wi, op=nl.add, engine=nisa.gpsimd_engine)
                nisa.tensor_tensor(dst=extra[1], data1=wi, data2=wr, op=nl.subtract)
                tab = [wr, extra[0], extra[1]]
            else:
                nisa.activation(dst=extra[0], op=nl.copy, data=wi, scale=-1.0)
                tab = [wr, wi, extra[0]]
            for b0 in range(0, batch, batch_tile):
                # partitions (kl, bh, p); free (chunk, batch row, q). [INF] The HBM side is a 6-D
                # access pattern; the reference documents up to 4-D patterns per partition for
                # SBUF/PSUM (§2.5) and no limit for DMA. Should the compiler cap DMA patterns, split
                # this copy over the gk and cg dims (more DMAs, same bytes).
                in_pattern = [
                    [R * rest, gk],
                    [bc * n, gb],
                    [rest, R],
                    [gk * R * rest, cg],
                    [n, bc],
                    [1, rest],
                ]
                in_offset = b0 * n + c0 * gk * R * rest
                data = []
                for plane in src:
                    tile = nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf)
                    nisa.dma_copy(dst=tile, src=plane.ap(in_pattern, offset=in_offset))
                    data.append(tile)
                if s == 0 and pre_r is not None:  # first stage: L = 1, chunk 0; index p rest + q
                    pre = []
                    for plane in (pre_r, pre_i):
                        tile = nl.ndarray((parts, rest), dtype=f32, buffer=nl.sbuf)
                        nisa.dma_copy(dst=tile, src=plane.ap([[0, gb], [rest, R], [1, rest]], offset=0))
                        pre.append(tile.ap([[rest, parts], [0, bc], [1, rest]]))
                    views = [d.ap([[cols, parts], [rest, bc], [1, rest]]) for d in data]
                    _pointwise_multiply(views[0], views[1], pre[0], pre[1], (parts, bc, rest))
                summed = None
                if gauss:
                    summed = nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf)
                    nisa.tensor_tensor(
                        dst=summed, data1=data[0], data2=data[1], op=nl.add, engine=nisa.gpsimd_engine
                    )
                out = [nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf) for _ in range(2)]
                for c in range(cg):
                    stat = [t.ap([[cg * parts, parts], [1, parts]], offset=c * parts) for t in tab]
                    for c_start in range(0, cols, _MOVING_MAX):
                        width = min(_MOVING_MAX, cols - c_start)
                        at = (parts, cg * cols, c * cols + c_start, width)
                        _complex_pass(
                            _columns(out[0], at),
                            _columns(out[1], at),
                            _columns(data[0], at),
                            _columns(data[1], at),
                            _columns(summed, at) if gauss else None,
                            stat[0],
                            stat[1],
                            stat[2],
                            parts,
                            width,
                            gauss,
                            stage_scale,
                        )
                if s == last and post_r is not None:  # rest = 1: output index j L + k
                    post = []
                    for plane in (post_r, post_i):
                        tile = nl.ndarray((parts, cg), dtype=f32, buffer=nl.sbuf)
                        nisa.dma_copy(
                            dst=tile,
                            src=plane.ap([[1, gk], [0, gb], [L, R], [gk, cg]], offset=c0 * gk),
                        )
                        post.append(tile.ap([[cg, parts], [1, cg], [0, bc]]))
                    views = [o.ap([[cg * cols, parts], [cols, cg], [1, bc]]) for o in out]
                    _pointwise_multiply(views[0], views[1], post[0], post[1], (parts, cg, bc))
                # partitions (kl, bh, j); free (chunk, batch row, q); element j L rest + k rest + q
                out_pattern = [[rest, gk], [bc * n, gb], [L * rest, R], [gk * rest, cg], [n, bc], [1, rest]]
                out_offset = b0 * n + c0 * gk * rest
                for plane, tile in zip(dst, out):
                    nisa.dma_copy(dst=plane.ap(out_pattern, offset=out_offset), src=tile)
        src = dst
    return yr, yi
