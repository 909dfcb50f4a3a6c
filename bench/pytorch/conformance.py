#!/usr/bin/env python3
"""Differential conformance check: dtr against PyTorch DTensor, element by element.

    bash bench/pytorch/conformance.sh [--cases N] [--seed S] [--only K] [--json FILE]

For N seeded random cases (a world of 4 or 8 CPU ranks; a mesh of 1 to 3 dims over it;
a tensor of 0 to 3 dims with uneven and zero lengths; any dtype; any placements: Shard,
Replicate, Partial with every reduce op) it runs the change A -> B and B -> A, each:

  * layout: `dtr layout --json` for A and for B against PyTorch's
    compute_local_shape_and_global_offset on every rank (local shape and global offset);
  * forward: `mpirun -n W dtr run ... --verify --backward --dump DIR` (optimal or compat,
    drawn per case) against DTensor.from_local(the same local bytes).redistribute(B) over
    gloo: the local results, value for value;
  * backward: dtr's gradient (the same gradient bytes, arriving in B's placements) against
    DTensor autograd's x.grad: its placements and values (floating dtypes: PyTorch cannot
    differentiate integers).

Each direction ends in one of: both ran and agree; both refused; a known difference (the
table KNOWN below: a documented semantic choice, or a PyTorch limitation, each matched by
its condition AND PyTorch's or dtr's message, so an unrelated failure is not excused); or a
disagreement, printed with the case and the command that reproduces it. Exit status 0 when
there is no unexplained disagreement.

Complex dtypes (c64, c128) are compared part by part (real, imaginary).
--orders: shard orders (a tensor dim split by several mesh dims in another order than
mesh-dim order), written for both sides as PyTorch's _StridedShard (_S(d, sf)), which dtr
reads as the order PyTorch decodes it to; placements PyTorch returns are compared in dtr's
form (S(d)[k]).
fp8 has no gloo type, so fp8 data movement (no arithmetic) is compared by running PyTorch
on the same bytes as uint8; an fp8 change that reduces or divides runs in fp8 on both sides
(and both refuse it).
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchranks import (DTYPES, ELEM_BYTES, FLOAT_DTYPES, PART_DTYPES, Pool,  # noqa: E402
                        contiguous_stride, dtr_run_argv, dtr_text, error_text, mesh_of,
                        placement_text, strided_text, text_mesh, text_shape,
                        to_torch_placements, torch_dtype)

OPS = ["sum", "avg", "max", "min", "product"]

# Known differences: key -> (who, why). Each is matched in classify() by a condition on
# the case and a fragment of the refusing side's message.
KNOWN = {
    "torch-refuses-R-to-P": (
        "PyTorch refuses",
        "DTensor.redistribute refuses Replicate -> Partial ('only Shard to Partial(sum) "
        "redistribution is supported'); dtr does it: sum divides by the mesh dim's size, "
        "avg/max/min keep the value (docs/design.md)"),
    "compat-has-no-S-to-P": (
        "dtr refuses",
        "dtr's compat strategy is the seed algorithm (PyTorch 2.1), which had no Shard -> "
        "Partial; rerun with optimal, which zero-fills as PyTorch 2.15 does, and compared"),
    "torch-int-avg": (
        "PyTorch fails",
        "PyTorch cannot reduce integers with avg (the division's float result is not cast "
        "back); dtr divides in the integer dtype and truncates, as C and NCCL do"),
    "torch-mixed-partial": (
        "PyTorch refuses",
        "PyTorch refuses placements that mix Partial ops on one tensor; dtr reduces them "
        "innermost mesh dim first, as PyTorch 2.4 to 2.x did (docs/semantics.md)"),
    "compat-refuses-corrupting-seed-plan": (
        "dtr refuses",
        "dtr's compat strategy reproduces the seed algorithm step for step and refuses where "
        "that plan would misplace data for the shape (followed exactly, docs/planner.md); PyTorch "
        "2.15's planner handles these. The check then runs dtr's optimal plan and compares "
        "it with PyTorch's result, so each of these was compared too"),
    "torch-complex-partwise": (
        "dtr refuses",
        "a complex Partial other than sum and avg: PyTorch's reduce_scatter_tensor (no "
        "supports_complex check, unlike its all_reduce) reduces the real and imaginary parts "
        "apart, so P(max) of 1+5j and 2+1j gives 2+5j and P(product) gives 2+5j, not the "
        "complex product -3+11j; dtr refuses such reductions by name (docs/semantics.md)"),
    "torch-complex-max-backward": (
        "PyTorch fails",
        "the backward of a kept complex P(max) or P(min) (P(max) -> P(max), no reduction): "
        "PyTorch 2.15's gradient all-reduce trips an internal assert in c10d "
        "('Invalid other op value'); the forward agreed (compared), and dtr's gradient "
        "verified against its own reference"),
    "dtr-run-mixed-fill": (
        "dtr fails",
        "P(sum) with P(avg) on one tensor: PyTorch does not count it as mixed and runs it; "
        "dtr plans it too, but dtr run's test pattern needs one Partial op and says so "
        "('the pattern needs one op'), so the values are not compared"),
    "torch-fp8-zero-fill": (
        "PyTorch fails",
        "PyTorch's Shard -> Partial(sum) puts the shard in zeros with index_add, whose CPU "
        "kernels have no fp8 form ('index_add_' or 'scatter_gather_tensor_cpu' not "
        "implemented for Float8); dtr zero-fills and copies bytes, which any dtype allows"),
    "compat-knows-no-shard-order": (
        "dtr refuses",
        "dtr's compat strategy is the seed algorithm, which knows only mesh-dim order; the "
        "check reruns dtr's optimal plan and compares it"),
    "dtr-refuses-strided-pieces": (
        "dtr refuses",
        "for this uneven shape PyTorch's _StridedShard holds strided pieces on some rank "
        "(its compute_local_shape_and_global_offset differs there from the shard order it "
        "decodes to, which the check confirms); dtr holds one block per rank and refuses "
        "such a spec by name (docs/semantics.md, \"Shard orders\")"),
    "dtr-no-ordered-zero-fill": (
        "dtr refuses",
        "Shard -> Partial(sum) from or to a shard order: not planned yet (refused by name)"),
    "torch-strided-crash": (
        "PyTorch fails",
        "a _StridedShard redistribution where PyTorch's ranks disagree on piece sizes: gloo "
        "aborts the process ('Received data size doesn't match expected size') or the ranks "
        "wait until the deadline. Every such crash met so far (17 rows over 4x2 as "
        "_S(0, 2),S(0), even to R,R) was on a layout with strided pieces, which dtr refuses "
        "first (dtr-refuses-strided-pieces); this names one on a layout dtr accepts, where "
        "dtr's result verified against its own reference"),
    "torch-refuses-strided-to-P": (
        "PyTorch refuses",
        "_StridedShard -> Partial(sum): PyTorch 2.15 zero-fills only a plain Shard ('Can not "
        "redistribute from _S(1, 4) to P(sum)'); dtr zero-fills in the shard order it reads "
        "the _StridedShard as (docs/semantics.md), checked by dtr run --verify"),
    "torch-fp8-gloo": (
        "PyTorch fails",
        "gloo has no fp8 types: PyTorch fails on any gloo collective in fp8 (the check runs "
        "fp8 changes that only move data on uint8 views of the same bytes; this is where "
        "the change involves a Partial that dtr can keep or needs no reduction for, e.g. "
        "on a size-1 mesh dim). dtr never reduces fp8 (storage only)"),
}


def factorizations(n, k):
    if k == 1:
        return [(n,)]
    return [(d,) + rest for d in range(1, n + 1) if n % d == 0
            for rest in factorizations(n // d, k - 1)]


CAST_FAMILIES = [["f32", "f64", "f16", "bf16"], ["c64", "c128"]]


def gen_case(rng, worlds, zero_fill=False, casts=False, orders=False):
    world = rng.choice(worlds)
    mesh = rng.choice(factorizations(world, rng.randint(1, 3)))
    tnd = rng.choice([0, 1, 1, 2, 2, 2, 3, 3])
    shape = [rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17])
             if rng.random() > 0.06 else 0 for _ in range(tnd)]
    dtype = rng.choice(DTYPES)
    op = rng.choice(OPS)

    def placement():
        kind = rng.choices("SRP", weights=[5, 3, 2])[0]
        if kind == "S" and tnd > 0:
            return f"S({rng.randrange(tnd)})"
        if kind == "P":
            return f"P({rng.choice(OPS) if rng.random() < 0.04 else op})"
        return "R"

    src = [placement() for _ in mesh]
    dst = [placement() for _ in mesh]
    # Mostly keep a Partial where both sides have one (a reduction PyTorch and dtr both do),
    # so that most directions run; the rest exercise the refusals.
    for i in range(len(mesh)):
        if dst[i].startswith("P") and not src[i].startswith("P") and rng.random() < 0.7:
            dst[i] = rng.choice(["R", src[i]])
    # --zero-fill: half the Shard mesh dims become P(sum) (PyTorch 2.15's zero fill).
    for i in range(len(mesh)):
        if zero_fill and src[i].startswith("S") and rng.random() < 0.5:
            dst[i] = "P(sum)"
    # --orders: on one side or both, a tensor dim split by two or more mesh dims in a random
    # order, written as PyTorch's _StridedShard.
    # (Mesh dims of more than one rank, in an order other than mesh-dim order; sometimes a
    # one-rank mesh dim joins them.)
    big = [i for i in range(len(mesh)) if mesh[i] > 1]
    if orders and tnd > 0 and len(big) >= 2:
        for side in [s for s in (src, dst) if rng.random() < 0.7]:
            d = rng.randrange(tnd)
            dims = rng.sample(big, rng.randint(2, len(big)))
            for i in dims:
                side[i] = f"S({d})"
            seq = [i for i in range(len(mesh)) if side[i] == f"S({d})"]
            while True:
                rng.shuffle(seq)
                if [i for i in seq if mesh[i] > 1] != sorted(i for i in seq if mesh[i] > 1):
                    break
            side[:] = strided_text({d: seq}, side, mesh)
    case = {"world": world, "mesh": list(mesh), "shape": shape, "dtype": dtype,
            "a": src, "b": dst, "strategy": rng.choice(["optimal", "compat"])}
    # --casts: half the float and complex cases cast (PyTorch's forward_dtype).
    family = next((f for f in CAST_FAMILIES if dtype in f), None)
    if casts and family is not None and rng.random() < 0.5:
        case["to"] = rng.choice([t for t in family if t != dtype])
    # and a third of them run the backward in another dtype (PyTorch's backward_dtype)
    if casts and family is not None and rng.random() < 0.33:
        case["bdt"] = rng.choice([t for t in family if t != dtype])
    return case


def dtr_layout(dtr, case, pl):
    cmd = [dtr, "layout", "--mesh", text_mesh(case["mesh"]), "--shape",
           text_shape(case["shape"]), "--placements", ",".join(pl), "--dtype", case["dtype"],
           "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    return [[r["local_shape"], r["global_offset"]] for r in json.loads(p.stdout)["blocks"]]


def random_fill(case, src, dst):
    """A cast that only moves data (no Partial changes, so no reduction either way) runs on
    random values, so that both sides' rounding shows; the rest keep the pattern, whose small
    integers every dtype and summation order hold exactly."""
    return ("to" in case or "bdt" in case) and \
        all(s == x or not (is_partial(s) or is_partial(x)) for s, x in zip(src, dst))


def dtr_run_cmd(dtr, case, src, dst, dump):
    # No backward for the storage-only fp8 types: PyTorch computes no gradient for them
    # (grad_on below), and dtr refuses to reduce them (a P(sum) gradient would need it).
    backward = [] if case["dtype"].startswith("f8") else ["--backward"]
    if "to" in case:
        backward += ["--to-dtype", case["to"]]
    if "bdt" in case and "--backward" in backward:
        backward += ["--backward-dtype", case["bdt"]]
    if random_fill(case, src, dst):
        backward += ["--fill", "random", "--seed", str(len(case["shape"]) + 7)]
    return dtr_run_argv(dtr, case["world"], case["mesh"], case["shape"], src, dst, "--dtype",
                        case["dtype"], "--strategy", case["strategy"], "--verify", *backward,
                        "--iters", "0", "--warmup", "0", "--json", "--dump", dump)


def dtr_run(dtr, case, src, dst):
    with tempfile.TemporaryDirectory(prefix="dtr-conf-") as dump:
        cmd = dtr_run_cmd(dtr, case, src, dst, dump)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        err = "\n".join(l for l in p.stderr.splitlines() if l.startswith("dtr "))
        res = {"rc": p.returncode, "stderr": err or p.stderr.strip()[-400:]}
        if p.returncode == 0:
            res["json"] = json.loads(p.stdout.strip().splitlines()[-1])
            bufs = []
            for r in range(case["world"]):
                one = {}
                for what in ("in", "out", "grad_in", "grad_out"):
                    path = os.path.join(dump, f"rank{r}.{what}")
                    one[what] = open(path, "rb").read() if os.path.exists(path) else None
                bufs.append(one)
            res["bufs"] = bufs
        return res


# ---- the PyTorch side: runs in every rank of the pool --------------------------------

def _from_bytes(torch, data, shape, dtype):
    n = 1
    for s in shape:
        n *= s
    if data is None:
        return torch.zeros(shape, dtype=dtype)
    if len(data) != n * torch.empty(0, dtype=dtype).element_size():
        raise ValueError(f"harness: {len(data)} bytes for local shape {shape}")
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()


def _to_bytes(t):
    return t.contiguous().reshape(-1).view(__import__("torch").uint8).numpy().tobytes()


def layouts_only(a):
    import torch
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    mesh = mesh_of(a["mesh"])
    shape = torch.Size(a["shape"])
    src, dst = to_torch_placements(a["src"]), to_torch_placements(a["dst"])
    res = {}
    for key, pl in (("layout_src", src), ("layout_dst", dst)):
        try:
            ls, off = compute_local_shape_and_global_offset(shape, mesh, pl)
            res[key] = [list(ls), list(off)]
        except Exception as e:
            res[key] = {"error": error_text(e)}
    return res


def redistribute_case(a):
    import torch
    from torch.distributed.tensor import DTensor
    mesh = mesh_of(a["mesh"])
    shape = torch.Size(a["shape"])
    stride = contiguous_stride(a["shape"])
    src, dst = to_torch_placements(a["src"]), to_torch_placements(a["dst"])
    res = layouts_only(a)
    if not isinstance(res["layout_src"], list) or not isinstance(res["layout_dst"], list):
        res["fwd_error"] = "layout: " + str(res["layout_src"])
        return res
    dt = torch.uint8 if a["view_u8"] else torch_dtype(a["dtype"])
    to = torch_dtype(a["to"]) if a.get("to") else None  # forward_dtype
    bdt = torch_dtype(a["bdt"]) if a.get("bdt") else None  # backward_dtype
    grad_on = a["dtype"] in FLOAT_DTYPES and a["grad"] is not None
    try:
        local = _from_bytes(torch, a["in"], res["layout_src"][0], dt)
        # The gradient is caught by a hook on from_local's output, as Redistribute's
        # backward returns it. Not at a detached leaf: DTensor.detach() runs sharding
        # propagation, and on a 4x1x1 mesh it turned [P(product),S(0),S(0)] into
        # [S(0),S(0),S(0)] (a reduce-scatter). Not with retain_grad either: its clone of a
        # P(product) gradient reduce-scatters it the same way.
        local.requires_grad_(grad_on)
        x = DTensor.from_local(local, mesh, src, run_check=False, shape=shape, stride=stride)
        caught = []
        if grad_on:
            x.register_hook(lambda g: caught.append(g))
        kw = {"forward_dtype": to} if to is not None else {}
        if bdt is not None:
            kw["backward_dtype"] = bdt
        y = x.redistribute(mesh, dst, **kw)
        out = y.to_local()
        res.update(out=_to_bytes(out), out_shape=list(out.shape), out_dtype=str(out.dtype),
                   out_placements=dtr_text([placement_text(p) for p in y.placements],
                                           a["mesh"]))
    except Exception as e:
        res["fwd_error"] = error_text(e)
        return res
    if grad_on:
        try:
            g = DTensor.from_local(_from_bytes(torch, a["grad"], res["layout_dst"][0],
                                               to if to is not None else dt),
                                   mesh, dst, run_check=False, shape=shape, stride=stride)
            y.backward(g)
            gl = caught[0].to_local()
            res.update(grad=_to_bytes(gl), grad_shape=list(gl.shape),
                       grad_placements=dtr_text([placement_text(p) for p in caught[0].placements],
                                                a["mesh"]))
        except Exception as e:
            res["bwd_error"] = error_text(e)
    return res


def noop(a):
    return {}


# ---- comparing --------------------------------------------------------------------------

def values_equal(torch, x, y, dtype, shape):
    """(equal, first differing index, x value, y value): values, not bits (-0 == 0)."""
    if len(x) != len(y):
        return False, -1, len(x), len(y)
    if not x:
        return True, None, None, None
    dt = torch_dtype(PART_DTYPES.get(dtype, dtype))  # complex: real and imaginary parts
    a = torch.frombuffer(bytearray(x), dtype=dt).to(torch.float64)
    b = torch.frombuffer(bytearray(y), dtype=dt).to(torch.float64)
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    if bool(same.all()):
        return True, None, None, None
    k = int((~same).nonzero()[0])
    return False, k, float(a[k]), float(b[k])


def is_partial(p):
    return p.startswith("P")


def is_shard(p):
    return p.startswith("S") or p.startswith("_S")


def op_of(p):
    return "sum" if p == "P" else p[2:-1]


def classify(case, src, dst, d, t):
    """Returns (category, detail) for one direction: dtr's result d, PyTorch's ranks t."""
    fwd_err = next((r.get("fwd_error") or r.get("error") for r in t
                    if r.get("fwd_error") or r.get("error")), None)
    dtr_ok = d["rc"] == 0
    torch_ok = fwd_err is None
    r_to_p = any(s == "R" and is_partial(x) for s, x in zip(src, dst))
    s_to_p = any(is_shard(s) and is_partial(x) for s, x in zip(src, dst))
    ops = {op_of(p) for p in src + dst if is_partial(p)}
    reduces = [s for s, x in zip(src, dst) if is_partial(s) and s != x]
    if dtr_ok and not torch_ok:
        if r_to_p and "Can not redistribute from R to P" in fwd_err:
            return "known:torch-refuses-R-to-P", fwd_err
        if any(s.startswith("_S") and is_partial(x) for s, x in zip(src, dst)) and \
                "Can not redistribute from _S(" in fwd_err:
            return "known:torch-refuses-strided-to-P", fwd_err
        if len({op_of(p) for p in src if is_partial(p)}) > 1 or \
                len({op_of(p) for p in dst if is_partial(p)}) > 1:
            if "mix" in fwd_err.lower() or "partial" in fwd_err.lower():
                return "known:torch-mixed-partial", fwd_err
        if case["dtype"].startswith("f8") and s_to_p and "not implemented for 'Float8" in fwd_err:
            return "known:torch-fp8-zero-fill", fwd_err
        if case["dtype"].startswith("f8") and "Invalid scalar type" in fwd_err:
            return "known:torch-fp8-gloo", fwd_err
        if case["dtype"] in ("i32", "i64", "u8") and any(op_of(s) == "avg" for s in reduces) \
                and "can't be cast to the desired output type" in fwd_err:
            return "known:torch-int-avg", fwd_err
        return "DISAGREE", f"dtr ran, PyTorch failed: {fwd_err}"
    if not dtr_ok and torch_ok:
        if case["strategy"] == "compat" and "the seed algorithm's plan would corrupt data" \
                in d["stderr"]:
            return "rerun-optimal", "compat-refuses-corrupting-seed-plan"
        if case["strategy"] == "compat" and s_to_p and \
                "the seed algorithm has no Shard -> Partial" in d["stderr"]:
            return "rerun-optimal", "compat-has-no-S-to-P"
        if case["strategy"] == "compat" and "knows only mesh-dim order" in d["stderr"]:
            return "rerun-optimal", "compat-knows-no-shard-order"
        if s_to_p and "with a shard order other than mesh-dim order is not planned yet" \
                in d["stderr"]:
            return "known:dtr-no-ordered-zero-fill", d["stderr"]
        if case["dtype"] in ("c64", "c128") and \
                "complex values reduce by sum and avg only" in d["stderr"]:
            return "known:torch-complex-partwise", d["stderr"]
        if ops <= {"sum", "avg"} and len(ops) == 2 and "the pattern needs one op" in d["stderr"]:
            return "known:dtr-run-mixed-fill", d["stderr"]
        return "DISAGREE", f"PyTorch ran, dtr failed (exit {d['rc']}): {d['stderr']}"
    if not dtr_ok and not torch_ok:
        # A refusal: the planner's, or dtr run's (no test pattern for mixed Partial ops).
        if not any(k in d["stderr"] for k in ("dtr_plan_create", "dtr_change_create",
                                              "the pattern needs one op")):
            return "DISAGREE", f"dtr failed (exit {d['rc']}), not refused: {d['stderr']}"
        return "both-refused", f"dtr: {d['stderr']} | PyTorch: {fwd_err}"
    return "compared", None


def show_values(torch, case, d, t):
    """--only: every rank's buffers as values, dtr's and PyTorch's side by side."""
    dt = torch_dtype(case["dtype"])

    def vals(b):
        if b is None:
            return None
        return torch.frombuffer(bytearray(b), dtype=dt).tolist() if b else []
    for r in range(case["world"]):
        db = d.get("bufs", [{}] * case["world"])[r]
        print(f"    rank {r}: in {vals(db.get('in'))}\n"
              f"            dtr out {vals(db.get('out'))}  PyTorch out {vals(t[r].get('out'))}\n"
              f"            grad in {vals(db.get('grad_in'))}\n"
              f"            dtr grad {vals(db.get('grad_out'))}  PyTorch grad "
              f"{vals(t[r].get('grad'))} {t[r].get('grad_placements', '')}")


