/*
 * dtr.redistribute and dtr.redistribute_many: arrays in through the buffer protocol
 * (_buffer.c), the plan through the plan cache (single mesh), dtr_cross_plan_create (between
 * meshes) or, for redistribute_many, the change object (dtr_change_create), the
 * collective with the GIL released, the result as a new array of the input's kind or in
 * `out`. Everything about the arguments is checked before anything moves, so a bad
 * argument raises on this rank with nothing written (the other ranks then see a
 * BackendError from the argument agreement, not a hang).
 */
#include "_move.h"

#include <string.h>

void dtrpy_tensor_defer(dtrpy_tensor_t *t) {
    if (t->err_type == NULL) PyErr_Fetch(&t->err_type, &t->err_value, &t->err_tb);
    else PyErr_Clear();
}

void dtrpy_tensor_release(dtrpy_tensor_t *t) {
    Py_CLEAR(t->err_type);
    Py_CLEAR(t->err_value);
    Py_CLEAR(t->err_tb);
    if (t->has_in) PyBuffer_Release(&t->in);
    if (t->has_out) PyBuffer_Release(&t->out);
    t->has_in = t->has_out = false;
    Py_CLEAR(t->kind);
    Py_CLEAR(t->result);
}


/* The global shape: given, or from the local block as DTensor infers it (dtrpy_infer_shape). */
static int dtrpy_global_shape(PyObject *shape_obj, const dtrpy_tensor_t *t, const dtrpy_call_t *c,
                              PyObject *src, int64_t *shape, int *ndim) {
    if (shape_obj != NULL && shape_obj != Py_None) return dtrpy_shape(shape_obj, "shape", shape, ndim);
    if (!t->has_in)
        return dtrpy_arg_error("shape: needed on a rank that holds no source block"), -1;
    return dtrpy_infer_shape(c->mesh->mesh, src, "src", t->local, t->ndim, shape, ndim);
}

/* Checks the input block against this rank's layout of spec. */
static int dtrpy_check_block(const char *what, const dtrpy_tensor_t *t, const dtr_spec_t *spec,
                             int rank, bool given_shape) {
    return dtrpy_check_local(what, t->local, t->ndim, spec, rank, given_shape);
}

/* The output of this rank's block of spec: `out` checked (on the mesh's device; errors name
 * it `what`), or a new array. */
int dtrpy_output(const dtrpy_call_t *c, PyObject *out, const char *what,
                 dtrpy_tensor_t *t, const dtr_spec_t *spec, int rank) {
    dtr_layout_t l;
    if (dtr_spec_layout(spec, rank, &l) != DTR_OK) return dtrpy_raise(dtr_last_status()), -1;
    if (out != NULL && out != Py_None) {
        dtr_dtype_t d;
        PyObject *kind = NULL;
        if (dtrpy_buffer_on(out, what, true, c->mesh->device, &t->out, &d, &kind) < 0) return -1;
        Py_XDECREF(kind);
        t->has_out = true;
        if (t->out.ndim > DTR_MAX_TENSOR_DIMS)
            return dtrpy_arg_error("%s: %d dims, at most %d", what, t->out.ndim, DTR_MAX_TENSOR_DIMS),
                   -1;
        bool same = t->out.ndim == l.ndim;
        for (int i = 0; same && i < l.ndim; i++) same = t->out.shape[i] == l.local_shape[i];
        if (d != spec->dtype)
            return dtrpy_arg_error("%s: dtype %s, the result is %s", what, dtr_dtype_name(d),
                                   dtr_dtype_name(spec->dtype)), -1;
        if (!same) {
            char have[160], want[160];
            int64_t s[DTR_MAX_TENSOR_DIMS];
            for (int i = 0; i < t->out.ndim && i < DTR_MAX_TENSOR_DIMS; i++) s[i] = t->out.shape[i];
            dtrpy_format_shape(s, t->out.ndim, have, sizeof have);
            dtrpy_format_shape(l.local_shape, l.ndim, want, sizeof want);
            return dtrpy_arg_error("%s: shape %s, rank %d's block of the result is %s", what,
                                   have, rank, want), -1;
        }
        t->result = Py_NewRef(out);
        return 0;
    }
    if (dtrpy_alloc(l.local_shape, l.ndim, spec->dtype, t->kind, &t->result, &t->out) < 0)
        return -1;
    t->has_out = true;
    return 0;
}


