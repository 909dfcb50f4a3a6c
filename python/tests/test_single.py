"""Placements, layouts, plans and the errors of bad arguments: pure calls, and changes on a
one-rank mesh (rank 0; under mpirun the other ranks are bystanders and get None)."""
import json
import os
import subprocess

import numpy as np
import pytest

import dtr
from conftest import world

LAYOUT_2x5 = [  # `dtr layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'` (README)
    (0, (0, 0), (2, 2), (0, 0), 16), (1, (0, 1), (2, 1), (0, 2), 8),
    (2, (1, 0), (2, 1), (0, 3), 8), (3, (1, 1), (2, 1), (0, 4), 8)]
PLAN_JSON = ('{"strategy":"optimal","chosen_by":"greedy","steps":[{"mesh_dim":1,"kind":'
             '"reduce_scatter","from":"P(sum)","to":"S(1)","tensor_dim":1,'
             '"recv_bytes_per_rank_max":64,"send_bytes_per_rank_max":64,'
             '"extra_bytes_per_rank_max":128,"modeled_time_us":5.0064},{"mesh_dim":0,"kind":'
             '"all_gather","from":"S(0)","to":"R","tensor_dim":0,"recv_bytes_per_rank_max":64,'
             '"send_bytes_per_rank_max":64,"extra_bytes_per_rank_max":192,'
             '"modeled_time_us":5.0064}],"collectives":{"all_gather":1,"reduce_scatter":1,'
             '"all_reduce":0,"all_to_all":0,"exchange":0,"reduce_exchange":0},'
             '"recv_bytes_per_rank_max":128,"lower_bound_recv_bytes_per_rank":128,'
             '"peak_extra_bytes_per_rank":192,"modeled_time_us":10.0128}')


def rank0():
    return world().Get_rank() == 0


def test_version_is_the_library_version():
    """dtr.__version__ is version.bzl's, with "-dev" exactly while CHANGELOG.md has an
    "Unreleased" section: a tree past a release never passes for it."""
    top = os.path.join(os.path.dirname(__file__), "..", "..")
    bzl = os.path.join(top, "version.bzl")
    if os.path.exists(bzl):
        values = dict(x.split("=", 1) for x in open(bzl) if x.startswith("DTR_VERSION"))
        number = values["DTR_VERSION "].strip().strip('"')
        pre = values["DTR_VERSION_PRE "].strip().strip('"')
        assert dtr.__version__ == number + ("-" + pre if pre else "")
        unreleased = "## Unreleased" in open(os.path.join(top, "CHANGELOG.md")).read()
        assert (pre == "dev") == unreleased, (pre, unreleased)
    assert dtr.__version__.split("-")[0].count(".") == 2


def test_placement_objects():
    assert str(dtr.Shard(0)) == "S(0)" and repr(dtr.Shard(-1)) == "Shard(-1)"
    assert str(dtr.Replicate()) == "R" and str(dtr.Partial("avg")) == "P(avg)"
    assert dtr.Partial() == dtr.Partial("sum") != dtr.Partial("max")
    assert len({dtr.Shard(1), dtr.Shard(1), dtr.Replicate()}) == 2
    assert dtr.Shard(0).is_shard(0) and not dtr.Shard(0).is_shard(1)
    with pytest.raises(TypeError, match="dim must be an int"):
        dtr.Shard("0")
    texts = dtr._core._placement_texts
    assert texts("S(0), R ,P(avg)") == ("S(0)", "R", "P(avg)")
    assert texts([dtr.Shard(1), "Replicate()", dtr.Partial("max")]) == ("S(1)", "R", "P(max)")


