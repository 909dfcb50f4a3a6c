/*
 * The Gloo backend over a Python key-value store: dtr/_store.py's job() finds the store the
 * ranks meet through (torch.distributed's, torchrun's agent store, or dtr's own TCPStore),
 * and this file hands it to dtr_context_create_gloo as a dtr_gloo_store_t whose callbacks
 * call the store's set and get with the GIL taken (the library calls them with it released).
 */
#include "_core.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <dtr/dtr_gloo.h>

static int dtrpy_store_set(void *user, const char *key, const void *value, size_t len) {
    PyGILState_STATE gil = PyGILState_Ensure();
    /* (y# of a NULL pointer would be None: an empty value is b"") */
    PyObject *r = PyObject_CallMethod((PyObject *)user, "set", "sy#", key,
                                      value != NULL ? (const char *)value : "", (Py_ssize_t)len);
    int rc = r != NULL ? 0 : -1;
    Py_XDECREF(r);
    if (rc != 0) dtrpy_keep_error("the store's set");
    PyGILState_Release(gil);
    return rc;
}

static int dtrpy_store_get(void *user, const char *key, void *buf, size_t cap, size_t *len) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *r = PyObject_CallMethod((PyObject *)user, "get", "s", key);
    char *data = NULL;
    Py_ssize_t n = 0;
    int rc = r != NULL && PyBytes_AsStringAndSize(r, &data, &n) == 0 ? 0 : -1;
    if (rc == 0) {
        memcpy(buf, data, (size_t)n < cap ? (size_t)n : cap);
        *len = (size_t)n;
    }
    Py_XDECREF(r);
    if (rc != 0) dtrpy_keep_error("the store's get");
    PyGILState_Release(gil);
    return rc;
}

int dtrpy_job_of(PyObject *job, const char *backend, dtrpy_job_t *out) {
    PyObject *store;
    const char *prefix;
    if (!PyArg_ParseTuple(job, "Oiis:job", &store, &out->rank, &out->size, &prefix)) return -1;
    if (strlen(prefix) >= sizeof out->prefix) {
        PyErr_SetString(PyExc_ValueError, "job: prefix too long");
        return -1;
    }
    snprintf(out->prefix, sizeof out->prefix, "%s", prefix);
    out->store = store;
    out->create = NULL;
    if (strcmp(backend, "nccl") == 0) return dtrpy_nccl_load();
    dtr_backend_info_t info;
    if (dtr_backend_find("gloo", &info) != DTR_OK) { /* loads libdtr_gloo.so (RTLD_GLOBAL) */
        dtrpy_arg_error("backend: %s", dtr_last_error());
        return -1;
    }
    *(void **)&out->create = dlsym(RTLD_DEFAULT, "dtr_context_create_gloo");
    if (out->create == NULL) {
        PyErr_Format(dtrpy_backend_error, "backend 'gloo': its library has no "
                     "dtr_context_create_gloo (%s)", dlerror());
        return -1;
    }
    return 0;
}

dtr_status_t dtrpy_job_create(const dtrpy_job_t *job, dtr_context_t **out) {
    dtr_gloo_store_t cb = {.set = dtrpy_store_set, .get = dtrpy_store_get, .user = job->store};
    dtr_gloo_options_t opts = {.store = &cb, .prefix = job->prefix};
    return job->create(job->rank, job->size, &opts, out);
}

/* ---- backend 'nccl': dtr's own NCCL contexts, their unique id through the store ---------- */

static struct {
    dtr_status_t (*unique_id)(void *, size_t, size_t *);
    dtr_status_t (*create_id)(const void *, size_t, int, int, int, void *, dtr_context_t **);
    dtr_status_t (*split)(dtr_context_t *, const dtr_mesh_t *);
    dtr_status_t (*set_stream)(dtr_context_t *, void *);
    dtr_status_t (*wait_stream)(dtr_context_t *, void *);
} dtrpy_nccl;

