/*
 * Arguments into dtr's values: shapes, dtypes, placements and specs. Placements are parsed
 * once per distinct hashable value ("S(0),R", a tuple of dtr.Shard/Replicate/Partial or of
 * torch's placements) and kept, so a training loop's repeated calls only look them up.
 */
#include "_core.h"

#include <string.h>

static PyObject *dtrpy_helpers;         /* name -> callable, from dtr/_arrays.py */
static PyObject *dtrpy_placement_cache; /* value -> bytes of dtr_placement_t[n] */
#define DTRPY_PLACEMENT_CACHE_MAX 4096

PyObject *dtrpy_helper(const char *name) {
    PyObject *f = dtrpy_helpers == NULL ? NULL : PyDict_GetItemString(dtrpy_helpers, name);
    if (f == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "dtr._core: helper %s not registered", name);
    return f;
}

static PyObject *dtrpy_set_helpers(PyObject *self, PyObject *helpers) {
    (void)self;
    if (!PyDict_Check(helpers)) return dtrpy_arg_error("helpers: expected a dict");
    Py_XSETREF(dtrpy_helpers, Py_NewRef(helpers));
    Py_RETURN_NONE;
}

PyObject *dtrpy_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

void dtrpy_format_shape(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld",
                                 (long long)shape[i]);
    if (used < len) snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
}

int dtrpy_flag_ok(PyObject *obj, const char *what) {
    if (obj == NULL || obj == Py_None || PyBool_Check(obj)) return 0;
    dtrpy_arg_error("%s: expected True or False, got %s", what, Py_TYPE(obj)->tp_name);
    return -1;
}

