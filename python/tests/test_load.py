"""dtr.load (issue 62): a random model written by the `safetensors` package (dtypes it reads
back with numpy, bf16 through ml_dtypes; uneven shapes; several files with an index), loaded
into every mesh shape of the job (mpirun -n 1, 2, 4) under random rules, each rank's blocks
equal to reference.py's slice of the original bit for bit, and a cast rule's values equal to
ml_dtypes' rounding; the other ranks' blocks through rank=; the errors, by name."""
import json
import os

import numpy as np
import pytest

import dtr
from conftest import world
from reference import block

ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

DTYPES = [np.float32, ml_dtypes.bfloat16, np.float16, np.int64, np.int32, np.uint8,
          np.float64]


def model(rng):
    out = {}
    for i in range(3):
        for kind in ("attn", "mlp", "norm"):
            nd = 1 if kind == "norm" else int(rng.integers(2, 4))
            shape = tuple(int(x) for x in rng.integers(1, 12, size=nd))
            dt = DTYPES[int(rng.integers(len(DTYPES)))]
            out[f"h.{i}.{kind}.weight"] = (rng.standard_normal(shape) * 50).astype(dt)
    out["wte"] = (rng.standard_normal((int(rng.integers(3, 20)), 5)) * 100).astype(np.float32)
    return out


def shared_dir(tmp_path):
    """rank 0's tmp_path, on every rank."""
    return world().bcast(str(tmp_path), root=0)


def write(tmp, m, split):
    """The model as one file, or split over two files with an index (rank 0 writes)."""
    if world().Get_rank() == 0:
        if not split:
            safetensors_numpy.save_file(m, os.path.join(tmp, "model.safetensors"))
        else:
            names = sorted(m)
            parts = [names[: len(names) // 2], names[len(names) // 2:]]
            weight_map = {}
            for k, part in enumerate(parts):
                f = f"model-{k + 1:05d}-of-00002.safetensors"
                safetensors_numpy.save_file({n: m[n] for n in part}, os.path.join(tmp, f))
                weight_map.update({n: f for n in part})
            with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {}, "weight_map": weight_map}, f)
    world().Barrier()
    return tmp if split else os.path.join(tmp, "model.safetensors")


def random_rules(rng, ndims):
    def pl(nd):
        kinds = [f"S({d})" for d in range(nd)] + ["R"]
        return ",".join(str(rng.choice(kinds)) for _ in range(ndims))
    return [{"match": "*.attn.*", "placements": pl(2)},
            {"match": "*.mlp.weight", "placements": pl(2)},
            {"match": "*norm*", "placements": pl(1)},
            {"match": "*", "placements": pl(2)}]


def placements_of(rules, name):
    import fnmatch
    return next(r["placements"] for r in rules if fnmatch.fnmatchcase(name, r["match"]))


def mesh_shapes(n):
    return [(n,)] + [(a, n // a) for a in range(2, n) if n % a == 0]


def test_load_every_mesh_random_rules(tmp_path, seed):
    comm = world()
    n, me = comm.Get_size(), comm.Get_rank()
    tmp = shared_dir(tmp_path)
    for case in range(4):
        rng = np.random.default_rng([seed, case])
        m = model(rng)
        path = write(os.path.join(tmp), m, split=case % 2 == 1)
        for mesh_shape in mesh_shapes(n):
            mesh = dtr.Mesh(mesh_shape)
            rules = random_rules(rng, len(mesh_shape))
            got = dtr.load(path, mesh, rules)
            assert list(got) == sorted(m), (seed, case)
            for name, full in m.items():
                pl = placements_of(rules, name).split(",")
                want = full[block(full.shape, mesh_shape, pl, mesh.coordinate)]
                g = got[name]
                assert g.dtype == want.dtype and g.shape == want.shape, (seed, case, name, pl)
                assert g.tobytes() == want.tobytes(), (seed, case, name, pl, me)
        comm.Barrier()
        if me == 0:
            for f in os.listdir(tmp):
                os.remove(os.path.join(tmp, f))
        comm.Barrier()


def test_load_names_rank_cast_and_dict_rules(tmp_path, seed):
    tmp = shared_dir(tmp_path)
    rng = np.random.default_rng([seed, 99])
    m = {"a.weight": rng.standard_normal((7, 5)).astype(np.float32),
         "b.bias": rng.standard_normal(9).astype(np.float32)}
    path = write(tmp, m, split=False)
    mesh = dtr.Mesh((world().Get_size(),))
    rules = {"*.weight": [dtr.Shard(1)], "*": "R"}
    for r in range(world().Get_size()):
        got = dtr.load(path, mesh, rules, names=["a.weight"], rank=r)
        assert list(got) == ["a.weight"]
        want = m["a.weight"][block((7, 5), mesh.shape, ["S(1)"], (r,))]
        assert got["a.weight"].tobytes() == want.tobytes()
    # a cast rule: bf16 values are ml_dtypes' round-to-nearest-even of the f32
    got = dtr.load(path, mesh, [{"match": "*", "placements": "R", "dtype": "bf16"}])
    for k, v in m.items():
        assert got[k].dtype == ml_dtypes.bfloat16
        assert got[k].tobytes() == v.astype(ml_dtypes.bfloat16).tobytes(), k
    # a rules file by path
    if world().Get_rank() == 0:
        with open(os.path.join(tmp, "rules.json"), "w") as f:
            json.dump([{"match": "*", "placements": "S(0)"}], f)
    world().Barrier()
    got = dtr.load(path, mesh, os.path.join(tmp, "rules.json"))
    me = mesh.coordinate
    assert got["b.bias"].tobytes() == m["b.bias"][block((9,), mesh.shape, ["S(0)"], me)].tobytes()


def test_load_metadata(tmp_path):
    """The "__metadata__" the safetensors package writes comes back as a dict; beside an index,
    its "metadata" too; none is an empty dict."""
    tmp = str(tmp_path / f"r{world().Get_rank()}")
    os.makedirs(tmp)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    safetensors_numpy.save_file({"w": w}, os.path.join(tmp, "a.safetensors"),
                                metadata={"format": "pt", "step": "7"})
    assert dtr.load_metadata(os.path.join(tmp, "a.safetensors")) == {"format": "pt", "step": "7"}
    safetensors_numpy.save_file({"w": w}, os.path.join(tmp, "b.safetensors"))
    assert dtr.load_metadata(os.path.join(tmp, "b.safetensors")) == {}
    d = os.path.join(tmp, "sharded")
    os.makedirs(d)
    safetensors_numpy.save_file({"w": w}, os.path.join(d, "model-00001-of-00001.safetensors"),
                                metadata={"format": "pt"})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 24, "origin": "test"},
                   "weight_map": {"w": "model-00001-of-00001.safetensors"}}, f)
    assert dtr.load_metadata(d) == {"total_size": "24", "origin": "test", "format": "pt"}
    with pytest.raises(dtr.FileError):
        dtr.load_metadata(os.path.join(tmp, "none.safetensors"))


