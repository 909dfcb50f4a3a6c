/*
 * Device memory: the memory space a Mesh's device= names (found by name in the library's
 * table, dtr_memory_find: "cuda" from libdtr_cuda.so, a test's own), device arrays as
 * buffers whose address is the device's (dtr._core._DeviceView: the extension hands it to
 * a context on that space and never reads it), the DLPack capsules of __dlpack__ inputs, and
 * dtr.DeviceArray, the results the space allocates where the input's framework cannot
 * (torch makes its own).
 */
#include "_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_dlpack.h"

/* ---- spaces by device text ("cuda:0") --------------------------------------------------- */

enum { DTRPY_MAX_SPACES = 32 };
static struct {
    char device[DTRPY_DEVICE_MAX]; /* "cuda:0" */
    dtr_memory_info_t info;
    int index;
    void *alloc; /* the state DeviceArrays are allocated with (NULL until first use) */
} dtrpy_spaces[DTRPY_MAX_SPACES];
static int dtrpy_nspaces;

/* The space of a canonical device text, or -1 with an error. */
static int dtrpy_space_at(const char *device) {
    for (int i = 0; i < dtrpy_nspaces; i++)
        if (strcmp(dtrpy_spaces[i].device, device) == 0) return i;
    PyErr_Format(dtrpy_argument_error, "device: '%s' is not a device a Mesh was made on",
                 device);
    return -1;
}

/* The GPU torch uses now, where torch is imported and has made its CUDA state; else -1. */
static int dtrpy_torch_device(void) {
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *torch = mods != NULL ? PyDict_GetItemString(mods, "torch") : NULL;
    if (torch == NULL) return -1;
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    PyObject *ok = cuda != NULL ? PyObject_CallMethod(cuda, "is_initialized", NULL) : NULL;
    PyObject *r = ok == Py_True ? PyObject_CallMethod(cuda, "current_device", NULL) : NULL;
    long d = r != NULL ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    Py_XDECREF(ok);
    Py_XDECREF(cuda);
    PyErr_Clear();
    return (int)d;
}

int dtrpy_device_parse(PyObject *obj, char *out, size_t cap) {
    if (obj == NULL || obj == Py_None) {
        snprintf(out, cap, "cpu");
        return 0;
    }
    const char *text = dtrpy_text(obj, "device");
    if (text == NULL) return -1;
    if (strcmp(text, "cpu") == 0) {
        snprintf(out, cap, "cpu");
        return 0;
    }
    char name[DTR_BACKEND_NAME_MAX + 1];
    const char *colon = strchr(text, ':');
    size_t len = colon != NULL ? (size_t)(colon - text) : strlen(text);
    bool named = len > 0 && len < sizeof name;
    for (size_t i = 0; named && i < len; i++)
        named = (text[i] >= 'a' && text[i] <= 'z') || (text[i] >= '0' && text[i] <= '9') ||
                text[i] == '_';
    if (!named)
        return dtrpy_arg_error("device: '%.40s' is not 'cpu', a space's name ('cuda': a-z, 0-9 "
                               "and _) or 'NAME:INDEX'", text), -1;
    memcpy(name, text, len);
    name[len] = '\0';
    if (strcmp(name, "host") == 0)
        return dtrpy_arg_error("device: 'host' is not a device (host memory is device='cpu')"),
               -1;
    int64_t index = -1;
    if (colon != NULL) {
        char *end = NULL;
        errno = 0;
        index = strtoll(colon + 1, &end, 10);
        if (colon[1] < '0' || colon[1] > '9' || *end != '\0')
            return dtrpy_arg_error("device: '%.40s': the index after ':' is not a number",
                                   text), -1;
        if (errno == ERANGE || index > INT32_MAX)
            return dtrpy_arg_error("device: '%.40s': index out of range", text), -1;
    }
    if (strcmp(name, "cpu") == 0) { /* ("cpu:0", as torch writes it) */
        if (index > 0) return dtrpy_arg_error("device: '%.40s': the host is 'cpu' (or 'cpu:0')", text), -1;
        snprintf(out, cap, "cpu");
        return 0;
    }
    dtr_memory_info_t info;
    if (dtr_memory_find(name, &info) != DTR_OK) {
        PyErr_Format(dtrpy_refused_error, "device '%s': this dtr has no memory space '%s' "
                     "(%s)", text, name, dtr_last_error());
        return -1;
    }
    int count = info.device_count != NULL ? info.device_count() : 1;
    if (count < 1) {
        PyErr_Format(dtrpy_refused_error, "device '%s': no device of it is visible (%s)", text,
                     dtr_last_error());
        return -1;
    }
    if (index < 0) { /* torch's current GPU, else LOCAL_RANK's share, else the first */
        int t = strcmp(name, "cuda") == 0 ? dtrpy_torch_device() : -1;
        const char *lr = getenv("LOCAL_RANK");
        index = t >= 0 ? t : lr != NULL ? atoi(lr) % count : 0;
    }
    if (index >= count)
        return dtrpy_arg_error("device: '%s': index %lld, but this process sees %d of them "
                               "(0..%d)", text, (long long)index, count, count - 1), -1;
    snprintf(out, cap, "%s:%lld", name, (long long)index);
    for (int i = 0; i < dtrpy_nspaces; i++)
        if (strcmp(dtrpy_spaces[i].device, out) == 0) return 0;
    if (dtrpy_nspaces == DTRPY_MAX_SPACES)
        return dtrpy_arg_error("device: '%s': more than %d devices in one process", out,
                               DTRPY_MAX_SPACES), -1;
    int at = dtrpy_nspaces++;
    snprintf(dtrpy_spaces[at].device, sizeof dtrpy_spaces[at].device, "%s", out);
    dtrpy_spaces[at].info = info;
    dtrpy_spaces[at].index = (int)index;
    return 0;
}