def compare_ran(torch, case, d, t, lay, stats):
    """Both ran: layouts were compared already; results and gradients, rank by rank."""
    j = d["json"]
    if j.get("verified") is not True or j.get("backward_result", {"verified": True}).get("verified") \
            is not True:
        return f"dtr's own --verify failed: {json.dumps(j)[:300]}"
    for r in range(case["world"]):
        tr, dr = t[r], d["bufs"][r]
        if tr["out_shape"] != lay["dst"][r][0]:
            return f"rank {r}: PyTorch's result has shape {tr['out_shape']}, layout says " \
                   f"{lay['dst'][r][0]}"
        out_dtype = case.get("to", case["dtype"])
        ok, k, x, y = values_equal(torch, dr["out"], tr["out"], out_dtype, tr["out_shape"])
        if not ok:
            return f"rank {r}: forward result differs at local index {k}: dtr {x}, PyTorch {y}"
        stats["fwd_elems"] += len(dr["out"]) // ELEM_BYTES[out_dtype]
        stats["cast_elems"] += len(dr["out"]) // ELEM_BYTES[out_dtype] if "to" in case else 0
        if "bwd_error" in tr:
            if case["dtype"] in ("c64", "c128") and "Invalid other op value" in tr["bwd_error"]:
                return "known:torch-complex-max-backward"
            return f"rank {r}: PyTorch's backward failed: {tr['bwd_error']}"
        if "grad" in tr:
            want_pl = j["backward_result"]["placements"]
            if tr["grad_placements"] != want_pl:
                return f"gradient placements: dtr {want_pl}, PyTorch {tr['grad_placements']}"
            ok, k, x, y = values_equal(torch, dr["grad_out"], tr["grad"], case["dtype"],
                                       tr["grad_shape"])
            if not ok:
                return f"rank {r}: gradient differs at local index {k}: dtr {x}, PyTorch {y}"
            stats["grad_elems"] += len(dr["grad_out"]) // ELEM_BYTES[case["dtype"]]
    stats["grads_compared"] += "grad" in t[0]
    stats["bwd_casts"] += "grad" in t[0] and "bdt" in case
    return None


