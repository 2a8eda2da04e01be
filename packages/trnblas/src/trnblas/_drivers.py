"""trnblas's drivers: the host side of each kernel-backed operation of :mod:`trnblas._ops`.

A driver checks dtypes (:mod:`trncore.precision`: float64 only with the float32 opt-in), pads
shapes into buckets (``TilePolicy``: fewer kernel keys; the kernels themselves handle any size),
launches the kernels of :mod:`trnblas.kernels` / :mod:`trncore.kernels` on the call's route and
applies the BLAS scalars on the host. Calls that need no kernel (an empty dimension, ``alpha = 0``)
are answered by the PyTorch reference (:mod:`trnblas._pytorch`) directly.

``symm``, ``trmm``, ``syr2k`` and the Hermitian routines reduce to the GEMM driver (a symmetrised or
masked matrix, or concatenated operands).
"""

from __future__ import annotations

import functools

import torch

from trnblas import _pytorch
from trnblas._flags import hermitian_from_triangle, op, symmetric_from_triangle, triangle, triangle_mask
from trnblas._pytorch import triangle_product
from trnblas.kernels import gemm_kernel, gemm_update_kernel, syrk_kernel
from trncore.dispatch import KernelContext, KernelUnsupported
from trncore.gemm_driver import POLICY as GEMM_POLICY
from trncore.gemm_driver import launch_gemm, padded_operand
from trncore.kernels.complex_gemm import complex_matmul_kernel, use_gauss
from trncore.padding import crop, pad_to
from trncore.precision import kernel_dtype as _trncore_kernel_dtype

#: The suite's GEMM padding policy (M, K to 128, N to 64), shared with trntensor's einsum.
POLICY = GEMM_POLICY
#: SBUF bytes per partition the SYRK kernel may hold ``op(a)ᵀ`` in (trn1 has 180224 usable).
SYRK_BUDGET = 144 * 1024


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def _finish(
    prod: torch.Tensor, alpha: float | complex, beta: float | complex, c: torch.Tensor | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``alpha * prod + beta * c`` (``c`` unread when ``beta`` is 0) in float32, then ``dtype``."""
    if alpha != 1:
        prod = prod.mul_(alpha)
    if c is not None and beta != 0:
        prod = prod.add_(c.to(prod.dtype), alpha=beta)
    return prod.to(dtype)


def kernel_dtype(
    dtype: torch.dtype, operation: str,
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16),
) -> torch.dtype:
    """trncore's dtype policy for trnblas (``TRNBLAS_ALLOW_FP32_COMPUTE``, the
    :func:`trncore.precision.fp32_compute` scope that ``allow_fp32=True`` opens)."""
    return _trncore_kernel_dtype(
        "trnblas", dtype, operation=operation, dtypes=dtypes
    )


def _padded_operand(t: torch.Tensor, trans: int, rows: str, cols: str) -> torch.Tensor:
    """Pad ``t`` (stored transposed when ``trans``) so op(t) has bucketed ``rows`` × ``cols``."""
    return padded_operand(t, bool(trans), rows, cols)


def _planes(t: torch.Tensor, trans: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Real and imaginary planes of ``t`` in ``dtype``; a conjugate transpose (``trans`` 2) is a
    plain transpose of the conjugate, so its imaginary plane is negated here."""
    re, im = t.real.to(dtype), t.imag.to(dtype)
    return re, (-im if trans == 2 else im)


