"""A Mamba-style selective scan: h[t] = exp(delta[t] * A) * h[t-1] + delta[t] * u[t] * B[t]."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def selective_scan(delta, u, a_col, b_row):
    channels, steps = delta.shape  # channels on partitions, time along the free dim
    out = nl.ndarray((channels, steps), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(delta)
    x = nl.load(u)
    a = nl.load(a_col)
    b = nl.broadcast_to(nl.load(b_row), (channels, steps))  # one row to every partition
    decay = nl.ndarray((channels, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=decay, op=nl.exp, data=d, scale=a)  # per-channel scale
    drive = nl.ndarray((channels, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=drive, data1=d, data2=x, op=nl.multiply)
    nisa.tensor_tensor(dst=drive, data1=drive, data2=b, op=nl.multiply)
    h = nl.ndarray((channels, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(
        dst=h, data0=decay, data1=drive, initial=0.0, op0=nl.multiply, op1=nl.add
    )
    nl.store(out, value=h)
    return out
