"""Under torchrun, no mpirun and no mpi4py: dtr.torch.redistribute, and DTensor.redistribute
inside dtr.torch.patch(), against DTensor.redistribute itself on the same gloo process groups,
bit for bit: the local values, the placements, the global shape and stride, and the gradients
of a seeded weighted sum through each. Seeded random cases: meshes of 1-3 dims, tensors of 0-3
dims with uneven and empty shards, six dtypes, Partial sources (sum, avg, max, min), half of
them with async_op=True (the local tensor an AsyncCollectiveTensor, waited for at its first
use). Then changes to DeviceMeshes of other ranks (values and gradients against the reference
blocks), half of them async too, and the bad arguments, each refused by name.

    torchrun --nproc-per-node 4 python/tests/torchrun_dtensor.py [CASES]

Rank 0 prints the seed, each failing case (at most 10) and "torchrun dtensor: P passed, F
failed"; the exit status is 1 on any failure. Env: DTR_PY_SEED (default 20261127),
DTR_PY_DTENSOR_CASES (default 500), DTR_PY_DEADLINE_S (default 800: then each rank prints its
stacks and exits).
"""
import faulthandler
import logging
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import coords, local_input  # noqa: E402

import dtr  # noqa: E402
import dtr.torch  # noqa: E402

SEED = int(os.environ.get("DTR_PY_SEED", "20261127"))
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64}