def run_direction(torch, pools, dtr, case, src, dst, stats):
    t0 = time.time()
    lay = {"src": dtr_layout(dtr, case, src), "dst": dtr_layout(dtr, case, dst)}
    t1 = time.time()
    # dtr refuses a _StridedShard whose pieces are strided for this shape: PyTorch's layout
    # must then differ from the order's somewhere (PyTorch's layouts alone: its
    # redistribution of such a tensor may abort).
    for key, pl in (("src", src), ("dst", dst)):
        if not isinstance(lay[key], list) and "is not the shard order" in lay[key]["error"]:
            order = dtr_layout(dtr, case, dtr_text(pl, case["mesh"]))
            if not isinstance(order, list):
                return "DISAGREE", f"dtr layout of the order failed: {order['error']}"
            arg = {"mesh": case["mesh"], "shape": case["shape"], "src": src, "dst": dst}
            t = pools[case["world"]].run("layouts_only", [arg] * case["world"])
            if all(t[r].get(f"layout_{key}") == order[r] for r in range(case["world"])):
                return "DISAGREE", (f"dtr refused {','.join(pl)} as strided, but PyTorch's "
                                    f"layout is the order's on every rank")
            return "known:dtr-refuses-strided-pieces", None
    d = dtr_run(dtr, case, src, dst)
    t2 = time.time()
    moves_only = all(s == x or not (is_partial(s) or is_partial(x)) for s, x in zip(src, dst))
    view_u8 = case["dtype"].startswith("f8") and moves_only

    def torch_run(d):
        args = []
        for r in range(case["world"]):
            b = d["bufs"][r] if "bufs" in d else {}
            args.append({"mesh": case["mesh"], "shape": case["shape"], "dtype": case["dtype"],
                         "to": case.get("to"), "bdt": case.get("bdt"),
                         "src": src, "dst": dst, "view_u8": view_u8, "in": b.get("in"),
                         "grad": b.get("grad_in")})
        t = pools[case["world"]].run("redistribute_case", args)
        if stats.get("tamper"):  # --tamper: the checker must notice this
            for r in t:
                if r.get("out"):
                    r["out"] = r["out"][:-1] + bytes([r["out"][-1] ^ 0x40])
                    break
        return t
    strided = any(p.startswith("_S") for p in src + dst)

    def torch_died(e, d):
        # gloo aborts a rank's process on a collective size mismatch; the pool is gone.
        pools.pop(case["world"], None)
        if d["rc"] != 0 and case["strategy"] == "compat":  # (compat refused: optimal's run)
            d = dtr_run(dtr, dict(case, strategy="optimal"), src, dst)
        if strided and d["rc"] == 0 and d["json"].get("verified") is True:
            return "known:torch-strided-crash", str(e)
        return "DISAGREE", f"PyTorch hung or died: {e}"
    try:
        t = torch_run(d)
    except TimeoutError as e:
        return torch_died(e, d)
    stats["time_layout"] += t1 - t0
    stats["time_dtr_run"] += t2 - t1
    stats["time_torch"] += time.time() - t2
    # Layouts: every rank, both specs, whatever happened to the redistribution.
    for key, pl in (("src", src), ("dst", dst)):
        if not isinstance(lay[key], list):
            return "DISAGREE", f"dtr layout {','.join(pl)} failed: {lay[key]['error']}"
        for r in range(case["world"]):
            mine = t[r].get(f"layout_{key}")
            if mine != lay[key][r]:
                return "DISAGREE", (f"layout {','.join(pl)} rank {r}: dtr (shape, offset) "
                                    f"{lay[key][r]}, PyTorch {mine}")
        stats["layouts"] += case["world"]
    cat, detail = classify(case, src, dst, d, t)
    if stats.get("show"):
        show_values(torch, case, d, t)
    if cat == "rerun-optimal":
        known = detail
        d = dtr_run(dtr, dict(case, strategy="optimal"), src, dst)
        if d["rc"] != 0 and "with a shard order other than mesh-dim order is not planned yet" \
                in d["stderr"]:
            return "known:dtr-no-ordered-zero-fill", d["stderr"]
        if d["rc"] != 0:
            return "DISAGREE", f"compat refused and optimal failed: {d['stderr']}"
        try:
            t = torch_run(d)  # on the same inputs as dtr's optimal run (it ran on zeros)
        except TimeoutError as e:
            return torch_died(e, d)
        if stats.get("show"):
            show_values(torch, case, d, t)
        detail = compare_ran(torch, case, d, t, lay, stats)
        if detail is None:
            count_kinds(case, src, dst, stats)
        return ("known:" + known, None) if detail is None \
            else ("DISAGREE", "optimal instead of compat: " + detail)
    if cat == "compared":
        detail = compare_ran(torch, case, d, t, lay, stats)
        if detail is not None and detail.startswith("known:"):
            cat, detail = detail, None
        elif detail is not None:
            cat = "DISAGREE"
        else:
            count_kinds(case, src, dst, stats)
    return cat, detail


