"""Where the ranks of a job without MPI meet (backend='gloo' or 'nccl'): the key-value store
the Gloo context's rendezvous, or the NCCL context's unique id, goes through, found from the
job (docs/python.md, "Under torchrun").

First match wins:
  DTR_GLOO_STORE         a directory every rank sees (Gloo's file store; tools/dtr_launch.sh
                         makes one): for backend 'gloo' the library reads it itself, job()
                         returns None; for 'nccl' (where MASTER_ADDR/_PORT are not set) a
                         FileStore over it, with RANK and WORLD_SIZE;
  torch.distributed      initialised in this process: the default group's store, its rank
                         and world size;
  torchrun               (TORCHELASTIC_USE_AGENT_STORE=True) the agent's TCPStore at
                         MASTER_ADDR:MASTER_PORT, as a client (imports torch);
  MASTER_ADDR / _PORT    with RANK and WORLD_SIZE: torch's TCPStore where torch is imported,
                         else a store of dtr's own (TCPStore below), served by rank 0.
Every store has set(key, bytes) and get(key) -> bytes, get waiting until the key is set, at
most DTR_TIMEOUT_S (default 600 s): then dtr.TimeoutError naming the key. torch's stores are
used through TorchStore, so that their own timeout (the process group's, 30 minutes by
default) does not decide.
"""
import os
import socket
import struct
import sys
import threading
import time
from datetime import timedelta

from . import _core

_made = [0]  # contexts made through a store in this process (their keys' prefix)
# the stores made here, by where they are: one per process and address, whatever the number
# of contexts (each under its own prefix), so that a second context (another backend, a
# retry, the job's context after _core._shutdown) does not serve the address twice
_stores = {}


