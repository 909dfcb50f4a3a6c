"""dtr for PyTorch: DTensor in and out, and DDP communication hooks.

    out = dtr.torch.redistribute(dtensor, [Replicate(), Shard(0)])   # a DTensor, autograd too
    assert dtr.torch.digest(out) == dtr.torch.digest(dtensor)        # delivered, no gather
    with dtr.torch.patch():          # DTensor.redistribute and .full_tensor through dtr
        y = x.redistribute(placements=[Replicate()])

    model = torch.nn.parallel.DistributedDataParallel(module)   # a gloo process group
    model.register_comm_hook(dtr.Mesh(world_size), dtr.torch.allreduce_hook)

The hook state is a dtr.Mesh over the data-parallel ranks (None: every rank of COMM_WORLD).
Each hook reduces the bucket in place, as PyTorch's own hook of the same name does (divide
by the group size, then sum; the compress hooks in fp16 / bf16, cast back), and returns a
completed future. FSDP/HSDP's reduce-scatter of a list of gradients is
dtr.reduce_scatter_grads.

The DTensors are CPU tensors on a 'cpu' DeviceMesh; dtr meets their ranks through the job
torch.distributed runs (Mesh.from_torch: backend 'gloo', through the default group's store).
"""
import contextlib

import torch
from torch.distributed import Work
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard

from . import Mesh, _core
from ._core import redistribute as _move

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


# ---- DTensor in, DTensor out ----------------------------------------------------------------

def _placements(placements, source, tensor_ndim, what):
    """placements as DTensor.redistribute takes them for a tensor placed by `source` (None:
    a change between meshes): torch Placement objects, one a mesh dim, Shard(-k) counted from
    the last tensor dim, a Partial only from itself or, as P(sum), from a Shard."""
    try:
        placements = tuple(placements)
    except TypeError:
        raise _core.ArgumentError(f"{what}: expected a sequence of torch placements, got "
                                  f"{type(placements).__name__}") from None
    out = []
    for i, p in enumerate(placements):
        if not isinstance(p, Placement):
            raise _core.ArgumentError(f"{what}[{i}]: expected a torch Placement (Shard, "
                                      f"Replicate, Partial), got {type(p).__name__}")
        if type(p) is Shard and p.dim < 0:
            if p.dim + tensor_ndim < 0:
                raise _core.ArgumentError(f"{what}[{i}]: Shard({p.dim}) is out of range for a "
                                          f"{tensor_ndim}-d tensor")
            p = Shard(p.dim + tensor_ndim)
        if source is not None and i < len(source) and p.is_partial() and source[i] != p and not (
                source[i].is_shard() and getattr(p, "reduce_op", None) == "sum"):
            raise _core.RefusedError(f"{what}[{i}]: {source[i]} -> {p}: DTensor.redistribute "
                                     "makes a Partial only from itself or, as Partial(sum), "
                                     "from a Shard")
        out.append(p)
    return tuple(out)


class _Pending(Work):
    """A dtr Request as a c10d Work, registered on the tensor it fills: the first use of the
    AsyncCollectiveTensor around that tensor waits for it (torch's wait_tensor), as for
    DTensor.redistribute(..., async_op=True)'s own collectives."""

    def __init__(self, request, block):
        super().__init__()
        self._request, self.block = request, block

    def wait(self, timeout=None):
        request, self._request = self._request, None
        if request is not None:
            _inflight.remove(self)
            request.wait()  # (raises dtr's error at the first use)
        return True


# The async moves not yet waited for, oldest first. A dtr context runs one request at a time,
# so the next move (a backward's too) first completes those before it, in order, as torch's
# collectives on one process group complete in order.
_inflight = []


def _drain():
    while _inflight:
        pending = _inflight[0]
        torch.ops._c10d_functional.wait_tensor(pending.block)  # (unregisters it, calls wait)
        if _inflight and _inflight[0] is pending:  # (no longer registered: waited for here)
            pending.wait()


def _move_local(x, placements, device_mesh, async_op=False):
    """x's local block moved to `placements` on device_mesh (x's own where None): the new
    DTensor's local tensor (an empty one on a rank outside device_mesh); with async_op, an
    AsyncCollectiveTensor that waits for the move at its first use."""
    _drain()
    src_mesh = Mesh.from_torch(x.device_mesh)
    local = x.to_local()
    cross = not (device_mesh is None or device_mesh is x.device_mesh or
                 device_mesh == x.device_mesh)
    # the destination block comes into a torch tensor of its own (a rank without a source
    # block passes None, for which dtr would make a numpy array; an async move fills it later)
    dst = device_mesh if cross else x.device_mesh
    dst_mesh, where = Mesh.from_torch(dst), dst.get_coordinate()
    block = None
    if where is not None and (cross or async_op):
        block = next(b for b in _core.layout(dst_mesh, tuple(x.shape), placements, x.dtype)
                     if tuple(b[1]) == tuple(where))
        block = local.new_empty(block[2])  # (x's dtype, on x's device)
    held = not cross or x.device_mesh.get_coordinate() is not None
    out = _move(local if held else None, src_mesh, x.placements, placements,
                shape=tuple(x.shape), to_mesh=dst_mesh if cross else None, dtype=x.dtype,
                out=block, async_op=async_op)
    if out is None:
        return local.new_empty(0)
    if not async_op:
        return out
    if block is None:  # (no destination block here: the move still sends this rank's source)
        block = local.new_empty(0)
    pending = _Pending(out, block)
    _inflight.append(pending)
    torch._C._distributed_c10d._register_work(block, pending)
    return AsyncCollectiveTensor(block)


