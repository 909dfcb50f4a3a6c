"""Where a job without MPI meets (dtr/_store.py): dtr's own TCP store, the order in which a
store is found from the environment and its errors by name, and a mesh's dim names. The
jobs that meet through each store run in python/tests/run.sh (dtr_launch.sh with MASTER_ADDR
and MASTER_PORT; torchrun in the torch part)."""
import socket
import sys
import threading

import pytest

import dtr
from dtr import _store


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_own_store_sets_and_waits():
    port = free_port()
    master = _store.TCPStore("127.0.0.1", port, True, 5.0)
    other = _store.TCPStore("127.0.0.1", port, False, 5.0)
    master.set("empty", b"")
    other.set("bytes", bytes(range(256)) * 300)  # 76,800 bytes, every byte value
    assert master.get("empty") == b""
    assert master.get("bytes") == bytes(range(256)) * 300
    later = threading.Timer(0.2, lambda: other.set("late", "text"))
    later.start()
    assert master.get("late") == b"text"  # waited for the other client's set
    later.join()


def test_own_store_timeouts_name_what_was_missing():
    port = free_port()
    store = _store.TCPStore("127.0.0.1", port, True, 0.3)
    with pytest.raises(dtr.TimeoutError, match=r"the store: key 'never' was not set in 0\.3 s"):
        store.get("never")
    store.set("after", b"1")  # the connection is still in step after a timeout
    assert store.get("after") == b"1"
    nobody = free_port()
    with pytest.raises(dtr.TimeoutError, match=rf"backend 'gloo': the store at 127\.0\.0\.1:"
                                               rf"{nobody} did not answer in 0\.3 s \(.*refused"):
        _store.TCPStore("127.0.0.1", nobody, False, 0.3)


def test_torch_stores_wait_at_most_dtr_timeout():
    """torch's stores (the default group's, torchrun's agent's) are read through TorchStore:
    DTR_TIMEOUT_S decides how long a get waits, not the store's own timeout, and a key never
    set is a dtr.TimeoutError naming it; other failures pass through as they are."""
    class Store:  # torch's Store's methods that TorchStore uses, without torch
        def __init__(self, fail):
            self.fail, self.data, self.waited = fail, {"there": b"v"}, None

        def set(self, key, value):
            self.data[key] = value

        def wait(self, keys, timeout):
            self.waited = timeout.total_seconds()
            if keys[0] not in self.data:
                raise RuntimeError(self.fail)

        def get(self, key):
            return self.data[key]

    s = _store.TorchStore(Store("Wait timeout after 2500ms, keys: /never"), 2.5)
    s.set("k", b"1")
    assert s.get("k") == b"1" and s.get("there") == b"v" and s.store.waited == 2.5
    with pytest.raises(dtr.TimeoutError, match=r"the store: key 'never' was not set in 2\.5 s "
                                               r"\(DTR_TIMEOUT_S; no rank set it"):
        s.get("never")
    gone = _store.TorchStore(Store("Connection reset by peer"), 2.5)
    with pytest.raises(RuntimeError, match="Connection reset by peer"):
        gone.get("never")


@pytest.fixture
def bare(monkeypatch):
    """An environment with no launcher's variables and torch.distributed not initialised."""
    for name in ("DTR_GLOO_STORE", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                 "TORCHELASTIC_USE_AGENT_STORE", "DTR_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    for name in ("torch", "torch.distributed"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("env, message", [
    ({}, r"backend 'gloo': no store to meet through: run under torchrun \(MASTER_ADDR, "
         r"MASTER_PORT\), initialise torch.distributed first, or set DTR_GLOO_STORE"),
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2"},
     r"backend 'gloo': RANK is not set \(a launcher sets it"),
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "two"},
     r"backend 'gloo': WORLD_SIZE is 'two', not a rank count or rank"),
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "2", "WORLD_SIZE": "2"},
     r"backend 'gloo': RANK 2 is not below WORLD_SIZE 2"),
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "70000", "RANK": "0", "WORLD_SIZE": "2"},
     r"backend 'gloo': MASTER_PORT is '70000', not a port"),
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "RANK": "0", "WORLD_SIZE": "1",
      "DTR_TIMEOUT_S": "soon"}, r"DTR_TIMEOUT_S: 'soon' is not a number of seconds"),
])
def test_a_job_without_a_store_is_refused_by_name(bare, env, message):
    for k, v in env.items():
        bare.setenv(k, v)
    with pytest.raises(dtr.ArgumentError, match=message):
        _store.job()


def test_the_store_found_first(bare, tmp_path):
    bare.setenv("DTR_GLOO_STORE", str(tmp_path))
    assert _store.job() is None  # the library reads the file store itself
    bare.delenv("DTR_GLOO_STORE")
    port = free_port()
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0",
                 "WORLD_SIZE": "1"}.items():
        bare.setenv(k, v)
    first = _store.job()
    store, rank, size, prefix = first
    assert isinstance(store, _store.TCPStore) and (rank, size) == (0, 1)
    store.set("k", b"v")
    assert store.get("k") == b"v"
    bare.setenv("MASTER_PORT", str(free_port()))
    assert _store.job()[3] != prefix  # each context its own keys


def test_dim_names():
    m = dtr.Mesh((1, 1), dim_names=["dp", "tp"])
    assert m.dim_names == ("dp", "tp") and dtr.Mesh(1).dim_names is None
    with pytest.raises(dtr.ArgumentError, match="dim_names: 1 names for a mesh of 2 dims"):
        dtr.Mesh((1, 1), dim_names=["dp"])
    with pytest.raises(dtr.ArgumentError, match="dim_names: 'dp' names two dims"):
        dtr.Mesh((1, 1), dim_names=("dp", "dp"))
    with pytest.raises(dtr.ArgumentError, match=r"dim_names\[1\]: expected a str, got int"):
        dtr.Mesh((1, 1), dim_names=("dp", 1))
    with pytest.raises(dtr.ArgumentError, match="dim_names: expected a sequence of str, got str"):
        dtr.Mesh(1, dim_names="tp")
    with pytest.raises(dtr.ArgumentError, match="device_mesh: expected a torch DeviceMesh, "
                                                "got tuple"):
        dtr.Mesh.from_torch((2, 2))


def test_the_torch_engine_needs_torch_distributed():
    import numpy as np
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")
    mesh = dtr.Mesh(1, backend="torch")
    assert mesh.backend == "torch" and repr(mesh) == "dtr.Mesh((1,), ranks=(0,), backend='torch')"
    with pytest.raises(dtr.ArgumentError, match=r"backend 'torch': (needs PyTorch, which does not "
                                                r"import here|torch.distributed is not "
                                                r"initialised \(call torch.distributed."
                                                r"init_process_group first\))"):
        dtr.redistribute(np.zeros(2, "f4"), mesh, "R", "R")
    with pytest.raises(dtr.ArgumentError, match="comm: an mpi4py communicator goes with backend "
                                                "'mpi'; backend 'torch' runs on torch"):
        dtr.Mesh(1, comm=0, backend="torch")