def _complex_gemm(
    ctx: KernelContext, alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: complex,
    c: torch.Tensor | None, trans_a: int, trans_b: int, m: int, n: int,
) -> torch.Tensor:
    """Complex GEMM on the shared complex kernel: float32 planes (complex64; complex128 with the
    float32-compute opt-in), transposes read by the DMA, padding as for real GEMMs."""
    kd = kernel_dtype(a.real.dtype, "gemm", (torch.float32,))
    ta, tb = int(trans_a != 0), int(trans_b != 0)
    planes = [
        _padded_operand(p, ta, "M", "K").contiguous() for p in _planes(a, trans_a, kd)
    ] + [_padded_operand(p, tb, "K", "N").contiguous() for p in _planes(b, trans_b, kd)]
    cr, ci = ctx.launch(
        complex_matmul_kernel, *planes, trans_a=bool(ta), trans_b=bool(tb), gauss=use_gauss(m, n)
    )
    prod = torch.complex(crop(cr, (m, n)), crop(ci, (m, n)))
    return _finish(prod, alpha, beta, c, a.dtype)


def gemm_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float,
    c: torch.Tensor | None, trans_a: int, trans_b: int,
) -> torch.Tensor:
    m, k = op(a, trans_a).shape
    n = op(b, trans_b).shape[1]
    if 0 in (m, n, k) or alpha == 0:
        return _pytorch.gemm(alpha, a, b, beta, c, trans_a, trans_b)  # nothing to multiply
    if a.is_complex():
        return _complex_gemm(ctx, alpha, a, b, beta, c, trans_a, trans_b, m, n)
    kd = kernel_dtype(a.dtype, "gemm")
    prod = launch_gemm(ctx, a, b, trans_a=trans_a != 0, trans_b=trans_b != 0, dtype=kd)
    return _finish(prod, alpha, beta, c, a.dtype)


def _as_batch(t: torch.Tensor, batch: tuple[int, ...]) -> torch.Tensor:
    """``t`` as ``(B, r, c)``: its own batch if full, ``(1, r, c)`` if it broadcasts whole."""
    r, cols = t.shape[-2:]
    own = tuple(t.shape[:-2])
    if own == batch:
        return t.reshape(-1, r, cols)
    if all(d == 1 for d in own):
        return t.reshape(1, r, cols)  # the kernel broadcasts a batch of one without copying it
    return t.expand(*batch, r, cols).reshape(-1, r, cols)  # partial broadcast: materialised


def batched_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float,
    c: torch.Tensor | None, trans_a: int, trans_b: int,
) -> torch.Tensor:
    opa, opb = op(a, trans_a), op(b, trans_b)
    batch = tuple(torch.broadcast_shapes(opa.shape[:-2], opb.shape[:-2]))
    m, k, n = opa.shape[-2], opa.shape[-1], opb.shape[-1]
    if a.is_complex():
        raise KernelUnsupported("batched complex GEMM has no kernel yet (2-D complex GEMMs do)")
    if 0 in (m, n, k) or alpha == 0 or 0 in batch:
        return _pytorch.batched_gemm(alpha, a, b, beta, c, trans_a, trans_b)
    kd = kernel_dtype(a.dtype, "batched_gemm")
    a3, b3 = _as_batch(_cast(a, kd), batch), _as_batch(_cast(b, kd), batch)
    # ONE kernel launch for the whole batch (batch_chunk=None).
    prod = launch_gemm(ctx, a3, b3, trans_a=trans_a != 0, trans_b=trans_b != 0, dtype=kd)
    prod = prod.reshape(*batch, m, n)
    return _finish(prod, alpha, beta, c, a.dtype)


