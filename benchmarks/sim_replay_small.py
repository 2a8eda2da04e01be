"""Benchmark: replaying small-tile programs on the trncore.sim emulator (per-instruction cost).

A program traced once is replayed for every later call with the same key; on small tiles the
replay is per-instruction Python around small NumPy calls. Three programs:

- ``mix``: integer bit mixing on (128, 1) uint32 words, the shape of a counter-based random
  number kernel called once per 128-lane tile (byte splits, exact GpSimd adds, xors, shifts);
- ``float``: float32 elementwise arithmetic on (16, 64) tiles;
- ``copies``: ``benchmarks/sim_trace.py``'s program (DMA and tensor_copy on [128, 512] tiles).

Prints per program the instructions, the median replay (``Program.run``, process CPU time,
median of ``--repeats`` samples of ``--inner`` replays each) in ms and in us per instruction,
and the median kernel call (``simulate``: the cache lookup and the replay). Run:

    PYTHONPATH=packages/trncore/src python benchmarks/sim_replay_small.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sim_trace import make_kernel

import trncore.sim as sim
from trncore.lang import nisa, nl


def mix_kernel(x, key):  # type: ignore[no-untyped-def]
    """``rounds`` rounds of byte-wise mixing of two (128, 1) uint32 words (not a real generator)."""
    p = x.shape[0]

    def tile():  # type: ignore[no-untyped-def]
        return nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)

    a, k = tile(), tile()
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=k, src=key)
    for r in range(40):
        lo, hi, s, t = tile(), tile(), tile(), tile()
        nisa.tensor_scalar(dst=lo, data=a, op0=nl.bitwise_and, operand0=0xFFFF)
        nisa.tensor_scalar(
            dst=hi, data=a, op0=nl.right_shift, operand0=16, op1=nl.bitwise_and, operand1=0xFFFF
        )
        nisa.tensor_tensor(dst=s, data1=lo, data2=k, op=nl.add)  # exact on GpSimd, saturating
        nisa.tensor_scalar(dst=t, data=s, op0=nl.left_shift, operand0=(r % 13) + 3)
        nisa.tensor_tensor(dst=s, data1=t, data2=hi, op=nl.bitwise_xor)
        nisa.tensor_scalar(dst=t, data=s, op0=nl.right_shift, operand0=7)
        nisa.tensor_tensor(dst=a, data1=s, data2=t, op=nl.bitwise_or)
        nisa.tensor_tensor(dst=k, data1=k, data2=lo, op=nl.bitwise_xor)
    out = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def float_kernel(x, y):  # type: ignore[no-untyped-def]
    """40 rounds of float32 elementwise arithmetic on (16, 64) tiles."""
    shape = x.shape

    def tile():  # type: ignore[no-untyped-def]
        return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)

    a, b = tile(), tile()
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=b, src=y)
    for _ in range(40):
        c = tile()
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.multiply)
        nisa.tensor_scalar(dst=c, data=c, op0=nl.add, operand0=0.5, op1=nl.multiply, operand1=0.25)
        nisa.tensor_tensor(dst=a, data1=c, data2=a, op=nl.subtract)
    out = nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def _programs() -> dict[str, tuple[Callable[..., Any], list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    words = [rng.integers(0, 1 << 32, size=(128, 1), dtype=np.uint64).astype(np.uint32) for _ in range(2)]
    floats = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(2)]
    copies = make_kernel(100)
    return {
        "mix": (mix_kernel, words),
        "float": (float_kernel, floats),
        "copies": (getattr(copies, "func", copies), [rng.standard_normal((128, 512)).astype(np.float32)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--inner", type=int, default=5)
    args = parser.parse_args()
    for name, (kernel, arrays) in _programs().items():
        run = sim.simulate(kernel)
        traced = np.array(run(*arrays), copy=True)
        prog = sim.trace(kernel, *arrays)
        replayed = prog.run(arrays)
        samples, calls = [], []
        for _ in range(args.repeats):
            start = time.process_time()
            for _ in range(args.inner):
                prog.run(arrays)
            samples.append((time.process_time() - start) / args.inner)
            start = time.process_time()
            for _ in range(args.inner):
                run(*arrays)
            calls.append((time.process_time() - start) / args.inner)
        n = len(prog)
        replay = statistics.median(samples)
        print(
            f"{name:7s} {n:5d} instructions: replay median {1e3 * replay:.3f} ms "
            f"({1e6 * replay / n:.2f} us per instruction; samples "
            f"{', '.join(f'{1e3 * s:.3f}' for s in sorted(samples))} ms); call median "
            f"{1e3 * statistics.median(calls):.3f} ms; replay bit-identical to the traced run: "
            f"{bool(np.array_equal(traced.view(np.uint8), np.asarray(replayed).view(np.uint8)))}"
        )


if __name__ == "__main__":
    main()
