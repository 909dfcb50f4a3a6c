/*
 * The "torch" backend: torch.distributed as dtr's engine. The operations of the table below
 * (runtime/backend.h) call dtr/_engine.py's Engine with the GIL taken (the
 * executor runs with it released): each a torch collective started with async_op=True on
 * the process groups torch holds, over the executor's host buffers as DLPack capsules (no copy);
 * a request's room holds the started operation (a Python object) until test or wait
 * completes it. A Python error is a DTR_ERR_BACKEND whose text dtrpy_raise adds.
 */
#include "_core.h"
#include "_dlpack.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject *engine; /* dtr._engine.Engine */
    int rank;
    dtrpy_dl_device_t device; /* DLPack's device of the buffers: {kDLCPU, 0}, {kDLCUDA, N} */
} dtrpy_engine_t;

typedef struct {
    PyObject *engine, *group; /* the engine, and its _Group for these members */
    int n;
    dtrpy_dl_device_t device; /* the engine's */
} dtrpy_engine_group_t;

/* The Python error, kept for dtrpy_raise, as the operation's failure. */
static dtr_status_t dtrpy_engine_failed(const char *call) {
    char what[64];
    snprintf(what, sizeof what, "the torch engine's %s", call);
    dtrpy_keep_error(what);
    return DTR_ERR_BACKEND;
}

/*
 * A buffer goes to torch as a DLPack capsule (_dlpack.h), so
 * that it reaches torch as a tensor whose deleter is plain C. A tensor over a Python
 * buffer (torch.frombuffer) would take the GIL as it dies, and torch's gloo worker drops its
 * last reference while holding the operation's lock, which is_completed() waits for under
 * the GIL: a deadlock.
 */
typedef struct dtrpy_dl_managed {
    dtrpy_dl_tensor_t dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dtrpy_dl_managed *self);
    int64_t shape[1]; /* (dtr's: after the ABI's fields) */
} dtrpy_dl_managed_t;

static void dtrpy_dl_free(dtrpy_dl_managed_t *self) { free(self); }

static void dtrpy_dl_capsule_free(PyObject *capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) { /* never taken by a framework */
        dtrpy_dl_managed_t *m = PyCapsule_GetPointer(capsule, "dltensor");
        m->deleter(m);
    }
}

/* bytes at p, on group g's device, as a DLPack capsule of uint8 (the engine reads a send
 * buffer, never writes it). */
static PyObject *dtrpy_view(const void *g, const void *p, int64_t bytes) {
    static char none[1];
    dtrpy_dl_managed_t *m = calloc(1, sizeof *m);
    if (m == NULL) return PyErr_NoMemory();
    m->shape[0] = bytes;
    m->dl_tensor = (dtrpy_dl_tensor_t){.data = bytes > 0 ? (void *)p : none,
                                       .device = ((const dtrpy_engine_group_t *)g)->device,
                                       .ndim = 1,
                                       .dtype = {1, 8, 1},
                                       .shape = m->shape};
    m->deleter = dtrpy_dl_free;
    PyObject *c = PyCapsule_New(m, "dltensor", dtrpy_dl_capsule_free);
    if (c == NULL) free(m);
    return c;
}

/* Calls engine.<name>(group, args...) (a format after the group) and keeps the started
 * operation in req. The caller holds the GIL (DTRPY_START below takes it). */
static dtr_status_t dtrpy_engine_start(void *group, dtr_backend_req_t *req, const char *name,
                                       const char *fmt, ...) {
    dtrpy_engine_group_t *g = group;
    va_list ap;
    va_start(ap, fmt);
    PyObject *rest = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    PyObject *args = NULL, *pending = NULL;
    if (rest != NULL) {
        PyObject *head = PyTuple_Pack(1, g->group);
        args = head != NULL ? PySequence_Concat(head, rest) : NULL;
        Py_XDECREF(head);
    }
    PyObject *fn = args != NULL ? PyObject_GetAttrString(g->engine, name) : NULL;
    pending = fn != NULL ? PyObject_Call(fn, args, NULL) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(rest);
    dtr_status_t st = pending != NULL ? DTR_OK : dtrpy_engine_failed(name);
    memcpy(req->bytes, &pending, sizeof pending);
    return st;
}

