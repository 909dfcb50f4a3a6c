"""Redistributions on every rank of the job (mpirun -n 1..8): seeded random changes within one
mesh and between two, single, batched and async, numpy arrays of every dtype the data suits,
every element checked against reference.py; and the errors of one rank's bad arrays."""
import numpy as np
import pytest

import dtr
from conftest import SEED, world
from reference import block, coords, local_input, quantize_blocks

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.complex64]


def mesh_shapes(n):
    shapes = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            shapes.append((a, n // a))
    if n == 8:
        shapes.append((2, 2, 2))
    return shapes


def draw_case(rng, n):
    """One random change: (mesh shape, src, dst, global shape, dtype), the same on every rank."""
    mesh_shape = mesh_shapes(n)[rng.integers(len(mesh_shapes(n)))]
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(x) for x in rng.integers(0, 10, size=ndim))
    dtype = DTYPES[rng.integers(len(DTYPES))]
    kinds = [f"S({d})" for d in range(ndim)] + ["R"]
    partial = ["P(sum)"] if dtype is np.complex64 else ["P(sum)", "P(max)"]
    src = [str(rng.choice(kinds + partial)) for _ in mesh_shape]
    ops = {p for p in src if p.startswith("P")}
    if len(ops) > 1:  # one reduce op per tensor
        src = [p if not p.startswith("P") else "P(sum)" for p in src]
    dst = [str(rng.choice(kinds)) for _ in mesh_shape]
    return mesh_shape, src, dst, shape, dtype


def full_tensor(rng, shape, dtype):
    x = rng.integers(-50, 50, size=shape)
    if dtype is np.complex64:
        return (x + 1j * rng.integers(-50, 50, size=shape)).astype(dtype)
    return x.astype(dtype)


def check_one(local, kept, mesh, src, dst, shape, want, how, what):
    """One redistribute (how: 0 plain, 1 into out=, 2 async) against want, the input kept."""
    dtype = want.dtype
    if how == 1:
        out = np.full(want.shape, 99, dtype)
        got = dtr.redistribute(local, mesh, src, dst, shape=shape, out=out)
        assert got is out, what
    elif how == 2:
        got = dtr.redistribute(local, mesh, src, dst, shape=shape, async_op=True).wait()
    else:
        got = dtr.redistribute(local, mesh, src, dst, shape=shape)
    assert got.dtype == dtype and got.shape == want.shape, what
    assert np.array_equal(got, want), what
    assert np.array_equal(local, kept), what + ": the input was written"


def test_random_changes_within_one_mesh():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED)
    for case in range(120):
        mesh_shape, src, dst, shape, dtype = draw_case(rng, n)
        full = full_tensor(rng, shape, dtype)
        mesh = dtr.Mesh(mesh_shape)
        coord = coords(mesh_shape)[rank]
        local = local_input(full, mesh_shape, src, coord, SEED + case)
        kept = local.copy()
        want = full[block(shape, mesh_shape, dst, coord)]
        what = f"case {case} (seed {SEED}): mesh {mesh_shape} {src} -> {dst} shape {shape} {dtype.__name__}"
        check_one(local, kept, mesh, src, dst, shape, want, case % 3, what)


def ragged_sizes(rng, n, length):
    """n sizes summing to length, zeros now and then (a run of them on the last ranks)."""
    sizes = [0] * n
    for x in rng.integers(0, n, size=length):
        sizes[int(x)] += 1
    if n > 1 and rng.integers(3) == 0:
        sizes[0] += sizes[-1]
        sizes[-1] = 0
    return sizes


def raggedize(rng, mesh_shape, placements, shape, objects):
    """The first shard of each tensor dim (mesh-dim order) made ragged one time in two, as
    text or as dtr.Shard(d, sizes=...)."""
    out, seen = [], set()
    for i, p in enumerate(placements):
        if p.startswith("S(") and p not in seen and rng.integers(2) == 0:
            d = int(p[2:-1])
            sizes = ragged_sizes(rng, mesh_shape[i], shape[d])
            p = dtr.Shard(d, sizes=sizes) if objects else f"S({d}){{{','.join(map(str, sizes))}}}"
        if str(p).startswith("S("):
            seen.add(str(p).partition("{")[0])
        out.append(p)
    return out


