#!/usr/bin/env python3
"""Checks that two builds of the CLI print the same plans, byte for byte.

usage: tools/plan_diff.py BEFORE AFTER [--cases N] [--seed S] [--show K] [--large | --cluster]

BEFORE and AFTER are two `dtr` executables (say, one built at the commit before a
restructuring and one after). Each case is a random change (mesh, shape, dtype, source and
target placements, strategy, cost model) that both run as `dtr plan ... --compare --json`
or `--strategy ... --json`; their stdout, stderr and exit status must be equal. Meshes of
1 to 4 dims; a third of the shapes even (a multiple of the mesh's size, where the planner
counts classes of ranks instead of visiting each); a fifth of the changes a balanced
reduction (P -> S(d) under later shards of d), some with shard orders. Prints the
seed, the number of cases, how many planned, were refused or were bad input, and every
differing case with its command line (at most --show of them). Exit status 0 when all
agree, 1 when any differs, 2 for bad arguments.

--large draws meshes of up to about 20,000 ranks with dims of up to 300 and tensor dims of
up to 200,000, mostly uneven, where the planner's per-rank loops and balanced reductions
over hundreds of members run (slower: seconds a case with an old build).

--cluster draws changes on the eight meshes of 65,536 ranks of `plan_bench --sweep`, on its
uneven shape 196609x131071x65553 (Shard, Replicate and Partial(sum), a third of the Partial
dims kept), with the default cost model or a random one: where the per-rank tables, the
kept tables and the bounded candidates of the optimal strategy do their work.

Rerun: bazel build //cli:dtr && cp bazel-bin/cli/dtr /tmp/dtr.after, the same at the
older commit into /tmp/dtr.before, then tools/plan_diff.py /tmp/dtr.before /tmp/dtr.after.
"""
import argparse
from math import prod
import random
import subprocess
import sys

OPS = ["sum", "avg", "max", "min"]
DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8"]


def placement(rng, ndim, partial):
    r = rng.random()
    if r < 0.55 and ndim > 0:
        return "S(%d)" % rng.randrange(ndim)
    if r < 1 - partial:
        return "R"
    return "P(%s)" % rng.choice(OPS)


def orders(rng, pl):
    """Random shard orders on the tensor dims that several mesh dims shard."""
    out = list(pl)
    for d in range(8):
        idx = [i for i, p in enumerate(pl) if p == "S(%d)" % d]
        perm = list(range(len(idx)))
        rng.shuffle(perm)
        for i, o in zip(idx, perm):
            if len(idx) > 1:
                out[i] = "S(%d)[%d]" % (d, o)
    return out


