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
    try:
        dtr.Mesh(mesh, backend="nccl")
        print("made")
    except dtr.Error as e:
        print("error", type(e).__name__, e)
    store = _store.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), False, 20.0)
    if rank == 0:
        store.get("done")  # (rank 0 serves the store: it stays until rank 1 has read)
    else:
        print("id", len(store.get("dtr.py.1/nccl_id")))
        store.set("done", b"1")
""")


def run_job(size, mesh, env=None):
    port = free_port()
    procs = []
    for rank in range(size):
        e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                 WORLD_SIZE=str(size), DTR_TIMEOUT_S="20", **(env or {}))
        e.pop("DTR_GLOO_STORE", None)
        code = RANK.format(here=HERE, mesh=mesh)
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


def test_a_store_that_does_not_answer_is_named():
    """Rank 1 of 2 alone: rank 0 never serves the store; the mesh fails by DTR_TIMEOUT_S,
    naming the store and the backend (the GPU is never reached)."""
    e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="1",
             WORLD_SIZE="2", DTR_TIMEOUT_S="1")
    e.pop("DTR_GLOO_STORE", None)
    code = RANK.format(here=HERE, mesh=(2,)).split("store = _store.TCPStore")[0]
    p = subprocess.run([sys.executable, "-c", code], env=e, text=True, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"error TimeoutError backend 'nccl': the store at 127.0.0.1:"
                               f"{e['MASTER_PORT']} did not answer in 1 s"), p.stdout