def syrk_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, beta: float, c: torch.Tensor | None,
    trans: int, lower: bool,
) -> torch.Tensor:
    n, k = op(a, trans).shape
    if 0 in (n, k) or alpha == 0:
        return _pytorch.syrk(alpha, a, beta, c, trans, lower)
    if a.is_complex():  # the complex GEMM kernel computes both triangles
        t = int(trans != 0)
        full = _complex_gemm(ctx, alpha, a, a, beta, c, t, 1 - t, n, n)
        return _keep(full, c, lower)
    kd = kernel_dtype(a.dtype, "syrk")
    t = int(trans != 0)
    ap = _padded_operand(_cast(a, kd), t, "M", "K")
    n_p, k_p = op(ap, t).shape
    # SBUF per partition: op(a)ᵀ (ceil(k/128) tiles of n) plus one float32 result row block.
    if (-(-k_p // 128) * kd.itemsize + 4) * n_p <= SYRK_BUDGET:
        full = ctx.launch(syrk_kernel, ap, trans=t, lower=int(lower))  # reads a once
    else:  # op(a)ᵀ does not fit SBUF: the GEMM kernel computes both triangles
        full = ctx.launch(gemm_kernel, ap, ap, trans_a=t, trans_b=1 - t)
    full = _finish(crop(full, (n, n)), alpha, beta, c, a.dtype)
    return _keep(full, c, lower)


def _keep(full: torch.Tensor, c: torch.Tensor | None, lower: bool) -> torch.Tensor:
    """``full`` in the selected triangle and ``c`` (or zero) in the other, as BLAS writes it."""
    mask = triangle_mask(full.shape[-1], lower, full.device)
    other = c if c is not None else torch.zeros((), dtype=full.dtype, device=full.device)
    return torch.where(mask, full, other)


#: TRSM panel height: one PE-array tile.
PANEL = 128


def trsm_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, right: bool, lower: bool,
    trans_a: int, unit_diagonal: bool,
) -> torch.Tensor:
    """Blocked forward substitution with every panel's products on the GEMM kernels.

    The system is first brought to ``L X = B`` with ``L`` lower triangular (a right-side solve is
    transposed, an upper one reversed). ``L`` is padded to whole 128-row panels (identity on the
    padded diagonal); the inverses of its diagonal blocks come from one batched host solve. Then
    per panel ``i``: ``X_i = inv(L_ii) R_i`` on :func:`gemm_kernel` and the update
    ``R ← R − L[:, i] X_i`` on :func:`gemm_update_kernel`, over **all** rows (the rows above the
    panel are zeros of ``L``), so every panel launches the same two kernel shapes: two kernel keys
    however many panels there are, at up to twice the minimal flops of the updates.
    """
    if a.is_complex():
        raise KernelUnsupported("complex TRSM has no Tensor Engine kernel yet")
    if alpha == 0 or b.numel() == 0:
        return _pytorch.trsm(alpha, a, b, right, lower, trans_a, unit_diagonal)
    kd = kernel_dtype(a.dtype, "trsm", (torch.float32,))
    tmat = op(triangle(a, lower, unit_diagonal), trans_a).to(kd)
    low = lower != bool(trans_a)
    rhs = b.to(kd)
    if right:  # X T = B  <=>  Tᵀ Xᵀ = Bᵀ
        tmat, rhs, low = tmat.mT, rhs.mT, not low
    if not low:  # reverse the order of unknowns: an upper system becomes a lower one
        tmat, rhs = tmat.flip(0, 1), rhs.flip(0)
    m, n = rhs.shape
    mp = -(-m // PANEL) * PANEL
    np_ = POLICY.padded("N", n)
    lp = pad_to(tmat, (mp, mp))
    if mp > m:
        lp[m:, m:] = torch.eye(mp - m, dtype=kd, device=lp.device)
    panels = mp // PANEL
    blocks = torch.stack([lp[i * PANEL : (i + 1) * PANEL, i * PANEL : (i + 1) * PANEL]
                          for i in range(panels)])
    eye = torch.eye(PANEL, dtype=kd, device=lp.device).expand(panels, PANEL, PANEL)
    inv_t = torch.linalg.solve_triangular(blocks, eye, upper=False).mT.contiguous()  # inv(L_ii)ᵀ
    lt = lp.mT.contiguous()  # row panel i of Lᵀ is column panel i of L, read as trans_a=1
    r = pad_to(rhs * alpha if alpha != 1 else rhs, (mp, np_)).contiguous()
    xs = []
    for i in range(panels):
        rows = slice(i * PANEL, (i + 1) * PANEL)
        x_i = ctx.launch(gemm_kernel, inv_t[i], r[rows].contiguous(), trans_a=1)
        xs.append(x_i)
        if i + 1 < panels:
            r = ctx.launch(gemm_update_kernel, lt[rows].contiguous(), x_i, r, trans_a=1, alpha=-1.0)
    x = torch.cat(xs)[:m, :n]
    if not low:
        x = x.flip(0)
    if right:
        x = x.mT
    return x.to(b.dtype).contiguous()


def symm_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float,
    c: torch.Tensor | None, right: bool, lower: bool,
) -> torch.Tensor:
    return triangle_product(
        symmetric_from_triangle, functools.partial(gemm_driver, ctx), alpha, a, b, beta, c, right,
        lower,
    )


def trmm_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, right: bool, lower: bool,
    trans_a: int, unit_diagonal: bool,
) -> torch.Tensor:
    tri = triangle(a, lower, unit_diagonal)
    if right:
        return gemm_driver(ctx, alpha, b, tri, 0.0, None, 0, trans_a)
    return gemm_driver(ctx, alpha, tri, b, 0.0, None, trans_a, 0)


