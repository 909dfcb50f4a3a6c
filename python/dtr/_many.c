/*
 * dtr.redistribute_many, and dtr.redistribute with block_scale: a batch of tensors as one
 * change object (dtr_change_create: a batch on one mesh, rounds between two), its
 * collectives coalesced; with block_scale each tensor arrives as block-scaled fp8 and its
 * scales (the change's outputs n..2n-1). The steps of a call are _move.c's (_move.h).
 */
#include "_move.h"

#include <string.h>

/* The buffers of a batch's n tensors as the change's arrays (one allocation each; with
 * block_scale 2n outputs). */
typedef struct {
    const void **in;
    void **out;
    size_t *in_bytes, *out_bytes;
} dtrpy_arrays_t;

static void dtrpy_arrays_free(dtrpy_arrays_t *a) {
    PyMem_Free(a->in);
    PyMem_Free(a->out);
    PyMem_Free(a->in_bytes);
    PyMem_Free(a->out_bytes);
    memset(a, 0, sizeof *a);
}

/* What a batch call asks beside its tensors. */
typedef struct {
    PyObject *outs, *relabel;
    int64_t cap, block; /* staging_cap; block_scale (0: none) */
    bool async_op;
    bool single;        /* dtr.redistribute's one tensor: its result, not a list of one */
    PyObject *mesh_obj; /* what a Request keeps alive */
} dtrpy_many_opts_t;

/* Outputs of n tensors: each one's, and with block_scale its scales at n + i. */
static int dtrpy_nout(int n, const dtrpy_many_opts_t *m) { return m->block > 0 ? 2 * n : n; }

/* Output i's spec (i >= n: tensor i - n's scales) and its `out` where the caller gave one. */
static dtr_status_t dtrpy_many_output(dtrpy_call_t *c, int n, int i, dtrpy_tensor_t *t,
                                      const dtr_change_t *change, const dtrpy_many_opts_t *m) {
    dtr_spec_t dd;
    dtr_status_t st = i < n ? dtr_change_dst(change, i, &dd) : dtr_change_scales(change, i - n, &dd);
    if (st != DTR_OK || !c->in_dst || t[i].err_type != NULL) return st;
    char what[40];
    PyObject *out = i < n ? dtrpy_each(m->outs, i, n) : NULL;
    snprintf(what, sizeof what, out != NULL && out != m->outs ? "outs[%d]" : "outs", i);
    if (i >= n) t[i].kind = Py_XNewRef(t[i - n].kind); /* the scales: of the tensor's kind */
    if (dtrpy_output(c, out, what, &t[i], &dd, c->ctx->rank) < 0) dtrpy_tensor_defer(&t[i]);
    return DTR_OK;
}

/* The change of a batch (the library's one object: a batch on one mesh, rounds between two),
 * its outputs made and its arrays filled; *bad the first tensor refused on this rank. */
static dtr_status_t dtrpy_many_prepare(dtrpy_call_t *c, int n, dtrpy_tensor_t *t,
                                       const dtr_spec_t *s, const dtr_spec_t *d,
                                       const dtrpy_many_opts_t *m, dtr_change_t **change,
                                       dtrpy_arrays_t *a, int *bad) {
    int nout = dtrpy_nout(n, m);
    *bad = -1;
    for (int i = 0; i < n; i++)
        if (t[i].err_type != NULL && *bad < 0) *bad = i;
    a->in = PyMem_Calloc((size_t)n, sizeof *a->in);
    a->out = PyMem_Calloc((size_t)nout, sizeof *a->out);
    a->in_bytes = PyMem_Calloc((size_t)n, sizeof *a->in_bytes);
    a->out_bytes = PyMem_Calloc((size_t)nout, sizeof *a->out_bytes);
    if (!a->in || !a->out || !a->in_bytes || !a->out_bytes) return DTR_ERR_OUT_OF_MEMORY;
    const dtr_plan_options_t *po = dtrpy_plan_options();
    dtr_change_options_t o = {.strategy = po->strategy, .cost = po->cost, .many = true,
                              .between_meshes = c->to != NULL,
                              .relabel = m->relabel != NULL && PyObject_IsTrue(m->relabel) == 1,
                              .staging_cap_bytes = m->cap, .block_scale = m->block,
                              .cache = c->to == NULL && m->block == 0 ? dtrpy_plan_cache() : NULL};
    dtr_status_t st = dtr_change_create(n, s, d, &o, change);
    for (int i = 0; st == DTR_OK && i < nout; i++) {
        st = dtrpy_many_output(c, n, i, t, *change, m);
        if (t[i].err_type != NULL && *bad < 0) *bad = i;
        if (i < n) {
            a->in[i] = t[i].has_in ? t[i].in.buf : NULL;
            a->in_bytes[i] = t[i].has_in ? (size_t)t[i].in.len : 0;
        }
        a->out[i] = t[i].has_out ? t[i].out.buf : NULL;
        a->out_bytes[i] = t[i].has_out ? (size_t)t[i].out.len : 0;
    }
    if (st == DTR_OK && *bad < 0 && dtrpy_enter(c, t, nout) < 0) {
        dtrpy_tensor_defer(&t[0]);
        *bad = 0;
    }
    return st;
}

