#!/usr/bin/env python3
"""Speed, side by side in one run: `dtr run` (Open MPI) against PyTorch DTensor (gloo).

    bash bench/pytorch/speed.sh [--rounds R] [--sizes 1,16,128] [--json FILE]

1. Redistribution time on 4 CPU ranks of this machine, f32 tensors of (256*MiB) x 1024,
   for S(0)->R, P->R, P->S(0), S(0)->S(1) on a 1-d mesh of 4 and [S(0),S(1)]->[S(1),S(0)],
   [S(0),S(0)]->[R,S(1)] on 2x2. Each library's figure is, per round, the median over its
   iterations of the slowest rank's time (a barrier before each iteration); rounds
   alternate dtr and PyTorch, and the reported figure is the median of the rounds.
   ratio = PyTorch / dtr (> 1: dtr is faster). The collectives each side issued are listed
   (PyTorch's counted with CommDebugMode).
2. Planning time for the same specs and for larger meshes: dtr_plan_create (optimal and
   compat) and a plan-cache hit (bench/plan_bench), against PyTorch's planner
   (_gen_transform_infos_non_cached: greedy, its default, and graph-based, its min-cost
   search) and its functools cache hit, in one process on a fake process group.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchranks import (Pool, contiguous_stride, dtr_run_argv, mesh_of,  # noqa: E402
                        to_torch_placements)

TRANSITIONS = [
    ("S(0) -> R", [4], ["S(0)"], ["R"]),
    ("P -> R", [4], ["P(sum)"], ["R"]),
    ("P -> S(0)", [4], ["P(sum)"], ["S(0)"]),
    ("S(0) -> S(1)", [4], ["S(0)"], ["S(1)"]),
    ("S(0),S(1) -> S(1),S(0)", [2, 2], ["S(0)", "S(1)"], ["S(1)", "S(0)"]),
    ("S(0),S(0) -> R,S(1)", [2, 2], ["S(0)", "S(0)"], ["R", "S(1)"]),
]

# Planning: the transitions above (4 ranks) and rotations on bigger meshes.
def rotate(m):
    return (f"rotate {m}-d", [2] * m, [f"S({i % 3})" for i in range(m)],
            [f"S({(i + 1) % 3})" for i in range(m)])


PLAN_CASES = [(n, m, a, b) for n, m, a, b in TRANSITIONS] + [rotate(m) for m in (2, 3, 4, 5)]


# ---- the PyTorch side: runs in every rank of the pool --------------------------------

def time_redistribute(a):
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    from torch.distributed.tensor.debug import CommDebugMode
    mesh = mesh_of(a["mesh"])
    shape = torch.Size(a["shape"])
    src, dst = to_torch_placements(a["src"]), to_torch_placements(a["dst"])
    local_shape, _ = compute_local_shape_and_global_offset(shape, mesh, src)
    x = DTensor.from_local(torch.ones(local_shape), mesh, src, run_check=False, shape=shape,
                           stride=contiguous_stride(a["shape"]))
    comm = CommDebugMode()
    with comm:
        x.redistribute(mesh, dst).to_local()
    counts = {str(k).split(".")[-1]: v for k, v in comm.get_comm_counts().items()}
    for _ in range(a["warmup"]):
        x.redistribute(mesh, dst).to_local()
    times = torch.zeros(a["iters"], dtype=torch.float64)
    for k in range(a["iters"]):
        dist.barrier()
        t0 = time.perf_counter()
        x.redistribute(mesh, dst).to_local()
        times[k] = (time.perf_counter() - t0) * 1e6
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # the slowest rank, iteration by iteration
    return {"median_us": float(times.median()), "collectives": counts}


# ---- the driver --------------------------------------------------------------------------

def dtr_time(dtr, mesh, shape, src, dst, iters):
    cmd = dtr_run_argv(dtr, 4, mesh, shape, src, dst, "--iters", str(iters), "--warmup", "2",
                       "--json")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def collectives_text(counts):
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()) if v) or "none"


def run_speed(dtr, sizes, rounds):
    pool = Pool(4, "speed", deadline_s=900)
    rows = []
    try:
        for mib in sizes:
            shape = [mib * 256, 1024]
            iters = 20 if mib <= 4 else 10 if mib <= 32 else 5
            for name, mesh, src, dst in TRANSITIONS:
                d_med, d_base, t_med = [], [], []
                for _ in range(rounds):
                    j = dtr_time(dtr, mesh, shape, src, dst, iters)
                    d_med.append(j["median_us"])
                    d_base.append(j["baseline_median_us"])
                    arg = {"mesh": mesh, "shape": shape, "src": src, "dst": dst,
                           "iters": iters, "warmup": 2}
                    res = pool.run("time_redistribute", [arg] * 4)
                    if "error" in res[0]:
                        raise RuntimeError(f"PyTorch {name}: {res[0]['error']}")
                    t_med.append(res[0]["median_us"])
                row = {"transition": name, "mesh": "x".join(map(str, mesh)), "mib": mib,
                       "dtr_us": statistics.median(d_med),
                       "dtr_baseline_us": statistics.median(d_base),
                       "torch_us": statistics.median(t_med),
                       "dtr_collectives": collectives_text(
                           {k: v for k, v in j["collectives"].items()}),
                       "torch_collectives": collectives_text(res[0]["collectives"]),
                       "rounds": rounds, "iters": iters}
                row["ratio"] = row["torch_us"] / row["dtr_us"]
                rows.append(row)
                print(f"  {name:24s} {mib:4d} MiB: dtr {row['dtr_us']:11.1f} us, PyTorch "
                      f"{row['torch_us']:11.1f} us, ratio {row['ratio']:.2f}", flush=True)
    finally:
        pool.close()
    return rows


def torch_plan_times(reps):
    """PyTorch's planner in this process, on a fake process group of the needed size."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import _redistribute as R
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.testing._internal.distributed.fake_pg import FakeStore
    out = {}
    for name, mesh_shape, a, b in PLAN_CASES:
        world = 1
        for s in mesh_shape:
            world *= s
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        mesh = init_device_mesh("cpu", tuple(mesh_shape))
        shape = plan_shape(mesh_shape, name)
        meta = TensorMeta(torch.Size(shape), contiguous_stride(shape), torch.float32)
        src = DTensorSpec(mesh, tuple(to_torch_placements(a)), tensor_meta=meta)
        dst = DTensorSpec(mesh, tuple(to_torch_placements(b)), tensor_meta=meta)

        def med(fn):
            t0 = time.perf_counter()
            fn()
            first = time.perf_counter() - t0
            t = []
            # at most ~3 s per figure: the graph planner takes seconds on 5-d meshes
            for _ in range(max(3, min(reps, int(3.0 / max(first, 1e-9))))):
                t0 = time.perf_counter()
                fn()
                t.append((time.perf_counter() - t0) * 1e6)
            return statistics.median(t)
        R._gen_transform_infos.cache_clear()
        greedy = med(lambda: R._gen_transform_infos_non_cached(src, dst, False))
        graph = med(lambda: R._gen_transform_infos_non_cached(src, dst, True))
        cached = med(lambda: R._gen_transform_infos(src, dst))
        out[name] = {"greedy_us": greedy, "graph_us": graph, "cached_us": cached}
    if dist.is_initialized():
        dist.destroy_process_group()
    return out


