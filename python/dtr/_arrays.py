"""The helpers the extension calls for what is not a plain numpy array: torch tensors (CPU),
ml_dtypes' bfloat16 and fp8 arrays, non-contiguous inputs, and dtype objects. Registered
with dtr._core at import; not part of the API."""
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
    try:
        return _NUMPY.get(np.dtype(obj).name)
    except TypeError:
        return None


def _refuse(what, obj):
    raise _core.ArgumentError(f"{what}: dtype {obj.dtype} is not one dtr moves ({MOVES})")


def _from_torch(t, what, writable):
    torch = _torch()
    if t.device.type != "cpu":
        raise _core.RefusedError(
            f"{what}: a tensor on {t.device}: the Python package moves CPU tensors (numpy and "
            "torch); device tensors are not supported yet (docs/python.md)")
    name = dtype_text(t.dtype)
    if name is None:
        _refuse(what, t)
    if not t.is_contiguous():
        if writable:
            raise _core.ArgumentError(f"{what}: not contiguous (pass a contiguous tensor to fill)")
        t = t.contiguous()
    t = t.detach()
    carrier = _CARRIER.get(name)
    if carrier is not None:
        arr = t.view(torch.int16 if carrier is np.uint16 else torch.uint8).numpy()
        arr = arr.view(carrier)
    else:
        arr = t.numpy()
    return arr, name, "torch"


def as_array(obj, what, writable):
    """(a numpy array sharing obj's memory, dtr's dtype name, the family results are made in:
    "torch", "numpy" (ml_dtypes' types), or None (plain numpy))."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, what, writable)
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
    """A new result of dtr dtype `name` in the family `kind` ("torch", or numpy's) and a numpy
    array of the same memory that dtr fills (an integer view for bfloat16 and fp8)."""
    carrier = _CARRIER.get(name)
    if kind == "torch":
        torch = _torch()
        t = torch.empty(shape, dtype=_torch_dtype(torch, name))
        if carrier is not None:
            return t, t.view(torch.int16 if carrier is np.uint16 else torch.uint8).numpy()
        return t, t.numpy()
    a = np.empty(shape, dtype=_numpy_dtype(name))
    return a, a.view(carrier) if carrier is not None else a
