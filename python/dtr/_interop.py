"""torch's objects in dtr's terms: a DeviceMesh as a dtr.Mesh (Mesh.from_torch)."""
import os
import sys

from . import _core

_meshes = {}  # (shape, ranks, dim names, backend) -> Mesh: one per distinct DeviceMesh
# id(DeviceMesh), backend, cls -> (that DeviceMesh, its Mesh): torch's DeviceMesh computes its
# grid of ranks on each `.mesh` (about 0.2 ms in torch 2.15), which dtr.torch asks for on
# every call; the DeviceMesh is held, so its id is not reused while the entry lives
_seen = {}


def _default_backend():
    """$DTR_TORCH_BACKEND, else 'torch' where torch.distributed runs NCCL (its collectives on
    the GPU's buffers), else 'gloo' (dtr's Gloo over the job's store), or 'torch' where dtr
    was built without Gloo."""
    named = os.environ.get("DTR_TORCH_BACKEND")
    if named:
        return named
    dist = sys.modules.get("torch.distributed")  # (a DeviceMesh's process has torch)
    if dist is not None and dist.is_available() and dist.is_initialized() and \
            dist.get_backend() == "nccl":
        return "torch"
    return "gloo" if _core.has_backend("gloo") else "torch"


def mesh_from_torch(cls, device_mesh, backend=None):
    """The dtr.Mesh of a torch DeviceMesh: shape, global ranks and dim names, on backend
    `backend` (default _default_backend's) and the DeviceMesh's device: host memory for a
    'cpu' one, the current GPU for a 'cuda' one."""
    from_env = backend is None
    if from_env:
        backend = _default_backend()
    seen = _seen.get((id(device_mesh), backend, cls))
    if seen is not None and seen[0] is device_mesh:
        return seen[1]
    try:
        grid, device_type = device_mesh.mesh, device_mesh.device_type
        names = device_mesh.mesh_dim_names
    except AttributeError:
        raise _core.ArgumentError(f"device_mesh: expected a torch DeviceMesh, got "
                                  f"{type(device_mesh).__name__}") from None
    if device_type not in ("cpu", "cuda"):
        raise _core.RefusedError(f"device_mesh: a '{device_type}' DeviceMesh; dtr moves host "
                                 "memory and CUDA memory ('cpu' and 'cuda' DeviceMeshes)")
    if from_env and backend not in ("gloo", "torch", "nccl"):
        raise _core.ArgumentError(f"DTR_TORCH_BACKEND: {backend!r} is not 'gloo', 'torch' or "
                                  "'nccl' (the backend of a DeviceMesh's dtr.Mesh)")
    if backend == "nccl" and device_type != "cuda":
        raise _core.ArgumentError(f"device_mesh: a '{device_type}' DeviceMesh, and backend "
                                  "'nccl' moves CUDA memory (a 'cuda' DeviceMesh, or backend "
                                  "'gloo' or 'torch')")
    device = None if device_type == "cpu" else "cuda"  # (Mesh takes torch's current GPU)
    key = (tuple(grid.shape), tuple(grid.flatten().tolist()),
           None if names is None else tuple(names), backend, cls, device)
    mesh = _meshes.get(key)
    if mesh is None:
        mesh = _meshes[key] = cls(key[0], ranks=key[1], backend=backend, dim_names=key[2],
                                  device=device)
    _seen[(id(device_mesh), backend, cls)] = (device_mesh, mesh)
    return mesh