def test_load_errors(tmp_path):
    tmp = shared_dir(tmp_path)
    m = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    path = write(tmp, m, split=False)
    mesh = dtr.Mesh((world().Get_size(),))
    cases = [
        (dict(rules=[{"match": "x*", "placements": "R"}]), dtr.ArgumentError,
         "rules: tensor 'w' matches no rule"),
        (dict(rules=[{"match": "*", "placements": "S(2)"}]), dtr.ArgumentError,
         "tensor 'w' (3x4) with rule 0"),
        (dict(rules=[{"match": "*", "placements": "P"}]), dtr.ArgumentError,
         "rule 0: placements 'P': Partial: a checkpoint holds whole values"),
        (dict(rules=[{"match": "*", "placements": "R,R"}]), dtr.ArgumentError,
         "rule 0: placements 'R,R': 2 for a 1-dim mesh"),
        (dict(rules=[{"match": "*", "place": "R"}]), dtr.ArgumentError,
         "rule 0: unknown key \"place\""),
        (dict(rules="R"), dtr.FileError, "R: No such file or directory"),
        (dict(rules=7), dtr.ArgumentError, "rules: expected a rules file's path"),
        (dict(rules={"*": "R"}, names=["nope"]), dtr.ArgumentError, "no tensor 'nope'"),
        (dict(rules={"*": "R"}, names="w"), dtr.ArgumentError, "names: 'w': expected a list"),
        (dict(rules={"*": "R"}, framework="jax"), dtr.ArgumentError, "framework: 'jax'"),
        (dict(rules={"*": "R"}, device="cuda"), dtr.ArgumentError, "needs framework='torch'"),
        (dict(rules={"*": "R"}, rank=99), dtr.ArgumentError, "rank: 99 is not a rank"),
        (dict(rules={"*": "R"}, rank="0"), dtr.ArgumentError, "rank: expected an int, got str"),
        (dict(rules={"*": "R"}, rank=2 ** 32), dtr.ArgumentError,
         "rank: 4294967296 is out of range (0..2147483647)"),
        (dict(rules={"*": "R"}, names=["w\x00junk"]), dtr.ArgumentError,
         "names[0]: 'w\\x00junk' holds a NUL character"),
    ]
    try:
        import torch  # noqa: F401
    except ImportError:
        cases.append((dict(rules={"*": "R"}, framework="torch"), dtr.ArgumentError,
                      "framework: 'torch' needs PyTorch, which does not import here"))
    for kw, exc, text in cases:
        with pytest.raises(exc) as e:
            dtr.load(path, mesh, **kw)
        assert text is None or text in str(e.value), (kw, str(e.value))
    with pytest.raises(dtr.FileError) as e:
        dtr.load(os.path.join(tmp, "missing.safetensors"), mesh, {"*": "R"})
    assert "missing.safetensors" in str(e.value) and isinstance(e.value, OSError)
    with open(os.path.join(tmp, f"bad{world().Get_rank()}.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(dtr.ArgumentError) as e:
        dtr.load(os.path.join(tmp, f"bad{world().Get_rank()}.safetensors"), mesh, {"*": "R"})
    assert "bad" in str(e.value)


def test_load_torch(tmp_path):
    torch = pytest.importorskip("torch")
    tmp = shared_dir(tmp_path)
    m = {"w": (np.arange(35, dtype=np.float32).reshape(7, 5) - 3.5) * 1.25,
         "h": np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)}
    path = write(tmp, m, split=False)
    mesh = dtr.Mesh((world().Get_size(),))
    for device in (None, "cpu", torch.device("cpu")):
        got = dtr.load(path, mesh, {"w": "S(0)", "h": "R"}, framework="torch", device=device)
        want = m["w"][block((7, 5), mesh.shape, ["S(0)"], mesh.coordinate)]
        assert isinstance(got["w"], torch.Tensor) and got["w"].dtype == torch.float32
        assert got["w"].numpy().tobytes() == want.tobytes()
        assert got["h"].dtype == torch.bfloat16
        assert got["h"].view(torch.int16).numpy().tobytes() == m["h"].tobytes()