def test_ragged_shards_as_objects_text_and_layouts():
    p = dtr.Shard(0, sizes=(3, 0, 5, 2))
    assert str(p) == "S(0){3,0,5,2}" and repr(p) == "Shard(0, sizes=(3, 0, 5, 2))"
    assert p == dtr.Shard(0, sizes=[3, 0, 5, 2]) != dtr.Shard(0) != dtr.Shard(0, sizes=(2, 5, 0, 3))
    assert len({p, dtr.Shard(0, sizes=(3, 0, 5, 2)), dtr.Shard(0)}) == 2
    assert dtr._core._placement_texts([p, "R"]) == ("S(0){3,0,5,2}", "R")
    mesh = dtr.Mesh(4)
    blocks = [(b.local_shape, b.global_offset) for b in dtr.layout(mesh, (10, 3), [p])]
    assert blocks == [((3, 3), (0, 0)), ((0, 3), (10, 0)), ((5, 3), (3, 0)), ((2, 3), (8, 0))]
    assert [b.local_shape for b in dtr.layout(mesh, (10, 3), "S(0){3,0,5,2}")] == \
        [b for b, _ in blocks]
    with pytest.raises(dtr.ArgumentError, match=r"sizes\[1\] is -1, must be an int 0..2\^40"):
        dtr.Shard(0, sizes=(1, -1))
    for bad in (True, 2.0, "3", 2 ** 40 + 1):
        with pytest.raises(dtr.ArgumentError, match=r"sizes\[0\] is .*, must be an int 0..2\^40"):
            dtr.Shard(0, sizes=(bad, 1))
    assert dtr.Shard(0, sizes=np.array([3, 7])) == dtr.Shard(0, sizes=(3, 7))
    assert dtr.Shard(0, sizes=np.array([3, 7])).sizes == (3, 7)
    # a long list's error keeps its reason (the text quoted is cut)
    with pytest.raises(dtr.ArgumentError, match=r"\.\.\.\": at offset .*: more than 65536 sizes"):
        dtr.layout(dtr.Mesh(2), (65537,), [dtr.Shard(0, sizes=(1,) * 65537)])
    long = dtr.Shard(0, sizes=(1,) * 5000)
    assert dtr._core._placement_texts([long])[0] == str(long)
    with pytest.raises(dtr.ArgumentError, match="sizes is empty"):
        dtr.Shard(0, sizes=())
    with pytest.raises(dtr.ArgumentError, match="sizes must be a sequence of ints"):
        dtr.Shard(0, sizes=3)
    with pytest.raises(dtr.ArgumentError, match=r"S\(0\)\{3,0,5,3\}: sizes sum to 11, but tensor dim 0 has length 10"):
        dtr.layout(mesh, (10, 3), [dtr.Shard(0, sizes=(3, 0, 5, 3))])
    with pytest.raises(dtr.ArgumentError, match=r"S\(0\)\{5,5\}: 2 sizes for mesh dim 0 of 4 ranks"):
        dtr.layout(mesh, (10, 3), "S(0){5,5}")
    with pytest.raises(dtr.ArgumentError, match=r"R takes no sizes"):
        dtr.layout(mesh, (10, 3), "R{5,5}")


def test_torch_named_placements_by_their_fields():
    # torch's own classes are read by name and fields; these stand-ins have torch's names
    Shard = type("Shard", (), {"__init__": lambda s, d: setattr(s, "dim", d)})
    Partial = type("Partial", (), {"__init__": lambda s, op: setattr(s, "reduce_op", op)})
    Replicate = type("Replicate", (), {})
    assert dtr._core._placement_texts([Shard(1), Replicate(), Partial("max")]) == (
        "S(1)", "R", "P(max)")


def test_layout_matches_the_cli_table():
    mesh = dtr.Mesh((2, 2))
    assert [tuple(x) for x in dtr.layout(mesh, (2, 5), "S(1),S(1)")] == LAYOUT_2x5
    assert mesh.shape == (2, 2) and mesh.size == 4 and mesh.ranks == (0, 1, 2, 3)
    m = dtr.Mesh("2x3", ranks=[5, 4, 3, 2, 1, 0])
    assert m.ranks == (5, 4, 3, 2, 1, 0) and m.ndim == 2
    lay = dtr.layout(m, (7,), [dtr.Shard(0), dtr.Replicate()], dtype="f64")
    assert [(x.rank, x.local_shape, x.global_offset, x.bytes) for x in lay] == [
        (5, (4,), (0,), 32), (4, (4,), (0,), 32), (3, (4,), (0,), 32),
        (2, (3,), (4,), 24), (1, (3,), (4,), 24), (0, (3,), (4,), 24)]


