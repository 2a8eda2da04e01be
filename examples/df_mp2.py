"""DF-MP2 correlation energy with trnsci, checked against PySCF.

PySCF builds the molecule, the RHF reference and the Cholesky-decomposed 3-index integrals;
trntensor transforms them to ``B[i,a,P]`` and computes the closed-shell DF-MP2 energy

    E_corr = Σ_ijab T_ij^ab (2 T_ij^ab − T_ij^ba) / (ε_i + ε_j − ε_a − ε_b),   T_ij^ab = Σ_P B_iaP B_jbP

and the result is compared with PySCF's own DF-MP2 on the same SCF and auxiliary basis.

Open shells (UHF, ``--spin`` = 2S as in PySCF), spin components and SCS-MP2, frozen orbitals as
PySCF takes them, and several processes (``torchrun``; gloo on a CPU) go through
:func:`trntensor.dfmp2_energy`, whose energy is bitwise the same for any number of ranks.

    ./scripts/python examples/df_mp2.py --molecule water --check
    ./scripts/python examples/df_mp2.py --molecule benzene --frozen-core --json
    ./scripts/python examples/df_mp2.py --molecule water --charge 1 --spin 1 --scs --frozen 0
    torchrun --nproc-per-node 2 examples/df_mp2.py --molecule benzene --check
    TRNSCI_USE_SIMULATOR=1 ./scripts/python examples/df_mp2.py --backend nki --dtype float32 --check
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
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
    p.add_argument(
        "--frozen", type=_frozen_arg, default=None,
        help="orbitals to leave out: a count of the lowest (e.g. 2) or indices (e.g. 0,1,5), as PySCF",
    )
    p.add_argument("--charge", type=int, default=0, help="molecular charge (default 0)")
    p.add_argument("--spin", type=int, default=0, help="2S, as PySCF (default 0); non-zero runs UHF")
    p.add_argument("--scs", action="store_true", help="report SCS-MP2 (6/5 E_os + 1/3 E_ss) as well")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a rank waits for the others before the run fails (default 600)")
    p.add_argument("--scratch", help="directory for B on disk when it exceeds --memory (default: TMPDIR)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or memory plan on stderr")
    p.add_argument("--backend", choices=("auto", "pytorch", "nki"), default="auto")
    p.add_argument("--simulator", action="store_true", help="run NKI kernels on the CPU emulator")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--memory", type=float, default=None,
                   help="memory per rank, GiB: PySCF's max_memory and the correlation step's budget "
                   "(B goes to disk when it does not fit)")
    p.add_argument("--check", action="store_true", help="exit non-zero if E_corr disagrees with PySCF")
    p.add_argument("--json", action="store_true", help="print machine-readable results instead of text")
    args = p.parse_args(argv)
    if args.auxbasis is None:
        args.auxbasis = DEFAULT_AUXBASIS.get(args.basis.lower())
        if args.auxbasis is None:
            p.error(f"no default RI basis known for --basis {args.basis}; pass --auxbasis")
    if args.memory is not None and args.memory <= 0:
        p.error("--memory must be a positive number of GiB")
    if args.frozen is not None and args.frozen_core:
        p.error("--frozen and --frozen-core exclude each other")
    if args.timeout <= 0:
        p.error("--timeout must be a positive number of seconds")
    kernel_route = args.backend == "nki" or args.simulator or args.dtype == "float32"
    if kernel_route:
        chosen = [o for o, on in (("--backend nki", args.backend == "nki"), ("--simulator", args.simulator),
                                  ("--dtype float32", args.dtype == "float32")) if on]
        if _world_size() > 1:
            p.error(
                f"{' / '.join(chosen)} selects the kernel route, which runs the whole calculation on one "
                f"process: under torchrun (WORLD_SIZE={_world_size()}) every rank would repeat it. Run "
                "it without torchrun, or drop the option for the float64 PyTorch route, which splits "
                "the work over the ranks"
            )
        wanted = [o for o, on in (("--spin", args.spin), ("--scs", args.scs),
                                  ("--frozen with a list", isinstance(args.frozen, list))) if on]
        if wanted:
            p.error(
                f"{', '.join(wanted)} run on the float64 PyTorch route (trntensor.dfmp2_energy); "
                f"drop {' / '.join(chosen)}"
            )
    return args


def _frozen_arg(text: str) -> int | list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count or comma-separated indices, got {text!r}"
        ) from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values[0] if "," not in text else values


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


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


def run(args: argparse.Namespace, group: object = None) -> dict[str, object]:
    """Run the whole calculation and return its results (energies in Hartree, times in s).

    The float64 PyTorch route goes through trntensor.dfmp2_energy (RHF or UHF, spin components,
    any number of ranks); the kernel routes (``--backend nki``, ``--simulator``) and float32 run
    the building blocks (ao_to_mo_transform, mp2_energy) on one process, closed shell.
    """
    kernel_route = args.backend == "nki" or args.simulator or args.dtype == "float32"
    return run_kernels(args) if kernel_route else run_driver(args, group)


def _molecule(args: argparse.Namespace) -> object:
    from pyscf import gto

    mol = gto.M(atom=load_geometry(args.molecule), basis=args.basis, charge=args.charge, spin=args.spin,
                verbose=0)
    if args.memory is not None:  # --memory bounds PySCF's SCF and integrals too (MB, its unit)
        mol.max_memory = args.memory * 1024
    return mol


def run_driver(args: argparse.Namespace, group: object) -> dict[str, object]:
    """DF-MP2 with trntensor.dfmp2_energy, checked against PySCF's energy-only DF-MP2 (rank 0)."""
    from pyscf import df, scf
    from pyscf import lib as pyscf_lib
    from pyscf.data.elements import chemcore
    from pyscf.mp import dfmp2, dfump2

    import trntensor

    rank = 0 if group is None else torch.distributed.get_rank(group)
    show = not (args.quiet or args.json) and rank == 0
    times: dict[str, float] = {}

    def timed(name: str, fn: object) -> object:
        start = time.perf_counter()
        out = fn()  # type: ignore[operator]
        times[name] = time.perf_counter() - start
        return out

    mol = timed("molecule", lambda: _molecule(args))
    frozen = chemcore(mol) if args.frozen_core else args.frozen
    mf = scf.UHF(mol) if args.spin else scf.RHF(mol)
    mf = mf.density_fit()
    timed("scf", mf.kernel)
    if not mf.converged:
        raise RuntimeError("the SCF did not converge")
    budget = None if args.memory is None else int(args.memory * 2**30)

    def show_plan(plan: object) -> None:
        if show:
            print(plan.describe(), file=sys.stderr)  # type: ignore[attr-defined]

    res = timed("correlation", lambda: trntensor.dfmp2_energy(
        mf, args.auxbasis, frozen=frozen, group=group, memory=budget, timeout=args.timeout,
        scratch=args.scratch, progress=show, on_plan=show_plan,
    ))
    out: dict[str, object] = {
        "molecule": args.molecule, "basis": args.basis, "auxbasis": args.auxbasis,
        "charge": args.charge, "spin": args.spin, "reference": "UHF" if args.spin else "RHF",
        "frozen": frozen, "frozen_core_orbitals": frozen if args.frozen_core else 0,
        "nbasis": int(mol.nao), "nocc": list(res.nocc) if res.unrestricted else res.nocc[0],
        "nvir": list(res.nvir) if res.unrestricted else res.nvir[0], "naux": res.naux,
        "dtype": "float64", "backend": args.backend, "route": "pytorch", "ranks": res.ranks,
        "e_hf": float(mf.e_tot), "e_corr": res.e_corr, "e_os": res.e_os, "e_ss": res.e_ss,
        "e_scs": res.scs(), "e_total": float(mf.e_tot) + res.e_corr,
        "memory_plan_mib": res.plan.total / 2**20, "b_on_disk": res.plan.streamed,
        "b_on_disk_mib": res.plan.disk / 2**20,
        # where rank 0's correlation step spent its time, by part: elapsed, CPU, waiting (s), collectives
        "parts": {name: t.as_dict() for name, t in res.timings.items()},
    }
    if rank == 0:  # the reference: PySCF's energy-only DF-MP2 on the same SCF and fitting basis
        cls = dfump2.DFUMP2 if args.spin else dfmp2.DFMP2
        pt = cls(mf, frozen=frozen or None)
        pt.with_df = df.DF(mol, auxbasis=args.auxbasis)
        # The reference is a check, not the run --memory bounds: PySCF refuses to start when its
        # max_memory is below the process's resident size, so it gets PySCF's default.
        pt.max_memory = max(pt.max_memory, pyscf_lib.param.MAX_MEMORY)
        timed("pyscf_dfmp2", lambda: pt.kernel(with_t2=False))
        tolerance = TOLERANCE["float64"]
        ref_scs = 1.2 * float(pt.e_corr_os) + float(pt.e_corr_ss) / 3
        checked = [res.e_corr - float(pt.e_corr)] + ([res.scs() - ref_scs] if args.scs else [])
        out.update({
            "e_corr_pyscf": float(pt.e_corr), "e_os_pyscf": float(pt.e_corr_os),
            "e_ss_pyscf": float(pt.e_corr_ss), "e_scs_pyscf": ref_scs,
            "difference": res.e_corr - float(pt.e_corr), "tolerance": tolerance,
            "agrees": all(abs(d) <= tolerance for d in checked),
        })
    out.update({
        "seconds": times, "fallbacks": [],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    })
    return out


