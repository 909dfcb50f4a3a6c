"""The helpers the extension calls for what is not a plain numpy array: torch tensors,
ml_dtypes' bfloat16 and fp8 arrays, device arrays (a torch tensor on a GPU, dtr.DeviceArray,
anything with __cuda_array_interface__ or __dlpack__), non-contiguous inputs, and dtype
objects. Registered with dtr._core at import; not part of the API.

A device array comes back as a dtr._core._DeviceView: a buffer whose address is the device's
(the extension hands it to a context on that device's memory space, never reads it), and
its kind "FAMILY@DEVICE": "torch@cuda:0" (results made by torch on that device), or
"array@cuda:0" / "array@*" (results are dtr.DeviceArray; "*": __cuda_array_interface__ does
not say which device, so the mesh's is taken)."""
import operator

import numpy as np

from . import _core

# numpy's names of the dtypes dtr moves (the others come through ml_dtypes or torch).
_NUMPY = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32",
          "int64": "i64", "uint8": "u8", "complex64": "c64", "complex128": "c128",
          "bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
_NUMPY_OF = {v: k for k, v in _NUMPY.items()}
# torch's, by the dtype's name after "torch."
_TORCH = dict(_NUMPY)
# the integer view that carries each dtype numpy has no buffer format for
_CARRIER = {"bf16": np.uint16, "f8e4m3": np.uint8, "f8e5m2": np.uint8}
MOVES = "float32, float64, float16, bfloat16, int32, int64, uint8, complex64, complex128, float8_e4m3fn, float8_e5m2"


def _torch():
    import sys
    return sys.modules.get("torch")