def test_plan_is_the_cli_plan():
    mesh = dtr.Mesh((2, 2))
    p = dtr.plan(mesh, (8, 8), "S(0),P", [dtr.Replicate(), dtr.Shard(1)])
    assert p.to_dict() == json.loads(PLAN_JSON)
    assert [s["kind"] for s in p.steps] == ["reduce_scatter", "all_gather"]
    assert p.recv_bytes_per_rank_max == p.lower_bound_recv_bytes_per_rank == 128
    assert str(p).splitlines()[0] == ("plan optimal (best candidate: greedy): mesh 2x2, shape "
                                      "8x8 f32, S(0),P(sum) -> R,S(1)")
    c = dtr.plan(dtr.Mesh(2), (8, 8), "S(0)", "S(1)", to_mesh=dtr.Mesh(2, ranks=[2, 3]))
    assert c.cross and c.messages == 4 and c.to_dict()["send_bytes_per_rank_max"] == 128


def test_pictures_are_the_cli_pictures():
    """Plan._repr_svg_ and a layout's are what `dtr plan --svg` / `dtr layout --svg` draw:
    docs/pictures/ holds the CLI's, which tests/cli/cli_svg.sh checks."""
    import xml.etree.ElementTree as E
    pictures = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "pictures")
    p = dtr.plan(dtr.Mesh((2, 2)), (8, 6), "S(0),S(1)", "R,S(0)")
    assert p._repr_svg_() == open(os.path.join(pictures, "plan_2x2.svg")).read()
    c = dtr.plan(dtr.Mesh(2), (8, 6), "S(0)", "S(1)", to_mesh=dtr.Mesh(3, ranks=[2, 3, 4]))
    assert c._repr_svg_() == open(os.path.join(pictures, "cross_2_to_3.svg")).read()
    lay = dtr.layout(dtr.Mesh((2, 2)), (10, 3), "S(0),R")
    assert isinstance(lay, list) and len(lay) == 4 and lay[3].local_shape == (5, 3)
    assert lay._repr_svg_() == open(os.path.join(pictures, "layout_2x2.svg")).read()
    svg = "{http://www.w3.org/2000/svg}"
    marks = [r for r in E.fromstring(c._repr_svg_()).iter(svg + "rect") if r.get("class") == "msg"]
    assert len(marks) == c.messages == 6
    with pytest.raises(dtr.ArgumentError, match="placements"):
        dtr._core._layout_svg(dtr.Mesh(2), (4,), "S(3)", "f32")


@pytest.mark.skipif(not os.environ.get("DTR_CLI"), reason="DTR_CLI (the dtr CLI) not set")
def test_plans_agree_with_the_cli_over_many_changes():
    rng = np.random.default_rng(7)
    kinds = ["S(0)", "S(1)", "R", "P"]
    for case in range(60):
        mesh_shape = [(4,), (2, 2), (2, 3), (8,)][case % 4]
        src = ",".join(rng.choice(kinds) for _ in mesh_shape)
        dst = ",".join(rng.choice(kinds[:3]) for _ in mesh_shape)
        shape = tuple(int(x) for x in rng.integers(0, 20, size=2))
        mesh = dtr.Mesh(mesh_shape)
        text = "x".join(map(str, mesh_shape))
        cli = subprocess.run([os.environ["DTR_CLI"], "plan", "--mesh", text, "--shape",
                              f"{shape[0]}x{shape[1]}", "--from", src, "--to", dst, "--json"],
                             capture_output=True, text=True)
        assert cli.returncode == 0, (src, dst, shape, cli.stderr)
        # the CLI's object is the plan's after the header every --json starts with (docs/json.md)
        out = json.loads(cli.stdout)
        head = {k: out.pop(k) for k in ("schema", "command", "mesh", "shape", "dtype", "to_dtype",
                                         "from", "to")}
        assert head == {"schema": 1, "command": "plan", "mesh": list(mesh_shape),
                        "shape": list(shape), "dtype": "f32", "to_dtype": "f32",
                        "from": head["from"], "to": head["to"]}, head
        assert dtr.plan(mesh, shape, src, dst).to_dict() == out, (src, dst, shape)