def count_kinds(case, src, dst, stats):
    """A direction compared (directly or through compat's optimal rerun): what it had."""
    stats["zero_fills"] += any(is_shard(s) and is_partial(x) and n > 1
                               for s, x, n in zip(src, dst, case["mesh"]))
    stats["orders"] += any("[" in p for p in dtr_text(src, case["mesh"]) +
                           dtr_text(dst, case["mesh"]))
    stats["casts"] += "to" in case
    stats["random_casts"] += random_fill(case, src, dst)


def parse_case(text):
    """'MESH SHAPE DTYPE FROM TO [STRATEGY]' (--case) as gen_case's dict."""
    f = text.split()
    if len(f) not in (5, 6):
        raise ValueError(f"{text!r}: want 'MESH SHAPE DTYPE FROM TO [STRATEGY]'")
    mesh = [int(x) for x in f[0].split("x")]
    shape = [] if f[1] == "-" else [int(x) for x in f[1].split("x")]
    if f[2] not in DTYPES:
        raise ValueError(f"{text!r}: dtype {f[2]!r} is not one of {' '.join(DTYPES)}")
    top = re.compile(r",(?![^()]*\))")
    a, b = top.split(f[3]), top.split(f[4])
    if len(a) != len(mesh) or len(b) != len(mesh):
        raise ValueError(f"{text!r}: want {len(mesh)} placements on each side")
    strategy = f[5] if len(f) == 6 else "optimal"
    if strategy not in ("optimal", "compat"):
        raise ValueError(f"{text!r}: strategy {strategy!r} is not optimal or compat")
    world = 1
    for m in mesh:
        world *= m
    return {"world": world, "mesh": mesh, "shape": shape, "dtype": f[2], "a": a, "b": b,
            "strategy": strategy}


