"""PyTorch's gradient reductions on dtr: DDP communication hooks.

    model = torch.nn.parallel.DistributedDataParallel(module)   # a gloo process group
    model.register_comm_hook(dtr.Mesh(world_size), dtr.torch.allreduce_hook)

The hook state is a dtr.Mesh over the data-parallel ranks (None: every rank of COMM_WORLD).
Each hook reduces the bucket in place, as PyTorch's own hook of the same name does (divide
by the group size, then sum; the compress hooks in fp16 / bf16, cast back), and returns a
completed future. FSDP/HSDP's reduce-scatter of a list of gradients is
dtr.reduce_scatter_grads.
"""
import torch

from . import Mesh, _core

_world = {}


def _mesh(state):
    if isinstance(state, Mesh):
        return state
    if state is not None:
        raise _core.ArgumentError(f"state: expected a dtr.Mesh or None, got {type(state).__name__}")
    if "mesh" not in _world:
        from mpi4py import MPI
        _world["mesh"] = Mesh(MPI.COMM_WORLD.Get_size())
    return _world["mesh"]


def _hook(kind):
    def hook(state, bucket):
        buf = bucket.buffer()
        _core.grad_hook(buf, _mesh(state), kind)
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut
    hook.__name__ = {"allreduce": "allreduce_hook", "fp16": "fp16_compress_hook",
                     "bf16": "bf16_compress_hook"}[kind]
    hook.__doc__ = f"DDP communication hook: PyTorch's {hook.__name__} on dtr."
    return hook


allreduce_hook = _hook("allreduce")
fp16_compress_hook = _hook("fp16")
bf16_compress_hook = _hook("bf16")