def test_bad_meshes_and_placements_are_named():
    with pytest.raises(dtr.ArgumentError, match="ranks: 3 ranks for a mesh of 4"):
        dtr.Mesh((2, 2), ranks=[0, 1, 2])
    with pytest.raises(dtr.ArgumentError, match=r"ranks\[1\]: -1 is out of range \(0..2147483647\)"):
        dtr.Mesh(2, ranks=[0, -1])
    with pytest.raises(dtr.ArgumentError, match=r"comm: expected an mpi4py intracommunicator \(MPI.Intracomm\), got int"):
        dtr.Mesh(2, comm=5)
    from mpi4py import MPI
    with pytest.raises(dtr.ArgumentError, match="comm: expected an mpi4py intracommunicator"):
        dtr.Mesh(2, comm=MPI.COMM_WORLD.Get_group())
    with pytest.raises(dtr.ArgumentError, match=r"shape\[0\]: expected an int"):
        dtr.Mesh(["a"])
    mesh = dtr.Mesh((2, 2))
    with pytest.raises(dtr.ArgumentError, match="placements: 1 placement for a mesh of 2 dims"):
        dtr.layout(mesh, (4, 4), "S(0)")
    with pytest.raises(dtr.ArgumentError, match="placements") as e:
        dtr.layout(mesh, (4, 4), "S(0),Q")
    assert e.value.status == "DTR_ERR_INVALID_ARGUMENT" and isinstance(e.value, ValueError)
    with pytest.raises(dtr.ArgumentError, match="dtype"):
        dtr.layout(mesh, (4, 4), "R,R", dtype="f128")
    with pytest.raises(dtr.ArgumentError, match=r"placements\[0\]: S\(2\): shard dim out of range for a 2-d tensor"):
        dtr.layout(mesh, (4, 4), "S(2),R")
    with pytest.raises(dtr.ArgumentError, match=r"src\[1\]: 5 is not a placement"):
        dtr.plan(mesh, (4, 4), ["R", 5], "R,R")
    with pytest.raises(dtr.ArgumentError, match="strategy"):
        dtr.plan(mesh, (4, 4), "R,R", "R,R", strategy="fast")
    # a well-formed change dtr has no plan for: refused, as the CLI's exit 3 says
    with pytest.raises(dtr.RefusedError, match="zeros are no partition for max") as e:
        dtr.plan(mesh, (4, 4), "S(0),R", "P(max),R")
    assert e.value.status == "DTR_ERR_UNSUPPORTED"
    with pytest.raises(dtr.RefusedError) as e:
        dtr.plan(mesh, (4, 4), "R,R", "R,R", to_dtype="i32")
    assert e.value.status == "DTR_ERR_UNSUPPORTED" and isinstance(e.value, dtr.Error)


def test_numbers_out_of_range_and_nuls_are_named():
    """What C cannot hold is refused by name before anything is read (never a SystemError,
    never cut to 32 bits), and text with a NUL inside is refused (C would stop reading
    there)."""
    cases = [
        (lambda: dtr.Mesh(2 ** 70), r"shape: 1180591620717411303424 is out of range \(0..1099511627776\)"),
        (lambda: dtr.Mesh([2, 2 ** 41]), r"shape\[1\]: 2199023255552 is out of range"),
        (lambda: dtr.Mesh(2, ranks=[0, 2 ** 32]), r"ranks\[1\]: 4294967296 is out of range \(0..2147483647\)"),
        (lambda: dtr.Mesh(2.0), "shape: expected an int, got float"),
        (lambda: dtr.Mesh([True]), r"shape\[0\]: expected an int, got bool"),
        (lambda: dtr.grad_hook(np.zeros(4, np.float32), dtr.Mesh(1), dims=2 ** 70),
         r"dims: 1180591620717411303424 is out of range"),
        (lambda: dtr.layout(dtr.Mesh(1), (8,), "S(0)\x00junk"), r"placements: 'S\(0\)\\x00junk' holds a NUL character \(at offset 4\)"),
        (lambda: dtr.layout(dtr.Mesh(1), "8\x00x9", "R"), r"shape: '8\\x00x9' holds a NUL character"),
        (lambda: dtr.layout(dtr.Mesh(1), (8,), ["R\x00"]), r"placements\[0\]: 'R\\x00' holds a NUL"),
        (lambda: dtr.layout(dtr.Mesh(1), (8,), "R", dtype="f32\x00"), r"dtype: 'f32\\x00' holds a NUL"),
        (lambda: dtr.plan(dtr.Mesh(2), (8,), "R", "R", to_mesh=dtr.Mesh(2), staging_cap=2 ** 64),
         r"staging_cap: 18446744073709551616 is out of range"),
        (lambda: dtr.Partial(""), "Partial: reduce_op '' is not sum, avg, max, min or product"),
        (lambda: dtr.Partial("mean"), "Partial: reduce_op 'mean' is not sum"),
    ]
    for call, message in cases:
        with pytest.raises(dtr.ArgumentError, match=message):
            call()
    assert str(dtr.Partial("PROD")) == "P(PROD)"