dtr_status_t dtrpy_space_attach(dtrpy_context_t *c, const char *device) {
    c->space = NULL;
    if (strcmp(device, "cpu") == 0) return DTR_OK;
    int at = -1;
    for (int i = 0; i < dtrpy_nspaces; i++)
        if (strcmp(dtrpy_spaces[i].device, device) == 0) at = i;
    if (at < 0) return DTR_ERR_INTERNAL;
    if (strcmp(dtr_context_backend(c->ctx), "nccl") == 0) { /* (CUDA already, NCCL's stream) */
        dtrpy_nccl_attach(c, &dtrpy_spaces[at].info);
        return DTR_OK;
    }
    void *state = NULL;
    dtr_status_t st = dtrpy_spaces[at].info.create(dtrpy_spaces[at].index, NULL, &state);
    if (st != DTR_OK) return st;
    st = dtr_context_set_memory(c->ctx, dtrpy_spaces[at].info.ops, state); /* (owns state) */
    if (st != DTR_OK) return st;
    c->space = &dtrpy_spaces[at].info;
    c->space_state = state;
    return DTR_OK;
}

/* ---- _DeviceView: a buffer at a device address -------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *owner;  /* what keeps the memory alive (the tensor, the capsule, the array) */
    PyObject *stream; /* the producer's stream the data is complete on (None: no wait) */
    uintptr_t ptr;
    Py_ssize_t shape[DTR_MAX_TENSOR_DIMS], strides[DTR_MAX_TENSOR_DIMS];
    int ndim;
    Py_ssize_t itemsize, len;
} dtrpy_devview_t;

static PyObject *dtrpy_devview_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *owner, *shape, *stream;
    unsigned long long ptr;
    Py_ssize_t item;
    if (kw != NULL || !PyArg_ParseTuple(args, "OKOnO:_DeviceView", &owner, &ptr, &shape, &item,
                                        &stream))
        return NULL;
    PyObject *seq = PySequence_Tuple(shape);
    if (seq == NULL) return NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(seq);
    if (nd > DTR_MAX_TENSOR_DIMS || item < 1) {
        Py_DECREF(seq);
        return dtrpy_arg_error("a device array of %zd dims (at most %d)", nd, DTR_MAX_TENSOR_DIMS);
    }
    dtrpy_devview_t *v = (dtrpy_devview_t *)type->tp_alloc(type, 0);
    if (v == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    v->owner = Py_NewRef(owner);
    v->stream = Py_NewRef(stream);
    v->ptr = (uintptr_t)ptr;
    v->ndim = (int)nd;
    v->itemsize = item;
    Py_ssize_t n = item;
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(seq, i));
        if (v->shape[i] < 0) {
            Py_DECREF(seq);
            Py_DECREF(v);
            if (!PyErr_Occurred()) dtrpy_arg_error("a device array's shape has a negative dim");
            return NULL;
        }
        v->strides[i] = n;
        n *= v->shape[i];
    }
    Py_DECREF(seq);
    v->len = n;
    return (PyObject *)v;
}

