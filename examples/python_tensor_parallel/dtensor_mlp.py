"""A tensor-parallel MLP on DTensors under torchrun: dtr.torch.redistribute moves the
activations, DTensor in and DTensor out, and autograd runs dtr's backward; checked against
the same model on one rank.

    torchrun --nproc-per-node 4 dtensor_mlp.py      # TP 4, no mpirun, no mpi4py

The model is y = gelu(x W1) W2 with a mean-squared loss and SGD, W1 column-parallel and W2
row-parallel over the job's ranks (Megatron), the sequence (the rows of x) sharded between
the layers (sequence parallelism):
  forward   x: S(0) -> R                       y: P -> S(0)
  backward  dx: P -> S(0) (x's local gradient is a partial sum: grad_placements=[Partial()])
            dy: S(0) -> R (DTensor's backward of a Partial source)
Every rank also trains the whole model on one rank (plain torch) and checks its shards of the
weights against it after each step.
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import dtr.torch

SEQ, HIDDEN, FFN, STEPS, LR = 10, 16, 32, 5, 0.05


def main():
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (n,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    w1, w2 = torch.randn(HIDDEN, FFN) / 4, torch.randn(FFN, HIDDEN) / 4
    ref1, ref2 = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    cols = torch.chunk(torch.arange(FFN), n)[rank]
    p1 = w1[:, cols].clone().requires_grad_()          # column-parallel
    p2 = w2[cols, :].clone().requires_grad_()          # row-parallel
    worst = 0.0
    for step in range(STEPS):
        g = torch.Generator().manual_seed(step)
        x_full, target = torch.randn(SEQ, HIDDEN, generator=g), torch.randn(SEQ, HIDDEN, generator=g)
        # the model on one rank
        loss = ((torch.nn.functional.gelu(x_full @ ref1) @ ref2 - target) ** 2).mean()
        loss.backward()
        # the same model over the ranks, its activations DTensors moved by dtr
        x = distribute_tensor(x_full, mesh, [Shard(0)]).requires_grad_()
        xr = dtr.torch.redistribute(x, [Replicate()])
        h = torch.nn.functional.gelu(xr.to_local(grad_placements=[Partial()]) @ p1)
        y = dtr.torch.redistribute(DTensor.from_local(h @ p2, mesh, [Partial()]), [Shard(0)])
        assert y.placements == (Shard(0),) and tuple(y.shape) == (SEQ, HIDDEN)
        rows = torch.chunk(torch.arange(SEQ), n)[rank]
        ((y.to_local() - target[rows]) ** 2).sum().div(SEQ * HIDDEN).backward()
        # the input's gradient, a DTensor like x: the whole of it equals the one-rank model's
        full_grad = dtr.torch.redistribute(x.grad, [Replicate()]).to_local()
        x_ref = x_full.clone().requires_grad_()
        ((torch.nn.functional.gelu(x_ref @ ref1.detach()) @ ref2.detach() - target) ** 2).mean().backward()
        worst = max(worst, (full_grad - x_ref.grad).abs().max().item())
        with torch.no_grad():
            for p, ref, piece in ((p1, ref1, ref1[:, cols]), (p2, ref2, ref2[cols, :])):
                p -= LR * p.grad
                p.grad = None
            for ref in (ref1, ref2):
                ref -= LR * ref.grad
                ref.grad = None
            worst = max(worst, (p1 - ref1[:, cols]).abs().max().item(),
                        (p2 - ref2[cols, :]).abs().max().item())
        if rank == 0:
            print(f"step {step}: loss {loss.item():.6f}, largest difference from one rank "
                  f"{worst:.2e}", flush=True)
    dist.destroy_process_group()
    if worst > 1e-5:
        raise SystemExit(f"dtensor_mlp.py: rank {rank}: the shards differ from the one-rank "
                         f"model by {worst:.2e}")
    if rank == 0:
        print(f"dtensor_mlp.py: {n} ranks, {STEPS} steps, every shard within 1e-5 of one rank")


if __name__ == "__main__":
    main()
