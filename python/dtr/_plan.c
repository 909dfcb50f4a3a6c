/*
 * dtr.layout and dtr.plan: the pure calls (no communication), and the Plan object, whose
 * to_dict() is `dtr plan --json` and str() is `dtr plan`'s table.
 */
#include "_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dtr_cost_model_t dtrpy_cost;
static dtr_plan_options_t dtrpy_opts;
static dtr_plan_cache_t *dtrpy_cache;

const dtr_plan_options_t *dtrpy_plan_options(void) { return &dtrpy_opts; }
dtr_plan_cache_t *dtrpy_plan_cache(void) { return dtrpy_cache; }

typedef struct {
    PyObject_HEAD
    dtr_change_t *change;    /* the library's change object: one mesh or two */
    PyObject *meshes;        /* (the specs borrow their meshes) */
} dtrpy_plan_t;

static void dtrpy_plan_dealloc(dtrpy_plan_t *p) {
    dtr_change_destroy(p->change);
    Py_XDECREF(p->meshes);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* What print(what, f) writes, as a str (dtrpy_raise's error where it fails). */
static PyObject *dtrpy_printed(dtr_status_t (*print)(const void *what, FILE *f), const void *what) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) return PyErr_NoMemory();
    dtr_status_t st = print(what, f);
    fclose(f);
    PyObject *r = st == DTR_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len)
                               : dtrpy_raise(st);
    free(buf);
    return r;
}

static dtr_status_t dtrpy_change_table(const void *c, FILE *f) { return dtr_change_print(c, -1, f); }
static dtr_status_t dtrpy_change_json(const void *c, FILE *f) { return dtr_change_print_json(c, f); }
static dtr_status_t dtrpy_change_svg(const void *c, FILE *f) { return dtr_change_print_svg(c, f); }
static dtr_status_t dtrpy_layout_draw(const void *s, FILE *f) { return dtr_layout_print_svg(s, f); }

/* The plan as a str: the table (0), JSON (1) or the picture (2). */
static PyObject *dtrpy_plan_text(dtrpy_plan_t *p, int json) {
    return dtrpy_printed(json == 2 ? dtrpy_change_svg : json ? dtrpy_change_json
                                                             : dtrpy_change_table, p->change);
}

static PyObject *dtrpy_plan_str(dtrpy_plan_t *p) { return dtrpy_plan_text(p, 0); }

static PyObject *dtrpy_plan_svg(dtrpy_plan_t *p, PyObject *noargs) {
    (void)noargs;
    return dtrpy_plan_text(p, 2);
}

static PyObject *dtrpy_plan_to_dict(dtrpy_plan_t *p, PyObject *noargs) {
    (void)noargs;
    PyObject *text = dtrpy_plan_text(p, 1);
    if (text == NULL) return NULL;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *d = json == NULL ? NULL : PyObject_CallMethod(json, "loads", "O", text);
    Py_XDECREF(json);
    Py_DECREF(text);
    return d;
}

static PyObject *dtrpy_plan_get(dtrpy_plan_t *p, void *key) {
    PyObject *d = dtrpy_plan_to_dict(p, NULL);
    if (d == NULL) return NULL;
    PyObject *v = PyDict_GetItemString(d, (const char *)key);
    if (v == NULL) v = Py_None;
    Py_INCREF(v);
    Py_DECREF(d);
    return v;
}

static PyObject *dtrpy_plan_get_cross(dtrpy_plan_t *p, void *closure) {
    (void)closure;
    return PyBool_FromLong(dtr_change_cross_plan(p->change) != NULL);
}

