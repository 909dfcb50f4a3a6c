"""Fuzzes dtr's Python API on 2 (or more) ranks.

    mpirun -n 2 VENV/bin/python fuzz/py_fuzz.py --seconds N [--seed S]
    mpirun -n 2 VENV/bin/python fuzz/py_fuzz.py --replay FILE

Every rank draws the same sequence from the seed. A case calls one API function with good
arguments mutated (wrong types, None, 2**70, NaN, NUL in strings, big-endian, non-contiguous
or wrong-dtype arrays, wrong shapes, placements and meshes, out= of the wrong size): on every
rank alike, on one rank only (the others keep the good arguments: docs/python.md's "one rank's
bad argument"), or not at all. Then:
  - no SystemError, no DTR_ERR_INTERNAL, no "Exception ignored", no exception docs/python.md
    does not allow (ALLOWED, PYTHON_SIGNATURES below);
  - the ranks agree (COMM_WORLD.allgather after each case): with the same arguments, a
    non-collective call raises the same class on every rank or on none; in a collective
    call, if one member raised every member raised, a rank with good arguments only with
    DTR_ERR_REMOTE or _MISMATCH, and a DTR_ERR_REMOTE means some rank refused its own;
  - a known-good call after it (S(0) -> R on Mesh(n), checked against numpy) verifies: every
    rank's next call still pairs with the next;
  - no hang: a watchdog ends the process after CASE_TIMEOUT s in one case, naming it.
A failing case is printed (seed, case, each rank's call) and saved under fuzz/regressions/py/
(seed, case, the calls); saved cases are replayed first (hangs last), regenerated from their
seed and checked to be the same calls. Ends with "py fuzz: N cases, K failed" on rank 0.
"""
import argparse
import faulthandler
import hashlib
import json
import os
import random
import re
import resource
import sys
import tempfile
import threading
import time
import warnings

import numpy as np
from mpi4py import MPI

import dtr

COMM = MPI.COMM_WORLD
N, RANK = COMM.Get_size(), COMM.Get_rank()
REGRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions", "py")
CASE_TIMEOUT = 20
# What a call may raise (docs/python.md, "Errors"): dtr's classes, every wrong value a
# dtr.ArgumentError; only a call that does not fit the signature of a function written in
# Python raises Python's own TypeError, at the call, before any line of it runs.
ALLOWED = (dtr.Error,)
PYTHON_SIGNATURES = {"plan", "layout", "load", "load_metadata", "Shard", "Partial"}
COLLECTIVE = {"redistribute", "redistribute_many", "grad_hook", "reduce_scatter_grads"}
NAN = float("nan")


class Odd:
    """An object of no type dtr knows, with a repr that is the same on every rank."""

    def __repr__(self):
        return "Odd()"


def odd_values():
    loop = []
    loop.append(loop)
    return [None, 0, -1, 2**31, 2**63, 2**64, 2**70, -2**70, 1.5, NAN, float("inf"), True, "",
            "\x00", "a\x00b", "é✓\u202e", "x" * 10000, b"S(0)", [], (), {}, [None], Odd(),
            np.int64(3), np.float64(NAN), np.array([1, 2]), 1 + 2j, Ellipsis, bytearray(b"x"),
            loop, iter([1, 2]), MPI.COMM_WORLD, dtr.Replicate()]


# ---- arrays and their bad variants --------------------------------------------------------

def strided(a):
    b = np.zeros(a.shape + (2,), a.dtype)
    b[..., 0] = a
    return b[..., 0]


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


