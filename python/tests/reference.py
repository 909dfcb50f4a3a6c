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
    current block's dim d, in mesh-dim order; a ragged S(d){n0,n1,...} gives coordinate c
    n_c after the sum of those before it; Replicate and Partial keep it."""
    lo = [0] * len(shape)
    size = list(shape)
    for i, p in enumerate(placements):
        p = str(p)
        if p.startswith("S("):
            head, _, sizes = p.partition("{")
            d = int(head[2:-1]) % len(shape)
            if sizes:
                sizes = [int(x) for x in sizes.rstrip("}").split(",")]
                assert sum(sizes) == size[d], (p, size[d])
                off, n = sum(sizes[:coord[i]]), sizes[coord[i]]
            else:
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


def quantize_blocks(full, block, fp8):
    """Block-scaled fp8 as DeepSeek-V3's weights (docs/cross-mesh.md, "Block-scaled fp8"),
    written with numpy and ml_dtypes alone: the values in f32, one scale per block x block
    tile of the last two dims (block elements of a 1-D tensor) = the tile's largest |x| /
    448 (f8e4m3) or 57344 (f8e5m2), each value divided by its tile's scale and rounded to
    nearest even by ml_dtypes (a tile of zeros: scale 0, its zeros kept). Returns (q, scales)."""
    import ml_dtypes
    x = np.asarray(full, dtype=np.float32)
    top = np.float32(448.0 if fp8 == "f8e4m3" else 57344.0)
    kind = ml_dtypes.float8_e4m3fn if fp8 == "f8e4m3" else ml_dtypes.float8_e5m2
    lead = max(x.ndim - 2, 0)
    sshape = x.shape[:lead] + tuple(-(-n // block) for n in x.shape[lead:])
    amax = np.zeros(sshape, np.float32)
    for idx in np.ndindex(*sshape):
        tile = tuple(slice(i, i + 1) if k < lead else slice(i * block, (i + 1) * block)
                     for k, i in enumerate(idx))
        part = x[tile]
        amax[idx] = np.abs(part).max() if part.size else 0
    scales = (amax / top).astype(np.float32)
    per = scales
    for k in range(lead, x.ndim):  # each element's scale
        per = np.repeat(per, block, axis=k)[tuple(slice(0, n) if j == k else slice(None)
                                                  for j, n in enumerate(x.shape))]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(per == 0, x, x / np.where(per == 0, 1, per)).astype(np.float32)
    return q.astype(kind), scales
