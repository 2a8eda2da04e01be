"""Multi-operand contractions on the PyTorch route: trntensor.einsum against torch.einsum.

Each case is timed side by side, interleaved call by call after a warm-up (which also fills
trntensor's plan cache), and the medians are reported. ``torch.einsum`` uses opt_einsum's path
when opt_einsum is installed (as here); the ``torch, no path`` column turns that off
(``torch.backends.opt_einsum.enabled = False``: left-to-right order), the order a user gets
without opt_einsum. The claim checked is ``trntensor ≤ torch`` (ratio ≤ 1 within noise).

    ./scripts/python benchmarks/trntensor_einsum.py [--repeats 15] [--dtype float64] [--threads 1]
                                                    [--json PATH]

On a machine shared with other work, ``--threads 1`` gives steadier medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import trntensor

# (name, subscripts, shapes): multi-operand contractions of the kinds the library serves.
CASES = [
    ("matrix chain", "ij,jk,kl,lm->im", [(512, 64), (64, 512), (512, 32), (32, 512)]),
    ("chain, permuted out", "ij,jk,kl->li", [(300, 400), (400, 20), (20, 500)]),
    ("matrix-matrix-vector", "ij,jk,k->i", [(800, 800), (800, 800), (800,)]),
    ("AO->MO (DF)", "mnP,mi,na->iaP", [(96, 96, 300), (96, 20), (96, 76)]),
    ("CP MTTKRP", "abc,bz,cz->az", [(120, 110, 100), (110, 16), (100, 16)]),
    ("batched chain", "bij,bjk,bkl->bil", [(32, 64, 128), (32, 128, 16), (32, 16, 64)]),
    ("tensor network ring", "abc,cde,efa->bdf", [(16, 24, 16), (16, 24, 16), (16, 24, 16)]),
    ("trace + chain", "ii,ij,jk->k", [(300, 300), (300, 400), (400, 50)]),
]


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _torch_no_path(eq, ops):
    torch.backends.opt_einsum.enabled = False
    try:
        return torch.einsum(eq, *ops)
    finally:
        torch.backends.opt_einsum.enabled = True


def measure(repeats: int, dtype: torch.dtype) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    rows = []
    for name, eq, shapes in CASES:
        ops = [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]
        impls = {
            "trntensor": lambda eq=eq, ops=ops: trntensor.einsum(eq, *ops),
            "torch": lambda eq=eq, ops=ops: torch.einsum(eq, *ops),
            "torch_no_path": lambda eq=eq, ops=ops: _torch_no_path(eq, ops),
        }
        ref = impls["torch"]()
        got = impls["trntensor"]()
        tol = 1e-3 if dtype == torch.float32 else 1e-9
        err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
        if err > tol:
            raise AssertionError(f"{name}: trntensor differs from torch.einsum by {err:.2e} (relative)")
        for fn in impls.values():  # warm up
            fn()
        times: dict[str, list[float]] = {k: [] for k in impls}
        for _ in range(repeats):
            for key, fn in impls.items():
                times[key].append(_time(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        plan = trntensor.plan_contraction(eq, *ops)
        rows.append(
            {
                "case": name,
                "subscripts": eq,
                "shapes": [list(s) for s in shapes],
                "dtype": str(dtype).removeprefix("torch."),
                "median_s": med,
                "ratio_vs_torch": med["trntensor"] / med["torch"],
                "ratio_vs_torch_no_path": med["trntensor"] / med["torch_no_path"],
                "plan_flops": plan.flops,
                "naive_flops": plan.naive_flops,
                "strategies": [s.strategy for s in plan.steps],
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = measure(args.repeats, dtype)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads, {args.dtype}, median of {args.repeats}")
    header = (
        f"{'case':<22} {'trntensor ms':>12} {'torch ms':>9} {'ratio':>6} "
        f"{'torch,no path ms':>16} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        m = r["median_s"]
        print(
            f"{r['case']:<22} {m['trntensor'] * 1e3:>12.3f} {m['torch'] * 1e3:>9.3f} "
            f"{r['ratio_vs_torch']:>6.2f} {m['torch_no_path'] * 1e3:>16.3f} "
            f"{r['ratio_vs_torch_no_path']:>6.2f}"
        )
    worst = max(r["ratio_vs_torch"] for r in rows)
    print(f"worst trntensor/torch ratio: {worst:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"dtype": args.dtype, "repeats": args.repeats, "rows": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