ARRAY_BAD = [
    lambda a: a.astype(a.dtype.newbyteorder(">")), lambda a: a.astype(np.int16),
    lambda a: a.astype(bool), lambda a: a.astype(object), lambda a: a.astype(np.longdouble),
    lambda a: a.reshape(-1)[:max(a.size - 1, 0)], lambda a: np.zeros((7,), a.dtype),
    lambda a: a[None], lambda a: np.asfortranarray(a), strided, read_only,
    lambda a: np.full(a.shape, NAN, a.dtype) if a.dtype.kind in "fc" else a,
    lambda a: np.array(1, a.dtype), lambda a: np.empty((0,), a.dtype), lambda a: a.tolist(),
    lambda a: a.tobytes(), lambda a: memoryview(np.ascontiguousarray(a)),
    lambda a: np.ma.masked_array(a), lambda a: np.broadcast_to(a, a.shape),
    lambda a: a.view(np.uint8), lambda a: a.astype([("x", a.dtype)]), lambda a: a.astype("U4"),
    lambda a: a.T, lambda a: np.zeros((2**20, 0), a.dtype), lambda a: a.astype(np.float32),
    lambda a: a[:0], lambda a: a[:1], lambda a: a.astype(np.int32),
    lambda a: a.astype(np.complex64),
]


# ---- good arguments, per function ----------------------------------------------------------

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.complex64, np.float16]
CTX = {}  # the meshes and files, made once (made alike on every rank)


def block(full, mesh, placements):
    me = dtr.layout(mesh, full.shape, placements)[mesh.ranks.index(RANK)]
    return full[tuple(slice(o, o + n) for o, n in zip(me.global_offset, me.local_shape))].copy()


def move_args(rng, like=None):
    """Good arguments of redistribute (like=: another tensor of the same dtype and change)."""
    dt = like["local"].dtype.type if like else rng.choice(DTYPES)
    shape = (rng.randint(0, 3) * N + rng.randint(0, N - 1), rng.randint(1, 4))
    shape = shape[:len(like["shape"]) if like else rng.randint(1, 2)]
    src, dst = rng.choice(["S(0)", "S(1)", "R", "P"]), rng.choice(["S(0)", "S(1)", "R"])
    if like:
        src, dst = like["src"], like["dst"]
    elif len(shape) == 1:
        src, dst = src.replace("1", "0"), dst.replace("1", "0")
    to_mesh = CTX["rev"] if rng.random() < 0.2 else None
    full = np.arange(int(np.prod(shape))).reshape(shape).astype(dt)
    kw = dict(local=block(full, CTX["mesh"], src), mesh=CTX["mesh"], src=src, dst=dst,
              shape=shape)
    relabel = to_mesh is not None and rng.random() < 0.5
    if rng.random() < 0.3 and not relabel:  # (relabeled, which block is this rank's is dtr's pick)
        kw["out"] = np.empty(block(full, to_mesh or CTX["mesh"], dst).shape, dt)
    if rng.random() < 0.2:
        kw["async_op"] = True
    if to_mesh is not None:
        kw.update(to_mesh=to_mesh, relabel=relabel)
    return kw


def many_args(rng):
    one = move_args(rng)
    two = move_args(rng, like=one)
    return dict(locals=[one["local"], two["local"]],
                mesh=CTX["mesh"], src=one["src"], dst=one["dst"],
                shapes=[one["shape"], two["shape"]])


def hook_args(rng):
    return dict(buf=np.arange(10, dtype=np.float32) * (RANK + 1), mesh=CTX["mesh"],
                kind=rng.choice(["allreduce", "fp16", "bf16"]), dims=rng.choice([None, [0]]))


def scatter_args(rng):
    g = np.arange(2 * N * 3, dtype=np.float32).reshape(2 * N, 3) * (RANK + 1)
    return dict(grads=[g], mesh=CTX["mesh"], shard_dim=rng.choice([0, 1]),
                reduce_dtype=rng.choice([None, "bf16", "f32"]),
                factor=rng.choice([None, 2.0]), force_sum=rng.random() < 0.3)


def plan_args(rng):
    kw = move_args(rng)
    del kw["local"]
    kw.pop("out", None), kw.pop("async_op", None)
    return dict(kw, dtype=rng.choice(["f32", "bf16", "f64"]),
                strategy=rng.choice(["optimal", "compat"]))