def case(rng, large=False):
    mdims = rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
    mesh = [rng.choice([1, 2, 2, 3, 4, 6] if mdims <= 2 else [1, 2, 2, 3, 4]) for _ in range(mdims)]
    if large:
        sizes = [2, 3, 5, 7, 16, 17, 33, 64, 100, 128, 300]
        mesh = [rng.choice(sizes) for _ in range(mdims)]
        while prod(mesh) > 20000:
            mesh[rng.randrange(mdims)] = rng.choice([2, 3, 4])
    ndim = rng.choice([1, 2, 2, 3])
    ranks = prod(mesh)
    if rng.random() < (1 / 6 if large else 1 / 3):
        shape = [ranks * rng.choice([1, 2, 3, 5]) for _ in range(ndim)]
    elif large:
        shape = [rng.choice([1, 7, 100, 1000, 4099, 65537, 196609]) + rng.randrange(300)
                 for _ in range(ndim)]
    else:
        shape = [rng.choice([1, 2, 3, 5, 7, 8, 12, 13, 16, 64, 100, 1000]) for _ in range(ndim)]
    src = [placement(rng, ndim, 0.3) for _ in range(mdims)]
    dst = [placement(rng, ndim, 0.08) for _ in range(mdims)]
    # keep the Partial ops of the source where the target keeps a Partial, so that most
    # changes are valid (an invalid one is still a case: both must refuse it alike)
    if rng.random() < 0.8:
        for i in range(mdims):
            if src[i].startswith("P") and dst[i].startswith("P"):
                dst[i] = src[i]
    r = rng.random()
    if r < 0.2 and mdims >= 2:  # a balanced reduction: P -> S(d) under later shards of d
        i, d = rng.randrange(mdims - 1), rng.randrange(ndim)
        dst = list(src)
        src[i], dst[i] = "P(%s)" % rng.choice(OPS), "S(%d)" % d
        for j in range(i + 1, mdims):
            if rng.random() < 0.5:
                src[j] = dst[j] = "S(%d)" % d
    elif r < 0.35:
        src, dst = orders(rng, src), orders(rng, dst)
    args = ["plan", "--mesh", "x".join(map(str, mesh)), "--shape", "x".join(map(str, shape)),
            "--dtype", rng.choice(DTYPES), "--from", ",".join(src), "--to", ",".join(dst),
            "--json"]
    r = rng.random()
    if r < 0.5:
        args.append("--compare")
    elif r < 0.6:
        args += ["--strategy", "compat"]
    if rng.random() < 0.3:
        args += ["--alpha-us", ",".join(str(rng.choice([1, 5, 20])) for _ in range(mdims))]
        args += ["--bandwidth-gbps", ",".join(str(rng.choice([1, 10, 100])) for _ in range(mdims))]
    return args


CLUSTER_MESHES = ["65536", "256x256", "32768x2", "16x64x64", "16x16x16x16", "8x8x8x8x16",
                  "4x4x4x4x4x4x4x4", "2x4x2x8x4x4x4x4"]


def cluster_case(rng):
    mesh = rng.choice(CLUSTER_MESHES)
    mdims = len(mesh.split("x"))
    src, dst = [], []
    for _ in range(mdims):
        a, b = rng.randrange(6), rng.randrange(5)
        src.append("S(%d)" % a if a < 3 else "R" if a == 3 else "P")
        dst.append("S(%d)" % b if b < 3 else "R")
        if src[-1] == "P" and rng.randrange(3) == 0:
            dst[-1] = "P"
    if rng.random() < 0.2:
        src, dst = orders(rng, src), orders(rng, dst)
    args = ["plan", "--mesh", mesh, "--shape", "196609x131071x65553", "--from", ",".join(src),
            "--to", ",".join(dst), "--json"]
    if rng.random() < 0.3:
        args += ["--alpha-us", ",".join(str(rng.choice([1, 5, 20])) for _ in range(mdims))]
        args += ["--bandwidth-gbps", ",".join(str(rng.choice([1, 10, 100])) for _ in range(mdims))]
    return args


def run(exe, args):
    p = subprocess.run([exe] + args, capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--large", action="store_true", help="meshes of up to ~20,000 ranks, uneven shapes")
    ap.add_argument("--cluster", action="store_true",
                    help="plan_bench --sweep's meshes of 65,536 ranks, uneven shape")
    a = ap.parse_args()
    if a.large and a.cluster:
        ap.error("--large and --cluster: pick one")
    if a.cases < 1:
        ap.error("--cases: must be >= 1")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    counts = {0: 0, 1: 0, 2: 0}
    bad = []
    for _ in range(a.cases):
        args = cluster_case(rng) if a.cluster else case(rng, a.large)
        b, n = run(a.before, args), run(a.after, args)
        counts[b[0]] = counts.get(b[0], 0) + 1
        if b != n:
            bad.append((args, b, n))
    print("seed %d: %d cases (%d planned, %d refused, %d bad input), %d differ"
          % (seed, a.cases, counts[0], counts[1], counts[2], len(bad)))
    for args, b, n in bad[:a.show]:
        print("differs: dtr " + " ".join("'%s'" % x for x in args))
        print("  before: exit %d\n%s%s" % (b[0], b[1].decode(), b[2].decode()))
        print("  after:  exit %d\n%s%s" % (n[0], n[1].decode(), n[2].decode()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
