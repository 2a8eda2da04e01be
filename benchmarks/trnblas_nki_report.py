"""The modelled cost of trnblas's NKI kernels on trn1 and trn2 (trncore.sim cost report).

Must-show of issue #4: GEMM at M = N = K = 4096 bfloat16 on trn1 reaches ≥ 90% TensorE
utilisation and is compute-bound (TensorE busy time above DMA time). This script traces
``trnblas.kernels.gemm_kernel`` for n = 512 … 4096 in float32 and bfloat16 on both targets (no
data: the report needs only the program), plus SYRK at one size, prints a table and writes
``benchmarks/results/trnblas_nki_report.json``. (The DF-MP2 energy kernel is trntensor's:
benchmarks/trntensor_kernel_keys.py.)

These are figures of the emulator's cost MODEL (docs/emulator-cost.md), not measurements.

    ./scripts/python benchmarks/trnblas_nki_report.py [--sizes 512 1024 2048 4096] [--json PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _results import RESULTS_DIR, pyplot, save_plot, write_json

import trncore.sim as sim
from trnblas.kernels import gemm_kernel, syrk_kernel

DEFAULT_JSON = RESULTS_DIR / "trnblas_nki_report.json"


def _row(kernel: str, shape: str, dtype: str, target: str, rep: sim.Report, trace_s: float) -> dict:
    busy = rep.busy_seconds
    bound = max(busy, key=busy.get)
    return {
        "kernel": kernel,
        "shape": shape,
        "dtype": dtype,
        "target": target,
        "tensor_utilisation_bf16_peak": rep.tensor_utilisation,
        "tensor_utilisation_dtype_peak": rep.tensor_utilisation_dtype,
        "busy_us": {k: v * 1e6 for k, v in busy.items()},
        "lower_bound_us": rep.lower_bound_s * 1e6,
        "bound_by": bound,
        "compute_bound": busy["tensor"] > busy["dma"],
        "modelled_tflops": rep.useful_flops / rep.lower_bound_s / 1e12 if rep.lower_bound_s else 0.0,
        "instructions": rep.instructions,
        "dma_bytes_in": rep.dma_bytes_in,
        "dma_bytes_out": rep.dma_bytes_out,
        "traffic_over_min": rep.traffic_over_min,
        "sbuf_peak_bytes": rep.sbuf_peak_bytes,
        "psum_peak_banks": rep.psum_peak_banks,
        "trace_seconds": trace_s,
    }


def _report(kernel, *specs, target: str, **params) -> tuple[sim.Report, float]:
    start = time.perf_counter()
    rep = sim.report(kernel, *specs, target=target, **params)
    return rep, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args()
    rows = []
    for target in ("trn1", "trn2"):
        for dtype in ("float32", "bfloat16"):
            for n in args.sizes:
                rep, t = _report(gemm_kernel, ((n, n), dtype), ((n, n), dtype), target=target)
                rows.append(_row("gemm", f"{n}x{n}x{n}", dtype, target, rep, t))
            rep, t = _report(syrk_kernel, ((2048, 1024), dtype), target=target, trans=0, lower=1)
            rows.append(_row("syrk (n=2048, k=1024, lower)", "2048x1024", dtype, target, rep, t))

    header = (f"{'kernel':<30} {'shape':<28} {'dtype':<9} {'target':<6} {'TensorE%':>8} {'dtype%':>7} "
              f"{'tensor us':>10} {'dma us':>9} {'vector us':>9} {'bound':>7} {'TFLOPS':>7}")
    print("trnblas NKI kernels: trncore.sim cost MODEL (not a measurement)")
    print(header)
    print("-" * len(header))
    for r in rows:
        b = r["busy_us"]
        util, util_dtype = r["tensor_utilisation_bf16_peak"], r["tensor_utilisation_dtype_peak"]
        print(f"{r['kernel']:<30} {r['shape']:<28} {r['dtype']:<9} {r['target']:<6} "
              f"{100 * util:>7.1f}% {100 * util_dtype:>6.1f}% "
              f"{b['tensor']:>10.1f} {b['dma']:>9.1f} {b['vector']:>9.1f} {r['bound_by']:>7} "
              f"{r['modelled_tflops']:>7.1f}")
    must = next(r for r in rows if r["kernel"] == "gemm" and r["shape"] == "4096x4096x4096"
                and r["dtype"] == "bfloat16" and r["target"] == "trn1") if 4096 in args.sizes else None
    if must is not None:
        ok = must["tensor_utilisation_bf16_peak"] >= 0.9 and must["compute_bound"]
        util = must["tensor_utilisation_bf16_peak"]
        print(f"\nmust-show (GEMM 4096^3 bf16 trn1): TensorE {100 * util:.1f}%, "
              f"compute-bound {must['compute_bound']} -> {'PASS' if ok else 'FAIL'}")
    written = write_json("trnblas_nki_report", rows, path=args.json, model="trncore.sim cost model")
    png = plot(rows)
    print(f"wrote {written} and {png}")


def plot(rows: list[dict]) -> Path:
    """Modelled GEMM throughput per size, one line per (target, dtype), against each peak."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for target in ("trn1", "trn2"):
        for dtype, style in (("bfloat16", "-o"), ("float32", "--s")):
            pts = sorted((int(r["shape"].split("x")[0]), r["modelled_tflops"]) for r in rows
                         if r["kernel"] == "gemm" and r["target"] == target and r["dtype"] == dtype)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=f"{target} {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("modelled TFLOPS")
    ax.set_title("trnblas GEMM kernel, trncore.sim cost model (not a measurement)")
    ax.legend()
    return save_plot(fig, "trnblas_gemm_model")


if __name__ == "__main__":
    main()
