#!/usr/bin/env python3
"""Seeded random cases for `dtr grad --model` (tests/cli/cli_grad_model_random.sh).

Each case is a model file as users write them (1-12 parameters of 1 to about 100,000
elements, 1-3 dims, shapes as "AxB" text or as [A, B] arrays, parameters in shared groups,
groups of their own and no group) and a run of it: mode, reduce dtype, microbatches, ranks
(2 or 4) and mesh. Usage: grad_models.py SEED CASES DIR prints one line a case,
"INDEX RANKS MODE MESH DTYPE MICROBATCHES FILE", and writes FILE under DIR.
"""
import json
import os
import random
import sys


def shape(rng):
    numel = max(1, int(round(10 ** rng.uniform(0, 5))))  # 1 .. 100,000, log-uniform
    lead = [rng.choice([1, 2, 3, 4, 7, 8, 16, 64]) for _ in range(rng.randint(0, 2))]
    rest = numel
    for d in lead:
        rest = max(1, rest // d)
    dims = lead + [rest]  # 1-3 dims, the last one long (rows of a weight, a bias)
    if rng.random() < 0.08:
        dims[rng.randrange(len(dims))] = 0  # an empty parameter now and then
    return dims


def model(rng):
    params = []
    shared = ["h.%d" % k for k in range(rng.randint(1, 3))]
    for i in range(rng.randint(1, 12)):
        dims = shape(rng)
        text = rng.random() < 0.5
        p = {"shape": "x".join(map(str, dims)) if text else dims}
        kind = rng.random()
        if kind < 0.5:
            p["group"] = rng.choice(shared)
        elif kind < 0.75:
            p["group"] = "solo.%d" % i
        params.append(p)  # else: no group (a group of its own)
    return params


def mesh(rng, mode, ranks):
    if mode == "hsdp" or rng.random() < 0.3:
        a = rng.choice([d for d in (1, 2, 4) if ranks % d == 0 and (mode != "hsdp" or d < ranks or ranks == 1)])
        return "%dx%d" % (a, ranks // a)
    return str(ranks)


def main():
    seed, cases, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    for i in range(cases):
        mode = ("ddp", "fsdp", "hsdp")[i % 3]  # every mode in turn, the rest drawn
        ranks = rng.choice((2, 4))
        dtype = rng.choice(("f32", "bf16", "f16"))
        micro = rng.randint(1, 3)
        path = os.path.join(out, "model%d.json" % i)
        with open(path, "w") as f:
            json.dump(model(rng), f)
        print(i, ranks, mode, mesh(rng, mode, ranks), dtype, micro, path)


if __name__ == "__main__":
    main()