/* dtrpy_engine_start with the GIL taken before its arguments are made. */
#define DTRPY_START(st, ...)                                                               \
    do {                                                                                    \
        PyGILState_STATE gil_ = PyGILState_Ensure();                                        \
        st = dtrpy_engine_start(__VA_ARGS__);                                               \
        PyGILState_Release(gil_);                                                           \
    } while (0)

/* Waits for req's operation (the engine's test waits too: _engine.py's _Pending says why). */
static dtr_status_t dtrpy_engine_finish(dtr_backend_req_t *req) {
    PyObject *pending;
    memcpy(&pending, req->bytes, sizeof pending);
    if (pending == NULL) return DTR_OK;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *r = PyObject_CallMethod(pending, "wait", NULL);
    dtr_status_t st = r != NULL ? DTR_OK : dtrpy_engine_failed("wait");
    Py_XDECREF(r);
    Py_DECREF(pending);
    memset(req->bytes, 0, sizeof pending);
    PyGILState_Release(gil);
    return st;
}

static int dtrpy_engine_rank(void *state) { return ((dtrpy_engine_t *)state)->rank; }

static dtr_status_t dtrpy_engine_group_create(void *state, const int *ranks, int n, int tag,
                                              void **out) {
    (void)tag;
    dtrpy_engine_t *e = state;
    dtrpy_engine_group_t *g = calloc(1, sizeof *g);
    if (g == NULL) return DTR_ERR_OUT_OF_MEMORY;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *members = PyTuple_New(n);
    for (int i = 0; members != NULL && i < n; i++)
        PyTuple_SET_ITEM(members, i, PyLong_FromLong(ranks[i]));
    g->group = members != NULL ? PyObject_CallMethod(e->engine, "group", "(O)", members) : NULL;
    Py_XDECREF(members);
    dtr_status_t st = g->group != NULL ? DTR_OK : dtrpy_engine_failed("group");
    g->engine = Py_NewRef(e->engine);
    g->n = n;
    g->device = e->device;
    if (st != DTR_OK) {
        Py_DECREF(g->engine);
        free(g);
    } else {
        *out = g;
    }
    PyGILState_Release(gil);
    return st;
}

static void dtrpy_engine_group_destroy(void *state, void *group) {
    (void)state;
    dtrpy_engine_group_t *g = group;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(g->group);
    Py_XDECREF(g->engine);
    PyGILState_Release(gil);
    free(g);
}

static dtr_status_t dtrpy_engine_all_gather(void *group, const void *send, int64_t bytes,
                                            void *recv, dtr_backend_req_t *req) {
    int n = ((dtrpy_engine_group_t *)group)->n;
    dtr_status_t st;
    DTRPY_START(st, group, req, "all_gather", "(NN)", dtrpy_view(group, send, bytes),
                dtrpy_view(group, recv, bytes * n));
    return st;
}

static dtr_status_t dtrpy_engine_reduce_scatter(void *group, const void *send, void *recv,
                                                int64_t count, dtr_dtype_t dtype,
                                                dtr_reduce_op_t op, dtr_backend_req_t *req) {
    int n = ((dtrpy_engine_group_t *)group)->n;
    int64_t size = dtr_dtype_info(dtype)->size;
    dtr_status_t st;
    DTRPY_START(st, group, req, "reduce_scatter", "(NNss)", dtrpy_view(group, send, count * size * n),
                dtrpy_view(group, recv, count * size), dtr_dtype_name(dtype), dtr_reduce_op_name(op));
    return st;
}

static dtr_status_t dtrpy_engine_all_reduce(void *group, const void *send, void *recv,
                                            int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                            dtr_backend_req_t *req) {
    int64_t bytes = count * dtr_dtype_info(dtype)->size;
    dtr_status_t st;
    DTRPY_START(st, group, req, "all_reduce", "(NNssO)", dtrpy_view(group, send, bytes),
                dtrpy_view(group, recv, bytes), dtr_dtype_name(dtype), dtr_reduce_op_name(op),
                send == recv ? Py_True : Py_False);
    return st;
}

/* The end of the furthest piece. */
static int64_t dtrpy_extent(const int64_t *counts, const int64_t *displs, int n) {
    int64_t end = 0;
    for (int i = 0; i < n; i++)
        if (counts[i] > 0 && displs[i] + counts[i] > end) end = displs[i] + counts[i];
    return end;
}