def _env_int(name, lo, backend):
    value = os.environ.get(name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < lo:
        raise _core.ArgumentError(
            f"backend '{backend}': {name} is {'not set' if value is None else repr(value)}"
            f"{'' if value is None else ', not a rank count or rank'} (a launcher sets it: "
            "torchrun, tools/dtr_launch.sh)")
    return number


def _timeout_s():
    value = os.environ.get("DTR_TIMEOUT_S", "")
    try:
        seconds = float(value) if value else 600.0
    except ValueError:
        raise _core.ArgumentError(f"DTR_TIMEOUT_S: {value!r} is not a number of seconds")
    return seconds if seconds > 0 else 365 * 86400.0


def _kept(where, make):
    store = _stores.get(where)
    if store is None:
        store = _stores[where] = make()
    return store


def job(backend="gloo"):
    """(store, rank, size, prefix) of the job this process is in, or None where the library
    finds its own store (DTR_GLOO_STORE, backend 'gloo'). ArgumentError where there is none."""
    files = os.environ.get("DTR_GLOO_STORE")
    if files and backend == "gloo":
        return None
    _made[0] += 1
    prefix = f"dtr.py.{_made[0]}"
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        from torch.distributed import distributed_c10d
        return (TorchStore(distributed_c10d._get_default_store(), _timeout_s()),
                dist.get_rank(), dist.get_world_size(), prefix)
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if files and (not addr or not port):  # (backend 'nccl' under tools/dtr_launch.sh)
        rank, size = _env_int("RANK", 0, backend), _env_int("WORLD_SIZE", 1, backend)
        if rank >= size:
            raise _core.ArgumentError(f"backend '{backend}': RANK {rank} is not below "
                                      f"WORLD_SIZE {size}")
        return (_kept(("files", files), lambda: FileStore(files, _timeout_s(), backend)),
                rank, size, prefix)
    if not addr or not port:
        raise _core.ArgumentError(
            f"backend '{backend}': no store to meet through: run under torchrun (MASTER_ADDR, "
            "MASTER_PORT), initialise torch.distributed first" +
            (", or set DTR_GLOO_STORE to a directory every rank sees (tools/dtr_launch.sh does)"
             if backend == "gloo" else ""))
    rank, size = _env_int("RANK", 0, backend), _env_int("WORLD_SIZE", 1, backend)
    if rank >= size:
        raise _core.ArgumentError(f"backend '{backend}': RANK {rank} is not below WORLD_SIZE "
                                  f"{size}")
    try:
        port = int(port)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise _core.ArgumentError(f"backend '{backend}': MASTER_PORT is {os.environ['MASTER_PORT']!r}, "
                                  "not a port")
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if agent or "torch" in sys.modules:
        store = _kept(("torch", addr, port), lambda: _torch_tcp_store(
            addr, port, size, rank == 0 and not agent, backend))
        return TorchStore(store, _timeout_s()), rank, size, prefix
    store = _kept(("dtr", addr, port), lambda: TCPStore(addr, port, rank == 0, _timeout_s(),
                                                        backend))
    return store, rank, size, prefix


def _torch_tcp_store(addr, port, size, is_master, backend):
    """torch's TCPStore at addr:port; its failure to connect (or to serve) as dtr's error
    naming the store, the first line of torch's message kept (the rest is a C++ trace)."""
    import torch.distributed as tdist
    timeout_s = _timeout_s()
    try:
        return tdist.TCPStore(addr, port, size, is_master=is_master,
                              timeout=timedelta(seconds=timeout_s), wait_for_workers=False)
    except Exception as e:  # (torch's DistNetworkError, DistStoreError, RuntimeError)
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "timed out" in why or "timeout" in why.lower():
            raise _core.TimeoutError(f"backend '{backend}': the store at {addr}:{port} did not "
                                     f"answer in {timeout_s:g} s ({why})") from None
        raise _core.BackendError(f"backend '{backend}': the store at {addr}:{port}: "
                                 f"{why}") from None


class FileStore:
    """A key-value store in a directory every rank sees (DTR_GLOO_STORE, which
    tools/dtr_launch.sh makes), for what the library does not read there itself (backend
    'nccl''s unique id): a key is a file, written under a temporary name and renamed, so that
    a reader sees it whole; get waits for it (at most timeout_s)."""

    def __init__(self, path, timeout_s, backend):
        if not os.path.isdir(path):
            raise _core.ArgumentError(f"backend '{backend}': DTR_GLOO_STORE {path!r} is not a "
                                      "directory")
        self.path, self.timeout_s = path, timeout_s

    def _file(self, key):
        return os.path.join(self.path, "py." + key.encode().hex())

    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        f = self._file(key)
        with open(f + f".{os.getpid()}.tmp", "wb") as out:
            out.write(value)
        os.replace(f + f".{os.getpid()}.tmp", f)

    def get(self, key):
        f, deadline = self._file(key), time.monotonic() + self.timeout_s
        while not os.path.exists(f):
            if time.monotonic() > deadline:
                raise _core.TimeoutError(f"the store: key {key!r} was not set in "
                                         f"{self.timeout_s:g} s (in DTR_GLOO_STORE {self.path})")
            time.sleep(0.01)
        with open(f, "rb") as data:
            return data.read()


class TorchStore:
    """A torch.distributed Store with dtr's limit on get: wait(key, DTR_TIMEOUT_S), then
    dtr.TimeoutError naming the key, rather than the store's own timeout and error."""

    def __init__(self, store, timeout_s):
        self.store, self.timeout_s = store, timeout_s

    def set(self, key, value):
        self.store.set(key, value)

    def get(self, key):
        try:
            self.store.wait([key], timedelta(seconds=self.timeout_s))
        except Exception as e:  # (torch's DistStoreError: a timeout, or the store gone)
            if "timeout" not in str(e).lower():
                raise
            raise _core.TimeoutError(f"the store: key '{key}' was not set in "
                                     f"{self.timeout_s:g} s (DTR_TIMEOUT_S; no rank set it: "
                                     "one rank did not make this call?)") from None
        return self.store.get(key)


def _recv(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the store's connection closed")
        data += chunk
    return bytes(data)


class TCPStore:
    """dtr's own key-value store over TCP, for jobs without torch: the master serves it from
    a thread at (host, port); every rank, the master too, is a client. set(key, value) stores
    bytes; get(key) waits (at most timeout_s) until some rank has set key."""

    def __init__(self, host, port, is_master, timeout_s, backend="gloo"):
        self.timeout_s = timeout_s
        if is_master:
            self._serve(host, port)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout_s)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise _core.TimeoutError(f"backend '{backend}': the store at {host}:{port} did not "
                                             f"answer in {timeout_s:g} s ({e})") from None
                time.sleep(0.05)
        self.sock.settimeout(timeout_s + 10)  # (the master answers a get by timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()

    def _serve(self, host, port):
        listener = socket.create_server((host, port), reuse_port=False)
        keys, cond = {}, threading.Condition()

        def client(conn):
            with conn:
                while True:
                    try:
                        op, klen = struct.unpack("!cI", _recv(conn, 5))
                        key = _recv(conn, klen)
                        if op == b"S":
                            (vlen,) = struct.unpack("!Q", _recv(conn, 8))
                            value = _recv(conn, vlen)
                            with cond:
                                keys[key] = value
                                cond.notify_all()
                            conn.sendall(b"\0")
                        else:
                            with cond:
                                cond.wait_for(lambda: key in keys, timeout=self.timeout_s)
                                value = keys.get(key)
                            conn.sendall(b"\1" if value is None else
                                         b"\0" + struct.pack("!Q", len(value)) + value)
                    except (ConnectionError, OSError, struct.error):
                        return

        def accept():
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=client, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def set(self, key, value):
        key = key.encode() if isinstance(key, str) else bytes(key)
        value = value.encode() if isinstance(value, str) else bytes(value)
        with self.lock:
            self.sock.sendall(struct.pack("!cI", b"S", len(key)) + key +
                              struct.pack("!Q", len(value)) + value)
            _recv(self.sock, 1)

    def get(self, key):
        key = key.encode() if isinstance(key, str) else bytes(key)
        with self.lock:
            self.sock.sendall(struct.pack("!cI", b"G", len(key)) + key)
            if _recv(self.sock, 1) != b"\0":
                raise _core.TimeoutError(f"the store: key {key.decode(errors='replace')!r} was "
                                         f"not set in {self.timeout_s:g} s")
            (vlen,) = struct.unpack("!Q", _recv(self.sock, 8))
            return _recv(self.sock, vlen)
