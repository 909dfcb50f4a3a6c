"""dtr: DTensor placement and redistribution for numpy arrays and torch tensors.

    import numpy as np, dtr
    mesh = dtr.Mesh((2, 2))                       # over mpi4py's COMM_WORLD
    full = np.arange(64, dtype=np.float32).reshape(8, 8)
    local = ...                                   # this rank's block of [Shard(0), Shard(1)]
    out = dtr.redistribute(local, mesh, "S(0),S(1)", [dtr.Replicate(), dtr.Shard(0)])

The calls, in DTensor's words where it has them (docs/python.md has the whole API):
  Mesh(shape, ranks=None, comm=None)       a mesh over an mpi4py communicator's ranks
  Mesh(shape, backend="gloo" | "torch")    a mesh over a job torchrun started (no MPI)
  Mesh(shape, ..., device="cuda")          a mesh whose arrays are on a GPU (torch CUDA
                                           tensors, __cuda_array_interface__, __dlpack__)
  Mesh.from_torch(device_mesh)             the mesh of a torch DeviceMesh
  DeviceArray                              a result dtr allocated on a device (numpy())
  Shard(dim), Replicate(), Partial(op)     placements (also text: "S(0),R", and torch's own)
  layout(mesh, shape, placements, dtype)   each rank's local shape, offset and bytes
  plan(mesh, shape, src, dst, ...)         the plan dtr would run (str(): `dtr plan`)
  redistribute(local, mesh, src, dst, ...) moves this rank's block; collective
  redistribute_many(locals, mesh, ...)     a batch of tensors, coalesced
  digest(local, mesh, placements)          the tensor's 64-bit digest, the same in any layout
  grad_hook(buf, mesh, kind)               DDP's gradient all-reduce, in place
  reduce_scatter_grads(grads, mesh, ...)   FSDP/HSDP's reduce-scatter of a list of gradients
  load(path, mesh, rules, ...)             this rank's blocks of a safetensors checkpoint
  load_metadata(path)                      its "__metadata__" ({"format": "pt"}), a dict
  save(path, blocks, mesh, placements)     every rank's blocks into one checkpoint; collective
  consolidate(path, to, max_file_bytes=)   a checkpoint into whole-tensor safetensors files
  dtr.torch                                DTensor in and out (redistribute, patch), DDP
                                           communication hooks (import dtr.torch)
  Error, ArgumentError, RefusedError, BackendError, TimeoutError, FileError
"""
import atexit
import collections
import json
import os

from . import _carry

_carry.load()  # (before libdtr_gloo.so: what it loads, carried beside it)

from . import _core  # noqa: E402
from ._core import (ArgumentError, BackendError, DeviceArray, Error, FileError, Mesh, Plan,
                    RefusedError, Request, TimeoutError)
from ._placements import Partial, Placement, Replicate, Shard
from . import _arrays, _engine, _interop, _placements, _store

__all__ = ["Mesh", "Shard", "Replicate", "Partial", "Placement", "layout", "plan",
           "redistribute", "redistribute_many", "digest", "DeviceArray", "grad_hook", "reduce_scatter_grads", "load",
           "load_metadata", "save", "consolidate", "Plan",
           "Request", "LocalLayout", "Error", "ArgumentError", "RefusedError", "BackendError",
           "TimeoutError", "FileError", "__version__"]

__version__ = _core.version()

_core._set_helpers({
    "dtype_text": _arrays.dtype_text,
    "as_array": _arrays.as_array,
    "contiguous": _arrays.contiguous,
    "numpy_empty": _arrays.numpy_empty,
    "empty": _arrays.empty,
    "placement_text": _placements.placement_text,
    "job_store": _store.job,
    "mesh_from_torch": _interop.mesh_from_torch,
    "torch_engine": _engine.engine,
    "torch_stream": _arrays.torch_stream,
})

# Contexts hold duplicated communicators: free them before mpi4py finalizes MPI (its
# finalizer runs after Python's atexit handlers).
atexit.register(_core._shutdown)

LocalLayout = collections.namedtuple(
    "LocalLayout", ["rank", "coordinate", "local_shape", "global_offset", "bytes"])
LocalLayout.__doc__ = "What one rank of the mesh holds (dtr.layout)."