static dtr_status_t dtrpy_engine_all_to_allv(void *group, const void *send,
                                             const int64_t *send_counts,
                                             const int64_t *send_displs, void *recv,
                                             const int64_t *recv_counts,
                                             const int64_t *recv_displs, dtr_backend_req_t *req) {
    int n = ((dtrpy_engine_group_t *)group)->n;
    dtr_status_t st;
    DTRPY_START(st, group, req, "all_to_allv", "(NNNNNN)",
                dtrpy_view(group, send, dtrpy_extent(send_counts, send_displs, n)),
                dtrpy_tuple(send_counts, n), dtrpy_tuple(send_displs, n),
                dtrpy_view(group, recv, dtrpy_extent(recv_counts, recv_displs, n)),
                dtrpy_tuple(recv_counts, n), dtrpy_tuple(recv_displs, n));
    return st;
}

static dtr_status_t dtrpy_engine_test(void *group, dtr_backend_req_t *req, bool *done) {
    (void)group;
    *done = true;
    return dtrpy_engine_finish(req);
}

static dtr_status_t dtrpy_engine_wait(void *group, dtr_backend_req_t *req) {
    (void)group;
    return dtrpy_engine_finish(req);
}

static void dtrpy_engine_destroy(void *state) {
    dtrpy_engine_t *e = state;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(e->engine);
    PyGILState_Release(gil);
    free(e);
}

static const dtr_backend_ops_t dtrpy_engine_ops = {
    .name = "torch",
    .rank = dtrpy_engine_rank,
    .group_create = dtrpy_engine_group_create,
    .group_destroy = dtrpy_engine_group_destroy,
    .all_gather = dtrpy_engine_all_gather,
    .reduce_scatter = dtrpy_engine_reduce_scatter,
    .all_reduce = dtrpy_engine_all_reduce,
    .all_to_allv = dtrpy_engine_all_to_allv,
    .test = dtrpy_engine_test,
    .wait = dtrpy_engine_wait,
    .destroy = dtrpy_engine_destroy,
};

int dtrpy_engine_of(PyObject *engine, const char *device, void **state, int *size) {
    PyObject *rank = PyObject_GetAttrString(engine, "rank");
    PyObject *n = rank != NULL ? PyObject_GetAttrString(engine, "size") : NULL;
    PyObject *backend = n != NULL ? PyObject_GetAttrString(engine, "backend") : NULL;
    const char *b = backend != NULL ? PyUnicode_AsUTF8(backend) : NULL;
    dtrpy_engine_t *e = NULL;
    bool cuda = strncmp(device, "cuda:", 5) == 0, nccl = b != NULL && strcmp(b, "nccl") == 0;
    if (b != NULL && nccl && !cuda) {
        dtrpy_arg_error("backend 'torch': torch.distributed runs on nccl, which moves CUDA "
                        "tensors, and the mesh is on device '%s' (make it with "
                        "device='cuda', or run torch on gloo)", device);
    } else if (b != NULL && (e = calloc(1, sizeof *e)) == NULL) {
        PyErr_NoMemory();
    } else if (e != NULL) {
        e->rank = (int)PyLong_AsLong(rank);
        *size = (int)PyLong_AsLong(n);
        e->engine = Py_NewRef(engine);
        /* NCCL's collectives take the GPU's buffers as they are; over gloo a device space
         * stages through host memory, so the buffers the engine sees are the host's */
        e->device = nccl ? (dtrpy_dl_device_t){2, atoi(device + 5)} /* kDLCUDA */
                         : (dtrpy_dl_device_t){1, 0};                /* kDLCPU */
    }
    Py_XDECREF(rank);
    Py_XDECREF(n);
    Py_XDECREF(backend);
    *state = e;
    return e != NULL ? 0 : -1;
}

dtr_status_t dtrpy_engine_create(void *state, dtr_context_t **out) {
    static dtr_backend_ops_t cuda_ops; /* the same, buffers on the device (CAP_DEVICE) */
    const dtrpy_engine_t *e = state;
    if (e != NULL && e->device.device_type == 2) {
        cuda_ops = dtrpy_engine_ops;
        cuda_ops.caps |= DTR_BACKEND_CAP_DEVICE;
        return dtr_context_create(&cuda_ops, state, out);
    }
    return dtr_context_create(&dtrpy_engine_ops, state, out);
}
