"""Every argument of every collective call wrong on one rank only (the last): that rank raises
its own error naming the argument, every other rank raises at once with DTR_ERR_REMOTE (no
hang), and the next good call on every rank pairs with the next and verifies. Within one
mesh, between two, batches, the DDP hook and FSDP's reduce-scatter. Runs on 2 or more ranks."""
import numpy as np
import pytest

import dtr
from conftest import world

# statuses a rank's own refused argument may carry (or, for arguments Python itself refuses
# before dtr sees them, TypeError, ValueError and OverflowError: the other ranks still fail)
OWN = {"DTR_ERR_INVALID_ARGUMENT", "DTR_ERR_PARSE", "DTR_ERR_OVERFLOW", "DTR_ERR_BUFFER_TOO_SMALL",
       "DTR_ERR_UNSUPPORTED"}


def setup():
    comm = world()
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        pytest.skip("needs 2 ranks")
    return rank, n, rank == n - 1


def expect_refused(call, bad, name):
    """The call raises on every rank: the wrong rank its own error (or the disagreement, where
    its wrong argument made another plan), the others the remote rank's failure."""
    with pytest.raises((dtr.Error, TypeError, ValueError, OverflowError)) as e:
        call()
    if bad and not isinstance(e.value, dtr.Error):
        return e.value
    assert isinstance(e.value, dtr.Error), (name, repr(e.value))
    if bad:
        assert e.value.status in OWN | {"DTR_ERR_MISMATCH"}, (name, e.value.status, str(e.value))
    else:
        assert e.value.status in ("DTR_ERR_REMOTE", "DTR_ERR_MISMATCH"), \
            (name, e.value.status, str(e.value))
    return e.value


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def test_redistribute_one_rank_wrong():
    rank, n, bad = setup()
    mesh = dtr.Mesh(n)
    full = np.arange(4 * n * 3, dtype=np.float32).reshape(4 * n, 3)
    mine = full[4 * rank:4 * rank + 4].copy()
    wrongs = {
        "local None": dict(local=None),
        "local of the wrong shape": dict(local=np.zeros((3, 3), np.float32)),
        "local big-endian": dict(local=mine.astype(">f4")),
        "local of a dtype dtr does not move": dict(local=mine.astype(np.int16)),
        "local not an array": dict(local="abc"),
        "dtype= against local": dict(dtype="f64"),
        "src does not parse": dict(src="S("),
        "dst does not parse": dict(dst="Q"),
        "dst a shard dim out of range": dict(dst="S(5)"),
        "dst P(avg) from S(0)": dict(dst="P(avg)"),
        "shape unreadable": dict(shape="4xq"),
        "shape not the blocks'": dict(shape=(4 * n + 1, 3)),
        "out of the wrong shape": dict(out=np.zeros((1,), np.float32)),
        "out read-only": dict(out=read_only(full)),
        "to_dtype unknown": dict(to_dtype="f99"),
        "staging_cap negative": dict(staging_cap=-1),
        "relabel without to_mesh": dict(relabel=True),
        "relabel not a bool": dict(relabel=np.zeros(3)),
        "an unknown keyword": dict(nonsense=1),
    }
    for name, wrong in wrongs.items():
        for async_op in (False, True):
            args = dict(local=mine, mesh=mesh, src="S(0)", dst="R", async_op=async_op)
            if bad:
                args.update(wrong)
            expect_refused(lambda: run(args), bad, f"{name} (async_op={async_op})")
            got = run(dict(local=mine, mesh=mesh, src="S(0)", dst="R", async_op=async_op))
            assert np.array_equal(got, full), name


def run(args):
    """dtr.redistribute(**args), waited for where async_op."""
    r = dtr.redistribute(**args)
    return r.wait() if args.get("async_op") else r


def test_redistribute_between_meshes_one_rank_wrong():
    rank, n, bad = setup()
    a = dtr.Mesh(n)
    b = dtr.Mesh(n, ranks=list(range(n))[::-1])
    full = np.arange(2 * n * 5, dtype=np.float32).reshape(2 * n, 5)
    mine = full[2 * rank:2 * rank + 2].copy()
    wrongs = {
        "local None": dict(local=None),
        "local of the wrong shape": dict(local=np.zeros((1, 5), np.float32)),
        "dst does not parse": dict(dst="S(0"),
        "dst Partial": dict(dst="P"),
        "staging_cap not a number": dict(staging_cap="x"),
        "out of the wrong shape": dict(out=np.zeros((2, 2), np.float32)),
    }
    for name, wrong in wrongs.items():
        args = dict(local=mine, mesh=a, src="S(0)", dst="R", to_mesh=b)
        if bad:
            args.update(wrong)
        expect_refused(lambda: run(args), bad, name)
        got = dtr.redistribute(mine, a, "S(0)", "R", to_mesh=b)
        assert np.array_equal(got, full), name


