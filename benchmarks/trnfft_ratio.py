"""trnfft's PyTorch route against torch.fft: time ratio per size (target at most 1.1x).

For each size (powers of two 2^4…2^20, and odd and prime sizes), batched and unbatched, the same
input is transformed by ``trnfft.<fn>`` and ``torch.fft.<fn>`` side by side: rounds alternate
which one runs first, each round times enough calls to last about a millisecond, and the figure
is the median over rounds of the per-round ratio (short paired rounds, so load from other
processes hits both sides alike). Fast cases get more rounds (up to ``--case-seconds`` of paired
rounds, at least ``--rounds``): a 4 µs transform is where a few percent of load noise decides the
ratio, and more pairs narrow the median. One intra-op thread by default: on a loaded machine torch's
thread pool waits for preempted workers and both sides' times explode; ``--threads 0`` keeps
torch's default.

    ./scripts/python benchmarks/trnfft_ratio.py [--functions fft,rfft] [--rounds 41]
        [--case-seconds 0.6] [--threads 1] [--json PATH]

Writes ``benchmarks/results/trnfft_ratio.json`` (rows, wrapper overhead, the bare-function floor,
machine) and the plot ``docs/assets/bench/trnfft_ratio.png`` (ratio per size against the 1.1
line) through ``benchmarks/_results.py``. The machine is shared: read the figures as medians
under load.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from _results import RESULTS_DIR, pyplot, save_plot, write_json

import trnfft
from trnfft import _ops, transforms

TARGET = 1.1
POWERS = [2**k for k in range(4, 21)]
ODD_AND_PRIME = [15, 17, 97, 127, 129, 1000, 1009, 4093, 65537, 999_983]
BATCHED_ELEMENTS = 1 << 22  # a batched case transforms up to this many points (batch <= 128)


def _time(fn, x, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def _calls_for(fn, x, budget_s: float) -> int:
    fn(x)  # warm up (plans inside torch / MKL)
    once = _time(fn, x, 3)
    return max(1, int(budget_s / max(once, 1e-9)))


def _signal(name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """A random input ``torch.fft.<name>`` takes: real for ``rfft``/``ihfft``, complex otherwise."""
    gen = torch.Generator().manual_seed(seed)
    real = torch.randn(shape, generator=gen)
    return real if name in ("rfft", "ihfft") else torch.complex(real, torch.randn(shape, generator=gen))


def measure(
    name: str, n: int, batch: int, rounds: int, budget_s: float, case_s: float = 0.0
) -> dict[str, float | int | str]:
    """Median per-call times and the median paired ratio for one function, size and batch."""
    x = _signal(name, (batch, n) if batch > 1 else (n,), seed=n)
    mine, ref = getattr(trnfft, name), getattr(torch.fft, name)
    calls = _calls_for(ref, x, budget_s)
    _calls_for(mine, x, budget_s)
    round_s = 2 * calls * _time(ref, x, calls)
    rounds = max(rounds, int(case_s / max(round_s, 1e-9)) | 1)  # odd: a median of actual pairs
    t_mine, t_ref, ratios = [], [], []
    for r in range(rounds):
        if r % 2:
            a = _time(mine, x, calls)
            b = _time(ref, x, calls)
        else:
            b = _time(ref, x, calls)
            a = _time(mine, x, calls)
        t_mine.append(a)
        t_ref.append(b)
        ratios.append(a / b)
    return {
        "function": name,
        "n": n,
        "batch": batch,
        "calls_per_round": calls,
        "rounds": rounds,
        "trnfft_us": statistics.median(t_mine) * 1e6,
        "torch_us": statistics.median(t_ref) * 1e6,
        "ratio": statistics.median(ratios),
    }


def python_floor(name: str, rounds: int, n: int = 16) -> float:
    """Median paired ratio of a bare ``def f(x): return torch.fft.<name>(x)`` to torch on ``n`` points.

    What any Python function around the call costs on this machine (its frame and the cache and
    branch-predictor state it disturbs): the floor under trnfft's ratio on the smallest sizes.
    """
    ref = getattr(torch.fft, name)

    def bare(x):
        return ref(x)

    x = _signal(name, (n,), seed=n)
    calls = _calls_for(ref, x, 1e-3)
    ratios = []
    for r in range(rounds):
        first, second = (bare, ref) if r % 2 else (ref, bare)
        a, b = _time(first, x, calls), _time(second, x, calls)
        ratios.append(a / b if first is bare else b / a)
    return statistics.median(ratios)


def wrapper_overhead_ns(name: str, rounds: int) -> tuple[float, float]:
    """Minimum and median extra cost of ``trnfft.<name>`` over calling its reference directly, in ns per call.

    The operation's reference is swapped for a no-op for the measurement, so only trnfft's own
    Python work (type and route checks, argument passing) is timed; this is the part of the ratio
    that is not noise. The minimum is the cost itself; the median adds what load from other
    processes inflicts on it.
    """
    x = torch.zeros(16, dtype=torch.complex64)
    operation = getattr(_ops, name)
    original = operation.reference
    fast_path = f"_ref_{name}"  # the fast path's binding of the reference (trnfft.transforms)

    def noop(input, *args):
        return input

    mine = getattr(trnfft, name)
    operation.reference = noop
    setattr(transforms, fast_path, noop)
    try:
        mine(x)  # the first call records the route; later calls take the fast path
        extra = []
        for _ in range(rounds):
            direct = _time(noop, x, 20000)
            wrapped = _time(mine, x, 20000)
            extra.append((wrapped - direct) * 1e9)
    finally:
        operation.reference = original
        setattr(transforms, fast_path, original)
    return min(extra), statistics.median(extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", default="fft", help="comma-separated torch.fft names (default fft)")
    parser.add_argument("--rounds", type=int, default=41, help="paired rounds per case (default 41)")
    parser.add_argument(
        "--case-seconds", type=float, default=0.6, help="paired-round time per case for fast cases"
    )
    parser.add_argument("--budget-ms", type=float, default=1.0, help="time per timed batch of calls")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch default)")
    parser.add_argument("--max-n", type=int, default=2**20, help="skip sizes above this")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "trnfft_ratio.json", help="output path")
    args = parser.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = []
    sizes = sorted(n for n in {*POWERS, *ODD_AND_PRIME} if n <= args.max_n)
    header = f"{'fn':>6} {'n':>8} {'batch':>6} {'trnfft µs':>12} {'torch µs':>12} {'ratio':>7}"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; target ratio <= {TARGET}")
    print(header)
    print("-" * len(header))
    for name in args.functions.split(","):
        for n in sizes:
            for batch in (1, max(1, min(128, BATCHED_ELEMENTS // n))):
                if batch == 1 and rows and rows[-1]["n"] == n and rows[-1]["batch"] == 1:
                    continue
                row = measure(name, n, batch, args.rounds, args.budget_ms / 1e3, args.case_seconds)
                rows.append(row)
                flag = "" if row["ratio"] <= TARGET else "  > target"
                print(
                    f"{name:>6} {n:>8} {batch:>6} {row['trnfft_us']:>12.1f} {row['torch_us']:>12.1f} "
                    f"{row['ratio']:>7.3f}{flag}",
                    flush=True,
                )
    overhead = {name: wrapper_overhead_ns(name, args.rounds) for name in args.functions.split(",")}
    floor = {name: python_floor(name, 301) for name in args.functions.split(",")}
    for name, value in floor.items():
        print(f"\n{name}: a bare Python function around torch.fft.{name} (n=16): ratio {value:.3f}")
    for name, (low, mid) in overhead.items():
        small = min((r for r in rows if r["function"] == name), key=lambda r: r["torch_us"])
        print(
            f"\n{name}: trnfft's own per-call overhead {low:.0f} ns (min; median {mid:.0f} ns) = "
            f"{low / 10 / small['torch_us']:.1f}% ({mid / 10 / small['torch_us']:.1f}%) of torch's fastest "
            f"case here (n={small['n']}, batch={small['batch']}, {small['torch_us']:.1f} µs)"
        )
    worst = max(rows, key=lambda r: r["ratio"])
    print(f"\nworst ratio {worst['ratio']:.3f} at {worst['function']} n={worst['n']} batch={worst['batch']}")
    print(f"median ratio {statistics.median(r['ratio'] for r in rows):.3f} over {len(rows)} cases")
    written = write_json(
        "trnfft_ratio",
        rows,
        path=args.json,
        target=TARGET,
        torch_version=torch.__version__,
        threads=torch.get_num_threads(),
        rounds=args.rounds,
        case_seconds=args.case_seconds,
        overhead_ns={name: {"min": low, "median": mid} for name, (low, mid) in overhead.items()},
        bare_python_function_ratio_n16=floor,
        note="shared 2-core machine with other processes running: medians of paired rounds under load",
    )
    png = plot(rows)
    print(f"wrote {written} and {png}")
    return 0


def plot(rows: list[dict]) -> Path:
    """Median ratio to torch.fft per size, unbatched and batched, per function, with the target line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for name in dict.fromkeys(r["function"] for r in rows):
        for label, batched, style in (("batch 1", False, "-o"), ("batched", True, "--s")):
            pts = sorted(
                (r["n"], r["ratio"]) for r in rows if r["function"] == name and (r["batch"] > 1) == batched
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4, label=f"{name}, {label}")
    ax.axhline(TARGET, color="red", lw=1, label=f"target {TARGET}")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transform length n")
    ax.set_ylabel("trnfft time / torch.fft time (median)")
    ax.set_title("trnfft PyTorch route vs torch.fft (shared, noisy CPU)")
    ax.legend(fontsize=8)
    return save_plot(fig, "trnfft_ratio")


if __name__ == "__main__":
    raise SystemExit(main())
