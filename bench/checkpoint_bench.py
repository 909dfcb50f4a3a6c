"""The peers of bench/checkpoint_bench.sh, in the PyTorch environment (bench/pytorch/venv.sh,
with safetensors):

    checkpoint_bench.py gen FILE                 GPT-2 medium's tensors (355M f32), as
                                                 transformers names them, one file
    mpirun -n N ... st-whole FILE RULES MESH     each rank: safetensors' get_tensor (the
                                                 whole tensor), then its block sliced out
    mpirun -n N ... st-slice FILE RULES MESH     each rank: safetensors' get_slice (the
                                                 package's own partial read) of its block
    ... st-slice-touched FILE RULES MESH         the same copied into tensors zero-filled
                                                 before the clock (preallocated parameters)
    mpirun -n 2 ... dcp-save FILE DIR            the model saved by PyTorch DCP from 2 ranks
                                                 (Shard(0) DTensors), what dcp-load reads
    mpirun -n N ... dcp-load DIR RULES MESH      PyTorch DCP loading it into DTensors of the
                                                 rules' placements (resharding on load)
    ... dcp-load-touched DIR RULES MESH          the same into DTensors zero-filled before
                                                 the clock

Every rank keeps its blocks, as a load does; rank 0 prints "RESULT name ranks seconds
bytes peak_mb" (the slowest rank's seconds, the largest rank's bytes, the largest growth of
resident memory). The rules file is the one dtr reads (fnmatch, first match wins)."""
import fnmatch
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist

H, LAYERS, VOCAB, POS = 1024, 24, 50257, 1024


def gpt2_medium():
    shapes = {"wte.weight": (VOCAB, H), "wpe.weight": (POS, H)}
    for i in range(LAYERS):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": (H,), p + "ln_1.bias": (H,),
                       p + "attn.c_attn.weight": (H, 3 * H), p + "attn.c_attn.bias": (3 * H,),
                       p + "attn.c_proj.weight": (H, H), p + "attn.c_proj.bias": (H,),
                       p + "ln_2.weight": (H,), p + "ln_2.bias": (H,),
                       p + "mlp.c_fc.weight": (H, 4 * H), p + "mlp.c_fc.bias": (4 * H,),
                       p + "mlp.c_proj.weight": (4 * H, H), p + "mlp.c_proj.bias": (H,)})
    shapes.update({"ln_f.weight": (H,), "ln_f.bias": (H,)})
    return shapes


def rank_world():
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")), int(
        os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def placements(rules, name):
    for r in rules:
        if fnmatch.fnmatchcase(name, r["match"]):
            return [p.strip() for p in r["placements"].split(",")]
    raise SystemExit(f"checkpoint_bench.py: tensor {name!r} matches no rule")


