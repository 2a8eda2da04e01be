"""Kernels in nki-library's styles: NKIObject configs, optional arguments, assignment into tiles."""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl


@dataclass
class ScaleConfig(nl.NKIObject):
    scale: float = 1.0
    add_bias: bool = False


DEFAULT = ScaleConfig()


@nki.jit
def scale_add(x, bias=None, cfg: ScaleConfig = DEFAULT):
    """out = x * cfg.scale (+ bias when given), rows split across an LNC=2 launch."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs(axes=0)
    r0 = nl.program_id(axis=0) * half
    t = nl.ndarray((half, cols), dtype=nl.float32, buffer=nl.sbuf)
    t[...] = nl.load(x[r0 : r0 + half, :])
    acc = nl.ndarray((half, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0)
    nisa.tensor_scalar(dst=acc, data=t, op0=nl.multiply, operand0=cfg.scale)
    if bias != None:  # noqa: E711  (NKI 0.3.0's spelling for an optional argument)
        b = nl.ndarray((half, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=bias[r0 : r0 + half, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=b, op=nl.add)
    nisa.dma_copy(dst=out[r0 : r0 + half, :], src=acc)
    return out


@nki.jit
def off_by_one(x):
    """Wrong on purpose: adds 1 to its input where it should copy it."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def too_many_partitions(x):
    """Breaks the 128-partition rule: the tile below has 129 partitions."""
    t = nl.ndarray((129, 4), dtype=x.dtype, buffer=nl.sbuf)  # the rule is reported here
    nisa.dma_copy(dst=t, src=x)
    return x


@nki.jit
def never_ends(x):
    """A trace that never finishes (the runner's per-case time limit stops it)."""
    n = 0
    while n >= 0:
        n += 1
    return x


@nki.jit
def swap_and_count(x, count):
    """Each core of an LNC=2 launch swaps its half of x with the other core (sendrecv), then adds
    1 as many times as `count` says (a register loop), and stores x4-packed scratch untouched."""
    rows, cols = x.shape
    half = rows // 2
    me = nl.program_id(axis=0)
    mine = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[me * half : (me + 1) * half, :])
    got = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    for _ in nl.dynamic_range(reg):
        nisa.tensor_scalar(dst=got, data=got, op0=nl.add, operand0=1.0)
    scratch = nl.ndarray((half, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.memset(dst=scratch, value=0)
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * half : (me + 1) * half, :], src=got)
    return out
