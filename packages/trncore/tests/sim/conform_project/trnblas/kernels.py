"""Kernels in the style of a small library: ``import nki``, ``dst=`` instructions."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def double(a):
    """out = 2 * a for a (128, N) float32 array."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def triple_wrong(a):
    """Meant to give 3 * a; adds 3 instead (the test catches it)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=3.0)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def too_tall(a):
    """A 129-partition SBUF tile: refused (a tile has at most 128 partitions)."""
    out = nl.ndarray((129, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((129, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def subtract_reduce(a):
    """A subtract reduction, which no nki.isa page defines: not emulated."""
    out = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_reduce(dst=r, op=nl.subtract, data=t, axis=1)
    nisa.dma_copy(dst=out, src=r)
    return out