def plan_shape(mesh_shape, change=""):
    return [4096, 4096, 1024] if change.startswith("rotate") else [8192, 1024]


def run_planning(plan_bench, reps):
    torch_t = torch_plan_times(reps)
    rows = []
    for name, mesh_shape, a, b in PLAN_CASES:
        cmd = [plan_bench, "--mesh", "x".join(map(str, mesh_shape)), "--shape",
               "x".join(map(str, plan_shape(mesh_shape, name))), "--from", ",".join(a), "--to",
               ",".join(b), "--reps", str(reps)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr}")
        d = json.loads(p.stdout)
        t = torch_t[name]
        rows.append({"change": name, "mesh": "x".join(map(str, mesh_shape)),
                     "dtr_optimal_us": d["optimal_us"], "dtr_compat_us": d["compat_us"],
                     "dtr_cached_us": d["cached_us"], "torch_greedy_us": t["greedy_us"],
                     "torch_graph_us": t["graph_us"], "torch_cached_us": t["cached_us"]})
        r = rows[-1]
        print(f"  {name:24s} {r['mesh']:8s} dtr optimal {r['dtr_optimal_us']:8.2f} compat "
              f"{r['dtr_compat_us']:8.2f} cached {r['dtr_cached_us']:6.2f} | PyTorch greedy "
              f"{r['torch_greedy_us']:9.2f} graph {r['torch_graph_us']:10.2f} cached "
              f"{r['torch_cached_us']:6.2f} us", flush=True)
    return rows


def markdown(speed, planning):
    lines = ["| transition | mesh | MiB | dtr us | PyTorch us | PyTorch / dtr | dtr collectives "
             "| PyTorch collectives |", "|---|---|---:|---:|---:|---:|---|---|"]
    for r in speed:
        lines.append(f"| {r['transition']} | {r['mesh']} | {r['mib']} | {r['dtr_us']:.1f} | "
                     f"{r['torch_us']:.1f} | {r['ratio']:.2f} | {r['dtr_collectives']} | "
                     f"{r['torch_collectives']} |")
    lines += ["", "| change | mesh | dtr optimal us | dtr compat us | dtr cached us | "
              "PyTorch greedy us | PyTorch graph us | PyTorch cached us | greedy / optimal |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in planning:
        lines.append(f"| {r['change']} | {r['mesh']} | {r['dtr_optimal_us']:.2f} | "
                     f"{r['dtr_compat_us']:.2f} | {r['dtr_cached_us']:.2f} | "
                     f"{r['torch_greedy_us']:.1f} | {r['torch_graph_us']:.1f} | "
                     f"{r['torch_cached_us']:.2f} | "
                     f"{r['torch_greedy_us'] / r['dtr_optimal_us']:.0f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtr", required=True)
    ap.add_argument("--plan-bench", required=True)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per figure (default 3)")
    ap.add_argument("--sizes", default="1,16,128", help="MiB per tensor (default 1,16,128)")
    ap.add_argument("--plan-reps", type=int, default=201)
    ap.add_argument("--skip-speed", action="store_true", help="planning time only")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rounds < 1 or any(s < 1 for s in sizes):
        ap.error("--rounds and --sizes want positive integers")
    import torch
    print(f"speed: torch {torch.__version__}, 4 ranks, sizes {sizes} MiB, {args.rounds} "
          f"rounds; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    speed = [] if args.skip_speed else run_speed(os.path.abspath(args.dtr), sizes, args.rounds)
    print("planning:", flush=True)
    planning = run_planning(os.path.abspath(args.plan_bench), args.plan_reps)
    print()
    print(markdown(speed, planning))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                       "speed": speed, "planning": planning}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
