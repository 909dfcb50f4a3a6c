"""Device arrays without a GPU: meshes on device="fake", the C tests' fake device
(tests/support/fake_device.c, whose addresses fault if anything but its own table reads
them) registered as a memory space by python/tests/fake_space.c, which this file builds with
the C compiler and loads. The parity cases (test_parity.py) run there in every form, every
block a dtr.DeviceArray; device names, DeviceArray, __cuda_array_interface__ and DLPack
inputs, and the errors of arrays on the wrong device (one rank wrong too). Under mpirun the
backend is mpi; under tools/dtr_launch.sh set DTR_PY_BACKEND=gloo. A context on a device
space over these backends stages each operation through host memory (the shared-GPU mode)."""
import ctypes

import numpy as np
import pytest

import dtr
import test_parity as parity

from fake_space import counts, fake_space


@pytest.fixture
def fake():
    """The fake space loaded; after the test, no call of it met an address of another space."""
    fake_space()
    yield
    assert counts()["refused"] == 0, counts()


def one_rank_mesh(**kw):
    """A mesh of rank 0 alone, its context (host or fake) made first by every rank: a
    context is made at its first call, collectively, and rank 0's calls below are its own."""
    rank, n = parity.world()
    dtr.redistribute(np.zeros(n, np.float32), dtr.Mesh((n,), backend=parity.BACKEND), "S(0)",
                     "S(0)")
    dev = dtr.DeviceArray.from_numpy(np.zeros(1, np.float32), "fake")
    dtr.redistribute(dev, dtr.Mesh((n,), backend=parity.BACKEND, device="fake"), "S(0)", "S(0)")
    return dtr.Mesh((1,), ranks=[0], backend=parity.BACKEND, **kw)


def test_device_names_are_checked(fake):
    with pytest.raises(dtr.RefusedError, match=r"^device 'nosuch': this dtr has no memory space "
                                               r"'nosuch' \(.*no memory space 'nosuch' "
                                               r"\(registered: .*fake.*libdtr_nosuch\.so\.0"):
        dtr.Mesh(2, device="nosuch")
    with pytest.raises(dtr.ArgumentError, match=r"device: 'fake:1': index 1, but this process "
                                                r"sees 1 of them \(0..0\)"):
        dtr.Mesh(2, device="fake:1")
    for bad in ("fake:", "fake:x", "fake:-1", ":0", "", "a/b:0", "FAKE", " fake", "cpu ",
                "fake:0:1", "cpu:1"):
        with pytest.raises(dtr.ArgumentError, match=f"^device: '{bad}'"):
            dtr.Mesh(2, device=bad)
    with pytest.raises(dtr.ArgumentError, match=r"^device: 'fake:99999999999': index out of range"):
        dtr.Mesh(2, device="fake:99999999999")
    assert dtr.Mesh(2, device="cpu:0").device == "cpu"
    with pytest.raises(dtr.ArgumentError, match="device: expected a str"):
        dtr.Mesh(2, device=0)
    with pytest.raises(dtr.ArgumentError, match="device: 'host' is not"):
        dtr.Mesh(2, device="host")


def test_cuda_without_a_gpu_is_refused_by_name():
    """This package has no CUDA space (pip built it without nvcc), or has one and sees no
    GPU: either way Mesh(device="cuda") names why, before anything runs."""
    with pytest.raises(dtr.RefusedError, match=r"^device 'cuda': (this dtr has no memory space "
                                               r"'cuda' \(.*libdtr_cuda\.so\.0|no device of it "
                                               r"is visible)"):
        dtr.Mesh(2, device="cuda")


def test_mesh_on_a_device(fake):
    m = dtr.Mesh((2, 3), ranks=[5, 4, 3, 2, 1, 0], backend="gloo", device="fake")
    assert m.device == "fake:0" and dtr.Mesh(2).device == "cpu"
    assert dtr.Mesh(2, device="cpu").device == "cpu" and dtr.Mesh(2, device=None).device == "cpu"
    assert repr(m) == ("dtr.Mesh((2, 3), ranks=(5, 4, 3, 2, 1, 0), backend='gloo', "
                       "device='fake:0')")


@pytest.mark.parametrize("dtype,shape", [("float32", (3, 5)), ("int64", (7,)), ("uint8", (2, 0)),
                                         ("float16", (1, 1, 4)), ("complex64", ()),
                                         ("bfloat16", (5,))])