/* The results of a batch: each tensor's (None where this rank gets no block; with
 * block_scale a tuple (tensor, scales)); the first alone for dtr.redistribute. */
static PyObject *dtrpy_many_results(const dtrpy_tensor_t *t, int n, const dtrpy_many_opts_t *m) {
    PyObject *results = PyList_New(n);
    for (int i = 0; results != NULL && i < n; i++) {
        PyObject *r = t[i].result ? t[i].result : Py_None;
        r = m->block > 0 && t[i].result != NULL
                ? PyTuple_Pack(2, r, t[n + i].result ? t[n + i].result : Py_None)
                : Py_NewRef(r);
        if (r == NULL) Py_CLEAR(results);
        else PyList_SET_ITEM(results, i, r);
    }
    if (results == NULL || !m->single) return results;
    PyObject *one = Py_NewRef(PyList_GET_ITEM(results, 0));
    Py_DECREF(results);
    return one;
}

/* Starts a batch as a Request, which takes the tensors' buffers, the change and its arrays. */
static PyObject *dtrpy_many_start(dtrpy_call_t *c, int n, dtrpy_tensor_t *t,
                                  dtr_change_t *change, dtrpy_arrays_t *a,
                                  const dtrpy_many_opts_t *m) {
    PyObject *results = dtrpy_many_results(t, n, m);
    dtrpy_request_t *r = results != NULL ? dtrpy_request_new(c, t, dtrpy_nout(n, m), m->mesh_obj,
                                                             results)
                                         : NULL;
    Py_XDECREF(results);
    if (r == NULL) {
        dtr_change_destroy(change);
        dtrpy_arrays_free(a);
        return NULL;
    }
    r->change = change;
    r->in = a->in, r->out = a->out, r->in_bytes = a->in_bytes, r->out_bytes = a->out_bytes;
    memset(a, 0, sizeof *a);
    dtr_status_t st;
    c->called = true;
    DTRPY_CALL(c->ctx, st = dtr_change_start(c->ctx->ctx, change, r->in, r->in_bytes, r->out,
                                             r->out_bytes, &r->req));
    dtrpy_request_started(r, st);
    return dtrpy_status_or(st, (PyObject *)r);
}

/* Runs a batch: the list of results, or (async_op) a Request in flight. */
static PyObject *dtrpy_run_many(dtrpy_call_t *c, int n, dtrpy_tensor_t *t, const dtr_spec_t *s,
                                const dtr_spec_t *d, const dtrpy_many_opts_t *m) {
    dtr_change_t *change = NULL;
    dtrpy_arrays_t a = {0};
    int bad = -1;
    dtr_status_t st = dtrpy_many_prepare(c, n, t, s, d, m, &change, &a, &bad);
    if (st == DTR_OK && m->async_op && bad < 0) return dtrpy_many_start(c, n, t, change, &a, m);
    PyObject *results = NULL;
    if (st == DTR_OK && bad >= 0) {
        dtrpy_poison(c, &t[bad]);
    } else if (st == DTR_OK) {
        c->called = true;
        DTRPY_CALL(c->ctx, st = dtr_change_run(c->ctx->ctx, change, a.in, a.in_bytes, a.out,
                                               a.out_bytes));
        st = dtrpy_settle(c, st);
        if (st != DTR_OK) dtrpy_raise(st);
        else results = dtrpy_many_results(t, n, m);
    } else if (!PyErr_Occurred()) {
        dtrpy_raise(st);
    }
    dtr_change_destroy(change);
    dtrpy_arrays_free(&a);
    return results;
}

/* block_scale: None or 0 none, else a block edge >= 1; -1 with ArgumentError. */
static int dtrpy_block_scale(PyObject *obj, int64_t *out) {
    *out = 0;
    if (obj == NULL || obj == Py_None) return 0;
    return dtrpy_int(obj, "block_scale", 0, INT64_C(1) << 30, out);
}

/* redistribute_many's per-tensor arguments: each a list of one entry per tensor, or one value
 * for all (NULL where not given) */
typedef struct {
    PyObject *src, *dst, *shapes, *outs, *dtypes, *to_dtypes;
} dtrpy_each_t;

static PyObject *dtrpy_many_run(dtrpy_call_t *cp, PyObject *locals, const dtrpy_each_t *e,
                                PyObject *relabel, PyObject *cap, PyObject *block,
                                dtrpy_many_opts_t *m);

