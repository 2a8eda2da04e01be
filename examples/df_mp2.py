"""DF-MP2 correlation energy with trnsci, checked against PySCF.

PySCF builds the molecule, the RHF reference and the Cholesky-decomposed 3-index integrals;
trntensor transforms them to ``B[i,a,P]`` and computes the closed-shell DF-MP2 energy

    E_corr = Σ_ijab T_ij^ab (2 T_ij^ab − T_ij^ba) / (ε_i + ε_j − ε_a − ε_b),   T_ij^ab = Σ_P B_iaP B_jbP

and the result is compared with PySCF's own DF-MP2 on the same SCF and auxiliary basis.

    ./scripts/python examples/df_mp2.py --molecule water --check
    ./scripts/python examples/df_mp2.py --molecule benzene --frozen-core --json
    TRNSCI_USE_SIMULATOR=1 ./scripts/python examples/df_mp2.py --backend nki --dtype float32 --check
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from molecules import BUILTIN, load_geometry

#: |E_corr − PySCF| allowed by --check: float64 on the PyTorch route agrees to rounding; float32
#: (and the NKI kernels, which compute in float32 whatever the input dtype) to the accuracy
#: float32 sums of ~1e6 terms can give.
TOLERANCE = {"float64": 1e-8, "float32": 1e-5}
TARGETS = ("trn1", "trn2")

DEFAULT_AUXBASIS = {"cc-pvdz": "cc-pvdz-ri", "cc-pvtz": "cc-pvtz-ri", "cc-pvqz": "cc-pvqz-ri",
                    "aug-cc-pvdz": "aug-cc-pvdz-ri", "aug-cc-pvtz": "aug-cc-pvtz-ri",
                    "def2-svp": "def2-svp-ri",
                    "def2-tzvp": "def2-tzvp-ri"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--molecule", default="water", help=f"{', '.join(BUILTIN)} or an .xyz file (default water)",
    )
    p.add_argument("--basis", default="cc-pvdz", help="orbital basis (default cc-pvdz)")
    p.add_argument("--auxbasis", help="fitting basis (default: the RI basis matching --basis)")
    p.add_argument("--frozen-core", action="store_true", help="leave core orbitals uncorrelated")
    p.add_argument("--backend", choices=("auto", "pytorch", "nki"), default="auto")
    p.add_argument("--simulator", action="store_true", help="run NKI kernels on the CPU emulator")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--memory", type=float, default=None, help="memory budget for the energy step, GiB")
    p.add_argument("--check", action="store_true", help="exit non-zero if E_corr disagrees with PySCF")
    p.add_argument("--json", action="store_true", help="print machine-readable results instead of text")
    args = p.parse_args(argv)
    if args.auxbasis is None:
        args.auxbasis = DEFAULT_AUXBASIS.get(args.basis.lower())
        if args.auxbasis is None:
            p.error(f"no default RI basis known for --basis {args.basis}; pass --auxbasis")
    if args.memory is not None and args.memory <= 0:
        p.error("--memory must be a positive number of GiB")
    return args


class KernelRoute:
    """Watches the correlation step: which route really ran, and on the emulator what it launched.

    A kernel route that fell back to PyTorch says so (NkiFallbackWarning); those warnings are
    collected, shown once on stderr, and the reported route becomes "pytorch (fallback)". On the
    emulator every launch is recorded, for the number of distinct kernel keys of the run and the
    modelled trn1/trn2 time of the energy step.
    """

    def __init__(self, simulator: bool) -> None:
        self.simulator = simulator
        self.fallbacks: list[str] = []
        self.records: dict[str, object] = {}

    @contextlib.contextmanager
    def watch(self, stage: str) -> Iterator[None]:
        from trncore import NkiFallbackWarning

        with contextlib.ExitStack() as stack:
            caught = stack.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always", NkiFallbackWarning)
            if self.simulator:
                import trncore.sim

                self.records[stage] = stack.enter_context(trncore.sim.record_launches())
            yield
        for w in caught:
            if issubclass(w.category, NkiFallbackWarning):
                self.fallbacks.append(str(w.message))
                print(f"warning: {w.message}", file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)

    def summary(self) -> dict[str, object]:
        """Kernel keys and launches of the whole step, and the modelled energy step per target."""
        if not self.records:
            return {}
        keys = set().union(*(r.keys for r in self.records.values()))
        launches: dict[str, int] = {}
        for r in self.records.values():
            for name, n in r.counts().items():
                launches[name] = launches.get(name, 0) + n
        energy = self.records["energy"]
        return {
            "kernel_keys": len(keys),
            "launches": launches,
            "energy_step_model": {t: energy.model(t).as_dict() for t in TARGETS},
        }


class Stages:
    """Times named stages and shows a progress bar on a terminal."""

    def __init__(self, names: list[str], show: bool) -> None:
        self.times: dict[str, float] = {}
        self.bar = None
        if show:
            from tqdm import tqdm

            self.bar = tqdm(total=len(names), unit="stage", leave=False, file=sys.stderr)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.bar is not None:
            self.bar.set_description(name)
        start = time.perf_counter()
        yield
        self.times[name] = time.perf_counter() - start
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> dict[str, object]:
    """Run the whole calculation and return its results (energies in Hartree, times in s)."""
    from pyscf import df, gto, scf
    from pyscf.data.elements import chemcore
    from pyscf.mp import dfmp2

    import trnblas
    import trntensor

    if args.simulator:
        os.environ["TRNSCI_USE_SIMULATOR"] = "1"
    for lib in (trnblas, trntensor):
        lib.set_backend(args.backend)
    dtype = getattr(torch, args.dtype)
    budget = None if args.memory is None else int(args.memory * 2**30)

    names = ["molecule", "scf", "integrals", "transform", "energy", "pyscf_dfmp2"]
    stages = Stages(names, show=sys.stderr.isatty() and not args.json)
    with stages.stage("molecule"):
        mol = gto.M(atom=load_geometry(args.molecule), basis=args.basis, verbose=0)
        frozen = chemcore(mol) if args.frozen_core else 0
    with stages.stage("scf"):
        mf = scf.RHF(mol).density_fit()  # density-fitted SCF (JK fitting basis): fast, and shared below
        mf.kernel()
        if not mf.converged:
            raise RuntimeError("the RHF calculation did not converge")
    with stages.stage("integrals"):
        cderi = np.asarray(df.incore.cholesky_eri(mol, auxbasis=args.auxbasis))
        # cderi is (naux, npair) with J^-1/2 already applied
    nocc = int(np.count_nonzero(mf.mo_occ > 0))
    c = torch.from_numpy(np.ascontiguousarray(mf.mo_coeff)).to(dtype)
    eps = torch.from_numpy(np.asarray(mf.mo_energy)).to(dtype)
    kernels = KernelRoute(args.simulator)
    with stages.stage("transform"), kernels.watch("transform"):
        B = trntensor.ao_to_mo_transform(torch.from_numpy(cderi).to(dtype), c[:, :nocc], c[:, nocc:])
    with stages.stage("energy"), kernels.watch("energy"):
        e_corr = float(trntensor.mp2_energy(B, eps[:nocc], eps[nocc:], frozen=frozen, memory_budget=budget))
    with stages.stage("pyscf_dfmp2"):
        pt = dfmp2.DFMP2(mf, frozen=frozen or None)
        pt.with_df = df.DF(mol, auxbasis=args.auxbasis)  # the same fitting basis as ours
        e_ref = float(pt.kernel()[0])
    stages.close()

    route = trntensor._library.explain()[0].value
    summary = kernels.summary()
    if kernels.fallbacks:
        route = "pytorch (fallback)"
    elif route == "simulator" and not summary.get("kernel_keys"):
        route = "pytorch (below the kernels' size threshold)"
    # The kernels compute in float32 whatever the input dtype (float64 only with the opt-in).
    tolerance = TOLERANCE["float32" if route in ("simulator", "device") else args.dtype]
    return {
        "molecule": args.molecule,
        "basis": args.basis,
        "auxbasis": args.auxbasis,
        "frozen_core_orbitals": frozen,
        "nbasis": int(mol.nao),
        "nocc": nocc,
        "nvir": int(mol.nao) - nocc,
        "naux": int(cderi.shape[0]),
        "dtype": args.dtype,
        "backend": args.backend,
        "route": route,
        "e_hf": float(mf.e_tot),
        "e_corr": e_corr,
        "e_total": float(mf.e_tot) + e_corr,
        "e_corr_pyscf": e_ref,
        "difference": e_corr - e_ref,
        "tolerance": tolerance,
        "agrees": abs(e_corr - e_ref) <= tolerance,
        "seconds": stages.times,
        "fallbacks": kernels.fallbacks,
        **summary,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def report(r: dict[str, object]) -> str:
    t = r["seconds"]
    assert isinstance(t, dict)
    lines = [
        f"DF-MP2  {r['molecule']}  {r['basis']} / {r['auxbasis']}  "
        f"(nbasis {r['nbasis']}, nocc {r['nocc']}, nvir {r['nvir']}, naux {r['naux']}, "
        f"frozen {r['frozen_core_orbitals']})",
        f"route: {r['route']} (backend {r['backend']}, {r['dtype']})",
        f"  E_HF            {r['e_hf']:+.10f} Eh",
        f"  E_corr          {r['e_corr']:+.10f} Eh",
        f"  E_total         {r['e_total']:+.10f} Eh",
        f"  E_corr (PySCF)  {r['e_corr_pyscf']:+.10f} Eh",
        f"  difference      {r['difference']:+.3e} Eh   (tolerance {r['tolerance']:.0e}: "
        f"{'agrees' if r['agrees'] else 'DISAGREES'})",
        "  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()),
        f"  correlation step (transform + energy) {t['transform'] + t['energy']:.2f} s, "
        f"PySCF DFMP2 {t['pyscf_dfmp2']:.2f} s; peak RSS {r['peak_rss_mib']:.0f} MiB",
    ]
    if "kernel_keys" in r:
        launches = ", ".join(f"{k} x{v}" for k, v in sorted(r["launches"].items()))
        lines.append(f"  emulator: {r['kernel_keys']} distinct kernel keys ({launches})")
        for target, m in r["energy_step_model"].items():
            lines.append(
                f"  energy step on {target}, MODELLED (trncore.sim cost model, not a measurement): "
                f"{m['modelled_s'] * 1e6:.0f} us scheduled (bounds {m['lower_s'] * 1e6:.0f}-"
                f"{m['upper_s'] * 1e6:.0f} us), bound by {m['bound']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: no energy, no traceback; PySCF's scratch files go with the interpreter's exit.
        print("interrupted: no energy computed", file=sys.stderr)
        return 130  # 128 + SIGINT, the shell's convention
    print(json.dumps(results, indent=1) if args.json else report(results))
    if args.check and not results["agrees"]:
        print(
            f"check failed: |E_corr - PySCF| = {abs(results['difference']):.3e} Eh"
            f" > {results['tolerance']:.0e} Eh",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
