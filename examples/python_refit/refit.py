"""An RL-style refit under torchrun: trainer ranks train a model whose weights are DTensors
sharded as FSDP shards them (Shard(0) over the trainer mesh), and after every step
dtr.torch.redistribute moves each weight to the inference ranks, another DeviceMesh, in the
layout a tensor-parallel engine serves from (W1 column-parallel, W2 row-parallel). DTensor
itself refuses a move between meshes ("Cross device mesh comm not supported yet"). Every step
proves delivery without a gather: dtr.torch.digest of each weight on the trainer mesh equals
its digest on the inference mesh. The inference ranks then serve a batch through the new
weights (y = gelu(x W1) W2, the row-parallel partial sums reduced by dtr: P -> R), and every
rank checks the answer against the same model on one rank.

    torchrun --nproc-per-node 4 refit.py      # trainer ranks 0, 1; inference ranks 2, 3
    torchrun --nproc-per-node 2 refit.py      # one trainer rank, one inference rank

Prints, from the first inference rank, one line per step (the refit's time, the digests
agreeing, the answer's largest error) and "refit.py: N steps, digests agreed N, worst error E".
The exit status is 1 where a digest or an answer disagrees.
"""
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import dtr.torch

HIDDEN, FFN, BATCH, STEPS, LR = 32, 128, 8, 5, 0.1


def train_step(w, step):
    """A trainer's step on its own shard: SGD on 0.5 |W - T|^2 towards a target that moves
    with the step (what the rank's shard of the gradient would be in a real job)."""
    local = w.to_local()
    g = torch.Generator().manual_seed(1000 + step)
    target = torch.randn(w.shape, generator=g)
    if local.numel():
        rows = torch.chunk(torch.arange(w.shape[0]), w.device_mesh.size())[
            w.device_mesh.get_coordinate()[0]]
        local -= LR * (local - target[rows])
    return target


def main():
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    if n < 2 or n % 2:
        sys.exit("refit.py: run it on an even number of ranks (torchrun --nproc-per-node 2 or 4)")
    half = n // 2
    trainer = DeviceMesh("cpu", torch.arange(half), mesh_dim_names=("fsdp",))
    serving = DeviceMesh("cpu", torch.arange(half, n), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    full = {"w1": torch.randn(HIDDEN, FFN) / 4, "w2": torch.randn(FFN, HIDDEN) / 4}
    # the trainer's weights (a rank outside the trainer mesh holds an empty local tensor)
    weights = {k: distribute_tensor(v, trainer, [Shard(0)]) for k, v in full.items()}
    # the layout the inference engine serves from
    serve_as = {"w1": [Shard(1)], "w2": [Shard(0)]}
    ok, agreed, worst = True, 0, 0.0
    for step in range(STEPS):
        for k in full:  # the step on the trainer's shards, and the same on one rank
            target = train_step(weights[k], step)
            full[k] -= LR * (full[k] - target)
        dist.barrier()
        t0 = time.perf_counter()
        served = {k: dtr.torch.redistribute(w, serve_as[k], device_mesh=serving)
                  for k, w in weights.items()}
        refit_ms = (time.perf_counter() - t0) * 1e3
        # proof of delivery: each weight's digest on both meshes, compared on every rank
        pairs = [(dtr.torch.digest(weights[k]), dtr.torch.digest(served[k])) for k in full]
        seen = [None] * n
        dist.all_gather_object(seen, pairs)
        src = [next(p[i][0] for p in seen if p[i][0] is not None) for i in range(len(full))]
        dst = [next(p[i][1] for p in seen if p[i][1] is not None) for i in range(len(full))]
        same = src == dst
        agreed += same
        # serving: gelu(x W1[:, cols]) W2[cols, :] on each inference rank, summed by dtr
        g = torch.Generator().manual_seed(step)
        x = torch.randn(BATCH, HIDDEN, generator=g)
        y = None
        if serving.get_coordinate() is not None:  # (a collective of the inference ranks)
            h = torch.nn.functional.gelu(x @ served["w1"].to_local())
            part = DTensor.from_local(h @ served["w2"].to_local(), serving, [Partial()])
            y = dtr.torch.redistribute(part, [Replicate()]).to_local()
        err = 0.0
        if y is not None:
            ref = torch.nn.functional.gelu(x @ full["w1"]) @ full["w2"]
            err = (y - ref).abs().max().item()
        worst = max(worst, err)
        ok = ok and same and err < 1e-4
        if rank == half:
            print(f"step {step}: refit {refit_ms:.2f} ms, digests "
                  f"{'agree' if same else 'DIFFER'} ({src[0]:016x} ...), answer error {err:.2e}",
                  flush=True)
    if rank == half:
        print(f"refit.py: {STEPS} steps, digests agreed {agreed}, worst error {worst:.2e}",
              flush=True)
    status = torch.tensor([0 if ok else 1])
    dist.all_reduce(status, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    sys.exit(int(status.item()))


if __name__ == "__main__":
    main()
