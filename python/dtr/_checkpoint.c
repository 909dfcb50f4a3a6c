/*
 * dtr.load: a checkpoint's blocks for this rank, by name (checkpoint/dtr_checkpoint.h).
 * Not collective: every rank reads only its own blocks' bytes from the files.
 */
#include "_core.h"

#include <dtr/dtr_checkpoint.h>

/* The tensor indices to load: every tensor, or those of `names` in their order. */
static int64_t *dtrpy_load_indices(dtr_checkpoint_t *ck, PyObject *names, int64_t *n) {
    if (names == Py_None) {
        *n = dtr_checkpoint_count(ck);
        int64_t *all = PyMem_Malloc(sizeof(int64_t) * (size_t)(*n + 1));
        if (all == NULL) return (int64_t *)PyErr_NoMemory();
        for (int64_t i = 0; i < *n; i++) all[i] = i;
        return all;
    }
    PyObject *seq = PySequence_Tuple(names); /* (a snapshot: the caller's list may change) */
    if (seq == NULL) {
        PyErr_Clear();
        return dtrpy_arg_error("names: expected a list of tensor names, got %s",
                               Py_TYPE(names)->tp_name), NULL;
    }
    *n = PySequence_Fast_GET_SIZE(seq);
    int64_t *idx = PyMem_Malloc(sizeof(int64_t) * (size_t)(*n + 1));
    for (int64_t i = 0; idx != NULL && i < *n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        char what[40];
        snprintf(what, sizeof what, "names[%lld]", (long long)i);
        const char *name = dtrpy_text(s, what);
        dtr_status_t st = name != NULL ? dtr_checkpoint_find(ck, name, &idx[i]) : DTR_OK;
        if (name == NULL || st != DTR_OK) {
            if (name != NULL) dtrpy_raise(st);
            PyMem_Free(idx);
            idx = NULL;
        }
    }
    Py_DECREF(seq);
    return idx == NULL && !PyErr_Occurred() ? (int64_t *)PyErr_NoMemory() : idx;
}

/* Tensor `index` under the rules: rank's block as a new array of `kind`, passed through
 * `each` where it is callable; kind NULL for numpy, "torch" for torch tensors. */
static PyObject *dtrpy_load_one(dtr_checkpoint_t *ck, int64_t index,
                                const dtr_checkpoint_rules_t *rules, dtrpy_mesh_t *mesh,
                                int rank, PyObject *kind, PyObject *each, PyObject **name) {
    dtr_checkpoint_tensor_t t;
    dtr_spec_t spec;
    dtr_layout_t lay;
    dtr_status_t st = dtr_checkpoint_tensor(ck, index, &t);
    if (st == DTR_OK) st = dtr_checkpoint_rules_spec(rules, ck, index, mesh->mesh, &spec, NULL);
    if (st == DTR_OK) st = dtr_spec_layout(&spec, rank, &lay);
    if (st != DTR_OK) return dtrpy_raise(st);
    *name = PyUnicode_FromString(t.name);
    PyObject *result;
    Py_buffer buf;
    if (*name == NULL ||
        dtrpy_alloc(lay.local_shape, lay.ndim, spec.dtype, kind, &result, &buf) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = dtr_checkpoint_read_block(ck, index, &spec, rank, buf.buf, (size_t)buf.len, NULL);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (st != DTR_OK) {
        Py_DECREF(result);
        return dtrpy_raise(st);
    }
    if (each == Py_None) return result;
    PyObject *moved = PyObject_CallFunctionObjArgs(each, *name, result, NULL);
    Py_DECREF(result);
    return moved;
}

PyObject *dtrpy_load(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"path", "mesh", "rules", "rules_path", "names", "rank", "kind",
                          "each", NULL};
    const char *path, *rules_text = NULL, *rules_path = NULL;
    PyObject *mesh_obj, *names = Py_None, *rank_obj = Py_None, *kind = NULL, *each = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOzz|OOOO:load", kws, &path, &mesh_obj,
                                     &rules_text, &rules_path, &names, &rank_obj, &kind, &each))
        return dtrpy_as_argument_error();
    if (kind == Py_None) kind = NULL; /* numpy */
    dtrpy_mesh_t *mesh;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0) return NULL;
    int rank;
    PyObject *r = rank_obj != Py_None ? (Py_INCREF(rank_obj), rank_obj)
                                      : PyObject_GetAttrString(mesh_obj, "rank");
    if (r == NULL) return NULL;
    int64_t rank64 = 0;
    int bad_rank = dtrpy_int(r, "rank", 0, INT32_MAX, &rank64);
    Py_DECREF(r);
    if (bad_rank < 0) return NULL;
    rank = (int)rank64;
    int64_t coord[DTR_MAX_MESH_DIMS];
    bool in_mesh = dtr_mesh_coord(mesh->mesh, rank, coord) == DTR_OK;
    if (!in_mesh && rank_obj != Py_None)
        return dtrpy_arg_error("rank: %d is not a rank of the mesh", rank);
    dtr_checkpoint_t *ck = NULL;
    dtr_checkpoint_rules_t *rules = NULL;
    dtr_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = dtr_checkpoint_open(path, &ck);
    Py_END_ALLOW_THREADS
    int nd = dtr_mesh_ndims(mesh->mesh);
    if (st == DTR_OK)
        st = rules_path != NULL ? dtr_checkpoint_rules_load(rules_path, nd, &rules)
                                : dtr_checkpoint_rules_parse(rules_text, nd, &rules);
    if (st != DTR_OK) {
        dtr_checkpoint_close(ck);
        return dtrpy_raise(st);
    }
    int64_t n = 0, *idx = dtrpy_load_indices(ck, names, &n);
    PyObject *out = idx == NULL ? NULL : PyDict_New();
    for (int64_t i = 0; in_mesh && out != NULL && i < n; i++) {
        PyObject *name = NULL, *v = dtrpy_load_one(ck, idx[i], rules, mesh, rank, kind, each,
                                                   &name);
        if (v == NULL || PyDict_SetItem(out, name, v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
        Py_XDECREF(name);
    }
    PyMem_Free(idx);
    dtr_checkpoint_rules_destroy(rules);
    dtr_checkpoint_close(ck);
    return out;
}

PyObject *dtrpy_consolidate(PyObject *self, PyObject *args) {
    (void)self;
    const char *from, *to;
    long long max_bytes;
    if (!PyArg_ParseTuple(args, "ssL:consolidate", &from, &to, &max_bytes))
        return dtrpy_as_argument_error();
    dtr_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = dtr_checkpoint_consolidate(from, to, (int64_t)max_bytes);
    Py_END_ALLOW_THREADS
    if (st != DTR_OK) return dtrpy_raise(st);
    Py_RETURN_NONE;
}

PyObject *dtrpy_load_metadata(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s:load_metadata", &path)) return dtrpy_as_argument_error();
    dtr_checkpoint_t *ck = NULL;
    dtr_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = dtr_checkpoint_open(path, &ck);
    Py_END_ALLOW_THREADS
    if (st != DTR_OK) return dtrpy_raise(st);
    PyObject *out = PyDict_New();
    for (int64_t i = 0; out != NULL && i < dtr_checkpoint_metadata_count(ck); i++) {
        const char *k, *v;
        PyObject *val = NULL;
        if (dtr_checkpoint_metadata_at(ck, i, &k, &v) != DTR_OK ||
            (val = PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace")) == NULL ||
            PyDict_SetItemString(out, k, val) < 0)
            Py_CLEAR(out);
        Py_XDECREF(val);
    }
    dtr_checkpoint_close(ck);
    return out;
}
