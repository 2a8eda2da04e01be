"""Element-wise add of two [N, F] tensors, tiled over 128 partitions (outside-author style)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(x, y):
    rows, cols = x.shape
    result = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    step = nl.tile_size.pmax
    for r0 in nl.static_range(0, rows, step):
        n = min(step, rows - r0)  # ragged last tile
        xs = nl.ndarray((step, cols), dtype=x.dtype, buffer=nl.sbuf)
        ys = nl.ndarray((step, cols), dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs[0:n, :], src=x[r0 : r0 + n, :])
        nisa.dma_copy(dst=ys[0:n, :], src=y[r0 : r0 + n, :])
        zs = nl.ndarray((step, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=zs[0:n, :], data1=xs[0:n, :], data2=ys[0:n, :], op=nl.add)
        nisa.dma_copy(dst=result[r0 : r0 + n, :], src=zs[0:n, :])
    return result


@nki.jit
def vector_add_short(x, y):
    """The experimental 0.3.0 short form."""
    a = nl.load(x)
    b = nl.load(y)
    c = nl.add(a, b)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=c)
    return out
