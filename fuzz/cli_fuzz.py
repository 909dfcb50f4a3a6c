#!/usr/bin/env python3
"""Fuzzes the dtr CLI's arguments and input files (standard library only).

    python3 fuzz/cli_fuzz.py --dtr PATH --seconds N [--seed S]
    python3 fuzz/cli_fuzz.py --dtr PATH --replay FILE     # one saved case; its files kept

A case is an argv for one command: a known-good command line mutated (a flag dropped,
duplicated, swapped, a character flipped, a value replaced), or random picks among the
command's flags with good, boundary and garbage values; its files (batch, model and rules
JSON, safetensors files, a saved checkpoint) written, or mutated, in a fresh directory.
layout, plan, --help and grad --dry-run run directly; run, grad and reshard under mpirun -n 2
(half the time). Each case has a timeout (a hang fails) and a 2 GiB address-space limit (a
huge valid size fails its allocation instead of filling the machine). Properties: no signal;
exit 0, 1, 2 or 3; on exit 2 or 3 one line on stderr, "dtr CMD: ..." (mpirun's banners
aside), and nothing on stdout run directly; no message cut short (a "dtr" line ending in
':'), no "(null)", sanitizer or SystemError text; exit 0 of layout/plan --json prints JSON.
A failing case is printed (seed, case, shell-quoted command, files) and saved as
fuzz/regressions/cli/<cmd>-<hash>.json (argv, env, files; "$W" is the case's directory);
saved cases are replayed first. Ends with "cli fuzz: N cases, K failed".
"""
import argparse
import base64
import hashlib
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REGRESSIONS = os.path.join(HERE, "regressions", "cli")
TIMEOUT_S = 20
MEM_LIMIT = 2 << 30
MPIRUN = ["mpirun", "--oversubscribe", "-n", "2"]
# (odls_base_sigkill_timeout 0: a job whose rank exits non-zero ends in 0.3 s, not 2.3 s)
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl": "self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
           "OMPI_MCA_odls_base_sigkill_timeout": "0"}
# text that must never reach stderr: a crash, a sanitizer, a C string that was NULL, Python
BAD_TEXT = ["(null)", "AddressSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
            "Segmentation", "SystemError", "Traceback", "stack smashing", "double free",
            "exited on signal", "terminated on signal", "killed by signal"]
ERROR_LINE = re.compile(r"^dtr( [a-z-]+)?: ")
RANK_LINE = re.compile(r"^dtr [a-z]+: ranks? [0-9][0-9, -]*: ")  # one rank 0 prints per failure
OMPI_LINE = re.compile(r"^\[[^\]\s]+:[0-9]+\] ")  # Open MPI's own "[host:pid] ..." lines


# ---- values and files ---------------------------------------------------------------------

WORK = ""  # the current case's directory ("$W" in a saved case)
GOOD = {
    "mesh": ["1", "2", "2", "1x2", "2x1", "4", "2x2", "3", "2x2x2"],
    "shape": ["8", "8x6", "5", "3x5", "0", "4x0", "", "scalar", "7x3x2", "1x1x1x1", "64x64"],
    "pl": ["S(0)", "R", "P", "P(sum)", "P(avg)", "P(max)", "P(min)", "P(product)", "S(1)",
           "S(-1)", "S(0),R", "R,S(1)", "S(0),S(1)", "S(0),S(0)", "S(0)[1],S(0)[0]",
           "_S(0,2),S(0)", "P,R", "R,P(max)", "[S(0), R]", "S(2)"],
    "dtype": ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "f8e4m3", "f8e5m2", "c64", "c128"],
    "ranks": ["0,1", "1,0", "0", "1", "0,1,2,3", "3,2,1,0", "2,3"],
    "count": ["0", "1", "2", "3"], "num": ["1", "7", "1000", "12"], "dim": ["0", "1", "-1"],
    "float": ["5", "10", "0.5", "1e-3", "0", "1,2", "5,5,5"],
    "value": ["0", "1", "59904", "256", "-8", "0.25"], "bytes": ["1K", "64", "1M", "100", "0"],
    "strategy": ["optimal", "compat"], "fill": ["pattern", "random"],
    "mode": ["ddp", "fsdp", "hsdp"], "backend": ["mpi", "nccl"], "device": ["cpu", "cuda"],
    "buffers": ["private", "shared"], "nodes": ["0", "1", "0,1", "auto", "none"],
    "world": ["1", "2", "4", "12"],
}
BOUNDARY = ["0", "-1", "1", str(2**31), str(-2**31 - 1), str(2**63), str(2**64), "9" * 30,
            "", " ", "1e3", "1e999", "0x10", "nan", "inf", "-inf", "-0", "+1", "1.5", "07",
            "1_000", "é", "✓", "\u202e", "\udcff\udcfe", "S(0),R", "[4,4]", "P(avg)",
            "S(99)", "S(-99)", "x" * 20000, "8x" * 4000 + "8", "S(0)," * 3000 + "R", "--", "-",
            "--json", "/", "/dev/null", "%s%n%p", "'", '"', "\\", "\t", "a b", "4x4", "2x2",
            "R", "P", "scalar", "auto", "none", "1,2,3", "0,0", "65536x65536", "2147483647"]
