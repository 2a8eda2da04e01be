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
2. for every chunk and every slice of at most 512 columns (nki.isa.nc_matmul, NKI 0.3.0: moving free
   size <= 512, one PSUM bank of fp32), the complex product with the chunk's twiddled block-diagonal
   DFT on the Tensor Engine: four real matmuls accumulating in PSUM (``Re = Wr x_r + (-Wi) x_i``,
   ``Im = Wi x_r + Wr x_i``), or with ``gauss=True`` three (``t1 = Wr (x_r + x_i)``,
   ``t2 = (Wr + Wi) x_i``, ``t3 = (Wi - Wr) x_r``; ``Re = t1 - t2``, ``Im = t1 + t3``) at the price
   of one GpSimd add and two Vector Engine combines;
3. PSUM is evicted to SBUF (AWS NKI 0.3.0 Update Guide: DMA cannot read PSUM) on the Scalar and Vector
   engines (:func:`trncore.kernels.evict`), with ``scale`` applied on the last stage, and one DMA per
   plane writes the stage output in autosorted order to an HBM scratch (or to the result after the last
   stage).

Optional pointwise tables (used by Bluestein's algorithm): ``pre`` multiplies the input (index
``i < n``) before the first stage, ``post`` multiplies the output after the last stage.
"""

from __future__ import annotations

from typing import Any

from trncore.kernels import evict
from trncore.lang import nisa, nl

__all__ = ["fft_onchip3_kernel", "fft_onchip_kernel", "fft_stages_kernel"]

#: The oldest NKI release these kernels run on (checked by trncore.sim.versions).
__nki_requires__ = "0.3.0"

_MOVING_MAX = 512  # nc_matmul moving free size, v2/v3 (AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0))


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


def _pointwise_multiply_split(dr: Any, di: Any, tr: Any, ti: Any, shape: tuple[int, ...]) -> None:
    """``d <- d * t`` as :func:`_pointwise_multiply`, the products on GpSimd and the sums on the
    Vector Engine (the two engines share the work)."""
    f32 = nl.float32
    a = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    b = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    c = nl.ndarray(shape, dtype=f32, buffer=nl.sbuf)
    gpsimd = nisa.gpsimd_engine
    nisa.tensor_tensor(dst=a, data1=dr, data2=tr, op=nl.multiply, engine=gpsimd)
    nisa.tensor_tensor(dst=b, data1=di, data2=ti, op=nl.multiply)
    nisa.tensor_tensor(dst=c, data1=dr, data2=ti, op=nl.multiply, engine=gpsimd)
    nisa.tensor_tensor(dst=dr, data1=a, data2=b, op=nl.subtract)
    nisa.tensor_tensor(dst=a, data1=di, data2=tr, op=nl.multiply, engine=gpsimd)
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
    # (autosort), which on-chip engines cannot do in general (AWS NKI Access Patterns deep dive (NKI
    # 0.3.0): partition access is contiguous).
    scratch = []
    for _ in range(min(2, last)):
        pair_r = nl.ndarray((batch, n), dtype=f32, buffer=nl.hbm)
        pair_i = nl.ndarray((batch, n), dtype=f32, buffer=nl.hbm)
        scratch.append((pair_r, pair_i))
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
            extra = []
            for _ in range(2 if gauss else 1):
                extra.append(nl.ndarray((parts, cg * parts), dtype=f32, buffer=nl.sbuf))
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
                # SBUF/PSUM (AWS NKI Access Patterns deep dive (NKI 0.3.0)) and no limit for DMA. Should
                # the compiler cap DMA patterns, split this copy over the gk and cg dims (more DMAs,
                # same bytes).
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
                    view = [[cols, parts], [rest, bc], [1, rest]]
                    views = [data[0].ap(view), data[1].ap(view)]
                    _pointwise_multiply(views[0], views[1], pre[0], pre[1], (parts, bc, rest))
                summed = None
                if gauss:
                    summed = nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf)
                    nisa.tensor_tensor(
                        dst=summed, data1=data[0], data2=data[1], op=nl.add, engine=nisa.gpsimd_engine
                    )
                out = [
                    nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf),
                    nl.ndarray((parts, cg * cols), dtype=f32, buffer=nl.sbuf),
                ]
                for c in range(cg):
                    stat = []
                    for t in tab:
                        stat.append(t.ap([[cg * parts, parts], [1, parts]], offset=c * parts))
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
                    view = [[cg * cols, parts], [cols, cg], [1, bc]]
                    views = [out[0].ap(view), out[1].ap(view)]
                    _pointwise_multiply(views[0], views[1], post[0], post[1], (parts, cg, bc))
                # partitions (kl, bh, j); free (chunk, batch row, q); element j L rest + k rest + q
                out_pattern = [[rest, gk], [bc * n, gb], [L * rest, R], [gk * rest, cg], [n, bc], [1, rest]]
                out_offset = b0 * n + c0 * gk * rest
                for plane, tile in zip(dst, out):
                    nisa.dma_copy(dst=plane.ap(out_pattern, offset=out_offset), src=tile)
        src = dst
    return yr, yi


def fft_onchip_kernel(
    xr: Any,
    xi: Any,
    mr: Any,
    mi: Any,
    fr: Any,
    fi: Any,
    twr: Any,
    twi: Any,
    post_r: Any = None,
    post_i: Any = None,
    pre_r: Any = None,
    pre_i: Any = None,
    n1: int = 1,
    n2: int = 1,
    group: int = 1,
    batch_tile: int = 1,
    twiddle_data: bool = False,
    scale: float = 1.0,
) -> Any:
    """Forward DFT (times ``scale``) of each row of ``xr + i xi`` (``(B, n)``, ``n = n1 n2``), both
    stages on chip; returns ``(yr, yi)``.

    With ``j = n2 j1 + j2`` and ``k = k1 + n1 k2``:
    ``X[k] = sum_j2 F_n2[k2, j2] w_n^{j2 k1} sum_j1 F_n1[k1, j1] x[j]``.

    * Stage 1 (transposing): ``group`` rows of ``x`` viewed as ``(row, j1) x j2`` are the
      *stationary* and the block-diagonal ``F_n1`` (``mr, mi``: ``(group n1, group n1)``) the
      moving matrix, so the Tensor Engine returns ``Z[j2, (row, k1)]`` with ``j2`` on the
      partitions — the layout stage 2 contracts over, with no transpose and no HBM round trip.
      Complex products: ``(Xr + Xi)^T Fr``, ``Xr^T (Fi - Fr)``, ``Xi^T (Fr + Fi)`` (three matmuls).
    * Stage 2 (per ``k1``): stationary ``F_n2[k2, j2] w_n^{j2 k1}`` built on chip from ``F_n2``
      (``fr, fi``: ``(n2, n2)``) and the twiddle column ``w_n^{j2 k1}`` (``twr, twi``:
      ``(n2, n1)``) by per-partition scalings (ScalarE, VectorE, GpSimd) — only ``n`` twiddles
      travel from HBM, not ``n1`` whole stationaries; moving: the ``Z`` columns of that ``k1``.
      With ``twiddle_data`` the twiddles multiply ``Z`` instead (one element-wise complex product
      over the tile, split between GpSimd and the Vector Engine) and the one stationary ``F_n2``
      serves every ``k1``: cheaper when a tile has few rows, since the ``n1`` stationaries are
      rebuilt for every tile.

    One DMA per plane loads a batch tile and one writes its result (``k = k1 + n1 k2`` as the
    access pattern); the intermediate ``Z`` never leaves SBUF. Optional ``pre`` multiplies the input
    before stage 1 and ``post`` the output after stage 2 (Bluestein's tables, length ``n``).
    ``batch_tile`` divides the batch and is a multiple of ``group``; ``group * n1 <= 128``,
    ``n2 <= 128``, ``batch_tile <= 512``.
    """
    f32 = nl.float32
    batch, n = xr.shape
    yr = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    yi = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    parts = group * n1  # stage-1 contraction rows: (row in group, j1)
    cols = group * n1  # stage-1 output columns: (row in group, k1)
    groups = batch_tile // group
    # Constant tables, loaded once: stage-1 moving planes (Fr, Fi - Fr, Fr + Fi), F_n2, twiddles.
    m_r = nl.ndarray((parts, cols), dtype=f32, buffer=nl.sbuf)
    m_i = nl.ndarray((parts, cols), dtype=f32, buffer=nl.sbuf)
    nisa.dma_copy(dst=m_r, src=mr)
    nisa.dma_copy(dst=m_i, src=mi)
    m_d = nl.ndarray((parts, cols), dtype=f32, buffer=nl.sbuf)
    m_s = nl.ndarray((parts, cols), dtype=f32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=m_d, data1=m_i, data2=m_r, op=nl.subtract)
    nisa.tensor_tensor(dst=m_s, data1=m_r, data2=m_i, op=nl.add, engine=nisa.gpsimd_engine)
    f_r = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
    f_i = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
    nisa.dma_copy(dst=f_r, src=fr)
    nisa.dma_copy(dst=f_i, src=fi)
    t_r = nl.ndarray((n2, n1), dtype=f32, buffer=nl.sbuf)
    t_i = nl.ndarray((n2, n1), dtype=f32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t_r, src=twr)
    nisa.dma_copy(dst=t_i, src=twi)
    t_n = nl.ndarray((n2, n1), dtype=f32, buffer=nl.sbuf)
    nisa.activation(dst=t_n, op=nl.copy, data=t_i, scale=-1.0)
    pre = None
    if pre_r is not None:  # pre[n2 j1 + j2] on partitions (row, j1), free j2
        pre = []
        for plane in (pre_r, pre_i):
            tile = nl.ndarray((parts, n2), dtype=f32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=plane.ap([[0, group], [n2, n1], [1, n2]], offset=0))
            pre.append(tile.ap([[n2, parts], [0, groups], [1, n2]]))
    post = None
    if post_r is not None:  # post[k1 + n1 k2] on partitions k2, free k1 (broadcast over the rows)
        post = []
        for plane in (post_r, post_i):
            tile = nl.ndarray((n2, n1), dtype=f32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=plane.ap([[n1, n2], [1, n1]], offset=0))
            if twiddle_data:  # output columns (b, k1)
                post.append(tile.ap([[n1, n2], [0, batch_tile], [1, n1]]))
            else:  # output columns (k1, b)
                post.append(tile.ap([[n1, n2], [1, n1], [0, batch_tile]]))
    if twiddle_data:  # the one stage-2 stationary and its Gauss planes
        f_s = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
        f_d = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=f_s, data1=f_r, data2=f_i, op=nl.add, engine=nisa.gpsimd_engine)
        nisa.tensor_tensor(dst=f_d, data1=f_i, data2=f_r, op=nl.subtract)
    for b0 in range(0, batch, batch_tile):
        # x[b0 + g group + r, n2 j1 + j2] -> partitions (r, j1), free (g, j2): one DMA per plane
        x_pattern = [[n, group], [n2, n1], [group * n, groups], [1, n2]]
        x = []
        for plane in (xr, xi):
            tile = nl.ndarray((parts, groups * n2), dtype=f32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=plane.ap(x_pattern, offset=b0 * n))
            x.append(tile)
        if pre is not None:
            view = [[groups * n2, parts], [n2, groups], [1, n2]]
            views = [x[0].ap(view), x[1].ap(view)]
            _pointwise_multiply_split(views[0], views[1], pre[0], pre[1], (parts, groups, n2))
        x_s = nl.ndarray((parts, groups * n2), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x_s, data1=x[0], data2=x[1], op=nl.add, engine=nisa.gpsimd_engine)
        # Stage 1: Z[j2, (b, k1)] for the whole tile (b = g group + r), in SBUF
        z_r = nl.ndarray((n2, batch_tile * n1), dtype=f32, buffer=nl.sbuf)
        z_i = nl.ndarray((n2, batch_tile * n1), dtype=f32, buffer=nl.sbuf)
        for g in range(groups):
            part = (parts, groups * n2, g * n2, n2)
            stat = [_columns(x_s, part), _columns(x[0], part), _columns(x[1], part)]
            k1 = nl.ndarray((n2, cols), dtype=f32, buffer=nl.psum)
            k2 = nl.ndarray((n2, cols), dtype=f32, buffer=nl.psum)
            k3 = nl.ndarray((n2, cols), dtype=f32, buffer=nl.psum)
            nisa.nc_matmul(dst=k1, stationary=stat[0], moving=m_r, accumulate=False)
            nisa.nc_matmul(dst=k2, stationary=stat[1], moving=m_d, accumulate=False)
            nisa.nc_matmul(dst=k3, stationary=stat[2], moving=m_s, accumulate=False)
            common = nl.ndarray((n2, cols), dtype=f32, buffer=nl.sbuf)
            evict(common, k1, on_scalar=True)
            at = (n2, batch_tile * n1, g * cols, cols)
            nisa.scalar_tensor_tensor(
                dst=_columns(z_r, at), data=k3, op0=nl.multiply, operand0=-1.0, op1=nl.add, operand1=common
            )
            nisa.scalar_tensor_tensor(
                dst=_columns(z_i, at), data=k2, op0=nl.multiply, operand0=1.0, op1=nl.add, operand1=common
            )
        if twiddle_data:  # Z[j2, (b, k1)] *= w_n^{j2 k1}
            shape = (n2, batch_tile, n1)
            z_view = [[batch_tile * n1, n2], [n1, batch_tile], [1, n1]]
            t_view = [[n1, n2], [0, batch_tile], [1, n1]]
            zv = [z_r.ap(z_view), z_i.ap(z_view)]
            tv = [t_r.ap(t_view), t_i.ap(t_view)]
            _pointwise_multiply_split(zv[0], zv[1], tv[0], tv[1], shape)
        z_s = nl.ndarray((n2, batch_tile * n1), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z_s, data1=z_r, data2=z_i, op=nl.add, engine=nisa.gpsimd_engine)
        total = n1 * batch_tile
        out = [
            nl.ndarray((n2, total), dtype=f32, buffer=nl.sbuf),
            nl.ndarray((n2, total), dtype=f32, buffer=nl.sbuf),
        ]
        if twiddle_data:
            # Stage 2 with the one stationary F_n2, 512 columns per pass: out[k2, (b, k1)]
            for c0 in range(0, total, _MOVING_MAX):
                at = (n2, total, c0, min(_MOVING_MAX, total - c0))
                _complex_pass(
                    _columns(out[0], at),
                    _columns(out[1], at),
                    _columns(z_r, at),
                    _columns(z_i, at),
                    _columns(z_s, at),
                    f_r,
                    f_s,
                    f_d,
                    n2,
                    at[3],
                    True,
                    scale,
                )
            out_view = [[total, n2], [n1, batch_tile], [1, n1]]
            y_pattern = [[n1, n2], [n, batch_tile], [1, n1]]  # y[b0 + b, k1 + n1 k2]
        else:
            # Stage 2, one k1 at a time: out[k2, (k1, b)]
            for c in range(n1):
                # W = F_n2 * w^{j2 c} row by row (j2 on the partitions): Wr = Fr tr - Fi ti,
                # Wi = Fr ti + Fi tr
                one = [[n1, n2], [1, 1]]
                col = [t_r.ap(one, offset=c), t_i.ap(one, offset=c), t_n.ap(one, offset=c)]
                a = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                b = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                nisa.activation(dst=a, op=nl.copy, data=f_r, scale=col[0])
                nisa.activation(dst=b, op=nl.copy, data=f_i, scale=col[0])
                w_r = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                w_i = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                for dst, data, factor, other in ((w_r, f_i, col[2], a), (w_i, f_r, col[1], b)):
                    nisa.scalar_tensor_tensor(
                        dst=dst, data=data, op0=nl.multiply, operand0=factor, op1=nl.add, operand1=other
                    )
                w_s = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                w_d = nl.ndarray((n2, n2), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=w_s, data1=w_r, data2=w_i, op=nl.add, engine=nisa.gpsimd_engine)
                nisa.tensor_tensor(dst=w_d, data1=w_i, data2=w_r, op=nl.subtract, engine=nisa.gpsimd_engine)
                cols_c = [[total, n2], [n1, batch_tile]]
                moving = [z_r.ap(cols_c, offset=c), z_i.ap(cols_c, offset=c), z_s.ap(cols_c, offset=c)]
                at = (n2, total, c * batch_tile, batch_tile)
                _complex_pass(
                    _columns(out[0], at),
                    _columns(out[1], at),
                    moving[0],
                    moving[1],
                    moving[2],
                    w_r,
                    w_s,
                    w_d,
                    n2,
                    batch_tile,
                    True,
                    scale,
                )
            out_view = [[total, n2], [batch_tile, n1], [1, batch_tile]]
            y_pattern = [[n1, n2], [1, n1], [n, batch_tile]]  # y[b0 + b, k1 + n1 k2]
        if post is not None:
            views = [out[0].ap(out_view), out[1].ap(out_view)]
            shape = (n2, batch_tile, n1) if twiddle_data else (n2, n1, batch_tile)
            _pointwise_multiply_split(views[0], views[1], post[0], post[1], shape)
        for plane, tile in zip((yr, yi), out):
            nisa.dma_copy(dst=plane.ap(y_pattern, offset=b0 * n), src=tile)
    return yr, yi


def _transposing_pass(
    dst_r: Any, dst_i: Any, stat: list[Any], moving: list[Any], rows: int, cols: int
) -> None:
    """``dst = stat^T M`` for complex ``stat`` (stationary planes ``(S_r + S_i, S_r, S_i)``) and the
    complex constant ``M`` (moving planes ``(M_r, M_i - M_r, M_r + M_i)``), three matmuls:
    ``Re = k1 - k3``, ``Im = k1 + k2`` with ``k1 = (S_r + S_i)^T M_r``, ``k2 = S_r^T (M_i - M_r)``,
    ``k3 = S_i^T (M_r + M_i)``; ``rows x cols`` is the output (the stationary's free size by the
    moving's)."""
    f32 = nl.float32
    k1 = nl.ndarray((rows, cols), dtype=f32, buffer=nl.psum)
    k2 = nl.ndarray((rows, cols), dtype=f32, buffer=nl.psum)
    k3 = nl.ndarray((rows, cols), dtype=f32, buffer=nl.psum)
    nisa.nc_matmul(dst=k1, stationary=stat[0], moving=moving[0], accumulate=False)
    nisa.nc_matmul(dst=k2, stationary=stat[1], moving=moving[1], accumulate=False)
    nisa.nc_matmul(dst=k3, stationary=stat[2], moving=moving[2], accumulate=False)
    common = nl.ndarray((rows, cols), dtype=f32, buffer=nl.sbuf)
    evict(common, k1, on_scalar=True)
    nisa.scalar_tensor_tensor(dst=dst_r, data=k3, op0=nl.multiply, operand0=-1.0, op1=nl.add, operand1=common)
    nisa.scalar_tensor_tensor(dst=dst_i, data=k2, op0=nl.multiply, operand0=1.0, op1=nl.add, operand1=common)


def _gauss_moving(tr: Any, ti: Any, shape: tuple[int, int]) -> list[Any]:
    """SBUF planes ``(M_r, M_i - M_r, M_r + M_i)`` of a complex constant loaded from HBM."""
    f32 = nl.float32
    planes = []
    for _ in range(4):
        planes.append(nl.ndarray(shape, dtype=f32, buffer=nl.sbuf))
    nisa.dma_copy(dst=planes[0], src=tr)
    nisa.dma_copy(dst=planes[3], src=ti)
    nisa.tensor_tensor(dst=planes[1], data1=planes[3], data2=planes[0], op=nl.subtract)
    nisa.tensor_tensor(dst=planes[2], data1=planes[0], data2=planes[3], op=nl.add, engine=nisa.gpsimd_engine)
    return planes[:3]


def fft_onchip3_kernel(
    xr: Any,
    xi: Any,
    mr: Any,
    mi: Any,
    f2r: Any,
    f2i: Any,
    f3r: Any,
    f3i: Any,
    tar: Any,
    tai: Any,
    tbr: Any,
    tbi: Any,
    n1: int = 1,
    n2: int = 1,
    n3: int = 1,
    group: int = 1,
    batch_tile: int = 1,
    scale: float = 1.0,
) -> Any:
    """Forward DFT (times ``scale``) of each row of ``xr + i xi``, ``n = n1 n2 n3``: three stages,
    every intermediate in SBUF; returns ``(yr, yi)``.

    With ``j = n2 n3 j1 + n3 j2 + j3`` and ``k = k1 + n1 k2 + n1 n2 k3``:

    * stage 1 (transposing, as in :func:`fft_onchip_kernel`): the input is the stationary with
      ``(j3 mod group, j1)`` on the partitions (``group`` values of ``j3`` share a pass through the
      block-diagonal ``F_n1``: ``mr, mi``) and ``j2`` free, so the output ``Z1[j2, (b, j3, k1)]``
      has ``j2`` on the partitions; then ``Z1 *= w_n^{(n3 j2 + j3) k1}`` (``tar, tai``:
      ``(n2, n3 n1)``);
    * stage 2 (transposing again): for each ``(b, k1)`` the ``Z1`` block ``j2 x j3`` is the
      stationary and ``F_n2`` the moving matrix, so ``Z2[j3, (b, k1, k2)]`` comes out with ``j3``
      on the partitions; then ``Z2 *= w_{n2 n3}^{j3 k2}`` (``tbr, tbi``: ``(n3, n2)``);
    * stage 3: the one stationary ``F_n3`` against ``Z2``, 512 columns per pass, gives
      ``out[k3, (b, k1, k2)]``, written with one DMA per plane.
    """
    f32 = nl.float32
    batch, n = xr.shape
    yr = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    yi = nl.ndarray((batch, n), dtype=f32, buffer=nl.shared_hbm)
    n23 = n2 * n3
    parts = group * n1  # stage-1 contraction rows: (j3 mod group, j1)
    hi = n3 // group  # j3 = group * j3hi + j3lo
    m = _gauss_moving(mr, mi, (parts, parts))
    f2 = _gauss_moving(f2r, f2i, (n2, n2))
    f3r_t = nl.ndarray((n3, n3), dtype=f32, buffer=nl.sbuf)
    f3i_t = nl.ndarray((n3, n3), dtype=f32, buffer=nl.sbuf)
    nisa.dma_copy(dst=f3r_t, src=f3r)
    nisa.dma_copy(dst=f3i_t, src=f3i)
    f3s = nl.ndarray((n3, n3), dtype=f32, buffer=nl.sbuf)
    f3d = nl.ndarray((n3, n3), dtype=f32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=f3s, data1=f3r_t, data2=f3i_t, op=nl.add, engine=nisa.gpsimd_engine)
    nisa.tensor_tensor(dst=f3d, data1=f3i_t, data2=f3r_t, op=nl.subtract)
    ta = []
    for plane in (tar, tai):
        tile = nl.ndarray((n2, n3 * n1), dtype=f32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=plane)
        ta.append(tile.ap([[n3 * n1, n2], [0, batch_tile], [1, n3 * n1]]))
    tb = []
    for plane in (tbr, tbi):
        tile = nl.ndarray((n3, n2), dtype=f32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=plane)
        tb.append(tile.ap([[n2, n3], [0, batch_tile * n1], [1, n2]]))
    free_x = batch_tile * hi * n2
    cols = batch_tile * n3 * n1  # Z1 columns (b, j3, k1)
    total = batch_tile * n1 * n2  # Z2 and output columns (b, k1, k2)
    for b0 in range(0, batch, batch_tile):
        # x[b0 + b, n23 j1 + n3 j2 + group j3hi + j3lo] -> partitions (j3lo, j1), free (b, j3hi, j2)
        x_pattern = [[1, group], [n23, n1], [n, batch_tile], [group, hi], [n3, n2]]
        x = []
        for plane in (xr, xi):
            tile = nl.ndarray((parts, free_x), dtype=f32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=plane.ap(x_pattern, offset=b0 * n))
            x.append(tile)
        x_s = nl.ndarray((parts, free_x), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x_s, data1=x[0], data2=x[1], op=nl.add, engine=nisa.gpsimd_engine)
        # Stage 1: Z1[j2, (b, j3hi, j3lo, k1)] = sum_j1 x F_n1
        z1 = [
            nl.ndarray((n2, cols), dtype=f32, buffer=nl.sbuf),
            nl.ndarray((n2, cols), dtype=f32, buffer=nl.sbuf),
        ]
        for blk in range(batch_tile * hi):  # blk = b hi + j3hi
            part = (parts, free_x, blk * n2, n2)
            stat = [_columns(x_s, part), _columns(x[0], part), _columns(x[1], part)]
            at = (n2, cols, blk * parts, parts)
            _transposing_pass(_columns(z1[0], at), _columns(z1[1], at), stat, m, n2, parts)
        view = [[cols, n2], [n3 * n1, batch_tile], [1, n3 * n1]]
        views = [z1[0].ap(view), z1[1].ap(view)]
        _pointwise_multiply_split(views[0], views[1], ta[0], ta[1], (n2, batch_tile, n3 * n1))
        z1s = nl.ndarray((n2, cols), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z1s, data1=z1[0], data2=z1[1], op=nl.add, engine=nisa.gpsimd_engine)
        # Stage 2: Z2[j3, (b, k1, k2)] = sum_j2 Z1[j2, (b, j3, k1)] F_n2[j2, k2], one (b, k1) per pass
        z2 = [
            nl.ndarray((n3, total), dtype=f32, buffer=nl.sbuf),
            nl.ndarray((n3, total), dtype=f32, buffer=nl.sbuf),
        ]
        for b in range(batch_tile):
            for k1 in range(n1):
                block = [[cols, n2], [n1, n3]]
                at0 = b * n3 * n1 + k1
                stat = [z1s.ap(block, offset=at0), z1[0].ap(block, offset=at0), z1[1].ap(block, offset=at0)]
                at = (n3, total, (b * n1 + k1) * n2, n2)
                _transposing_pass(_columns(z2[0], at), _columns(z2[1], at), stat, f2, n3, n2)
        view = [[total, n3], [n2, batch_tile * n1], [1, n2]]
        views = [z2[0].ap(view), z2[1].ap(view)]
        _pointwise_multiply_split(views[0], views[1], tb[0], tb[1], (n3, batch_tile * n1, n2))
        z2s = nl.ndarray((n3, total), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z2s, data1=z2[0], data2=z2[1], op=nl.add, engine=nisa.gpsimd_engine)
        # Stage 3: out[k3, (b, k1, k2)] = sum_j3 F_n3[k3, j3] Z2[j3, (b, k1, k2)]
        out = [
            nl.ndarray((n3, total), dtype=f32, buffer=nl.sbuf),
            nl.ndarray((n3, total), dtype=f32, buffer=nl.sbuf),
        ]
        for c0 in range(0, total, _MOVING_MAX):
            at = (n3, total, c0, min(_MOVING_MAX, total - c0))
            _complex_pass(
                _columns(out[0], at),
                _columns(out[1], at),
                _columns(z2[0], at),
                _columns(z2[1], at),
                _columns(z2s, at),
                f3r_t,
                f3s,
                f3d,
                n3,
                at[3],
                True,
                scale,
            )
        # y[b0 + b, k1 + n1 k2 + n1 n2 k3] <- out[k3, (b n1 + k1) n2 + k2]
        y_pattern = [[n1 * n2, n3], [n, batch_tile], [1, n1], [n1, n2]]
        for plane, tile in zip((yr, yi), out):
            nisa.dma_copy(dst=plane.ap(y_pattern, offset=b0 * n), src=tile)
    return yr, yi
