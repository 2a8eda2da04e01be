"""trnfft's NKI route on the trncore.sim emulator: the cost model's report for batched 1-D FFTs.

For n = 256, 1024, 4096 (batch 128, complex64) and each variant of the staged kernel — stages of
the plan's radices 8/4 (``plan``) or consecutive radices fused up to 128 (``fused``), four or three
(``gauss``) real multiplications per complex product, every stage's output through HBM — and the
on-chip kernel (``onchip``: two stages, the intermediate kept in SBUF, the default where it
applies) it traces the kernel the NKI route launches
and prints the emulator's modelled figures on trn1 and trn2: TensorE utilisation (of the fp32
peak; the useful flops are the ``5 n log2 n`` of the FFT, not the matmuls' own), HBM traffic over
the minimum (inputs, tables and outputs once), SBUF peak, instruction counts and the modelled time
(lower bound: engines fully overlapped). The default variant is also run on random data and its
relative L2 error against ``numpy.fft`` (float64) printed. Then the real transforms: ``rfft`` of
even ``n`` launches the kernel at ``n/2`` (the packed signal), so its modelled kernel time is set
beside a full-length launch's, with the emulator's ``rfft`` error. Beyond two stages (n = 32768,
65536) the three-stage on-chip kernel is set beside the staged one; then the must-show check of
issue 18, half-precision errors per length, DCT/DST errors and launches, and bfloat16-input
traffic. A MODEL, not a measurement.

    ./scripts/python benchmarks/trnfft_nki_report.py [--sizes 256,1024,4096] [--batch 128]
        [--json benchmarks/results/trnfft_nki.json] [--no-accuracy]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch

import trncore.sim as sim
from trnfft import create_plan
from trnfft._drivers import fft as _nki
from trnfft.kernels.fft import fft_onchip3_kernel, fft_onchip_kernel, fft_stages_kernel
from trnfft.kernels.geometry import onchip_geometry

VARIANTS = (("plan", False), ("plan", True), ("fused", False), ("fused", True), ("onchip", True))
#: The must-show of issue 18: on trn1 at batch 128 the on-chip kernel's HBM traffic at most 1.1x
#: the minimum and its modelled time below the staged kernel's before the change.
BEFORE_US = {256: 10.3, 1024: 18.8, 4096: 57.5}
TARGETS = ("trn1", "trn2")
# Dense fp32 TensorE peak per core: AWS architecture guides for NKI 0.3.0 (Trainium/Inferentia2, Trainium2).
FP32_PEAK = {"trn1": 23e12, "trn2": 20e12}


def _specs(n: int, batch: int, grouping: str, gauss: bool) -> tuple[list, dict]:
    plan = create_plan(n, dtype=torch.complex64)
    if grouping == "onchip":
        setup = plan.kernel_setup()
        onchip = setup.onchip
        padded = onchip.padded_batch(batch)
        specs = [((padded, n), "float32")] * 2 + [(tuple(t.shape), "float32") for t in setup.onchip_tables]
        return specs, {**onchip.params(padded), "scale": 1.0}
    setup = plan.kernel_setup(grouping)
    geo = setup.geometry
    padded = geo.padded_batch(batch)
    specs = [((padded, n), "float32")] * 2 + [((t.numel(),), "float32") for t in setup.tables]
    params = {"stages": geo.stage_params(), "batch_tile": geo.tile_for(padded), "gauss": gauss, "scale": 1.0}
    return specs, params


def default_variant(n: int) -> tuple[str, bool]:
    """The kernel the NKI route launches for length ``n``: on-chip where it applies, else staged."""
    if _nki.KERNEL_OPTIONS.onchip and onchip_geometry(n) is not None:
        return "onchip", True
    return _nki.KERNEL_OPTIONS.grouping, _nki.KERNEL_OPTIONS.gauss


def model(n: int, batch: int, grouping: str, gauss: bool, target: str) -> dict:
    """The emulator's cost report for one configuration, with FFT-flop utilisation added."""
    specs, params = _specs(n, batch, grouping, gauss)
    kernel = fft_onchip_kernel if grouping == "onchip" else fft_stages_kernel
    rep = sim.report(kernel, *specs, target=target, **params)
    d = rep.as_dict()
    fft_flops = 5 * batch * n * math.log2(n)
    tensor_s = d["busy_seconds"]["tensor"]
    return {
        "n": n,
        "batch": batch,
        "grouping": grouping,
        "gauss": gauss,
        "target": target,
        "stages": [params["n1"], params["n2"]] if grouping == "onchip" else [s[1] for s in params["stages"]],
        "modelled_time_us": d["lower_bound_s"] * 1e6,
        "modelled_time_upper_us": d["upper_bound_s"] * 1e6,
        "busy_us": {k: v * 1e6 for k, v in d["busy_seconds"].items()},
        "tensor_util_fft_flops_fp32": fft_flops / (FP32_PEAK[target] * tensor_s) if tensor_s else 0.0,
        "tensor_util_matmul_flops_fp32": d["tensor_utilisation_dtype"],
        "traffic_over_min": d["traffic_over_min"],
        "dma_bytes_in": d["dma_bytes_in"],
        "dma_bytes_out": d["dma_bytes_out"],
        "min_traffic_bytes": d["min_traffic_bytes"],
        "sbuf_peak_bytes": d["sbuf_peak_bytes"],
        "psum_peak_banks": d["psum_peak_banks"],
        "instructions": d["instructions"],
        "fft_gflops_at_model_time": fft_flops / d["lower_bound_s"] / 1e9,
    }