PATHS = ["$W", "$W/missing", "$W/missing/deeper", "/dev/null", "", "/", "/dev/zero",
         "/proc/self/status", "/proc/self/mem", "$W/" + "d" * 300]
# values of the flags that count work (iterations, microbatches): a huge valid count is a
# long run, not a parsing bug, so they draw no plain integer above this
WORK_MAX = 1000
JSON_ODD = [None, True, False, 0, -1, 2**31, 2**63, 2**64, -2**63 - 1, 1.5, 1e308, -0.0, "",
            "x" * 300, "S(99)", "P(avg)", "a\u0000b", "é✓", [], {}, [2**31, 2**31], [-1],
            "[4,4]", "0x4", "scalar", "f99", "*", "[", "\\"]
COST = {"--alpha-us": "float", "--bandwidth-gbps": "float", "--local-gbps": "float",
        "--nodes-of": "nodes", "--inter-alpha-us": "float", "--inter-bandwidth-gbps": "float"}
SPEC = {"--mesh": "mesh", "--shape": "shape", "--dtype": "dtype", "--ranks": "ranks"}
MOVE = {**SPEC, "--from": "pl", "--to": "pl", "--to-dtype": "dtype", "--strategy": "strategy",
        "--backward": None, "--backward-dtype": "dtype", "--batch": "batch",
        "--to-mesh": "mesh", "--to-ranks": "ranks", "--relabel": None, "--staging-cap": "bytes",
        "--json": None, **COST}
