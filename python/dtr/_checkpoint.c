/*
 * dtr.load: a checkpoint's blocks for this rank, by name (checkpoint/dtr_checkpoint.h).
 * Not collective: every rank reads only its own blocks' bytes from the files. dtr.save:
 * every rank's blocks into one checkpoint, the library's collective save.
 */
#include "_core.h"

#include <dtr/dtr_checkpoint.h>

#ifdef DTR_PY_NO_CHECKPOINT
/* Built without the checkpoint module (python/build_lib.py found no Jansson and xxHash):
 * each entry point refuses, naming what to install. */
#ifndef DTR_PY_WHY_NO_CHECKPOINT
#define DTR_PY_WHY_NO_CHECKPOINT "no Jansson and xxHash" /* (setup.py defines the reason) */
#endif
static PyObject *dtrpy_no_checkpoint(const char *call) {
    PyErr_Format(dtrpy_refused_error,
                 "dtr.%s: this dtr was built without its checkpoint module (when pip built it: "
                 "%s)", call, DTR_PY_WHY_NO_CHECKPOINT);
    return NULL;
}

PyObject *dtrpy_load(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self, (void)args, (void)kw;
    return dtrpy_no_checkpoint("load");
}

PyObject *dtrpy_consolidate(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return dtrpy_no_checkpoint("consolidate");
}

PyObject *dtrpy_load_metadata(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return dtrpy_no_checkpoint("load_metadata");
}

PyObject *dtrpy_save(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return dtrpy_no_checkpoint("save");
}
#else
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

/* ---- dtr.save --------------------------------------------------------------------------- */

/* What one save holds while it runs: each block's buffer, spec and item. */
typedef struct {
    Py_ssize_t n;
    PyObject *pairs; /* a snapshot of blocks.items() */
    Py_buffer *views;
    bool *held;
    dtr_spec_t *specs;
    dtr_checkpoint_item_t *items;
    const char **meta; /* key, value, ..., NULL; NULL: none */
    PyObject *meta_pairs;
} dtrpy_save_t;

static void dtrpy_save_free(dtrpy_save_t *s) {
    for (Py_ssize_t i = 0; s->held != NULL && i < s->n; i++)
        if (s->held[i]) PyBuffer_Release(&s->views[i]);
    PyMem_Free(s->views);
    PyMem_Free(s->held);
    PyMem_Free(s->specs);
    PyMem_Free(s->items);
    PyMem_Free(s->meta);
    Py_XDECREF(s->pairs);
    Py_XDECREF(s->meta_pairs);
}

/* The entry of `name` in a per-tensor argument: obj itself where it is not a dict, else its
 * value (NULL, no error, where it has none). */
static PyObject *dtrpy_save_entry(PyObject *obj, PyObject *name) {
    return PyDict_Check(obj) ? PyDict_GetItemWithError(obj, name) : obj;
}

/* Block i: its name, buffer, global shape and spec, checked against this rank's layout. */
static int dtrpy_save_item(dtrpy_save_t *s, Py_ssize_t i, const dtrpy_mesh_t *m, int rank,
                           PyObject *placements, PyObject *shapes) {
    PyObject *pair = PyList_GET_ITEM(s->pairs, i), *name = PyTuple_GET_ITEM(pair, 0);
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (text == NULL || text[0] == '\0')
        return dtrpy_arg_error("blocks: key %R is not a tensor name (a non-empty str)", name), -1;
    char what[200];
    snprintf(what, sizeof what, "blocks['%.150s']", text);
    dtr_dtype_t dtype;
    PyObject *kind = NULL;
    if (dtrpy_buffer(PyTuple_GET_ITEM(pair, 1), what, false, &s->views[i], &dtype, &kind) < 0)
        return -1;
    Py_XDECREF(kind);
    s->held[i] = true;
    if (s->views[i].ndim > DTR_MAX_TENSOR_DIMS)
        return dtrpy_arg_error("%s: %d dims, at most %d", what, s->views[i].ndim,
                               DTR_MAX_TENSOR_DIMS), -1;
    int64_t local[DTR_MAX_TENSOR_DIMS], shape[DTR_MAX_TENSOR_DIMS];
    int lndim = s->views[i].ndim, ndim = 0;
    for (int d = 0; d < lndim; d++) local[d] = s->views[i].shape[d];
    PyObject *pl = dtrpy_save_entry(placements, name), *sh = dtrpy_save_entry(shapes, name);
    if (PyErr_Occurred()) return -1;
    snprintf(what, sizeof what, "placements['%.150s']", text);
    if (pl == NULL) return dtrpy_arg_error("placements: no entry for '%s'", text), -1;
    bool given = sh != NULL && sh != Py_None;
    if (given ? dtrpy_shape(sh, "shapes", shape, &ndim) < 0
              : dtrpy_infer_shape(m->mesh, pl, what, local, lndim, shape, &ndim) < 0)
        return -1;
    if (dtrpy_spec(&s->specs[i], m, pl, what, shape, ndim, dtype) < 0) return -1;
    snprintf(what, sizeof what, "blocks['%.150s']", text);
    if (dtrpy_check_local(what, local, lndim, &s->specs[i], rank, given) < 0) return -1;
    s->items[i] = (dtr_checkpoint_item_t){text, &s->specs[i], s->views[i].buf};
    return 0;
}

