"""DF-MP2 correlation step: trnsci (PyTorch route) against PySCF's DFMP2, side by side.

For each molecule one RHF is run, then the two correlation steps alternate ``--repeats`` times:

* trnsci: ``trntensor.dfmp2_energy`` (integrals, transform, fit, pair energies: everything after
  the SCF), one process;
* PySCF: its best energy-only run, ``DFMP2(mf).kernel(with_t2=False)``, with the same auxiliary
  basis (which builds its own integrals; keeping t2 would cost O(o²v²) memory for nothing).

Both at ``--threads`` threads (default: the process's default; ``--threads 1`` is what to use on a
shared machine, where torch's intra-op threads wait on each other whenever another process holds
the second core). Reported per molecule: median seconds of each, their
ratio (target ≤ 1.0 on naphthalene), the
energy difference, and the peak memory each step adds over the SCF's resident set (Linux VmHWM,
reset before each step). Then the example runs on the emulator's float32 NKI kernels
(``--emulator-molecules``): the distinct kernel keys of the whole run (target ≤ 4), the agreement
with PySCF, and the modelled trn1/trn2 time of the energy step with its bounding engine (a cost
model, not a measurement). Results go to ``benchmarks/results/df_mp2.json`` and a plot to
``docs/assets/bench/df_mp2.png``.

    ./scripts/python benchmarks/df_mp2.py [--molecules water benzene naphthalene] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _results import ROOT, pyplot, save_plot, shown, write_json


def _vm(field: str) -> int:
    """A ``/proc/self/status`` memory field in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _peak_extra(fn):
    """Run ``fn`` and return (result, bytes of resident memory it added at its peak)."""
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _vm("VmRSS")
    result = fn()
    return result, max(0, _vm("VmHWM") - before)


def worker(molecule: str, basis: str, auxbasis: str, repeats: int) -> dict:
    """Measure one molecule in this process (called in a fresh subprocess per molecule)."""
    import numpy as np
    import torch
    from pyscf import df, gto, scf
    from pyscf.mp import dfmp2

    sys.path.insert(0, str(ROOT / "examples"))
    from molecules import load_geometry

    import trntensor

    trntensor.set_backend("pytorch")
    mol = gto.M(atom=load_geometry(molecule), basis=basis, verbose=0)
    mf = scf.RHF(mol).density_fit()
    mf.kernel()
    nocc = int(np.count_nonzero(mf.mo_occ > 0))

    def ours() -> float:
        return trntensor.dfmp2_energy(mf, auxbasis).e_corr

    def pyscf() -> float:
        pt = dfmp2.DFMP2(mf)
        pt.with_df = df.DF(mol, auxbasis=auxbasis)
        return float(pt.kernel(with_t2=False)[0])

    times = {"trnsci": [], "pyscf": []}
    peaks = {"trnsci": [], "pyscf": []}
    energies = {}
    for _ in range(repeats):
        for name, fn in (("trnsci", ours), ("pyscf", pyscf)):
            start = time.perf_counter()
            energies[name], extra = _peak_extra(fn)
            times[name].append(time.perf_counter() - start)
            peaks[name].append(extra)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "molecule": molecule,
        "nbasis": int(mol.nao),
        "nocc": nocc,
        "torch_threads": torch.get_num_threads(),
        "seconds": times,
        "median_s": med,
        "ratio": med["trnsci"] / med["pyscf"],
        "peak_extra_mib": {k: max(v) / 2**20 for k, v in peaks.items()},
        "e_corr": energies["trnsci"],
        "difference": energies["trnsci"] - energies["pyscf"],
    }