def test_device_array_round_trip(fake, dtype, shape, seed):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        np_dtype = ml_dtypes.bfloat16
    else:
        np_dtype = np.dtype(dtype)
    x = (np.random.default_rng(seed).integers(0, 100, size=shape)).astype(np_dtype)
    before = counts()
    a = dtr.DeviceArray.from_numpy(x, "fake")
    assert a.shape == shape and a.device == "fake:0"
    assert a.dtype == {"float32": "f32", "int64": "i64", "uint8": "u8", "float16": "f16",
                       "complex64": "c64", "bfloat16": "bf16"}[dtype]
    assert a.nbytes == x.nbytes and a.ptr >> 62 == 1  # (the fake device's tagged addresses)
    assert repr(a) == f"dtr.DeviceArray(shape={shape}, dtype='{a.dtype}', device='fake:0')"
    y = a.numpy()
    assert y.dtype == x.dtype and y.shape == x.shape and y.tobytes() == x.tobytes()
    after = counts()
    assert after["alloc"] == before["alloc"] + 1
    assert after["from_host"] == before["from_host"] + (x.nbytes > 0)
    assert after["to_host"] == before["to_host"] + (x.nbytes > 0)
    assert not hasattr(a, "__cuda_array_interface__")  # (not CUDA memory: nothing may read it)


def test_device_array_bad_arguments(fake):
    with pytest.raises(dtr.ArgumentError, match=r"device: 'cpu' \(a DeviceArray is on a device"):
        dtr.DeviceArray.from_numpy(np.zeros(2), "cpu")
    with pytest.raises(dtr.ArgumentError, match="array: expected a numpy array or a torch tensor"):
        dtr.DeviceArray.from_numpy([1, 2], "fake")
    with pytest.raises(dtr.ArgumentError, match="array: dtype int16 is not one dtr moves"):
        dtr.DeviceArray.from_numpy(np.zeros(2, np.int16), "fake")
    with pytest.raises(dtr.ArgumentError, match=r"array: an array on device 'fake:0', and this "
                                                r"call reads host arrays only"):
        dtr.DeviceArray.from_numpy(dtr.DeviceArray.from_numpy(np.zeros(2), "fake"), "fake")
    with pytest.raises(TypeError):
        dtr.DeviceArray()
    with pytest.raises(TypeError, match=r"a dtr.DeviceArray on 'fake:0' is device memory, which "
                                        r"numpy cannot read: copy it with .numpy\(\)"):
        np.asarray(dtr.DeviceArray.from_numpy(np.zeros(2), "fake"))


@pytest.mark.parametrize("form", ["one", "many", "cross", "cross_many"])
def test_parity_on_a_device(fake, form, seed, monkeypatch):
    """The parity cases on device memory, every block a DeviceArray; the backend's
    operations staged through host memory (the fake device's copies to and from the host)."""
    monkeypatch.setattr(parity, "DEVICE", "fake")
    before = counts()
    for k in range(parity.CASES // 2):
        parity.run_case(seed, k, form.startswith("cross"), form.endswith("many"))
    after = counts()
    assert after["from_host"] > before["from_host"] and after["to_host"] > before["to_host"]


def test_arrays_on_the_wrong_device_are_named(fake):
    m, host = one_rank_mesh(device="fake"), one_rank_mesh()
    if m.coordinate is None:
        return  # (a bystander: these calls are rank 0's alone)
    x = np.arange(6, dtype=np.float32)
    d = dtr.DeviceArray.from_numpy(x, "fake")
    with pytest.raises(dtr.ArgumentError, match=r"^local: a host array \(numpy.ndarray\), and the "
                                                r"mesh is on device 'fake:0'"):
        dtr.redistribute(x, m, "R", "R")
    with pytest.raises(dtr.ArgumentError, match=r"^local: an array on device 'fake:0', and this "
                                                r"call moves host memory \(make the Mesh with "
                                                r"device="):
        dtr.redistribute(d, host, "R", "R")
    with pytest.raises(dtr.ArgumentError, match=r"^out: a host array \(numpy.ndarray\), and the "
                                                r"mesh is on device 'fake:0'"):
        dtr.redistribute(d, m, "R", "R", out=np.zeros(6, np.float32))
    with pytest.raises(dtr.ArgumentError, match=r"^to_mesh: on device 'cpu', mesh on 'fake:0'"):
        dtr.redistribute(d, m, "R", "R", to_mesh=host)
    with pytest.raises(dtr.ArgumentError, match=r"^local: an array on device 'fake:0', and this "
                                                r"call reads host arrays only"):
        dtr.digest(d, m, "R")
    with pytest.raises(dtr.ArgumentError, match=r"^locals\[1\]: a host array"):
        dtr.redistribute_many([d, x], m, "R", "R")
    with pytest.raises(dtr.ArgumentError, match=r"^outs\[1\]: shape \(2, 3\), rank 0's block "):
        dtr.redistribute_many([d, d], m, "R", "R", outs=[
            dtr.DeviceArray.from_numpy(x, "fake"),
            dtr.DeviceArray.from_numpy(x.reshape(2, 3), "fake")])
    out = dtr.DeviceArray.from_numpy(np.zeros(6, np.float32), "fake")
    assert dtr.redistribute(d, m, "R", "R", out=out) is out  # (and the next call pairs)
    assert np.array_equal(out.numpy(), x)


class CudaArray:
    """An array by __cuda_array_interface__ alone (as CuPy and Numba give one), over a
    DeviceArray's memory, which it keeps alive."""

    def __init__(self, base, **changes):
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": base.shape, "typestr": {"f32": "<f4", "i64": "<i8"}[base.dtype],
            "data": (base.ptr, False), "strides": None, "version": 3, "stream": None}
        self.__cuda_array_interface__.update(changes)


