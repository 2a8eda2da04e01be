"""Split the columns of a [P, F] tensor into even and odd halves (two outputs, strided views)."""

import nki
import nki.language as nl


@nki.jit
def split_even_odd(x):
    p, f = x.shape
    out_even = nl.ndarray((p, f // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    out_odd = nl.ndarray((p, f // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nl.store(out_even, value=tile[:, 0:f:2])
    nl.store(out_odd, value=tile[:, 1:f:2])
    return out_even, out_odd
