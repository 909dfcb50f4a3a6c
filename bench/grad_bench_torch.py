"""PyTorch's gradient reduction on CPU for bench/grad_bench.sh: what DDP and FSDP2 do with a
model's gradients over gloo, on one flat f32 gradient of NUMEL elements per rank.

  ddp:  25 MiB buckets (DDP's default bucket_cap_mb), each reduced by PyTorch's own hook:
        f32: allreduce_hook (divide by the world size, then all_reduce); bf16/f16: the
        compress hooks (cast the bucket down, divide, all_reduce, cast back into it).
  fsdp: FSDP2's reduce-scatter of the flat gradient in the reduce dtype: cast (bf16/f16),
        divide by the world size (gloo has no AVG), reduce_scatter_tensor, cast the shard
        back to f32.

usage: mpirun -n N python bench/grad_bench_torch.py MODE DTYPE NUMEL ITERS
Prints, on rank 0, {"median_us": T} (the slowest rank's time of each step, after a warm-up).
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

mode, dname, numel, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
port = None
if rank == 0:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(comm.bcast(port)))
dist.init_process_group("gloo", rank=rank, world_size=n)
low = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[dname]
numel -= numel % n
grad = torch.full((numel,), float(rank + 1))
shard = torch.empty(numel // n)
bucket = (25 << 20) // 4


def ddp():
    for at in range(0, numel, bucket):
        b = grad[at:at + bucket]
        if low is None:
            b.div_(n)
            dist.all_reduce(b)
        else:
            c = b.to(low)
            c.div_(n)
            dist.all_reduce(c)
            b.copy_(c)


def fsdp():
    src = grad if low is None else grad.to(low)
    src = src.div(n) if low is None else src.div_(n)
    out = torch.empty(numel // n, dtype=src.dtype)
    dist.reduce_scatter_tensor(out, src)
    shard.copy_(out)


step = ddp if mode == "ddp" else fsdp
times = []
for it in range(iters + 1):
    comm.Barrier()
    t0 = time.perf_counter()
    step()
    comm.Barrier()
    t = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    if it > 0:
        times.append(t)
dist.destroy_process_group()
if rank == 0:
    times.sort()
    print('{"median_us": %.1f}' % (times[len(times) // 2] * 1e6))
