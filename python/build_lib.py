"""Builds dtr's libraries from a checkout without Bazel, for `pip install ./python` (setup.py).

The sources of each library are listed once, in dist/sources.txt (a test checks the lists
against Bazel's targets). The core needs only a C11 compiler; each other part is built where
what it needs is found, and left out otherwise, its calls then refused by name:

  checkpoint   Jansson and xxHash (Debian's libjansson-dev, libxxhash-dev): dtr.load/save
  mpi          Open MPI or MPICH (pkg-config ompi-c or mpich; DTR_MPI=mpich picks MPICH):
               the MPI backend, Mesh(..., backend="mpi") under mpirun
  gloo         Gloo and a C++17 compiler (libgloo-dev): libdtr_gloo.so, backend="gloo"
  cuda         the CUDA toolkit (nvcc: $NVCC, on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin):
               libdtr_cuda.so, the CUDA memory space of Mesh(..., device="cuda"), whose
               kernels are built for the GPUs third_party/cuda/cuda.bzl names
  nccl         NCCL (nccl.h and libnccl where the C compiler finds them, or under
               $NCCL_HOME), with the cuda and mpi parts: libdtr_nccl.so, backend="nccl"

DTR_WITHOUT=mpi,gloo,checkpoint,cuda,nccl leaves parts out even where found (the CI test of the
smallest build uses it). CC and CXX name the compilers (default cc, c++); the objects are
compiled in parallel, one job per core.
"""
import concurrent.futures
import os
import shutil
import sys
import subprocess
import tempfile

PARTS = ("core", "checkpoint", "mpi", "gloo", "cuda", "nccl")
# nvcc's machine code, as third_party/cuda/cuda.bzl's CUDA_GENCODE (Ampere, Hopper and
# Hopper's PTX for newer GPUs): tests/tools/lib_sources.py checks the two agree
CUDA_GENCODE = ["-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=[sm_90,compute_90]"]


class BuildError(Exception):
    """A failure that names its cause; setup.py prints it and stops."""


def read_sources(root):
    """dist/sources.txt as {(library, part): [(path, [copts])]}, in the file's order."""
    sections, current = {}, None
    with open(os.path.join(root, "dist", "sources.txt")) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("["):
                library, part = line[1:line.index("]")].split()
                current = sections.setdefault((library, part), [])
            elif current is None:
                raise BuildError(f"dist/sources.txt:{n}: a file before any [library part]")
            else:
                path, *copts = line.split()
                current.append((path, copts))
    return sections


def version(root):
    """(MAJOR, MINOR, PATCH, PRE) from version.bzl."""
    values = {}
    with open(os.path.join(root, "version.bzl")) as f:
        for line in f:
            if line.startswith(("DTR_VERSION =", "DTR_VERSION_PRE =")):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip().strip('"')
    major, minor, patch = values["DTR_VERSION"].split(".")
    return major, minor, patch, values.get("DTR_VERSION_PRE", "")


def write_version_header(root, include):
    """dtr_version.h as //:version_number writes it (BUILD), into include/."""
    major, minor, patch, pre = version(root)
    string = f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")
    text = "\n".join([
        "/* dtr's version, generated from version.bzl by python/build_lib.py; do not edit. */",
        "#ifndef DTR_VERSION_H",
        "#define DTR_VERSION_H",
        f"#define DTR_VERSION_MAJOR {major}",
        f"#define DTR_VERSION_MINOR {minor}",
        f"#define DTR_VERSION_PATCH {patch}",
        f'#define DTR_VERSION_STRING "{string}"',
        f'#define DTR_VERSION_PRE "{pre}"',
        "#define DTR_VERSION_CODE (DTR_VERSION_MAJOR * 10000 + DTR_VERSION_MINOR * 100 + "
        "DTR_VERSION_PATCH)",
        "#endif", ""])
    os.makedirs(include, exist_ok=True)
    with open(os.path.join(include, "dtr_version.h"), "w") as f:
        f.write(text)


def run(cmd, what):
    """Runs cmd; BuildError with its output where it fails."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise BuildError(f"{what} failed: {cmd[0]}: {e.strerror}")
    if p.returncode != 0:
        raise BuildError(f"{what} failed:\n  {' '.join(cmd)}\n{p.stdout.rstrip()}")
    return p.stdout


def pkg_config(*args):
    """pkg-config's words, or None where the package (or pkg-config) is missing."""
    try:
        return subprocess.check_output(["pkg-config", *args], text=True,
                                       stderr=subprocess.DEVNULL).split()
    except (OSError, subprocess.CalledProcessError):
        return None


