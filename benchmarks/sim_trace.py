"""Benchmark: the emulator's per-instruction cost when tracing many small tile instructions.

A kernel of 400 rounds of (two SBUF allocations, a DMA in, four 128-column tensor_copy, a DMA
out): 2 400 instructions on small tiles, so the time is the emulator's own bookkeeping per
instruction (indexing, checks, access recording), not NumPy arithmetic. Prints the minimum and
median first-call time (trace and run, program cache cleared before each sample), wall and CPU
seconds, and the part of it that was data work (the instructions' NumPy work,
:mod:`trncore.sim.work_clock`; the rest is tracing). Run:

    PYTHONPATH=packages/trncore/src python benchmarks/sim_trace.py [--rounds 400] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import trncore.sim as sim
from trncore.lang import nisa, nki, nl
from trncore.sim.work_clock import data_seconds


def make_kernel(rounds: int):  # type: ignore[no-untyped-def]
    """The benchmark kernel with ``rounds`` rounds of six instructions."""

    @nki.jit
    def copies(a):  # type: ignore[no-untyped-def]
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for _ in range(rounds):
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:128, 0:512], src=a[0:128, 0:512])
            u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            for j in range(4):
                cols = slice(j * 128, (j + 1) * 128)
                nisa.tensor_copy(dst=u[0:128, cols], src=t[0:128, cols])
            nisa.dma_copy(dst=out[0:128, 0:512], src=u[0:128, 0:512])
        return out

    return copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    kernel = make_kernel(args.rounds)
    a = np.ones((128, 512), dtype=np.float32)
    times, cpu, data = [], [], []
    for _ in range(args.repeats):
        sim.clear_cache()
        start, start_cpu, start_data = time.perf_counter(), time.process_time(), data_seconds()
        kernel(a)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        data.append(data_seconds() - start_data)
    n = 6 * args.rounds
    # CPU seconds too: on a shared machine the wall time also counts other processes' turns
    print(
        f"{n} instructions: first call min {min(times):.3f} s, median {statistics.median(times):.3f} s "
        f"({1e6 * min(times) / n:.0f} us per instruction); CPU min {min(cpu):.3f} s, median "
        f"{statistics.median(cpu):.3f} s ({1e6 * min(cpu) / n:.0f} us per instruction); data work "
        f"median {statistics.median(data):.3f} s ({1e6 * statistics.median(data) / n:.1f} us per "
        "instruction), the rest tracing"
    )


if __name__ == "__main__":
    main()
