"""The Python binding's benchmark (docs/python.md, "Benchmark"): what dtr.redistribute costs
per call beside the same change run by the C library in a loop in this process, and
dtr.redistribute beside DTensor.redistribute on the same ranks and tensors (where torch is
installed). Run by bench/python_bench.sh; prints markdown tables on rank 0.

usage: mpirun -n N python bench/python_bench.py [--quick]
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import dtr

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
quick = "--quick" in sys.argv


def median_us(times):
    return float(np.median(times)) * 1e6


def py_loop(iters, call):
    times = []
    for _ in range(iters):
        comm.Barrier()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def block_of(full, mesh, placements):
    lay = dtr.layout(mesh, full.shape, placements, dtype=full.dtype.name)[rank]
    return np.ascontiguousarray(full[tuple(slice(o, o + s) for o, s in
                                           zip(lay.global_offset, lay.local_shape))])


def binding_overhead():
    mesh = dtr.Mesh(n)
    rows = []
    for size, iters in [(16 << 10, 300 if quick else 3000), (64 << 20, 3 if quick else 15)]:
        full = np.arange(size // 4, dtype=np.float32).reshape(-1, 256)
        for src, dst in [("S(0)", "R"), ("R", "S(0)")]:
            local = block_of(full, mesh, src)
            want = block_of(full, mesh, dst)
            out = np.empty_like(want)
            c = dtr._core._c_loop(local, out, mesh, src, dst, full.shape, iters, True)
            p_out = py_loop(iters, lambda: dtr.redistribute(local, mesh, src, dst, shape=full.shape, out=out))
            p_new = py_loop(iters, lambda: dtr.redistribute(local, mesh, src, dst, shape=full.shape))
            assert np.array_equal(dtr.redistribute(local, mesh, src, dst, shape=full.shape), want)
            c_us, o_us, a_us = median_us(c), median_us(p_out), median_us(p_new)
            rows.append(f"| {size >> 10} KiB | {src} -> {dst} | {iters} | {c_us:.2f} | {o_us:.2f} "
                        f"({o_us - c_us:+.2f}, {o_us / c_us:.3f}x) | {a_us:.2f} ({a_us - c_us:+.2f}, "
                        f"{a_us / c_us:.3f}x) |")
    if rank == 0:
        print(f"\n### The binding's cost per call ({n} ranks, f32, medians; each call after a barrier)\n")
        print("| tensor | change | calls | C library, us | dtr.redistribute(out=), us | "
              "dtr.redistribute (new array), us |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))


def against_dtensor():
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
    except ImportError:
        if rank == 0:
            print("\n(torch is not installed here: no DTensor comparison)")
        return
    import os
    import socket
    port = None
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(comm.bcast(port)))
    dist.init_process_group("gloo", rank=rank, world_size=n)
    tmesh, mesh = init_device_mesh("cpu", (n,)), dtr.Mesh(n)
    rows = []
    iters = 3 if quick else 10
    rng = np.random.default_rng(1)
    full = rng.integers(-8, 8, size=(2048, 2048)).astype(np.float32)  # 16 MiB
    for src, dst in [(Shard(0), Replicate()), (Partial(), Replicate()), (Partial(), Shard(0)),
                     (Shard(0), Shard(1))]:
        local = torch.from_numpy(full if isinstance(src, Partial) else block_of(full, mesh, str(src)))
        dt = DTensor.from_local(local, tmesh, [src], run_check=False, shape=full.shape,
                                stride=(2048, 1))
        want = dt.redistribute(tmesh, [dst]).to_local()
        got = dtr.redistribute(local, mesh, [src], [dst], shape=full.shape)
        assert torch.equal(got, want), (src, dst)
        t_torch = py_loop(iters, lambda: dt.redistribute(tmesh, [dst]).to_local())
        t_dtr = py_loop(iters, lambda: dtr.redistribute(local, mesh, [src], [dst], shape=full.shape))
        a, b = median_us(t_torch) / 1e3, median_us(t_dtr) / 1e3
        rows.append(f"| {src} -> {dst} | {a:.2f} | {b:.2f} | {a / b:.1f}x |")
    dist.destroy_process_group()
    if rank == 0:
        print(f"\n### dtr.redistribute against DTensor.redistribute ({n} ranks, gloo, 2048x2048 "
              f"f32 = 16 MiB, torch {torch.__version__}, medians of {iters}; results equal)\n")
        print("| change | DTensor, ms | dtr, ms | dtr faster |")
        print("|---|---|---|---|")
        print("\n".join(rows))


binding_overhead()
against_dtensor()
