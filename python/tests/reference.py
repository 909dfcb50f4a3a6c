"""An independent reference for the tests: PyTorch's chunk rule and nested sharding in
mesh-dim order, written from the definition (docs/semantics.md), not through dtr."""
import numpy as np


def chunk(length, n, r):
    """torch.chunk's piece r of n of a dim of `length`: (offset, size)."""
    c = -(-length // n) if n else 0
    off = min(c * r, length)
    return off, max(0, min(length, c * r + c) - off)


def block(shape, mesh_shape, placements, coord):
    """The slices of the block a rank at `coord` holds: Shard(d) on mesh dim i splits the
    current block's dim d, in mesh-dim order; Replicate and Partial keep it."""
    lo = [0] * len(shape)
    size = list(shape)
    for i, p in enumerate(placements):
        if p.startswith("S("):
            d = int(p[2:-1]) % len(shape)
            off, n = chunk(size[d], mesh_shape[i], coord[i])
            lo[d] += off
            size[d] = n
    return tuple(slice(a, a + n) for a, n in zip(lo, size))


def coords(mesh_shape):
    out = [()]
    for n in mesh_shape:
        out = [c + (k,) for c in out for k in range(n)]
    return out


def local_input(full, mesh_shape, placements, coord, rng):
    """Rank coord's input: its block, split over each Partial(sum) mesh dim into integer
    shares that sum to it exactly (the ranks of that dim draw the same shares: the draw is
    seeded by the other coordinates)."""
    x = full[block(full.shape, mesh_shape, placements, coord)].copy()
    for i, p in enumerate(placements):
        if p.startswith("P"):
            n = mesh_shape[i]
            key = [seed_of(rng), i] + [c for k, c in enumerate(coord) if k != i]
            draw = np.random.default_rng(key).integers(-3, 4, size=(n,) + x.shape).astype(x.dtype)
            if p in ("P", "P(sum)"):
                draw[-1] = x - draw[:-1].sum(axis=0)
            else:  # max: every share at most the value, one of them equal to it
                draw = x - abs(draw)
                draw[-1] = x
            x = draw[coord[i]]
    return x


def seed_of(rng):
    return int(rng) if isinstance(rng, int) else 0
