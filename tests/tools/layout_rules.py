#!/usr/bin/env python3
"""The layout rules of the source tree, checked: the library, the CLI (cli/), the tests,
the fuzz harnesses and the benchmarks (docs/design.md, "Layout rules").

usage: layout_rules.py [ROOT]     (ROOT: the checkout, default: this file's ../..)

1. Includes: each folder includes only what INCLUDES lists for it. The library's folders
   include only the folders below them: the planner nothing of the runtime, the executor
   or a backend; the runtime nothing of the planner or the executor; the executor of the
   planner only planner.h and geometry.h, never its internal.h, and of the runtime its
   headers (context.h is what it is built on); a backend only the runtime's public
   interface (runtime.h, backend.h, memory.h) and stream.h. The CLI includes the public headers and its own; tests the
   public headers, tests/support/ and the internals of the modules at or below the one
   they test (the planner's through its testing.h only).
2. Sizes: no source file over MAX_FILE_LINES lines, no function over MAX_FUNCTION_LINES
   (tables, which are data, are not functions; a Criterion test body counts as one).
3. Internal headers stay home: a header named internal.h or *_internal.h is included only
   by files of its own folder. What a module lends others has a header named for it
   (core/common.h, numeric/numeric.h, dtensor/order.h, runtime/group.h, runtime/context.h, ...).
4. No circles: no two files call each other's functions, directly or through others (a
   helper both need lives in a file below both).

Every folder with a C source file must be listed: one that is not is a violation too.
Prints one line per violation and a summary; exit status 1 on any violation.
"""
import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120

RUNTIME_PUBLIC = ["runtime/runtime.h", "runtime/backend.h", "runtime/memory.h",
                  "runtime/stream.h"]
BELOW_RUNTIME = ["core/", "placement/", "dtensor/", "numeric/numeric.h",
                  "redistribute/planner/planner.h"]
PLANNER_FOR_EXECUTOR = ["redistribute/planner/planner.h", "redistribute/planner/geometry.h"]

# The public headers: what a program outside the library includes (installed as dtr.h and
# the backends' headers).
PUBLIC = ["dtr.h", "dtr_core.h", "dtr_version.h", "core/status.h", "core/api.h", "core/version.h", "placement/placement.h",
          "dtensor/dtensor.h", "redistribute/planner/planner.h",
          "redistribute/executor/executor.h", "runtime/runtime.h", "runtime/backend.h",
          "runtime/memory.h", "backends/mpi/dtr_mpi.h",
          "backends/cuda/dtr_cuda.h", "backends/nccl/dtr_nccl.h",
          "backends/gloo/dtr_gloo.h", "checkpoint/dtr_checkpoint.h", "autograd/autograd.h", "grad/grad.h", "grad/param_group.h", "autograd/tape.h"]
# What every test may include besides: the shared helpers and the fills.
TESTS = PUBLIC + ["tests/support/", "pattern/pattern.h"]
# The library's own headers below every module a test exercises: core's common helpers and
# the numeric kernels.
LOW = ["core/common.h", "numeric/numeric.h"]

# folder -> the include paths (prefixes) its files may use
INCLUDES = {
    ".": PUBLIC + ["core/common.h"],
    "core": ["core/", "dtr_version.h"],
    "placement": ["core/", "placement/"],
    "dtensor": ["core/", "placement/", "dtensor/"],
    "numeric": ["core/", "placement/", "dtensor/dtensor.h", "numeric/"],
    "redistribute/planner": ["core/", "placement/", "dtensor/", "numeric/numeric.h",
                             "redistribute/planner/"],
    "runtime": ["core/", "placement/", "dtensor/", "numeric/numeric.h", "runtime/"],
    "redistribute/executor": ["core/", "placement/", "dtensor/", "numeric/numeric.h"] +
                             PLANNER_FOR_EXECUTOR + ["runtime/", "redistribute/executor/"],
    "backends/shm": BELOW_RUNTIME + RUNTIME_PUBLIC + ["backends/shm/"],
    "backends/mpi": BELOW_RUNTIME + RUNTIME_PUBLIC + ["backends/mpi/", "backends/shm/",
                                                      "dtr_version.h"],
    "backends/cuda": BELOW_RUNTIME + RUNTIME_PUBLIC + ["backends/cuda/"],
    "backends/nccl": BELOW_RUNTIME + RUNTIME_PUBLIC + [
        "backends/nccl/", "backends/cuda/", "backends/mpi/error.h"],
    "backends/gloo": BELOW_RUNTIME + RUNTIME_PUBLIC + ["backends/gloo/", "backends/shm/shm.h"],
    "checkpoint": ["core/", "placement/", "dtensor/", "numeric/numeric.h",
                   "runtime/memory.h", "runtime/runtime.h", "checkpoint/"],
    "autograd": ["core/", "placement/", "dtensor/", "numeric/numeric.h",
                 "redistribute/planner/planner.h",
                 "redistribute/executor/executor.h", "runtime/group.h",
                 "autograd/"],
    "grad": ["core/", "placement/", "dtensor/", "numeric/numeric.h",
             "redistribute/planner/planner.h", "runtime/runtime.h", "runtime/group.h",
             "autograd/autograd.h", "grad/"],
    "pattern": ["core/", "placement/", "dtensor/", "numeric/numeric.h", "pattern/"],
    "cli": PUBLIC + ["cli/cli.h", "cli/change.h", "cli/run.h", "pattern/pattern.h"],
    "tests/support": TESTS + LOW,
    "tests/core": TESTS + ["core/common.h"],
    "tests/placement": TESTS,
    "tests/dtensor": TESTS + LOW,
    "tests/numeric": TESTS + LOW,
    "tests/redistribute/planner": TESTS + LOW + ["redistribute/planner/testing.h",
                                                 "tests/redistribute/planner/cross_fixture.h"],
    "tests/redistribute/executor": TESTS + LOW,
    "tests/runtime": TESTS + LOW,
    "tests/backends/mpi": TESTS + LOW,
    "tests/backends/gloo": TESTS + LOW,
    "tests/backends/cuda": TESTS + ["tests/backends/cuda/", "backends/cuda/range_boxes.h"],
    "tests/autograd": TESTS + LOW,
    "tests/grad": TESTS + LOW + ["runtime/group.h"],
    "tests/checkpoint": TESTS + LOW + ["checkpoint/dtr_checkpoint.h", "tests/checkpoint/"],
    "tests/reliability": TESTS + ["tests/reliability/"],
    "tests/tools": TESTS + LOW,
    "tests/cli": TESTS,
    "tests/pattern": TESTS + LOW,
    "tests/install": ["dtr/"],
    "fuzz": PUBLIC + ["fuzz/", "tests/support/", "checkpoint/safetensors.h"],
    "bench": PUBLIC + LOW + ["pattern/pattern.h", "bench/copy_probe.h"],  # (the fills that
                                                                          # verify a result)
    "examples/tensor_parallel_mlp": ["dtr/"],
    "docs": PUBLIC,
    "python/dtr": ["_core.h", "_dlpack.h", "_move.h"],  # (the extension module: its own headers, dtr.h
                                             # through <dtr/...>)
    "python/tests": TESTS,  # (fake_space.c: the C tests' fake device as a space, for Python)
}
# Folders that hold no C source (scripts, data, docs, third_party's Bazel wiring).
SKIP = {"third_party", "dist", "tests/data", "bench/pytorch", "python/build",
        "tests/checkpoint/data"}
