#!/usr/bin/env python3
"""dist/sources.txt (what python/build_lib.py compiles without Bazel) against Bazel's targets.

usage: lib_sources.py ROOT LIBDTR_QUERY GLOO_QUERY CUDA_QUERY NCCL_QUERY [--sources FILE]

LIBDTR_QUERY, GLOO_QUERY, CUDA_QUERY and NCCL_QUERY hold `bazel query` outputs, one label
per line: the source files of //dist:libdtr.so, and those of //dist:libdtr_gloo.so,
//dist:libdtr_cuda.so and //dist:libdtr_nccl.so that libdtr.so lacks (the folder's sources
where Gloo, CUDA or NCCL is not found; NCCL's less CUDA's, which it links over). Each library's .c, .cc and .cu files must be exactly the files its sections list;
and python/build_lib.py's CUDA_GENCODE must be third_party/cuda/cuda.bzl's. Prints the
differences by file and exits 1, or "N files agree" and exits 0.
"""
import re
import os
import sys


def labels(path):
    """The .c/.cc files of the checkout among a query's labels, as paths."""
    out = set()
    for line in open(path):
        line = line.strip()
        if line.startswith("//") and line.endswith((".c", ".cc", ".cu")):
            package, name = line[2:].split(":", 1)
            out.add(os.path.join(package, name) if package else name)
    return out


def listed(path):
    """{library: set of paths} from a sources file."""
    out, library = {}, None
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            library = line[1:line.index("]")].split()[0]
            out.setdefault(library, set())
        elif library is None:
            sys.exit(f"{path}:{n}: a file before any [library part]")
        else:
            out[library].add(line.split()[0])
    return out


def gencode_problems(root):
    """python/build_lib.py's nvcc targets against third_party/cuda/cuda.bzl's."""
    bzl = open(os.path.join(root, "third_party", "cuda", "cuda.bzl")).read()
    py = open(os.path.join(root, "python", "build_lib.py")).read()
    want = re.findall(r'"(-gencode=[^"]+)"', bzl.split("CUDA_GENCODE", 1)[1].split(")", 1)[0])
    have = re.findall(r'"(-gencode=[^"]+)"', py.split("CUDA_GENCODE = ", 1)[1].split("]\n", 1)[0])
    if want and want == have:
        return []
    return [f"python/build_lib.py: CUDA_GENCODE {have} is not third_party/cuda/cuda.bzl's {want}"]


def main(argv):
    root, libdtr_query, gloo_query, cuda_query, nccl_query = argv[1:6]
    sources = argv[7] if len(argv) > 7 and argv[6] == "--sources" else os.path.join(
        root, "dist", "sources.txt")
    have = listed(sources)
    want = {"libdtr.so": labels(libdtr_query), "libdtr_gloo.so": labels(gloo_query),
            "libdtr_cuda.so": labels(cuda_query)}
    # (libdtr_nccl.so links over libdtr_cuda.so: Bazel's deps hold the CUDA space's files too)
    want["libdtr_nccl.so"] = labels(nccl_query) - want["libdtr_cuda.so"]
    problems = gencode_problems(root)
    for library in sorted(set(want) | set(have)):
        w, h = want.get(library, set()), have.get(library, set())
        if library not in want:
            problems.append(f"{library}: listed, but no such library in dist/BUILD")
        for f in sorted(w - h):
            problems.append(f"{library}: {f} is in its Bazel target but not in {sources}")
        for f in sorted(h - w):
            problems.append(f"{library}: {f} is listed in {sources} but not in its Bazel target")
        for f in sorted(h):
            if not os.path.isfile(os.path.join(root, f)):
                problems.append(f"{library}: {f} does not exist")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"{sum(len(v) for v in want.values())} files agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