static PyMethodDef dtrpy_plan_methods[] = {
    {"to_dict", (PyCFunction)dtrpy_plan_to_dict, METH_NOARGS,
     "The plan as `dtr plan --json` prints it, as a dict."},
    {"_repr_svg_", (PyCFunction)dtrpy_plan_svg, METH_NOARGS,
     "The plan as a picture (SVG text), as `dtr plan --svg` draws it: a notebook shows it."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dtrpy_plan_getset[] = {
    {"steps", (getter)dtrpy_plan_get, NULL, "The steps (single-mesh plans), as dicts.", "steps"},
    {"recv_bytes_per_rank_max", (getter)dtrpy_plan_get, NULL,
     "The most bytes one rank receives.", "recv_bytes_per_rank_max"},
    {"lower_bound_recv_bytes_per_rank", (getter)dtrpy_plan_get, NULL,
     "No plan can make some rank receive less.", "lower_bound_recv_bytes_per_rank"},
    {"peak_extra_bytes_per_rank", (getter)dtrpy_plan_get, NULL,
     "The most extra memory one rank needs.", "peak_extra_bytes_per_rank"},
    {"modeled_time_us", (getter)dtrpy_plan_get, NULL, "The cost model's time.",
     "modeled_time_us"},
    {"messages", (getter)dtrpy_plan_get, NULL,
     "Point-to-point messages (plans between meshes).", "messages"},
    {"cross", (getter)dtrpy_plan_get_cross, NULL, "Whether the plan is between two meshes.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject dtrpy_plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr.Plan",
    .tp_basicsize = sizeof(dtrpy_plan_t),
    .tp_dealloc = (destructor)dtrpy_plan_dealloc,
    .tp_str = (reprfunc)dtrpy_plan_str,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A plan from dtr.plan: str() is `dtr plan`'s table, to_dict() its --json.",
    .tp_methods = dtrpy_plan_methods,
    .tp_getset = dtrpy_plan_getset,
};

/* _layout_svg(mesh, shape, placements, dtype): the layout as `dtr layout --svg` draws it. */
PyObject *dtrpy_layout_svg(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mesh_obj, *shape_obj, *pl, *dtype_obj;
    if (!PyArg_ParseTuple(args, "OOOO:_layout_svg", &mesh_obj, &shape_obj, &pl, &dtype_obj))
        return dtrpy_as_argument_error();
    dtrpy_mesh_t *mesh;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    dtr_dtype_t dtype;
    dtr_spec_t spec;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0 ||
        dtrpy_shape(shape_obj, "shape", shape, &ndim) < 0 ||
        dtrpy_dtype(dtype_obj, "dtype", &dtype) < 0 ||
        dtrpy_spec(&spec, mesh, pl, "placements", shape, ndim, dtype) < 0)
        return NULL;
    return dtrpy_printed(dtrpy_layout_draw, &spec);
}

PyObject *dtrpy_layout(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"mesh", "shape", "placements", "dtype", NULL};
    PyObject *mesh_obj, *shape_obj, *pl, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O:layout", names, &mesh_obj, &shape_obj,
                                     &pl, &dtype_obj))
        return dtrpy_as_argument_error();
    dtrpy_mesh_t *mesh;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    dtr_dtype_t dtype = DTR_F32;
    dtr_spec_t spec;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0 ||
        dtrpy_shape(shape_obj, "shape", shape, &ndim) < 0 ||
        (dtype_obj != NULL && dtype_obj != Py_None && dtrpy_dtype(dtype_obj, "dtype", &dtype) < 0) ||
        dtrpy_spec(&spec, mesh, pl, "placements", shape, ndim, dtype) < 0)
        return NULL;
    PyObject *ranks = PyObject_GetAttrString(mesh_obj, "ranks");
    if (ranks == NULL) return NULL;
    bool ints = PyTuple_Check(ranks) && PyTuple_GET_SIZE(ranks) == dtr_mesh_nranks(mesh->mesh);
    for (Py_ssize_t i = 0; ints && i < PyTuple_GET_SIZE(ranks); i++)
        ints = PyLong_Check(PyTuple_GET_ITEM(ranks, i));
    if (!ints) {
        Py_DECREF(ranks);
        return dtrpy_arg_error("mesh: its .ranks is not the mesh's tuple of ints (a subclass "
                               "replaced it)");
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ranks);
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        int rank = (int)PyLong_AsLong(PyTuple_GET_ITEM(ranks, i));
        int64_t coord[DTR_MAX_MESH_DIMS];
        dtr_layout_t l;
        dtr_mesh_coord(mesh->mesh, rank, coord);
        dtr_status_t st = dtr_spec_layout(&spec, rank, &l);
        PyObject *item = st != DTR_OK ? dtrpy_raise(st)
                                      : Py_BuildValue("(iNNNL)", rank,
                                                      dtrpy_tuple(coord, dtr_mesh_ndims(mesh->mesh)),
                                                      dtrpy_tuple(l.local_shape, l.ndim),
                                                      dtrpy_tuple(l.global_offset, l.ndim),
                                                      (long long)l.bytes);
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    Py_DECREF(ranks);
    return list;
}