def load_args(rng):
    return dict(path=CTX["st"], mesh=CTX["mesh"],
                rules=rng.choice([[{"match": "*.weight", "placements": "S(0)"},
                                   {"match": "*", "placements": "R"}], {"*": "R"}]),
                names=rng.choice([None, ["l0.weight"]]))


GOOD = {  # function -> its good arguments, drawn
    "redistribute": move_args, "redistribute_many": many_args, "grad_hook": hook_args,
    "reduce_scatter_grads": scatter_args, "plan": plan_args, "load": load_args,
    "layout": lambda rng: dict(mesh=CTX["mesh"], shape=(4 * N, 3),
                               placements=rng.choice(["S(0)", "R", "P(avg)", "S(1)"])),
    "load_metadata": lambda rng: dict(path=CTX["st"]),
    "Mesh": lambda rng: dict(shape=rng.choice([N, (1, N), f"{N}"]), ranks=None, comm=None),
    "Shard": lambda rng: dict(dim=rng.choice([0, 1])),
    "Partial": lambda rng: dict(reduce_op=rng.choice(["sum", "avg", "max"])),
}


def use(result):
    """Touch what a call returned, as a user would."""
    if isinstance(result, dtr.Request):
        result.is_completed()
        request, result = result, result.wait()
        request.is_completed()  # (after the end: still an answer, not a crash)
    if isinstance(result, dtr.Plan):
        str(result), result.to_dict(), result.steps
    if isinstance(result, dtr.Mesh):
        result.shape, result.ranks, result.coordinate, repr(result)
    return result


# ---- bad values, per argument -----------------------------------------------------------

def meshes(good, one_rank):
    """Meshes to put in place of a good one. On one rank only, its ranks in the same order
    (other shapes): docs/python.md says a mesh whose group differs on one rank (another order,
    other ranks, not a Mesh) cannot be agreed on and waits for ever."""
    ms = [CTX[k] for k in ("mesh", "1xN", "Nx1", "rev", "first", "last", "alone")]
    if one_rank:
        return [m for m in ms if isinstance(good, dtr.Mesh) and m.ranks == good.ranks] or [good]
    return ms + ["2", N, (N,)]


