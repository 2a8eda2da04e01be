"""trnblas.gemm against torch on the PyTorch route, side by side in one run.

Must-show of issue #4: at 1024³ float64, ``trnblas.gemm`` costs at most 1.05× ``torch.matmul``.
Each case times trnblas and the best equivalent torch call interleaved (the order alternates every
round so that neither side always runs on a warmer cache), and reports the medians over rounds and
the median of the per-round ratios.

    ./scripts/python benchmarks/trnblas_gemm.py [--size 1024] [--rounds 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import trnblas

TARGET_RATIO = 1.05


def _seconds(fn: Callable[[], torch.Tensor]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cases(
    n: int, dtype: torch.dtype
) -> dict[str, tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]]:
    """(trnblas call, torch equivalent) for the common GEMM forms at ``n``³."""
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(n, n, generator=gen, dtype=dtype) for _ in range(3))
    return {
        "gemm(1, a, b) vs matmul": (lambda: trnblas.gemm(1.0, a, b), lambda: torch.matmul(a, b)),
        "gemm(1, a, b, trans_a=1) vs matmul(a.T, b)": (
            lambda: trnblas.gemm(1.0, a, b, trans_a=1),
            lambda: torch.matmul(a.T, b),
        ),
        "gemm(0.5, a, b, 2, c) vs addmm": (
            lambda: trnblas.gemm(0.5, a, b, beta=2.0, c=c),
            lambda: torch.addmm(c, a, b, beta=2.0, alpha=0.5),
        ),
        "batched_gemm(a[4], b) vs matmul": (
            lambda: trnblas.batched_gemm(a[: n // 4].reshape(4, n // 16, n), b),
            lambda: torch.matmul(a[: n // 4].reshape(4, n // 16, n), b),
        ),
    }


def measure(
    ours: Callable[[], torch.Tensor], theirs: Callable[[], torch.Tensor], rounds: int
) -> dict[str, float]:
    """Median seconds of each side and the median per-round ratio ours / theirs."""
    for _ in range(2):  # warm up both
        ours()
        theirs()
    t_ours, t_theirs, ratios = [], [], []
    for r in range(rounds):
        if r % 2:
            a, b = _seconds(ours), _seconds(theirs)
        else:
            b, a = _seconds(theirs), _seconds(ours)
        t_ours.append(a)
        t_theirs.append(b)
        ratios.append(a / b)
    return {
        "trnblas_ms": statistics.median(t_ours) * 1e3,
        "torch_ms": statistics.median(t_theirs) * 1e3,
        "ratio": statistics.median(ratios),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per case")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    results = {}
    print(
        f"trnblas PyTorch route vs torch, {args.size}³ {args.dtype}, {args.rounds} rounds, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{'case':46} {'trnblas ms':>11} {'torch ms':>10} {'ratio':>7}")
    for name, (ours, theirs) in cases(args.size, dtype).items():
        row = measure(ours, theirs, args.rounds)
        results[name] = row
        print(f"{name:46} {row['trnblas_ms']:11.2f} {row['torch_ms']:10.2f} {row['ratio']:7.3f}")
    headline = results["gemm(1, a, b) vs matmul"]["ratio"]
    verdict = "meets" if headline <= TARGET_RATIO else "misses"
    print(f"gemm / matmul = {headline:.3f} ({verdict} the ≤ {TARGET_RATIO} target)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"size": args.size, "dtype": args.dtype, "rounds": args.rounds, "target": TARGET_RATIO}
        args.json.write_text(json.dumps({**payload, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
