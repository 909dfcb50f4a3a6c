"""A rank that ends its process with an async request still in flight (held in a variable, or
never waited for) must neither crash at exit nor leave the others short: the exit handler
completes the request before it destroys the context (it used to free the context first, and
the request's own finalizer then waited on freed memory: a segmentation fault).

    bash tools/dtr_launch.sh -n 4 python python/tests/exit_inflight.py

A change from S(1) on 4 ranks to S(0) on the ranks [3, 0, 1]: rank 2 holds no destination
block and exits holding its request; the others wait and check their blocks exactly.
Each rank prints one line; the exit status is 0 only if every rank's is.
"""
import os

import numpy as np

import dtr

rank = int(os.environ["RANK"])
src = dtr.Mesh((4,), backend="gloo")
dst = dtr.Mesh((3,), ranks=[3, 0, 1], backend="gloo")
full = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)


def block(mesh, placements, r):
    b = next(b for b in dtr.layout(mesh, full.shape, placements) if b.rank == r)
    return full[tuple(slice(o, o + n) for o, n in zip(b.global_offset, b.local_shape))]


req = dtr.redistribute(block(src, "S(1)", rank).copy(), src, "S(1)", "S(0)", shape=full.shape,
                       to_mesh=dst, async_op=True)
if rank == 2:
    held = req
    print(f"rank {rank}: exits with its request in flight")
else:
    out = req.wait()
    assert np.array_equal(out, block(dst, "S(0)", rank)), (rank, out)
    print(f"rank {rank}: its S(0) block of {full.shape} exact")