def test_cuda_array_interface_inputs(fake):
    m = one_rank_mesh(device="fake")
    if m.coordinate is None:
        return
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = CudaArray(dtr.DeviceArray.from_numpy(x, "fake"))
    out = dtr.redistribute(src, m, "S(0)", "R")
    assert isinstance(out, dtr.DeviceArray) and out.device == "fake:0"
    assert np.array_equal(out.numpy(), x)
    target = CudaArray(dtr.DeviceArray.from_numpy(np.zeros((3, 4), np.float32), "fake"))
    assert dtr.redistribute(src, m, "R", "S(1)", out=target) is target
    assert np.array_equal(target.base.numpy(), x)
    bad = [({"strides": (4, 12)}, r"^local: a device array that is not C-contiguous"),
           ({"typestr": "<u4"}, r"^local: __cuda_array_interface__ typestr '<u4' is not a dtype"),
           ({"mask": 1}, r"^local: a masked array"),
           ({"shape": None}, r"^local: shape None is not a shape"),
           ({"shape": (-3, 4)}, r"^local: shape \(-3, 4\) is not a shape \(ints in 0..2\^40\)"),
           ({"shape": (3.0, 4)}, r"^local: shape \(3.0, 4\) is not a shape"),
           ({"shape": (1 << 62, 4)}, r"^local: shape .* is not a shape"),
           ({"shape": (1,) * 9}, r"^local: 9 dims, at most 8"),
           ({"strides": (16,)}, r"^local: a malformed __cuda_array_interface__ \(strides"),
           ({"data": "ab"}, r"^local: a malformed __cuda_array_interface__"),
           ({"data": (0, False)}, r"^local: a device array of shape \(3, 4\) at address 0"),
           ({"data": (1 << 64, False)}, r"^local: a malformed __cuda_array_interface__ \(data"),
           ({"version": "3"}, r"^local: a malformed __cuda_array_interface__ \(data"),
           ({"stream": 0}, r"^local: __cuda_array_interface__ stream 0 is not a stream"),
           ({"stream": "x"}, r"^local: __cuda_array_interface__ stream 'x' is not a stream"),
           ({"data": None}, r"^local: a malformed __cuda_array_interface__")]
    for change, message in bad:
        with pytest.raises(dtr.ArgumentError, match=message):
            dtr.redistribute(CudaArray(src.base, **change), m, "R", "R")
    with pytest.raises(dtr.ArgumentError, match="^out: a read-only array cannot receive"):
        dtr.redistribute(src, m, "R", "R", out=CudaArray(target.base, data=(target.base.ptr, True)))
    compact = CudaArray(src.base, strides=(16, 4))  # (strides given, and compact: taken)
    assert np.array_equal(dtr.redistribute(compact, m, "R", "R").numpy(), x)
    empty = CudaArray(src.base, shape=(0, 4), data=(0, False))  # (an empty one at address 0)
    out = dtr.redistribute(empty, m, "S(0)", "R")
    assert out.shape == (0, 4) and out.numpy().shape == (0, 4)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


def dl_capsule(ptr, shape, code=2, bits=32, lanes=1, strides=None, offset=0, device=(2, 0)):
    """A "dltensor" capsule (DLPack 0.x's ABI, no deleter) over ptr, and what keeps it valid."""
    sh = (ctypes.c_int64 * len(shape))(*shape)
    st = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
    m = _DLManaged(_DLTensor(ptr, _DLDevice(*device), len(shape), _DLDataType(code, bits, lanes),
                             sh, st, offset), None, None)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None), (sh, st, m)