def mesh_shapes(n):
    shapes = [(n,), (2, n // 2), (n // 2, 2), (2, n // 2, 1), (1, 2, n // 2), (2, 2, n // 4)]
    return sorted({s for s in shapes if min(s) >= 1 and int(np.prod(s)) == n})


def bits(t):
    t = t.detach().contiguous()
    return t.view(torch.int16) if t.element_size() == 2 else t


def agree(flag):
    """Every rank's flag, AND-ed (a gloo all-reduce): the ranks decide together."""
    t = torch.tensor([1 if flag else 0])
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


class Tally:
    """Checks decided by every rank together: a check passes where no rank says why not."""

    def __init__(self):
        self.passed, self.failures = 0, []

    def check(self, why, what):
        if agree(why is None):
            self.passed += 1
            return True
        self.failures.append(f"{what}: {why or 'another rank failed'}")
        return False


def through(kind, dt, tmesh, dst, async_op):
    """dt moved to dst: by DTensor itself, by dtr.torch.redistribute, or by DTensor's own
    method inside dtr.torch.patch(); async_op as DTensor takes it."""
    if kind == "torch":
        return dt.redistribute(tmesh, dst)
    if kind == "dtr":
        return dtr.torch.redistribute(dt, dst, async_op=async_op)
    with dtr.torch.patch():
        return dt.redistribute(tmesh, dst, async_op=async_op)


def run(kind, local, tmesh, src, dst, shape, weight, async_op=False):
    """(output DTensor, gradient DTensor or None) of one path."""
    stride = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    grad = local.is_floating_point() and weight is not None
    dt = DTensor.from_local(local.clone(), tmesh, src, run_check=False, shape=torch.Size(shape),
                            stride=stride).requires_grad_(grad)  # a leaf: its .grad a DTensor
    out = through(kind, dt, tmesh, dst, async_op)
    if async_op and not isinstance(out._local_tensor, AsyncCollectiveTensor):
        raise AssertionError(f"async_op=True gave a {type(out._local_tensor).__name__}, not an "
                             "AsyncCollectiveTensor")
    if not grad:
        return out, None
    (out.to_local() * weight).sum().backward()
    return out, dt.grad


def draw(rng, n):
    shapes = mesh_shapes(n)
    ms = shapes[rng.integers(len(shapes))]
    ndim = int(rng.integers(0, 4))
    shape = tuple(int(x) for x in rng.integers(0, 9, size=ndim))
    dname = list(DTYPES)[rng.integers(len(DTYPES))]
    kinds = [Shard(d) for d in range(ndim)] + [Shard(-1)] * (ndim > 0) + [Replicate()]
    op = str(rng.choice(["sum", "max", "min"] + (["avg"] if dname[0] in "fb" else [])))
    src = [kinds[rng.integers(len(kinds))] if rng.random() < 0.7 else Partial(op) for _ in ms]
    src = [Shard(p.dim % ndim) if isinstance(p, Shard) else p for p in src]
    dst = [kinds[rng.integers(len(kinds))] for _ in ms]
    return ms, shape, dname, op, src, dst


def between_meshes(tally, rng, n, rank, cases):
    """Changes to a DeviceMesh of other ranks (DTensor has none to compare with): each
    destination block equals the reference block of the whole tensor, and the gradient of
    sum(out * W[out's block]) is W[the source block] back on the source mesh."""
    from reference import block
    src_mesh = init_device_mesh("cpu", (n,))
    for case in range(cases):
        k = int(rng.integers(1, n + 1))
        ranks = [int(r) for r in rng.permutation(n)[:k]]
        dshape = (2, k // 2) if k % 2 == 0 and k > 2 and rng.random() < 0.5 else (k,)
        dst_mesh = DeviceMesh("cpu", torch.tensor(ranks).reshape(dshape))
        shape = tuple(int(x) for x in rng.integers(0, 7, size=int(rng.integers(1, 3))))
        full = torch.from_numpy(rng.integers(-20, 20, size=shape)).to(torch.float32)
        weight = torch.from_numpy(rng.integers(-3, 4, size=shape)).to(torch.float32)
        src = [[Shard(0), Replicate(), Shard(len(shape) - 1)][rng.integers(3)]]
        dst = [[Shard(d) for d in range(len(shape))] + [Replicate()]][0]
        dst = [dst[rng.integers(len(dst))] for _ in dshape]
        async_op = bool(rng.random() < 0.5)
        what = (f"between meshes {case} (seed {SEED}): (n,) {src} -> {ranks} {dshape} {dst} "
                f"shape {shape}" + " async_op" * async_op)
        try:
            x = distribute_tensor(full, src_mesh, src).requires_grad_()
            out = dtr.torch.redistribute(x, dst, device_mesh=dst_mesh, async_op=async_op)
            coord = dst_mesh.get_coordinate()
            if async_op and coord is not None and not isinstance(out._local_tensor,
                                                                 AsyncCollectiveTensor):
                raise AssertionError("async_op=True gave no AsyncCollectiveTensor")
            texts = [dtr._placements.placement_text(p) for p in dst]
            want = (full[block(shape, dshape, texts, coord)] if coord is not None
                    else torch.empty(0))
            w = weight[block(shape, dshape, texts, coord)] if coord is not None else torch.empty(0)
            # (every rank runs the backward, those outside dst_mesh too: the gradient as a
            # DTensor, since to_local()'s backward fails on a rank outside its mesh in torch)
            out.backward(DTensor.from_local(w.contiguous(), dst_mesh, dst, run_check=False,
                                            shape=out.shape, stride=out.stride()))
            stexts = [dtr._placements.placement_text(p) for p in src]
            why = ("mesh" if out.device_mesh != dst_mesh else
                   "placements" if out.placements != tuple(dst) else
                   "shape" if tuple(out.shape) != shape else
                   "values" if not torch.equal(out.to_local(), want) else
                   "gradient placements" if x.grad.placements != tuple(src) else
                   "gradient" if not torch.equal(
                       x.grad.to_local(), weight[block(shape, (n,), stexts, (rank,))]) else None)
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        tally.check(why, f"{what} rank {rank}")


def refusals(tally, n):
    """The bad arguments of dtr.torch.redistribute, each refused by name on every rank."""
    mesh = init_device_mesh("cpu", (n,))
    x = distribute_tensor(torch.ones(4, 2), mesh, [Shard(0)])
    checks = [
        (lambda: dtr.torch.redistribute(torch.ones(2), [Replicate()]), dtr.ArgumentError,
         "dtensor: expected a torch DTensor, got Tensor"),
        (lambda: dtr.torch.redistribute(x, [Replicate(), Replicate()]), dtr.ArgumentError,
         "placements: 2 placements for a mesh of 1 dims"),
        (lambda: dtr.torch.redistribute(x, 3), dtr.ArgumentError,
         "placements: expected a sequence of torch placements, got int"),
        (lambda: dtr.torch.redistribute(x, [Shard(2)]), dtr.ArgumentError, "S(2)"),
        (lambda: dtr.torch.digest(DTensor.from_local(torch.ones(4, 2), mesh, [Partial()])),
         dtr.ArgumentError,
         "has no values to digest until it is reduced"),
        (lambda: dtr.torch.digest(torch.ones(2)), dtr.ArgumentError,
         "dtensor: expected a torch DTensor, got Tensor"),
        (lambda: dtr.Mesh.from_torch(mesh, backend="mpi4"), dtr.ArgumentError,
         "no backend 'mpi4'"),
        (lambda: dtr.Mesh.from_torch(mesh, backend="nccl"), dtr.ArgumentError,
         "device_mesh: a 'cpu' DeviceMesh, and backend 'nccl' moves CUDA memory"),
        (lambda: dtr.torch.redistribute(x, ["R"]), dtr.ArgumentError,
         "placements[0]: expected a torch Placement (Shard, Replicate, Partial), got str"),
        (lambda: dtr.torch.redistribute(x, [Shard(-3)]), dtr.ArgumentError,
         "placements[0]: Shard(-3) is out of range for a 2-d tensor"),
        (lambda: dtr.torch.redistribute(x, [Replicate()], device_mesh="cpu"), dtr.ArgumentError,
         "device_mesh: expected a torch DeviceMesh or None, got str"),
        (lambda: dtr.torch.redistribute(distribute_tensor(torch.ones(4, 2), mesh, [Replicate()]),
                                        [Partial()]), dtr.RefusedError,
         "placements[0]: R -> P(sum): DTensor.redistribute makes a Partial"),
    ]
    for i, (call, cls, text) in enumerate(checks):
        try:
            call()
            why = "no error"
        except cls as e:
            why = None if text in str(e) else f"{cls.__name__} without '{text}': {e}"
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        tally.check(why, f"refusal {i}")


def absent_peer(tally, rank, n):
    """Last (it leaves rank 0's contexts gone): rank 0 alone makes a new context through
    torch's store, the others never do; within DTR_TIMEOUT_S (2 s here, not the process
    group's 30 minutes) it fails with dtr.TimeoutError naming the key it waited for."""
    if n < 2 or os.environ.get("DTR_TORCH_BACKEND") == "torch":  # (the engine has no rendezvous)
        return
    why = None
    x = distribute_tensor(torch.ones(4), init_device_mesh("cpu", (n,)), [Shard(0)])  # (all)
    if rank == 0:
        dtr._core._shutdown()
        os.environ["DTR_TIMEOUT_S"] = "2"
        try:
            dtr.torch.redistribute(x, [Replicate()])
            why = "no error"
        except dtr.TimeoutError as e:
            why = None if "was not set in 2 s (DTR_TIMEOUT_S" in str(e) else f"TimeoutError: {e}"
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
    tally.check(why, f"a peer that never calls: rank {rank}")


def main():
    # (DTensor's advice on sequential collectives and gloo's all-to-all fallback, per case)
    logging.getLogger("torch.distributed").setLevel(logging.ERROR)
    # a hang prints every thread's stack and ends the run, rather than waiting for a timeout
    faulthandler.dump_traceback_later(float(os.environ.get("DTR_PY_DEADLINE_S", "800")), exit=True)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else int(
        os.environ.get("DTR_PY_DTENSOR_CASES", "500"))
    rng = np.random.default_rng(SEED)
    meshes, tally = {}, Tally()
    refused = grads = 0
    for case in range(cases):
        ms, shape, dname, op, src, dst = draw(rng, n)
        full = rng.integers(-20, 20, size=shape)
        texts = [dtr._placements.placement_text(p) for p in src]
        coord = coords(ms)[rank]
        local = local_input(full.astype(np.float64), ms,
                            [t if t != f"P({op})" or op == "sum" else "P(max)" for t in texts],
                            coord, SEED + case)
        local = torch.from_numpy(np.ascontiguousarray(local)).to(DTYPES[dname])
        if ms not in meshes:
            meshes[ms] = init_device_mesh("cpu", ms)
        tmesh = meshes[ms]
        what = f"case {case} (seed {SEED}): mesh {ms} {src} -> {dst} shape {shape} {dname}"
        try:
            want, want_grad = run("torch", local, tmesh, src, dst, shape, None)
            torch_ok = True
        except Exception:
            torch_ok = False
        if not agree(torch_ok):
            refused += 1
            continue
        weight = torch.from_numpy(np.random.default_rng([SEED, case, rank]).integers(
            -3, 4, size=tuple(want.to_local().shape))).to(want.dtype)
        want, want_grad = run("torch", local, tmesh, src, dst, shape, weight)
        # half the cases async (the same on every rank), waited for at the first use
        async_op = bool(np.random.default_rng([SEED, case]).random() < 0.5)
        what += " async_op" * async_op
        for kind in ("dtr", "patch"):
            try:
                got, got_grad = run(kind, local, tmesh, src, dst, shape, weight, async_op)
                why = ("placements" if got.placements != want.placements else
                       "shape" if got.shape != want.shape else
                       "stride" if got.stride() != want.stride() else
                       "dtype" if got.dtype != want.dtype else
                       "values" if not torch.equal(bits(got.to_local()), bits(want.to_local()))
                       else None)
                if why is None and kind == "dtr" and not any(p.is_partial() for p in dst):
                    # proof of delivery: the same digest as DTensor's own result
                    d = dtr.torch.digest(got)
                    why = "digest" if d != dtr.torch.digest(want) else None
                if why is None and want_grad is not None:
                    why = ("gradient placements" if got_grad.placements != want_grad.placements
                           else "gradient" if not torch.equal(bits(got_grad.to_local()),
                                                              bits(want_grad.to_local()))
                           else None)
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
            if tally.check(why, f"{what} [{kind}] rank {rank}"):
                grads += want_grad is not None
    between_meshes(tally, rng, n, rank, max(10, cases // 10))
    refusals(tally, n)
    absent_peer(tally, rank, n)
    if rank == 0:
        print(f"torchrun dtensor on {n} ranks (seed {SEED}): {cases} cases, {refused} refused "
              f"by DTensor, {grads} gradients compared; {max(10, cases // 10)} changes between "
              "meshes; the refusals")
        for f in tally.failures[:10]:
            print("  FAILED", f)
        print(f"torchrun dtensor: {tally.passed} passed, {len(tally.failures)} failed", flush=True)
    dist.destroy_process_group()
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
