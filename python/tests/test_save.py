"""dtr.save, the collective save: seeded random tensors (empty dims, one element, uneven
shards, every dtype numpy holds) on meshes of 1 or 2 dims over all or some of the ranks, saved
and read back with dtr.load, whole and as each rank's blocks, every element compared; and the
unhappy paths: a directory that is not empty, one rank's wrong block, arguments that are not
what save takes. Under mpirun the backend is mpi; under tools/dtr_launch.sh (no MPI) set
DTR_PY_BACKEND=gloo."""
import os
import random
import shutil
import tempfile

import numpy as np
import pytest

import dtr

BACKEND = os.environ.get("DTR_PY_BACKEND", "mpi")
CASES = int(os.environ.get("DTR_PY_SAVE_CASES", "12"))
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
      "i64": np.int64, "u8": np.uint8}
DIMS = [0, 1, 2, 3, 5, 7, 16, 33]


def world():
    """This rank and the job's size, as the backend sees them."""
    if BACKEND == "mpi":
        from mpi4py import MPI
        return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def everyone():
    rank, n = world()
    return dtr.Mesh((n,), ranks=list(range(n)), backend=BACKEND)


@pytest.fixture
def base(seed):
    """A fresh directory every rank names alike (rank 0's random token, spread by dtr itself:
    the largest of every rank's value, the others giving 0), removed after the test."""
    rank, n = world()
    token = np.array([random.Random().randrange(1, 2**62) if rank == 0 else 0], np.int64)
    got = dtr.redistribute(token, everyone(), "P(max)", "R")
    path = os.path.join(tempfile.gettempdir(), f"dtr_pysave_{seed}_{n}_{BACKEND}_{got[0]}")
    if rank == 0:
        os.makedirs(path)
    barrier()  # (made before any rank looks)
    yield path
    barrier()
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)


def barrier():
    dtr.redistribute(np.zeros(1, np.int32), everyone(), "P(max)", "R")


def blocks_of(m, names, shapes, dtypes, placements, fulls, rank):
    out = {}
    for name in names:
        for x in dtr.layout(m, shapes[name], placements[name], dtypes[name]):
            if x.rank == rank:
                sl = tuple(slice(o, o + k) for o, k in zip(x.global_offset, x.local_shape))
                out[name] = fulls[name][sl].copy()
    return out