class Layout(list):
    """dtr.layout's list of LocalLayout, which a notebook shows as a picture (_repr_svg_: the
    mesh's ranks and each rank's block in its colour, as `dtr layout --svg` draws it)."""

    def __init__(self, blocks, args):
        super().__init__(blocks)
        self._args = args

    def _repr_svg_(self):
        return _core._layout_svg(*self._args)


def layout(mesh, shape, placements, dtype="f32"):
    """Each rank's block of a tensor of `shape` placed by `placements` on `mesh`, in the
    mesh's row-major order: a list of LocalLayout(rank, coordinate, local_shape,
    global_offset, bytes) (a dtr.Layout, whose _repr_svg_ draws it). Pure: no
    communication."""
    return Layout([LocalLayout(*x) for x in _core.layout(mesh, shape, placements, dtype)],
                  (mesh, shape, placements, dtype))


def plan(mesh, shape, src, dst, *, dtype="f32", strategy="optimal", to_mesh=None,
         to_dtype=None, relabel=False, staging_cap=None):
    """The plan of src -> dst for a tensor of `shape`: a Plan whose str() is what `dtr plan`
    prints and to_dict() what `dtr plan --json` prints. to_mesh plans a change between two
    meshes (relabel, staging_cap as for `dtr plan --to-mesh`). Pure: no communication."""
    return _core.plan(mesh, shape, src, dst, dtype=dtype, strategy=strategy, to_mesh=to_mesh,
                      to_dtype=to_dtype, relabel=relabel, staging_cap=staging_cap)


redistribute = _core.redistribute
digest = _core.digest
redistribute_many = _core.redistribute_many
grad_hook = _core.grad_hook
reduce_scatter_grads = _core.reduce_scatter_grads


def _rules_json(rules):
    """The rules as dtr_checkpoint_rules_parse's JSON text: a list of dicts (their
    placements as text or as placement objects), or a dict {glob: placements} in order."""
    if isinstance(rules, dict):
        rules = [{"match": k, "placements": v} for k, v in rules.items()]
    if not isinstance(rules, (list, tuple)):
        raise ArgumentError("rules: expected a rules file's path, a list of "
                            "{'match', 'placements'[, 'dtype']} or a dict {glob: placements}, "
                            f"got {type(rules).__name__}")
    out = []
    for i, r in enumerate(rules):
        if not isinstance(r, dict):
            raise ArgumentError(f"rules[{i}]: expected a dict, got {type(r).__name__}")
        r = dict(r)
        p = r.get("placements")
        if p is not None and not isinstance(p, str):
            texts = [_placements.placement_text(x) if not isinstance(x, str) else x
                     for x in (p if isinstance(p, (list, tuple)) else [p])]
            if any(t is None for t in texts):
                raise ArgumentError(f"rules[{i}]: placements {p!r}: expected text ('S(0),R') "
                                    "or placement objects")
            r["placements"] = ",".join(texts)
        if "dtype" in r and not isinstance(r["dtype"], str):
            name = _arrays.dtype_text(r["dtype"])
            if name is None:
                raise ArgumentError(f"rules[{i}]: dtype {r['dtype']!r} is not one dtr has")
            r["dtype"] = name
        out.append(r)
    return json.dumps(out)