SOURCE = (".c", ".h", ".cc", ".cu", ".cpp", ".inc")
INTERNAL = re.compile(r"(^|/|_)internal\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a function definition: a line at column 0 naming a function (or a Criterion test), then
# its body's "{"
DEFINITION = re.compile(r"^(?!typedef|struct|enum|union|#|/|\s)[^;=(){}]*?\b(\w+)\s*\(([^;{}]*?)\)\s*\{",
                        re.M | re.S)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# names many files define, which no file calls as another's
NOT_CALLS = {"main", "Test", "ParameterizedTest", "ParameterizedTestParameters", "TestSuite"}


def folders_with_sources(root):
    """Every folder of the checkout holding a C source file, but SKIP's and hidden ones."""
    for d, subdirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        subdirs[:] = sorted(x for x in subdirs if not x.startswith((".", "bazel-")))
        if any(rel == s or rel.startswith(s + "/") for s in SKIP):
            continue
        if any(f.endswith(SOURCE) for f in files):
            yield rel


def files_of(root):
    for folder in sorted(INCLUDES):
        d = os.path.join(root, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(SOURCE):
                yield folder, os.path.join(folder, name)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"'(\\.|[^'\\\n])'", "' '", text)  # ('{' is no brace, '"' no string)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def functions(text):
    """(name, first line, lines) of each function defined in a comment-free text."""
    out = []
    for m in DEFINITION.finditer(text):
        start = text.count("\n", 0, m.start()) + 1
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out.append((m.group(1), start, text.count("\n", m.start(), i) + 1))
    return out


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = []
    texts, defined, twice = {}, {}, set()
    nfiles = 0
    for folder in folders_with_sources(root):
        if folder not in INCLUDES:
            bad.append("%s/: holds C sources but has no entry in the layout rules" % folder)
    for folder, path in files_of(root):
        nfiles += 1
        raw = open(os.path.join(root, path), encoding="utf-8").read()
        for inc in INCLUDE.findall(raw):
            if inc == "dtr_version.h" and folder == "pattern":
                continue
            if not any(inc == p or (p.endswith("/") and inc.startswith(p))
                       for p in INCLUDES[folder]):
                bad.append("%s: includes \"%s\", which %s/ may not" % (path, inc, folder))
            elif INTERNAL.search(inc) and os.path.dirname(inc) != folder:
                bad.append("%s: includes \"%s\", the internal header of another folder"
                           % (path, inc))
        lines = raw.count("\n")
        if lines > MAX_FILE_LINES:
            bad.append("%s: %d lines, over %d" % (path, lines, MAX_FILE_LINES))
        text = strip_comments(raw)
        texts[path] = text
        for name, start, n in functions(text):
            if n > MAX_FUNCTION_LINES:
                bad.append("%s:%d: %s is %d lines, over %d" % (path, start, name, n,
                                                                 MAX_FUNCTION_LINES))
            static = re.search(r"^static\b[^;{]*\b%s\s*\(" % re.escape(name), text, re.M)
            if not static and path.endswith((".c", ".cu", ".cpp")) and name not in NOT_CALLS:
                if name in defined and defined[name] != path:
                    twice.add(name)
                defined.setdefault(name, path)
    for name in twice:  # (a name several programs define: no file calls it as another's)
        del defined[name]
    # the file graph: a -> b when a calls a function b defines (not static)
    edges = {p: set() for p in texts}
    for path, text in texts.items():
        if not path.endswith((".c", ".cu", ".cpp")):
            continue
        for name in set(CALL.findall(text)):
            home = defined.get(name)
            if home is not None and home != path:
                edges[path].add(home)
    for cycle in circles(edges):
        bad.append("circle: %s" % " -> ".join(cycle + [cycle[0]]))
    for line in bad:
        print(line)
    print("layout rules: %d files of %d folders, %d functions defined; %d violations"
          % (nfiles, len(INCLUDES), len(defined), len(bad)))
    return 1 if bad else 0


def circles(edges):
    """The strongly connected components of more than one file (Tarjan), each in order."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv))
