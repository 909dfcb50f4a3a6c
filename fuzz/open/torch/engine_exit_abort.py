"""Open (found 2026-11-29 by an outside try of the torchrun door): on the torch engine, after
a call whose placements differ between the ranks (every rank gets dtr.BackendError "ranks
of the mesh hold different plans", as it should), a process sometimes dies at exit with
"terminate called without an active exception" (SIGABRT; 3 runs in 9), unless the script
calls torch.distributed.destroy_process_group() first. Not seen on dtr's Gloo, nor without
the mismatch. Suspect: a torch Work or process group of the engine's outliving torch's
default group at interpreter exit.

    DTR_TORCH_BACKEND=torch torchrun --nproc-per-node 3 fuzz/open/torch/engine_exit_abort.py
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