def dtype_text(obj):
    """dtr's name of a numpy dtype (or type), a torch dtype or a str; None if it has none."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.dtype):
        return _TORCH.get(str(obj).replace("torch.", ""))
    if isinstance(obj, (list, tuple)):  # numpy reads some tuples as dtypes; dtr takes none
        return None
    try:
        return _NUMPY.get(np.dtype(obj).name)
    except (TypeError, ValueError):
        return None


def _refuse(what, obj):
    raise _core.ArgumentError(f"{what}: dtype {obj.dtype} is not one dtr moves ({MOVES})")


def _from_torch(t, what, writable):
    torch = _torch()
    name = dtype_text(t.dtype)
    if name is None:
        _refuse(what, t)
    if not t.is_contiguous():
        if writable:
            raise _core.ArgumentError(f"{what}: not contiguous (pass a contiguous tensor to fill)")
        t = t.contiguous()
    t = t.detach()
    if t.device.type != "cpu":
        return _core._DeviceView(t, t.data_ptr(), tuple(t.shape), t.element_size(), None), \
            name, f"torch@{t.device}"
    carrier = _CARRIER.get(name)
    if carrier is not None:
        arr = t.view(torch.int16 if carrier is np.uint16 else torch.uint8).numpy()
        arr = arr.view(carrier)
    else:
        arr = t.numpy()
    return arr, name, "torch"


# __cuda_array_interface__'s type strings (numpy's, little-endian) of dtr's dtypes
_TYPESTR = {"<f4": "f32", "<f8": "f64", "<f2": "f16", "<i4": "i32", "<i8": "i64", "|u1": "u8",
            "<u1": "u8", "<c8": "c64", "<c16": "c128", "<V2": "bf16", "|V2": "bf16"}
_TYPESTR_OF = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "i32": "<i4", "i64": "<i8", "u8": "|u1",
               "c64": "<c8", "c128": "<c16", "bf16": "<V2", "f8e4m3": "|V1", "f8e5m2": "|V1"}


def _compact(shape, strides, item):
    """Whether strides (bytes, or None) are the row-major compact ones of shape."""
    if strides is None:
        return True
    want = item
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != want:
            return False
        want *= n
    return True


# the most dims a tensor has, and the largest dim (DTR_MAX_TENSOR_DIMS, DTR_MAX_DIM_SIZE)
_MAX_DIMS, _MAX_DIM = 8, 1 << 40


def _index(v):
    """v as an int where it is one (numpy's integers too), not a bool or a float; else None."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def _device_shape(shape, what):
    """A device array's shape, checked: ints in 0..2^40, at most 8 of them."""
    try:
        dims = [_index(n) for n in shape]
    except TypeError:
        dims = [None]
    if any(n is None or n < 0 or n > _MAX_DIM for n in dims):
        raise _core.ArgumentError(f"{what}: shape {tuple(shape) if isinstance(shape, (list, tuple)) else shape!r} "
                                  f"is not a shape (ints in 0..2^40)")
    if len(dims) > _MAX_DIMS:
        raise _core.ArgumentError(f"{what}: {len(dims)} dims, at most {_MAX_DIMS}")
    return tuple(dims)


def _from_cai(obj, what, writable):
    """An object with __cuda_array_interface__ (CuPy, Numba, dtr.DeviceArray's own)."""
    try:
        cai = obj.__cuda_array_interface__
        shape, typestr, data = cai["shape"], cai["typestr"], cai["data"]
        ptr, readonly = data
        version = cai.get("version", 0)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise _core.ArgumentError(f"{what}: a malformed __cuda_array_interface__ ({e})") from None
    shape = _device_shape(shape, what)
    ptr, version = _index(ptr), _index(version)
    if ptr is None or not 0 <= ptr < 1 << 64 or version is None:
        raise _core.ArgumentError(f"{what}: a malformed __cuda_array_interface__ (data "
                                  f"{data!r}, version {cai.get('version')!r}: an address and an int)")
    name = _TYPESTR.get(typestr)
    if name is None:
        raise _core.ArgumentError(f"{what}: __cuda_array_interface__ typestr {typestr!r} is not "
                                  f"a dtype dtr moves ({MOVES})")
    item = _core.dtype_size(name)
    strides = cai.get("strides")
    if strides is not None and (not isinstance(strides, (tuple, list)) or len(strides) != len(shape)
                                or any(_index(x) is None for x in strides)):
        raise _core.ArgumentError(f"{what}: a malformed __cuda_array_interface__ (strides "
                                  f"{strides!r} for shape {shape})")
    if not _compact(shape, strides, item):
        raise _core.ArgumentError(f"{what}: a device array that is not C-contiguous (pass a "
                                  "contiguous one)")
    if writable and readonly:
        raise _core.ArgumentError(f"{what}: a read-only array cannot receive the result")
    if cai.get("mask") is not None:
        raise _core.ArgumentError(f"{what}: a masked array (__cuda_array_interface__ mask)")
    if ptr == 0 and all(shape):
        raise _core.ArgumentError(f"{what}: a device array of shape {shape} at address 0")
    stream = cai.get("stream") if version >= 3 else None
    if stream is not None and (_index(stream) is None or not 0 < _index(stream) < 1 << 64):
        raise _core.ArgumentError(f"{what}: __cuda_array_interface__ stream {stream!r} is not a "
                                  "stream (None, 1, 2 or a cudaStream_t; 0 is disallowed)")
    return _core._DeviceView(obj, ptr, shape, item, stream), name, "array@*"


# DLPack's device types that are GPUs (dlpack.h: kDLCUDA, kDLCUDAManaged)
_DL_CUDA = {2: "cuda", 13: "cuda"}


def _from_dlpack(obj, what, writable):
    """An object with __dlpack__ on a GPU: the capsule's tensor, read in C."""
    kind, index = obj.__dlpack_device__()
    family = _DL_CUDA.get(int(kind))
    if family is None:
        raise _core.ArgumentError(f"{what}: a DLPack array on device type {int(kind)}; dtr "
                                  "moves host arrays and CUDA ones")
    try:  # (the legacy default stream: the view makes dtr's stream wait for it)
        capsule = obj.__dlpack__(stream=1)
    except TypeError:
        capsule = obj.__dlpack__()
    view, name = _core._dlpack_view(capsule, what, bool(writable))
    return view, name, f"array@{family}:{int(index)}"


def _device_input(obj, what, writable):
    """A device array's (view, dtype text, kind), or None where obj is not one."""
    if isinstance(obj, _core.DeviceArray):
        return obj._view(what, bool(writable))
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, what, writable)
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and not isinstance(obj, np.ndarray):
        try:
            kind = int(dev()[0])
        except Exception as e:
            raise _core.ArgumentError(f"{what}: its __dlpack_device__() gave no device "
                                      f"({type(e).__name__}: {e})") from None
        if kind != 1:  # (kDLCPU: a host array, which has the buffer protocol or numpy's)
            return _from_dlpack(obj, what, writable)
    return None


