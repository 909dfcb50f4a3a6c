#!/usr/bin/env python3
"""A model-sized --batch list for planning benchmarks of changes between meshes: N bf16
matrices of a few DeepSeek-V3-like shapes (7168x18432, 18432x7168, 7168x7168, 1536x7168,
7168x2048, 2048x7168), each with one of three placement pairs for a 2-d source and a 2-d
destination mesh, drawn with a seed (the same list for the same arguments).

    python3 bench/refit_list.py --tensors 2000 --seed 1 > /tmp/refit2000.json
    dtr plan --mesh 16x16 --ranks 0,...,255 --to-mesh 8x16 --to-ranks 256,...,383 \\
        --batch /tmp/refit2000.json
"""
import argparse
import json
import random

SHAPES = [(7168, 18432), (18432, 7168), (7168, 7168), (1536, 7168), (7168, 2048), (2048, 7168)]
PAIRS = [("S(0),S(1)", "S(1),S(0)"), ("S(1),R", "S(0),S(1)"), ("R,S(0)", "S(1),R")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensors", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.tensors < 1:
        ap.error(f"--tensors: {args.tensors}, at least 1")
    rng = random.Random(args.seed)
    out = []
    for _ in range(args.tensors):
        rows, cols = rng.choice(SHAPES)
        src, dst = rng.choice(PAIRS)
        out.append({"shape": f"{rows}x{cols}", "dtype": "bf16", "from": src, "to": dst})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
