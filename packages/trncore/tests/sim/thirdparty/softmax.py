"""Row softmax of a [R, F] tensor, rows on partitions (outside-author style)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_rows(x):
    rows, f = x.shape
    y = nl.ndarray((rows, f), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.static_range((rows + 127) // 128):
        p = min(128, rows - r * 128)
        t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128 : r * 128 + p, :])
        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=e,
            op=nl.exp,
            data=t,
            bias=neg_max,
            reduce_op=nl.add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        o = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=y[r * 128 : r * 128 + p, :], src=o)
    return y


@nki.jit
def softmax_short(x):
    t = nl.load(x)
    s = nl.softmax(t, axis=1)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=s)
    return out