KINDS = {  # argument name -> its bad values (callables: of the good value)
    "array": ARRAY_BAD,
    "pl": ["S(0)", "R", "P", "P(avg)", "P(max)", "S(1)", "S(99)", "S(-1)", "S(-3)", "[S(0)]",
           "_S(0,2)", "S(0)[0]", "S(0)[1]", "P(mean)", "", "S(", "S(0),R", ",".join("R" * 9),
           [dtr.Shard(0)], [dtr.Partial("max")], [dtr.Shard(2**70)], [dtr.Shard(-2**70)],
           [Odd()], ["S(0)"], [None], dtr.Shard(0), "S(0)\x00", "S(0" * 1000, "S(2147483648)"],
    "shape": [(), (0,), (2**40,), (2**41,), (-1, 3), "8x3", "8xq", (8.0, 3), (True, 3),
              ("8", 3), np.array([8, 3]), (2**63,), (2**64, 1), [8] * 9, (2 * N, 3, 1),
              (2**31, 3), (2**34, 1)],
    "dtype": ["f32", "f64", "i32", "bf16", "c64", "float32", np.float32, np.dtype(">f4"),
              np.int16, "f99", 5, np.dtype("O"), "f32\x00", "F32", "f8e4m3"],
    "bool": [True, False, 1, "yes", np.bool_(True), np.zeros(3)],
    "int": [0, 1, -1, 2**31, 2**63, 2**70, "x", 1.5, NAN, True, np.int64(1), -2**63],
    "dims": [[0], [], [5], [-1], [0, 0], "0", 0, [2**70], [None], (0,), [0.5]],
    "kind": ["allreduce", "fp16", "bf16", "max", "", 5, "allreduce\x00", "ALLREDUCE"],
    "float": [1.0, 2, 0, -1, NAN, float("inf"), "x", 2**70, 1e-300, -0.0],
    "strategy": ["optimal", "compat", "", 5, "x", "optimal\x00"],
    "comm": [MPI.COMM_SELF, MPI.COMM_NULL, 5, "x", MPI.COMM_WORLD],
    "ranks": [[0], [1, 0][:N], [0, 0], [-1, 0], [0, 2**70], "0,1", [0.5, 1], list(range(N + 1))],
    "op": ["sum", "avg", "max", "mean", "", 5, "SUM", "sum\x00", " avg "],
    "dim": [0, -1, 2**70, "0", 1.5, True],
    "path": ["/dev/null", "/", "", "/nonexistent", 5, b"x", "a\x00b", "/dev/zero",
             "/proc/self/status"],
    "rules": [[], {}, [5], [{"match": 5}], [{"placements": "S(0)"}], {"*": "S(99)"},
              [{"match": "*", "placements": [Odd()]}], "/nonexistent", "[", 5, b"x",
              [{"match": "*", "placements": "R", "dtype": np.int16}], "[{\"match\": 5}]",
              [{"match": "*", "placements": "P"}], {"*": "R", "l*": 7}],
    "names": [[], ["missing"], "l0.weight", [5], [None], ["a\x00b"], ["l0.weight"] * 2],
    "framework": ["numpy", "torch", "", 5, "np"],
    "device": ["cpu", "cuda", "cuda:0", 5, ""],
}
ARG_KIND = {"local": "array", "buf": "array", "out": "array", "src": "pl", "dst": "pl",
            "placements": "pl", "shape": "shape", "dtype": "dtype", "to_dtype": "dtype",
            "reduce_dtype": "dtype", "async_op": "bool", "relabel": "bool", "force_sum": "bool",
            "staging_cap": "int", "shard_dim": "int", "rank": "int", "dims": "dims",
            "shard_dims": "dims", "replicate_dims": "dims", "kind": "kind", "factor": "float",
            "strategy": "strategy", "comm": "comm", "ranks": "ranks", "reduce_op": "op",
            "dim": "dim", "path": "path", "rules": "rules", "names": "names",
            "framework": "framework", "device": "device", "shapes": "shape", "dtypes": "dtype"}
OPTIONAL = {"redistribute": ["staging_cap", "to_dtype", "dtype", "relabel", "out"],
            "plan": ["to_dtype", "staging_cap", "relabel"], "load": ["rank", "framework",
            "device"], "reduce_scatter_grads": ["shard_dims", "replicate_dims"],
            "redistribute_many": ["outs", "dtypes"]}


def bad_value(rng, name, good, one_rank):
    """A bad value for argument `name` (its good value `good`)."""
    if name in ("mesh", "to_mesh"):  # (before the odd values: see meshes())
        return rng.choice(meshes(good, one_rank))
    if rng.random() < 0.2:
        return rng.choice(odd_values())
    if name in ("locals", "grads", "outs"):
        good = list(good) if isinstance(good, list) and good else [np.zeros(4, np.float32)]
        k = rng.randrange(len(good))
        good[k] = transform(rng.choice(ARRAY_BAD), good[k])
        return rng.choice([good, good[:0], good * 3, tuple(good), iter(good)])
    pool = KINDS[ARG_KIND.get(name, "int")]
    v = rng.choice(pool)
    if callable(v):
        return transform(v, good if isinstance(good, np.ndarray) else np.zeros((4, 3), np.float32))
    return v


def transform(bad, a):
    try:
        return bad(np.asarray(a))
    except Exception:  # noqa: BLE001  (a change that fits no such array: the value as it is)
        return a