static int dtrpy_devview_getbuffer(dtrpy_devview_t *v, Py_buffer *view, int flags) {
    (void)flags;
    static char format[] = "B";
    view->buf = (void *)v->ptr;
    view->obj = Py_NewRef((PyObject *)v);
    view->len = v->len;
    view->readonly = 0;
    view->itemsize = v->itemsize;
    view->format = format; /* (dtr's dtype comes with the view, not from this) */
    view->ndim = v->ndim;
    view->shape = v->shape;
    view->strides = v->strides;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static void dtrpy_devview_dealloc(dtrpy_devview_t *v) {
    Py_XDECREF(v->owner);
    Py_XDECREF(v->stream);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

static PyBufferProcs dtrpy_devview_buffer = {
    .bf_getbuffer = (getbufferproc)dtrpy_devview_getbuffer,
};

static PyTypeObject dtrpy_devview_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr._DeviceView",
    .tp_basicsize = sizeof(dtrpy_devview_t),
    .tp_dealloc = (destructor)dtrpy_devview_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_DeviceView(owner, ptr, shape, itemsize, stream): a buffer at a device address "
              "(internal: only for the extension's own calls).",
    .tp_new = dtrpy_devview_new,
    .tp_as_buffer = &dtrpy_devview_buffer,
};

bool dtrpy_is_devview(PyObject *obj) { return Py_IS_TYPE(obj, &dtrpy_devview_type); }

PyObject *dtrpy_devview_stream(PyObject *view_obj) {
    return dtrpy_is_devview(view_obj) ? ((dtrpy_devview_t *)view_obj)->stream : Py_None;
}

/* ---- DLPack capsules (__dlpack__ on a GPU) ------------------------------------------------ */

/* dtr's dtype of a DLPack dtype; -1 where dtr has none. */
static int dtrpy_dl_dtype(dtrpy_dl_dtype_t t) {
    if (t.lanes != 1) return -1;
    switch (t.code) {
    case 0: return t.bits == 32 ? DTR_I32 : t.bits == 64 ? DTR_I64 : -1;      /* kDLInt */
    case 1: return t.bits == 8 ? DTR_U8 : -1;                                  /* kDLUInt */
    case 2: return t.bits == 32 ? DTR_F32 : t.bits == 64 ? DTR_F64 : t.bits == 16 ? DTR_F16 : -1;
    case 4: return t.bits == 16 ? DTR_BF16 : -1;                               /* kDLBfloat */
    case 5: return t.bits == 64 ? DTR_C64 : t.bits == 128 ? DTR_C128 : -1;    /* kDLComplex */
    default: return -1;
    }
}

/* _dlpack_view(capsule, what, writable): (a _DeviceView of the capsule's tensor, dtype). */
static PyObject *dtrpy_dlpack_view(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    const char *what;
    int writable;
    if (!PyArg_ParseTuple(args, "Osp", &capsule, &what, &writable)) return NULL;
    if (!PyCapsule_IsValid(capsule, "dltensor"))
        return dtrpy_arg_error("%s: __dlpack__ gave no unused 'dltensor' capsule", what);
    /* (a DLManagedTensor starts with its DLTensor) */
    dtrpy_dl_tensor_t *t = PyCapsule_GetPointer(capsule, "dltensor");
    int dt = dtrpy_dl_dtype(t->dtype);
    if (dt < 0)
        return dtrpy_arg_error("%s: DLPack dtype (code %d, %d bits, %d lanes) is not one dtr "
                               "moves", what, t->dtype.code, t->dtype.bits, t->dtype.lanes);
    if (t->ndim < 0 || t->ndim > DTR_MAX_TENSOR_DIMS)
        return dtrpy_arg_error("%s: %d dims, at most %d", what, t->ndim, DTR_MAX_TENSOR_DIMS);
    int64_t item = t->dtype.bits / 8, want = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0 || t->shape[i] > DTR_MAX_DIM_SIZE)
            return dtrpy_arg_error("%s: a DLPack array of dim %d = %lld (dims are 0..2^40)",
                                   what, i, (long long)t->shape[i]);
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->strides != NULL && t->shape[i] != 1 && t->strides[i] != want)
            return dtrpy_arg_error("%s: a DLPack array that is not C-contiguous (pass a "
                                   "contiguous one)", what);
        want *= t->shape[i];
    }
    PyObject *shape = dtrpy_tuple(t->shape, t->ndim);
    if (shape == NULL) return NULL;
    uintptr_t p = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    PyObject *stream = PyLong_FromLong(1); /* (exported for the legacy default stream) */
    PyObject *view = stream == NULL ? NULL
                                    : PyObject_CallFunction((PyObject *)&dtrpy_devview_type,
                                                            "OKOnO", capsule,
                                                            (unsigned long long)p, shape,
                                                            (Py_ssize_t)item, stream);
    Py_DECREF(shape);
    Py_XDECREF(stream);
    (void)writable; /* (DLPack has no read-only flag before version 1.0's) */
    return view == NULL ? NULL : Py_BuildValue("(Ns)", view, dtr_dtype_name((dtr_dtype_t)dt));
}

