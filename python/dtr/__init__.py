"""dtr: DTensor placement and redistribution for numpy arrays and torch tensors.

    import numpy as np, dtr
    mesh = dtr.Mesh((2, 2))                       # over mpi4py's COMM_WORLD
    full = np.arange(64, dtype=np.float32).reshape(8, 8)
    local = ...                                   # this rank's block of [Shard(0), Shard(1)]
    out = dtr.redistribute(local, mesh, "S(0),S(1)", [dtr.Replicate(), dtr.Shard(0)])

The calls, in DTensor's words where it has them (docs/python.md has the whole API):
  Mesh(shape, ranks=None, comm=None)       a mesh over an mpi4py communicator's ranks
  Shard(dim), Replicate(), Partial(op)     placements (also text: "S(0),R", and torch's own)
  layout(mesh, shape, placements, dtype)   each rank's local shape, offset and bytes
  plan(mesh, shape, src, dst, ...)         the plan dtr would run (str(): `dtr plan`)
  redistribute(local, mesh, src, dst, ...) moves this rank's block; collective
  redistribute_many(locals, mesh, ...)     a batch of tensors, coalesced
  grad_hook(buf, mesh, kind)               DDP's gradient all-reduce, in place
  reduce_scatter_grads(grads, mesh, ...)   FSDP/HSDP's reduce-scatter of a list of gradients
  dtr.torch                                DDP communication hooks (import dtr.torch)
  Error, ArgumentError, RefusedError, BackendError, TimeoutError
"""
import atexit
import collections

from . import _core
from ._core import (ArgumentError, BackendError, Error, Mesh, Plan, RefusedError, Request,
                    TimeoutError)
from ._placements import Partial, Placement, Replicate, Shard
from . import _arrays, _placements

__all__ = ["Mesh", "Shard", "Replicate", "Partial", "Placement", "layout", "plan",
           "redistribute", "redistribute_many", "grad_hook", "reduce_scatter_grads", "Plan", "Request", "LocalLayout", "Error",
           "ArgumentError", "RefusedError", "BackendError", "TimeoutError", "__version__"]

__version__ = _core.version()

_core._set_helpers({
    "dtype_text": _arrays.dtype_text,
    "as_array": _arrays.as_array,
    "contiguous": _arrays.contiguous,
    "numpy_empty": _arrays.numpy_empty,
    "empty": _arrays.empty,
    "placement_text": _placements.placement_text,
})

# Contexts hold duplicated communicators: free them before mpi4py finalizes MPI (its
# finalizer runs after Python's atexit handlers).
atexit.register(_core._shutdown)

LocalLayout = collections.namedtuple(
    "LocalLayout", ["rank", "coordinate", "local_shape", "global_offset", "bytes"])
LocalLayout.__doc__ = "What one rank of the mesh holds (dtr.layout)."


def layout(mesh, shape, placements, dtype="f32"):
    """Each rank's block of a tensor of `shape` placed by `placements` on `mesh`, in the
    mesh's row-major order: a list of LocalLayout(rank, coordinate, local_shape,
    global_offset, bytes). Pure: no communication."""
    return [LocalLayout(*x) for x in _core.layout(mesh, shape, placements, dtype)]


def plan(mesh, shape, src, dst, *, dtype="f32", strategy="optimal", to_mesh=None,
         to_dtype=None, relabel=False, staging_cap=None):
    """The plan of src -> dst for a tensor of `shape`: a Plan whose str() is what `dtr plan`
    prints and to_dict() what `dtr plan --json` prints. to_mesh plans a change between two
    meshes (relabel, staging_cap as for `dtr plan --to-mesh`). Pure: no communication."""
    return _core.plan(mesh, shape, src, dst, dtype=dtype, strategy=strategy, to_mesh=to_mesh,
                      to_dtype=to_dtype, relabel=relabel, staging_cap=staging_cap)


redistribute = _core.redistribute
redistribute_many = _core.redistribute_many
grad_hook = _core.grad_hook
reduce_scatter_grads = _core.reduce_scatter_grads