FLAGS = {  # each command's flags and the kind of value each takes (None: a switch)
    "layout": {**SPEC, "--placements": "pl", "--json": None, "--all": None, "--svg": "svg"},
    "plan": {**MOVE, "--compare": None, "--svg": "svg"},
    "run": {**MOVE, "--iters": "count", "--warmup": "count", "--verify": None,
            "--nonblocking": None, "--fill": "fill", "--seed": "num", "--input": "indir",
            "--dump": "dumpdir", "--backend": "backend", "--device": "device",
            "--buffers": "buffers", "--inject-mismatch": "count"},
    "grad": {"--mode": "mode", "--mesh": "mesh", "--dtype": "dtype", "--numel": "num",
             "--shape": "shape", "--shard-dim": "dim", "--microbatches": "count",
             "--factor": "value", "--force-sum": None, "--base": "value", "--step": "value",
             "--ranks": "ranks", "--verify": None, "--json": None, "--backend": "backend",
             "--device": "device", "--iters": "count", "--warmup": "count", "--dry-run": None,
             "--world": "world", "--model": "model"},
    "reshard": {"--from": "src", "--to": "to", "--mesh": "mesh", "--rules": "rules",
                "--consolidate": None, "--max-file-bytes": "bytes"},
}
GOOD_LINES = {  # known-good command lines; {kind}: a file of that kind, written per case
    "layout": ["--mesh 2x2 --shape 2x5 --placements S(1),S(1)", "--mesh 4 --shape 5 "
               "--placements S(0) --json", "--mesh 2x2 --shape 8x8 --placements S(0),P(avg) "
               "--dtype bf16", "--mesh 2x4 --shape 16x8 --placements S(0)[1],S(0)[0] --all",
               "--mesh 2 --shape scalar --placements R --ranks 1,0 --json"],
    "plan": ["--mesh 4 --shape 8x8 --from S(0) --to S(1)", "--mesh 2x2 --shape 8x8 --from "
             "S(0),S(1) --to S(1),S(0) --compare", "--mesh 2x2 --shape 1024x1024 --from "
             "S(0),S(0) --to R,S(0) --json", "--mesh 2x2 --batch {batch}", "--mesh 2 --batch "
             "{batch} --json --strategy compat", "--mesh 2x4 --shape 64x64 --from S(0),S(1) "
             "--to S(1),S(0) --nodes-of 0", "--mesh 2x2 --ranks 0,1,2,3 --shape 64x60 --from "
             "S(0),P --to-mesh 4 --to-ranks 4,5,6,7 --to S(1)", "--mesh 2x3 --shape 33x17 "
             "--from S(1),S(0) --to-mesh 3x2 --to-ranks 5,4,3,2,1,0 --to S(0),S(1) --relabel "
             "--json", "--mesh 2 --shape 8x6 --from P --to S(0) --backward --backward-dtype "
             "f32 --to-dtype bf16", "--mesh 2 --batch {batch} --to-mesh 2 --to-ranks 1,0 "
             "--staging-cap 1K --json"],
    "run": ["--mesh 2 --shape 8x6 --from S(0) --to R --verify --iters 1 --warmup 0",
            "--mesh 2 --shape 5x3 --from P --to S(0) --verify --fill random --seed 3 --json",
            "--mesh 1x2 --shape 4x4 --from R,S(1) --to S(0),R --verify --backward "
            "--nonblocking --iters 2", "--mesh 2 --shape 8x6 --from S(0) --to R --verify "
            "--input {indir}", "--mesh 2 --shape 8x6 --from S(0) --to S(1) --dump {dumpdir} "
            "--iters 0", "--mesh 2 --shape 7x3 --from S(0) --to-mesh 2 --to-ranks 1,0 --to R "
            "--verify --relabel --staging-cap 64", "--mesh 2 --batch {batch} --verify "
            "--iters 1", "--mesh 2 --batch {batch} --to-mesh 2 --to-ranks 1,0 --verify",
            "--mesh 2 --shape 6 --from S(0) --to R --verify --buffers shared --iters 1",
            "--mesh 2 --shape 6 --from S(0) --to R --verify --inject-mismatch 1 --iters 0"],
    "grad": ["--mode ddp --mesh 2 --numel 1000 --verify --iters 1", "--mode fsdp --mesh 2 "
             "--shape 6x5 --shard-dim 1 --dtype bf16 --microbatches 2 --verify --json "
             "--iters 1", "--mode hsdp --mesh 1x2 --numel 77 --dtype f16 --base 59904 --step "
             "256 --verify --iters 0", "--mode fsdp --mesh 2 --numel 33 --factor 3 "
             "--force-sum --verify --iters 1 --warmup 0", "--mode hsdp --mesh 1x2 --model "
             "{model} --verify --iters 1 --warmup 0"],
    "dry": ["--dry-run --world 12 --dtype f16", "--dry-run --world 4 --mode hsdp --mesh 2x2 "
            "--json", "--dry-run --world 8 --mode fsdp --factor 2 --force-sum"],
    "reshard": ["--from {src} --to {to} --mesh 2 --rules {rules}", "--from {ckpt} --to {to} "
                "--consolidate", "--from {ckpt} --to {to} --consolidate --max-file-bytes 200",
                "--from {ckpt} --to {to} --mesh 1x2 --rules {rules}"],
}
ST_SIZES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "U8": 1,
            "F8_E4M3": 1, "F8_E5M2": 1, "BOOL": 1, "I16": 2}
GOLDEN = ""  # a checkpoint dtr reshard saved on 2 ranks, copied and mutated per case


def takes_value(cmd, flag):
    return FLAGS.get(cmd, {}).get(flag.split("=")[0], None) is not None


def garbage(rng):
    alphabet = "SRP()[],x0123456789-_ .:/\\'\"é✓\u202e\t\n\x01\x7f\udcff"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))


def value(rng, kind, cmd=""):
    """A value for a flag of this kind: mostly good, else a boundary value or garbage."""
    r = rng.random()
    if kind in FILE_KINDS:
        return FILE_KINDS[kind](rng) if r < 0.8 else rng.choice(PATHS)
    if r < 0.6:
        return rng.choice(GOOD[kind])
    return capped(kind, cmd, rng.choice(BOUNDARY) if r < 0.9 else garbage(rng))


