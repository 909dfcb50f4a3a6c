"""DTensor in, DTensor out, under torchrun: dtr.torch.redistribute (on dtr's Gloo, and on the
torch engine: torch's own collectives) against DTensor.redistribute on the same DTensors and
the same gloo job, side by side in one run, with torch's own collective for the plan's one
step (in place, into a buffer it reuses), the same step written by hand with torch's calls as
the engine must run it (to a new result, the input left as it was, the pieces packed where the
plan packs them), dtr.redistribute on the bare local tensors and a copy of the result's bytes
(the memory limit of this machine for a move that must write them) beside them.

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


def by_hand(name, local, side, n):
    """The plan's step written with torch's own calls, giving what redistribute gives: a new
    result, the input untouched, S(0) -> S(1)'s pieces packed for the all-to-all (they land in
    place: piece m of the result is rows m of the new local tensor). The torch engine's work
    without dtr's planning, agreement and dispatch."""
    if name == "S(0) -> R":
        def call():
            out = torch.empty(side, side)
            dist.all_gather_into_tensor(out, local)
            return out
    elif name == "P(sum) -> R":
        def call():
            out = local.clone()
            dist.all_reduce(out)
            return out
    elif name == "P(sum) -> S(0)":
        def call():
            out = torch.empty(local.shape[0] // n, side)
            dist.reduce_scatter_tensor(out, local)
            return out
    else:
        def call():
            out = torch.empty(side, side // n)
            dist.all_to_all_single(out, torch.cat(local.chunk(n, 1)))
            return out
    return call


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
              "for the plan's step, ms | engine / collective | the step by hand in torch, ms | "
              "engine / by hand | dtr.redistribute (local tensors, dtr's Gloo), ms | copy of "
              "the result, ms |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
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
        if not torch.equal(want, by_hand(name, local, side, n)()):
            raise SystemExit(f"dtensor_bench.py: {name}: the step by hand differs from "
                             "DTensor's result")
        times = [timed(lambda: x.redistribute(mesh, dst), args.reps)]
        for b in ("gloo", "torch"):
            os.environ["DTR_TORCH_BACKEND"] = b
            times.append(timed(lambda: dtr.torch.redistribute(x, dst), args.reps))
        times.append(timed(collective(name, local, side, n, rank), args.reps))
        times.append(timed(by_hand(name, local, side, n), args.reps))
        times.append(timed(lambda: dtr.redistribute(local, gloo, sd, dd, shape=(side, side)),
                           args.reps))
        times.append(timed(lambda: want.clone(), args.reps))
        worst = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # the slowest rank's medians
        tt, tg, te, tc, th, tl, tcopy = worst.tolist()
        if rank == 0:
            print(f"| {name} | {tt:.2f} | {tg:.2f} | {tt / tg:.1f}x | {te:.2f} | {tc:.2f} | "
                  f"{te / tc:.2f}x | {th:.2f} | {te / th:.2f}x | {tl:.2f} | {tcopy:.2f} |",
                  flush=True)
        del engine
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