def emulator_run(molecule: str, basis: str, auxbasis: str) -> dict:
    """The example on the emulator's float32 kernels: keys, agreement and the modelled energy step."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "df_mp2.py"), "--molecule", molecule, "--basis", basis,
         "--auxbasis", auxbasis, "--backend", "nki", "--simulator", "--dtype", "float32", "--json"],
        capture_output=True, text=True, check=True,
    )
    r = json.loads(out.stdout)
    if r["route"] != "simulator":
        raise RuntimeError(f"{molecule}: the kernels did not run ({r['route']}): {r['fallbacks']}")
    keep = ("molecule", "nbasis", "nocc", "nvir", "naux", "kernel_keys", "launches", "difference",
            "energy_step_model", "seconds")
    return {k: r[k] for k in keep}


def plot(results: list[dict]) -> Path:
    plt = pyplot()
    names = [r["molecule"] for r in results]
    x = range(len(names))
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
    bars = ((-0.2, "trnsci", "trnsci dfmp2_energy"), (0.2, "pyscf", "PySCF DFMP2, with_t2=False"))
    for offset, key, label in bars:
        ax_t.bar([i + offset for i in x], [r["median_s"][key] for r in results], 0.4, label=label)
        ax_m.bar([i + offset for i in x], [r["peak_extra_mib"][key] for r in results], 0.4, label=label)
    panels = ((ax_t, "correlation step, median", "seconds"), (ax_m, "peak memory added", "MiB"))
    for ax, title, unit in panels:
        ax.set_xticks(list(x), names)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.legend()
    for i, r in enumerate(results):
        ax_t.annotate(f"{r['ratio']:.2f}x", (i, max(r["median_s"].values())), ha="center", va="bottom")
    return save_plot(fig, "df_mp2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecules", nargs="+", default=["water", "benzene", "naphthalene"])
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--auxbasis", default="cc-pvdz-ri")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for both (default: unset)")
    parser.add_argument("--emulator-molecules", nargs="*", default=["water", "ammonia", "benzene"],
                        help="molecules run on the emulator's float32 kernels (none to skip)")
    parser.add_argument("--worker", nargs=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.basis, args.auxbasis, args.repeats)))
        return 0
    results = []
    for molecule in args.molecules:  # a fresh process per molecule: clean memory figures
        env = dict(os.environ)
        if args.threads is not None:
            env["OMP_NUM_THREADS"] = str(args.threads)
        out = subprocess.run(
            [sys.executable, __file__, "--worker", molecule, "--basis", args.basis,
             "--auxbasis", args.auxbasis, "--repeats", str(args.repeats)],
            capture_output=True, text=True, check=True, env=env,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    threads = "default" if args.threads is None else args.threads
    print(f"DF-MP2 correlation step, {args.basis}/{args.auxbasis}, median of {args.repeats} (interleaved), "
          f"threads {threads}")
    print(f"{'molecule':<12}{'nbasis':>7}{'trnsci s':>10}{'PySCF s':>10}{'ratio':>7}"
          f"{'trnsci MiB':>12}{'PySCF MiB':>11}{'|dE| Eh':>10}")
    for r in results:
        print(f"{r['molecule']:<12}{r['nbasis']:>7}{r['median_s']['trnsci']:>10.3f}{r['median_s']['pyscf']:>10.3f}"
              f"{r['ratio']:>7.2f}{r['peak_extra_mib']['trnsci']:>12.0f}{r['peak_extra_mib']['pyscf']:>11.0f}"
              f"{abs(r['difference']):>10.1e}")
    emulated = [emulator_run(m, args.basis, args.auxbasis) for m in args.emulator_molecules]
    if emulated:
        print("\nDF-MP2 on the trncore.sim emulator, float32 NKI kernels (examples/df_mp2.py --simulator)")
        print(f"{'molecule':<12}{'keys':>5}{'|dE| Eh':>10}   energy step, MODELLED (lower-upper us, bound)")
        for r in emulated:
            model = "; ".join(f"{t} {m['lower_s'] * 1e6:.0f}-{m['upper_s'] * 1e6:.0f} ({m['bound']})"
                              for t, m in r["energy_step_model"].items())
            print(f"{r['molecule']:<12}{r['kernel_keys']:>5}{abs(r['difference']):>10.1e}   {model}")
        print(f"distinct kernel keys per run: {sorted({r['kernel_keys'] for r in emulated})} (target <= 4)")
    written = write_json("df_mp2", results, basis=args.basis, auxbasis=args.auxbasis, threads=threads,
                         emulator=emulated)
    png = plot(results)
    print(f"wrote {shown(written)} and {shown(png)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
