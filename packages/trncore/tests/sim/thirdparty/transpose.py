"""Transpose a [P, F] matrix (both <= 128) through the Tensor Engine (outside-author style)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def transpose_tile(x):
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    flipped = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=src)
    staged = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=staged, src=flipped)
    nisa.dma_copy(dst=out, src=staged)
    return out


@nki.jit
def transpose_big(x):
    """[R, C] with R, C multiples of 128: 128x128 blocks with swapped block indices."""
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(r // 128):
        for j in nl.affine_range(c // 128):
            blk = nl.load(x[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128])
            t = nl.transpose(blk)
            back = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=back, src=t)
            nl.store(out[j * 128 : (j + 1) * 128, i * 128 : (i + 1) * 128], value=back)
    return out


@nki.jit
def transpose_free_dims(x, f1: int, f2: int):
    """Per partition, view the free dim as [f1, f2] and transpose it to [f2, f1]."""
    p = x.shape[0]
    out = nl.ndarray((p, f2 * f1), dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((p, f1 * f2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    dst = nl.ndarray((p, f2 * f1), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(f1):
        for j in nl.affine_range(f2):
            nisa.tensor_copy(dst=dst[:, nl.ds(j * f1 + i, 1)], src=src[:, nl.ds(i * f2 + j, 1)])
    nisa.dma_copy(dst=out, src=dst)
    return out
