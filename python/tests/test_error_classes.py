"""Every public call's bad inputs, each raising the class the library's one table gives its
status (DTR_ERROR_CLASS_MAP in core/status.h; docs/python.md's table), with the status and
the words that name what was wrong. The table below must name every callable dtr exports
(a new call without a row fails here) and every exception class a job can meet.
The CLI's side of the same table: tests/cli/cli_exit_codes.sh."""
import json
import os
import struct

import numpy as np
import pytest

import dtr
from conftest import world

# The statuses of each class (core/status.h, DTR_STATUS_MAP).
STATUSES = {
    dtr.ArgumentError: {"DTR_ERR_INVALID_ARGUMENT", "DTR_ERR_PARSE", "DTR_ERR_OVERFLOW",
                        "DTR_ERR_NOT_IN_MESH", "DTR_ERR_BUFFER_TOO_SMALL"},
    dtr.FileError: {"DTR_ERR_IO"},
    dtr.RefusedError: {"DTR_ERR_UNSUPPORTED"},
    dtr.BackendError: {"DTR_ERR_BACKEND", "DTR_ERR_MISMATCH", "DTR_ERR_REMOTE", "DTR_ERR_BUSY"},
    dtr.TimeoutError: {"DTR_ERR_TIMEOUT", "DTR_ERR_ABORTED"},
}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A safetensors file of two f32 tensors, 'w' 4x4 and 'b' 4, metadata {"format": "pt"}
    (the same path on every rank: each writes its own directory)."""
    d = tmp_path_factory.mktemp(f"ck{world().Get_rank()}")
    w, b = np.arange(16, dtype="<f4"), np.arange(4, dtype="<f4")
    hdr = {"__metadata__": {"format": "pt"},
           "w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [64, 80]}}
    h = json.dumps(hdr).encode()
    (d / "m.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + w.tobytes() + b.tobytes())
    (d / "rules.json").write_text('[{"match": "*", "placements": "R"}]')
    (d / "empty").mkdir()
    return d


def cases(ck, mesh, n):
    """(call, how, want class, words): `how` runs the call with one bad input, on every rank
    alike (so the collective ones fail on every rank at once)."""
    a = np.arange(4 * n, dtype=np.float32)
    f = str(ck / "m.safetensors")
    p = dtr.plan(mesh, (4 * n,), "S(0)", "R")
    req = dtr.redistribute(a[:4], mesh, "S(0)", "R", async_op=True)
    req.wait()  # (collective: every rank makes this table)
    return [
        ("Mesh", lambda: dtr.Mesh(0), dtr.ArgumentError, "a mesh dim must have at least 1 rank"),
        ("Mesh", lambda: dtr.Mesh("2x"), dtr.ArgumentError, "expected a size"),
        ("Mesh", lambda: dtr.Mesh(2 ** 70), dtr.ArgumentError, "shape"),
        ("Mesh", lambda: dtr.Mesh(1, comm=object()), dtr.ArgumentError,
         "expected an mpi4py intracommunicator"),
        ("Mesh", lambda: dtr.Mesh(1, device="nosuch"), dtr.RefusedError,
         "device 'nosuch': this dtr has no memory space 'nosuch'"),
        ("DeviceArray", lambda: dtr.DeviceArray.from_numpy(a, "cpu"), dtr.ArgumentError,
         "device: 'cpu' (a DeviceArray is on a device"),
        ("Shard", lambda: dtr.Shard("0"), dtr.ArgumentError, "dim must be an int, got str"),
        ("Replicate", lambda: dtr.layout(mesh, (4,), [dtr.Replicate()] * 2), dtr.ArgumentError,
         "placements"),
        ("Partial", lambda: dtr.Partial("bogus"), dtr.ArgumentError,
         "'bogus' is not sum, avg, max, min or product"),
        ("Partial", lambda: dtr.Partial(1), dtr.ArgumentError, "reduce_op must be a str"),
        ("Placement", lambda: dtr.layout(mesh, (4,), [dtr.Placement()]), dtr.ArgumentError,
         "placements"),
        ("layout", lambda: dtr.layout(mesh, (4,), "S(3)"), dtr.ArgumentError,
         "S(3): shard dim out of range for a 1-d tensor"),
        ("layout", lambda: dtr.layout(mesh, (4,), "S(0)", dtype="f99"), dtr.ArgumentError,
         'text "f99": not a dtype'),
        ("plan", lambda: dtr.plan(mesh, (4,), "P", "P(avg)"), dtr.RefusedError,
         "P(sum) -> P(avg): a Partial cannot change its reduce op"),
        ("plan", lambda: dtr.plan(mesh, (4,), "S(0)", "R", strategy="best"), dtr.ArgumentError,
         "strategy: 'best' is not 'optimal' or 'compat'"),
        ("Plan.to_dict", lambda: p.to_dict(1), TypeError, "takes no arguments"),
        ("redistribute", lambda: dtr.redistribute(a[:4], mesh, "S(0)", "R",
                                                  out=np.empty(3, np.float32)),
         dtr.ArgumentError, "out: shape (3,)"),
        ("redistribute", lambda: dtr.redistribute(a[:4], mesh, "S(0)", "P(max)"),
         dtr.RefusedError, "S(0) -> P(max)"),
        ("redistribute", lambda: dtr.redistribute(a[:4].astype(">f4"), mesh, "S(0)", "R"),
         dtr.ArgumentError, "other byte order"),
        ("Request.wait", lambda: req.wait(1), TypeError, "takes no arguments"),
        ("Request.is_completed", lambda: req.is_completed(1), TypeError, "takes no arguments"),
        ("redistribute_many", lambda: dtr.redistribute_many([a[:4], a[:4]], mesh,
                                                            ["S(0)", "R", "R"], "R"),
         dtr.ArgumentError, "src: 3 placements for a mesh of 1 dim"),
        ("redistribute_many", lambda: dtr.redistribute_many([a[:4]], mesh, "P", "P(avg)"),
         dtr.RefusedError, "P(sum) -> P(avg)"),
        ("digest", lambda: dtr.digest(a[:4], mesh, "P"), dtr.ArgumentError,
         "a Partial placement (mesh dim 0) has no values to digest until it is reduced"),
        ("digest", lambda: dtr.digest(a[:4], mesh, "S(2)"), dtr.ArgumentError,
         "S(2): shard dim out of range for a 1-d tensor"),
        ("grad_hook", lambda: dtr.grad_hook(a.copy(), mesh, kind="x"), dtr.ArgumentError,
         "kind: 'x' is not allreduce, fp16 or bf16"),
        ("grad_hook", lambda: dtr.grad_hook(a.copy(), mesh, dims=[3]), dtr.ArgumentError,
         "dims: mesh dim 3 of a 1-dim mesh"),
        ("reduce_scatter_grads", lambda: dtr.reduce_scatter_grads([a], mesh, factor=0),
         dtr.ArgumentError, "factor: 0, must be a finite number > 0"),
        ("reduce_scatter_grads", lambda: dtr.reduce_scatter_grads([a], mesh, shard_dim=4),
         dtr.ArgumentError, "shard_dim: 4"),
        ("load", lambda: dtr.load(str(ck / "none.safetensors"), mesh, {"*": "R"}),
         dtr.FileError, "none.safetensors: No such file or directory"),
        ("load", lambda: dtr.load(str(ck / "empty"), mesh, {"*": "R"}), dtr.FileError,
         "no .safetensors file"),
        ("load", lambda: dtr.load(f, mesh, str(ck / "none.json")), dtr.FileError,
         "none.json: No such file or directory"),
        ("load", lambda: dtr.load(f, mesh, {"*": "P"}), dtr.ArgumentError,
         "Partial: a checkpoint holds whole values"),
        ("load", lambda: dtr.load(f, mesh, [{"match": "*", "placements": "R", "dtype": "i32"}]),
         dtr.ArgumentError, "casts are between float dtypes only"),
        ("load", lambda: dtr.load(f, mesh, {"*": "R"}, names=["zz"]), dtr.ArgumentError,
         "no tensor 'zz'"),
        ("load", lambda: dtr.load(f, mesh, {"*": "R"}, framework="jax"), dtr.ArgumentError,
         "framework: 'jax'"),
        ("load", lambda: dtr.load(f, mesh, {"*": "R"}, framework=np.array([1, 2])),
         dtr.ArgumentError, "framework: expected 'numpy' or 'torch', got ndarray"),
        ("load", lambda: dtr.load(f, mesh, {"*": "R"}, rank=2 ** 40), dtr.ArgumentError,
         "rank"),
        # values CPython's argument parsing refuses, as ArgumentError too (it is a TypeError)
        ("redistribute", lambda: dtr.redistribute(a[:4], mesh, "S(0)"), dtr.ArgumentError,
         "missing required argument 'dst'"),
        ("reduce_scatter_grads", lambda: dtr.reduce_scatter_grads([a], mesh, shard_dim=()),
         dtr.ArgumentError, "cannot be interpreted as an integer"),
        ("reduce_scatter_grads", lambda: dtr.reduce_scatter_grads([a], mesh,
                                                                  force_sum=np.ones(3)),
         dtr.ArgumentError, "truth value of an array"),
        ("redistribute_many", lambda: dtr.redistribute_many([a[:4]], mesh, "S(0)", "R",
                                                            nonsense=1),
         dtr.ArgumentError, "'nonsense' is an invalid keyword argument"),
        # a call that does not fit the signature of a function written in Python: Python's
        # own TypeError (docs/python.md)
        ("plan", lambda: dtr.plan(mesh, (4 * n,), "S(0)", "R", to_mesh=mesh,
                                  strategy="compat"),
         dtr.RefusedError, "opts->strategy: compat plans within one mesh only"),
        ("plan", lambda: dtr.plan(mesh, (4,), "S(0)", "R", nonsense=1), TypeError,
         "unexpected keyword argument 'nonsense'"),
        ("load_metadata", lambda: dtr.load_metadata(np.zeros(2)), dtr.ArgumentError,
         "path: expected a str or os.PathLike, got ndarray"),
        ("load_metadata", lambda: dtr.load_metadata("m\x00x"), dtr.ArgumentError,
         "embedded null"),
        ("load", lambda: dtr.load(b"/none.safetensors", mesh, {"*": "R"}), dtr.FileError,
         "/none.safetensors: No such file or directory"),
        ("load_metadata", lambda: dtr.load_metadata(str(ck / "none")), dtr.FileError,
         "No such file or directory"),
        ("load_metadata", lambda: dtr.load_metadata(str(ck / "rules.json")), dtr.ArgumentError,
         "header length"),
        ("save", lambda: dtr.save(str(ck / "saved"), [a[:4]], mesh, "S(0)"), dtr.ArgumentError,
         "blocks: expected a dict of name to this rank's block, got list"),
        ("save", lambda: dtr.save(f + "/under_a_file", {"w": a[:4]}, mesh, "S(0)"),
         dtr.FileError, "Not a directory"),
        ("save", lambda: dtr.save(str(ck / "saved"), {"w": a[:4]}, mesh, "P(sum)"),
         dtr.RefusedError, "Partial: reduce it first"),
        ("consolidate", lambda: dtr.consolidate(str(ck / "none"), str(ck / "never")),
         dtr.FileError, "No such file or directory"),
        ("consolidate", lambda: dtr.consolidate(f, str(ck)), dtr.ArgumentError,
         "exists and is not empty"),
        ("consolidate", lambda: dtr.consolidate(f, str(ck / "x"), max_file_bytes=-1),
         dtr.ArgumentError, "max_file_bytes: -1 is not a byte count"),
    ]


def test_every_call_raises_its_class_with_status_and_words(ckpt):
    n = world().Get_size()
    mesh = dtr.Mesh(n)
    rows = cases(ckpt, mesh, n)
    for name, how, want, words in rows:
        with pytest.raises(Exception) as e:
            how()
        got = e.value
        where = f"{name}: {type(got).__name__}: {got}"
        assert type(got) is want, f"{where} (want {want.__name__})"
        assert words in str(got), f"{where} (want the words {words!r})"
        if want in STATUSES:
            assert got.status in STATUSES[want], f"{where}: status {got.status}"
        # the base classes users catch: an ArgumentError is a ValueError and a TypeError,
        # a FileError an OSError, every one a dtr.Error
        if isinstance(got, dtr.Error):
            assert isinstance(got, Exception)
        if want is dtr.ArgumentError:
            assert isinstance(got, ValueError) and isinstance(got, TypeError), where
        if want is dtr.FileError:
            assert isinstance(got, OSError), where
    # and the context is still in step: a good call verifies
    full = np.arange(4 * n, dtype=np.float32)
    r = world().Get_rank()
    out = dtr.redistribute(full[4 * r:4 * r + 4], mesh, "S(0)", "R")
    assert (out == full).all()


def test_the_table_names_every_call():
    n = world().Get_size()
    import tempfile, pathlib
    rows = cases(pathlib.Path(tempfile.gettempdir()), dtr.Mesh(n), n)
    named = {name for name, *_ in rows}
    exported = {k for k in dtr.__all__
                if callable(getattr(dtr, k)) and not (isinstance(getattr(dtr, k), type) and
                                                      issubclass(getattr(dtr, k), BaseException))
                and k not in ("LocalLayout", "Plan", "Request")}
    exported |= {"Plan." + k for k in dir(dtr.Plan) if not k.startswith("_")
                 and callable(getattr(dtr.Plan, k))}
    exported |= {"Request." + k for k in dir(dtr.Request) if not k.startswith("_")
                 and callable(getattr(dtr.Request, k))}
    missing = sorted(exported - named)
    assert not missing, f"calls without a bad-input row: {missing}"
    classes = {want for *_, want, _ in rows}
    assert {dtr.ArgumentError, dtr.FileError, dtr.RefusedError} <= classes


@pytest.mark.skipif(world().Get_size() < 2, reason="one rank wrong needs two")
def test_one_rank_wrong_is_an_argument_error_there_and_a_backend_error_elsewhere():
    comm = world()
    n, r = comm.Get_size(), comm.Get_rank()
    mesh = dtr.Mesh(n)
    full = np.arange(4 * n, dtype=np.float32)
    out = np.empty(3 if r == 1 else 4 * n, np.float32)
    with pytest.raises((dtr.ArgumentError, dtr.BackendError)) as e:
        dtr.redistribute(full[4 * r:4 * r + 4], mesh, "S(0)", "R", out=out)
    want = dtr.ArgumentError if r == 1 else dtr.BackendError
    assert type(e.value) is want, f"rank {r}: {type(e.value).__name__}: {e.value}"
    assert e.value.status in STATUSES[want], e.value.status
    if r != 1:
        assert e.value.status == "DTR_ERR_REMOTE", e.value.status
    out = dtr.redistribute(full[4 * r:4 * r + 4], mesh, "S(0)", "R")
    assert (out == full).all()


@pytest.mark.skipif(world().Get_size() < 2, reason="a rank that never comes needs two")
def test_a_rank_that_never_comes_is_a_timeout_then_aborted():
    """On a communicator of its own (its context is spent after this): rank 0 calls again,
    the others do not; DTR_TIMEOUT_S=1 (read when the context is made) bounds the wait."""
    comm = world()
    r = comm.Get_rank()
    dup = comm.Dup()
    os.environ["DTR_TIMEOUT_S"] = "1"
    try:
        mesh = dtr.Mesh(dup.Get_size(), comm=dup)
        a = np.ones(4, np.float32)
        dtr.redistribute(a, mesh, "S(0)", "R")  # makes the context, on every rank
    finally:
        del os.environ["DTR_TIMEOUT_S"]
    if r == 0:
        with pytest.raises(dtr.TimeoutError) as e:
            dtr.redistribute(a, mesh, "S(0)", "R")
        assert e.value.status == "DTR_ERR_TIMEOUT", e.value.status
        assert isinstance(e.value, TimeoutError)
        with pytest.raises(dtr.TimeoutError) as e:
            dtr.redistribute(a, mesh, "S(0)", "R")
        assert e.value.status == "DTR_ERR_ABORTED", e.value.status
    comm.Barrier()


@pytest.mark.skipif(world().Get_size() < 2, reason="one rank wrong needs two")
def test_grad_hook_wrong_on_one_rank_fails_every_rank():
    """A gradient of an integer dtype on one rank, and another mesh shape over the same ranks
    on one rank: each once made the others wait for ever (found by fuzz/py_fuzz.py)."""
    comm = world()
    n, r = comm.Get_size(), comm.Get_rank()
    mesh = dtr.Mesh(n)
    buf = np.zeros(10, np.int32 if r == 1 else np.float32)
    with pytest.raises((dtr.ArgumentError, dtr.BackendError)) as e:
        dtr.grad_hook(buf, mesh)
    assert type(e.value) is (dtr.ArgumentError if r == 1 else dtr.BackendError), str(e.value)
    if r == 1:
        assert "dtype: i32, gradients are f32, f64, f16 or bf16" in str(e.value)
    other = dtr.Mesh((1, n)) if r == 1 else mesh
    for kind in ("allreduce", "bf16"):
        with pytest.raises(dtr.BackendError) as e:
            dtr.grad_hook(np.ones(8, np.float32), other, kind=kind)
        assert e.value.status == "DTR_ERR_MISMATCH", f"{kind}: {e.value.status}: {e.value}"
    with pytest.raises(dtr.BackendError) as e:
        dtr.reduce_scatter_grads([np.ones((2 * n, 3), np.float32)], other)
    assert e.value.status == "DTR_ERR_MISMATCH", str(e.value)
    g = np.full(8, float(r + 1), np.float32)
    dtr.grad_hook(g, mesh)
    assert (g == sum(range(1, n + 1)) / n).all(), g