def test_random_ragged_changes_within_one_mesh():
    """Ragged shards (S(d){sizes}) from, to and on both sides, every element against the
    reference; those a change moves go box by box as between meshes do, single, into out= and
    async."""
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED + 7)
    ragged = 0
    for case in range(80):
        mesh_shape, src, dst, shape, dtype = draw_case(rng, n)
        if case % 2 == 0:  # (a Partial other than sum is reduced on its mesh: not yet)
            src = [p if not p.startswith("P") else "R" for p in src]
        else:
            src = [p if p != "P(max)" else "P(sum)" for p in src]
            if not np.issubdtype(dtype, np.floating):  # (summed at the receivers: floats)
                dtype = np.float64
        objects = case % 4 == 1
        src = raggedize(rng, mesh_shape, src, shape, objects)
        dst = raggedize(rng, mesh_shape, dst, shape, objects)
        if "{" not in "".join(map(str, src + dst)):
            continue
        ragged += 1
        full = full_tensor(rng, shape, dtype)
        mesh = dtr.Mesh(mesh_shape)
        coord = coords(mesh_shape)[rank]
        tsrc = [str(p) for p in src]
        local = local_input(full, mesh_shape, tsrc, coord, SEED + case)
        kept = local.copy()
        want = full[block(shape, mesh_shape, [str(p) for p in dst], coord)]
        what = (f"case {case} (seed {SEED}): mesh {mesh_shape} {tsrc} -> "
                f"{[str(p) for p in dst]} shape {shape} {dtype.__name__}")
        check_one(local, kept, mesh, src, dst, shape, want, case % 3, what)
    assert ragged >= 20, ragged


def test_random_kept_ragged_changes_within_one_mesh():
    """A ragged shard that stays as it is (the same sizes on the same mesh dim, the only shard
    of its tensor dim): planned as steps on the mesh, any Partial op, every element against
    the reference; on 2x2 the plan is one all_reduce at the lower bound."""
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        pytest.skip("a ragged shard needs a mesh dim of 2 ranks or more")
    rng = np.random.default_rng(SEED + 9)
    kept = 0
    for case in range(60):
        mesh_shape, src, dst, shape, dtype = draw_case(rng, n)
        i, d = int(rng.integers(len(mesh_shape))), int(rng.integers(len(shape)))
        if mesh_shape[i] < 2:
            continue
        src = ["R" if p == f"S({d})" else p for p in src]
        dst = ["R" if p == f"S({d})" else p for p in dst]
        sizes = ragged_sizes(rng, mesh_shape[i], shape[d])
        src[i] = dst[i] = f"S({d}){{{','.join(map(str, sizes))}}}"
        if case % 3 == 1:
            src[i] = dtr.Shard(d, sizes=sizes)
        kept += 1
        full = full_tensor(rng, shape, dtype)
        mesh = dtr.Mesh(mesh_shape)
        coord = coords(mesh_shape)[rank]
        tsrc = [str(p) for p in src]
        local = local_input(full, mesh_shape, tsrc, coord, SEED + case)
        want = full[block(shape, mesh_shape, dst, coord)]
        what = (f"case {case} (seed {SEED}): mesh {mesh_shape} {tsrc} -> {dst} shape {shape} "
                f"{dtype.__name__}")
        check_one(local, local.copy(), mesh, src, dst, shape, want, case % 3, what)
    assert kept >= 20, kept
    if n == 4:
        p = dtr.plan(dtr.Mesh((2, 2)), (8, 6), "S(0){3,5},P", "S(0){3,5},R")
        assert [s["kind"] for s in p.steps] == ["all_reduce"], p.steps
        assert not p.cross, p
        assert p.recv_bytes_per_rank_max == p.lower_bound_recv_bytes_per_rank == 120, p.to_dict()