def accuracy(n: int, batch: int, real: bool = False) -> float:
    """Relative L2 error of the NKI route (emulator, default variant) against numpy.fft in float64:
    ``fft`` of complex data, or ``rfft`` of real data with ``real``."""
    import os

    import trnfft

    os.environ["TRNFFT_USE_SIMULATOR"] = "1"
    os.environ["TRNFFT_REQUIRE_NKI"] = "1"
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    try:
        gen = torch.Generator().manual_seed(n)
        if real:
            x = torch.randn(batch, n, generator=gen)
            y, ref = trnfft.rfft(x).numpy(), np.fft.rfft(x.numpy().astype(np.float64))
        else:
            x = torch.complex(torch.randn(batch, n, generator=gen), torch.randn(batch, n, generator=gen))
            y, ref = trnfft.fft(x).numpy(), np.fft.fft(x.numpy().astype(np.complex128))
        return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    finally:
        trnfft.set_backend(previous)
        del os.environ["TRNFFT_USE_SIMULATOR"], os.environ["TRNFFT_REQUIRE_NKI"]


#: Lengths of the half-precision error table: DFT GEMM, odd, prime (Bluestein), on-chip, staged.
HALF_LENGTHS = (16, 100, 127, 128, 129, 1000, 1009, 1024, 4096, 16384, 32768)


