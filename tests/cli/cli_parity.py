#!/usr/bin/env python3
"""The parity cases through the CLI: seeded random changes in every form (one tensor, a
batch, between meshes, a batch between meshes), each run by `dtr run --fill random --verify`
on the backend named, which checks every element on every rank against its own reference.

usage: cli_parity.py DTR LAUNCHER BACKEND [--cases N] [--seed S] [--ranks N]
  LAUNCHER  "mpirun --oversubscribe" (backend mpi) or "bash tools/dtr_launch.sh" (gloo)
Draws the shapes users have: empty dims and one element beside uneven larger shards, meshes
of 1 or 2 dims on any subset of the ranks in any order, Partial sources of every op, every
dtype. Prints each failing case's command (to rerun it) and ends with
"cli parity (BACKEND): N passed, N failed".
"""
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile

DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8"]
OPS = ["sum", "avg", "max", "min", "product"]
DIMS = [0, 1, 2, 3, 5, 7, 16, 33]


def draw_mesh(rng, n):
    size = rng.randint(1, n)
    shape = [size]
    if size >= 4 and size % 2 == 0 and rng.random() < 0.5:
        shape = [2, size // 2]
    return "x".join(map(str, shape)), len(shape), rng.sample(range(n), size)


def placements(rng, nd, mdims, partial):
    op = rng.choice(OPS)

    def one():
        r = rng.random()
        if partial and r < 0.3:
            return f"P({op})"
        return f"S({rng.randrange(nd)})" if r < 0.7 else "R"

    return ",".join(one() for _ in range(mdims))


def tensor(rng, mdims, to_mdims):
    nd = rng.randint(1, 3)
    shape = [rng.choice(DIMS[:4] if rng.random() < 0.5 else DIMS) for _ in range(nd)]
    return {"shape": shape, "dtype": rng.choice(DTYPES),
            "from": placements(rng, nd, mdims, True), "to": placements(rng, nd, to_mdims, False)}


def case_args(rng, form, n, tmp, k):
    """The `dtr run` arguments of one case of `form`."""
    mesh, mdims, ranks = draw_mesh(rng, n)
    args = ["--mesh", mesh, "--ranks", ",".join(map(str, ranks))]
    to_mdims = mdims
    if form.startswith("cross"):
        to_mesh, to_mdims, to_ranks = draw_mesh(rng, n)
        args += ["--to-mesh", to_mesh, "--to-ranks", ",".join(map(str, to_ranks))]
        if rng.random() < 0.3:
            args += ["--staging-cap", str(8 << rng.randrange(8))]
        if rng.random() < 0.3:
            args += ["--nonblocking"]
    if form.endswith("batch"):
        path = os.path.join(tmp, f"batch{k}.json")
        with open(path, "w") as f:
            json.dump([tensor(rng, mdims, to_mdims) for _ in range(rng.randint(1, 5))], f)
        return args + ["--batch", path]
    t = tensor(rng, mdims, to_mdims)
    args += ["--shape", "x".join(map(str, t["shape"])), "--dtype", t["dtype"], "--from", t["from"],
             "--to", t["to"]]
    if form == "one" and rng.random() < 0.3:
        args += ["--nonblocking"]
    return args


def main():
    argv = sys.argv[1:]
    if len(argv) < 3:
        sys.exit(__doc__)
    dtr, launcher, backend = argv[0], shlex.split(argv[1]), argv[2]
    opts = dict(zip(argv[3::2], argv[4::2]))
    cases = int(opts.get("--cases", "6"))
    seed = int(opts.get("--seed", os.environ.get("DTR_SEED", "20261129")))
    n = int(opts.get("--ranks", "4"))
    print(f"cli parity: backend {backend}, {n} ranks, seed {seed} (DTR_SEED), {cases} cases a form")
    passed = failed = 0
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               DTR_TIMEOUT_S="60")
    with tempfile.TemporaryDirectory() as tmp:
        for fi, form in enumerate(["one", "batch", "cross", "cross_batch"]):
            for k in range(cases):
                rng = random.Random(seed * 1000003 + fi * 1009 + k)
                args = ["run", "--backend", backend, "--fill", "random", "--seed", str(seed + k),
                        "--verify", "--iters", "0"] + case_args(rng, form, n, tmp, k)
                cmd = launcher + ["-n", str(n), dtr] + args
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
                    ok = p.returncode == 0 and ("verified: all" in p.stdout or
                                                "verified: yes" in p.stdout)
                    why = (p.stderr.strip().splitlines() or ["(no stderr)"])[0]
                except subprocess.TimeoutExpired:
                    ok, why = False, "timed out (120 s)"
                if ok:
                    passed += 1
                    continue
                failed += 1
                batch = [a for a in args if a.endswith(".json")]
                detail = open(batch[0]).read() if batch else ""
                print(f"FAIL {form} case {k}: {shlex.join(cmd)}\n  {why}\n  {detail}")
    print(f"cli parity ({backend}): {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