def test_redistribute_many_one_rank_wrong():
    rank, n, bad = setup()
    mesh = dtr.Mesh(n)
    fulls = [np.arange(n * 6, dtype=np.float32).reshape(n * 2, 3), np.arange(n, dtype=np.float64)]
    mine = [f[len(f) // n * rank:len(f) // n * (rank + 1)].copy() for f in fulls]
    wrongs = {
        "locals not a list": dict(locals=5),
        "locals empty": dict(locals=[]),
        "one local None": dict(locals=[mine[0], None]),
        "one local of the wrong shape": dict(locals=[mine[0], np.zeros(7)]),
        "src does not parse for one": dict(src=["S(0)", "S(x)"]),
        "outs of the wrong shape": dict(outs=[np.zeros((1,), np.float32), None]),
    }
    for name, wrong in wrongs.items():
        args = dict(locals=mine, mesh=mesh, src="S(0)", dst="R")
        if bad:
            args.update(wrong)
        expect_refused(lambda: dtr.redistribute_many(**args), bad, name)
        got = dtr.redistribute_many(mine, mesh, "S(0)", "R")
        assert all(np.array_equal(g, f) for g, f in zip(got, fulls)), name


def test_block_scaled_one_rank_wrong():
    """block_scale: the source ranks agree twice (the blocks' amax on the source mesh, then the
    move), so a rank refusing its arguments must fail both, or the good source ranks wait in
    the first for it (the hang this test found)."""
    pytest.importorskip("ml_dtypes")
    from reference import quantize_blocks
    rank, n, bad = setup()
    a = dtr.Mesh(n)
    b = dtr.Mesh(n, ranks=list(range(n))[::-1])
    full = (np.arange(2 * n * 5, dtype=np.float32).reshape(2 * n, 5) - 7) / 3
    mine = full[2 * rank:2 * rank + 2].copy()
    wrongs = {
        "local of the wrong shape": dict(local=np.zeros((1, 5), np.float32)),
        "block_scale negative": dict(block_scale=-1),
        "block_scale not a number": dict(block_scale="x"),
        "to_dtype not fp8": dict(to_dtype="bf16"),
        "an integer local": dict(local=mine.astype(np.int32), dtype="i32"),
        "src Partial": dict(src="P"),
        "out given": dict(out=np.zeros((2 * n, 5), np.uint8)),
    }
    q, scales = quantize_blocks(full, 2, "f8e4m3")
    for name, wrong in wrongs.items():
        for to_mesh in (b, None):
            args = dict(local=mine, mesh=a, src="S(0)", dst="R", to_mesh=to_mesh,
                        to_dtype="f8e4m3", block_scale=2)
            if bad:
                args.update(wrong)
            expect_refused(lambda: run(args), bad, name)
            w, s = dtr.redistribute(mine, a, "S(0)", "R", to_mesh=to_mesh, to_dtype="f8e4m3",
                                    block_scale=2)
            assert np.array_equal(w.view(np.uint8), q.view(np.uint8)), name
            assert np.array_equal(s, scales), name


def test_grad_reductions_one_rank_wrong():
    rank, n, bad = setup()
    mesh = dtr.Mesh(n)
    base = np.arange(10, dtype=np.float32)
    hook_wrongs = {
        "kind not a str": dict(kind=5),
        "kind with a NUL": dict(kind="allreduce\x00"),
        "dims empty": dict(dims=[]),
        "an unknown keyword": dict(nonsense=1),
        "buf read-only": dict(buf=read_only(base)),
        "buf big-endian": dict(buf=base.astype(">f4")),
        "kind unknown": dict(kind="max"),
        "dims past the mesh": dict(dims=[3]),
    }
    for name, wrong in hook_wrongs.items():
        args = dict(buf=base * (rank + 1), mesh=mesh)
        if bad:
            args.update(wrong)
        expect_refused(lambda: dtr.grad_hook(**args), bad, name)
        g = base * (rank + 1)
        dtr.grad_hook(g, mesh)
        assert np.array_equal(g, base * ((n + 1) / 2)), name
    grads = [np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3)]
    rs_wrongs = {
        "shard_dim not an int": dict(shard_dim="x"),
        "shard_dim past int": dict(shard_dim=2 ** 70),
        "shard_dims empty": dict(shard_dims=[]),
        "grads not a list": dict(grads=3),
        "a grad None": dict(grads=[None]),
        "a grad big-endian": dict(grads=[grads[0].astype(">f4")]),
        "shard_dims past the mesh": dict(shard_dims=[2]),
        "factor not a number": dict(factor="x"),
        "reduce_dtype unknown": dict(reduce_dtype="f99"),
    }
    for name, wrong in rs_wrongs.items():
        args = dict(grads=[g * (rank + 1) for g in grads], mesh=mesh)
        if bad:
            args.update(wrong)
        expect_refused(lambda: dtr.reduce_scatter_grads(**args), bad, name)
        got = dtr.reduce_scatter_grads([g * (rank + 1) for g in grads], mesh)
        want = grads[0] * ((n + 1) / 2)
        assert np.array_equal(got[0], want[2 * rank:2 * rank + 2]), name
