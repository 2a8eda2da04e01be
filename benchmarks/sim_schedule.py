"""The emulator's modelled schedules: timelines of suite kernels on trn1, and what scheduling costs.

For the suite GEMM (M = N = K = 4096, bfloat16), one launch of trntensor's DF-MP2 energy kernel at
naphthalene/cc-pVDZ size (nocc 34, nvir 146, naux 672: the shapes fix the program, so the
integrals are synthetic) and a batched FFT (n = 1024, batch 128, complex64), on trn1:

* the cost report's bounds and the dependency-aware modelled time (trncore.sim.schedule);
* a timeline picture per kernel in docs/assets/bench/ (one lane per engine / DMA engine);
* the whole DF-MP2 energy step (every launch of the energy kernel) as one modelled number with
  its bounds, on trn1 and trn2;
* the 1024³ GEMM timeline drawn by the CLI (``python -m trncore.sim report ... --timeline``),
  shown in docs/emulator-cost.md;
* the run time of ``python -m trncore.sim report`` on the 4096³ GEMM with and without the
  schedule: in-process, trace + report against the schedule's share; and, with
  ``--baseline DIR`` (a checkout of the commit before the scheduler), the CLI of both, interleaved,
  medians. Target: scheduling adds at most 2x.

A cost MODEL, not a measurement on Trainium.

    ./scripts/python benchmarks/sim_schedule.py [--repeats 5] [--baseline /tmp/trnsci-base]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _results import PLOTS_DIR, ROOT, shown, write_json

import trncore.sim as sim
import trntensor
from trncore.kernels import gemm_kernel
from trncore.sim.schedule import schedule

GEMM_FILE = ROOT / "packages" / "trncore" / "src" / "trncore" / "kernels" / "gemm.py"
NAPHTHALENE = {"nocc": 34, "nvir": 146, "naux": 672}


def _summary(name: str, prog: sim.Program, png: str) -> dict:
    rep = prog.report()
    tl = sim.timeline(prog)
    path = PLOTS_DIR / png
    tl.plot(path, title=f"{name} on {rep.target}: modelled {rep.modelled_s * 1e6:.1f} µs, bounds "
            f"[{rep.lower_bound_s * 1e6:.1f}, {rep.upper_bound_s * 1e6:.1f}] µs (cost MODEL)")
    crit: dict[str, float] = {}
    for seg in rep.critical_path:
        crit[seg["engine"]] = crit.get(seg["engine"], 0.0) + seg["seconds"] * 1e6
    return {
        "kernel": name,
        "target": rep.target,
        "instructions": rep.total_instructions,
        "lower_us": rep.lower_bound_s * 1e6,
        "modelled_us": rep.modelled_s * 1e6,
        "upper_us": rep.upper_bound_s * 1e6,
        "overlap": rep.overlap,
        "critical_path_us_by_engine": crit,
        "idle_us": {k: v * 1e6 for k, v in rep.idle_seconds.items() if not k.startswith("dma")},
        "picture": shown(path),
    }


def energy_step() -> tuple[list[dict], sim.Program]:
    """trntensor's energy step at naphthalene size on the emulator's kernels: its model per target."""
    nocc, nvir, naux = NAPHTHALENE["nocc"], NAPHTHALENE["nvir"], NAPHTHALENE["naux"]
    gen = torch.Generator().manual_seed(0)
    b = torch.randn(nocc, nvir, naux, generator=gen) / naux**0.5
    eo = -1.5 + torch.rand(nocc, generator=gen, dtype=torch.float64)
    ev = 0.3 + 2 * torch.rand(nvir, generator=gen, dtype=torch.float64)
    os.environ.update({"TRNTENSOR_USE_SIMULATOR": "1", "TRNTENSOR_REQUIRE_NKI": "1"})
    trntensor.set_backend("nki")
    try:
        with sim.record_launches() as record:
            trntensor.mp2_energy(b, eo.float(), ev.float())
    finally:
        trntensor.set_backend("auto")
    rows = []
    for target in ("trn1", "trn2"):
        m = record.model(target)
        rows.append({"target": target, "launches": record.counts(), "lower_us": m.lower_s * 1e6,
                     "modelled_us": m.modelled_s * 1e6, "upper_us": m.upper_s * 1e6, "bound": m.bound})
    progs = sorted(record.programs("trn1"), key=lambda pc: -pc[1])
    return rows, progs[0][0]


def _time_cli(pythonpath: str, scheduled: bool) -> float:
    """Wall time of one ``report`` CLI run on the 4096³ GEMM with trncore from ``pythonpath``."""
    cmd = [sys.executable, "-m", "trncore.sim", "report", f"{GEMM_FILE}::gemm_kernel",
           "--shapes", "4096x4096:bfloat16,4096x4096:bfloat16", "--target", "trn1"]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if ("modelled (us)" in out.stdout) != scheduled:
        raise RuntimeError(f"{pythonpath}: expected a report {'with' if scheduled else 'without'} schedule")
    return elapsed


def overhead(repeats: int, baseline: Path | None) -> dict:
    """Run time of report on the 4096³ GEMM: the schedule's share, and the CLI before/after."""
    trace_s, report_s, sched_s = [], [], []
    for _ in range(repeats):
        sim.clear_cache()
        t0 = time.perf_counter()
        prog = sim.trace(gemm_kernel, ((4096, 4096), "bfloat16"), ((4096, 4096), "bfloat16"), target="trn1")
        t1 = time.perf_counter()
        prog.report()  # includes one schedule
        t2 = time.perf_counter()
        schedule(prog)
        t3 = time.perf_counter()
        trace_s.append(t1 - t0)
        report_s.append(t2 - t1)
        sched_s.append(t3 - t2)
    med = {k: statistics.median(v) for k, v in
           (("trace_s", trace_s), ("report_s", report_s), ("schedule_s", sched_s))}
    total = med["trace_s"] + med["report_s"]
    out: dict[str, Any] = {"in_process": med, "ratio_in_process": total / (total - med["schedule_s"])}
    if baseline is not None:
        here = str(ROOT / "packages" / "trncore" / "src")
        base = str(baseline / "packages" / "trncore" / "src")
        before, after = [], []
        for _ in range(repeats):  # interleaved
            before.append(_time_cli(base, scheduled=False))
            after.append(_time_cli(here, scheduled=True))
        out["cli_before_s"] = statistics.median(before)
        out["cli_after_s"] = statistics.median(after)
        out["ratio_cli"] = out["cli_after_s"] / out["cli_before_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="checkout of the commit before the scheduler, for the CLI before/after")
    args = parser.parse_args()
    PLOTS_DIR.mkdir(parents=True, exist_ok=True)

    rows = []
    prog = sim.trace(gemm_kernel, ((4096, 4096), "bfloat16"), ((4096, 4096), "bfloat16"), target="trn1")
    rows.append(_summary("GEMM 4096³ bf16", prog, "timeline_gemm_4096_trn1.png"))
    step, energy_prog = energy_step()
    rows.append(_summary("DF-MP2 energy kernel (naphthalene, one launch)", energy_prog,
                         "timeline_mp2_energy_trn1.png"))
    from trnfft import create_plan
    from trnfft.kernels.fft import fft_stages_kernel

    setup = create_plan(1024, dtype=torch.complex64).kernel_setup("fused")
    geo = setup.geometry
    padded = geo.padded_batch(128)
    specs = [((padded, 1024), "float32")] * 2 + [((t.numel(),), "float32") for t in setup.tables]
    fft = sim.trace(fft_stages_kernel, *specs, target="trn1", stages=geo.stage_params(),
                    batch_tile=geo.tile_for(padded), gauss=False, scale=1.0)
    rows.append(_summary("FFT n=1024, batch 128", fft, "timeline_fft_1024_trn1.png"))

    cli_png = PLOTS_DIR / "timeline_gemm_1024_cli.png"
    subprocess.run(
        [sys.executable, "-m", "trncore.sim", "report", f"{GEMM_FILE}::gemm_kernel", "--shapes",
         "1024x1024:bfloat16,1024x1024:bfloat16", "--target", "trn1", "--timeline", str(cli_png)],
        check=True, capture_output=True, cwd=ROOT,
    )
    cost = overhead(args.repeats, args.baseline)

    print("trncore.sim modelled schedules on trn1 (cost MODEL, not a measurement)")
    print(f"{'kernel':<48} {'lower us':>10} {'modelled':>10} {'upper us':>10} {'overlap':>8}")
    for r in rows:
        print(f"{r['kernel']:<48} {r['lower_us']:>10.1f} {r['modelled_us']:>10.1f} {r['upper_us']:>10.1f} "
              f"{r['overlap']:>8.0%}")
    for s in step:
        print(f"DF-MP2 energy step (naphthalene) on {s['target']}: {s['modelled_us'] / 1e3:.2f} ms modelled, "
              f"bounds {s['lower_us'] / 1e3:.2f}-{s['upper_us'] / 1e3:.2f} ms ({s['launches']})")
    med = cost["in_process"]
    print(f"report on GEMM 4096^3: trace {med['trace_s']:.2f} s, report {med['report_s']:.2f} s of which "
          f"schedule {med['schedule_s']:.2f} s -> x{cost['ratio_in_process']:.2f} over no schedule")
    if "ratio_cli" in cost:
        print(f"CLI report, medians: before {cost['cli_before_s']:.2f} s, after {cost['cli_after_s']:.2f} s "
              f"-> x{cost['ratio_cli']:.2f} (target <= 2)")
    path = write_json("sim_schedule", {"kernels": rows, "energy_step": step, "report_runtime": cost},
                      model="trncore.sim cost model with dependency-aware schedule")
    print(f"wrote {path}, pictures in {shown(PLOTS_DIR)}")


if __name__ == "__main__":
    main()
