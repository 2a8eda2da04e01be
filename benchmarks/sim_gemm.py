"""Benchmark: a tiled float32 GEMM (1024^3, 128x128x512 tiles) on the trncore.sim emulator.

Prints the median wall time of the first call (trace + run, cache cleared before each sample)
and of replayed calls, on the target from NEURON_PLATFORM_TARGET_OVERRIDE (default trn2), plus
the cost model's report for the same program. Run:

    PYTHONPATH=packages/trncore/src python benchmarks/sim_gemm.py [--n 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import trncore.sim as sim
from trncore.lang import nisa, nl


def gemm_kernel(lhsT, rhs):
    """C[M, N] = lhsT[K, M].T @ rhs[K, N] with 128x128x512 tiles and fp32 PSUM accumulation."""
    K, M = lhsT.shape
    _, N = rhs.shape
    tm, tk, tn = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // tm):
        for n in nl.affine_range(N // tn):
            acc = nl.ndarray((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tk):
                lt = nl.ndarray((tk, tm), lhsT.dtype, buffer=nl.sbuf)
                rt = nl.ndarray((tk, tn), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lt, src=lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm])
                nisa.dma_copy(dst=rt, src=rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                nisa.nc_matmul(dst=acc, stationary=lt, moving=rt, accumulate=k > 0)
            res = nl.ndarray((tm, tn), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], src=res)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.n, args.n), np.float32)
    b = rng.standard_normal((args.n, args.n), np.float32)
    expected = a.T.astype(np.float64) @ b.astype(np.float64)
    run = sim.simulate(gemm_kernel)

    first = []
    for _ in range(args.repeats):
        sim.clear_cache()
        start = time.perf_counter()
        out = run(a, b)
        first.append(time.perf_counter() - start)
    replay = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        again = run(a, b)
        replay.append(time.perf_counter() - start)
    err = float(np.max(np.abs(out - expected)) / np.max(np.abs(expected)))
    target = sim.trace(gemm_kernel, a, b).target
    print(f"GEMM {args.n}^3 float32, 128x128x512 tiles, target {target}")
    print(
        f"first call (trace + run) median {statistics.median(first):.3f} s "
        f"(samples {', '.join(f'{t:.3f}' for t in first)})"
    )
    print(
        f"replay median {statistics.median(replay):.3f} s "
        f"(samples {', '.join(f'{t:.3f}' for t in replay)})"
    )
    print(
        f"max relative error vs float64 NumPy {err:.2e}; replay bit-identical: "
        f"{bool(np.array_equal(out, again))}"
    )
    print(sim.report(gemm_kernel, a, b))


if __name__ == "__main__":
    main()