def test_what_once_crashed_or_leaked_is_refused_by_name():
    """Found by fuzzing the binding from outside: each of these crashed the process, raised a
    SystemError or leaked another exception. (On a mesh of rank 0 alone: the other ranks of
    a larger job are outside it, and a rank outside a mesh returns at once.)"""
    if not rank0():
        pytest.skip("rank 0's test")
    m = dtr.Mesh(1)
    a = np.ones((4, 3), np.float32)
    cases = [
        (lambda: dtr.redistribute_many([a], m, None, "R"), r"src: expected placements .* got None"),
        (lambda: dtr.redistribute_many([a], m, "R", None), r"dst: expected placements .* got None"),
        (lambda: dtr.redistribute(a, m, "R", "R", out=np.zeros((1,) * 9, np.float32)),
         "out: 9 dims, at most 8"),
        (lambda: dtr.redistribute(a, m, "R", "R", relabel=np.zeros(3)),
         "relabel: expected True or False, got numpy.ndarray"),
        (lambda: dtr.plan(m, (4, 3), "R", "R", relabel=np.zeros(3)),
         "relabel: expected True or False"),
        (lambda: dtr.plan(m, (4, 3), "R", "R", staging_cap=-5),
         "staging_cap: only for a plan between meshes"),
        (lambda: dtr.redistribute_many([a], m, "R", "R", relabel=True),
         "relabel: only for a change between meshes"),
        (lambda: dtr.Mesh.__new__(dtr.Mesh).shape, "Mesh: not initialised"),
        (lambda: dtr.layout(m, (4, 3), "\ud800"), "placements: .* is not valid text"),
        (lambda: dtr.grad_hook(np.zeros(4, np.float32), m, dims=[]), "dims: no mesh dim"),
        (lambda: dtr.grad_hook(np.zeros(4, np.float32), dtr.Mesh((1, 1)), dims=[0, 0]),
         "dims: mesh dim 0 named twice"),
    ]
    for call, message in cases:
        with pytest.raises(dtr.ArgumentError, match=message):
            call()

    class Ranks(dtr.Mesh):
        ranks = 5
    with pytest.raises(dtr.ArgumentError, match="mesh: its .ranks is not the mesh's tuple"):
        dtr.layout(Ranks(1), (4, 3), "R")
    # a callback that empties the caller's list while it is read: the call reads a snapshot
    items = [a, a]

    class Shrinks:
        def __index__(self):
            items.clear()
            return 4
    got = dtr.redistribute_many(items, m, "R", "R", shapes=[(Shrinks(), 3), (4, 3)])
    assert len(got) == 2 and all(np.array_equal(g, a) for g in got)


def sentinel(shape, dtype=np.float32):
    return np.full(shape, -7, dtype=dtype)


def test_one_rank_change_and_bad_arrays():
    mesh = dtr.Mesh(1)
    full = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = dtr.redistribute(full, mesh, "S(0)", "R")
    if not rank0():
        assert r is None
        return
    assert np.array_equal(r, full) and r.dtype == np.float32 and r is not full
    # a non-contiguous input is copied, a read-only one is fine
    t = np.asfortranarray(full)
    assert np.array_equal(dtr.redistribute(t, mesh, "R", "R"), full)
    ro = full.copy()
    ro.flags.writeable = False
    assert np.array_equal(dtr.redistribute(ro, mesh, "R", "R"), full)
    out = sentinel((3, 4))
    assert dtr.redistribute(full, mesh, "R", "R", out=out) is out and np.array_equal(out, full)
    # a cast
    assert dtr.redistribute(full, mesh, "R", "R", to_dtype="f64").dtype == np.float64