/* ---- dtr.DeviceArray ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *ptr;
    int space; /* in dtrpy_spaces */
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    dtr_dtype_t dtype;
    int64_t nbytes;
} dtrpy_devarray_t;

static PyTypeObject dtrpy_devarray_type;

/* The state arrays of space `at` are allocated with (made at first use, kept). */
static void *dtrpy_alloc_state(int at) {
    if (dtrpy_spaces[at].alloc == NULL) {
        dtr_status_t st = dtrpy_spaces[at].info.create(dtrpy_spaces[at].index, NULL,
                                                       &dtrpy_spaces[at].alloc);
        if (st != DTR_OK) dtrpy_raise(st);
    }
    return dtrpy_spaces[at].alloc;
}

/* A new DeviceArray of shape and dtype on device (canonical text); NULL with an error. */
static dtrpy_devarray_t *dtrpy_devarray_make(const char *device, const int64_t *shape, int ndim,
                                             dtr_dtype_t dtype) {
    int at = dtrpy_space_at(device);
    void *state = at < 0 ? NULL : dtrpy_alloc_state(at);
    if (state == NULL) return NULL;
    int64_t bytes = 0;
    dtr_status_t st = dtr_shape_bytes(shape, ndim, dtype, &bytes);
    if (st != DTR_OK) return (dtrpy_devarray_t *)dtrpy_raise(st);
    dtrpy_devarray_t *a = PyObject_New(dtrpy_devarray_t, &dtrpy_devarray_type);
    if (a == NULL) return NULL;
    a->ptr = NULL;
    a->space = at;
    memcpy(a->shape, shape, sizeof *shape * (size_t)ndim);
    a->ndim = ndim;
    a->dtype = dtype;
    a->nbytes = bytes;
    st = dtrpy_spaces[at].info.ops->alloc(state, bytes > 0 ? bytes : 1, &a->ptr);
    if (st != DTR_OK) {
        a->ptr = NULL;
        Py_DECREF(a);
        return (dtrpy_devarray_t *)dtrpy_raise(st);
    }
    return a;
}

static void dtrpy_devarray_dealloc(dtrpy_devarray_t *a) {
    if (a->ptr != NULL) dtrpy_spaces[a->space].info.ops->free(dtrpy_spaces[a->space].alloc, a->ptr);
    PyObject_Free(a);
}