def draw_case(seed, k):
    rng = random.Random(seed * 1000003 + k)
    rank, n = world()
    size = rng.randint(1, n)
    shape = (2, size // 2) if size >= 4 and size % 2 == 0 and rng.random() < 0.5 else (size,)
    ranks = rng.sample(range(n), size)
    names, shapes, dtypes, placements, fulls = [], {}, {}, {}, {}
    for t in range(rng.randint(1, 5)):
        name = f"layer.{t}.w"
        nd = rng.randint(1, 3)
        shp = tuple(rng.choice(DIMS[:4] if rng.random() < 0.5 else DIMS) for _ in range(nd))
        dt = rng.choice(sorted(NP))
        pl = ",".join(f"S({rng.randrange(nd)})" if rng.random() < 0.6 else "R"
                      for _ in shape)
        g = np.random.default_rng(seed * 7919 + k * 31 + t)
        names.append(name)
        shapes[name], dtypes[name], placements[name] = shp, dt, pl
        fulls[name] = g.integers(0, 200, size=shp).astype(NP[dt])
    return shape, ranks, names, shapes, dtypes, placements, fulls


def test_save_and_load_back(seed, base):
    rank, n = world()
    for k in range(CASES):
        shape, ranks, names, shapes, dtypes, placements, fulls = draw_case(seed, k)
        m = dtr.Mesh(shape, ranks=ranks, backend=BACKEND)
        path = os.path.join(base, f"case-{k}")
        blocks = blocks_of(m, names, shapes, dtypes, placements, fulls, rank)
        what = f"seed {seed} case {k}: mesh {shape} ranks {ranks}: {placements} {shapes}"
        assert dtr.save(path, blocks, m, placements, shapes=shapes,
                        metadata={"case": str(k)}) is None, what
        barrier()
        me = dtr.Mesh((1,), ranks=[rank], backend=BACKEND)
        whole = dtr.load(path, me, {"*": "R"})
        assert sorted(whole) == sorted(names), what
        for name in names:
            assert whole[name].dtype == fulls[name].dtype, what
            assert np.array_equal(whole[name], fulls[name]), f"{what}: {name} read whole"
        mine = dtr.load(path, m, {name: placements[name] for name in names})
        assert sorted(mine) == (sorted(names) if rank in ranks else []), what
        for name, b in mine.items():
            assert np.array_equal(b, blocks[name]), f"{what}: {name} as this rank's block"
        assert dtr.load_metadata(path) == {"case": str(k)}, what
        barrier()


def test_shapes_inferred_as_even_shards(base):
    rank, n = world()
    m = everyone()
    full = np.arange(4 * n * 3, dtype=np.float32).reshape(4 * n, 3)
    block = full[4 * rank:4 * rank + 4]
    dtr.save(os.path.join(base, "even"), {"w": block, "b": full[0]}, m,
             {"w": [dtr.Shard(0)], "b": "R"})
    barrier()
    got = dtr.load(os.path.join(base, "even"), dtr.Mesh((1,), ranks=[rank], backend=BACKEND),
                   {"*": "R"})
    assert np.array_equal(got["w"], full) and np.array_equal(got["b"], full[0])


def test_a_directory_not_empty_is_refused_and_kept(base):
    rank, n = world()
    if rank == 0:
        with open(os.path.join(base, "mine.txt"), "w") as f:
            f.write("keep")
    barrier()
    with pytest.raises(dtr.ArgumentError, match="is not empty"):
        dtr.save(base, {"w": np.zeros(3, np.float32)}, everyone(), "R")
    barrier()
    assert sorted(os.listdir(base)) == ["mine.txt"]


@pytest.mark.skipif(world()[1] < 2, reason="one rank wrong needs two")
def test_one_rank_wrong_fails_every_rank_and_writes_nothing(base):
    rank, n = world()
    path = os.path.join(base, "one_wrong")
    m = everyone()
    full = np.arange(2 * n, dtype=np.float64).reshape(2 * n)
    block = np.zeros(3) if rank == 1 else full[2 * rank:2 * rank + 2]
    if rank == 1:
        with pytest.raises(dtr.ArgumentError, match=r"blocks\['w'\]: shape \(3,\) is not rank 1"):
            dtr.save(path, {"w": block}, m, "S(0)", shapes={"w": (2 * n,)})
    else:
        with pytest.raises(dtr.Error, match="rank 1 of the mesh failed its arguments"):
            dtr.save(path, {"w": block}, m, "S(0)", shapes={"w": (2 * n,)})
    barrier()
    assert not os.path.exists(path)
    # and the job is in step: the next save works
    dtr.save(path, {"w": full[2 * rank:2 * rank + 2]}, m, "S(0)")
    barrier()
    assert sorted(os.listdir(path))[-1] == "rank-%05d-of-%05d.safetensors" % (n - 1, n)


@pytest.mark.parametrize("args, kw, cls, match", [
    (("{}", "S(0)"), {}, dtr.ArgumentError, "blocks: expected a dict"),
    (({}, "S(0)"), {}, dtr.ArgumentError, r"blocks: empty \(nothing to save\)"),
    (({"w": np.zeros(4, np.float32)}, {"v": "R"}), {}, dtr.ArgumentError,
     "placements: no entry for 'w'"),
    (({"w": np.zeros(4, np.float32)}, "P(sum)"), {}, dtr.RefusedError,
     r"items\[0\] \('w'\): placements\[0\] Partial: reduce it first"),
    (({"w": np.zeros(4, np.float32)}, "R"), {"metadata": {"k": 1}}, dtr.ArgumentError,
     "metadata: 'k': keys and values must be str"),
    (({"w": np.zeros(4, np.float32)}, "R"), {"shapes": [4]}, dtr.ArgumentError,
     "shapes: expected None or a dict"),
    (({3: np.zeros(4, np.float32)}, "R"), {}, dtr.ArgumentError,
     "blocks: key 3 is not a tensor name"),
    (({"w": np.zeros(4, np.float32)}, "R"), {"shapes": {"w": (5,)}}, dtr.ArgumentError,
     r"blocks\['w'\]: shape \(4,\) is not rank \d+'s block \(5,\)"),
])
def test_bad_arguments_name_themselves_and_write_nothing(base, args, kw, cls, match):
    rank, n = world()
    path = os.path.join(base, "bad")
    with pytest.raises(cls, match=match):
        dtr.save(path, args[0], everyone(), args[1], **kw)
    barrier()
    assert not os.path.exists(path)


@pytest.mark.skipif(world()[1] < 2, reason="ranks that differ need two")
def test_a_path_that_differs_between_ranks_fails_every_rank(base):
    rank, n = world()
    m = everyone()
    block = np.arange(2, dtype=np.float32) + 2 * rank
    path = os.path.join(base, "mine" if rank != 1 else "theirs")
    with pytest.raises(dtr.ArgumentError, match="the ranks' arguments differ"):
        dtr.save(path, {"w": block}, m, "S(0)")
    barrier()
    assert os.listdir(base) == []


def test_one_request_in_flight_per_communicator(base):
    rank, n = world()
    m = everyone()
    full = np.arange(4 * n, dtype=np.float32)
    first = dtr.redistribute_many([full[4 * rank:4 * rank + 4]], m, "S(0)", "R", async_op=True)
    with pytest.raises(dtr.BackendError, match="a request is still in flight") as e:
        dtr.redistribute(full[4 * rank:4 * rank + 4], m, "S(0)", "R")
    assert e.value.status == "DTR_ERR_BUSY"
    assert np.array_equal(first.wait()[0], full)
