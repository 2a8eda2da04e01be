"""Ranks of a distributed DF-MP2 test run (spawned by test_dfmp2_driver.py).

    _dfmp2_rank.py WORLD INIT OUT MOLECULE SPIN [memory=BYTES] [timeout=S] [scratch=DIR] [alone=0]

Each rank writes its energy components as float.hex to ``<out>.<rank>`` (so the test can compare
them bit for bit), or, when the run fails, the error's class and message to ``<out>.<rank>.err``.
Rank 0 also writes the single-process result of the same SCF to ``<out>.alone`` (unless
``alone=0``). The launcher waits for rank 0, then stops any rank still running (a hung one) with
SIGTERM, which each rank turns into an orderly exit (its scratch files removed), and
exits with 0 only when every rank succeeded.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time


def run(rank: int, world: int, init: str, out: str, molecule: str, spin: int, opts: dict[str, str]) -> None:
    import torch
    import torch.distributed as dist

    # SIGTERM unwinds (as in examples/df_mp2.py), so the driver removes its scratch on the way out
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    torch.set_num_threads(1)  # bitwise reproducibility holds at a fixed thread count per rank
    dist.init_process_group(
        "gloo", init_method=f"file://{init}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    from pyscf import gto, scf

    from trntensor.dfmp2 import dfmp2_energy

    mol = gto.M(atom=molecule, basis="cc-pvdz", spin=spin, verbose=0)
    mf = (scf.UHF(mol) if spin else scf.RHF(mol)).density_fit().run()
    kw = {
        "memory": int(opts["memory"]) if "memory" in opts else None,
        "timeout": float(opts["timeout"]) if "timeout" in opts else None,
        "scratch": opts.get("scratch"),
        "occ_block": 1,
        "aux_chunk": 24,
    }
    try:
        r = dfmp2_energy(mf, "cc-pvdz-ri", group=dist.group.WORLD, **kw)  # type: ignore[arg-type]
    except Exception as exc:
        with open(f"{out}.{rank}.err", "w", encoding="utf-8") as f:
            f.write(f"{type(exc).__name__} {getattr(exc, 'peer', '')}\n{exc}\n")
        # A process group that lost a rank cannot be torn down cleanly (gloo waits for the lost
        # rank's pending work up to its own timeout): leave at once, as the example does.
        os._exit(3)
    with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
        f.write(f"{r.e_corr.hex()} {r.e_os.hex()} {r.e_ss.hex()} {r.ranks} {int(r.plan.streamed)}\n")
    if rank == 0 and opts.get("alone", "1") == "1":  # the same SCF alone: the single-process result
        kw["memory"] = None
        alone = dfmp2_energy(mf, "cc-pvdz-ri", **kw)  # type: ignore[arg-type]
        with open(f"{out}.alone", "w", encoding="utf-8") as f:
            f.write(f"{alone.e_corr.hex()} {alone.e_os.hex()} {alone.e_ss.hex()}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    import multiprocessing as mp

    world, init, out, molecule = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    spin = int(sys.argv[5])
    opts = dict(a.split("=", 1) for a in sys.argv[6:])
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run, args=(r, world, init, out, molecule, spin, opts)) for r in range(world)]
    for p in procs:
        p.start()
    procs[0].join(timeout=600)
    deadline = time.monotonic() + (30 if procs[0].exitcode == 0 else 0.5)  # rank 0 failed: end
    for p in procs[1:]:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():  # a hung rank: the run has already failed; stop it as torchrun does
            p.terminate()
            p.join(timeout=20)
        if p.is_alive():
            p.kill()
            p.join()
    sys.exit(0 if all(p.exitcode == 0 for p in procs) else 1)
