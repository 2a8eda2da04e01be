"""One rank of a distributed DF-MP2 test run (spawned by test_dfmp2_driver.py): writes the energy
components as float.hex to ``<out>.<rank>`` so the test can compare them bit for bit."""

from __future__ import annotations

import datetime
import sys


def run(rank: int, world: int, init: str, out: str, molecule: str, spin: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # bitwise reproducibility holds at a fixed thread count per rank
    dist.init_process_group(
        "gloo", init_method=f"file://{init}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        from pyscf import gto, scf

        from trntensor.dfmp2 import dfmp2_energy

        mol = gto.M(atom=molecule, basis="cc-pvdz", spin=spin, verbose=0)
        mf = (scf.UHF(mol) if spin else scf.RHF(mol)).density_fit().run()
        r = dfmp2_energy(mf, "cc-pvdz-ri", group=dist.group.WORLD, occ_block=1, aux_chunk=24)
        with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
            f.write(f"{r.e_corr.hex()} {r.e_os.hex()} {r.e_ss.hex()} {r.ranks}\n")
        if rank == 0:  # the same SCF without a process group: the single-process result
            alone = dfmp2_energy(mf, "cc-pvdz-ri", occ_block=1, aux_chunk=24)
            with open(f"{out}.alone", "w", encoding="utf-8") as f:
                f.write(f"{alone.e_corr.hex()} {alone.e_os.hex()} {alone.e_ss.hex()}\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    world, init, out, molecule = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    spin = int(sys.argv[5])
    mp.spawn(run, args=(world, init, out, molecule, spin), nprocs=world)