def capped(kind, cmd, v):
    """v, or -1 in place of a count of work over WORK_MAX (a long run, not a bug)."""
    if kind == "count" and cmd in ("run", "grad") and re.fullmatch(r"\+?[0-9]+", v.strip()) \
            and int(v) > WORK_MAX:
        return "-1"
    return v


def write(rel, data):
    p = os.path.join(WORK, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return "$W/" + rel


def mutate_obj(rng, obj):
    """A copy of a JSON value with one node replaced, dropped, duplicated or renamed."""
    obj = json.loads(json.dumps(obj))
    nodes = []

    def walk(o):
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in list(items):
            nodes.append((o, k))
            walk(v)
    walk(obj)
    if not nodes:
        return rng.choice(JSON_ODD)
    c, k = rng.choice(nodes)
    r = rng.random()
    if r < 0.6:
        c[k] = rng.choice(JSON_ODD)
    elif r < 0.75:
        del c[k]
    elif isinstance(c, list):
        c.insert(k, c[k])
    else:
        c[rng.choice(["", "match", "shape", "Shape", "x" * 50, "__metadata__"])] = c.pop(k)
    return obj


def mutate_text(rng, text):
    """The text with a byte-level change: cut, a character flipped, junk, deep nesting."""
    r, i = rng.random(), rng.randint(0, len(text))
    if r < 0.25:
        return text[:i]
    if r < 0.5 and text:
        i = min(i, len(text) - 1)
        return text[:i] + rng.choice("{}[]\",:0-9ex\\\x00é") + text[i + 1:]
    if r < 0.7:
        junk = rng.choice(["NaN", "1e999", "-0", "9" * 40, ",", "\ufeff", "null"])
        return text[:i] + junk + text[i:]
    if r < 0.8:
        return "[" * 100000 + "]" * 100000
    return rng.choice(["", " ", "{}", "[]", "null", "0", "\"x\"", "[{}]", "\x00"])


def json_file(rng, rel, obj):
    """obj as a JSON file, mutated a third of the time (its structure, or its text)."""
    r = rng.random()
    if r < 0.2:
        obj = mutate_obj(rng, obj)
    text = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    return write(rel, mutate_text(rng, text) if 0.2 <= r < 0.33 else text)


def json_kind(rng, kind):
    """A batch, model or rules file (mutated a third of the time)."""
    pick = rng.choice
    items = {"batch": lambda: {"shape": pick(["8x6", "4", [4, 4], "scalar", "5x3"]),
                               "dtype": pick(GOOD["dtype"]), "from": pick(["S(0)", "R", "P"]),
                               "to": pick(["R", "S(0)", "S(1)"])},
             "model": lambda: {"shape": pick(["6x4", [5], "3", "2x2x2"]),
                               "group": pick(["h.0", "h.1"])}}
    if kind == "rules":
        obj = [{"match": "*.weight", "placements": pick(["S(0)", "R,S(0)", "S(1)"])},
               {"match": "*", "placements": pick(["R", "R,R"])}]
        if rng.random() < 0.3:
            obj[0]["dtype"] = pick(["bf16", "f32", "f16"])
    else:
        obj = [items[kind]() for _ in range(rng.randint(1, 3))]
    return json_file(rng, kind + ".json", obj)


def st_bytes(rng, n):
    """A small safetensors file of n tensors, mutated a third of the time."""
    header, data = {}, b""
    for i in range(n):
        dt = rng.choice(["F32", "F64", "F16", "BF16", "I32", "U8", "F8_E4M3"])
        shape = [rng.randint(1, 6) for _ in range(rng.randint(0, 3))]
        size = ST_SIZES[dt] * math.prod(shape)
        header[f"l{i}." + rng.choice(["weight", "bias"])] = {
            "dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes(rng.getrandbits(8) for _ in range(size))
    header["__metadata__"] = {"format": "pt"}
    r = rng.random()
    if r < 0.15:
        header = mutate_obj(rng, header)
    text = json.dumps(header).encode()
    body = len(text).to_bytes(8, "little") + text + data
    if 0.15 <= r < 0.3:
        i = rng.randrange(len(body))
        body = body[:i] + bytes([rng.getrandbits(8)]) + body[i + 1:] if rng.random() < 0.6 \
            else body[:i]
    elif 0.3 <= r < 0.35:
        body = rng.choice([2**63, 2**64 - 1, 0, 7, 1 << 40]).to_bytes(8, "little") + body[8:]
    return body


def src(rng):
    if rng.random() < 0.7:
        return write("model.safetensors", st_bytes(rng, rng.randint(1, 4)))
    names = {}
    for k in (1, 2):
        data = st_bytes(rng, 2)
        write(f"src/part{k}.safetensors", data)
        n = int.from_bytes(data[:8], "little")
        try:
            names.update({t: f"part{k}.safetensors" for t in json.loads(data[8:8 + n])})
        except ValueError:
            pass
    if rng.random() < 0.5:
        json_file(rng, "src/model.safetensors.index.json", {"metadata": {}, "weight_map": names})
    return "$W/src"


def ckpt(rng):
    if not GOLDEN:
        return src(rng)
    shutil.copytree(GOLDEN, os.path.join(WORK, "ckpt"), dirs_exist_ok=True)
    if rng.random() < 0.4:
        with open(os.path.join(GOLDEN, "dtr.manifest.json")) as f:
            json_file(rng, "ckpt/dtr.manifest.json", json.load(f))
    elif rng.random() < 0.2:
        write("ckpt/rank-00001-of-00002.safetensors", st_bytes(rng, 2))
    return "$W/ckpt"


def directory(rng, kind):
    """--to (missing, empty or not), --input (rank files, right-sized mostly), --dump."""
    name = {"to": "out", "indir": "in", "dumpdir": "dump"}[kind]
    r = rng.random()
    if kind == "indir":
        for k in range(2):
            n = 96 if r < 0.8 else rng.choice([0, 1, 95, 97, 4096])  # 8x6 f32 over 2 ranks
            write(f"in/rank{k}.in", bytes(rng.getrandbits(8) for _ in range(n)))
    elif r < 0.1:
        write(name + "/x", "x")  # an existing non-empty directory
    elif r < (0.2 if kind == "to" else 0.8):
        os.makedirs(os.path.join(WORK, name), exist_ok=True)
    return "$W/" + name


def svg_path(rng):
    """--svg: a new file in the case's directory, one there already, or stdout."""
    r = rng.random()
    if r < 0.2:
        write("pic.svg", "there")
    return "-" if r > 0.9 else "$W/pic.svg"


FILE_KINDS = {"src": src, "ckpt": ckpt, "svg": svg_path,
              **{k: lambda rng, k=k: json_kind(rng, k) for k in ("batch", "model", "rules")},
              **{k: lambda rng, k=k: directory(rng, k) for k in ("to", "indir", "dumpdir")}}


def good_line(rng, cmd, dry=False):
    line = rng.choice(GOOD_LINES["dry" if dry else cmd])
    return [cmd] + [FILE_KINDS[t[1:-1]](rng) if t.startswith("{") else t for t in line.split()]


def random_argv(rng, cmd):
    """The command and 0-8 of its flags, each with a value of its kind."""
    argv = [cmd]
    for _ in range(rng.randint(0, 8)):
        flag, kind = rng.choice(sorted(FLAGS[cmd].items()))
        argv += [flag] + ([value(rng, kind, cmd)] if kind and rng.random() < 0.97 else [])
    return argv


def mutate_argv(rng, argv):
    """A known-good argv with 1-3 changes."""
    argv = list(argv)
    for _ in range(rng.randint(1, 3)):
        if not argv:
            break
        i = rng.randrange(1, len(argv)) if len(argv) > 1 else 0
        r = rng.random()
        if r < 0.15:
            del argv[i:i + (2 if takes_value(argv[0], argv[i]) else 1)]
        elif r < 0.25:
            argv[i:i] = argv[i:i + 2]
        elif r < 0.35:
            j = rng.randrange(len(argv))
            argv[i], argv[j] = argv[j], argv[i]
        elif r < 0.5 and argv[i]:
            k = rng.randrange(len(argv[i]))
            argv[i] = argv[i][:k] + garbage(rng)[:1] + argv[i][k + 1:]
        elif r < 0.7 and i > 0 and not argv[i].startswith("-"):
            kind = FLAGS.get(argv[0], {}).get(argv[i - 1])
            argv[i] = capped(kind, argv[0], rng.choice(BOUNDARY + PATHS))
        elif r < 0.85 and argv[0] in FLAGS:
            flag, kind = rng.choice(sorted(FLAGS[argv[0]].items()))
            argv[i:i] = [flag] + ([value(rng, kind, argv[0])] if kind else [])
        elif r < 0.9 and i + 1 < len(argv) and argv[i].startswith("--"):
            argv[i:i + 2] = [argv[i] + "=" + argv[i + 1]]
        elif r < 0.95:
            argv.insert(i, rng.choice(["--bogus", "-x", "--", "-", "--mesh", "--json=1"]))
        else:
            argv = argv[:i]
    return argv


def top_argv(rng):
    cmd = rng.choice(sorted(FLAGS) + ["", "nope", "LAYOUT", "--version", "--help", "-h"])
    return rng.choice([[], [cmd], [cmd, "--help"], [cmd, "-h"], [cmd, "--help", garbage(rng)],
                       ["--version", cmd], [garbage(rng)], [cmd, garbage(rng)]])


def random_env(rng):
    name = rng.choice(["DTR_ALPHA_US", "DTR_BANDWIDTH_GBPS", "DTR_LOCAL_GBPS",
                       "DTR_INTER_ALPHA_US", "DTR_INTER_BANDWIDTH_GBPS"])
    return {name: rng.choice(BOUNDARY[:30]).replace("\udcff\udcfe", "x")}


def prepare(dtr, work):
    """The golden checkpoint: a small model saved on 2 ranks by dtr reshard itself."""
    global GOLDEN
    fresh_dir()
    header = {f"l{i}.weight": {"dtype": "F32", "shape": [4, i + 1], "data_offsets":
                               [8 * i * (i + 1), 8 * (i + 1) * (i + 2)]} for i in range(3)}
    text = json.dumps(header).encode()
    write("golden.safetensors", len(text).to_bytes(8, "little") + text + bytes(range(96)))
    write("rules.json", json.dumps([{"match": "*", "placements": "S(0)"}]))
    dest = os.path.join(work, "golden")
    r = subprocess.run(MPIRUN + [dtr, "reshard", "--from", "golden.safetensors", "--to", dest,
                                 "--mesh", "2", "--rules", "rules.json"], env=base_env({}),
                       cwd=WORK, capture_output=True, timeout=60)
    GOLDEN = dest if r.returncode == 0 else ""
    if not GOLDEN:
        print(f"cli fuzz: (no golden checkpoint: {r.stderr.decode()[:200]})")


# ---- running one case ------------------------------------------------------------------

def limit_memory():
    # in the child, before exec: huge but valid sizes fail their allocation, quickly
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def base_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DTR_", "OMPI_MCA_"))}
    env.update(MPI_ENV)
    env.update(extra)
    return env


def execute(dtr, case, wdir):
    """(exit code or -signal or None on timeout, stdout, stderr) of one case run in wdir."""
    argv = [a.replace("$W", wdir) for a in case["argv"]]
    full = (MPIRUN if case["mpirun"] else []) + [dtr] + argv
    p = subprocess.Popen(full, cwd=wdir, env=base_env(case.get("env", {})),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=limit_memory, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT_S * (2 if case["mpirun"] else 1))
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # mpirun and its ranks: one process group
        out, err = p.communicate()
        return None, out, err


def strip_banners(err):
    """stderr without Open MPI's own blocks (between lines of dashes) and blank lines."""
    keep, inside = [], False
    for line in err.splitlines():
        if line.startswith("-----"):
            inside = not inside
        elif not inside and line.strip():
            keep.append(line)
    return keep


def switch_on(argv, flag):
    """Whether `flag` stands as a flag in argv (not as another flag's value)."""
    i = 1
    while i < len(argv):
        if argv[i] == flag:
            return True
        i += 2 if takes_value(argv[0], argv[i]) else 1
    return False


def problems(case, rc, out, err):
    """What the case broke, as short texts (empty: it passed)."""
    argv = case["argv"]
    if rc is None:
        return [f"hang: no exit within {TIMEOUT_S * (2 if case['mpirun'] else 1)} s"]
    if rc < 0:
        return [f"killed by signal {-rc}"]
    found = [] if rc in (0, 1, 2, 3) else [f"exit {rc}, not 0, 1, 2 or 3"]
    text = err.decode("utf-8", "replace")
    found += [f"stderr holds {t!r}" for t in BAD_TEXT if t in text]
    lines = strip_banners(text)
    raw_newline = any("\n" in a or "\r" in a for a in argv)  # echoed, it ends a line early
    for line in lines:
        if line.rstrip().endswith(":") and ERROR_LINE.match(line) and not raw_newline:
            found.append(f"a message cut short: {line[:160]!r}")
    if rc in (2, 3):
        n = sum(1 for line in lines if ERROR_LINE.match(line))
        other = [line for line in lines if not ERROR_LINE.match(line) and
                 not OMPI_LINE.match(line)]
        # under mpirun rank 0 prints each distinct failure once, naming the ranks that had
        # it: "dtr run: rank 0: ..." and "dtr run: rank 1: ..." are two failures, not a repeat
        errs = [line for line in lines if ERROR_LINE.match(line)]
        per_rank = case["mpirun"] and n > 1 and len(set(errs)) == n and all(
            RANK_LINE.match(line) for line in errs)
        if (n != 1 and not per_rank) or other:
            found.append(f"exit {rc} with {n} 'dtr ...:' lines and {len(other)} other lines "
                         "on stderr, not one line" + (" (an argument holds a newline, echoed "
                                                      "raw)" if raw_newline else ""))
        if not case["mpirun"] and out:
            found.append(f"exit {rc} with {len(out)} bytes on stdout")
    helped = any(a in ("-h", "--help") for a in argv)
    if rc == 0 and argv and argv[0] in ("layout", "plan") and switch_on(argv, "--json") \
            and not helped:
        try:
            json.loads(out)
        except ValueError as e:
            found.append(f"--json printed no JSON object ({e})")
    return found


# ---- the cases --------------------------------------------------------------------------

def make_case(rng, mpi):
    """One case (argv, whether under mpirun, env), its files written under WORK."""
    cmd = rng.choice(["run", "run", "grad", "reshard"] if mpi else
                     ["layout", "plan", "plan", "top", "dry"])
    if cmd == "top":
        return {"argv": top_argv(rng), "mpirun": False, "env": {}}
    argv = good_line(rng, "grad" if cmd == "dry" else cmd, dry=cmd == "dry")
    r = rng.random()
    if r < 0.55:
        argv = mutate_argv(rng, argv)
    elif r < 0.85:
        argv = random_argv(rng, argv[0])
    env = random_env(rng) if rng.random() < 0.05 else {}
    direct = argv[:1] in (["layout"], ["plan"]) or "--dry-run" in argv or \
        any(a in ("-h", "--help") for a in argv[:2])
    return {"argv": argv, "mpirun": mpi and not direct, "env": env}


def snapshot(wdir):
    """The case's files: {relative path: {"b64": ...} or {"dir": true}} (up to 1 MiB each)."""
    files = {}
    for root, dirs, names in os.walk(wdir):
        files.update({os.path.relpath(os.path.join(root, d), wdir): {"dir": True} for d in dirs})
        for n in names:
            p = os.path.join(root, n)
            if not os.path.islink(p) and os.path.getsize(p) <= (1 << 20):
                with open(p, "rb") as f:
                    files[os.path.relpath(p, wdir)] = {"b64": base64.b64encode(f.read()).decode()}
    return files


def materialize(case, wdir):
    for rel, what in sorted(case.get("files", {}).items()):
        if what.get("dir"):
            os.makedirs(os.path.join(wdir, rel), exist_ok=True)
        else:
            write(rel, base64.b64decode(what["b64"]))


def command_text(dtr, case, wdir):
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in case.get("env", {}).items())
    argv = [a.replace("$W", wdir) for a in case["argv"]]
    return f"cd {shlex.quote(wdir)} && {env}" + shlex.join(
        (MPIRUN if case["mpirun"] else []) + [dtr] + argv)


def save(case, found):
    """The case as fuzz/regressions/cli/<cmd>-<hash>.json; its path."""
    text = json.dumps(dict({k: case[k] for k in ("argv", "mpirun", "env", "files")},
                           problem=found), indent=1, sort_keys=True)
    name = re.sub(r"[^a-z]", "", case["argv"][0] if case["argv"] else "")[:10] or "x"
    os.makedirs(REGRESSIONS, exist_ok=True)
    path = os.path.join(REGRESSIONS, f"{name}-{hashlib.sha1(text.encode()).hexdigest()[:10]}.json")
    with open(path, "w") as f:
        f.write(text + "\n")
    return path


class Fuzzer:
    def __init__(self, dtr, seed):
        self.dtr, self.seed, self.cases, self.failed = dtr, seed, 0, 0
        self.seen = set()  # the kinds of failure already reported in full
        self.exits = {}  # command -> {exit code: cases}: what the cases reached

    def one(self, case, label, path=None):
        """Runs a case (its files already in WORK); reports it if it fails, and saves it
        unless it came from `path` (a saved case)."""
        case.setdefault("files", snapshot(WORK))
        rc, out, err = execute(self.dtr, case, WORK)
        found = problems(case, rc, out, err)
        self.cases += 1
        cmd = case["argv"][0] if case["argv"] and case["argv"][0] in FLAGS else "(top)"
        by = self.exits.setdefault(cmd + (" under mpirun" if case["mpirun"] else ""), {})
        by[rc] = by.get(rc, 0) + 1
        if not found:
            return
        self.failed += 1
        key = (cmd, case["mpirun"], re.sub(r"[0-9]+", "N", found[0].split(":")[0]),
               "newline" in found[0])
        if key in self.seen or len(self.seen) >= 12:
            return
        self.seen.add(key)
        print(f"cli fuzz: FAIL {label} (seed {self.seed}): {'; '.join(found)}")
        print(f"  command: {command_text(self.dtr, case, WORK)}")
        if case["files"]:
            print(f"  files: {', '.join(sorted(case['files']))[:300]}")
        tail = strip_banners(err.decode("utf-8", "replace"))[-3:]
        print("  stderr: " + " | ".join(t[:200] for t in tail))
        path = os.path.relpath(path or save(case, found))
        print(f"  replay: python3 fuzz/cli_fuzz.py --dtr {self.dtr} --replay {path}"
              " (keeps the case's files)", flush=True)

    def replay(self, paths):
        for p in paths:
            with open(p) as f:
                case = json.load(f)
            fresh_dir()
            materialize(case, WORK)
            self.one(case, f"saved case {os.path.relpath(p)}", path=p)

    def fuzz(self, seconds):
        rng = random.Random(self.seed)
        spent = {False: 0.0, True: 0.0}  # in direct cases, in mpirun cases: half each
        end, n = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            n += 1
            fresh_dir()
            case = make_case(random.Random(rng.getrandbits(64)), spent[True] < spent[False])
            t = time.monotonic()
            self.one(case, f"case {n}")
            spent[case["mpirun"]] += time.monotonic() - t


def fresh_dir():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)


