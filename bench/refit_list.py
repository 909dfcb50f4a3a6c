#!/usr/bin/env python3
"""A model-sized --batch list for planning benchmarks of changes between meshes: N bf16
matrices of a few DeepSeek-V3-like shapes (7168x18432, 18432x7168, 7168x7168, 1536x7168,
7168x2048, 2048x7168), each with one of three placement pairs for a 2-d source and a 2-d
destination mesh, drawn with a seed (the same list for the same arguments).

    python3 bench/refit_list.py --tensors 2000 --seed 1 > /tmp/refit2000.json
    dtr plan --mesh 16x16 --ranks 0,...,255 --to-mesh 8x16 --to-ranks 256,...,383 \\
        --batch /tmp/refit2000.json

With --model deepseek-v3, DeepSeek-V3's own matrices in model order instead (no draw), the
list bench/cross_plan_bench.c builds: the embedding 129280x7168; per layer attention q_a
1536x7168, q_b 24576x1536, kv_a 576x7168, kv_b 32768x512, o 7168x16384; the first 3 layers
a dense MLP (18432x7168, 18432x7168, 7168x18432), the others 256 routed experts and a
shared one (gate and up 2048x7168, down 7168x2048), layers repeated until N. The experts go
S(0),R -> R,S(1); the others S(0),S(1) -> S(1),S(0) and S(1),R -> S(0),S(1) in turn.
"""
import argparse
import json
import random

SHAPES = [(7168, 18432), (18432, 7168), (7168, 7168), (1536, 7168), (7168, 2048), (2048, 7168)]
PAIRS = [("S(0),S(1)", "S(1),S(0)"), ("S(1),R", "S(0),S(1)"), ("R,S(0)", "S(1),R")]


def deepseek_v3(n):
    attn = [(1536, 7168), (24576, 1536), (576, 7168), (32768, 512), (7168, 16384)]
    dense = [(18432, 7168), (18432, 7168), (7168, 18432)]
    expert = [(2048, 7168), (2048, 7168), (7168, 2048)]
    out, other = [], [0]

    def put(shape, src, dst):
        if len(out) < n:
            out.append({"shape": f"{shape[0]}x{shape[1]}", "dtype": "bf16", "from": src, "to": dst})

    def put_other(shape):
        src, dst = PAIRS[other[0] % 2]
        put(shape, src, dst)
        other[0] += 1

    put_other((129280, 7168))
    layer = 0
    while len(out) < n:
        for shape in attn:
            put_other(shape)
        if layer % 61 < 3:
            for shape in dense:
                put_other(shape)
        else:
            for _ in range(257):  # 256 routed experts and the shared one
                for shape in expert:
                    put(shape, "S(0),R", "R,S(1)")
        layer += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensors", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", choices=["drawn", "deepseek-v3"], default="drawn")
    args = ap.parse_args()
    if args.tensors < 1:
        ap.error(f"--tensors: {args.tensors}, at least 1")
    if args.model == "deepseek-v3":
        print(json.dumps(deepseek_v3(args.tensors)))
        return
    rng = random.Random(args.seed)
    out = []
    for _ in range(args.tensors):
        rows, cols = rng.choice(SHAPES)
        src, dst = rng.choice(PAIRS)
        out.append({"shape": f"{rows}x{cols}", "dtype": "bf16", "from": src, "to": dst})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