int dtrpy_nccl_load(void) {
    if (dtrpy_nccl.wait_stream != NULL) return 0;
    /* torch first, where it is installed: libdtr_nccl.so then takes the libnccl torch loaded
     * (one NCCL in the process, torch's); loaded the other way round, the machine's libnccl,
     * loaded globally, would be the one torch's libraries bind to, and an older one fails
     * their import (undefined symbol) */
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL && !PyErr_ExceptionMatches(PyExc_ImportError)) return -1;
    if (torch == NULL) PyErr_Clear();
    Py_XDECREF(torch);
    /* CUDA's space first: a libdtr_nccl.so built elsewhere (the GPU pack's) then finds its
     * libdtr_cuda.so.MAJOR loaded, whatever its RUNPATH says */
    dtr_memory_info_t space;
    (void)dtr_memory_find("cuda", &space);
    dtr_backend_info_t info;
    if (dtr_backend_find("nccl", &info) != DTR_OK) { /* loads libdtr_nccl.so (RTLD_GLOBAL) */
#ifdef DTR_PY_WHY_NO_NCCL
        dtrpy_arg_error("backend 'nccl': this dtr was built without NCCL (when pip built it: "
                        "%s)", DTR_PY_WHY_NO_NCCL);
#else
        dtrpy_arg_error("backend: %s", dtr_last_error());
#endif
        return -1;
    }
    const char *names[] = {"dtr_nccl_unique_id", "dtr_context_create_nccl_id",
                           "dtr_nccl_split_mesh", "dtr_nccl_set_stream", "dtr_nccl_wait_stream"};
    void *found[5];
    for (int i = 0; i < 5; i++)
        if ((found[i] = dlsym(RTLD_DEFAULT, names[i])) == NULL) {
            PyErr_Format(dtrpy_backend_error, "backend 'nccl': its library has no %s (%s)",
                         names[i], dlerror());
            return -1;
        }
    *(void **)&dtrpy_nccl.unique_id = found[0];
    *(void **)&dtrpy_nccl.create_id = found[1];
    *(void **)&dtrpy_nccl.split = found[2];
    *(void **)&dtrpy_nccl.set_stream = found[3];
    *(void **)&dtrpy_nccl.wait_stream = found[4];
    return 0;
}

int dtrpy_nccl_id(const dtrpy_job_t *job, unsigned char *id, size_t cap, size_t *len) {
    char key[sizeof job->prefix + 16];
    snprintf(key, sizeof key, "%s/nccl_id", job->prefix);
    PyObject *value = NULL;
    if (job->rank == 0) {
        dtr_status_t st = dtrpy_nccl.unique_id(id, cap, len);
        if (st != DTR_OK) return dtrpy_raise(st), -1;
        value = PyObject_CallMethod(job->store, "set", "sy#", key, (const char *)id,
                                    (Py_ssize_t)*len);
        Py_XDECREF(value);
        return value != NULL ? 0 : -1;
    }
    value = PyObject_CallMethod(job->store, "get", "s", key);
    char *data = NULL;
    Py_ssize_t n = 0;
    if (value == NULL || PyBytes_AsStringAndSize(value, &data, &n) < 0) {
        Py_XDECREF(value);
        return -1;
    }
    memcpy(id, data, (size_t)n < cap ? (size_t)n : cap);
    *len = (size_t)n; /* (a size NCCL's is not: create_id says so) */
    Py_DECREF(value);
    return *len <= cap ? 0 : (dtrpy_arg_error("backend 'nccl': the store's '%s' holds %zu "
                                              "bytes, not an ncclUniqueId",
                                              key, *len), -1);
}

dtr_status_t dtrpy_nccl_create(const dtrpy_job_t *job, int device, const void *id, size_t len,
                               dtr_context_t **out) {
    return dtrpy_nccl.create_id(id, len, job->rank, job->size, device, NULL, out);
}

static dtr_status_t dtrpy_nccl_set_stream(void *ctx, void *stream) {
    return dtrpy_nccl.set_stream(ctx, stream);
}

static dtr_status_t dtrpy_nccl_wait_stream(void *ctx, void *stream) {
    return dtrpy_nccl.wait_stream(ctx, stream);
}

void dtrpy_nccl_attach(dtrpy_context_t *c, const dtr_memory_info_t *cuda) {
    static dtr_memory_info_t info;
    info = *cuda;
    info.set_stream = dtrpy_nccl_set_stream;
    info.wait_stream = dtrpy_nccl_wait_stream;
    c->space = &info;
    c->space_state = c->ctx;
    c->nccl = true;
}

dtr_status_t dtrpy_nccl_split(dtrpy_context_t *c, const dtr_mesh_t *mesh) {
    return dtrpy_nccl.split(c->ctx, mesh);
}