int dtrpy_int(PyObject *obj, const char *what, int64_t lo, int64_t hi, int64_t *out) {
    if (PyBool_Check(obj) || PyFloat_Check(obj) || PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        dtrpy_arg_error("%s: expected an int, got %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *ix = PyNumber_Index(obj);
    if (ix == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("%s: expected an int, got %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (overflow != 0 || v < lo || v > hi) {
        PyErr_Clear();
        dtrpy_arg_error("%s: %R is out of range (%lld..%lld)", what, ix, (long long)lo,
                        (long long)hi);
        Py_DECREF(ix);
        return -1;
    }
    Py_DECREF(ix);
    *out = v;
    return 0;
}

const char *dtrpy_text(PyObject *obj, const char *what) {
    if (!PyUnicode_Check(obj)) {
        dtrpy_arg_error("%s: expected a str, got %s", what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    Py_ssize_t len = 0;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (s == NULL) { /* a lone surrogate has no UTF-8 */
        PyErr_Clear();
        dtrpy_arg_error("%s: %R is not valid text (no UTF-8 form)", what, obj);
        return NULL;
    }
    if ((Py_ssize_t)strlen(s) != len) {
        dtrpy_arg_error("%s: %R holds a NUL character (at offset %zd)", what, obj,
                        (Py_ssize_t)strlen(s));
        return NULL;
    }
    return s;
}

int dtrpy_shape(PyObject *obj, const char *what, int64_t *shape, int *ndim) {
    if (PyUnicode_Check(obj)) {
        const char *text = dtrpy_text(obj, what);
        if (text == NULL) return -1;
        int n = 0;
        dtr_status_t st = dtr_shape_parse(text, shape, DTR_MAX_TENSOR_DIMS, &n);
        if (st != DTR_OK) {
            dtrpy_arg_error("%s: %s", what, dtr_last_error());
            return -1;
        }
        *ndim = n;
        return 0;
    }
    if (!PySequence_Check(obj)) {
        if (dtrpy_int(obj, what, 0, DTR_MAX_DIM_SIZE, &shape[0]) < 0) return -1;
        *ndim = 1;
    } else {
        PyObject *seq = PySequence_Tuple(obj);
        if (seq == NULL) {
            PyErr_Clear();
            dtrpy_arg_error("%s: expected a sequence of ints, got %s", what,
                            Py_TYPE(obj)->tp_name);
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > DTR_MAX_TENSOR_DIMS) {
            Py_DECREF(seq);
            dtrpy_arg_error("%s: %zd dims, at most %d", what, n, DTR_MAX_TENSOR_DIMS);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            char item[64];
            snprintf(item, sizeof item, "%s[%zd]", what, i);
            if (dtrpy_int(PySequence_Fast_GET_ITEM(seq, i), item, 0, DTR_MAX_DIM_SIZE,
                          &shape[i]) < 0) {
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
        *ndim = (int)n;
    }
    return 0;
}

int dtrpy_dtype(PyObject *obj, const char *what, dtr_dtype_t *out) {
    PyObject *text = NULL;
    if (PyUnicode_Check(obj)) {
        text = Py_NewRef(obj);
    } else {
        PyObject *f = dtrpy_helper("dtype_text");
        if (f == NULL) return -1;
        text = PyObject_CallOneArg(f, obj);
        if (text == NULL) return -1;
        if (text == Py_None) {
            Py_DECREF(text);
            dtrpy_arg_error("%s: %R is not a dtype dtr moves", what, obj);
            return -1;
        }
    }
    const char *s = dtrpy_text(text, what);
    dtr_status_t st = s == NULL ? DTR_ERR_PARSE : dtr_dtype_parse(s, out);
    Py_DECREF(text);
    if (s == NULL) return -1;
    if (st != DTR_OK) {
        dtrpy_arg_error("%s: %s", what, dtr_last_error());
        return -1;
    }
    return 0;
}

/* Parses obj's placements into out[0..DTR_MAX_MESH_DIMS); *n how many. */
static int dtrpy_parse_placements(PyObject *obj, const char *what, dtr_placement_t *out,
                                  int *n) {
    if (PyUnicode_Check(obj)) {
        const char *text = dtrpy_text(obj, what);
        if (text == NULL) return -1;
        if (dtr_placements_parse(text, out, DTR_MAX_MESH_DIMS, n) != DTR_OK) {
            dtrpy_arg_error("%s: %s", what, dtr_last_error());
            return -1;
        }
        return 0;
    }
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("%s: expected placements ('S(0),R', or a sequence of dtr.Shard, "
                        "dtr.Replicate, dtr.Partial or their texts), got %s",
                        what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > DTR_MAX_MESH_DIMS) {
        Py_DECREF(seq);
        dtrpy_arg_error("%s: %zd placements, at most %d", what, len, DTR_MAX_MESH_DIMS);
        return -1;
    }
    PyObject *f = dtrpy_helper("placement_text");
    for (Py_ssize_t i = 0; f != NULL && i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *text = PyUnicode_Check(item) ? Py_NewRef(item) : PyObject_CallOneArg(f, item);
        char item_what[64];
        snprintf(item_what, sizeof item_what, "%s[%zd]", what, i);
        const char *s = text == NULL ? NULL : text == Py_None ? "" : dtrpy_text(text, item_what);
        if (s == NULL || text == Py_None) {
            if (text == Py_None || (PyErr_ExceptionMatches(PyExc_TypeError) &&
                                    !PyErr_ExceptionMatches(dtrpy_argument_error))) {
                PyErr_Clear();
                dtrpy_arg_error("%s[%zd]: %R is not a placement", what, i, item);
            }
            Py_XDECREF(text);
            Py_DECREF(seq);
            return -1;
        }
        dtr_status_t st = dtr_placement_parse(s, &out[i]);
        Py_DECREF(text);
        if (st != DTR_OK) {
            Py_DECREF(seq);
            dtrpy_arg_error("%s[%zd]: %s", what, i, dtr_last_error());
            return -1;
        }
    }
    Py_DECREF(seq);
    if (f == NULL) return -1;
    *n = (int)len;
    return 0;
}

int dtrpy_placements(PyObject *obj, const char *what, int ndims, dtr_placement_t *out) {
    if (obj == NULL || obj == Py_None)
        return dtrpy_arg_error("%s: expected placements ('S(0),R' or a sequence), got None",
                               what), -1;
    PyObject *hit = PyDict_GetItemWithError(dtrpy_placement_cache, obj);
    if (hit == NULL && PyErr_Occurred()) PyErr_Clear(); /* (unhashable: parse every time) */
    int n = 0;
    if (hit != NULL) {
        n = (int)(PyBytes_GET_SIZE(hit) / (Py_ssize_t)sizeof *out);
        memcpy(out, PyBytes_AS_STRING(hit), (size_t)n * sizeof *out);
    } else {
        if (dtrpy_parse_placements(obj, what, out, &n) < 0) return -1;
        PyObject *b = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)n * sizeof *out);
        if (b == NULL) return -1;
        if (PyDict_Size(dtrpy_placement_cache) >= DTRPY_PLACEMENT_CACHE_MAX)
            PyDict_Clear(dtrpy_placement_cache);
        if (PyDict_SetItem(dtrpy_placement_cache, obj, b) < 0) PyErr_Clear();
        Py_DECREF(b);
    }
    if (n != ndims) {
        dtrpy_arg_error("%s: %d placement%s for a mesh of %d dim%s", what, n, n == 1 ? "" : "s",
                        ndims, ndims == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

int dtrpy_spec(dtr_spec_t *out, const dtrpy_mesh_t *mesh, PyObject *placements,
               const char *what, const int64_t *shape, int ndim, dtr_dtype_t dtype) {
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    int nd = dtr_mesh_ndims(mesh->mesh);
    if (dtrpy_placements(placements, what, nd, p) < 0) return -1;
    dtr_status_t st = dtr_spec_init(out, mesh->mesh, p, nd, shape, ndim, dtype);
    if (st != DTR_OK) {
        /* (dtr_spec_init names its own argument: say which of the caller's it was) */
        PyObject *cls = st == DTR_ERR_UNSUPPORTED ? dtrpy_refused_error : dtrpy_argument_error;
        PyErr_Format(cls, "%s: %s", what, dtr_last_error());
        return -1;
    }
    return 0;
}

int dtrpy_infer_shape(const dtr_mesh_t *mesh, PyObject *placements, const char *what,
                      const int64_t *local, int lndim, int64_t *shape, int *ndim) {
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    int nd = dtr_mesh_ndims(mesh);
    if (dtrpy_placements(placements, what, nd, p) < 0) return -1;
    *ndim = lndim;
    memcpy(shape, local, sizeof(int64_t) * (size_t)lndim);
    /* Per tensor dim, its shards from the last to split it to the first ((order, mesh dim)
     * decreasing): an even one multiplies the length, a ragged one gives it (its sizes'
     * sum), so a dim a ragged shard splits first is exact. */
    for (int d = 0; d < lndim; d++) {
        int seq[DTR_MAX_MESH_DIMS], n = 0;
        for (int k = 0; k < DTR_MAX_MESH_DIMS; k++)
            for (int i = 0; i < nd; i++)
                if (p[i].kind == DTR_SHARD && (p[i].dim < 0 ? p[i].dim + lndim : p[i].dim) == d &&
                    p[i].order == k)
                    seq[n++] = i;
        for (int k = n - 1; k >= 0; k--) {
            int64_t sum = 0;
            for (int c = 0; c < p[seq[k]].nsizes; c++) sum += p[seq[k]].sizes[c];
            shape[d] = p[seq[k]].nsizes > 0 ? sum : shape[d] * dtr_mesh_size(mesh, seq[k]);
        }
    }
    return 0;
}

static PyObject *dtrpy_parse_placements_py(PyObject *self, PyObject *obj) {
    (void)self;
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    int n = 0;
    if (dtrpy_parse_placements(obj, "placements", p, &n) < 0) return NULL;
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) { /* (a ragged shard's text has no fixed length) */
        int64_t len = dtr_placement_text_len(p[i]);
        char *buf = len >= 0 ? PyMem_Malloc((size_t)len + 1) : NULL;
        PyObject *item = buf != NULL && dtr_placement_format(p[i], buf, (size_t)len + 1) == DTR_OK
                             ? PyUnicode_FromString(buf)
                             : PyErr_NoMemory();
        PyMem_Free(buf);
        if (item == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, item);
    }
    return t;
}

static PyMethodDef dtrpy_spec_methods[] = {
    {"_set_helpers", dtrpy_set_helpers, METH_O, "Registers dtr/_arrays.py's helpers."},
    {"_placement_texts", dtrpy_parse_placements_py, METH_O,
     "The canonical text of each placement of a list (a tuple of str)."},
    {NULL, NULL, 0, NULL},
};

int dtrpy_spec_module_init(PyObject *module) {
    dtrpy_placement_cache = PyDict_New();
    if (dtrpy_placement_cache == NULL) return -1;
    return PyModule_AddFunctions(module, dtrpy_spec_methods);
}

int dtrpy_check_local(const char *what, const int64_t *local, int ndim, const dtr_spec_t *spec,
                      int rank, bool given_shape) {
    dtr_layout_t l;
    if (dtr_spec_layout(spec, rank, &l) != DTR_OK) return dtrpy_raise(dtr_last_status()), -1;
    bool same = l.ndim == ndim;
    for (int i = 0; same && i < l.ndim; i++) same = l.local_shape[i] == local[i];
    if (same) return 0;
    char have[160], want[160], global[160];
    dtrpy_format_shape(local, ndim, have, sizeof have);
    dtrpy_format_shape(l.local_shape, l.ndim, want, sizeof want);
    dtrpy_format_shape(spec->shape, spec->ndim, global, sizeof global);
    dtrpy_arg_error("%s: shape %s is not rank %d's block %s of the global shape %s%s", what,
                    have, rank, want, global,
                    given_shape ? "" : " (inferred as even shards, or a ragged one's sizes: pass "
                                       "shape= for uneven ones)");
    return -1;
}

/* An argument given per tensor (a list or tuple of n entries, each a str, a list, a tuple,
 * an array or None) or once for all (a str, a list of placement objects or of ints). */
PyObject *dtrpy_each(PyObject *obj, Py_ssize_t i, Py_ssize_t n) {
    if (obj == NULL || obj == Py_None) return NULL;
    if (!(PyList_Check(obj) || PyTuple_Check(obj)) || PySequence_Fast_GET_SIZE(obj) != n)
        return obj;
    PyObject *first = PySequence_Fast_GET_ITEM(obj, 0);
    if (PyLong_Check(first)) return obj;
    bool each = PyUnicode_Check(first) || PyList_Check(first) || PyTuple_Check(first) ||
                first == Py_None || PyObject_CheckBuffer(first) ||
                PyObject_HasAttrString(first, "dtype");
    return each ? PySequence_Fast_GET_ITEM(obj, i) : obj;
}

/* A dtype argument of a batch (dtypes, to_dtypes) for tensor i of n: a list or tuple is one
 * entry per tensor (a dtype is never a sequence), anything else one value for all. *item
 * (borrowed, NULL where not given) and its name for errors into label; -1 (an
 * ArgumentError) for a list of another length. */
int dtrpy_each_dtype(PyObject *obj, Py_ssize_t i, Py_ssize_t n, const char *name,
                            PyObject **item, char *label, size_t cap) {
    *item = obj == Py_None ? NULL : obj;
    snprintf(label, cap, "%s", name);
    if (obj == NULL || !(PyList_Check(obj) || PyTuple_Check(obj))) return 0;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(obj);
    if (k != n)
        return dtrpy_arg_error("%s: %zd entries for %zd tensors (one per tensor, or one dtype "
                               "for all)", name, k, n), -1;
    *item = PySequence_Fast_GET_ITEM(obj, i);
    if (*item == Py_None) *item = NULL;
    snprintf(label, cap, "%s[%zd]", name, i);
    return 0;
}
