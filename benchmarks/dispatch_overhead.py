"""Dispatch overhead on the PyTorch route: per-call cost over calling the reference directly.

Target (foundation issue): at most 5 µs per call for a tiny tensor. Both are timed side by side,
interleaved, in batches; the figure is the median over batches of (dispatched - direct) per call.

    ./scripts/python benchmarks/dispatch_overhead.py [--json build/bench/dispatch_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from trncore.dispatch import Library

TARGET_US = 5.0


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.add(a, b)


def kernel(a, b):  # never runs on the PyTorch route
    raise AssertionError("the PyTorch route must not launch kernels")


def per_call_us(fn, args, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def measure(backend: str, batches: int, calls: int) -> dict[str, float]:
    lib = Library.register(f"bench_{backend}")
    lib.set_backend(backend)
    op = lib.operation("add", reference=reference, kernel=kernel)
    args = (torch.ones(4), torch.ones(4))
    for _ in range(3):  # warm up both paths
        per_call_us(op, args, calls)
        per_call_us(reference, args, calls)
    direct, dispatched = [], []
    for _ in range(batches):
        direct.append(per_call_us(reference, args, calls))
        dispatched.append(per_call_us(op, args, calls))
    overhead = [d - r for d, r in zip(dispatched, direct)]
    return {
        "direct_us": statistics.median(direct),
        "dispatched_us": statistics.median(dispatched),
        "overhead_us": statistics.median(overhead),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=31)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results = {backend: measure(backend, args.batches, args.calls) for backend in ("auto", "pytorch")}
    print(f"dispatch overhead, tiny tensor, median of {args.batches} batches x {args.calls} calls")
    for backend, r in results.items():
        verdict = "ok" if r["overhead_us"] <= TARGET_US else "OVER TARGET"
        print(
            f"  backend={backend:<8} direct {r['direct_us']:6.2f} us  dispatched {r['dispatched_us']:6.2f} us"
            f"  overhead {r['overhead_us']:5.2f} us  (target <= {TARGET_US} us: {verdict})"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"target_us": TARGET_US, "results": results}, indent=1))
    return 0 if all(r["overhead_us"] <= TARGET_US for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