def known_open(fn, kw, one_rank):
    """A case of a bug found here and still open (the closing note of issue 72 files it): a
    refusal on one rank is not shared when the tensor is one byte (u8 of one element: the
    other ranks return their own block). Left out until it is fixed; then delete this."""
    many = kw.get("locals")
    arrays = [kw.get("local")] + (list(many) if isinstance(many, (list, tuple)) else [])
    return one_rank and fn in ("redistribute", "redistribute_many") and any(
        isinstance(a, np.ndarray) and a.itemsize == 1 and a.size <= 1 for a in arrays)


def mutate(rng, fn, kw, one_rank):
    orig = kw
    kw = dict(kw)
    for _ in range(rng.choice([1, 1, 1, 2])):
        names = sorted(kw) + OPTIONAL.get(fn, [])
        r = rng.random()
        if r < 0.03:
            kw["nonsense"] = 1  # a keyword no call takes
        elif r < 0.06 and kw:  # a required one missing, or an optional one (not the mesh on
            name = rng.choice(sorted(kw))  # one rank: the others could not know the group)
            if not (one_rank and name in ("mesh", "to_mesh")):
                del kw[name]
        elif names:
            name = rng.choice(names)
            bad = bad_value(rng, name, kw.get(name), one_rank)
            # (on one rank, another shape of the mesh with dims= given makes other groups:
            # the case meshes() leaves out, so the mesh stays)
            grouped = any(kw.get(k) is not None for k in ("dims", "shard_dims", "replicate_dims"))
            kw[name] = kw.get(name) if one_rank and grouped and name == "mesh" else bad
    # (and the same when dims= came after the mesh: a group of one on this rank alone, which
    # cannot know the others wait for it, as docs/python.md says of meshes that differ)
    if one_rank and any(kw.get(k) is not None for k in ("dims", "shard_dims", "replicate_dims")):
        kw["mesh"] = dict(orig).get("mesh", kw.get("mesh"))
    return kw


# ---- one case ----------------------------------------------------------------------------

def short(v):
    if isinstance(v, dtr.Mesh) and v.comm.Get_size() == 1:
        return repr(v) + " on COMM_SELF"
    if isinstance(v, np.ndarray):
        flags = ("C" if v.flags.c_contiguous else "") + ("" if v.flags.writeable else " ro")
        return f"array({v.shape}, {v.dtype.str}{', ' + flags if flags else ''})"
    if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
        return "[" + ", ".join(short(x) for x in v[:4]) + "]"
    text = re.sub(r" at 0x[0-9a-f]+", "", repr(v))
    return text if len(text) <= 80 else text[:60] + f"...({len(text)} chars)"


def make_case(seed, n):
    """(function name, this rank's arguments, the rank whose arguments alone are bad or None)."""
    rng = random.Random(f"{seed}:{n}")
    fn = rng.choice(sorted(GOOD) + ["redistribute"] * 4 + ["plan", "redistribute_many"] * 2)
    r = rng.random()
    bad_rank = rng.randrange(N) if r < 0.45 and fn in COLLECTIVE else None
    with warnings.catch_warnings():  # (numpy's, on casts the bad arrays make)
        warnings.simplefilter("ignore")
        good = GOOD[fn](rng)
        bad = mutate(rng, fn, good, bad_rank is not None) if r < 0.9 else good
    if known_open(fn, good, bad_rank is not None) or known_open(fn, bad, bad_rank is not None):
        bad = good
    mine = bad if bad_rank is None or bad_rank == RANK else good
    return fn, mine, bad_rank


def call_text(fn, kw):
    text = f"dtr.{fn}(" + ", ".join(f"{k}={short(v)}" for k, v in kw.items()) + ")"
    return text.replace(CTX["tmp"], "$TMP")  # (each rank's own directory: the same text)


