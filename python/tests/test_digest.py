"""dtr.digest, proof of delivery: the digest of a tensor computed here in Python from the whole
array (an implementation apart from dtr's C) equals dtr.digest from every rank's block, for
seeded random meshes over the job's ranks, shapes (empty dims, uneven shards), dtypes and
placements; it is the same before and after dtr.redistribute moves the tensor (within a mesh
and between meshes); a Partial placement and one rank's wrong block are refused on every
rank, which then stay in step. Under mpirun the backend is mpi; under tools/dtr_launch.sh set
DTR_PY_BACKEND=gloo (as test_parity.py)."""
import random

import numpy as np
import pytest

import dtr
from test_parity import NP, draw_mesh, mesh, world

M = (1 << 64) - 1
DTYPES = ["f32", "f64", "f16", "i32", "i64", "u8"]


def fmix(k):
    k ^= k >> 33
    k = (k * 0xff51afd7ed558ccd) & M
    k ^= k >> 33
    k = (k * 0xc4ceb9fe1a85ec53) & M
    return k ^ (k >> 33)


def mix(i, lo, hi=0):
    return fmix(fmix((i + 0x9e3779b97f4a7c15) & M) ^ lo ^ ((hi * 0xc2b2ae3d27d4eb4f) & M))


def whole(full):
    """The digest of the whole array: each element's bytes as a little-endian integer."""
    raw = np.ascontiguousarray(full).view(np.uint8).reshape(-1, full.itemsize)
    words = [int.from_bytes(row.tobytes(), "little") for row in raw]
    return sum(mix(i, w & M, w >> 64) for i, w in enumerate(words)) & M


def block(full, m, placements):
    """This rank's block of full placed by placements on m (None off the mesh)."""
    rank = world()[0]
    for b in dtr.layout(m, full.shape, placements, str(full.dtype)):
        if b.rank == rank:
            return full[tuple(slice(o, o + n) for o, n in zip(b.global_offset, b.local_shape))].copy()
    return None


def test_mix_matches_an_independent_implementation():
    # the values digest_test.c pins in C
    assert mix(0, 0) == 0x6393d51c06c618dc
    assert mix(12345, 0x3f800000) == 0x088f48bb16ced2b4
    assert mix(1 << 40, M, 7) == 0x47b945d997d8f2cf
    m = mesh((1,), [world()[0]])
    assert dtr.digest(np.arange(6, dtype=np.float32).reshape(2, 3), m, "R") == 0x9acff5dc88aef4a3


def draw(rng, n):
    shape, ranks = draw_mesh(rng, n)
    nd = rng.randint(0, 3)
    tshape = tuple(rng.choice([0, 1, 2, 3, 5, 7, 16]) for _ in range(nd))
    placements = ",".join(f"S({rng.randrange(nd)})" if nd and rng.random() < 0.7 else "R"
                          for _ in shape)
    return shape, ranks, tshape, rng.choice(DTYPES), placements


def test_the_same_in_every_layout(seed):
    rank, n = world()
    rng = random.Random(seed)
    for case in range(40):
        shape, ranks, tshape, dt, placements = draw(rng, n)
        full = np.random.default_rng([seed, case]).integers(0, 200, size=tshape).astype(NP[dt])
        m = mesh(shape, ranks)
        got = dtr.digest(block(full, m, placements), m, placements, shape=tshape)
        want = whole(full) if rank in ranks else None
        assert got == want, (f"case {case} (seed {seed}): mesh {shape} {ranks} {placements} "
                             f"shape {tshape} {dt}: {got} != {want}")


def test_the_same_after_a_move(seed):
    rank, n = world()
    full = np.random.default_rng(seed).standard_normal((9, 5)).astype(np.float32)
    want = whole(full)
    a = mesh((n,), list(range(n)))
    before = dtr.digest(block(full, a, "S(0)"), a, "S(0)", shape=full.shape)
    moved = dtr.redistribute(block(full, a, "S(0)"), a, "S(0)", "S(1)", shape=full.shape)
    after = dtr.digest(moved, a, "S(1)", shape=full.shape)
    assert before == after == want
    # between meshes: to the ranks in reverse order, replicated
    b = mesh((n,), list(reversed(range(n))))
    out = dtr.redistribute(block(full, a, "S(0)"), a, "S(0)", "R", shape=full.shape, to_mesh=b)
    assert dtr.digest(out, b, "R", shape=full.shape) == want
    # a delivery that went wrong on b's first member (the one that counts a replica): every
    # rank's digest differs; on another member, a copy the digest does not cover: the same
    for wrong in {n - 1, 0}:
        copy = out.copy()
        if rank == wrong:
            copy[0, 0] += 1
        flipped = dtr.digest(copy, b, "R", shape=full.shape)
        assert (flipped != want) == (wrong == n - 1), (wrong, flipped, want)


def test_refused_on_every_rank_then_in_step():
    rank, n = world()
    m = mesh((n,), list(range(n)))
    full = np.arange(4 * n * 3, dtype=np.float32).reshape(4 * n, 3)
    with pytest.raises(dtr.ArgumentError, match="a Partial placement .* has no values to digest"):
        dtr.digest(full, m, "P")
    if n > 1:
        bad = block(full, m, "S(0)")[:1] if rank == 1 else block(full, m, "S(0)")
        with pytest.raises(dtr.Error) as e:
            dtr.digest(bad, m, "S(0)", shape=full.shape)
        if rank == 1:
            assert isinstance(e.value, dtr.ArgumentError) and "local:" in str(e.value)
        else:
            assert "rank 1" in str(e.value)
    assert dtr.digest(block(full, m, "S(0)"), m, "S(0)", shape=full.shape) == whole(full)
    # an uneven split without shape=: each rank infers an even one from its own block (4n - 1
    # rows: the last rank's block is one row short), so the specs differ; every rank refuses
    # (no wrong digest), and the next call is in step
    if n > 1:
        uneven = full[: 4 * n - 1]
        with pytest.raises(dtr.ArgumentError, match="the mesh's ranks gave different specs"):
            dtr.digest(block(uneven, m, "S(0)"), m, "S(0)")
        assert dtr.digest(block(uneven, m, "S(0)"), m, "S(0)", shape=uneven.shape) == whole(uneven)