/* ---- the Request of async_op ------------------------------------------------------------ */

static void dtrpy_request_finish(dtrpy_request_t *r, dtr_status_t st) {
    if (r->context != NULL && r->context->inflight == r) r->context->inflight = NULL;
    r->done = true;
    r->req = NULL;
    r->status = st;
    for (int i = 0; i < r->n; i++) dtrpy_tensor_release(&r->tensors[i]);
    PyMem_Free(r->tensors);
    r->tensors = NULL;
    PyMem_Free(r->plan);
    r->plan = NULL;
    dtr_change_destroy(r->change);
    r->change = NULL;
    PyMem_Free(r->in);
    PyMem_Free(r->out);
    PyMem_Free(r->in_bytes);
    PyMem_Free(r->out_bytes);
    r->in = NULL, r->out = NULL, r->in_bytes = NULL, r->out_bytes = NULL;
    dtr_cross_plan_destroy(r->cross);
    r->cross = NULL;
}

static PyObject *dtrpy_request_wait(dtrpy_request_t *r, PyObject *noargs) {
    (void)noargs;
    if (!r->done) {
        dtr_status_t st;
        dtr_request_t *req = r->req;
        DTRPY_CALL(r->context, st = dtr_request_wait(req);
                   if (st == DTR_OK && r->settle) st = dtr_context_sync(r->context->ctx));
        dtrpy_request_finish(r, st);
    }
    if (r->status != DTR_OK) return dtrpy_raise(r->status);
    return Py_NewRef(r->result);
}

static PyObject *dtrpy_request_is_completed(dtrpy_request_t *r, PyObject *noargs) {
    (void)noargs;
    if (!r->done) {
        bool done = false;
        dtr_status_t st;
        DTRPY_CALL(r->context, st = dtr_request_test(r->req, &done));
        if (done) dtrpy_request_finish(r, st);
    }
    return PyBool_FromLong(r->done);
}

/* Completes a request still in flight (before its context goes: at exit). */
static void dtrpy_request_complete(void *request) {
    dtrpy_request_t *r = request;
    if (r->done) return;
    dtr_request_t *req = r->req;
    dtr_status_t st = DTR_OK;
    if (req != NULL) DTRPY_CALL(r->context, st = dtr_request_wait(req));
    dtrpy_request_finish(r, st); /* (its error is wait()'s to raise) */
}

