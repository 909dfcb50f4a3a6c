"""The cost of proof of delivery: dtr.digest of a tensor beside a copy of this rank's block
and the change it would prove (S(0) -> S(1)), side by side in one run, medians of 9.

    python bench/digest_bench.py                    # 1 rank
    mpirun -n 2 python bench/digest_bench.py        # 2 ranks, a core each: S(0) blocks

Prints one line per size on rank 0: the digest's time and rate over this rank's bytes, the
copy's, and the change's.
"""
import time

import numpy as np
from mpi4py import MPI

import dtr

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
mesh = dtr.Mesh((n,))


def median(f):
    t = []
    for _ in range(9):
        comm.Barrier()
        t0 = time.perf_counter()
        f()
        t.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return sorted(t)[4]


for mib in (1, 16, 64):
    rows = mib * (1 << 18) // 256
    local = np.random.default_rng(rank).standard_normal((rows // n, 256)).astype(np.float32)
    shape = (rows // n * n, 256)
    td = median(lambda: dtr.digest(local, mesh, "S(0)", shape=shape))
    tc = median(lambda: local.copy())
    tm = median(lambda: dtr.redistribute(local, mesh, "S(0)", "S(1)", shape=shape))
    mine = local.nbytes / 2**30
    if rank == 0:
        print(f"{n} rank(s), {mib} MiB f32: digest {td * 1e3:.2f} ms ({mine / td:.2f} GiB/s a "
              f"rank), copy of the block {tc * 1e3:.2f} ms ({mine / tc:.2f} GiB/s), "
              f"S(0) -> S(1) {tm * 1e3:.2f} ms; digest / change {td / tm:.2f}", flush=True)
