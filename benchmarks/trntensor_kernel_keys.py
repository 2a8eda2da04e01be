"""Kernel keys and modelled cost of a whole DF-MP2 energy on the trncore.sim emulator.

For each nocc (default 8, 32, 64) a synthetic system (nbasis = nocc + nvir, random symmetric
3-index integrals, random MO coefficients, orbital energies with a gap) runs
``trntensor.ao_to_mo_transform`` and ``trntensor.mp2_energy`` on the float32 kernels under the
emulator with ``TRNTENSOR_REQUIRE_NKI=1``. Printed per nocc:

* the number of distinct kernel keys the whole run used (``trncore.sim.record_launches``) — the
  figure that must stay constant (≤ 4) as nocc grows;
* the launches of each kernel and the emulator's wall time;
* the energy against the float64 PyTorch route (relative difference);
* the **modelled** time of the energy step (and of the transform) on trn1 and trn2
  (``trncore.sim.report`` of each launched program × its launches): lower bound (engines
  overlap perfectly), upper bound (no overlap) and the engine that bounds it. A cost model,
  not a measurement.

    ./scripts/python benchmarks/trntensor_kernel_keys.py [--nocc 8 32 64] [--nvir 96] [--naux 320]
        [--json benchmarks/results/trntensor_kernel_keys.json]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from _results import write_json

import trncore.sim as sim
import trntensor
from trntensor.kernels import ao_to_mo_kernel, mp2_energy_block_kernel

TARGETS = ("trn1", "trn2")


def synthetic(nocc: int, nvir: int, naux: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    n = nocc + nvir
    eri = torch.randn(n, n, naux, generator=gen, dtype=torch.float64) / n
    eri = eri + eri.transpose(0, 1)
    c = torch.randn(n, n, generator=gen, dtype=torch.float64) / n**0.5
    eps = torch.cat(
        [-1.5 + torch.rand(nocc, generator=gen, dtype=torch.float64),
         0.3 + 2 * torch.rand(nvir, generator=gen, dtype=torch.float64)]
    )
    return eri, c[:, :nocc], c[:, nocc:], eps[:nocc], eps[nocc:]


def run(nocc: int, nvir: int, naux: int) -> dict:
    eri, co, cv, eo, ev = synthetic(nocc, nvir, naux)
    trntensor.set_backend("pytorch")
    b64 = trntensor.ao_to_mo_transform(eri, co, cv)
    reference = trntensor.mp2_energy(b64, eo, ev).item()
    os.environ.update({"TRNTENSOR_USE_SIMULATOR": "1", "TRNTENSOR_REQUIRE_NKI": "1"})
    trntensor.set_backend("nki")
    try:
        start = time.perf_counter()
        with sim.record_launches() as record:
            b = trntensor.ao_to_mo_transform(eri.float(), co.float(), cv.float())
            energy = trntensor.mp2_energy(b, eo.float(), ev.float()).item()
        wall = time.perf_counter() - start
    finally:
        for var in ("TRNTENSOR_USE_SIMULATOR", "TRNTENSOR_REQUIRE_NKI"):
            os.environ.pop(var, None)
        trntensor.set_backend("auto")
    return {
        "nocc": nocc, "nvir": nvir, "naux": naux, "nbasis": nocc + nvir,
        "kernel_keys": len(record.keys),
        "launches": record.counts(),
        "emulator_wall_s": wall,
        "energy_float32_kernels": energy,
        "energy_float64_pytorch": reference,
        "relative_difference": abs(energy - reference) / abs(reference),
        "energy_step_model": {
            t: record.model(t, [mp2_energy_block_kernel]).as_dict() for t in TARGETS
        },
        "transform_step_model": {t: record.model(t, [ao_to_mo_kernel]).as_dict() for t in TARGETS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nocc", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--nvir", type=int, default=96)
    parser.add_argument("--naux", type=int, default=320)
    parser.add_argument("--json", type=Path, default=None,
                        help="write the results here (default benchmarks/results/trntensor_kernel_keys.json)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [run(n, args.nvir, args.naux) for n in args.nocc]
    print(f"DF-MP2 on the trncore.sim emulator, float32 kernels (nvir={args.nvir}, naux={args.naux})")
    print(f"{'nocc':>5} {'keys':>5} {'launches':>28} {'emul. s':>8} {'rel. diff':>10}  "
          "energy step, MODELLED (lower-upper us, bound)")
    for r in results:
        launches = ", ".join(f"{k.removesuffix('_kernel')}×{v}" for k, v in sorted(r["launches"].items()))
        model = "; ".join(
            f"{t} {m['lower_s'] * 1e6:.0f}-{m['upper_s'] * 1e6:.0f} ({m['bound']})"
            for t, m in r["energy_step_model"].items()
        )
        print(f"{r['nocc']:>5} {r['kernel_keys']:>5} {launches:>28} {r['emulator_wall_s']:>8.2f} "
              f"{r['relative_difference']:>10.1e}  {model}")
    print("transform step (ao_to_mo), MODELLED: " + "; ".join(
        f"nocc {r['nocc']}: " + ", ".join(
            f"{t} {m['lower_s'] * 1e6:.0f}-{m['upper_s'] * 1e6:.0f} us ({m['bound']})"
            for t, m in r["transform_step_model"].items()
        )
        for r in results
    ))
    counts = {r["kernel_keys"] for r in results}
    print(f"distinct kernel keys per run: {sorted(counts)} (constant: {len(counts) == 1}, "
          f"<= 4: {max(counts) <= 4})")
    written = write_json("trntensor_kernel_keys", results, path=args.json, model="trncore.sim cost model")
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