def main():
    global WORK
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtr", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--replay", help="run this one saved case and keep its directory")
    a = ap.parse_args()
    sys.stdout.reconfigure(errors="backslashreplace")  # arguments hold invalid UTF-8
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"cli fuzz: seed {seed}", flush=True)
    work = tempfile.mkdtemp(prefix="dtr-cli-fuzz-")
    WORK = os.path.join(work, "case")
    fz = Fuzzer(os.path.abspath(a.dtr), seed)
    try:
        if a.replay:
            fz.replay([a.replay])
            print(f"  (the case's directory is kept: {WORK})")
            work = None
        else:
            fz.replay(sorted(os.path.join(REGRESSIONS, f) for f in os.listdir(REGRESSIONS)
                             if f.endswith(".json")) if os.path.isdir(REGRESSIONS) else [])
            prepare(fz.dtr, work)
            fz.fuzz(a.seconds)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    print("cli fuzz: exits: " + "; ".join(
        f"{c} " + " ".join(f"{k}:{v}" for k, v in sorted(by.items(), key=str))
        for c, by in sorted(fz.exits.items())))
    print(f"cli fuzz: {fz.cases} cases, {fz.failed} failed")
    return 1 if fz.failed else 0


if __name__ == "__main__":
    sys.exit(main())