def run_call(fn, kw):
    """(class name, status, allowed, text) of what the call raised, or None."""
    unraisable = []
    old, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        use(getattr(dtr, fn)(**kw))
        e = None
    except Exception as x:  # noqa: BLE001  (what was raised is what this checks)
        e = x
    finally:
        sys.unraisablehook = old
    if unraisable:
        return ("unraisable", None, False, repr(unraisable[0].exc_value)[:200])
    if e is None:
        return None
    chain = [e, e.__cause__, e.__context__]
    system = any(isinstance(x, SystemError) for x in chain) or "SystemError" in str(e)
    status = getattr(e, "status", None)  # (an internal error: a bug the arguments reached)
    signature = type(e) is TypeError and fn in PYTHON_SIGNATURES and \
        e.__traceback__.tb_next is None  # (raised by the call itself: no frame of it ran)
    ok = (isinstance(e, ALLOWED) or signature) and not system and status != "DTR_ERR_INTERNAL"
    return type(e).__name__, status, ok, str(e)[:200]


def member(fn, kw):
    """Whether this rank takes part with the others: in the call's meshes (a rank outside
    gets None, load() {}, at once), which span more than itself (COMM_SELF's: each alone)."""
    ms = [kw.get(k) for k in ("mesh", "to_mesh") if isinstance(kw.get(k), dtr.Mesh)]
    if any(m.comm.Get_size() == 1 for m in ms):
        return False
    outside_gets_none = fn in COLLECTIVE or (fn == "load" and kw.get("rank") is None)
    return not outside_gets_none or not ms or any(m.coordinate is not None for m in ms)


def cross_problems(fn, outs, bad_rank):
    """What the ranks' outcomes [(member, outcome)] break together."""
    found = [f"rank {r}: {o[0]}{' ' + o[1] if o[1] else ''} is not allowed ({o[3]})"
             for r, (m, o) in enumerate(outs) if o and not o[2]]
    got = [(r, o) for r, (m, o) in enumerate(outs) if m]
    raised = [(r, o) for r, o in got if o]
    if fn in COLLECTIVE:
        if raised and len(raised) != len(got):
            found.append(f"ranks {[r for r, _ in raised]} raised, the others returned")
        if bad_rank is not None and any(o[1] not in ("DTR_ERR_REMOTE", "DTR_ERR_MISMATCH")
                                        for r, o in raised if r != bad_rank):
            found.append("a rank with good arguments raised other than DTR_ERR_REMOTE or "
                         "DTR_ERR_MISMATCH")
        statuses = [o[1] for _, o in raised]
        if "DTR_ERR_REMOTE" in statuses and all(s == "DTR_ERR_REMOTE" for s in statuses):
            found.append("every rank says another rank refused its arguments")
    elif bad_rank is None and len({o and o[0] for _, o in got}) > 1:
        found.append("the same arguments, different outcomes on the ranks")
    return found


def good_call(n):
    """S(0) -> R of an array that changes per case: a wrong or raising call means out of step."""
    full = np.arange(4 * N * 3, dtype=np.float32).reshape(4 * N, 3) + n
    try:
        got = dtr.redistribute(full[4 * RANK:4 * RANK + 4].copy(), CTX["check"], "S(0)", "R")
        return None if np.array_equal(got, full) else "the good call after it gave wrong values"
    except Exception as e:  # noqa: BLE001
        return f"the good call after it raised {type(e).__name__}: {str(e)[:160]}"


# ---- the loop ----------------------------------------------------------------------------

