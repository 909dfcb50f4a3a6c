"""DTensor in, DTensor out, under torchrun: dtr.torch.redistribute (on dtr's Gloo, and on the
torch engine: torch's own collectives) against DTensor.redistribute on the same DTensors and
the same gloo job, side by side in one run, with torch's own collective for the plan's one
step, dtr.redistribute on the bare local tensors and a copy of the result's bytes (the memory
limit of this machine for a move that must write them) beside them.

    bash bench/pytorch/dtensor_bench.sh [--ranks N] [--mib M]    (torchrun, a core each)

Each call follows a barrier; medians of --reps. The results are compared (equal, or the run
fails) before timing. Prints the table of docs/python.md ("DTensor in and out").
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

import dtr
import dtr.torch

CHANGES = [("S(0) -> R", [Shard(0)], [Replicate()]), ("P(sum) -> R", [Partial()], [Replicate()]),
           ("P(sum) -> S(0)", [Partial()], [Shard(0)]), ("S(0) -> S(1)", [Shard(0)], [Shard(1)])]


def timed(call, reps):
    times = []
    for _ in range(reps):
        dist.barrier()
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def collective(name, local, side, n, rank):
    """torch's own collective for the plan's one step: what the torch engine runs."""
    if name == "S(0) -> R":
        out = torch.empty(side, side)
        return lambda: dist.all_gather_into_tensor(out, local)
    if name == "P(sum) -> R":
        buf = local.clone()
        return lambda: dist.all_reduce(buf)
    if name == "P(sum) -> S(0)":
        out = torch.empty(local.shape[0] // n, side)
        return lambda: dist.reduce_scatter_tensor(out, local)
    out = torch.empty_like(local)  # S(0) -> S(1): an all-to-all of the packed pieces
    return lambda: dist.all_to_all_single(out, local)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (n,))
    side = int((args.mib * 2**20 // 4) ** 0.5) // n * n
    torch.manual_seed(rank)
    if rank == 0:
        print(f"{n} ranks, {side}x{side} f32 ({side * side * 4 / 2**20:.1f} MiB), medians of "
              f"{args.reps}, the slowest rank's")
        print()
        print("| change | DTensor.redistribute, ms | dtr.torch.redistribute (dtr's Gloo), ms | "
              "dtr faster | dtr.torch.redistribute (torch engine), ms | torch's collective "
              "for the plan's step, ms | engine / collective | dtr.redistribute (local "
              "tensors, dtr's Gloo), ms | copy of the result, ms |")
        print("|---|---|---|---|---|---|---|---|---|")
    for name, src, dst in CHANGES:
        full = torch.randint(-20, 20, (side, side)).float()
        local = (full.chunk(n, 0)[rank].contiguous() if src[0].is_shard() else
                 torch.randint(-20, 20, (side, side)).float())
        x = DTensor.from_local(local, mesh, src, run_check=False, shape=(side, side),
                               stride=(side, 1))
        want = x.redistribute(mesh, dst).to_local()
        gloo, engine = (dtr.Mesh.from_torch(mesh, backend=b) for b in ("gloo", "torch"))
        sd = [dtr._placements.placement_text(p) for p in src]
        dd = [dtr._placements.placement_text(p) for p in dst]
        for b in ("gloo", "torch"):
            os.environ["DTR_TORCH_BACKEND"] = b
            if not torch.equal(want, dtr.torch.redistribute(x, dst).to_local()):
                raise SystemExit(f"dtensor_bench.py: {name}: dtr's result on {b} differs "
                                 "from DTensor's")
        times = [timed(lambda: x.redistribute(mesh, dst), args.reps)]
        for b in ("gloo", "torch"):
            os.environ["DTR_TORCH_BACKEND"] = b
            times.append(timed(lambda: dtr.torch.redistribute(x, dst), args.reps))
        times.append(timed(collective(name, local, side, n, rank), args.reps))
        times.append(timed(lambda: dtr.redistribute(local, gloo, sd, dd, shape=(side, side)),
                           args.reps))
        times.append(timed(lambda: want.clone(), args.reps))
        worst = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # the slowest rank's medians
        tt, tg, te, tc, tl, tcopy = worst.tolist()
        if rank == 0:
            print(f"| {name} | {tt:.2f} | {tg:.2f} | {tt / tg:.1f}x | {te:.2f} | {tc:.2f} | "
                  f"{te / tc:.2f}x | {tl:.2f} | {tcopy:.2f} |", flush=True)
        del engine
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