/* DeviceArray.from_numpy(arr, device): a copy of a host array on the device. */
static PyObject *dtrpy_devarray_from_numpy(PyObject *cls, PyObject *args, PyObject *kw) {
    (void)cls;
    static char *names[] = {"array", "device", NULL};
    PyObject *arr, *dev;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:from_numpy", names, &arr, &dev))
        return dtrpy_as_argument_error();
    char device[DTRPY_DEVICE_MAX];
    if (dtrpy_device_parse(dev, device, sizeof device) < 0) return NULL;
    if (strcmp(device, "cpu") == 0)
        return dtrpy_arg_error("device: 'cpu' (a DeviceArray is on a device: keep the numpy array)");
    Py_buffer view;
    dtr_dtype_t dtype;
    PyObject *kind = NULL;
    if (dtrpy_buffer(arr, "array", false, &view, &dtype, &kind) < 0) return NULL;
    Py_XDECREF(kind);
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    for (int i = 0; i < view.ndim && i < DTR_MAX_TENSOR_DIMS; i++) shape[i] = view.shape[i];
    dtrpy_devarray_t *a = view.ndim > DTR_MAX_TENSOR_DIMS
                              ? (dtrpy_devarray_t *)dtrpy_arg_error("array: %d dims, at most %d",
                                                                    view.ndim, DTR_MAX_TENSOR_DIMS)
                              : dtrpy_devarray_make(device, shape, view.ndim, dtype);
    if (a != NULL && a->nbytes > 0) {
        const dtr_memory_info_t *info = &dtrpy_spaces[a->space].info;
        dtr_status_t st = info->ops->copy(dtrpy_spaces[a->space].alloc, a->ptr, view.buf,
                                          a->nbytes, DTR_COPY_FROM_HOST);
        if (st == DTR_OK) st = info->ops->sync(dtrpy_spaces[a->space].alloc);
        if (st != DTR_OK) {
            Py_CLEAR(a);
            dtrpy_raise(st);
        }
    }
    PyBuffer_Release(&view);
    return (PyObject *)a;
}

