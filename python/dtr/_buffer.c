/*
 * Arrays and tensors as buffers: the dtype of a buffer protocol view (numpy's formats,
 * torch and device arrays through the helpers), a C-contiguous view of an input (copied
 * where it is not), and new arrays of the input's kind for results.
 */
#include "_core.h"

#include <string.h>

/* numpy's names of dtr's dtypes, for the outputs of numpy inputs (NULL: through a helper). */
static const char *const dtrpy_numpy_names[DTR_DTYPE_LAST] = {
    [DTR_F32] = "float32", [DTR_F64] = "float64",  [DTR_F16] = "float16",
    [DTR_I32] = "int32",   [DTR_I64] = "int64",    [DTR_U8] = "uint8",
    [DTR_C64] = "complex64", [DTR_C128] = "complex128",
};

/* A buffer's dtype from its struct-module format and item size; -1 when dtr has none. */
static int dtrpy_format_dtype(const char *fmt, Py_ssize_t itemsize) {
    if (fmt == NULL) fmt = "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (strcmp(fmt, "f") == 0) return DTR_F32;
    if (strcmp(fmt, "d") == 0) return DTR_F64;
    if (strcmp(fmt, "e") == 0) return DTR_F16;
    if (strcmp(fmt, "B") == 0) return DTR_U8;
    if (strcmp(fmt, "Zf") == 0) return DTR_C64;
    if (strcmp(fmt, "Zd") == 0) return DTR_C128;
    if (strchr("ilq", fmt[0]) != NULL && fmt[1] == '\0')
        return itemsize == 4 ? DTR_I32 : itemsize == 8 ? DTR_I64 : -1;
    return -1;
}

/* A buffer of obj (C-contiguous; writable for outputs) and its dtype. Objects without one
 * (torch tensors, ml_dtypes arrays, device arrays) go through the helper `as_array`, which
 * returns (numpy view or _DeviceView, dtype text, kind); non-contiguous inputs are copied,
 * outputs refused. */
int dtrpy_buffer_any(PyObject *obj, const char *what, bool writable, Py_buffer *view,
                     dtr_dtype_t *dtype, PyObject **kind) {
    PyObject *arr = Py_NewRef(obj);
    *kind = NULL;
    int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    int dt = -1;
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) == 0) {
        dt = dtrpy_format_dtype(view->format, view->itemsize);
        PyBuffer_Release(view);
    } else {
        PyErr_Clear();
    }
    if (dt < 0) { /* torch, ml_dtypes' bfloat16 and fp8, or a dtype dtr does not move */
        PyObject *f = dtrpy_helper("as_array");
        PyObject *r = f == NULL ? NULL : PyObject_CallFunction(f, "Osi", obj, what, (int)writable);
        Py_DECREF(arr);
        if (r == NULL) return -1;
        dtr_dtype_t d;
        if (!PyArg_ParseTuple(r, "OOO", &arr, &f, kind) || dtrpy_dtype(f, what, &d) < 0) {
            Py_DECREF(r);
            *kind = NULL;
            return -1;
        }
        Py_INCREF(arr);
        Py_INCREF(*kind);
        Py_DECREF(r);
        dt = (int)d;
    }
    if (PyObject_GetBuffer(arr, view, flags) < 0) {
        PyErr_Clear();
        Py_DECREF(arr);
        Py_CLEAR(*kind);
        dtrpy_arg_error(writable ? "%s: a read-only array cannot receive the result"
                                 : "%s: not readable as a buffer", what);
        return -1;
    }
    if (!PyBuffer_IsContiguous(view, 'C')) {
        PyBuffer_Release(view);
        if (writable) {
            Py_DECREF(arr);
            Py_CLEAR(*kind);
            dtrpy_arg_error("%s: not C-contiguous (pass a contiguous array to fill)", what);
            return -1;
        }
        PyObject *f = dtrpy_helper("contiguous");
        PyObject *copy = f == NULL ? NULL : PyObject_CallOneArg(f, arr);
        Py_DECREF(arr);
        if (copy == NULL || PyObject_GetBuffer(copy, view, flags) < 0) {
            Py_XDECREF(copy);
            Py_CLEAR(*kind);
            return -1;
        }
        arr = copy;
    }
    Py_DECREF(arr); /* (the view holds it) */
    *dtype = (dtr_dtype_t)dt;
    return 0;
}

int dtrpy_alloc_host(const int64_t *shape_v, int ndim, dtr_dtype_t dtype, PyObject *kind,
                     PyObject **result, Py_buffer *view) {    PyObject *shape = dtrpy_tuple(shape_v, ndim), *arr = NULL;
    *result = NULL;
    if (shape == NULL) return -1;
    if (kind == NULL && dtrpy_numpy_names[dtype] != NULL) {
        PyObject *f = dtrpy_helper("numpy_empty");
        *result = f == NULL ? NULL : PyObject_CallFunction(f, "Os", shape, dtrpy_numpy_names[dtype]);
        arr = Py_XNewRef(*result);
    } else {
        PyObject *f = dtrpy_helper("empty");
        PyObject *r = f == NULL ? NULL
                                : PyObject_CallFunction(f, "OsO", shape, dtr_dtype_name(dtype),
                                                        kind ? kind : Py_None);
        if (r != NULL && PyArg_ParseTuple(r, "OO", result, &arr)) {
            Py_INCREF(*result);
            Py_INCREF(arr);
        }
        Py_XDECREF(r);
    }
    Py_DECREF(shape);
    if (arr == NULL) {
        Py_CLEAR(*result);
        return -1;
    }
    int rc = PyObject_GetBuffer(arr, view, PyBUF_SIMPLE | PyBUF_WRITABLE);
    Py_DECREF(arr);
    if (rc < 0) Py_CLEAR(*result);
    return rc;
}