def half_precision_errors(lengths: tuple[int, ...], batch: int = 8) -> list[dict]:
    """``fft`` of float16 / bfloat16 rows on the emulator: relative L2 error against the float64
    transform of the same half-precision values (the kernel's own error) and against the float64
    transform of the float64 data the inputs were rounded from (input rounding included)."""
    import os

    import trnfft

    os.environ["TRNFFT_USE_SIMULATOR"] = "1"
    os.environ["TRNFFT_REQUIRE_NKI"] = "1"
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    rows = []
    try:
        for n in lengths:
            data = torch.randn(batch, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
            for dtype in (torch.bfloat16, torch.float16):
                x = data.to(dtype)
                y = trnfft.fft(x).numpy()
                same = np.fft.fft(x.double().numpy())
                exact = np.fft.fft(data.numpy())
                rows.append(
                    {
                        "n": n,
                        "dtype": str(dtype).removeprefix("torch."),
                        "kernel_error": float(np.linalg.norm(y - same) / np.linalg.norm(same)),
                        "total_error": float(np.linalg.norm(y - exact) / np.linalg.norm(exact)),
                    }
                )
    finally:
        trnfft.set_backend(previous)
        del os.environ["TRNFFT_USE_SIMULATOR"], os.environ["TRNFFT_REQUIRE_NKI"]
    return rows


#: Lengths of the DCT/DST error table: the matrix path (<= 128) and the FFT path beyond.
R2R_LENGTHS = (16, 97, 128, 131, 256, 1000, 4096)


def r2r_errors(lengths: tuple[int, ...], batch: int = 8) -> list[dict]:
    """dct/idct/dst/idst of types 1-4 (norm "ortho") of float32 rows on the emulator: relative L2
    error against scipy.fft in float64, per length and transform."""
    import os

    import scipy.fft as sf

    import trnfft

    os.environ["TRNFFT_USE_SIMULATOR"] = "1"
    os.environ["TRNFFT_REQUIRE_NKI"] = "1"
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    rows = []
    try:
        for n in lengths:
            x = torch.randn(batch, n, generator=torch.Generator().manual_seed(n))
            for name in ("dct", "idct", "dst", "idst"):
                for t in (1, 2, 3, 4):
                    y = getattr(trnfft, name)(x, t, norm="ortho").numpy()
                    ref = getattr(sf, name)(x.double().numpy(), t, norm="ortho")
                    err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
                    rows.append({"n": n, "function": name, "type": t, "rel_l2_error": err})
    finally:
        trnfft.set_backend(previous)
        del os.environ["TRNFFT_USE_SIMULATOR"], os.environ["TRNFFT_REQUIRE_NKI"]
    return rows


def r2r_models(lengths: tuple[int, ...], batch: int) -> list[dict]:
    """Modelled kernel time of dct types 2 and 4 and dst type 1 of ``batch`` float32 rows on the NKI
    route (every launch the call makes, summed), beside the complex ``fft`` of the same length; the
    torch element-wise steps around the kernels are outside the model."""
    import os

    import trnfft

    os.environ["TRNFFT_USE_SIMULATOR"] = "1"
    os.environ["TRNFFT_REQUIRE_NKI"] = "1"
    previous = trnfft.get_backend()
    trnfft.set_backend("nki")
    rows = []
    try:
        for n in lengths:
            x = torch.randn(batch, n, generator=torch.Generator().manual_seed(n))
            z = torch.complex(x, x)
            calls = {
                "fft": lambda z=z: trnfft.fft(z),
                "dct-2": lambda x=x: trnfft.dct(x, 2),
                "dct-4": lambda x=x: trnfft.dct(x, 4),
                "dst-1": lambda x=x: trnfft.dst(x, 1),
            }
            for name, call in calls.items():
                with sim.record_launches() as record:
                    call()
                launches = sum(record.counts().values())
                row = {"n": n, "batch": batch, "transform": name, "launches": launches}
                for target in TARGETS:
                    row[f"{target}_us"] = record.model(target).lower_s * 1e6
                rows.append(row)
    finally:
        trnfft.set_backend(previous)
        del os.environ["TRNFFT_USE_SIMULATOR"], os.environ["TRNFFT_REQUIRE_NKI"]
    return rows


#: Lengths beyond two stages: the three-stage on-chip kernel against the staged kernel.
THREE_STAGE_LENGTHS = (32768, 65536)


def three_stage_rows(lengths: tuple[int, ...], batch: int) -> list[dict]:
    """Modelled trn1/trn2 time and traffic of the three-stage on-chip kernel and the staged kernel."""
    rows = []
    for n in lengths:
        plan = create_plan(n, dtype=torch.complex64)
        setup = plan.kernel_setup()
        geo = setup.onchip3
        padded = geo.padded_batch(batch)
        specs = [((padded, n), "float32")] * 2 + [(tuple(t.shape), "float32") for t in setup.onchip3_tables]
        for target in TARGETS:
            rep = sim.report(fft_onchip3_kernel, *specs, target=target, **geo.params(padded), scale=1.0)
            d = rep.as_dict()
            staged = model(n, batch, "fused", True, target)
            rows.append(
                {
                    "n": n,
                    "target": target,
                    "factors": [geo.n1, geo.n2, geo.n3],
                    "batch_tile": geo.tile_for(padded),
                    "onchip3_us": d["lower_bound_s"] * 1e6,
                    "onchip3_traffic_over_min": d["traffic_over_min"],
                    "onchip3_busy_us": {k: v * 1e6 for k, v in d["busy_seconds"].items()},
                    "staged_us": staged["modelled_time_us"],
                    "staged_traffic_over_min": staged["traffic_over_min"],
                }
            )
    return rows


def main() -> None:
    """Print the table and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--json", default="benchmarks/results/trnfft_nki.json")
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    print("cost MODEL of trncore.sim, not a measurement; batch", args.batch, "complex64")
    header = (
        f"{'n':>5} {'variant':>13} {'stages':>12} {'tgt':>4} {'time us':>9} {'TensorE':>8} {'Vec':>6} "
        f"{'DMA':>6} {'util(fft)':>9} {'traffic/min':>11} {'SBUF KiB':>8}"
    )
    print(header)
    for n in sizes:
        for grouping, gauss in VARIANTS:
            for target in TARGETS:
                r = model(n, args.batch, grouping, gauss, target)
                rows.append(r)
                variant = f"{grouping}{'+3M' if gauss else '+4M'}"
                busy = r["busy_us"]
                print(
                    f"{n:>5} {variant:>13} {'x'.join(map(str, r['stages'])):>12} {target:>4} "
                    f"{r['modelled_time_us']:>9.1f} {busy['tensor']:>8.1f} {busy['vector']:>6.1f} "
                    f"{busy['dma']:>6.1f} {r['tensor_util_fft_flops_fp32']:>9.1%} "
                    f"{r['traffic_over_min']:>11.2f} {r['sbuf_peak_bytes'] / 1024:>8.1f}"
                )
    result = {
        "rows": rows,
        "default": {
            "grouping": _nki.KERNEL_OPTIONS.grouping,
            "gauss": _nki.KERNEL_OPTIONS.gauss,
            "onchip": _nki.KERNEL_OPTIONS.onchip,
        },
    }
    result["three_stage"] = three_stage_rows(THREE_STAGE_LENGTHS, args.batch)
    print(f"\nthree stages on chip vs the staged kernel, batch {args.batch}")
    for r in result["three_stage"]:
        print(
            f"n={r['n']:>6} {r['target']} ({'x'.join(map(str, r['factors']))}, tile {r['batch_tile']}): "
            f"{r['onchip3_us']:8.1f} us, traffic/min {r['onchip3_traffic_over_min']:.2f} | staged "
            f"{r['staged_us']:8.1f} us, traffic/min {r['staged_traffic_over_min']:.2f}"
        )
    print("\nmust-show (trn1, batch 128): on-chip kernel vs the staged kernel before issue 18")
    result["must_show"] = []
    for n in sizes:
        row = next(
            (r for r in rows if (r["n"], r["grouping"], r["target"]) == (n, "onchip", "trn1")), None
        )
        if row is None or n not in BEFORE_US:
            continue
        ok = row["traffic_over_min"] <= 1.1 and row["modelled_time_us"] < BEFORE_US[n]
        result["must_show"].append(
            {
                "n": n,
                "traffic_over_min": row["traffic_over_min"],
                "modelled_time_us": row["modelled_time_us"],
                "before_us": BEFORE_US[n],
                "pass": ok,
            }
        )
        print(
            f"n={n:>5}: traffic/min {row['traffic_over_min']:.3f} (<= 1.1), modelled "
            f"{row['modelled_time_us']:.1f} us (before {BEFORE_US[n]} us) -> {'PASS' if ok else 'FAIL'}"
        )
    if not args.no_accuracy:
        result["rel_l2_error"] = {}
        for n in sizes:
            err = accuracy(n, args.batch)
            result["rel_l2_error"][str(n)] = err
            print(f"n={n} batch={args.batch}: relative L2 error vs numpy.fft (float64) {err:.2e}")
    print("\nrfft (real input): kernel launched at n/2 vs a full-length launch, default variant")
    result["rfft"] = []
    for n in sizes:
        for target in TARGETS:
            half = model(n // 2, args.batch, *default_variant(n // 2), target)["modelled_time_us"]
            full = next(  # the full-length launch is one of the rows above
                r["modelled_time_us"]
                for r in rows
                if (r["n"], r["grouping"], r["gauss"], r["target"]) == (n, *default_variant(n), target)
            )
            row = {"n": n, "target": target, "half_length_kernel_us": half, "full_length_kernel_us": full}
            if not args.no_accuracy and target == TARGETS[0]:
                row["rel_l2_error"] = accuracy(n, args.batch, real=True)
            result["rfft"].append(row)
            err = f", relative L2 error {row['rel_l2_error']:.2e}" if "rel_l2_error" in row else ""
            ratio = half / full
            print(f"n={n:>5} {target}: {half:8.1f} us at n/2 vs {full:8.1f} us at n ({ratio:.2f}x){err}")
    if not args.no_accuracy:
        result["half_precision"] = half_precision_errors(HALF_LENGTHS)
        print("\nhalf-precision inputs (fft of a batch of 8 random rows), relative L2 error:")
        print(f"{'n':>6} {'dtype':>9} {'vs float64 of same values':>26} {'vs float64 unrounded data':>26}")
        for row in result["half_precision"]:
            print(f"{row['n']:>6} {row['dtype']:>9} {row['kernel_error']:>26.2e} {row['total_error']:>26.2e}")
    if not args.no_accuracy:
        result["r2r"] = r2r_errors(R2R_LENGTHS)
        print("\nDCT/DST (types 1-4, forward and inverse, norm='ortho') vs scipy.fft float64:")
        for n in R2R_LENGTHS:
            errs = [r["rel_l2_error"] for r in result["r2r"] if r["n"] == n]
            print(f"n={n:>5}: relative L2 error {min(errs):.1e} .. {max(errs):.1e} over 16 transforms")
    result["r2r_model"] = r2r_models((64, 128, 256, 1024, 4096), args.batch)
    print(f"\nDCT/DST on the NKI route, batch {args.batch}: modelled kernel time (all launches), trn1 / trn2")
    for row in result["r2r_model"]:
        print(
            f"n={row['n']:>5} {row['transform']:>6}: {row['trn1_us']:7.1f} / {row['trn2_us']:7.1f} us "
            f"({row['launches']} launches)"
        )
    print("\nbfloat16 input planes (the DMA casts on load), on-chip kernel, batch", args.batch)
    result["bfloat16_input"] = []
    for n in sizes:
        if onchip_geometry(n) is None:
            continue
        for target in TARGETS:
            specs, params = _specs(n, args.batch, "onchip", True)
            specs = [(specs[0][0], "bfloat16")] * 2 + specs[2:]
            d = sim.report(fft_onchip_kernel, *specs, target=target, **params).as_dict()
            row = {
                "n": n,
                "target": target,
                "modelled_time_us": d["lower_bound_s"] * 1e6,
                "dma_us": d["busy_seconds"]["dma"] * 1e6,
                "hbm_bytes": d["dma_bytes_in"] + d["dma_bytes_out"],
            }
            result["bfloat16_input"].append(row)
            print(
                f"n={n:>5} {target}: {row['modelled_time_us']:.1f} us (DMA {row['dma_us']:.1f} us, "
                f"{row['hbm_bytes'] / 2**20:.2f} MiB through HBM)"
            )
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