/* A Request keeps both meshes alive (the change borrows them): a new reference. */
static PyObject *dtrpy_meshes(PyObject *mesh_obj, PyObject *to_obj) {
    return to_obj != NULL && to_obj != Py_None ? PyTuple_Pack(2, mesh_obj, to_obj)
                                               : Py_NewRef(mesh_obj);
}

PyObject *dtrpy_redistribute_many(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"locals", "mesh", "src", "dst", "shapes", "outs", "to_mesh",
                            "dtypes", "to_dtypes", "relabel", "staging_cap", "async_op",
                            "block_scale", NULL};
    PyObject *locals, *mesh_obj, *to_obj = NULL, *relabel = NULL, *cap = NULL, *block = NULL;
    dtrpy_each_t e = {NULL, NULL, NULL, NULL, NULL, NULL};
    int async_op = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|$OOOOOOOpO:redistribute_many", names,
                                     &locals, &mesh_obj, &e.src, &e.dst, &e.shapes, &e.outs,
                                     &to_obj, &e.dtypes, &e.to_dtypes, &relabel, &cap, &async_op,
                                     &block))
        return dtrpy_refuse_parse(args, kw, 1, false);
    dtrpy_call_t c;
    int setup = dtrpy_call_setup(mesh_obj, to_obj, &c);
    c.scaled = block != NULL && block != Py_None;
    if (setup < 0) return dtrpy_setup_failed(&c);
    /* snapshots of the per-tensor lists: a callback of one of their items (an __index__, a
     * placement object's property) may change the caller's list while it is read */
    PyObject *keep[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject **each[6] = {&e.src, &e.dst, &e.shapes, &e.outs, &e.dtypes, &e.to_dtypes};
    for (int k = 0; k < 6; k++)
        if (*each[k] != NULL && PyList_Check(*each[k])) {
            keep[k] = PyList_AsTuple(*each[k]);
            if (keep[k] == NULL) {
                for (int j = 0; j < k; j++) Py_XDECREF(keep[j]);
                return NULL;
            }
            *each[k] = keep[k];
        }
    dtrpy_many_opts_t m = {.outs = e.outs, .async_op = async_op,
                           .mesh_obj = dtrpy_meshes(mesh_obj, to_obj)};
    PyObject *results = m.mesh_obj == NULL ? NULL
                        : dtrpy_many_run(&c, locals, &e, relabel, cap, block, &m);
    Py_XDECREF(m.mesh_obj);
    for (int k = 0; k < 6; k++) Py_XDECREF(keep[k]);
    return results;
}

