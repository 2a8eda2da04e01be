"""trnfft's DCT/DST on the PyTorch route against scipy.fft on the same data: time ratio per case.

For ``dct`` and ``dst`` of types 1-4 (and ``idct`` type 2), float64 and float32, unbatched and
batched rows, the same values are transformed by ``trnfft.<fn>(tensor)`` and
``scipy.fft.<fn>(array)`` (the array shares the tensor's memory) side by side in short paired
rounds that alternate which side runs first; the figure is the median over rounds of the per-round
ratio trnfft / scipy (below 1: trnfft faster). One thread on both sides (torch's intra-op threads
set to 1, scipy's default ``workers=1``). The machine is shared: read the figures as medians under
load.

    ./scripts/python benchmarks/trnfft_r2r_ratio.py [--sizes 16,97,128,1000,1024,4096,65536]
        [--rounds 15] [--json benchmarks/results/trnfft_r2r_ratio.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import scipy.fft as sf
import torch
from _results import write_json

import trnfft

FUNCTIONS = [("dct", t) for t in (1, 2, 3, 4)] + [("dst", t) for t in (1, 2, 3, 4)] + [("idct", 2)]
BATCHED_ELEMENTS = 1 << 20


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure(name: str, type_: int, n: int, batch: int, dtype: torch.dtype, rounds: int) -> dict:
    """Median paired ratio trnfft / scipy for one function, type, size, batch and dtype."""
    gen = torch.Generator().manual_seed(n)
    x = torch.randn((batch, n) if batch > 1 else (n,), generator=gen, dtype=dtype)
    a = x.numpy()
    mine = lambda: getattr(trnfft, name)(x, type_)  # noqa: E731
    ref = lambda: getattr(sf, name)(a, type_)  # noqa: E731
    mine(), ref()  # warm up
    calls = max(1, int(2e-3 / max(_time(ref, 3), 1e-9)))
    t_mine, t_ref, ratios = [], [], []
    for r in range(rounds):
        if r % 2:
            m, s = _time(mine, calls), _time(ref, calls)
        else:
            s, m = _time(ref, calls), _time(mine, calls)
        t_mine.append(m)
        t_ref.append(s)
        ratios.append(m / s)
    return {
        "function": name,
        "type": type_,
        "n": n,
        "batch": batch,
        "dtype": str(dtype).removeprefix("torch."),
        "trnfft_us": statistics.median(t_mine) * 1e6,
        "scipy_us": statistics.median(t_ref) * 1e6,
        "ratio": statistics.median(ratios),
    }


def main() -> None:
    """Run every case, print the table and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,97,128,1000,1024,4096,65536")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    print(
        f"{'fn':>5} {'type':>4} {'n':>6} {'batch':>5} {'dtype':>8} "
        f"{'trnfft us':>10} {'scipy us':>10} {'ratio':>6}"
    )
    for dtype in (torch.float64, torch.float32):
        for n in sizes:
            for batch in (1, max(1, min(64, BATCHED_ELEMENTS // n))):
                for name, type_ in FUNCTIONS:
                    r = measure(name, type_, n, batch, dtype, args.rounds)
                    rows.append(r)
                    print(
                        f"{name:>5} {type_:>4} {n:>6} {batch:>5} {r['dtype']:>8} {r['trnfft_us']:>10.1f} "
                        f"{r['scipy_us']:>10.1f} {r['ratio']:>6.2f}"
                    )
    ratios = [r["ratio"] for r in rows]
    print(
        f"{len(rows)} cases: median ratio {statistics.median(ratios):.2f}, "
        f"range {min(ratios):.2f}-{max(ratios):.2f}"
    )
    path = write_json("trnfft_r2r_ratio", rows, path=args.json, threads=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