def test_dlpack_capsules_are_read(fake):
    base = dtr.DeviceArray.from_numpy(np.arange(8, dtype=np.float32), "fake")
    cap, keep = dl_capsule(base.ptr, (2, 3), offset=8)
    view, dtype = dtr._core._dlpack_view(cap, "local", False)
    assert dtype == "f32"
    mv = memoryview(view)  # (the view's shape and address only: its bytes are the device's)
    assert mv.shape == (2, 3) and mv.nbytes == 24
    for args, message in [(dict(code=2, bits=8), r"DLPack dtype \(code 2, 8 bits, 1 lanes\)"),
                          (dict(lanes=4), r"DLPack dtype \(code 2, 32 bits, 4 lanes\)"),
                          (dict(strides=(1, 2)), "not C-contiguous")]:
        cap, keep = dl_capsule(base.ptr, (2, 3), **args)
        with pytest.raises(dtr.ArgumentError, match=f"^local: .*{message}"):
            dtr._core._dlpack_view(cap, "local", False)
    cap, keep = dl_capsule(base.ptr, (2, 3), strides=(3, 1))  # (compact strides: taken)
    assert dtr._core._dlpack_view(cap, "local", False)[1] == "f32"

    class OnGpu:  # __dlpack__ of a CUDA array: taken as one, whose device the mesh is not
        kept = []

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            assert stream == 1  # (the legacy default stream, which dtr's stream then waits for)
            cap, keep = dl_capsule(base.ptr, (8,))
            self.kept.append(keep)
            return cap

    class OnOther:
        def __dlpack_device__(self):
            return (4, 0)  # (kDLOpenCL)

        def __dlpack__(self, stream=None):
            raise AssertionError("not asked for")

    m, host = one_rank_mesh(device="fake"), one_rank_mesh()
    if m.coordinate is None:
        return  # (a bystander: these calls are rank 0's alone)
    with pytest.raises(dtr.ArgumentError, match=r"^local: an array on device 'cuda:0', and the "
                                                r"mesh is on 'fake:0'"):
        dtr.redistribute(OnGpu(), m, "R", "R")
    with pytest.raises(dtr.ArgumentError, match=r"^local: a DLPack array on device type 4"):
        dtr.redistribute(OnOther(), host, "R", "R", shape=(8,), dtype="f32")


def test_one_rank_passes_a_host_array(fake):
    """Every rank but the last passes a DeviceArray on a mesh of all ranks, the last a numpy
    array: the last raises its own error, the others fail at once, the next call pairs."""
    rank, n = parity.world()
    if n < 2:
        pytest.skip("needs 2 ranks")
    m = dtr.Mesh((n,), backend=parity.BACKEND, device="fake")
    x = np.full(4, rank, np.float32)
    bad = rank == n - 1
    with pytest.raises(dtr.Error) as e:
        dtr.redistribute(x if bad else dtr.DeviceArray.from_numpy(x, "fake"), m, "S(0)", "R")
    if bad:
        assert e.value.status == "DTR_ERR_INVALID_ARGUMENT" and "local: a host array" in str(e.value)
    else:
        assert e.value.status in ("DTR_ERR_REMOTE", "DTR_ERR_MISMATCH"), str(e.value)
    out = dtr.redistribute(dtr.DeviceArray.from_numpy(x, "fake"), m, "S(0)", "R")
    assert np.array_equal(out.numpy(), np.repeat(np.arange(n, dtype=np.float32), 4))
    # the last rank's to_mesh on another device (found before anything else of the call)
    rev = list(reversed(range(n)))
    to_fake = dtr.Mesh((n,), ranks=rev, backend=parity.BACKEND, device="fake")
    to_host = dtr.Mesh((n,), ranks=rev, backend=parity.BACKEND)
    dtr.redistribute(np.zeros(n, np.float32), to_host, "S(0)", "S(0)")  # (its context, made)
    with pytest.raises(dtr.Error) as e:
        dtr.redistribute(dtr.DeviceArray.from_numpy(x, "fake"), m, "S(0)", "R",
                         to_mesh=to_host if bad else to_fake)
    if bad:
        assert "to_mesh: on device 'cpu', mesh on 'fake:0'" in str(e.value), str(e.value)
    else:
        assert e.value.status in ("DTR_ERR_REMOTE", "DTR_ERR_MISMATCH"), str(e.value)
    out = dtr.redistribute(dtr.DeviceArray.from_numpy(x, "fake"), m, "S(0)", "R", to_mesh=to_fake)
    assert np.array_equal(out.numpy(), np.repeat(np.arange(n, dtype=np.float32), 4))
