"""A tensor-parallel MLP on torch tensors with dtr moving the activations and reducing the
gradients, checked against the same model on one rank.

    mpirun -n 4 python mlp.py 2x2      # DP 2 x TP 2
    mpirun -n 2 python mlp.py 1x2      # TP 2
    python mlp.py 1x1                  # one rank

The model is y = gelu(x W1) W2 with a mean-squared loss and SGD. Each DP group trains on its
own batch; inside it W1 is column-parallel and W2 row-parallel over TP (Megatron), with the
sequence (the rows of x) sharded over TP between the layers (sequence parallelism):
  forward   x: S(0) -> R (all-gather)      y: P -> S(0) (reduce-scatter)
  backward  dy: S(0) -> R (all-gather)     dx: P -> S(0) (reduce-scatter)
each a dtr.redistribute inside a torch.autograd.Function. The weight gradients are averaged
over DP with dtr.grad_hook (PyTorch's allreduce hook's order: divide, then sum). Every rank
also trains the whole model on one rank (plain torch, all the batches, the mean of their
gradients) and checks its shards of the weights against it.
"""
import sys

import torch
from mpi4py import MPI

import dtr

SEQ, HIDDEN, FFN, STEPS, LR = 8, 16, 32, 5, 0.05


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    dp, tp = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1x%d" % comm.Get_size()).split("x"))
    if dp * tp != comm.Get_size():
        sys.exit(f"mlp.py: a {dp}x{tp} mesh needs {dp * tp} ranks, the job has {comm.Get_size()}")
    mesh = dtr.Mesh((dp, tp))                       # the weights' gradients: reduced over dim 0
    d, t = mesh.coordinate
    tp_mesh = dtr.Mesh(tp, ranks=[d * tp + i for i in range(tp)])  # this DP group's TP ranks

    class SeqGather(torch.autograd.Function):     # S(0) -> R; backward P -> S(0)
        @staticmethod
        def forward(ctx, x):
            return dtr.redistribute(x, tp_mesh, "S(0)", "R", shape=(SEQ, x.shape[1]))

        @staticmethod
        def backward(ctx, g):
            return dtr.redistribute(g.contiguous(), tp_mesh, "P", "S(0)")

    class SeqReduceScatter(torch.autograd.Function):  # P -> S(0); backward S(0) -> R
        @staticmethod
        def forward(ctx, y):
            return dtr.redistribute(y, tp_mesh, "P", "S(0)")

        @staticmethod
        def backward(ctx, g):
            return dtr.redistribute(g.contiguous(), tp_mesh, "S(0)", "R", shape=(SEQ, g.shape[1]))

    gen = torch.Generator().manual_seed(1)
    w1 = torch.randn(HIDDEN, FFN, generator=gen, dtype=torch.float64) / HIDDEN ** 0.5
    w2 = torch.randn(FFN, HIDDEN, generator=gen, dtype=torch.float64) / FFN ** 0.5
    batches = [(torch.randn(SEQ, HIDDEN, generator=gen, dtype=torch.float64),
                torch.randn(SEQ, HIDDEN, generator=gen, dtype=torch.float64)) for _ in range(dp)]

    def rows(a, k):  # this rank's chunk k of dim 0 over TP (torch.chunk's rule)
        lay = dtr.layout(tp_mesh, tuple(a.shape), "S(0)", dtype="f64")[k]
        return a[lay.global_offset[0]:lay.global_offset[0] + lay.local_shape[0]].contiguous()

    cols = FFN // tp
    p1 = w1[:, t * cols:(t + 1) * cols].clone().requires_grad_()   # column-parallel
    p2 = w2[t * cols:(t + 1) * cols, :].clone().requires_grad_()   # row-parallel
    ref1, ref2 = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    x, target = batches[d]
    for step in range(STEPS):
        # dtr: this rank's part
        h = torch.nn.functional.gelu(SeqGather.apply(rows(x, t)) @ p1)
        y = SeqReduceScatter.apply(h @ p2)
        loss = ((y - rows(target, t)) ** 2).sum() / (SEQ * HIDDEN)
        loss.backward()
        for p in (p1, p2):
            dtr.grad_hook(p.grad, mesh, dims=[0])        # mean over DP
        with torch.no_grad():
            for p in (p1, p2):
                p -= LR * p.grad
                p.grad = None
        total = comm.allreduce(loss.item()) / dp         # the DP groups' mean loss
        # one rank: the whole model, every batch, the mean of their gradients
        ref_loss = 0.0
        for bx, bt in batches:
            l = ((torch.nn.functional.gelu(bx @ ref1) @ ref2 - bt) ** 2).sum() / (SEQ * HIDDEN) / dp
            l.backward()
            ref_loss += l.item()
        with torch.no_grad():
            for p in (ref1, ref2):
                p -= LR * p.grad
                p.grad = None
        if rank == 0:
            print(f"step {step} loss {total:.17g} (one rank: {ref_loss:.17g})")
    diff = max((p1 - ref1[:, t * cols:(t + 1) * cols]).abs().max().item(),
               (p2 - ref2[t * cols:(t + 1) * cols, :]).abs().max().item())
    worst = comm.allreduce(diff, op=MPI.MAX)
    if rank == 0:
        print(f"{dp}x{tp} mesh: the weights after {STEPS} steps differ from one rank's by at most "
              f"{worst:.3g}")
    ok = worst < 1e-12
    if rank == 0:
        print("matches one rank" if ok else "DIFFERS from one rank")
    sys.exit(0 if ok else 1)


main()