/* DeviceArray.numpy(): a host copy (a numpy array; bfloat16 and fp8 as ml_dtypes' types). */
static PyObject *dtrpy_devarray_numpy(dtrpy_devarray_t *a, PyObject *noargs) {
    (void)noargs;
    PyObject *kind = PyUnicode_FromString("numpy"), *result = NULL;
    Py_buffer view;
    if (kind == NULL) return NULL;
    int rc = dtrpy_alloc_host(a->shape, a->ndim, a->dtype, kind, &result, &view);
    Py_DECREF(kind);
    if (rc < 0) return NULL;
    dtr_status_t st = DTR_OK;
    void *state = dtrpy_spaces[a->space].alloc;
    if (a->nbytes > 0) {
        const dtr_memory_ops_t *ops = dtrpy_spaces[a->space].info.ops;
        Py_BEGIN_ALLOW_THREADS
        st = ops->copy(state, view.buf, a->ptr, a->nbytes, DTR_COPY_TO_HOST);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (st != DTR_OK) {
        Py_DECREF(result);
        return dtrpy_raise(st);
    }
    return result;
}

/* __array__: a TypeError, so that numpy.asarray(a) does not quietly make an object array. */
static PyObject *dtrpy_devarray_array(dtrpy_devarray_t *a, PyObject *args, PyObject *kw) {
    (void)args, (void)kw;
    PyErr_Format(PyExc_TypeError, "a dtr.DeviceArray on '%s' is device memory, which numpy "
                 "cannot read: copy it with .numpy()", dtrpy_spaces[a->space].device);
    return NULL;
}

/* "array@DEVICE", the kind of a's results. */
static PyObject *dtrpy_devarray_kind(const dtrpy_devarray_t *a) {
    return PyUnicode_FromFormat("array@%s", dtrpy_spaces[a->space].device);
}

/* A _DeviceView of a (new reference). */
static PyObject *dtrpy_devarray_view_of(dtrpy_devarray_t *a) {
    PyObject *shape = dtrpy_tuple(a->shape, a->ndim);
    if (shape == NULL) return NULL;
    PyObject *view = PyObject_CallFunction((PyObject *)&dtrpy_devview_type, "OKOnO", a,
                                           (unsigned long long)(uintptr_t)a->ptr, shape,
                                           (Py_ssize_t)dtr_dtype_info(a->dtype)->size, Py_None);
    Py_DECREF(shape);
    return view;
}

/* _view(what, writable): (a _DeviceView of it, dtype, kind) as dtr/_arrays.py gives them. */
static PyObject *dtrpy_devarray_view(dtrpy_devarray_t *a, PyObject *args) {
    const char *what;
    int writable;
    if (!PyArg_ParseTuple(args, "sp", &what, &writable)) return NULL;
    PyObject *view = dtrpy_devarray_view_of(a);
    return view == NULL ? NULL
                        : Py_BuildValue("(NsN)", view, dtr_dtype_name(a->dtype),
                                        dtrpy_devarray_kind(a));
}

static PyObject *dtrpy_devarray_shape(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    return dtrpy_tuple(a->shape, a->ndim);
}

static PyObject *dtrpy_devarray_dtype(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    return PyUnicode_FromString(dtr_dtype_name(a->dtype));
}

static PyObject *dtrpy_devarray_device(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    return PyUnicode_FromString(dtrpy_spaces[a->space].device);
}

static PyObject *dtrpy_devarray_nbytes(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(a->nbytes);
}

static PyObject *dtrpy_devarray_ptr(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(a->ptr);
}

/* __cuda_array_interface__ (version 3) of an array on a CUDA device; AttributeError on
 * another space's (so hasattr() tells a consumer the pointer is not one it can read). */
static PyObject *dtrpy_devarray_cai(dtrpy_devarray_t *a, void *closure) {
    (void)closure;
    if (strncmp(dtrpy_spaces[a->space].device, "cuda:", 5) != 0) {
        PyErr_Format(PyExc_AttributeError, "a DeviceArray on '%s' has no "
                     "__cuda_array_interface__", dtrpy_spaces[a->space].device);
        return NULL;
    }
    static const char *const typestr[DTR_DTYPE_LAST] = {
        [DTR_F32] = "<f4", [DTR_F64] = "<f8", [DTR_F16] = "<f2", [DTR_BF16] = "<V2",
        [DTR_I32] = "<i4", [DTR_I64] = "<i8", [DTR_U8] = "|u1", [DTR_F8E4M3] = "|V1",
        [DTR_F8E5M2] = "|V1", [DTR_C64] = "<c8", [DTR_C128] = "<c16"};
    PyObject *shape = dtrpy_tuple(a->shape, a->ndim);
    if (shape == NULL) return NULL;
    /* (stream None: the call that made it synchronised its stream before returning) */
    return Py_BuildValue("{s:N,s:s,s:(NO),s:O,s:i,s:O}", "shape", shape, "typestr",
                         typestr[a->dtype], "data", PyLong_FromVoidPtr(a->ptr), Py_False,
                         "strides", Py_None, "version", 3, "stream", Py_None);
}

static PyObject *dtrpy_devarray_repr(dtrpy_devarray_t *a) {
    char shape[160];
    dtrpy_format_shape(a->shape, a->ndim, shape, sizeof shape);
    return PyUnicode_FromFormat("dtr.DeviceArray(shape=%s, dtype='%s', device='%s')", shape,
                                dtr_dtype_name(a->dtype), dtrpy_spaces[a->space].device);
}

static PyGetSetDef dtrpy_devarray_getset[] = {
    {"shape", (getter)dtrpy_devarray_shape, NULL, "The shape (a tuple of ints).", NULL},
    {"dtype", (getter)dtrpy_devarray_dtype, NULL, "dtr's name of the dtype (\"f32\").", NULL},
    {"device", (getter)dtrpy_devarray_device, NULL, "The device (\"cuda:0\").", NULL},
    {"nbytes", (getter)dtrpy_devarray_nbytes, NULL, "Bytes of the array.", NULL},
    {"ptr", (getter)dtrpy_devarray_ptr, NULL, "The device address (an int).", NULL},
    {"__cuda_array_interface__", (getter)dtrpy_devarray_cai, NULL,
     "CUDA's array interface, version 3 (on a CUDA device only).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtrpy_devarray_methods[] = {
    {"from_numpy", (PyCFunction)(void (*)(void))dtrpy_devarray_from_numpy,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "DeviceArray.from_numpy(array, device): a copy of a host array (numpy, or a CPU torch "
     "tensor) on the device (\"cuda\", \"cuda:1\")."},
    {"numpy", (PyCFunction)dtrpy_devarray_numpy, METH_NOARGS,
     "A host copy as a numpy array (bfloat16 and fp8 as ml_dtypes' types)."},
    {"_view", (PyCFunction)dtrpy_devarray_view, METH_VARARGS, "(internal)"},
    {"__array__", (PyCFunction)(void (*)(void))dtrpy_devarray_array,
     METH_VARARGS | METH_KEYWORDS, "Refused: numpy cannot read device memory (use numpy())."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject dtrpy_devarray_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr.DeviceArray",
    .tp_basicsize = sizeof(dtrpy_devarray_t),
    .tp_dealloc = (destructor)dtrpy_devarray_dealloc,
    .tp_repr = (reprfunc)dtrpy_devarray_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array in a device's memory that dtr allocated: a result of a device array "
              "input whose framework dtr cannot ask for memory (anything but torch), or one "
              "made with DeviceArray.from_numpy. Read it with numpy(), or hand it to CuPy, "
              "Numba or torch through __cuda_array_interface__ (on CUDA).",
    .tp_getset = dtrpy_devarray_getset,
    .tp_methods = dtrpy_devarray_methods,
};

/* ---- device arrays in calls -------------------------------------------------------------- */

/* The device of a kind: "cpu" for a host one (NULL, "torch", "numpy"), else after the '@'. */
static const char *dtrpy_kind_device(PyObject *kind) {
    const char *k = kind != NULL ? PyUnicode_AsUTF8(kind) : NULL;
    const char *at = k != NULL ? strchr(k, '@') : NULL;
    return at != NULL ? at + 1 : "cpu";
}

/* dtrpy_buffer_on's work; host_only: the call reads its arrays on the host whatever its
 * mesh (the error then says so rather than point at the mesh). */
static int dtrpy_buffer_check(PyObject *obj, const char *what, bool writable,
                              const char *device, bool host_only, Py_buffer *view,
                              dtr_dtype_t *dtype, PyObject **kind) {
    if (dtrpy_buffer_any(obj, what, writable, view, dtype, kind) < 0) return -1;
    const char *have = dtrpy_kind_device(*kind);
    if (strcmp(have, device) == 0) return 0;
    if (strcmp(have, "*") == 0 && strcmp(device, "cpu") != 0) { /* (the mesh's device) */
        PyObject *k = PyUnicode_FromFormat("array@%s", device);
        if (k != NULL) {
            Py_SETREF(*kind, k);
            return 0;
        }
    } else if (strcmp(device, "cpu") == 0) {
        dtrpy_arg_error("%s: an array on device '%s', and this call %s", what,
                        strcmp(have, "*") == 0 ? "cuda (__cuda_array_interface__)" : have,
                        host_only ? "reads host arrays only (docs/python.md, \"On GPUs\")"
                                  : "moves host memory (make the Mesh with device=, e.g. "
                                    "Mesh(..., device=\"cuda\"))");
    } else if (strcmp(have, "cpu") == 0) {
        dtrpy_arg_error("%s: a host array (%s), and the mesh is on device '%s' (pass arrays of "
                        "that device, or use a Mesh on device='cpu')", what, Py_TYPE(obj)->tp_name,
                        device);
    } else {
        dtrpy_arg_error("%s: an array on device '%s', and the mesh is on '%s'", what, have,
                        device);
    }
    PyBuffer_Release(view);
    Py_CLEAR(*kind);
    return -1;
}

int dtrpy_buffer_on(PyObject *obj, const char *what, bool writable, const char *device,
                    Py_buffer *view, dtr_dtype_t *dtype, PyObject **kind) {
    return dtrpy_buffer_check(obj, what, writable, device, false, view, dtype, kind);
}

int dtrpy_buffer(PyObject *obj, const char *what, bool writable, Py_buffer *view,
                 dtr_dtype_t *dtype, PyObject **kind) {
    return dtrpy_buffer_check(obj, what, writable, "cpu", true, view, dtype, kind);
}

int dtrpy_alloc(const int64_t *shape, int ndim, dtr_dtype_t dtype, PyObject *kind,
                PyObject **result, Py_buffer *view) {
    if (dtrpy_device_settles(kind)) /* ("array@DEVICE": a DeviceArray) */
        return dtrpy_device_alloc(shape, ndim, dtype, kind, result, view);
    return dtrpy_alloc_host(shape, ndim, dtype, kind, result, view);
}

PyObject *dtrpy_default_kind(const char *device) {
    PyObject *mods = PyImport_GetModuleDict();
    bool torch = strncmp(device, "cuda:", 5) == 0 && mods != NULL &&
                 PyDict_GetItemString(mods, "torch") != NULL;
    return PyUnicode_FromFormat("%s@%s", torch ? "torch" : "array", device);
}

int dtrpy_device_alloc(const int64_t *shape, int ndim, dtr_dtype_t dtype, PyObject *kind,
                       PyObject **result, Py_buffer *view) {
    dtrpy_devarray_t *a = dtrpy_devarray_make(dtrpy_kind_device(kind), shape, ndim, dtype);
    PyObject *v = a != NULL ? dtrpy_devarray_view_of(a) : NULL;
    *result = (PyObject *)a;
    int rc = v != NULL ? PyObject_GetBuffer(v, view, PyBUF_SIMPLE) : -1;
    Py_XDECREF(v);
    if (rc < 0) Py_CLEAR(*result);
    return rc;
}

int dtrpy_device_stream(dtrpy_context_t *c, PyObject *kind) {
    if (c->space == NULL || c->space->set_stream == NULL) return 0;
    const char *k = kind != NULL ? PyUnicode_AsUTF8(kind) : NULL;
    void *stream = NULL; /* (the space's own) */
    if (k != NULL && strncmp(k, "torch@", 6) == 0) {
        PyObject *f = dtrpy_helper("torch_stream");
        PyObject *s = f != NULL ? PyObject_CallOneArg(f, kind) : NULL;
        if (s == NULL) return -1;
        stream = PyLong_AsVoidPtr(s);
        Py_DECREF(s);
        if (PyErr_Occurred()) return -1;
    }
    dtr_status_t st = c->space->set_stream(c->space_state, stream);
    return st == DTR_OK ? 0 : (dtrpy_raise(st), -1);
}

int dtrpy_device_wait(dtrpy_context_t *c, const Py_buffer *in) {
    PyObject *wait = in->obj != NULL ? dtrpy_devview_stream(in->obj) : Py_None;
    if (c->space == NULL || c->space->wait_stream == NULL || wait == Py_None) return 0;
    void *stream = PyLong_AsVoidPtr(wait);
    if (PyErr_Occurred()) return -1;
    dtr_status_t st = c->space->wait_stream(c->space_state, stream);
    return st == DTR_OK ? 0 : (dtrpy_raise(st), -1);
}

bool dtrpy_device_settles(PyObject *kind) {
    const char *k = kind != NULL ? PyUnicode_AsUTF8(kind) : NULL;
    return k != NULL && strncmp(k, "array@", 6) == 0;
}

/* dtype_size(name): bytes per element of one of dtr's dtypes. */
static PyObject *dtrpy_dtype_size(PyObject *self, PyObject *arg) {
    (void)self;
    dtr_dtype_t d;
    if (dtrpy_dtype(arg, "dtype", &d) < 0) return NULL;
    return PyLong_FromLong(dtr_dtype_info(d)->size);
}

static PyMethodDef dtrpy_device_methods[] = {
    {"_dlpack_view", dtrpy_dlpack_view, METH_VARARGS,
     "_dlpack_view(capsule, what, writable): (a _DeviceView, dtype) (internal)."},
    {"dtype_size", dtrpy_dtype_size, METH_O, "dtype_size(dtype): bytes per element."},
    {NULL, NULL, 0, NULL},
};

int dtrpy_device_module_init(PyObject *module) {
    if (PyType_Ready(&dtrpy_devview_type) < 0 || PyType_Ready(&dtrpy_devarray_type) < 0 ||
        PyModule_AddFunctions(module, dtrpy_device_methods) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "_DeviceView", (PyObject *)&dtrpy_devview_type) < 0 ||
        PyModule_AddObjectRef(module, "DeviceArray", (PyObject *)&dtrpy_devarray_type) < 0)
        return -1;
    return 0;
}
