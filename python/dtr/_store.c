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

int dtrpy_job_of(PyObject *job, dtrpy_job_t *out) {
    PyObject *store;
    const char *prefix;
    if (!PyArg_ParseTuple(job, "Oiis:job", &store, &out->rank, &out->size, &prefix)) return -1;
    if (strlen(prefix) >= sizeof out->prefix) {
        PyErr_SetString(PyExc_ValueError, "job: prefix too long");
        return -1;
    }
    snprintf(out->prefix, sizeof out->prefix, "%s", prefix);
    out->store = store;
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