def syr2k_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, b: torch.Tensor, beta: float,
    c: torch.Tensor | None, trans: int, lower: bool,
) -> torch.Tensor:
    """One GEMM over a doubled contraction: ``[op(a) | op(b)] @ [op(b) | op(a)]ᵀ``."""
    axis = 0 if trans else 1
    ta, tb = (1, 0) if trans else (0, 1)
    left, right = torch.cat([a, b], dim=axis), torch.cat([b, a], dim=axis)
    full = gemm_driver(ctx, alpha, left, right, beta, c, ta, tb)
    return _keep(full, c, lower)


def _real_diagonal(full: torch.Tensor) -> torch.Tensor:
    if full.is_complex():
        full.diagonal(dim1=-2, dim2=-1).imag.zero_()
    return full


def hemm_driver(
    ctx: KernelContext, alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: complex,
    c: torch.Tensor | None, right: bool, lower: bool,
) -> torch.Tensor:
    return triangle_product(
        hermitian_from_triangle, functools.partial(gemm_driver, ctx), alpha, a, b, beta, c, right,
        lower,
    )


def herk_driver(
    ctx: KernelContext, alpha: float, a: torch.Tensor, beta: float, c: torch.Tensor | None,
    trans: int, lower: bool,
) -> torch.Tensor:
    ta, tb = (2, 0) if trans else (0, 2)
    full = gemm_driver(ctx, alpha, a, a, beta, c, ta, tb)
    return _real_diagonal(_keep(full, c, lower))


def her2k_driver(
    ctx: KernelContext, alpha: complex, a: torch.Tensor, b: torch.Tensor, beta: float,
    c: torch.Tensor | None, trans: int, lower: bool,
) -> torch.Tensor:
    """One GEMM over a doubled contraction, ``[a | b]`` against ``[b | a]`` scaled so that the
    product is ``alpha op(a) op(b)ᴴ + conj(alpha) op(b) op(a)ᴴ``: with ``trans`` 0 it is
    ``[a b] @ [conj(alpha) b, alpha a]ᴴ``; with ``trans`` 2, ``[a; b]ᴴ @ [alpha b; conj(alpha) a]``."""
    axis = 0 if trans else 1
    ta, tb = (2, 0) if trans else (0, 2)
    conj_alpha = alpha.conjugate() if isinstance(alpha, complex) else alpha
    left = torch.cat([a, b], dim=axis)
    # The scale on the conjugated side enters conjugated: pre-scale by its conjugate.
    scale_b, scale_a = (alpha, conj_alpha) if trans else (conj_alpha, alpha)
    right = torch.cat([b * scale_b, a * scale_a], dim=axis)
    full = gemm_driver(ctx, 1.0, left, right, beta, c, ta, tb)
    return _real_diagonal(_keep(full, c, lower))