def test_a_batch_with_ragged_shards_within_one_mesh():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED + 8)
    ms = (n,)
    fulls = [full_tensor(rng, (int(rng.integers(0, 12)), 3), np.float32) for _ in range(4)]
    srcs = [[dtr.Shard(0, sizes=ragged_sizes(rng, n, f.shape[0]))] for f in fulls]
    third = ",".join(map(str, ragged_sizes(rng, n, fulls[2].shape[0])))
    dsts = [["R"], ["S(1)"], [f"S(0){{{third}}}"], [dtr.Shard(1, sizes=ragged_sizes(rng, n, 3))]]
    coord = coords(ms)[rank]
    ins = [f[block(f.shape, ms, [str(s[0])], coord)] for f, s in zip(fulls, srcs)]
    got = dtr.redistribute_many(ins, dtr.Mesh(n), srcs, dsts, shapes=[f.shape for f in fulls])
    for i, (f, d) in enumerate(zip(fulls, dsts)):
        assert np.array_equal(got[i], f[block(f.shape, ms, [str(d[0])], coord)]), (i, srcs[i], d)
    # without shape=: a dim a ragged shard splits first has its sizes' sum as its length
    for f, src in zip(fulls, srcs):
        got = dtr.redistribute(f[block(f.shape, ms, [str(src[0])], coord)], dtr.Mesh(n), src, "R")
        assert np.array_equal(got, f), src


def rank_sets(rng, n):
    """Two rank lists over the job: disjoint, overlapping or the same ranks reordered."""
    perm = [int(x) for x in rng.permutation(n)]
    kind = int(rng.integers(3)) if n > 1 else 2
    if kind == 0:
        cut = int(rng.integers(1, n))
        return perm[:cut], perm[cut:]
    if kind == 1:
        a = perm[: int(rng.integers(1, n + 1))]
        return a, [int(x) for x in rng.permutation(n)][: int(rng.integers(1, n + 1))]
    return list(range(n)), perm


def test_random_changes_between_meshes():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED + 1)
    for case in range(80):
        ra, rb = rank_sets(rng, n)
        sa = mesh_shapes(len(ra))[rng.integers(len(mesh_shapes(len(ra))))]
        sb = mesh_shapes(len(rb))[rng.integers(len(mesh_shapes(len(rb))))]
        _, src, _, shape, dtype = draw_case(rng, 1)
        src = (src * 3)[: len(sa)]
        kinds = [f"S({d})" for d in range(len(shape))] + ["R"]
        dst = [str(rng.choice(kinds)) for _ in sb]
        relabel = bool(rng.integers(2))
        full = full_tensor(rng, shape, dtype)
        a, b = dtr.Mesh(sa, ranks=ra), dtr.Mesh(sb, ranks=rb)
        local = None
        if rank in ra:
            local = local_input(full, sa, src, coords(sa)[ra.index(rank)], SEED + case)
        got = dtr.redistribute(local, a, src, dst, to_mesh=b, shape=shape,
                               dtype=np.dtype(dtype).name, relabel=relabel)
        what = f"case {case} (seed {SEED}): {sa} on {ra} {src} -> {sb} on {rb} {dst} shape {shape}"
        if rank not in rb:
            assert got is None, what
            continue
        # with relabeling the plan chose which rank holds which coordinate of b
        p = dtr.plan(a, shape, src, dst, dtype=np.dtype(dtype).name, to_mesh=b, relabel=relabel)
        order = p.to_dict().get("relabel") or rb
        coord = coords(sb)[order.index(rank)]
        assert np.array_equal(got, full[block(shape, sb, dst, coord)]), what


