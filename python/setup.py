"""Builds dtr's extension module against the dtr library and carries libdtr in the package.

Where the library comes from, first match wins:
  DTR_PREFIX=DIR   an installed tree (tools/install.sh --prefix DIR, or the .deb's /usr);
  the checkout     when this folder sits in a dtr checkout (python/ beside dist/), the
                   library is compiled here from the sources dist/sources.txt lists, with the
                   C compiler alone: no Bazel, no root, no MPI needed (python/build_lib.py;
                   MPI, Gloo, CUDA, Jansson and xxHash are used where found, DTR_MPI=mpich
                   picks MPICH, DTR_WITHOUT=mpi,gloo,checkpoint,cuda leaves parts out);
  pkg-config       `pkg-config dtr` finds an installed tree.
The extension is compiled with that library's MPI flags (none where it has no MPI), and
libdtr.so.MAJOR is copied next to it (found through the rpath $ORIGIN), with the libraries
of CARRIED it needs, so a wheel carries them, and the companion libraries where there are
some (COMPANIONS: dtr.Mesh(..., backend="gloo") loads libdtr_gloo.so.MAJOR from beside
libdtr.so, Mesh(..., device="cuda") libdtr_cuda.so.MAJOR). What libdtr_gloo.so loads is
carried too (Gloo and its own needs, listed in carried.txt, which dtr/_carry.py loads first);
CUDA's runtime and MPI stay the machine's (torch's, mpi4py's).
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# Carried in the package beside libdtr.so (a wheel installed where they are missing works):
# the checkpoint module's JSON parser (Jansson) and hash (xxHash). MPI is not carried: it is
# the machine's own, as mpi4py's.
CARRIED = ["libjansson.so.4", "libxxhash.so.0"]
# dtr's own libraries loaded by name at their first use (dtr_backend_find, dtr_memory_find),
# copied beside libdtr.so where the build made them (an installed tree's libdtr_nccl.so too)
COMPANIONS = ["libdtr_gloo.so.", "libdtr_cuda.so.", "libdtr_nccl.so."]


def fail(message):
    sys.exit("dtr setup: " + message)


def version():
    """The library's version, "0.9.1" or "0.9.1-dev": version.bzl in a checkout, else the
    installed dtr.pc."""
    bzl = os.path.join(ROOT, "version.bzl")
    if os.path.exists(bzl):
        values = {}
        for line in open(bzl):
            if line.startswith(("DTR_VERSION =", "DTR_VERSION_PRE =")):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip().strip('"')
        pre = values.get("DTR_VERSION_PRE", "")
        return values["DTR_VERSION"] + ("-" + pre if pre else "")
    prefix = os.environ.get("DTR_PREFIX")
    env = dict(os.environ)
    if prefix:
        env["PKG_CONFIG_PATH"] = os.path.join(prefix, "lib", "pkgconfig")
    try:
        return subprocess.check_output(["pkg-config", "--modversion", "dtr"], env=env,
                                       text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        fail("no dtr found: set DTR_PREFIX to an installed tree (tools/install.sh --prefix DIR)")


def pkg_config(prefix, *args):
    env = dict(os.environ)
    if prefix:
        env["PKG_CONFIG_PATH"] = os.path.join(prefix, "lib", "pkgconfig")
    try:
        return subprocess.check_output(["pkg-config", *args], env=env, text=True).split()
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"pkg-config {' '.join(args)} failed ({e}); is pkgconf installed?")


class BuildExt(build_ext):
    def find_prefix(self):
        """An installed tree's prefix (DTR_PREFIX), "" for pkg-config's default search, or
        None in a checkout (the library is compiled here)."""
        prefix = os.environ.get("DTR_PREFIX")
        if prefix:
            if not os.path.exists(os.path.join(prefix, "lib", "pkgconfig", "dtr.pc")):
                fail(f"DTR_PREFIX={prefix}: no lib/pkgconfig/dtr.pc there")
            return os.path.abspath(prefix)
        if os.path.exists(os.path.join(ROOT, "dist", "sources.txt")):
            return None
        return ""

    def installed(self, prefix):
        """The flags of an installed tree: (libdir, cflags, libs, macros)."""
        libdir = pkg_config(prefix, "--variable=libdir", "dtr")[0]
        mpi = pkg_config(prefix, "--variable=mpi", "dtr")[0]
        mpi_pkg = {"openmpi": "ompi-c", "mpich": "mpich"}.get(mpi)
        if mpi_pkg is None:
            fail(f"dtr.pc names MPI '{mpi}', not openmpi or mpich")
        return (libdir, pkg_config(prefix, "--cflags", "dtr", mpi_pkg),
                pkg_config(prefix, "--libs", "dtr", mpi_pkg), [("DTR_PY_MPI", f'"{mpi}"')])

    def compiled(self):
        """The library compiled from the checkout: (libdir, cflags, libs, macros)."""
        sys.path.insert(0, HERE)
        import build_lib
        try:
            built = build_lib.build(ROOT, os.path.join(HERE, "build", "dtr-lib"))
        except build_lib.BuildError as e:
            fail(str(e))
        finally:
            sys.path.remove(HERE)
        found, missing = built["found"], built["missing"]
        print("dtr setup: built " + ", ".join(built["libs"]) + " with "
              + ", ".join(p + (f" ({found[p]['name']})" if p == "mpi" else "") for p in found)
              + "".join(f"; without {p}: {why}" for p, why in missing.items()), flush=True)
        cflags, libs, macros = ["-I" + built["include"]], ["-L" + built["lib"], "-ldtr"], []
        if "mpi" in found:
            cflags += found["mpi"]["cflags"]
            libs += found["mpi"]["libs"]
            macros.append(("DTR_PY_MPI", f'"{found["mpi"]["name"]}"'))
        if "checkpoint" not in found:
            macros.append(("DTR_PY_NO_CHECKPOINT", "1"))
        for part in missing:  # (why, for the errors that refuse what the part would do)
            macros.append((f"DTR_PY_WHY_NO_{part.upper()}", '"' + missing[part].replace('"', "'") + '"'))
        libdtr = os.path.join(built["lib"], "libdtr.so")  # (for -ldtr)
        if os.path.lexists(libdtr):
            os.remove(libdtr)
        os.symlink("libdtr.so." + version().split(".")[0], libdtr)
        return built["lib"], cflags, libs, macros

    def run(self):
        # Always compile: objects left in build/ from another CFLAGS or another library would
        # otherwise be linked as they are.
        self.force = True
        prefix = self.find_prefix()
        libdir, cflags, libs, macros = (self.compiled() if prefix is None
                                        else self.installed(prefix))
        soname = "libdtr.so." + version().split(".")[0]
        src = os.path.join(libdir, soname)
        if not os.path.exists(src):
            fail(f"{src} is missing")
        carried = needed_paths(src)
        for ext in self.extensions:
            ext.extra_compile_args += cflags + ["-std=c11", "-Wall", "-Wextra",
                                                "-Wno-missing-field-initializers"]
            # libdtr's own dependencies that a machine may lack (the checkpoint module's
            # JSON parser and hash), linked by the extension too so that the copies carried
            # beside it (below) are the ones loaded: the loader meets them first through
            # the extension's $ORIGIN, before libdtr.so asks for them by name
            ext.extra_link_args += libs + ["-Wl,-rpath,$ORIGIN", "-Wl,--no-as-needed"] + [
                "-l:" + name for name in carried] + ["-Wl,--as-needed"]
            ext.define_macros += macros
        super().run()
        # The library the extension was linked with goes beside it (SONAME libdtr.so.MAJOR).
        for ext in self.extensions:
            dest_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
            os.makedirs(dest_dir, exist_ok=True)
            stale_carried = os.path.join(dest_dir, "carried.txt")  # (a previous build's, in place)
            if os.path.exists(stale_carried):
                for name in open(stale_carried).read().split():
                    if os.path.exists(os.path.join(dest_dir, name)):
                        os.remove(os.path.join(dest_dir, name))
                os.remove(stale_carried)
            for stale in (*COMPANIONS, *CARRIED):
                for name in os.listdir(dest_dir):
                    if name.startswith(stale):
                        os.remove(os.path.join(dest_dir, name))
            shutil.copy2(os.path.realpath(src), os.path.join(dest_dir, soname))
            for companion in COMPANIONS:
                lib = os.path.join(libdir, companion + soname.split(".so.")[1])
                if os.path.exists(lib):
                    shutil.copy2(os.path.realpath(lib), os.path.join(dest_dir, os.path.basename(lib)))
                    if companion == "libdtr_gloo.so.":  # (and what it loads: dtr/_carry.py)
                        for name, path in gloo_carried(lib, src).items():
                            shutil.copy2(os.path.realpath(path), os.path.join(dest_dir, name))
                            with open(os.path.join(dest_dir, "carried.txt"), "a") as f:
                                f.write(name + "\n")
            for name, path in carried.items():
                shutil.copy2(os.path.realpath(path), os.path.join(dest_dir, name))


# Libraries every Linux machine has (the C and C++ runtimes), never carried.
BASE = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
        "libstdc++.so", "libgcc_s.so", "ld-linux")


def ldd(lib):
    """{soname: path} of what `lib` loads, as ldd resolves it (a missing one: path None)."""
    try:
        out = subprocess.check_output(["ldd", lib], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"ldd {lib} failed ({e})")
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            found[parts[0]] = None if parts[2] == "not" else parts[2]
    return found


def gloo_carried(gloo, libdtr):
    """What libdtr_gloo.so loads beyond libdtr.so and the machine's runtimes: Gloo itself and
    its own needs (libgloo.so.0, hiredis, ibverbs, libnl on Debian), {soname: path}, carried
    so that backend="gloo" works where Debian's libgloo0 is not installed. A missing one
    fails the build (install libgloo-dev)."""
    have, base = ldd(gloo), ldd(libdtr)
    out = {}
    for name, path in have.items():
        if name in base or name.startswith(BASE) or name.startswith("libdtr"):
            continue
        if path is None:
            fail(f"{gloo} needs {name}, which the loader does not find (install libgloo-dev)")
        out[name] = path
    return out


def needed_paths(lib):
    """Where the loader finds each of CARRIED that `lib` needs (ldd), all of them or a failure."""
    try:
        out = subprocess.check_output(["ldd", lib], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"ldd {lib} failed ({e})")
    found, missing = {}, []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in CARRIED and parts[1] == "=>":
            if parts[2] == "not":  # "=> not found"
                missing.append(parts[0])
            else:
                found[parts[0]] = parts[2]
    if missing:
        fail(f"{lib} needs {', '.join(missing)}, which the loader does not find (install "
             "libjansson4 and libxxhash0)")
    return found


core = Extension(
    "dtr._core",
    sources=["dtr/_core.c", "dtr/_error.c", "dtr/_mesh.c", "dtr/_spec.c", "dtr/_plan.c", "dtr/_move.c", "dtr/_many.c", "dtr/_grad.c",
             "dtr/_bench.c", "dtr/_checkpoint.c", "dtr/_refuse.c", "dtr/_buffer.c", "dtr/_store.c",
             "dtr/_engine.c", "dtr/_digest.c", "dtr/_device.c"],
    depends=["dtr/_core.h", "dtr/_dlpack.h"],
)

setup(
    version=version().replace("-dev", ".dev0"),  # PEP 440's form of a development version
    ext_modules=[core],
    cmdclass={"build_ext": BuildExt},
    # (carried.txt names what libdtr_gloo.so loads, carried beside it: lib*.so.* covers them)
    package_data={"dtr": ["libdtr.so.*", "lib*.so.*", "carried.txt"] + [c + "*" for c in COMPANIONS] + CARRIED},
)