def run_kernels(args: argparse.Namespace) -> dict[str, object]:
    """The building blocks on one process (closed shell), on any route including the kernels."""
    from pyscf import df, scf
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
    stages = Stages(names, show=sys.stderr.isatty() and not (args.json or args.quiet))
    with stages.stage("molecule"):
        mol = _molecule(args)
        frozen = chemcore(mol) if args.frozen_core else (args.frozen or 0)
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
        e_ref = float(pt.kernel(with_t2=False)[0])
    stages.close()

    route = trntensor.explain()[0].value
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
        "e_os": None,  # spin components: on the float64 PyTorch route (trntensor.dfmp2_energy)
        "e_ss": None,
        "e_scs": None,
        "ranks": 1,
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
    frozen = r.get("frozen") or r["frozen_core_orbitals"]
    lines = [
        f"DF-MP2  {r['molecule']}  {r['basis']} / {r['auxbasis']}  "
        f"(nbasis {r['nbasis']}, nocc {r['nocc']}, nvir {r['nvir']}, naux {r['naux']}, frozen {frozen})",
        f"route: {r['route']} (backend {r['backend']}, {r['dtype']}, {r['ranks']} rank(s))",
        f"  E_HF            {r['e_hf']:+.10f} Eh",
        f"  E_corr          {r['e_corr']:+.10f} Eh",
    ]
    if r["e_os"] is not None:
        lines += [
            f"    opposite-spin {r['e_os']:+.10f} Eh   (PySCF {r['e_os_pyscf']:+.10f})",
            f"    same-spin     {r['e_ss']:+.10f} Eh   (PySCF {r['e_ss_pyscf']:+.10f})",
            f"  E_corr (SCS)    {r['e_scs']:+.10f} Eh   (PySCF {r['e_scs_pyscf']:+.10f})",
        ]
    correlation = t["correlation"] if "correlation" in t else t["transform"] + t["energy"]
    lines += [
        f"  E_total         {r['e_total']:+.10f} Eh",
        f"  E_corr (PySCF)  {r['e_corr_pyscf']:+.10f} Eh",
        f"  difference      {r['difference']:+.3e} Eh   (tolerance {r['tolerance']:.0e}: "
        f"{'agrees' if r['agrees'] else 'DISAGREES'})",
        "  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()),
        f"  correlation step {correlation:.2f} s, PySCF DFMP2 (energy only) {t['pyscf_dfmp2']:.2f} s; "
        f"peak RSS {r['peak_rss_mib']:.0f} MiB",
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


def _init_ranks(args: argparse.Namespace) -> object:
    """The process group when launched by torchrun with several ranks (gloo; on a Neuron host set
    TRNSCI_DIST_BACKEND=xla for the XLA process group), else None."""
    if _world_size() <= 1:
        return None
    import datetime

    import torch.distributed as dist

    # gloo prints its connection messages to the C stdout; keep stdout for results (--json).
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        dist.init_process_group(
            os.environ.get("TRNSCI_DIST_BACKEND", "gloo"), timeout=datetime.timedelta(seconds=args.timeout)
        )
        dist.barrier()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return dist.group.WORLD


def _leave(group: object, code: int) -> int:
    """The exit code of a failed run. With ranks, end the process at once: a process group that
    lost a rank cannot be torn down (gloo would wait for the lost rank up to its timeout)."""
    if group is None and _world_size() <= 1:
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (torchrun stopping the other ranks, a batch system's limit): unwind, so that the
    correlation step removes its scratch files, and exit without an energy."""
    raise SystemExit(143)  # 128 + SIGTERM, the shell's convention


def main(argv: list[str] | None = None) -> int:
    from trntensor.dfmp2 import RankFailure

    args = parse_args(argv)
    group = None
    rank = int(os.environ.get("RANK", "0"))
    where = f"rank {rank} of {_world_size()}: " if _world_size() > 1 else ""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        group = _init_ranks(args)
        results = run(args, group)
    except RankFailure as exc:  # names the stage, this rank and the rank it lost
        print(f"error: {exc}", file=sys.stderr)
        return _leave(group, 3)
    except (ValueError, RuntimeError, MemoryError) as exc:
        print(f"error: {where}{exc or type(exc).__name__}", file=sys.stderr)
        return _leave(group, 2)
    except KeyboardInterrupt:
        # Ctrl-C: no energy, no traceback; PySCF's scratch files go with the interpreter's exit.
        print(f"interrupted: {where}no energy computed", file=sys.stderr)
        return _leave(group, 130)  # 128 + SIGINT, the shell's convention
    except SystemExit as exc:
        if exc.code != 143:
            raise
        print(f"terminated: {where}no energy computed", file=sys.stderr)
        return _leave(group, 143)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if group is not None:
        torch.distributed.destroy_process_group()
    if rank != 0:
        return 0  # rank 0 reports (every rank computed the same energy)
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
