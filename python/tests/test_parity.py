"""The parity cases through Python: seeded random changes in every form (one tensor, a batch,
between meshes, a batch between meshes) on the backend the job was started for, every element
of every rank's result checked against numpy. Under mpirun the backend is mpi; under
tools/dtr_launch.sh (no MPI) set DTR_PY_BACKEND=gloo. The shapes users have: empty dims, one
element, uneven shards beside larger tensors; meshes of 1 or 2 dims on any subset of the
ranks in any order; Partial sources of sum, avg, max and min."""
import itertools
import os
import random

import numpy as np
import pytest

import dtr

BACKEND = os.environ.get("DTR_PY_BACKEND", "mpi")
# the meshes' device: None (host arrays); test_device.py runs these cases on its "fake" one,
# torchrun_device.py on "fake" or "cuda", each block of the kind KIND: "array" (a
# dtr.DeviceArray), "torch" (a torch tensor on the device), "cupy" (a CuPy array, read through
# __cuda_array_interface__)
DEVICE = None
KIND = "array"
CASES = int(os.environ.get("DTR_PY_PARITY_CASES", "40"))
DTYPES = ["f32", "f64", "f16", "i32", "i64", "u8"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
      "i64": np.int64, "u8": np.uint8}
DIMS = [0, 1, 2, 3, 5, 7, 16, 33]


def world():
    """This rank and the job's size, as the backend sees them."""
    if BACKEND == "mpi":
        from mpi4py import MPI
        return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def mesh(shape, ranks):
    return dtr.Mesh(shape, ranks=ranks, backend=BACKEND, device=DEVICE)


def to_device(block):
    if DEVICE is None:
        return block
    if KIND == "torch":
        import torch
        return torch.as_tensor(block).to(DEVICE)
    if KIND == "cupy":
        import cupy
        return cupy.asarray(block)
    return dtr.DeviceArray.from_numpy(block, DEVICE)


def from_device(out):
    if DEVICE is None:
        return np.asarray(out)
    if KIND == "torch":
        assert out.device.type == DEVICE.split(":")[0], (out.device, DEVICE)
        return out.cpu().numpy()
    assert isinstance(out, dtr.DeviceArray), f"a {type(out).__name__} from a {DEVICE} mesh"
    assert out.device.split(":")[0] == DEVICE.split(":")[0], (out.device, DEVICE)
    return out.numpy()


