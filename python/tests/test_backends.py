"""dtr.Mesh(..., backend=NAME): the names refused by name before anything runs, and a mesh
on a backend without MPI that says what it is without communicating."""
import os

import pytest

import dtr


def test_backend_names_are_checked():
    with pytest.raises(dtr.ArgumentError, match=r"backend: expected a name such as 'mpi' or "
                                                r"'gloo', got int"):
        dtr.Mesh(2, backend=3)
    with pytest.raises(dtr.ArgumentError, match=r"^backend: .*no backend 'nosuch' \(registered: "
                                                r".*libdtr_nosuch\.so\.0"):
        dtr.Mesh(2, backend="nosuch")
    with pytest.raises(dtr.ArgumentError, match="backend: expected a name such as 'mpi' or "
                                                "'gloo', got text holding a NUL"):
        dtr.Mesh(2, backend="gloo\x00x")
    with pytest.raises(dtr.ArgumentError, match="is not a backend name"):
        dtr.Mesh(2, backend="../gloo")
    # backend 'nccl': where the package has no libdtr_nccl.so, refused by name; where it has
    # one, the mesh goes on to its GPU, which this machine may lack (test_nccl.py)
    import os
    carried = any(f.startswith("libdtr_nccl.so.") for f in os.listdir(os.path.dirname(dtr.__file__)))
    with pytest.raises(dtr.RefusedError if carried else dtr.ArgumentError,
                       match=(r"^device 'cuda': no device of it is visible" if carried else
                              r"^backend 'nccl': this dtr was built without NCCL|no backend 'nccl'")):
        dtr.Mesh(2, backend="nccl")


def test_meshes_of_one_call_share_a_backend():
    import numpy as np
    with pytest.raises(dtr.ArgumentError, match="to_mesh: on backend 'mpi', mesh on 'gloo' "
                                                r"\(the meshes of one call are on one backend\)"):
        dtr.redistribute(np.zeros(1, "f4"), dtr.Mesh(1, backend="gloo"), "R", "R", shape=(1,),
                         to_mesh=dtr.Mesh(1))


def test_gloo_takes_no_communicator():
    from mpi4py import MPI
    with pytest.raises(dtr.ArgumentError, match="comm: an mpi4py communicator goes with "
                                                "backend 'mpi'; backend 'gloo'"):
        dtr.Mesh(2, comm=MPI.COMM_WORLD, backend="gloo")


def test_gloo_mesh_without_communicating(monkeypatch):
    m = dtr.Mesh((2, 3), ranks=[5, 4, 3, 2, 1, 0], backend="gloo")
    assert m.backend == "gloo" and m.comm is None
    assert repr(m) == "dtr.Mesh((2, 3), ranks=(5, 4, 3, 2, 1, 0), backend='gloo')"
    assert dtr.Mesh(2).backend == "mpi" and dtr.Mesh(2, backend="mpi").backend == "mpi"
    if "WORLD_SIZE" in os.environ:  # (started by a launcher: the rank is the job's)
        return
    monkeypatch.setenv("RANK", "4")
    assert m.rank == 4 and m.coordinate == (0, 1)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(dtr.ArgumentError, match="backend 'gloo': RANK is 'x', not a rank"):
        m.rank
    monkeypatch.delenv("RANK")
    with pytest.raises(dtr.ArgumentError, match="backend 'gloo': RANK is not set"):
        m.rank
    # a collective call without a launcher: the stores it looked for named, nothing run
    for name in ("DTR_GLOO_STORE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(dtr.ArgumentError, match=r"backend 'gloo': no store to meet through: "
                                                r"run under torchrun \(MASTER_ADDR"):
        dtr.redistribute(__import__("numpy").zeros(1, "f4"), dtr.Mesh(1, backend="gloo"),
                         "R", "R", shape=(1,))
