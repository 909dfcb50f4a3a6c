"""torch CPU tensors through dtr, and the differential test against torch.distributed.tensor:
the same local shards into DTensor.redistribute (gloo) and dtr.redistribute on the same ranks,
compared bit for bit. Skipped where torch is not installed (python/tests/run.sh --torch)."""
import os
import socket

import numpy as np
import pytest

import dtr
from conftest import SEED, world
from reference import block, coords, local_input

torch = pytest.importorskip("torch")
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402

TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
                "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64}


def test_torch_tensors_in_and_out():
    mesh = dtr.Mesh(1)
    for name, dt in TORCH_DTYPES.items():
        t = torch.arange(24).reshape(4, 6).to(dt)
        r = dtr.redistribute(t, mesh, [Shard(0)], [Replicate()])
        if world().Get_rank() != 0:
            assert r is None
            continue
        assert isinstance(r, torch.Tensor) and r.dtype == dt and torch.equal(r, t), name
        out = torch.full((4, 6), -1).to(dt)
        assert dtr.redistribute(t.t().contiguous().t(), mesh, "R", "R", out=out) is out
        assert torch.equal(out, t), name
    up = dtr.redistribute(torch.ones(3, dtype=torch.bfloat16), mesh, "R", "R", to_dtype=torch.float32)
    if world().Get_rank() == 0:
        assert up.dtype == torch.float32 and torch.equal(up, torch.ones(3))
        g = torch.ones(3, requires_grad=True)
        assert torch.equal(dtr.redistribute(g, mesh, "R", "R"), torch.ones(3))
        with pytest.raises(dtr.ArgumentError, match="out: not contiguous"):
            dtr.redistribute(torch.ones(4, 6), mesh, "R", "R", out=torch.empty(6, 4).t())
        with pytest.raises(dtr.ArgumentError, match="local: dtype torch.bool is not one dtr moves"):
            dtr.redistribute(torch.ones(4, dtype=torch.bool), mesh, "R", "R")
    else:
        dtr.redistribute(torch.ones(4, dtype=torch.bool), mesh, "R", "R")


@pytest.fixture(scope="module")
def gloo():
    """One gloo process group over the job's ranks (the port chosen by rank 0)."""
    import torch.distributed as dist
    comm = world()
    port = None
    if comm.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port, root=0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=comm.Get_rank(), world_size=comm.Get_size())
    yield dist
    dist.destroy_process_group()


def mesh_shapes(n):
    return [s for s in [(n,), (2, n // 2), (n // 2, 2), (2, 2, 2)]
            if int(np.prod(s)) == n and min(s) >= 1]


def test_agrees_with_dtensor_bit_for_bit(gloo):
    from torch.distributed.device_mesh import init_device_mesh
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED + 3)
    compared = refused = 0
    cases = int(os.environ.get("DTR_PY_DTENSOR_CASES", "600"))
    meshes = {}
    for case in range(cases):
        shapes = mesh_shapes(n)
        ms = shapes[rng.integers(len(shapes))]
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(0, 9, size=ndim))
        dname = list(TORCH_DTYPES)[rng.integers(len(TORCH_DTYPES))]
        kinds = [Shard(d) for d in range(ndim)] + [Replicate()]
        op = str(rng.choice(["sum", "max", "min"] + (["avg"] if dname[0] in "fb" else [])))
        src = [kinds[rng.integers(len(kinds))] if rng.random() < 0.7 else Partial(op) for _ in ms]
        dst = [kinds[rng.integers(len(kinds))] for _ in ms]
        full = rng.integers(-20, 20, size=shape)
        texts = [dtr._placements.placement_text(p) for p in src]
        coord = coords(ms)[rank]
        local = local_input(full.astype(np.float64), ms, [t if t != f"P({op})" or op == "sum" else "P(max)" for t in texts], coord, SEED + case)
        local_t = torch.from_numpy(np.ascontiguousarray(local)).to(TORCH_DTYPES[dname])
        if ms not in meshes:
            meshes[ms] = (init_device_mesh("cpu", ms), dtr.Mesh(ms))
        tmesh, dmesh = meshes[ms]
        what = f"case {case} (seed {SEED}): mesh {ms} {src} -> {dst} shape {shape} {dname}"
        try:
            stride = tuple(int(np.prod(shape[i + 1:])) for i in range(ndim))
            dt = DTensor.from_local(local_t, tmesh, src, run_check=False, shape=torch.Size(shape),
                                    stride=stride)
            want = dt.redistribute(tmesh, dst).to_local()
            torch_ok = 1
        except Exception:
            torch_ok = 0
        if comm.allreduce(torch_ok, op=__import__("mpi4py").MPI.MIN) == 0:
            refused += 1
            continue
        got = dtr.redistribute(local_t, dmesh, src, dst, shape=shape)
        assert got.dtype == want.dtype and got.shape == want.shape, what
        bits = torch.int16 if want.element_size() == 2 else want.dtype
        assert torch.equal(got.view(bits), want.contiguous().view(bits)), what
        compared += 1
    print(f"\ndtensor differential on {n} ranks (seed {SEED}): {compared} cases compared, "
          f"0 mismatches; {refused} refused by DTensor")
    assert compared >= cases * 0.8, (compared, refused)


def test_ddp_hook_trains_as_pytorchs_own(gloo):
    import dtr.torch as dtorch
    from torch.nn.parallel import DistributedDataParallel as DDP
    comm = world()
    rank = comm.Get_rank()
    params = {}
    for name, hook in [("torch", None), ("dtr", dtorch.allreduce_hook)]:
        torch.manual_seed(SEED)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        ddp = DDP(model)
        if hook is not None:
            ddp.register_comm_hook(None, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(SEED + rank)
        for _ in range(5):
            x = torch.randn(4, 8, generator=data)
            opt.zero_grad()
            ddp(x).square().sum().backward()
            opt.step()
        params[name] = [p.detach().clone() for p in model.parameters()]
    diff = max((a - b).abs().max().item() for a, b in zip(params["torch"], params["dtr"]))
    print(f"\nDDP, 5 steps on {comm.Get_size()} ranks: largest parameter difference {diff:.3g}")
    for a, b in zip(params["torch"], params["dtr"]):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)