def draw_mesh(rng, n):
    """A mesh of 1 or 2 dims over a random subset of the n ranks, in random order."""
    size = rng.randint(1, n)
    shape = (size,)
    if size >= 4 and size % 2 == 0 and rng.random() < 0.5:
        shape = (2, size // 2)
    return shape, rng.sample(range(n), size)


def draw_placements(rng, nd, mdims, partial, ops):
    """One placement per mesh dim for an nd-dim tensor; Partial (of one op) where allowed."""
    op = rng.choice(ops)

    def one():
        r = rng.random()
        if partial and r < 0.3:
            return f"P({op})"
        return f"S({rng.randrange(nd)})" if r < 0.7 else "R"

    return ",".join(one() for _ in range(mdims))


def draw_tensor(rng, mdims, to_mdims):
    """(shape, dtype, src, dst): src on mdims mesh dims (Partial allowed), dst on to_mdims."""
    nd = rng.randint(1, 3)
    shape = tuple(rng.choice(DIMS[:4] if rng.random() < 0.5 else DIMS) for _ in range(nd))
    dtype = rng.choice(DTYPES)
    ops = ["sum", "max", "min"] + (["avg"] if dtype[0] == "f" else [])
    return (shape, dtype, draw_placements(rng, nd, mdims, True, ops),
            draw_placements(rng, nd, to_mdims, False, ops))


def full_value(seed, shape, dtype):
    """The tensor's values: small integers, exact in every dtype and under every reduction."""
    g = np.random.default_rng(seed)
    return g.integers(0, 10, size=shape).astype(NP[dtype])


def block_of(m, shape, placements, rank, dtype):
    """This rank's LocalLayout, or None where it is not on the mesh."""
    for x in dtr.layout(m, shape, placements, dtype):
        if x.rank == rank:
            return x
    return None


def slices(lay):
    return tuple(slice(o, o + n) for o, n in zip(lay.global_offset, lay.local_shape))


def partial_dims(placements):
    return [i for i, p in enumerate(placements.split(",")) if p.startswith("P")]


def contribution(coord, pdims):
    """What a rank adds on the Partial dims: depends on its coordinate there only (so that
    the ranks that replicate one piece hold the same contribution)."""
    return sum(coord[i] for i in pdims) % 3


def source_block(m, shape, dtype, src, rank, x):
    """This rank's source block: its piece of x, plus its contribution where src is Partial
    (avg contributions are x itself, so that the mean is exact)."""
    lay = block_of(m, shape, src, rank, dtype)
    if lay is None:
        return None
    b = x[slices(lay)].copy()
    pd = partial_dims(src)
    if pd and "avg" not in src:
        b += np.asarray(contribution(lay.coordinate, pd), dtype=b.dtype)
    return b


def expected_full(m, src, x):
    """The tensor src describes: x, or the reduction of every rank's contribution over the
    Partial dims."""
    pd = partial_dims(src)
    if not pd or "avg" in src:
        return x
    op = src.split(",")[pd[0]][2:-1]
    sizes = [m.shape[i] for i in pd]
    cs = [sum(c) % 3 for c in itertools.product(*[range(s) for s in sizes])]
    if op == "sum":
        return (x.astype(np.int64) * len(cs) + sum(cs)).astype(x.dtype)
    if op == "max":
        return x + np.asarray(max(cs), dtype=x.dtype)
    return x + np.asarray(min(cs), dtype=x.dtype)


def check_result(out, want, what):
    assert out.shape == want.shape, f"{what}: shape {out.shape}, want {want.shape}"
    bad = np.flatnonzero(out.reshape(-1) != want.reshape(-1))
    assert bad.size == 0, (f"{what}: {bad.size} of {want.size} elements wrong, the first at "
                           f"{bad[0]}: {out.reshape(-1)[bad[0]]} != {want.reshape(-1)[bad[0]]}")


def draw_case(seed, k, cross, many):
    rng = random.Random(seed * 1000003 + k)
    rank, n = world()
    ms, mr = draw_mesh(rng, n)
    m = mesh(ms, mr)
    to = None
    if cross:
        ts, tr = draw_mesh(rng, n)
        to = mesh(ts, tr)
    count = rng.randint(1, 4) if many else 1
    tensors = [draw_tensor(rng, len(ms), len((to or m).shape)) for _ in range(count)]
    return rank, m, to, tensors


def run_case(seed, k, cross, many):
    rank, m, to, tensors = draw_case(seed, k, cross, many)
    tm = to if to is not None else m
    what = (f"seed {seed} case {k}: mesh {m!r} -> {tm!r}: "
            + "; ".join(f"{s} {d} {a} -> {b}" for s, d, a, b in tensors))
    xs = [full_value(seed * 7919 + k * 31 + i, s, d) for i, (s, d, a, b) in enumerate(tensors)]
    locs = []
    for (s, d, a, b), x in zip(tensors, xs):
        blk = source_block(m, s, d, a, rank, x)
        locs.append(to_device(blk) if blk is not None else np.zeros(0, NP[d]))
    kw = {"to_mesh": to} if to is not None else {}
    if to is not None and k % 3 == 2:  # rounds of at most this many bytes
        kw["staging_cap"] = 8 << (k % 5)
    if many:
        if k % 2:  # async_op: a Request whose wait() gives the list
            kw["async_op"] = True
        outs = dtr.redistribute_many(locs, m, [t[2] for t in tensors], [t[3] for t in tensors],
                                     shapes=[t[0] for t in tensors],
                                     dtypes=[t[1] for t in tensors], **kw)
        if k % 2:
            assert isinstance(outs, dtr.Request), f"{what}: async_op gave {type(outs).__name__}"
            while k % 4 == 1 and not outs.is_completed():
                pass
            outs = outs.wait()
    elif k % 2:  # async_op: a Request, completed by wait() (is_completed() makes progress)
        s, d, a, b = tensors[0]
        req = dtr.redistribute(locs[0], m, a, b, shape=s, dtype=d, async_op=True, **kw)
        assert isinstance(req, dtr.Request), f"{what}: async_op gave {type(req).__name__}"
        while k % 4 == 1 and not req.is_completed():
            pass
        outs = [req.wait()]
    else:
        s, d, a, b = tensors[0]
        outs = [dtr.redistribute(locs[0], m, a, b, shape=s, dtype=d, **kw)]
    for i, ((s, d, a, b), x) in enumerate(zip(tensors, xs)):
        lay = block_of(tm, s, b, rank, d)
        if lay is None:
            continue
        want = expected_full(m, a, x)[slices(lay)]
        check_result(from_device(outs[i]).reshape(want.shape), want, f"{what}: tensor {i}")


@pytest.mark.parametrize("form", ["one", "many", "cross", "cross_many"])
def test_parity(form, seed):
    cross = form.startswith("cross")
    many = form.endswith("many")
    for k in range(CASES):
        run_case(seed, k, cross, many)


def test_backend_is_the_jobs(seed):
    m = mesh((1,), [0])
    assert m.backend == BACKEND
    assert (m.comm is None) == (BACKEND != "mpi")


def test_many_staging_cap_is_for_changes_between_meshes():
    rank, n = world()
    m = mesh((1,), [0])
    x = np.zeros(4, np.float32)
    with pytest.raises(dtr.ArgumentError, match=r"staging_cap: only for a change between "
                                                r"meshes \(to_mesh=\)"):
        dtr.redistribute_many([x], m, "R", "R", shapes=[(4,)], staging_cap=64)
    with pytest.raises(dtr.ArgumentError, match="staging_cap"):
        dtr.redistribute_many([x], m, "R", "R", shapes=[(4,)], to_mesh=m, staging_cap=-1)


def test_to_mesh_past_the_job_is_named():
    rank, n = world()
    with pytest.raises(dtr.ArgumentError, match=f"to_mesh: its rank {n} is not in the "
                                                f"(communicator|job) of {n} ranks"):
        dtr.redistribute(np.zeros(1, np.float32), mesh((1,), [0]), "R", "R", shape=(1,),
                         to_mesh=mesh((n + 1,), list(range(n + 1))))


@pytest.mark.parametrize("many", [False, True])
def test_async_between_meshes_returns_before_the_source_calls(many):
    """async_op=True between meshes returns a Request in flight: the destination rank's call
    comes back while the source rank has not yet called (it sleeps first), and its wait()
    then delivers. The first move between two meshes makes their groups, which every rank of
    them waits in, so the checked one comes second."""
    import time
    rank, n = world()
    if n < 2:
        pytest.skip("needs 2 ranks")
    src, dst = mesh((1,), [0]), mesh((1,), [1])
    x = np.arange(6, dtype=np.float32) + 1 if rank == 0 else None
    dtr.redistribute(x, src, "R", "R", shape=(6,), dtype="f32", to_mesh=dst)
    if rank == 0:
        time.sleep(1.0)
    if many:
        req = dtr.redistribute_many([x], src, "R", "R", shapes=[(6,)], dtypes=["f32"],
                                    to_mesh=dst, async_op=True)
    else:
        req = dtr.redistribute(x, src, "R", "R", shape=(6,), dtype="f32", to_mesh=dst,
                               async_op=True)
    assert isinstance(req, dtr.Request)
    if rank == 1:
        assert not req.is_completed(), "the call waited for the source rank"
    got = req.wait()
    if many:
        got = got[0]
    if rank == 1:
        assert np.array_equal(got, np.arange(6, dtype=np.float32) + 1)
    else:
        assert got is None


@pytest.mark.parametrize("pair", [("f32", "f16"), ("f16", "f32"), ("f64", "f32")])
def test_cast_between_meshes(pair, seed):
    """to_dtype with to_mesh, a source without Partial dims: the senders cast the boxes as
    they pack them (no pass on the source mesh); every element bit for bit numpy's cast
    (round to nearest even), values with every bit of their dtype, f16's overflow to inf."""
    d, e = pair
    rank, n = world()
    for k in range(8):
        rng = random.Random(seed * 1000003 + 7 * k)
        ms, mr = draw_mesh(rng, n)
        ts, tr = draw_mesh(rng, n)
        m, to = mesh(ms, mr), mesh(ts, tr)
        nd = rng.randint(1, 3)
        shape = tuple(rng.choice(DIMS) for _ in range(nd))
        src = draw_placements(rng, nd, len(ms), False, ["sum"])
        dst = draw_placements(rng, nd, len(ts), False, ["sum"])
        g = np.random.default_rng(seed + k)
        with np.errstate(over="ignore"):  # (f16 sources: the largest overflow to inf)
            x = (g.standard_normal(shape) * 10.0 ** g.integers(-6, 6, size=shape)).astype(NP[d])
        lay = block_of(m, shape, src, rank, d)
        loc = x[slices(lay)].copy() if lay is not None else np.zeros(0, NP[d])
        out = dtr.redistribute(loc, m, src, dst, shape=shape, dtype=d, to_mesh=to, to_dtype=e)
        tl = block_of(to, shape, dst, rank, e)
        if tl is None:
            continue
        with np.errstate(over="ignore"):
            want = x.astype(NP[e])[slices(tl)]
        got = np.asarray(out).reshape(want.shape)
        what = f"seed {seed} case {k}: {d} {src} on {m!r} -> {e} {dst} on {to!r}, shape {shape}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}"
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.itemsize]
        check_result(got.view(u), want.view(u), what)