/* The options of a change between meshes from dtr.plan's keywords. */
static int dtrpy_change_cross_options(PyObject *relabel, PyObject *cap, dtr_change_options_t *o) {
    o->relabel = relabel != NULL && PyObject_IsTrue(relabel) == 1;
    if (cap != NULL && cap != Py_None &&
        dtrpy_int(cap, "staging_cap", 0, INT64_MAX, &o->staging_cap_bytes) < 0)
        return -1;
    return 0;
}

PyObject *dtrpy_plan(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"mesh", "shape", "src", "dst", "dtype", "strategy", "to_mesh",
                            "to_dtype", "relabel", "staging_cap", NULL};
    PyObject *mesh_obj, *shape_obj, *src, *dst, *dtype_obj = NULL, *strategy = NULL;
    PyObject *to_obj = NULL, *to_dtype_obj = NULL, *relabel = NULL, *cap = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|$OOOOOO:plan", names, &mesh_obj, &shape_obj,
                                     &src, &dst, &dtype_obj, &strategy, &to_obj, &to_dtype_obj,
                                     &relabel, &cap))
        return dtrpy_as_argument_error();
    dtrpy_mesh_t *mesh, *to = NULL;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim;
    dtr_dtype_t dtype = DTR_F32, to_dtype;
    if (dtrpy_mesh_of(mesh_obj, "mesh", &mesh) < 0 ||
        (to_obj != NULL && to_obj != Py_None && dtrpy_mesh_of(to_obj, "to_mesh", &to) < 0) ||
        dtrpy_shape(shape_obj, "shape", shape, &ndim) < 0 ||
        (dtype_obj != NULL && dtype_obj != Py_None && dtrpy_dtype(dtype_obj, "dtype", &dtype) < 0))
        return NULL;
    to_dtype = dtype;
    if ((to_dtype_obj != NULL && to_dtype_obj != Py_None &&
         dtrpy_dtype(to_dtype_obj, "to_dtype", &to_dtype) < 0) ||
        dtrpy_flag_ok(relabel, "relabel") < 0)
        return NULL;
    if (to == NULL && cap != NULL && cap != Py_None)
        return dtrpy_arg_error("staging_cap: only for a plan between meshes (to_mesh=)");
    if (to == NULL && relabel != NULL && PyObject_IsTrue(relabel) == 1)
        return dtrpy_arg_error("relabel: only for a plan between meshes (to_mesh=)");
    dtr_change_options_t opts = {.strategy = dtrpy_opts.strategy, .cost = dtrpy_opts.cost,
                                 .between_meshes = to != NULL};
    if (to != NULL && dtrpy_change_cross_options(relabel, cap, &opts) < 0) return NULL;
    if (strategy != NULL && strategy != Py_None) {
        const char *s = PyUnicode_Check(strategy) ? dtrpy_text(strategy, "strategy") : NULL;
        if (s == NULL || dtr_strategy_parse(s, &opts.strategy) != DTR_OK) {
            PyErr_Clear();
            return dtrpy_arg_error("strategy: %R is not 'optimal' or 'compat'", strategy);
        }
    }
    dtr_spec_t s, d;
    if (dtrpy_spec(&s, mesh, src, "src", shape, ndim, dtype) < 0 ||
        dtrpy_spec(&d, to != NULL ? to : mesh, dst, "dst", shape, ndim, to_dtype) < 0)
        return NULL;
    dtrpy_plan_t *p = PyObject_New(dtrpy_plan_t, &dtrpy_plan_type);
    if (p == NULL) return NULL;
    p->change = NULL;
    p->meshes = Py_BuildValue("(OO)", mesh_obj, to != NULL ? to_obj : mesh_obj);
    dtr_status_t st = dtr_change_create(1, &s, &d, &opts, &p->change);
    if (p->meshes == NULL || st != DTR_OK) {
        if (p->meshes != NULL) dtrpy_raise(st);
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}

int dtrpy_plan_module_init(PyObject *module) {
    if (dtr_cost_model_from_env(&dtrpy_cost) != DTR_OK) dtr_cost_model_default(&dtrpy_cost);
    dtrpy_opts.strategy = DTR_STRATEGY_OPTIMAL;
    dtrpy_opts.cost = &dtrpy_cost;
    if (dtr_plan_cache_create(512, &dtrpy_cache) != DTR_OK) {
        dtrpy_raise(dtr_last_status());
        return -1;
    }
    if (PyType_Ready(&dtrpy_plan_type) < 0) return -1;
    return PyModule_AddObjectRef(module, "Plan", (PyObject *)&dtrpy_plan_type);
}
