"""The exit of a job whose last calls ran on the torch engine (found 2026-11-29 by an outside
try of the torchrun door; fixed 2026-11-29): a process sometimes died at exit with "terminate
called without an active exception" (SIGABRT; 3 runs in 9, also after a clean last call).
A gloo worker thread dropped the last reference to a completed Work, whose tensors then took
the GIL to go while the interpreter was finalizing; dtr/_engine.py now holds the last Works
(and keeps them for good at exit). Modes: "mm" a call whose placements differ between the
ranks (every rank gets dtr.BackendError), "mm_then_ok" then a right one, "ok" a right one
alone; "*_destroy" ends with torch.distributed.destroy_process_group(). Each rank prints
"R end"; the exit status is 0 on every rank (python/tests/run.sh --torch runs it 6 times).

    DTR_TORCH_BACKEND=torch torchrun --nproc-per-node 3 python/tests/engine_exit.py [MODE]
"""
import sys, torch, torch.distributed as dist, dtr, dtr.torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
dist.init_process_group("gloo"); R, W = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (W,))
X = distribute_tensor(torch.arange(48.).reshape(8, 6), mesh, [Shard(0)])
mode = sys.argv[1] if len(sys.argv) > 1 else "mm"
if mode in ("ok", "ok_destroy"):
    y = dtr.torch.redistribute(X, [Replicate()])
else:
    try: dtr.torch.redistribute(X, [Replicate()] if R == 0 else [Shard(1)])
    except Exception as e: print(R, type(e).__name__, flush=True)
    if mode == "mm_then_ok":
        y = dtr.torch.redistribute(X, [Replicate()]); print(R, "after-error call", torch.equal(y.to_local(), torch.arange(48.).reshape(8, 6)), flush=True)
if mode.endswith("destroy"): dist.destroy_process_group()
print(R, "end", flush=True)