def as_array(obj, what, writable):
    """(a numpy array sharing obj's memory, dtr's dtype name, the family results are made in:
    "torch", "numpy" (ml_dtypes' types), or None (plain numpy))."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, what, writable)
    found = _device_input(obj, what, writable)
    if found is not None:
        return found
    if isinstance(obj, np.ndarray):
        if not obj.dtype.isnative:
            raise _core.ArgumentError(
                f"{what}: dtype {obj.dtype.str} is in the other byte order than this machine's "
                "(dtr would read it wrong); convert it first: "
                "arr.astype(arr.dtype.newbyteorder('='))")
        name = _NUMPY.get(obj.dtype.name)
        if name is None:
            _refuse(what, obj)
        carrier = _CARRIER.get(name)
        if carrier is not None:
            if not obj.flags.c_contiguous:
                if writable:
                    raise _core.ArgumentError(f"{what}: not C-contiguous (pass a contiguous array to fill)")
                obj = np.ascontiguousarray(obj)
            return obj.view(carrier), name, "numpy"
        return obj, name, None
    raise _core.ArgumentError(
        f"{what}: expected a numpy array or a torch tensor, got {type(obj).__name__}")


def contiguous(arr):
    return np.ascontiguousarray(arr)


def numpy_empty(shape, name):
    return np.empty(shape, dtype=name)


def _torch_dtype(torch, name):
    return getattr(torch, {"f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}.get(
        name, _NUMPY_OF[name]))


def _numpy_dtype(name):
    if name in _CARRIER:  # bfloat16 and fp8: ml_dtypes' types
        try:
            import ml_dtypes
        except ImportError:
            raise _core.ArgumentError(f"a {name} numpy result needs ml_dtypes (pip install "
                                      "ml-dtypes), numpy has no such dtype") from None
        return getattr(ml_dtypes, _NUMPY_OF[name])
    return np.dtype(_NUMPY_OF[name])


def empty(shape, name, kind):
    """A new result of dtr dtype `name` in the family `kind` ("torch", "torch@DEVICE", or
    numpy's) and a buffer of the same memory that dtr fills (an integer view for bfloat16 and
    fp8; a _DeviceView on a device)."""
    carrier = _CARRIER.get(name)
    if kind is not None and kind.startswith("torch@"):
        torch = _torch()
        t = torch.empty(shape, dtype=_torch_dtype(torch, name), device=kind[len("torch@"):])
        return t, _core._DeviceView(t, t.data_ptr(), tuple(t.shape), t.element_size(), None)
    if kind == "torch":
        torch = _torch()
        t = torch.empty(shape, dtype=_torch_dtype(torch, name))
        if carrier is not None:
            return t, t.view(torch.int16 if carrier is np.uint16 else torch.uint8).numpy()
        return t, t.numpy()
    a = np.empty(shape, dtype=_numpy_dtype(name))
    return a, a.view(carrier) if carrier is not None else a


def torch_stream(kind):
    """The cudaStream_t (an int) of torch's current stream on the device of kind
    "torch@cuda:N": the stream dtr's work on that device joins."""
    return _torch().cuda.current_stream(kind[len("torch@"):]).cuda_stream