def compiles(compiler, source, suffix, flags):
    """Whether `source` compiles and links with compiler and flags (a probe)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "probe" + suffix)
        with open(src, "w") as f:
            f.write(source)
        try:
            p = subprocess.run([*compiler, src, "-o", os.path.join(d, "probe"), *flags],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:  # (no such compiler)
            return False
        return p.returncode == 0


def detect(cc, cxx):
    """{part: {"cflags": [...], "libs": [...], ...}} for the parts this machine can build,
    and {part: why} for those it cannot."""
    without = {w.strip().lower() for w in os.environ.get("DTR_WITHOUT", "").split(",")
               if w.strip()}
    unknown = without - set(PARTS[1:])
    if unknown:
        raise BuildError(f"DTR_WITHOUT: unknown parts {sorted(unknown)} (known: "
                         f"{', '.join(PARTS[1:])})")
    found, missing = {"core": {"cflags": [], "libs": ["-lm", "-lpthread", "-ldl"]}}, {}
    if not compiles(cc, "int main(void) { return 0; }\n", ".c", ["-std=c11"]):
        raise BuildError(f"no working C compiler ({' '.join(cc)}; set CC)")
    if "checkpoint" in without:
        missing["checkpoint"] = "left out by DTR_WITHOUT"
    elif compiles(cc, "#include <jansson.h>\n#include <xxhash.h>\nint main(void) {\n"
                  "  json_t *j = json_object(); XXH64(\"\", 0, 0); json_decref(j); return 0;\n}\n",
                  ".c", ["-ljansson", "-lxxhash"]):
        found["checkpoint"] = {"cflags": [], "libs": ["-ljansson", "-lxxhash"]}
    else:
        missing["checkpoint"] = "no Jansson and xxHash (libjansson-dev, libxxhash-dev)"
    want = os.environ.get("DTR_MPI", "openmpi")
    if want not in ("openmpi", "mpich"):
        raise BuildError(f"DTR_MPI={want}: expected openmpi or mpich")
    pkg = {"openmpi": "ompi-c", "mpich": "mpich"}[want]
    cflags, libs = pkg_config("--cflags", pkg), pkg_config("--libs", pkg)
    if "mpi" in without:
        missing["mpi"] = "left out by DTR_WITHOUT"
    elif cflags is not None and libs is not None and compiles(
            cc, "#include <mpi.h>\nint main(void) { return MPI_Init(0, 0); }\n", ".c",
            cflags + libs):
        found["mpi"] = {"cflags": cflags, "libs": libs, "name": want}
    else:
        missing["mpi"] = f"no {want} (pkg-config {pkg}: Debian's " + (
            "libopenmpi-dev" if want == "openmpi" else "libmpich-dev") + ")"
    if "gloo" in without:
        missing["gloo"] = "left out by DTR_WITHOUT"
    elif compiles(cxx, "#include <gloo/rendezvous/context.h>\nint main() {\n"
                  "  gloo::rendezvous::Context c(0, 1); return c.rank;\n}\n", ".cc",
                  ["-std=c++17", "-lgloo"]):
        found["gloo"] = {"cflags": [], "libs": ["-lgloo", "-lstdc++"]}
    else:
        missing["gloo"] = "no Gloo (libgloo-dev) or no C++17 compiler"
    if "cuda" in without:
        missing["cuda"] = "left out by DTR_WITHOUT"
    else:
        found_cuda, why = detect_cuda(cc)
        if found_cuda is None:
            missing["cuda"] = why
        else:
            found["cuda"] = found_cuda
    if "nccl" in without:
        missing["nccl"] = "left out by DTR_WITHOUT"
    elif "cuda" not in found or "mpi" not in found:
        missing["nccl"] = "needs the cuda and mpi parts (" + "; ".join(
            f"{p}: {missing[p]}" for p in ("cuda", "mpi") if p in missing) + ")"
    else:
        found_nccl, why = detect_nccl(cc, found["cuda"], found["mpi"])
        if found_nccl is None:
            missing["nccl"] = why
        else:
            found["nccl"] = found_nccl
    return found, missing


def detect_nccl(cc, cuda, mpi):
    """The NCCL part's flags, or (None, why): nccl.h and libnccl the C compiler finds (or
    under $NCCL_HOME), beside CUDA's and MPI's."""
    home = os.environ.get("NCCL_HOME")
    extra = ["-I", os.path.join(home, "include"), "-L", os.path.join(home, "lib"),
             f"-Wl,-rpath,{os.path.join(home, 'lib')}"] if home else []
    libs = [*extra, "-lnccl", *mpi["libs"], *cuda["libs"]]
    if not compiles(cc, "#include <nccl.h>\nint main(void) {\n  int v;\n"
                    "  return (int)ncclGetVersion(&v);\n}\n", ".c", cuda["cflags"] + libs):
        return None, "no NCCL (nccl.h and libnccl; set NCCL_HOME)"
    return {"cflags": [*cuda["cflags"], *mpi["cflags"], *extra[:2]], "libs": libs}, None


def detect_cuda(cc):
    """The CUDA part's flags ({"cflags", "libs", "nvcc"}), or (None, why): nvcc and a
    cudart the C compiler links."""
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if nvcc is None and home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            nvcc = os.path.join(home, "bin", "nvcc")
    if nvcc is None:
        return None, "no CUDA toolkit (nvcc not on PATH, nor in $CUDA_HOME/bin or /usr/local/cuda/bin)"
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    inc, lib = os.path.join(home, "include"), os.path.join(home, "lib64")
    flags = ["-I", inc, "-L", lib, "-lcudart"]
    if not compiles(cc, "#include <cuda_runtime.h>\nint main(void) {\n  int n;\n"
                    "  return (int)cudaGetDeviceCount(&n);\n}\n", ".c", flags):
        return None, f"nvcc at {nvcc}, but the C compiler does not link its cudart ({lib})"
    # (libcudart is the machine's, found at the toolkit's lib64 or where the loader looks,
    # as MPI is; a process that loaded torch's own has it already)
    return {"cflags": ["-I", inc], "libs": ["-L", lib, "-lcudart", "-lstdc++",
                                            f"-Wl,-rpath,{lib}"], "nvcc": nvcc}, None


def flatten(root, include, out, header, *aliases):
    """An installed header, as tools/install.sh writes it (dist/flatten_header.py)."""
    cmd = [sys.executable,
           os.path.join(root, "dist", "flatten_header.py"), os.path.join(include, "dtr", out),
           os.path.join(root, header), "--dir", root, "--dir", include]
    for a in aliases:
        cmd += ["--as", a]
    run(cmd, f"writing <dtr/{out}>")


def build(root, out, jobs=None):
    """Builds libdtr.so.MAJOR (and libdtr_gloo.so.MAJOR where Gloo is found, libdtr_cuda.so.MAJOR
    where CUDA is, libdtr_nccl.so.MAJOR where NCCL is too) into out/lib and their headers into out/include/dtr. Returns {"lib": dir, "include": dir, "found": {...},
    "missing": {part: why}, "libs": [file names]}."""
    cc = os.environ.get("CC", "cc").split()
    cxx = os.environ.get("CXX", "c++").split()
    found, missing = detect(cc, cxx)
    sections = read_sources(root)
    major = version(root)[0]
    include, objdir, libdir = (os.path.join(out, d) for d in ("include", "obj", "lib"))
    shutil.rmtree(out, ignore_errors=True)
    for d in (objdir, libdir, os.path.join(include, "dtr")):
        os.makedirs(d)
    write_version_header(root, include)
    base = ["-fPIC", "-O2", "-g", "-Wall", "-fvisibility=hidden", "-I", root, "-I", include]

    def job(entry):
        (library, part), path, copts = entry
        is_cxx = path.endswith(".cc")
        obj = os.path.join(objdir, path.replace("/", "__") + ".o")
        if path.endswith(".cu"):  # (as third_party/cuda/cuda.bzl's cuda_library)
            cmd = [found[part]["nvcc"], "-c", "-O3", "-std=c++17", "-Xcompiler",
                   "-fPIC,-fvisibility=hidden", *CUDA_GENCODE, "-I", root, "-I", include,
                   *copts, "-o", obj, os.path.join(root, path)]
        else:
            cmd = [*(cxx if is_cxx else cc), *base, *([] if is_cxx else ["-std=c11"]),
                   *found[part]["cflags"], *copts, "-c", os.path.join(root, path), "-o", obj]
        run(cmd, f"compiling {path}")
        return library, obj

    work = [((lib, part), path, copts) for (lib, part), files in sections.items()
            if part in found for path, copts in files]
    objects = {}
    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 2) as pool:
        for library, obj in pool.map(job, work):
            objects.setdefault(library, []).append(obj)
    libs = {lib: [f for (l, part) in sections if l == lib and part in found
                  for f in found[part]["libs"]] for lib in objects}
    exports = os.path.join(root, "dist", "exports.lds")
    made = []
    for library in ("libdtr.so", "libdtr_gloo.so", "libdtr_cuda.so", "libdtr_nccl.so"):
        if library not in objects:
            continue
        name = f"{library}.{major}"
        over = [] if library == "libdtr.so" else [os.path.join(libdir, f"libdtr.so.{major}")]
        if library == "libdtr_nccl.so":
            over.append(os.path.join(libdir, f"libdtr_cuda.so.{major}"))
        linker = cxx if library == "libdtr_gloo.so" else cc
        run([*linker, "-shared", "-o", os.path.join(libdir, name), *objects[library], *over,
             f"-Wl,-soname,{name}", f"-Wl,--version-script={exports}", "-Wl,-z,defs",
             "-Wl,-rpath,$ORIGIN", *sorted(set(libs[library]), key=libs[library].index)],
            f"linking {name}")
        made.append(name)
    flatten(root, include, "dtr.h", "dtr.h")
    flatten(root, include, "dtr_gloo.h", "backends/gloo/dtr_gloo.h", "dtr.h=dtr.h")
    flatten(root, include, "dtr_checkpoint.h", "checkpoint/dtr_checkpoint.h", "dtr.h=dtr.h")
    if "mpi" in found:
        flatten(root, include, "dtr_mpi.h", "backends/mpi/dtr_mpi.h", "dtr.h=dtr.h")
    if "nccl" in found:
        flatten(root, include, "dtr_nccl.h", "backends/nccl/dtr_nccl.h", "dtr.h=dtr.h")
    return {"lib": libdir, "include": include, "found": found, "missing": missing,
            "libs": made}