def test_a_batch_of_tensors_within_and_between_meshes():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED + 2)
    mesh = dtr.Mesh(mesh_shapes(n)[-1])
    ms = mesh.shape
    fulls = [full_tensor(rng, (int(rng.integers(1, 12)), 5), np.float32) for _ in range(6)]
    srcs = [",".join(["S(0)"] + ["R"] * (len(ms) - 1)), ",".join(["P(sum)"] * len(ms))] * 3
    dsts = [",".join(["R"] * len(ms)), ",".join(["S(1)"] + ["S(0)"] * (len(ms) - 1))] * 3
    coord = coords(ms)[rank]
    locals_ = [local_input(f, ms, s.split(","), coord, SEED + i) for i, (f, s) in enumerate(zip(fulls, srcs))]
    got = dtr.redistribute_many(locals_, mesh, srcs, dsts, shapes=[f.shape for f in fulls])
    for i, (f, d) in enumerate(zip(fulls, dsts)):
        assert np.array_equal(got[i], f[block(f.shape, ms, d.split(","), coord)]), i
    if n < 2:
        return
    a, b = dtr.Mesh(n // 2 or 1, ranks=list(range(n // 2))), dtr.Mesh(n - n // 2, ranks=list(range(n // 2, n)))
    ins = [f[block(f.shape, a.shape, ["S(0)"], coords(a.shape)[rank])] if rank < n // 2 else None for f in fulls]
    got = dtr.redistribute_many(ins, a, "S(0)", "S(1)", to_mesh=b, shapes=[f.shape for f in fulls],
                                dtypes="f32")
    for f, g in zip(fulls, got):
        if rank < n // 2:
            assert g is None
        else:
            assert np.array_equal(g, f[block(f.shape, b.shape, ["S(1)"], coords(b.shape)[rank - n // 2])])


def test_a_batch_between_meshes_casts_each_tensor_to_its_to_dtype():
    """to_dtypes: each tensor arrives in its own dtype (cast as the boxes are packed, the
    Partial ones reduced first); within one mesh a batch refuses a cast (RefusedError); a bad
    entry is named."""
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        return
    rng = np.random.default_rng(SEED + 7)
    h = n // 2
    a = dtr.Mesh(h, ranks=list(range(h)))
    b = dtr.Mesh(n - h, ranks=list(range(n - 1, h - 1, -1)))
    kinds = [(np.float32, np.float16), (np.float64, np.float32), (np.float32, None),
             (np.float16, np.float64), (np.complex64, np.complex128)]
    fulls = [full_tensor(rng, (int(rng.integers(0, 13)), int(rng.integers(1, 6))), k[0])
             for k in kinds]
    srcs = ["S(0)", "P(sum)", "R", "S(1)", "S(0)"]
    dsts = ["S(1)", "S(0)", "S(0)", "R", "S(1)"]
    to = [None if k[1] is None else np.dtype(k[1]).name for k in kinds]
    ins = [local_input(f, a.shape, [s], coords(a.shape)[rank], SEED + i) if rank < h else None
           for i, (f, s) in enumerate(zip(fulls, srcs))]
    got = dtr.redistribute_many(ins, a, srcs, dsts, to_mesh=b, shapes=[f.shape for f in fulls],
                                dtypes=[np.dtype(k[0]).name for k in kinds], to_dtypes=to)
    for i, (f, k, d, g) in enumerate(zip(fulls, kinds, dsts, got)):
        if rank < h:
            assert g is None
            continue
        want = f[block(f.shape, b.shape, [d], coords(b.shape)[n - 1 - rank])]
        want = want.astype(k[1] or k[0])
        assert g.dtype == want.dtype, (i, g.dtype, want.dtype)
        assert np.array_equal(g, want), i
    # dtype objects as entries (a dtype is never a sequence: a list is one entry a tensor)
    two = [f[:, :1].astype(np.float32) for f in fulls[:2]]
    ins2 = [t[block(t.shape, a.shape, ["R"], coords(a.shape)[rank])] if rank < h else None
            for t in two]
    for to2 in ([np.dtype("f8"), None], (np.float16, np.dtype("f4"))):
        got = dtr.redistribute_many(ins2, a, "R", "R", to_mesh=b, shapes=[t.shape for t in two],
                                    dtypes="f32", to_dtypes=list(to2))
        if rank >= h:
            assert [g.dtype for g in got] == [np.dtype(t or np.float32) for t in to2], to2
            assert all(np.array_equal(g, t.astype(g.dtype)) for g, t in zip(got, two))
    with pytest.raises(dtr.ArgumentError, match=r"to_dtypes: 3 entries for 2 tensors"):
        dtr.redistribute_many(ins2, a, "R", "R", to_mesh=b, shapes=[t.shape for t in two],
                              dtypes="f32", to_dtypes=["f16"] * 3)
    mesh = dtr.Mesh(n)
    x = np.zeros((n, 2), np.float32)[:1]
    with pytest.raises(dtr.RefusedError, match="a batch does not cast yet"):
        dtr.redistribute_many([x], mesh, "S(0)", "R", to_dtypes=["f64"])
    with pytest.raises(dtr.ArgumentError, match=r"to_dtypes\[1\]: .*f33"):
        dtr.redistribute_many([x, x], mesh, "S(0)", "R", to_dtypes=["f64", "f33"])
    got = dtr.redistribute_many([x, x], mesh, "S(0)", "R")  # the next call is in step
    assert got[0].shape == (n, 2)


def test_a_partial_summed_at_the_receivers_or_on_the_source_mesh():
    """A Partial(sum) between meshes (P over every rank to S(0) on them in reverse order):
    summed at the receivers, which puts fewer bytes on the busiest rank, unless
    DTR_CROSS_REDUCE=source; the plan says which, and every block is the addends' sum."""
    import os
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        return
    rng = np.random.default_rng(SEED + 11)
    a, b = dtr.Mesh(n), dtr.Mesh(n, ranks=list(range(n - 1, -1, -1)))
    full = full_tensor(rng, (4 * n + 1, 3), np.float64)  # (uneven shards)
    local = local_input(full, a.shape, ["P(sum)"], coords(a.shape)[rank], SEED + 11)
    want = full[block(full.shape, b.shape, ["S(0)"], coords(b.shape)[n - 1 - rank])]
    try:
        for mode, summed in ((None, n), ("receiver", n), ("source", None)):
            os.environ.pop("DTR_CROSS_REDUCE", None)
            if mode is not None:
                os.environ["DTR_CROSS_REDUCE"] = mode
            p = dtr.plan(a, full.shape, ["P(sum)"], ["S(0)"], dtype="f64", to_mesh=b)
            assert p.to_dict().get("summed_at_receiver") == summed, mode
            got = dtr.redistribute(local, a, "P(sum)", "S(0)", to_mesh=b, shape=full.shape,
                                   dtype="f64")
            assert np.allclose(got, want, rtol=1e-12, atol=1e-12), mode
        os.environ["DTR_CROSS_REDUCE"] = "sometimes"
        with pytest.raises(dtr.ArgumentError, match="DTR_CROSS_REDUCE: 'sometimes'"):
            dtr.plan(a, full.shape, ["P(sum)"], ["S(0)"], dtype="f64", to_mesh=b)
    finally:
        os.environ.pop("DTR_CROSS_REDUCE", None)


def test_block_scaled_fp8_between_meshes_equals_the_reference_quantizer():
    """block_scale: each tensor arrives as fp8 bytes and f32 scales equal to numpy and
    ml_dtypes' quantizer (reference.py) on every destination rank, the blocks crossing the
    source's shard boundaries; single, batched and async; the errors by name, nothing moved."""
    pytest.importorskip("ml_dtypes")
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        return
    rng = np.random.default_rng(SEED + 11)
    h = n // 2
    a = dtr.Mesh(h, ranks=list(range(h)))
    b = dtr.Mesh(n - h, ranks=list(range(h, n)))
    for case in range(6):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 40, size=ndim))
        block_edge = int(rng.choice([1, 3, 8, 16]))
        full = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
        full[tuple(slice(0, 1) for _ in shape)] = 0  # a first tile of zeros now and then
        src, dst = f"S({int(rng.integers(ndim))})", str(rng.choice(["R", f"S({ndim - 1})"]))
        fp8 = str(rng.choice(["f8e4m3", "f8e5m2"]))
        local = full[block(shape, a.shape, [src], coords(a.shape)[rank])] if rank < h else None
        got = dtr.redistribute(local, a, src, dst, shape=shape, to_mesh=b, dtype="f32",
                               to_dtype=fp8, block_scale=block_edge, async_op=case % 2 == 1)
        got = got.wait() if case % 2 == 1 else got
        if rank < h:
            assert got is None
            continue
        q, scales = quantize_blocks(full, block_edge, fp8)
        coord = coords(b.shape)[rank - h]
        w, s = got
        assert w.dtype == q.dtype and s.dtype == np.float32, (case, w.dtype, s.dtype)
        want_w, want_s = q[block(shape, b.shape, [dst], coord)], scales[block(scales.shape, b.shape, [dst], coord)]
        assert np.array_equal(w.view(np.uint8), want_w.view(np.uint8)), (case, shape, src, dst, block_edge, fp8)
        assert np.array_equal(s, want_s), (case, shape, block_edge)
    # a batch: one block edge for all, each tensor its own fp8 dtype
    full = rng.standard_normal((20, 33)).astype(np.float32)
    local = full[block(full.shape, a.shape, ["S(0)"], coords(a.shape)[rank])] if rank < h else None
    got = dtr.redistribute_many([local, local], a, "S(0)", ["S(1)", "R"], shapes=full.shape,
                                to_mesh=b, dtypes="f32", to_dtypes=["f8e4m3", "f8e5m2"],
                                block_scale=8)
    if rank >= h:
        for (w, s), d, fp8 in zip(got, ["S(1)", "R"], ["f8e4m3", "f8e5m2"]):
            q, scales = quantize_blocks(full, 8, fp8)
            coord = coords(b.shape)[rank - h]
            assert np.array_equal(w.view(np.uint8), q[block(q.shape, b.shape, [d], coord)].view(np.uint8))
            assert np.array_equal(s, scales[block(scales.shape, b.shape, [d], coord)])
    else:
        assert got == [None, None]
    bad = [(dict(block_scale=-1), dtr.ArgumentError, r"block_scale: -1"),
           (dict(block_scale=8, to_dtype="bf16"), dtr.ArgumentError,
            r"dst\[0\]: dtype bf16: opts->block_scale scales into f8e4m3 or f8e5m2"),
           (dict(block_scale=8, to_dtype="f8e4m3", out=np.zeros(1)), dtr.ArgumentError,
            r"out: not with block_scale")]
    for kw, err, text in bad:
        kw = dict(dict(shape=full.shape, to_mesh=b, dtype="f32"), **kw)
        with pytest.raises(err, match=text):
            dtr.redistribute(local, a, "S(0)", "R", **kw)
    got = dtr.redistribute(local, a, "S(0)", "R", shape=full.shape, to_mesh=b, dtype="f32",
                           to_dtype="f8e4m3", block_scale=8)  # the next call is in step
    assert (got is None) == (rank < h)


def test_block_scaled_digests_of_what_was_sent_equal_what_arrived():
    """Proof of delivery for block-scaled fp8 (docs/python.md): the source ranks quantize
    within their own mesh (the same placements, to_mesh the same mesh) and digest that; the
    destination ranks digest the weights and scales that arrived; equal, the tensor and its
    scales, for seeded shapes whose blocks cross the shard boundaries; and a changed byte
    changes the digest."""
    pytest.importorskip("ml_dtypes")
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        return
    rng = np.random.default_rng(SEED + 12)
    h = n // 2
    a = dtr.Mesh(h, ranks=list(range(h)))
    b = dtr.Mesh(n - h, ranks=list(range(h, n)))
    for case in range(4):
        shape = (int(rng.integers(1, 300)), int(rng.integers(1, 200)))
        edge = int(rng.choice([8, 64, 128]))
        sshape = tuple(-(-d // edge) for d in shape)
        full = rng.standard_normal(shape).astype(np.float32)
        src, dst = "S(0)", str(rng.choice(["R", "S(1)", "S(0)"]))
        local = full[block(shape, a.shape, [src], coords(a.shape)[rank])] if rank < h else None
        kw = dict(shape=shape, dtype="f32", to_dtype="f8e4m3", block_scale=edge)
        got = dtr.redistribute(local, a, src, dst, to_mesh=b, **kw)
        if rank < h:
            qw, qs = dtr.redistribute(local, a, src, src, to_mesh=a, **kw)
            mine = (dtr.digest(qw, a, src, shape=shape), dtr.digest(qs, a, src, shape=sshape))
        else:
            w, s = got
            if case == 3 and rank == h and w.size:
                w.view(np.uint8)[0] ^= 1
            mine = (dtr.digest(w, b, dst, shape=shape), dtr.digest(s, b, dst, shape=sshape))
        sent, arrived = comm.allgather(mine)[0], comm.allgather(mine)[h]
        assert sent[1] == arrived[1], (case, shape, edge, dst, "scales")
        if case == 3 and n - h >= 1 and (shape[0] * shape[1]) > 0:
            assert sent[0] != arrived[0], (case, shape, edge, dst, "a changed byte")
        else:
            assert sent[0] == arrived[0], (case, shape, edge, dst)

def test_one_ranks_bad_array_fails_every_rank_without_a_hang():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        pytest.skip("needs 2 ranks")
    mesh = dtr.Mesh(n)
    good = np.ones((2, 3), np.float32)
    local = np.ones((3, 3), np.float32) if rank == 1 else good
    out = np.full((2 * n, 3), -1, np.float32)
    if rank == 1:
        with pytest.raises(dtr.ArgumentError, match=r"local: shape \(3, 3\) is not rank 1's block \(2, 3\)"):
            dtr.redistribute(local, mesh, "S(0)", "R", shape=(2 * n, 3), out=out)
    else:
        with pytest.raises(dtr.BackendError) as e:
            dtr.redistribute(local, mesh, "S(0)", "R", shape=(2 * n, 3), out=out)
        assert e.value.status == "DTR_ERR_REMOTE"
    if rank == 1:  # (where another rank failed, out's contents are unspecified, as in C)
        assert (out == -1).all()
    # and the context still works
    got = dtr.redistribute(good, mesh, "S(0)", "R", shape=(2 * n, 3))
    assert np.array_equal(got, np.ones((2 * n, 3), np.float32))


def test_grad_hook_means_in_place():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    mesh = dtr.Mesh(n)
    g = np.arange(10, dtype=np.float32) * (rank + 1)
    assert dtr.grad_hook(g, mesh) is g
    assert np.array_equal(g, np.arange(10, dtype=np.float32) * ((n + 1) / 2))
    h = np.full(6, rank + 1, np.float32)
    dtr.grad_hook(h, mesh, "bf16")
    assert np.array_equal(h, np.full(6, (n + 1) / 2, np.float32))
    with pytest.raises(dtr.ArgumentError, match="kind: 'max' is not allreduce, fp16 or bf16"):
        dtr.grad_hook(h, mesh, "max")
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(dtr.ArgumentError, match="buf: a read-only array cannot receive the result"):
        dtr.grad_hook(ro, mesh)


def test_reduce_scatter_grads_fsdp_and_hsdp():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    shapes = [(5, 3), (7,), (2 * n, 2)]
    grads = [np.arange(np.prod(s), dtype=np.float32).reshape(s) * (rank + 1) for s in shapes]
    mean = [np.arange(np.prod(s), dtype=np.float32).reshape(s) * ((n + 1) / 2) for s in shapes]
    shards = dtr.reduce_scatter_grads(grads, dtr.Mesh(n))
    for s, m in zip(shards, mean):
        assert np.array_equal(s, m[block(m.shape, (n,), ["S(0)"], (rank,))])
    if n % 2 == 0 and n > 2:
        mesh = dtr.Mesh((2, n // 2))
        shards = dtr.reduce_scatter_grads(grads, mesh, shard_dims=[1], replicate_dims=[0])
        c = coords(mesh.shape)[rank]
        for s, m in zip(shards, mean):
            assert np.array_equal(s, m[block(m.shape, (n // 2,), ["S(0)"], (c[1],))])


def small_grads(rng, count):
    """count gradient shapes as a model has them: mostly biases and norms (1 to a few hundred
    elements), some matrices, now and then an empty one; 1-3 dims."""
    shapes = []
    for _ in range(count):
        numel = int(round(10 ** rng.uniform(0, 3.3)))
        lead = [int(rng.choice([1, 2, 3, 4, 7, 8])) for _ in range(int(rng.integers(0, 3)))]
        rest = numel
        for d in lead:
            rest = max(1, rest // d)
        dims = lead + [rest]
        if rng.random() < 0.08:
            dims[int(rng.integers(len(dims)))] = 0
        shapes.append(tuple(dims))
    return shapes


def test_grad_reductions_on_many_small_buckets():
    """DDP's hooks on many small buckets in a row and FSDP/HSDP's reduce-scatter of many small
    gradients: seeded, every element exact (values are small integers over a power of two)."""
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(SEED)
    mesh = dtr.Mesh(n)
    for case in range(12):
        shapes = small_grads(rng, int(rng.integers(1, 60)))
        kind = ("allreduce", "bf16", "fp16")[case % 3]
        what = f"case {case} (seed {SEED}): {kind} hook on {len(shapes)} buckets {shapes}"
        base = [rng.integers(-8, 9, size=s).astype(np.float32) for s in shapes]
        bufs = [b * (rank + 1) for b in base]
        for b in bufs:  # one bucket after another, as DDP calls the hook
            assert dtr.grad_hook(b, mesh, kind) is b, what
        for b, b0 in zip(bufs, base):
            assert np.array_equal(b, b0 * ((n + 1) / 2)), what
        shapes = small_grads(rng, int(rng.integers(1, 60)))
        grads = [rng.integers(-8, 9, size=s).astype(np.float32) for s in shapes]
        mine = [g * (rank + 1) for g in grads]
        meshes = [((n,), {}, 0)]
        if n % 2 == 0 and n > 2:
            meshes.append(((2, n // 2), {"shard_dims": [1], "replicate_dims": [0]}, 1))
        for mesh_shape, dims, shard_mesh_dim in meshes:
            got = dtr.reduce_scatter_grads(mine, dtr.Mesh(mesh_shape), **dims)
            c = coords(mesh_shape)[rank]
            k = mesh_shape[shard_mesh_dim]
            for i, (s, g) in enumerate(zip(got, grads)):
                if g.ndim == 0:
                    continue
                want = (g * ((n + 1) / 2))[block(g.shape, (k,), ["S(0)"], (c[shard_mesh_dim],))]
                assert np.array_equal(s, want), f"{what}; reduce_scatter_grads on {mesh_shape}, grad {i}"


def test_the_gil_is_released_while_a_call_waits():
    import threading
    import time
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        pytest.skip("needs 2 ranks")
    mesh = dtr.Mesh(n)
    local = np.full((4, 4), rank, np.float32)
    result = {}
    dtr.redistribute(local, mesh, "S(0)", "R")  # (the context and its groups made already)
    comm.Barrier()
    if rank == 0:
        time.sleep(0.5)  # the others' calls wait for this rank inside the library
        result["out"] = dtr.redistribute(local, mesh, "S(0)", "R")
        spins = None
    else:
        t = threading.Thread(target=lambda: result.update(out=dtr.redistribute(local, mesh, "S(0)", "R")))
        t0 = time.monotonic()
        t.start()
        time.sleep(0.05)  # the thread is in the call now, waiting for rank 0 (0.5 s)
        woke = time.monotonic() - t0  # about 0.05 if the call let go of the GIL, >= 0.5 if not
        in_flight = "out" not in result
        t.join()
        assert woke < 0.3 and in_flight, (woke, in_flight)
    want = np.repeat(np.arange(n, dtype=np.float32), 4)[:, None] * np.ones((1, 4), np.float32)
    assert np.array_equal(result["out"], want)


def test_threads_share_a_context_one_call_at_a_time():
    import threading
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    mesh = dtr.Mesh(n)
    full = np.arange(64 * n * 8, dtype=np.float32).reshape(64 * n, 8)
    local = full[64 * rank:64 * (rank + 1)]
    errors, results = [], []

    def work():  # every call the same change: any order across threads matches across ranks
        try:
            for _ in range(20):
                results.append(dtr.redistribute(local, mesh, "S(0)", "R"))
        except Exception as e:  # (reported below, on the main thread)
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 80
    assert all(np.array_equal(r, full) for r in results)