def describe(case, src, dst):
    return (f"world {case['world']}, mesh {text_mesh(case['mesh'])}, shape "
            f"{text_shape(case['shape'])} {case['dtype']}"
            f"{' to ' + case['to'] if 'to' in case else ''}"
            f"{', backward in ' + case['bdt'] if 'bdt' in case else ''}, "
            f"{','.join(src)} -> {','.join(dst)}, "
            f"{case['strategy']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtr", required=True, help="the dtr binary")
    ap.add_argument("--cases", type=int, default=2000, help="random cases (default 2000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--ranks", default="4,8", help="world sizes to draw from (default 4,8)")
    ap.add_argument("--only", type=int, default=None, help="run only case K (as numbered)")
    ap.add_argument("--json", default=None, help="write the summary as JSON here")
    ap.add_argument("--casts", action="store_true",
                    help="cast half the float and complex cases to another dtype of their "
                         "family (PyTorch's forward_dtype, dtr's --to-dtype)")
    ap.add_argument("--zero-fill", action="store_true",
                    help="draw many Shard -> Partial(sum) changes (half the Shard mesh dims)")
    ap.add_argument("--orders", action="store_true",
                    help="draw shard orders (as PyTorch's _StridedShard) on one side or both")
    ap.add_argument("--case", action="append", default=[], metavar="'MESH SHAPE DTYPE FROM TO "
                    "[STRATEGY]'", help="run this case instead of random ones (repeatable), e.g. "
                    "'2x2x2 6x3 f32 S(0),R,S(0) R,S(0),S(0) compat'; SHAPE '-' for a scalar")
    ap.add_argument("--tamper", action="store_true",
                    help="the checker's own test: flip one byte of PyTorch's result on the "
                         "first non-empty rank of every direction that ran; every such "
                         "direction must then be reported as a disagreement")
    args = ap.parse_args()
    if args.cases < 1:
        ap.error("--cases: want a count >= 1")
    worlds = [int(w) for w in args.ranks.split(",")]
    if any(w < 1 or w > 64 for w in worlds):
        ap.error("--ranks: want world sizes 1..64, e.g. 4,8")
    import torch
    dtr = os.path.abspath(args.dtr)
    rng = random.Random(args.seed)
    if args.case:
        try:
            cases = [parse_case(t) for t in args.case]
        except ValueError as e:
            ap.error(f"--case: {e}")
    else:
        cases = [gen_case(rng, worlds, args.zero_fill, args.casts, args.orders)
                 for _ in range(args.cases)]
    todo = range(len(cases)) if args.only is None else [args.only]
    print(f"conformance: seed {args.seed}, {len(todo)} cases, worlds {worlds}, "
          f"torch {torch.__version__}, dtr {dtr}", flush=True)
    pools = {}
    stats = {"layouts": 0, "fwd_elems": 0, "grad_elems": 0, "grads_compared": 0, "zero_fills": 0,
             "orders": 0,
             "cast_elems": 0, "casts": 0, "bwd_casts": 0, "random_casts": 0,
             "time_layout": 0.0, "time_dtr_run": 0.0, "time_torch": 0.0,
             "show": args.only is not None, "tamper": args.tamper}
    counts = {}
    bad = []
    start = time.time()
    for n, k in enumerate(todo):
        case = cases[k]
        for src, dst in ((case["a"], case["b"]), (case["b"], case["a"])):
            w = case["world"]
            if w not in pools:
                pools[w] = Pool(w, "conformance", deadline_s=90)
            try:
                cat, detail = run_direction(torch, pools, dtr, case, src, dst, stats)
            except TimeoutError as e:
                pools.pop(w, None)
                cat, detail = "DISAGREE", f"PyTorch hung: {e}"
            counts[cat] = counts.get(cat, 0) + 1
            if cat == "DISAGREE" or args.only is not None:
                line = f"case {k}: {describe(case, src, dst)}: {cat}: {detail}"
                print(line, flush=True)
                if cat == "DISAGREE":
                    bad.append({"case": k, "what": describe(case, src, dst), "detail": detail,
                                "rerun": " ".join(dtr_run_cmd("dtr", case, src, dst, "DIR"))})
        if (n + 1) % 100 == 0:
            print(f"  {n + 1} cases, {time.time() - start:.0f} s: {counts}", flush=True)
    for p in pools.values():
        p.close()
    total = sum(counts.values())
    print(f"\n{len(todo)} cases, {total} directions, {time.time() - start:.0f} s")
    print(f"  both ran, compared:  {counts.get('compared', 0)} directions (and the optimal "
          f"reruns of compat's refusals): layouts of "
          f"{stats['layouts']} rank-specs, {stats['fwd_elems']} result elements, "
          f"{stats['grad_elems']} gradient elements ({stats['grads_compared']} directions "
          f"with a gradient, {stats['zero_fills']} with a Shard -> Partial(sum) zero fill, "
          f"{stats['casts']} casting to another dtype: {stats['cast_elems']} result elements, "
          f"{stats['orders']} with a shard order, {stats['bwd_casts']} gradients compared "
          f"through a backward_dtype, {stats['random_casts']} casting directions on random "
          f"values)")
    print(f"  both refused:        {counts.get('both-refused', 0)}")
    for key, (who, why) in KNOWN.items():
        c = counts.get("known:" + key, 0)
        print(f"  known difference {key}: {c} ({who}: {why})")
    print(f"  unexplained disagreements: {len(bad)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "cases": len(todo), "directions": total,
                       "torch": torch.__version__, "counts": counts,
                       "stats": {k: v for k, v in stats.items() if k not in ("show", "tamper")},
                       "disagreements": bad,
                       "known": {k: {"who": w, "why": y} for k, (w, y) in KNOWN.items()}},
                      f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