static void dtrpy_request_dealloc(dtrpy_request_t *r) {
    if (!r->done && r->req == NULL) dtrpy_request_finish(r, DTR_OK); /* (never started) */
    if (!r->done) { /* the buffers must outlive the operation */
        dtr_request_t *req = r->req;
        dtr_status_t st;
        DTRPY_CALL(r->context, st = dtr_request_wait(req));
        dtrpy_request_finish(r, st);
    }
    Py_XDECREF(r->mesh);
    Py_XDECREF(r->context);
    Py_XDECREF(r->result);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMethodDef dtrpy_request_methods[] = {
    {"wait", (PyCFunction)dtrpy_request_wait, METH_NOARGS,
     "Completes the redistribution (GIL released) and returns its result, or raises."},
    {"is_completed", (PyCFunction)dtrpy_request_is_completed, METH_NOARGS,
     "Makes progress; whether it completed (wait() then returns at once)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject dtrpy_request_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dtr.Request",
    .tp_basicsize = sizeof(dtrpy_request_t),
    .tp_dealloc = (destructor)dtrpy_request_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An async_op redistribution in flight: wait() returns its result. Progress is "
              "made inside wait() and is_completed(); the buffers stay referenced until then.",
    .tp_methods = dtrpy_request_methods,
};

/* After a start: the request is its context's one in flight, or finished with the error. */
void dtrpy_request_started(dtrpy_request_t *r, dtr_status_t st) {
    if (st != DTR_OK)
        dtrpy_request_finish(r, st);
    else
        r->context->inflight = r, r->context->complete = dtrpy_request_complete;
}

/* A completed request (calls between meshes run at once: they have no non-blocking form). */
PyObject *dtrpy_request_done(PyObject *result) {
    dtrpy_request_t *r = PyObject_New(dtrpy_request_t, &dtrpy_request_type);
    if (r == NULL) return NULL;
    memset((char *)r + sizeof(PyObject), 0, sizeof *r - sizeof(PyObject));
    r->done = true;
    r->status = DTR_OK;
    r->result = Py_NewRef(result);
    return (PyObject *)r;
}

/* A request that takes the tensors t[0..n) (moved into it) and keeps the mesh and context;
 * NULL on no memory. */
dtrpy_request_t *dtrpy_request_new(dtrpy_call_t *c, dtrpy_tensor_t *t, int n,
                                   PyObject *mesh_obj, PyObject *result) {
    dtrpy_request_t *r = PyObject_New(dtrpy_request_t, &dtrpy_request_type);
    dtrpy_tensor_t *ts = PyMem_Malloc(sizeof *ts * (size_t)(n > 0 ? n : 1));
    if (r == NULL || ts == NULL) {
        PyMem_Free(ts);
        Py_XDECREF(r);
        PyErr_NoMemory();
        return NULL;
    }
    memset((char *)r + sizeof(PyObject), 0, sizeof *r - sizeof(PyObject));
    memcpy(ts, t, sizeof *ts * (size_t)n);
    memset(t, 0, sizeof *t * (size_t)n);
    r->tensors = ts;
    r->n = n;
    r->mesh = Py_NewRef(mesh_obj);
    r->context = (dtrpy_context_t *)Py_NewRef((PyObject *)c->ctx);
    r->result = Py_NewRef(result);
    r->settle = c->settle;
    return r;
}


/* The meshes, the context (made at the first call: collective) and this rank's parts. -1
 * with an error; where c->ctx is set by then, the error is this rank's own argument, and the
 * caller refuses the call with it (dtrpy_setup_failed). */
int dtrpy_call_setup(PyObject *mesh_obj, PyObject *to_obj, dtrpy_call_t *c) {
    memset(c, 0, sizeof *c);
    if (dtrpy_mesh_of(mesh_obj, "mesh", &c->mesh) < 0 ||
        (to_obj != NULL && to_obj != Py_None && dtrpy_mesh_of(to_obj, "to_mesh", &c->to) < 0))
        return -1;
    bool other_backend = c->to != NULL && strcmp(c->mesh->backend, c->to->backend) != 0;
    if (other_backend || (c->to != NULL && strcmp(c->mesh->device, c->to->device) != 0)) {
        /* this rank's own error, which the others learn through the mesh's context where it
         * can be had (the caller refuses the call on it); else it is raised alone */
        c->ctx = dtrpy_mesh_context(c->mesh);
        if (c->ctx == NULL) PyErr_Clear();
        if (other_backend)
            return dtrpy_arg_error("to_mesh: on backend '%s', mesh on '%s' (the meshes of one "
                                   "call are on one backend)", c->to->backend, c->mesh->backend),
                   -1;
        return dtrpy_arg_error("to_mesh: on device '%s', mesh on '%s' (the meshes of one call "
                               "are on one device)", c->to->device, c->mesh->device), -1;
    }
    c->ctx = dtrpy_mesh_context(c->mesh);
    if (c->ctx == NULL) return -1;
    /* (from here on an error is this rank's argument: the caller refuses the call with it) */
    int top = -1; /* (named here: dtrpy_mesh_context's own message says "mesh") */
    for (int64_t i = 0; c->to != NULL && i < dtr_mesh_nranks(c->to->mesh); i++) {
        int64_t coord[DTR_MAX_MESH_DIMS], rest = i;
        for (int d = dtr_mesh_ndims(c->to->mesh) - 1; d >= 0; d--) {
            coord[d] = rest % dtr_mesh_size(c->to->mesh, d);
            rest /= dtr_mesh_size(c->to->mesh, d);
        }
        int r = -1;
        dtr_mesh_rank_at(c->to->mesh, coord, &r);
        if (r > top) top = r;
    }
    if (c->to != NULL && top >= c->ctx->size && c->to->comm == c->mesh->comm)
        return dtrpy_arg_error("to_mesh: its rank %d is not in the %s of %d ranks", top,
                               c->ctx->mcomm != MPI_COMM_NULL ? "communicator" : "job",
                               c->ctx->size), -1;
    if (c->to != NULL) {
        dtrpy_context_t *other = dtrpy_mesh_context(c->to);
        if (other == NULL) return -1;
        if (other != c->ctx)
            return dtrpy_arg_error("to_mesh: on another communicator than mesh (both meshes "
                                   "must be over one communicator)"), -1;
    }
    int64_t coord[DTR_MAX_MESH_DIMS];
    c->in_src = dtr_mesh_coord(c->mesh->mesh, c->ctx->rank, coord) == DTR_OK;
    c->in_dst = c->to == NULL ? c->in_src
                              : dtr_mesh_coord(c->to->mesh, c->ctx->rank, coord) == DTR_OK;
    return 0;
}

/* A call this rank refused before making it (its exception set): the others fail with it. */
void dtrpy_call_refuse(const dtrpy_call_t *c) {
    /* a block-scaled change's source ranks agree twice: on the amax over the source mesh
     * (a rank outside it returns at once), then on the move (dtr_change_run) */
    if (c->scaled) dtrpy_refuse(c->ctx, c->mesh->mesh, DTR_DIMS_MESH, NULL);
    dtrpy_refuse(c->ctx, c->mesh->mesh, DTR_DIMS_MESH, c->to != NULL ? c->to->mesh : NULL);
}

/* A call whose setup failed: refused on its context where it has one (the others then fail
 * at once, and stay in step). Returns NULL. */
PyObject *dtrpy_setup_failed(const dtrpy_call_t *c) {
    if (c->ctx != NULL) dtrpy_call_refuse(c);
    return NULL;
}

/* The input side of one tensor: its buffer where this rank holds a source block, its dtype
 * (from the array, else from dtype=), and the specs of both sides. */
int dtrpy_tensor_specs(const dtrpy_call_t *c, PyObject *local, PyObject *src,
                       PyObject *dst, PyObject *shape_obj, PyObject *dtype_obj,
                       PyObject *to_dtype_obj, const char *what, const char *dt_what,
                       const char *to_what, dtrpy_tensor_t *t, dtr_spec_t *s,
                       dtr_spec_t *d) {
    if (c->in_src) {
        if (local == NULL || local == Py_None)
            return dtrpy_arg_error("%s: None on a rank of the source mesh", what), -1;
        if (dtrpy_buffer_on(local, what, false, c->mesh->device, &t->in, &t->dtype, &t->kind) < 0)
            return -1;
        t->has_in = true;
        t->ndim = t->in.ndim;
        if (t->ndim > DTR_MAX_TENSOR_DIMS)
            return dtrpy_arg_error("%s: %d dims, at most %d", what, t->ndim, DTR_MAX_TENSOR_DIMS), -1;
        for (int i = 0; i < t->ndim; i++) t->local[i] = t->in.shape[i];
        dtr_dtype_t given;
        if (dtype_obj != NULL && dtype_obj != Py_None) {
            if (dtrpy_dtype(dtype_obj, dt_what, &given) < 0) return -1;
            if (given != t->dtype)
                return dtrpy_arg_error("%s: %s, but %s holds %s", dt_what, dtr_dtype_name(given),
                                       what, dtr_dtype_name(t->dtype)), -1;
        }
    } else if (dtype_obj == NULL || dtype_obj == Py_None) {
        return dtrpy_arg_error("%s: needed on a rank that holds no source block", dt_what), -1;
    } else if (dtrpy_dtype(dtype_obj, dt_what, &t->dtype) < 0) {
        return -1;
    }
    if (t->kind == NULL && strcmp(c->mesh->device, "cpu") != 0 &&
        (t->kind = dtrpy_default_kind(c->mesh->device)) == NULL)
        return -1;
    dtr_dtype_t to_dtype = t->dtype;
    if (to_dtype_obj != NULL && to_dtype_obj != Py_None &&
        dtrpy_dtype(to_dtype_obj, to_what, &to_dtype) < 0)
        return -1;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim = 0;
    if (dtrpy_global_shape(shape_obj, t, c, src, shape, &ndim) < 0 ||
        dtrpy_spec(s, c->mesh, src, "src", shape, ndim, t->dtype) < 0 ||
        dtrpy_spec(d, c->to != NULL ? c->to : c->mesh, dst, "dst", shape, ndim, to_dtype) < 0)
        return -1;
    if (c->in_src &&
        dtrpy_check_block(what, t, s, c->ctx->rank, shape_obj != NULL && shape_obj != Py_None) < 0)
        dtrpy_tensor_defer(t);
    return 0;
}

/* Before a call: the device's stream is torch's where a tensor is torch's (the first), and
 * waits for each input's producer; c->settle where a result is a DeviceArray. 0, or -1 with
 * an error (the call not made: the caller refuses it). */
int dtrpy_enter(dtrpy_call_t *c, const dtrpy_tensor_t *t, int n) {
    PyObject *kind = NULL;
    c->settle = false;
    if (c->ctx->space == NULL) return 0; /* (host memory: nothing to do, the common call) */
    for (int i = 0; i < n; i++) {
        const char *k = t[i].kind != NULL ? PyUnicode_AsUTF8(t[i].kind) : NULL;
        if (kind == NULL && k != NULL && strncmp(k, "torch@", 6) == 0) kind = t[i].kind;
        c->settle = c->settle || dtrpy_device_settles(t[i].kind);
    }
    if (dtrpy_device_stream(c->ctx, kind) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (t[i].has_in && dtrpy_device_wait(c->ctx, &t[i].in) < 0) return -1;
    return 0;
}

/* After a blocking call: a DeviceArray's context synchronised (c->settle), so that what
 * reads it next on any stream sees it whole. */
dtr_status_t dtrpy_settle(const dtrpy_call_t *c, dtr_status_t st) {
    if (st == DTR_OK && c->settle) DTRPY_CALL(c->ctx, st = dtr_context_sync(c->ctx->ctx));
    return st;
}

PyObject *dtrpy_status_or(dtr_status_t st, PyObject *result) {
    if (st != DTR_OK) {
        Py_XDECREF(result);
        return dtrpy_raise(st);
    }
    return result;
}

/* A deferred error of this rank's arrays, found after the plan: the rank joins the call's
 * argument agreement as a refusal (dtr_refuse, over the group the call agrees over), so the
 * others fail at once (REMOTE) and stay in step, and the error is raised here. Returns NULL.
 * (It ran the call with a poisoned input size instead, which a u8 array one element short
 * could match: the others then returned a result made with a poison byte.) */
PyObject *dtrpy_poison(dtrpy_call_t *c, dtrpy_tensor_t *t) {
    PyErr_Restore(t->err_type, t->err_value, t->err_tb);
    t->err_type = t->err_value = t->err_tb = NULL;
    c->called = true;
    dtrpy_call_refuse(c);
    return NULL;
}

static void dtrpy_set_cross_options(PyObject *relabel, int64_t cap, dtr_cross_options_t *co) {
    memset(co, 0, sizeof *co);
    co->cost = dtrpy_plan_options()->cost;
    co->relabel = relabel != NULL && PyObject_IsTrue(relabel) == 1;
    co->staging_cap_bytes = cap;
}

/* Runs one tensor's change between meshes. */
static PyObject *dtrpy_run_cross(dtrpy_call_t *c, dtrpy_tensor_t *t, const dtr_spec_t *s,
                                 const dtr_spec_t *d, PyObject *out, bool async_op,
                                 PyObject *relabel, int64_t cap, PyObject *mesh_obj) {
    dtr_cross_options_t co;
    dtrpy_set_cross_options(relabel, cap, &co);
    dtr_cross_plan_t *plan = NULL;
    dtr_spec_t dd;
    dtr_status_t st = dtr_cross_plan_create(s, d, &co, &plan);
    if (st != DTR_OK) return dtrpy_raise(st);
    if (c->in_dst && t->err_type == NULL) {
        if ((st = dtr_cross_plan_dst(plan, 0, &dd)) != DTR_OK) {
            dtr_cross_plan_destroy(plan);
            return dtrpy_raise(st);
        }
        if (dtrpy_output(c, out, "out", t, &dd, c->ctx->rank) < 0) dtrpy_tensor_defer(t);
    }
    if (t->err_type == NULL && dtrpy_enter(c, t, 1) < 0) dtrpy_tensor_defer(t);
    if (t->err_type != NULL) {
        dtr_cross_plan_destroy(plan);
        return dtrpy_poison(c, t);
    }
    const void *in = t->has_in ? t->in.buf : NULL;
    size_t in_bytes = t->has_in ? (size_t)t->in.len : 0;
    void *o = t->has_out ? t->out.buf : NULL;
    size_t out_bytes = t->has_out ? (size_t)t->out.len : 0;
    c->called = true;
    if (async_op) { /* returns once the first round's exchange has started */
        dtrpy_request_t *r = dtrpy_request_new(c, t, 1,
                                               c->to != NULL ? (PyObject *)c->to : mesh_obj,
                                               t->result != NULL ? t->result : Py_None);
        if (r == NULL) {
            dtr_cross_plan_destroy(plan);
            return NULL;
        }
        r->cross = plan;
        DTRPY_CALL(c->ctx, st = dtr_redistribute_cross_start(c->ctx->ctx, plan, in, in_bytes, o,
                                                             out_bytes, &r->req));
        dtrpy_request_started(r, st);
        return dtrpy_status_or(st, (PyObject *)r);
    }
    DTRPY_CALL(c->ctx, st = dtr_redistribute_cross(c->ctx->ctx, plan, in, in_bytes, o, out_bytes));
    st = dtrpy_settle(c, st);
    dtr_cross_plan_destroy(plan);
    return dtrpy_status_or(st, Py_NewRef(t->result != NULL ? t->result : Py_None));
}

/* Starts one single-mesh change as a Request (it takes the tensor's buffers and the plan). */
static PyObject *dtrpy_start(dtrpy_call_t *c, dtrpy_tensor_t *t, dtr_plan_t *plan,
                             PyObject *mesh_obj) {
    dtrpy_request_t *r = dtrpy_request_new(c, t, 1, mesh_obj, t->result);
    if (r == NULL) {
        PyMem_Free(plan);
        return NULL;
    }
    r->plan = plan;
    dtrpy_tensor_t *ts = r->tensors;
    dtr_status_t st;
    c->called = true;
    DTRPY_CALL(c->ctx, st = dtr_redistribute_start(c->ctx->ctx, plan, ts->in.buf,
                                                   (size_t)ts->in.len, ts->out.buf,
                                                   (size_t)ts->out.len, &r->req));
    dtrpy_request_started(r, st);
    return dtrpy_status_or(st, (PyObject *)r);
}

/* Runs one tensor's change; returns its result (None where this rank gets no block). */
static PyObject *dtrpy_run_one(dtrpy_call_t *c, dtrpy_tensor_t *t, const dtr_spec_t *s,
                               const dtr_spec_t *d, PyObject *out, bool async_op,
                               PyObject *relabel, PyObject *cap, PyObject *mesh_obj) {
    int64_t cap_bytes = 0;
    if (cap != NULL && cap != Py_None && dtrpy_int(cap, "staging_cap", 0, INT64_MAX, &cap_bytes) < 0)
        return NULL;
    if (dtrpy_flag_ok(relabel, "relabel") < 0) return NULL;
    /* Ragged shards that the change moves (the change object says: planner/ragged.c) move
     * box by box, as between meshes, on one mesh too; so do those given with relabel= or
     * staging_cap=. */
    bool ragged = dtr_spec_ragged(s) || dtr_spec_ragged(d);
    bool between = (relabel != NULL && PyObject_IsTrue(relabel) == 1) || cap_bytes != 0;
    if (ragged && !between && c->to == NULL) {
        dtr_change_t *ch = NULL;
        dtr_status_t cs = dtr_change_create(1, s, d, NULL, &ch);
        if (cs != DTR_OK) return dtrpy_raise(cs);
        between = dtr_change_form(ch) != DTR_CHANGE_ONE;
        dtr_change_destroy(ch);
    }
    if (c->to != NULL || (ragged && between))
        return dtrpy_run_cross(c, t, s, d, out, async_op, relabel, cap_bytes, mesh_obj);
    if (relabel != NULL && PyObject_IsTrue(relabel) == 1)
        return dtrpy_arg_error("relabel: only for a change between meshes (to_mesh=)");
    if (cap_bytes != 0)
        return dtrpy_arg_error("staging_cap: only for a change between meshes (to_mesh=)");
    dtr_plan_t plan; /* (on the stack: a blocking call's plan lives as long as the call) */
    dtr_status_t st = dtr_plan_cache_get(dtrpy_plan_cache(), s, d, dtrpy_plan_options(), &plan, NULL);
    if (st != DTR_OK) return dtrpy_raise(st);
    if (t->err_type == NULL && dtrpy_output(c, out, "out", t, d, c->ctx->rank) < 0) dtrpy_tensor_defer(t);
    if (t->err_type == NULL && dtrpy_enter(c, t, 1) < 0) dtrpy_tensor_defer(t);
    if (t->err_type != NULL) return dtrpy_poison(c, t);
    if (async_op) { /* the request keeps its own copy until it completes */
        dtr_plan_t *kept = PyMem_Malloc(sizeof *kept);
        if (kept == NULL) return PyErr_NoMemory();
        memcpy(kept, &plan, sizeof plan);
        return dtrpy_start(c, t, kept, mesh_obj);
    }
    const void *in = t->in.buf;
    size_t in_bytes = (size_t)t->in.len;
    void *o = t->out.buf;
    size_t out_bytes = (size_t)t->out.len;
    c->called = true;
    DTRPY_CALL(c->ctx, st = dtr_redistribute(c->ctx->ctx, &plan, in, in_bytes, o, out_bytes));
    return dtrpy_status_or(dtrpy_settle(c, st), Py_NewRef(t->result));
}

PyObject *dtrpy_redistribute_one(const dtrpy_one_args_t *a) {
    dtrpy_call_t c;
    if (dtrpy_call_setup(a->mesh, a->to, &c) < 0) return dtrpy_setup_failed(&c);
    if (!c.in_src && !c.in_dst)
        return a->async_op ? dtrpy_request_done(Py_None) : Py_NewRef(Py_None);
    dtrpy_tensor_t t;
    memset(&t, 0, sizeof t);
    dtr_spec_t s, d;
    PyObject *r = NULL;
    if (dtrpy_tensor_specs(&c, a->local, a->src, a->dst, a->shape, a->dtype, a->to_dtype, "local",
                           "dtype", "to_dtype", &t, &s, &d) == 0)
        r = dtrpy_run_one(&c, &t, &s, &d, a->out, a->async_op, a->relabel, a->cap, a->mesh);
    dtrpy_tensor_release(&t);
    if (r == NULL && !c.called) dtrpy_call_refuse(&c);
    return r;
}

int dtrpy_move_module_init(PyObject *module) {
    if (PyType_Ready(&dtrpy_request_type) < 0) return -1;
    return PyModule_AddObjectRef(module, "Request", (PyObject *)&dtrpy_request_type);
}