/* metadata (None, or a dict of str to str) as key, value, ..., NULL. */
static int dtrpy_save_meta(dtrpy_save_t *s, PyObject *metadata) {
    if (metadata == Py_None) return 0;
    if (!PyDict_Check(metadata))
        return dtrpy_arg_error("metadata: expected a dict of str to str, got %s",
                               Py_TYPE(metadata)->tp_name), -1;
    s->meta_pairs = PyDict_Items(metadata);
    Py_ssize_t n = s->meta_pairs != NULL ? PyList_GET_SIZE(s->meta_pairs) : 0;
    s->meta = s->meta_pairs != NULL ? PyMem_Calloc((size_t)(2 * n + 1), sizeof *s->meta) : NULL;
    if (s->meta == NULL) return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *pair = PyList_GET_ITEM(s->meta_pairs, k);
        for (int j = 0; j < 2; j++) {
            PyObject *o = PyTuple_GET_ITEM(pair, j);
            s->meta[2 * k + j] = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
            if (s->meta[2 * k + j] == NULL)
                return dtrpy_arg_error("metadata: %R: keys and values must be str",
                                       PyTuple_GET_ITEM(pair, 0)), -1;
        }
    }
    return 0;
}

/* Every argument of this rank, checked; -1 with an exception set. */
static int dtrpy_save_args(dtrpy_save_t *s, PyObject *blocks, const dtrpy_mesh_t *m, int rank,
                           PyObject *placements, PyObject *shapes, PyObject *metadata) {
    if (!PyDict_Check(blocks))
        return dtrpy_arg_error("blocks: expected a dict of name to this rank's block, got %s",
                               Py_TYPE(blocks)->tp_name), -1;
    if (shapes != Py_None && !PyDict_Check(shapes))
        return dtrpy_arg_error("shapes: expected None or a dict of name to global shape, got "
                               "%s", Py_TYPE(shapes)->tp_name), -1;
    s->pairs = PyDict_Items(blocks);
    if (s->pairs == NULL) return -1;
    s->n = PyList_GET_SIZE(s->pairs);
    if (s->n == 0) return dtrpy_arg_error("blocks: empty (nothing to save)"), -1;
    s->views = PyMem_Calloc((size_t)s->n, sizeof *s->views);
    s->held = PyMem_Calloc((size_t)s->n, sizeof *s->held);
    s->specs = PyMem_Calloc((size_t)s->n, sizeof *s->specs);
    s->items = PyMem_Calloc((size_t)s->n, sizeof *s->items);
    if (s->views == NULL || s->held == NULL || s->specs == NULL || s->items == NULL)
        return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < s->n; i++)
        if (dtrpy_save_item(s, i, m, rank, placements, shapes) < 0) return -1;
    return dtrpy_save_meta(s, metadata);
}

PyObject *dtrpy_save(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj, *blocks, *mesh_obj, *placements, *shapes, *metadata, *path = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOO:save", &path_obj, &blocks, &mesh_obj, &placements,
                          &shapes, &metadata))
        return dtrpy_refuse_parse(args, NULL, 2, true);
    dtrpy_mesh_t *m;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &m) < 0) return NULL;
    dtrpy_context_t *c = dtrpy_mesh_context(m);
    if (c == NULL) return NULL;
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(m->mesh, c->rank, coord) != DTR_OK) Py_RETURN_NONE; /* not on it */
    dtrpy_save_t s = {0};
    dtr_status_t st = DTR_OK;
    if (!PyUnicode_FSConverter(path_obj, &path)) {
        PyErr_Clear();
        dtrpy_arg_error("path: expected a str or os.PathLike, got %s", Py_TYPE(path_obj)->tp_name);
    } else {
        dtrpy_save_args(&s, blocks, m, c->rank, placements, shapes, metadata);
    }
    if (PyErr_Occurred()) {
        /* this rank's arguments are wrong: it joins the save's agreement without a directory,
         * so every rank fails at once and writes nothing; the exception stays this rank's */
        DTRPY_CALL(c, (void)dtr_checkpoint_save(c->ctx, m->mesh, NULL, 0, NULL, NULL, NULL,
                                                NULL));
    } else {
        const char *dir = PyBytes_AS_STRING(path);
        DTRPY_CALL(c, st = dtr_checkpoint_save(c->ctx, m->mesh, dir, s.n, s.items, NULL, NULL,
                                               s.meta));
        if (st != DTR_OK) dtrpy_raise(st);
    }
    dtrpy_save_free(&s);
    Py_XDECREF(path);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}
#endif /* DTR_PY_NO_CHECKPOINT */