BAD = [
    (dict(local=np.zeros((3, 4), np.float32), shape=(4, 4)),
     r"local: shape \(3, 4\) is not rank 0's block \(4, 4\) of the global shape \(4, 4\)"),
    (dict(local=np.zeros((4, 4), np.int16)), "local: dtype int16 is not one dtr moves"),
    (dict(local=[[1.0]]), "local: expected a numpy array or a torch tensor, got list"),
    (dict(dtype="f64"), "dtype: f64, but local holds f32"),
    (dict(out=sentinel((4, 3))), r"out: shape \(4, 3\), rank 0's block of the result is \(4, 4\)"),
    (dict(out=sentinel((4, 4), np.float64)), "out: dtype f64, the result is f32"),
    (dict(out=sentinel((4, 8))[:, ::2]), "out: not C-contiguous"),
    (dict(out="readonly"), "out: a read-only array cannot receive the result"),
    (dict(relabel=True), "relabel: only for a change between meshes"),
    (dict(src="S(0),R"), "src: 2 placements for a mesh of 1 dim"),
    # the other byte order reads as garbage (1.0 as 4.6e-41): refused, never converted silently
    (dict(local=np.ones((4, 4), ">f4")), r"local: dtype >f4 is in the other byte order"),
    (dict(out=sentinel((4, 4)).astype(">f4")), r"out: dtype >f4 is in the other byte order"),
    (dict(local=np.ones((4, 4), ">c8")), r"local: dtype >c8 is in the other byte order"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[m.split(":")[0] + str(i) for i, (c, m) in enumerate(BAD)])
def test_bad_arguments_raise_and_write_nothing(change, message):
    mesh = dtr.Mesh(1)
    args = dict(local=np.ones((4, 4), np.float32), src="R", dst="R")
    args.update(change)
    if isinstance(args.get("out"), str):
        args["out"] = sentinel((4, 4))
        args["out"].flags.writeable = False
    before = None if args.get("out") is None else args["out"].copy()
    local, src, dst = args.pop("local"), args.pop("src"), args.pop("dst")
    if not rank0():
        assert dtr.redistribute(local, mesh, src, dst, **args) is None
        return
    with pytest.raises(dtr.ArgumentError, match=message):
        dtr.redistribute(local, mesh, src, dst, **args)
    if before is not None:
        assert np.array_equal(args["out"], before)


def test_a_mesh_larger_than_the_communicator():
    n = world().Get_size()
    with pytest.raises(dtr.ArgumentError, match=f"is not in the communicator of {n} ranks"):
        dtr.redistribute(np.zeros(4, np.float32), dtr.Mesh(n + 1), "R", "R")


def test_bfloat16_and_fp8_numpy_arrays_through_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    mesh = dtr.Mesh(1)
    a = np.arange(6, dtype=np.float32).astype(ml.bfloat16).reshape(2, 3)
    f = np.arange(4, dtype=np.float32).astype(ml.float8_e4m3fn)
    results = [dtr.redistribute(a, mesh, "R", "R"), dtr.redistribute(a.T, mesh, "R", "R"),
               dtr.redistribute(a, mesh, "R", "R", to_dtype="f32"),
               dtr.redistribute(np.ones(3, np.float32), mesh, "R", "R", to_dtype="bf16"),
               dtr.redistribute(f, mesh, "S(0)", "R")]
    if not rank0():
        assert results == [None] * 5
        return
    r, t, up, down, r8 = results
    assert r.dtype == ml.bfloat16 and np.array_equal(r.astype(np.float32), a.astype(np.float32))
    assert t.shape == (3, 2) and np.array_equal(t.astype(np.float32), a.T.astype(np.float32))
    assert up.dtype == np.float32 and np.array_equal(up, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert down.dtype == ml.bfloat16 and np.array_equal(down.astype(np.float32), np.ones(3))
    assert r8.dtype == ml.float8_e4m3fn and np.array_equal(r8.view(np.uint8), f.view(np.uint8))