class Watchdog(threading.Thread):
    """Ends the process when one case runs past CASE_TIMEOUT s, naming the case and saving it
    (with this rank's call: a rank cannot know what the others were given); the calls
    release the GIL while they wait, and faulthandler covers a wait that holds it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.deadline, self.case = None, None

    def arm(self, seed, n, fn, text, save_it):
        self.deadline = time.monotonic() + CASE_TIMEOUT
        self.case = (seed, n, fn, text, save_it)
        faulthandler.dump_traceback_later(CASE_TIMEOUT + 10, exit=True)

    def run(self):
        while not (self.deadline and time.monotonic() > self.deadline):
            time.sleep(0.5)
        seed, n, fn, text, save_it = self.case
        print(f"py fuzz: HANG on rank {RANK}: case {n} (seed {seed}) did not return within "
              f"{CASE_TIMEOUT} s: {text}", flush=True)
        if save_it:
            calls = [text if r == RANK else None for r in range(N)]
            path = os.path.relpath(save(seed, n, calls, ["hang"], f"{fn}-hang-{seed}-{n}"))
            print(f"  replay: mpirun -n {N} {sys.executable} fuzz/py_fuzz.py --replay {path}",
                  flush=True)
        os._exit(1)


def save(seed, n, calls, found, name=None):
    """The case as fuzz/regressions/py/<name>.json; its path. calls: each rank's, or None."""
    body = json.dumps({"seed": seed, "case": n, "calls": calls, "problem": found}, indent=1)
    name = name or calls[0].split("(")[0][4:] + "-" + hashlib.sha1(body.encode()).hexdigest()[:10]
    os.makedirs(REGRESSIONS, exist_ok=True)
    path = os.path.join(REGRESSIONS, f"{name}.json")
    with open(path, "w") as f:
        f.write(body + "\n")
    return path


class Fuzzer:
    def __init__(self, seed):
        self.seed, self.cases, self.failed, self.seen = seed, 0, 0, set()
        self.outcomes = {}  # what rank 0's calls gave: class name -> cases
        self.dog = Watchdog()
        self.dog.start()

    def case(self, n, stop=False, want_calls=None):
        """Runs case n on every rank; returns rank 0's stop flag (shared)."""
        fn, kw, bad_rank = make_case(self.seed, n)
        text = call_text(fn, kw)
        if want_calls is not None:  # a saved case: the same calls still, or none at all
            calls = COMM.allgather(text)
            if any(w not in (None, c) for w, c in zip(want_calls, calls)):
                self.cases += 1
                self.report(n, fn, calls, [(True, None)] * N, [
                    "stale: the seed makes other calls now (the generator changed): "
                    "delete the file, or fix the finding and delete it"], bad_rank, False)
                return False
        self.dog.arm(self.seed, n, fn, text, save_it=want_calls is None)
        outcome = run_call(fn, kw)
        name = outcome[0] if outcome else "returned"
        self.outcomes[name] = self.outcomes.get(name, 0) + 1
        after = good_call(n)
        self.dog.deadline = None
        faulthandler.cancel_dump_traceback_later()
        every = COMM.allgather((member(fn, kw), outcome, text, after, stop))
        outs = [(m, o) for m, o, _, _, _ in every]
        calls = [t for _, _, t, _, _ in every]
        found = cross_problems(fn, outs, bad_rank)
        found += [f"rank {r}: {a}" for r, (_, _, _, a, _) in enumerate(every) if a]
        self.cases += 1
        if found:
            self.report(n, fn, calls, outs, found, bad_rank, save_it=want_calls is None)
        return every[0][4]

    def report(self, n, fn, calls, outs, found, bad_rank, save_it):
        self.failed += 1
        # one full report per kind of problem: an exception class and its message without
        # the names and numbers in it (one for every call's unknown keyword); else per call
        raised = [o for _, o in outs if o and not o[2]]
        key = (raised[0][0], re.sub(r"[\w.]+\(\)|'[^']*'|not [\w.]+$|[0-9]+", "",
                                    raised[0][3])[:40]) \
            if raised else (fn, re.sub(r"[0-9]+", "N", found[0]))
        if RANK != 0 or key in self.seen or len(self.seen) >= 20:
            return
        self.seen.add(key)
        print(f"py fuzz: FAIL case {n} (seed {self.seed}): {'; '.join(found)}")
        for r, (c, (m, o)) in enumerate(zip(calls, outs)):
            tag = " (the bad rank)" if r == bad_rank else ""
            got = f"{o[0]} {o[1] or ''}: {o[3]}" if o else "returned"
            print(f"  rank {r}{tag}: {c}\n    -> {got}")
        if save_it:
            path = os.path.relpath(save(self.seed, n, calls, found))
            print(f"  replay: mpirun -n {N} {sys.executable} fuzz/py_fuzz.py --replay {path}")
        sys.stdout.flush()

    def fuzz(self, seconds):
        end, n = time.monotonic() + seconds, 0
        while True:
            n += 1
            if self.case(n, stop=RANK == 0 and time.monotonic() > end):
                break


