"""torch.distributed as dtr's engine (Mesh(..., backend="torch")): each operation of a plan
is a torch collective on the process groups torch holds, started with async_op=True and
completed by test/wait, on tensors made over dtr's buffers without a copy (DLPack capsules
whose deleter is plain C: see _engine.c): host tensors, or CUDA ones where torch runs NCCL
and the mesh is on a CUDA device (Mesh(..., backend="torch", device="cuda")). python/dtr/_engine.c hands the C executor these methods as a backend's
operations (runtime/backend.h).

A group of dtr's is made by its members only (the executor requires it), so it cannot be a
torch.distributed.new_group: every rank of the job counts the groups it makes, and a group
made by some ranks only would set their counts apart, and with them the names of the groups
torch makes next (init_device_mesh's). A group here is a process group of the default
group's backend made directly over the default store (ProcessGroupGloo / ProcessGroupNCCL
under a prefix of dtr's own), its ranks in the member order dtr gives; the whole job in
order is torch's default group itself. One per member list, kept.
"""
import atexit
import collections

from . import _core

# The last operations waited for, their torch Works (which hold their tensors). A gloo worker
# thread drops its own reference to a Work just after completing it; if that reference is
# the last, the Work's tensors go there, and a tensor Python has let go takes the GIL to go,
# which a thread cannot do once the interpreter is finalizing: the process then aborts
# ("terminate called without an active exception", seen at the exit of a job whose last call
# ran on this engine). Holding the last few here makes the worker's drop never the last
# during the run, and at exit they are kept for good (_core._immortal), so none goes then.
_recent = collections.deque(maxlen=4)
atexit.register(lambda: _core._immortal(tuple(_recent)))

_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
           "i32": "int32", "i64": "int64", "u8": "uint8", "c64": "complex64",
           "c128": "complex128"}


class _Pending:
    """A started operation: torch's Work, and what to do once it has completed. The executor's
    test waits too (_engine.c): torch's gloo completes a reduce-scatter only in wait()
    (polling is_completed() would wait forever), and polling a step in flight, each poll a
    call into Python under the GIL, took the core from torch's own worker threads (2.0-2.8x
    torch's collective); a step completes once every member started it, which they have or
    will without this rank."""

    def __init__(self, work, finish=None):
        self.work, self.finish = work, finish

    def wait(self):
        self.work.wait()  # (raises the operation's error, if any)
        _recent.append(self.work)
        if self.finish is not None:
            finish, self.finish = self.finish, None
            finish()


class _Group:
    def __init__(self, pg, members):
        self.pg, self.members = pg, members


class Engine:
    """The backend's state: torch.distributed's default group, this rank, the groups."""

    made = 0  # engines made in this process (their groups' store prefix)

    def __init__(self):
        try:
            import torch
            import torch.distributed as dist
        except ImportError as e:
            raise _core.ArgumentError(f"backend 'torch': needs PyTorch, which does not import "
                                      f"here ({e})") from None
        if not (dist.is_available() and dist.is_initialized()):
            raise _core.ArgumentError("backend 'torch': torch.distributed is not initialised "
                                      "(call torch.distributed.init_process_group first)")
        self.torch, self.dist = torch, dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.backend = dist.get_backend()
        if self.backend not in ("gloo", "nccl"):
            raise _core.ArgumentError(f"backend 'torch': torch.distributed runs on "
                                      f"'{self.backend}'; dtr's torch engine takes gloo or nccl")
        Engine.made += 1
        self.prefix = f"dtr.torch.{Engine.made}"
        self.groups = {}

    def group(self, ranks):
        from torch.distributed import distributed_c10d
        members = tuple(ranks)
        pg = self.groups.get(members)
        if pg is None and members == tuple(range(self.size)):
            pg = self.dist.group.WORLD
        elif pg is None:
            store = self.dist.PrefixStore(f"{self.prefix}.{'-'.join(map(str, members))}",
                                          distributed_c10d._get_default_store())
            timeout = distributed_c10d._get_default_timeout(self.backend)
            me = members.index(self.rank)
            if self.backend == "gloo":
                pg = self.dist.ProcessGroupGloo(store, me, len(members), timeout)
            else:
                pg = self.dist.ProcessGroupNCCL(store, me, len(members))
        self.groups[members] = pg
        return _Group(pg, members)

    def _bytes(self, buf):
        return self.torch.from_dlpack(buf)  # (a DLPack capsule of uint8: no copy)

    def _elems(self, buf, dtype):
        return self._bytes(buf).view(getattr(self.torch, _DTYPES[dtype]))

    def _op(self, op):
        ops = self.dist.ReduceOp
        return {"sum": ops.SUM, "max": ops.MAX, "min": ops.MIN, "product": ops.PRODUCT}[op]

    def all_gather(self, g, send, recv):
        s, r = self._bytes(send), self._bytes(recv)
        return _Pending(self.dist.all_gather_into_tensor(r, s, group=g.pg, async_op=True))

    def reduce_scatter(self, g, send, recv, dtype, op):
        s, r = self._elems(send, dtype), self._elems(recv, dtype)
        return _Pending(self.dist.reduce_scatter_tensor(r, s, op=self._op(op), group=g.pg,
                                                        async_op=True))

    def all_reduce(self, g, send, recv, dtype, op, in_place):
        r = self._elems(recv, dtype)
        if not in_place:
            r.copy_(self._elems(send, dtype))
        return _Pending(self.dist.all_reduce(r, op=self._op(op), group=g.pg, async_op=True))

    def all_to_allv(self, g, send, scounts, sdispls, recv, rcounts, rdispls):
        """Pieces in member order at any displacements: torch's all_to_all_single takes them
        back to back, so they are packed and unpacked where they are not."""
        torch = self.torch
        s, r = self._bytes(send), self._bytes(recv)
        members = range(len(g.members))

        def packed(counts, displs):
            return all(displs[m] == sum(counts[:m]) for m in members)

        sin = (s[:sum(scounts)] if packed(scounts, sdispls) else
               torch.cat([s[sdispls[m]:sdispls[m] + scounts[m]] for m in members]))
        direct = packed(rcounts, rdispls)
        rout = (r[:sum(rcounts)] if direct else
                torch.empty(sum(rcounts), dtype=torch.uint8, device=r.device))

        def unpack():
            for m in members:
                at = sum(rcounts[:m])
                r[rdispls[m]:rdispls[m] + rcounts[m]].copy_(rout[at:at + rcounts[m]])

        work = self.dist.all_to_all_single(rout, sin, list(rcounts), list(scounts), group=g.pg,
                                           async_op=True)
        return _Pending(work, None if direct else unpack)


def engine():
    """A new engine over torch.distributed's default group (the helper _engine.c calls)."""
    return Engine()
