"""Picks the MPI that dtr is built against, offline.

Generates @<name> with
  BUILD     :mpi, the headers and the link flags of the chosen MPI
  defs.bzl  MPI_FLAVOR ("openmpi" or "mpich"), MPI_PKG (its pkg-config module), MPIRUN

DTR_MPI in the repository environment chooses: `openmpi` (the default; Debian's
libopenmpi-dev) or `mpich` (Debian's libmpich-dev, the MPI family of Cray MPICH, Intel MPI
and MVAPICH). `bazel build --config=mpich` sets it. The two are not ABI compatible (an
MPI_Comm is a pointer in one and an int in the other), so a build is for one of them.
"""

_FLAVORS = {
    "openmpi": struct(
        include = "/usr/lib/x86_64-linux-gnu/openmpi/include",
        lib = "mpi",
        pkg = "ompi-c",
        mpirun = "mpirun.openmpi",
        dev = "libopenmpi-dev",
    ),
    "mpich": struct(
        include = "/usr/include/x86_64-linux-gnu/mpich",
        lib = "mpich",
        pkg = "mpich",
        mpirun = "mpirun.mpich",
        dev = "libmpich-dev",
    ),
}

def _mpi_configure_impl(ctx):
    flavor = ctx.os.environ.get("DTR_MPI", "openmpi")
    if flavor not in _FLAVORS:
        fail("DTR_MPI=%s: expected one of %s" % (flavor, ", ".join(sorted(_FLAVORS.keys()))))
    f = _FLAVORS[flavor]
    if not ctx.path(f.include + "/mpi.h").exists:
        fail("DTR_MPI=%s: no %s/mpi.h; install %s (tools/setup.sh does)" %
             (flavor, f.include, f.dev))
    ctx.symlink(f.include, "include")
    ctx.file("BUILD", """
cc_library(
    name = "mpi",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    linkopts = ["-l{lib}"],
    visibility = ["//visibility:public"],
)
""".format(lib = f.lib))
    ctx.file("defs.bzl", """
MPI_FLAVOR = "{flavor}"
MPI_PKG = "{pkg}"
MPIRUN = "{mpirun}"
""".format(flavor = flavor, pkg = f.pkg, mpirun = f.mpirun))

mpi_configure = repository_rule(
    implementation = _mpi_configure_impl,
    environ = ["DTR_MPI"],
    local = True,
)
