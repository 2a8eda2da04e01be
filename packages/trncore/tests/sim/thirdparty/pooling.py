"""2x2 average and max pooling of a [C, H, W] tensor through a 5-D access pattern."""

import nki
import nki.isa as nisa
import nki.language as nl
from nki.typing import tensor


@nki.jit
def avg_pool2d(in_tensor: tensor, pool_size: int = 2):
    c, h, w = in_tensor.shape
    ho, wo = h // pool_size, w // pool_size
    out = nl.ndarray((c, ho, wo), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((c, h, w), dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=in_tensor)
    windows = tile.ap(
        [[h * w, c], [pool_size * w, ho], [pool_size, wo], [w, pool_size], [1, pool_size]]
    )
    summed = nl.sum(windows, axis=[3, 4])
    scaled = nl.ndarray((c, ho, wo), dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(
        dst=scaled, data=summed, op0=nl.multiply, operand0=1.0 / (pool_size * pool_size)
    )
    nisa.dma_copy(dst=out, src=scaled)
    return out


@nki.jit
def max_pool2d(in_tensor):
    c, h, w = in_tensor.shape
    out = nl.ndarray((c, h // 2, w // 2), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.load(in_tensor)
    windows = tile.ap([[h * w, c], [2 * w, h // 2], [2, w // 2], [w, 2], [1, 2]])
    nl.store(out, value=nl.max(windows, axis=[3, 4]))
    return out
