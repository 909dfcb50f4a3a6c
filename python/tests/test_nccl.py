"""backend='nccl' from Python without a GPU: its argument errors, and the way its ranks meet
(the unique id rank 0 makes, handed round through the job's store), run up to the point
where NCCL needs a GPU. A GPU run of it is the GPU pack's (python/tests/gpu_python.sh).

The jobs are two processes meeting through dtr's own TCP store (MASTER_ADDR / MASTER_PORT,
RANK, WORLD_SIZE) with the fake device registered as "cuda" (python/tests/fake_space.c), so
that device="cuda" is taken and the NCCL context is made as far as its GPU."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import dtr

HERE = os.path.dirname(os.path.abspath(__file__))


def nccl_built():
    try:
        dtr.Mesh((1,), backend="nccl", device="cpu")
    except dtr.ArgumentError as e:
        return "moves CUDA buffers" in str(e)
    return False


pytestmark = pytest.mark.skipif(not nccl_built(),
                                reason="this package was built without NCCL (libdtr_nccl.so)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_arguments_are_named():
    with pytest.raises(dtr.ArgumentError, match=r"device: 'cpu', but backend 'nccl' moves "
                                                r"CUDA buffers \(give device='cuda'"):
        dtr.Mesh((1,), backend="nccl", device="cpu")
    with pytest.raises(dtr.ArgumentError, match=r"comm: an mpi4py communicator goes with "
                                                r"backend 'mpi'; backend 'nccl'"):
        dtr.Mesh((1,), backend="nccl", comm=object())


RANK = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {here!r})
    import dtr
    from dtr import _store
    from fake_space import fake_space
    try:
        dtr.Mesh((2,), backend="nccl", device="cpu")  # (loads libdtr_nccl, and CUDA's space)
    except dtr.ArgumentError:
        pass
    assert fake_space().fake_space_register_as(b"cuda") == 0
    rank = int(os.environ["RANK"])
    mesh = {mesh}
    {before}
    for attempt in range({tries}):
        try:
            dtr.Mesh(mesh, backend="nccl")
            print("made")
        except dtr.Error as e:
            print("error", type(e).__name__, e)
    last = _store._made[0]  # (the prefix of the last id handed round: dtr.py.N)
    if os.environ.get("MASTER_PORT"):
        store = _store.job("nccl")[0]  # (the process's store, kept: not served twice)
    else:
        store = _store.FileStore(os.environ["DTR_GLOO_STORE"], 20.0, "nccl")
    if rank == 0:
        store.get("done")  # (rank 0 serves the store: it stays until rank 1 has read)
    else:
        print("id", len(store.get(f"dtr.py.{{last}}/nccl_id")))
        store.set("done", b"1")
""")


def run_job(size, mesh, env=None, before="", tries=1, files=None):
    port = free_port()
    procs = []
    for rank in range(size):
        e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                 WORLD_SIZE=str(size), DTR_TIMEOUT_S="20", **(env or {}))
        e.pop("DTR_GLOO_STORE", None)
        if files is not None:  # (as tools/dtr_launch.sh starts a job: a directory, no port)
            del e["MASTER_ADDR"], e["MASTER_PORT"]
            e["DTR_GLOO_STORE"] = files
        code = RANK.format(here=HERE, mesh=mesh, before=before, tries=tries)
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=e, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{out}"
    return outs


def test_the_unique_id_goes_round_through_the_store_then_the_gpu_is_named():
    """Both ranks get past the store (rank 0 set a 128-byte id, rank 1 read it) and stop
    where the context needs a GPU, with the same named error; neither hangs."""
    outs = run_job(2, (2,))
    for rank, out in enumerate(outs):
        lines = out.strip().splitlines()
        errors = [l for l in lines if l.startswith("error ")]
        assert len(errors) == 1, f"rank {rank}: {out}"
        assert "cuda" in errors[0].lower(), f"rank {rank}: {errors[0]}"
        assert "made" not in lines, f"rank {rank}: a context without a GPU:\n{out}"
    assert "id 128" in outs[1].splitlines(), outs[1]
    assert outs[0].splitlines()[0] == outs[1].splitlines()[0], outs


def check_gpu_named(outs, tries=1):
    for rank, out in enumerate(outs):
        lines = out.strip().splitlines()
        errors = [l for l in lines if l.startswith("error ")]
        assert len(errors) == tries, f"rank {rank}: {out}"
        for e in errors:
            assert e.startswith("error RefusedError dtr_memory_cuda_create: no GPU visible"), \
                f"rank {rank}: {e}"
    assert "id 128" in outs[1].splitlines(), outs[1]


def test_a_second_context_in_a_process_meets_through_the_same_store():
    """A gloo context first, then two nccl meshes (the second a retry of the first): one
    store per process, so rank 0 does not serve MASTER_PORT twice; each try hands a new id
    round (under its own prefix) and fails alike on both ranks."""
    before = ('import numpy as np; g = dtr.Mesh((2,), backend="gloo"); '
              'dtr.redistribute(np.ones(4, np.float32), g, "S(0)", "R")')
    check_gpu_named(run_job(2, (2,), before=before, tries=2), tries=2)


def test_under_dtr_launch_the_id_goes_through_the_store_directory(tmp_path):
    """tools/dtr_launch.sh's jobs: DTR_GLOO_STORE and no MASTER_ADDR/_PORT."""
    check_gpu_named(run_job(2, (2,), files=str(tmp_path)))
    assert sorted(os.listdir(tmp_path)) == sorted(
        "py." + k.encode().hex() for k in ("dtr.py.1/nccl_id", "done")), os.listdir(tmp_path)


def test_a_store_that_does_not_answer_is_named():
    """Rank 1 of 2 alone: rank 0 never serves the store; the mesh fails by DTR_TIMEOUT_S,
    naming the store and the backend (the GPU is never reached)."""
    e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="1",
             WORLD_SIZE="2", DTR_TIMEOUT_S="1")
    e.pop("DTR_GLOO_STORE", None)
    code = RANK.format(here=HERE, mesh=(2,), before="", tries=1).split("if os.environ.get(\"MASTER_PORT\")")[0]
    p = subprocess.run([sys.executable, "-c", code], env=e, text=True, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"error TimeoutError backend 'nccl': the store at 127.0.0.1:"
                               f"{e['MASTER_PORT']} did not answer in 1 s"), p.stdout
