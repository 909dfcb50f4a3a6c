"""What conformance.py and speed.py share: the mpirun command line of `dtr run`, the names of
placements and dtypes on both sides, and a pool of PyTorch ranks on this machine: W processes in one gloo process group, each
running the tasks the driver sends it, so that thousands of cases pay PyTorch's start-up
once. Used by conformance.py and speed.py.

The driver process is not a rank. pool.run(fn_name, [arg_for_rank_0, ...]) sends one task
to every rank and returns their results in rank order; a task that raises returns
{"error": "Type: first line of the message"} on that rank. A pool whose ranks do not all
answer within the deadline is killed (a rank stuck in a collective cannot be interrupted)
and run() raises TimeoutError; the caller may start a new one.
"""

import multiprocessing as mp
import os
import queue
import socket
import traceback

# dtr's names for placements and dtypes, and PyTorch's.
DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "f8e4m3", "f8e5m2", "c64", "c128"]
FLOAT_DTYPES = ["f32", "f64", "f16", "bf16", "c64", "c128"]  # those with gradients
ELEM_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "u8": 1,
              "f8e4m3": 1, "f8e5m2": 1, "c64": 8, "c128": 16}
PART_DTYPES = {"c64": "f32", "c128": "f64"}  # a complex value compared as its two parts


def torch_dtype(name):
    import torch
    return {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
            "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64,
            "u8": torch.uint8, "f8e4m3": torch.float8_e4m3fn,
            "f8e5m2": torch.float8_e5m2, "c64": torch.complex64,
            "c128": torch.complex128}[name]


def to_torch_placements(texts):
    from torch.distributed.tensor import Partial, Replicate, Shard
    out = []
    for t in texts:
        if t == "R":
            out.append(Replicate())
        elif t.startswith("S("):
            out.append(Shard(int(t[2:-1])))
        elif t == "P":
            out.append(Partial("sum"))
        elif t.startswith("P("):
            out.append(Partial(t[2:-1]))
        else:
            raise ValueError(f"placement {t!r}")
    return out


def placement_text(p):
    from torch.distributed.tensor import Partial, Replicate, Shard
    if isinstance(p, Shard):
        return f"S({p.dim})"
    if isinstance(p, Replicate):
        return "R"
    if isinstance(p, Partial):
        return f"P({p.reduce_op})"
    return repr(p)


def text_mesh(mesh):
    return "x".join(map(str, mesh))


def text_shape(shape):
    return "x".join(map(str, shape)) if shape else "scalar"


def dtr_run_argv(dtr, world, mesh, shape, src, dst, *extra):
    """`mpirun -n world dtr run --mesh .. --shape .. --from .. --to .. extra...`."""
    return ["mpirun", "--oversubscribe", "-n", str(world), dtr, "run", "--mesh",
            text_mesh(mesh), "--shape", text_shape(shape), "--from", ",".join(src), "--to",
            ",".join(dst), *extra]


def contiguous_stride(shape):
    """The strides of a contiguous tensor of this shape (without allocating one)."""
    out, acc = [], 1
    for s in reversed(list(shape)):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def error_text(e):
    lines = str(e).strip().splitlines() or [""]
    return f"{type(e).__name__}: {lines[0][:300]}"


_meshes = {}


def mesh_of(shape):
    """The DeviceMesh of this shape over all ranks (made once: it creates groups)."""
    from torch.distributed.device_mesh import init_device_mesh
    key = tuple(shape)
    if key not in _meshes:
        _meshes[key] = init_device_mesh("cpu", key)
    return _meshes[key]


def _rank_main(rank, world, port, module, inq, outq):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import datetime
    import importlib
    import logging
    import warnings
    import torch
    import torch.distributed as dist
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    tasks = importlib.import_module(module)
    while True:
        item = inq.get()
        if item is None:
            break
        name, arg = item
        try:
            res = getattr(tasks, name)(arg)
        except Exception as e:  # reported to the driver, which decides
            res = {"error": error_text(e), "trace": traceback.format_exc(limit=4)}
        outq.put((rank, res))
    dist.destroy_process_group()


class Pool:
    def __init__(self, world, module, deadline_s=300):
        self.world = world
        self.deadline_s = deadline_s
        ctx = mp.get_context("spawn")
        self.inq = [ctx.Queue() for _ in range(world)]
        self.outq = ctx.Queue()
        port = free_port()
        self.procs = [ctx.Process(target=_rank_main,
                                  args=(r, world, port, module, self.inq[r], self.outq),
                                  daemon=True) for r in range(world)]
        for p in self.procs:
            p.start()

    def run(self, name, args):
        for r in range(self.world):
            self.inq[r].put((name, args[r]))
        got = [None] * self.world
        for _ in range(self.world):
            try:
                r, res = self.outq.get(timeout=self.deadline_s)
            except queue.Empty:
                self.kill()
                raise TimeoutError(f"{self.world} PyTorch ranks: no answer within "
                                   f"{self.deadline_s} s")
            got[r] = res
        return got

    def kill(self):
        for p in self.procs:
            if p.is_alive():
                p.kill()
        self.procs = []

    def close(self):
        for q in self.inq:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)
        self.kill()
