"""python/tests/fake_space.c built and loaded: the C tests' fake device as the memory space
"fake" (test_device.py, torchrun_device.py), and its counts."""
import ctypes
import glob
import os
import subprocess
import sys
import tempfile

import dtr

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COUNTS = ["alloc", "copy_within", "to_host", "from_host", "zero", "copy_box", "copy_range",
          "divide", "cast", "add", "refused"]
_lib = []


def fake_space():
    """python/tests/fake_space.c built against the installed package's libdtr and loaded
    (once per process): the "fake" memory space is registered from then on."""
    if not _lib:
        pkg = os.path.dirname(dtr.__file__)
        libdtr = sorted(glob.glob(os.path.join(pkg, "libdtr.so.*")))
        assert libdtr, f"no libdtr.so.* in {pkg}"
        out = tempfile.mkdtemp(prefix="dtr-fake-space-")
        sys.path.insert(0, os.path.join(ROOT, "python"))
        try:
            import build_lib
            build_lib.write_version_header(ROOT, out)
        finally:
            sys.path.remove(os.path.join(ROOT, "python"))
        so = os.path.join(out, "libfake_space.so")
        srcs = ["python/tests/fake_space.c", "tests/support/fake_device.c", "numeric/values.c",
                "numeric/reduce.c"]
        cmd = [os.environ.get("CC", "cc"), "-std=c11", "-shared", "-fPIC", "-O1", "-I", ROOT,
               "-I", out, *[os.path.join(ROOT, s) for s in srcs], "-o", so,
               f"-l:{os.path.basename(libdtr[0])}", "-L", pkg, f"-Wl,-rpath,{pkg}"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stdout}{p.stderr}"
        _lib.append(ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL))
    return _lib[0]


def counts():
    v = (ctypes.c_int64 * len(COUNTS))()
    fake_space().fake_space_counts(v)
    return dict(zip(COUNTS, v))