class _Redistribute(torch.autograd.Function):
    """DTensor.redistribute's forward and backward, each a dtr change."""

    @staticmethod
    def forward(ctx, x, placements, device_mesh, async_op):
        ctx.src_mesh, ctx.src_placements = x.device_mesh, x.placements
        ctx.cross = device_mesh is not None and device_mesh != x.device_mesh
        mesh = device_mesh if ctx.cross else x.device_mesh
        out = _move_local(x, placements, device_mesh if ctx.cross else None, async_op)
        return DTensor.from_local(out, mesh, placements, run_check=False, shape=x.shape,
                                  stride=x.stride())

    @staticmethod
    def backward(ctx, grad):
        # DTensor's own backward (torch/distributed/tensor/_redistribute.py): the gradient goes
        # back to the source placements, a Partial source taking Replicate where the gradient
        # is sharded or replicated on that dim.
        target = tuple(Replicate() if s.is_partial() and (g.is_shard() or g.is_replicate())
                       else s for g, s in zip(grad.placements, ctx.src_placements))
        out = _move_local(grad, target, ctx.src_mesh if ctx.cross else None)
        return (DTensor.from_local(out, ctx.src_mesh, target, run_check=False, shape=grad.shape,
                                   stride=grad.stride()), None, None, None)


def redistribute(dtensor, placements, *, device_mesh=None, async_op=False):
    """DTensor.redistribute through dtr: a DTensor with `placements` on `device_mesh` (default
    dtensor's own; a DeviceMesh of other ranks is a change between meshes), the same global
    shape and stride, differentiable (its backward is DTensor's: the gradient back to the
    source placements, Partial as Replicate). Collective over the meshes' ranks. CPU tensors
    on 'cpu' DeviceMeshes. async_op=True returns at once, as DTensor's does: the DTensor's
    local tensor is an AsyncCollectiveTensor that waits for the move at its first use (or
    .wait()); errors of the move are raised there; the backward runs to completion."""
    if not isinstance(dtensor, DTensor):
        raise _core.ArgumentError(f"dtensor: expected a torch DTensor, got "
                                  f"{type(dtensor).__name__}")
    async_op = bool(async_op)  # (truthy, as DTensor.redistribute takes it)
    if device_mesh is not None and not isinstance(device_mesh, DeviceMesh):
        raise _core.ArgumentError(f"device_mesh: expected a torch DeviceMesh or None, got "
                                  f"{type(device_mesh).__name__}")
    cross = device_mesh is not None and device_mesh != dtensor.device_mesh
    mesh = device_mesh if cross else dtensor.device_mesh
    placements = _placements(placements, None if cross else dtensor.placements, dtensor.ndim,
                             "placements")
    if len(placements) != mesh.ndim:
        raise _core.ArgumentError(f"placements: {len(placements)} placements for a mesh of "
                                  f"{mesh.ndim} dims")
    return _Redistribute.apply(dtensor, placements, device_mesh, async_op)


def digest(dtensor):
    """dtr.digest of a DTensor: the 64-bit digest of its whole value, the same for any
    placements on any DeviceMesh, so a refit's source and destination can be compared without
    a gather (docs/cross-mesh.md, "Proof of delivery"). Collective over its mesh's ranks;
    None on a rank outside it. A Partial placement is refused (ArgumentError). An async
    result (async_op=True) is waited for first."""
    if not isinstance(dtensor, DTensor):
        raise _core.ArgumentError(f"dtensor: expected a torch DTensor, got "
                                  f"{type(dtensor).__name__}")
    _drain()
    mesh = Mesh.from_torch(dtensor.device_mesh)
    if dtensor.device_mesh.get_coordinate() is None:
        return None
    placements = _placements(dtensor.placements, None, dtensor.ndim, "dtensor.placements")
    local = dtensor.to_local().detach()
    if isinstance(local, AsyncCollectiveTensor):
        local = local.wait()
    return _core.digest(local.contiguous(), mesh, placements, shape=tuple(dtensor.shape))


@contextlib.contextmanager
def patch():
    """Inside the block, DTensor.redistribute and DTensor.full_tensor run through dtr
    (redistribute above); calls with forward_dtype / backward_dtype / grad_placements, which
    dtr.torch does not take, stay torch's own. The methods are the class's, so the whole
    process (every thread) sees them while the block runs; each exit puts back what its
    entry found (also on an exception), so blocks must nest, as `with` makes them."""
    own_redistribute, own_full = DTensor.redistribute, DTensor.full_tensor

    def patched_redistribute(self, device_mesh=None, placements=None, *, async_op=False,
                             forward_dtype=None, backward_dtype=None):
        if placements is None or forward_dtype is not None or backward_dtype is not None:
            return own_redistribute(self, device_mesh, placements, async_op=async_op,
                                    forward_dtype=forward_dtype, backward_dtype=backward_dtype)
        return redistribute(self, placements, device_mesh=device_mesh, async_op=async_op)

    def patched_full(self, *, grad_placements=None):
        if grad_placements is not None:
            return own_full(self, grad_placements=grad_placements)
        return redistribute(self, [Replicate()] * self.device_mesh.ndim).to_local()

    DTensor.redistribute, DTensor.full_tensor = patched_redistribute, patched_full
    try:
        yield
    finally:
        DTensor.redistribute, DTensor.full_tensor = own_redistribute, own_full