def _path(path, what="path"):
    """os.fspath(path) as text, or ArgumentError naming `what`."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise ArgumentError(f"{what}: expected a str or os.PathLike, got "
                            f"{type(path).__name__}") from None
    return os.fsdecode(path) if isinstance(path, bytes) else path


def consolidate(path, to, *, max_file_bytes=5_000_000_000):
    """A checkpoint (any form load() reads: one `dtr reshard` saved on any mesh too) into whole
    tensors as plain safetensors files in `to` (missing or empty; a non-empty directory is an
    ArgumentError and untouched): to/model.safetensors, or past max_file_bytes (0: one file)
    model-0000K-of-0000N.safetensors with model.safetensors.index.json, the layout
    transformers' from_pretrained and the safetensors package read. The source's metadata is
    carried over. Nothing is left in `to` on failure. Not collective: one process writes
    every file (`dtr reshard --consolidate` shares them out over ranks)."""
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
        raise ArgumentError(f"max_file_bytes: expected an int, got "
                            f"{type(max_file_bytes).__name__}")
    if not 0 <= max_file_bytes < 2**63:
        raise ArgumentError(f"max_file_bytes: {max_file_bytes} is not a byte count 0..2^63-1")
    _core.consolidate(_path(path), _path(to, "to"), max_file_bytes)


def save(path, blocks, mesh, placements, *, shapes=None, metadata=None):
    """Every rank's blocks into one checkpoint at `path` (a new or empty directory), which
    load() reads back on any mesh and `dtr reshard` / consolidate() take as a source.

    Collective over the ranks of `mesh` (a process outside it returns at once): each rank
    passes the same names and layouts, and its own blocks. blocks: {name: this rank's block}
    (numpy arrays or torch CPU tensors, any dtype dtr has). placements: one for all tensors
    ("S(0),R" or placement objects), or a dict {name: placements}; nothing Partial. shapes:
    the global shapes, a dict {name: shape} (default: inferred from the blocks as even
    shards, as DTensor does). metadata: a dict of str to str, each file's "__metadata__"
    (e.g. {"format": "pt"}). Each rank writes its file (a replicated block once, by the rank
    at coordinate 0 of the dims it is replicated on), then the mesh's first rank writes
    dtr.manifest.json. A bad argument on one rank fails every rank before anything is
    written (ArgumentError there, dtr.Error naming it on the others); a failure while
    writing takes every file back. Returns None."""
    return _core.save(path, blocks, mesh, placements, shapes, metadata)


def load_metadata(path):
    """A checkpoint's metadata, as load() reads `path`: the first file's "__metadata__" (beside
    an index, its "metadata" too), e.g. {"format": "pt"}; a dict of str. Not collective."""
    return _core.load_metadata(_path(path))


def load(path, mesh, rules, *, names=None, framework="numpy", device=None, rank=None):
    """This rank's blocks of a safetensors checkpoint, by name: {name: array}.

    path: a .safetensors file, a directory of them (with or without
    model.safetensors.index.json), or a checkpoint `dtr reshard` saved on any number of ranks.
    rules: which placements each tensor takes on `mesh`, first match wins (fnmatch globs):
    a rules file's path, a list of {"match": GLOB, "placements": "S(0),R"[, "dtype": "bf16"]}
    or a dict {GLOB: placements}; a tensor no rule matches is refused by name.
    Each rank reads only its own blocks' bytes (no communication: not collective); a process
    outside the mesh gets {}. names: load only these tensors (default: all, sorted by name).
    framework: "numpy" (bfloat16 and fp8 as ml_dtypes' types) or "torch"; device (torch):
    each block is read into host memory and moved there (e.g. "cuda:0") before the next is
    read. rank: read another rank's blocks (default: this process's rank in the mesh's
    communicator). Errors: ArgumentError (a bad file, rule or name; a Partial rule, a cast not
    between float dtypes), RefusedError (a dtype dtr lacks), FileError (a file that cannot be
    read)."""
    if not isinstance(framework, str):
        raise ArgumentError(f"framework: expected 'numpy' or 'torch', got "
                            f"{type(framework).__name__}")
    if framework in ("pt", "torch"):
        kind = "torch"
        try:
            import torch  # noqa: F401  (the blocks are made as torch tensors)
        except ImportError as e:
            raise ArgumentError(f"framework: {framework!r} needs PyTorch, which does not "
                                f"import here ({e})") from None
    elif framework in ("np", "numpy"):
        kind = None
    else:
        raise ArgumentError(f"framework: {framework!r}, not 'numpy' or 'torch'")
    each = None
    if device is not None and str(device) != "cpu":
        if kind != "torch":
            raise ArgumentError(f"device: {device!r} needs framework='torch' (numpy arrays "
                                "live in host memory)")

        def each(name, t):
            return t.to(device)
    elif device is not None and kind != "torch":
        raise ArgumentError("device: 'cpu' is for framework='torch'")
    if isinstance(names, str):
        raise ArgumentError(f"names: {names!r}: expected a list of tensor names, not a str")
    path = _path(path)
    if isinstance(rules, (str, os.PathLike)) and not str(rules).lstrip().startswith("["):
        text, rules_path = None, _path(rules, "rules")
    else:
        text, rules_path = rules if isinstance(rules, str) else _rules_json(rules), None
    return _core.load(path, mesh, text, rules_path, names=names, rank=rank, kind=kind,
                      each=each)