/* redistribute_many's work once its arguments are snapshots. */
static PyObject *dtrpy_many_run(dtrpy_call_t *cp, PyObject *locals, const dtrpy_each_t *e,
                                PyObject *relabel, PyObject *cap, PyObject *block,
                                dtrpy_many_opts_t *m) {
    dtrpy_call_t c = *cp;
    int64_t cap_bytes = 0;
    bool async_op = m->async_op;
    if (dtrpy_block_scale(block, &m->block) < 0 || dtrpy_flag_ok(relabel, "relabel") < 0 ||
        (c.to == NULL && relabel == Py_True &&
         dtrpy_arg_error("relabel: only for a change between meshes (to_mesh=)") == NULL) ||
        (cap != NULL && cap != Py_None &&
         dtrpy_int(cap, "staging_cap", 0, INT64_MAX, &cap_bytes) < 0) ||
        (c.to == NULL && cap_bytes != 0 &&
         dtrpy_arg_error("staging_cap: only for a change between meshes (to_mesh=)") == NULL)) {
        dtrpy_call_refuse(&c);
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(locals);
    if (seq == NULL) {
        PyErr_Clear();
        dtrpy_arg_error("locals: expected a list of arrays, got %s", Py_TYPE(locals)->tp_name);
        dtrpy_call_refuse(&c);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > INT32_MAX) {
        Py_DECREF(seq);
        dtrpy_arg_error("locals: %zd arrays, at least 1", n);
        dtrpy_call_refuse(&c);
        return NULL;
    }
    if (!c.in_src && !c.in_dst) {
        PyObject *none = PyList_New(n);
        for (Py_ssize_t i = 0; none != NULL && i < n; i++) PyList_SET_ITEM(none, i, Py_NewRef(Py_None));
        Py_DECREF(seq);
        if (none != NULL && m->single) { /* (the one tensor's None) */
            Py_DECREF(none);
            none = Py_NewRef(Py_None);
        }
        if (none == NULL || !async_op) return none;
        PyObject *r = dtrpy_request_done(none);
        Py_DECREF(none);
        return r;
    }
    dtrpy_tensor_t *t = PyMem_Calloc((size_t)dtrpy_nout((int)n, m), sizeof *t);
    dtr_spec_t *s = PyMem_Calloc((size_t)n, sizeof *s), *d = PyMem_Calloc((size_t)n, sizeof *d);
    PyObject *results = NULL;
    int bad = t == NULL || s == NULL || d == NULL;
    if (bad) PyErr_NoMemory();
    for (Py_ssize_t i = 0; !bad && i < n; i++) {
        char what[40], dt_what[40], to_what[40];
        snprintf(what, sizeof what, m->single ? "local" : "locals[%zd]", i);
        PyObject *dtype, *to_dtype;
        bad = dtrpy_each_dtype(e->dtypes, i, n, "dtypes", &dtype, dt_what, sizeof dt_what) < 0 ||
              dtrpy_each_dtype(e->to_dtypes, i, n, "to_dtypes", &to_dtype, to_what,
                               sizeof to_what) < 0;
        if (m->single) { /* (dtr.redistribute's names) */
            snprintf(dt_what, sizeof dt_what, "dtype");
            snprintf(to_what, sizeof to_what, "to_dtype");
        }
        bad = bad ||
              dtrpy_tensor_specs(&c, PySequence_Fast_GET_ITEM(seq, i), dtrpy_each(e->src, i, n),
                                 dtrpy_each(e->dst, i, n), dtrpy_each(e->shapes, i, n), dtype,
                                 to_dtype, what, dt_what, to_what, &t[i], &s[i], &d[i]) < 0;
    }
    m->relabel = relabel;
    m->cap = cap_bytes;
    if (!bad) results = dtrpy_run_many(&c, (int)n, t, s, d, m);
    for (Py_ssize_t i = 0; t != NULL && i < dtrpy_nout((int)n, m); i++) dtrpy_tensor_release(&t[i]);
    PyMem_Free(t);
    PyMem_Free(s);
    PyMem_Free(d);
    Py_DECREF(seq);
    if (results == NULL && !c.called) dtrpy_call_refuse(&c);
    return results;
}


/* dtr.redistribute with block_scale: a batch of one, its result the tuple (tensor, scales),
 * None where this rank gets no block. */
static PyObject *dtrpy_redistribute_scaled(const dtrpy_one_args_t *a) {
    dtrpy_call_t c;
    int setup = dtrpy_call_setup(a->mesh, a->to, &c);
    c.scaled = true;
    if (setup < 0) return dtrpy_setup_failed(&c);
    if (a->out != NULL && a->out != Py_None) {
        dtrpy_arg_error("out: not with block_scale (the tensor and its scales are new arrays)");
        dtrpy_call_refuse(&c);
        return NULL;
    }
    /* one tensor as a batch of one: each per-tensor argument a 1-tuple */
    PyObject *one[6] = {PyTuple_Pack(1, a->local), PyTuple_Pack(1, a->src), PyTuple_Pack(1, a->dst),
                        a->shape != NULL && a->shape != Py_None ? PyTuple_Pack(1, a->shape) : NULL,
                        PyTuple_Pack(1, a->dtype != NULL ? a->dtype : Py_None),
                        PyTuple_Pack(1, a->to_dtype != NULL ? a->to_dtype : Py_None)};
    dtrpy_each_t e = {one[1], one[2], one[3], NULL, one[4], one[5]};
    dtrpy_many_opts_t m = {.async_op = a->async_op, .single = true,
                           .mesh_obj = dtrpy_meshes(a->mesh, a->to)};
    PyObject *result = NULL;
    if (one[0] != NULL && one[1] != NULL && one[2] != NULL && one[4] != NULL && one[5] != NULL &&
        m.mesh_obj != NULL)
        result = dtrpy_many_run(&c, one[0], &e, a->relabel, a->cap, a->block, &m);
    Py_XDECREF(m.mesh_obj);
    for (int k = 0; k < 6; k++) Py_XDECREF(one[k]);
    return result;
}

PyObject *dtrpy_redistribute(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"local", "mesh", "src", "dst", "shape", "out", "async_op",
                            "to_mesh", "dtype", "to_dtype", "relabel", "staging_cap",
                            "block_scale", NULL};
    dtrpy_one_args_t a = {0};
    int async_op = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|$OOpOOOOOO:redistribute", names, &a.local,
                                     &a.mesh, &a.src, &a.dst, &a.shape, &a.out, &async_op, &a.to,
                                     &a.dtype, &a.to_dtype, &a.relabel, &a.cap, &a.block))
        return dtrpy_refuse_parse(args, kw, 1, false);
    a.async_op = async_op;
    return a.block != NULL && a.block != Py_None ? dtrpy_redistribute_scaled(&a)
                                                 : dtrpy_redistribute_one(&a);
}
