#!/usr/bin/env python3
"""The layout rules of the library's source tree, checked (issue 22, docs/executor.md).

usage: layout_rules.py [ROOT]     (ROOT: the checkout, default: this file's ../..)

1. Includes: each folder includes only the folders below it (INCLUDES). The planner
   includes nothing of the executor or of a backend; the executor no backend; a backend only
   the executor's public interface (executor.h, backend.h, memory.h) and stream.h.
2. Sizes: no source file of the library over MAX_FILE_LINES lines, no function over
   MAX_FUNCTION_LINES (tables, which are data, are not functions).
3. No circles: no two files of the library call each other's functions, directly or
   through others (a helper both need lives in a file below both).

Prints one line per violation and a summary; exit status 1 on any violation.
"""
import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120

EXECUTOR_PUBLIC = ["redistribute/executor/executor.h", "redistribute/executor/backend.h",
                   "redistribute/executor/memory.h", "redistribute/executor/stream.h"]
BELOW_EXECUTOR = ["core/", "placement/", "dtensor/", "redistribute/planner/planner.h"]
PLANNER_FOR_EXECUTOR = ["redistribute/planner/planner.h", "redistribute/planner/geometry.h"]

# folder -> the include paths (prefixes) its files may use
INCLUDES = {
    "core": ["core/", "dtr_version.h"],
    "placement": ["core/", "placement/"],
    "dtensor": ["core/", "placement/", "dtensor/"],
    "redistribute/planner": ["core/", "placement/", "dtensor/", "redistribute/planner/"],
    "redistribute/executor": ["core/", "placement/", "dtensor/"] + PLANNER_FOR_EXECUTOR + [
                              "redistribute/executor/"],
    "redistribute/mpi": BELOW_EXECUTOR + EXECUTOR_PUBLIC + ["redistribute/mpi/", "dtr_version.h"],
    "redistribute/cuda": BELOW_EXECUTOR + EXECUTOR_PUBLIC + ["redistribute/cuda/"],
    "redistribute/nccl": BELOW_EXECUTOR + EXECUTOR_PUBLIC + [
        "redistribute/nccl/", "redistribute/cuda/", "redistribute/mpi/internal.h"],
    "autograd": ["core/", "placement/", "dtensor/", "redistribute/planner/planner.h",
                 "redistribute/executor/executor.h", "redistribute/executor/group.h",
                 "autograd/"],
    "tools/pattern": ["core/", "placement/", "dtensor/", "tools/pattern/"],
}
SOURCE = (".c", ".h", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a function definition: a line at column 0 naming a function, then its body's "{"
DEFINITION = re.compile(r"^(?!typedef|struct|#|/|\s)[^;=()]*?\b(dtr_\w+)\s*\(([^;{}]*?)\)\s*\{",
                        re.M | re.S)
CALL = re.compile(r"\b(dtr_\w+)\b")


def files_of(root):
    for folder in sorted(INCLUDES):
        d = os.path.join(root, folder)
        for name in sorted(os.listdir(d)):
            if name.endswith(SOURCE):
                yield folder, os.path.join(folder, name)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
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
    texts, defined = {}, {}
    nfiles = 0
    for folder, path in files_of(root):
        nfiles += 1
        raw = open(os.path.join(root, path), encoding="utf-8").read()
        for inc in INCLUDE.findall(raw):
            if inc == "dtr_version.h" and folder == "tools/pattern":
                continue
            if not any(inc == p or (p.endswith("/") and inc.startswith(p))
                       for p in INCLUDES[folder]):
                bad.append("%s: includes \"%s\", which %s/ may not" % (path, inc, folder))
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
            if not static and path.endswith((".c", ".cu")):
                defined.setdefault(name, path)
    # the file graph: a -> b when a calls a function b defines (not static)
    edges = {p: set() for p in texts}
    for path, text in texts.items():
        if not path.endswith((".c", ".cu")):
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