def block(shape, pls, mesh, rank):
    """Rank's box (slices) under the placements: torch.chunk's rule, mesh dims in order."""
    coord, r = [], rank
    for n in reversed(mesh):
        coord.append(r % n)
        r //= n
    coord.reverse()
    lo, ln = [0] * len(shape), list(shape)
    for i, p in enumerate(pls):
        if p.startswith("S("):
            d = int(p[2:p.index(")")]) % len(shape)
            size = -(-ln[d] // mesh[i])
            start = min(coord[i] * size, ln[d])
            lo[d] += start
            ln[d] = max(0, min(size, ln[d] - start))
    return tuple(slice(a, a + n) for a, n in zip(lo, ln))


def report(name, secs, nbytes, grown):
    rank, world = rank_world()
    if world > 1:
        t = torch.tensor([secs, float(nbytes), grown], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        secs, nbytes, grown = t.tolist()
    if rank == 0:
        print(f"RESULT {name} {world} {secs:.4f} {int(nbytes)} {grown:.1f}", flush=True)


def init():
    rank, world = rank_world()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)


def st_load(path, rules_path, mesh_text, sliced, touched=False):
    from safetensors import safe_open
    init()
    rank, _ = rank_world()
    mesh = [int(x) for x in mesh_text.split("x")]
    rules = json.load(open(rules_path))
    keep, nbytes = {}, 0
    base = peak_mb()
    if touched:  # preallocated parameters, written before the clock: copied into
        with safe_open(path, "pt") as f:
            for name in f.keys():
                shape = f.get_slice(name).get_shape()
                box = block(shape, placements(rules, name), mesh, rank)
                keep[name] = torch.zeros(tuple(b.stop - b.start for b in box) if box else shape)
    dist.barrier()
    t0 = time.perf_counter()
    with safe_open(path, "pt") as f:
        for name in f.keys():
            sl = None
            if touched:
                s = f.get_slice(name)
                box = block(s.get_shape(), placements(rules, name), mesh, rank)
                local = keep[name].copy_(s[box] if box else s[:])
            elif sliced:
                s = f.get_slice(name)
                box = block(s.get_shape(), placements(rules, name), mesh, rank)
                # (a view of safetensors' mapping until cloned: the copy is the load)
                local = (s[box] if box else s[:]).clone()
            else:
                whole = f.get_tensor(name)
                box = block(tuple(whole.shape), placements(rules, name), mesh, rank)
                local = whole[box].clone() if box else whole.clone()
                del whole
            keep[name] = local
            nbytes += local.numel() * local.element_size()
            del sl
    secs = time.perf_counter() - t0
    report("st-slice-touched" if touched else "st-slice" if sliced else "st-whole", secs, nbytes,
           peak_mb() - base)


def dtensor_state(rules, mesh, shapes, fill=None):
    from torch.distributed.tensor import DTensor, Replicate, Shard
    state = {}
    rank = dist.get_rank()
    for name, shape in shapes.items():
        pls = placements(rules, name)
        box = block(shape, pls, list(mesh.mesh.shape), rank)
        local_shape = tuple(s.stop - s.start for s in box)
        local = torch.empty(local_shape) if fill is None else fill(name, box)
        objs = [Shard(int(p[2:p.index(")")]) % len(shape)) if p.startswith("S(") else Replicate()
                for p in pls]
        stride = tuple(int(torch.tensor(shape[i + 1:]).prod()) for i in range(len(shape)))
        state[name] = DTensor.from_local(local, mesh, objs, run_check=False, shape=shape,
                                         stride=stride)
    return state


def dcp_save(path, out):
    import torch.distributed.checkpoint as dcp
    from safetensors import safe_open
    from torch.distributed.device_mesh import init_device_mesh
    init()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    rules = [{"match": "*", "placements": "S(0)"}]
    with safe_open(path, "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        state = dtensor_state(rules, mesh, shapes, lambda n, box: f.get_slice(n)[box].clone())
    dcp.save(state, checkpoint_id=out)
    if dist.get_rank() == 0:
        print(f"dcp-save: {len(state)} tensors into {out} from {dist.get_world_size()} ranks")


def dcp_load(path, rules_path, mesh_text, touched=False):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    init()
    mesh = init_device_mesh("cpu", tuple(int(x) for x in mesh_text.split("x")))
    rules = json.load(open(rules_path))
    base = peak_mb()
    state = dtensor_state(rules, mesh, gpt2_medium(),
                          (lambda n, box: torch.zeros(tuple(b.stop - b.start for b in box)))
                          if touched else None)
    nbytes = sum(t.to_local().numel() * 4 for t in state.values())
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(state, checkpoint_id=path)
    secs = time.perf_counter() - t0
    report("dcp-load-touched" if touched else "dcp-load", secs, nbytes, peak_mb() - base)


def gen(path):
    from safetensors.torch import save_file
    tensors = {}
    for k, (name, shape) in enumerate(gpt2_medium().items()):
        n = 1
        for d in shape:
            n *= d
        tensors[name] = (torch.arange(n, dtype=torch.float32) % 251 + k).reshape(shape)
    save_file(tensors, path)
    print(f"gen: {len(tensors)} tensors, {os.path.getsize(path)} bytes in {path}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd in ("st-whole", "st-slice", "st-slice-touched"):
        st_load(sys.argv[2], sys.argv[3], sys.argv[4], cmd != "st-whole",
                cmd == "st-slice-touched")
    elif cmd == "dcp-save":
        dcp_save(sys.argv[2], sys.argv[3])
    elif cmd in ("dcp-load", "dcp-load-touched"):
        dcp_load(sys.argv[2], sys.argv[3], sys.argv[4], cmd == "dcp-load-touched")
    else:
        raise SystemExit(f"checkpoint_bench.py: unknown command {cmd!r} (see its docstring)")
    if dist.is_initialized():
        dist.destroy_process_group()