def setup(tmp):
    CTX.update(tmp=tmp, mesh=dtr.Mesh(N), check=dtr.Mesh(N), first=dtr.Mesh(1),
               rev=dtr.Mesh(N, ranks=list(range(N))[::-1]), last=dtr.Mesh(1, ranks=[N - 1]),
               alone=dtr.Mesh(1, comm=MPI.COMM_SELF), Nx1=dtr.Mesh((N, 1)))
    CTX["1xN"] = dtr.Mesh((1, N))
    header = {"l0.weight": {"dtype": "F32", "shape": [2 * N, 3], "data_offsets": [0, 24 * N]},
              "l1.bias": {"dtype": "F32", "shape": [5], "data_offsets": [24 * N, 24 * N + 20]},
              "__metadata__": {"format": "pt"}}
    text = json.dumps(header).encode()
    CTX["st"] = os.path.join(tmp, "model.safetensors")
    with open(CTX["st"], "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + bytes(24 * N + 20))
    # broken copies for load() and load_metadata(): the path pool takes them too
    data = open(CTX["st"], "rb").read()
    for i, bad in enumerate([data[:9], data[:-4], (2**63).to_bytes(8, "little") + data[8:],
                             data.replace(b"F32", b"Q32", 1), data.replace(b"[0, 24", b"[9, 24"),
                             data.replace(b'"shape": [5]', b'"shape": [-5]')]):
        path = os.path.join(tmp, f"bad{i}.safetensors")
        with open(path, "wb") as f:
            f.write(bad)
        KINDS["path"].append(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--replay", help="run this one saved case")
    a = ap.parse_args()
    # a huge valid size fails its allocation instead of taking the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    seed = COMM.bcast(a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32))
    if RANK == 0:
        print(f"py fuzz: seed {seed}, {N} ranks", flush=True)
    with tempfile.TemporaryDirectory(prefix="dtr-py-fuzz-") as tmp:
        setup(tmp)
        files = [a.replay] if a.replay else sorted(
            os.path.join(REGRESSIONS, f) for f in os.listdir(REGRESSIONS)
            if f.endswith(".json")) if os.path.isdir(REGRESSIONS) else []
        saved_cases = [json.load(open(path)) for path in files]
        # the hangs last: one ends the process, and the others would not run
        order = sorted(range(len(files)), key=lambda i: any(
            p.startswith("hang") for p in saved_cases[i]["problem"]))
        fz = Fuzzer(seed)
        for i in order:
            path, saved = files[i], saved_cases[i]
            fz.seed, failed = saved["seed"], fz.failed
            fz.case(saved["case"], want_calls=saved["calls"])
            if fz.failed > failed and RANK == 0:
                print(f"py fuzz: the saved case {os.path.relpath(path)} fails", flush=True)
        fz.seed = seed
        if not a.replay:
            fz.fuzz(a.seconds)
    if RANK == 0:
        print("py fuzz: outcomes on rank 0: " + ", ".join(
            f"{k} {v}" for k, v in sorted(fz.outcomes.items(), key=lambda x: -x[1])))
        print(f"py fuzz: {fz.cases} cases, {fz.failed} failed", flush=True)
    return 1 if fz.failed else 0


if __name__ == "__main__":
    sys.exit(main())
