/*
 * What dtr.redistribute (_move.c) and dtr.redistribute_many (_many.c) share: a call's
 * tensors and meshes, the Request of async_op, and the steps every call goes through (its
 * arguments checked and refused on every rank alike, its outputs made, the collective
 * entered and settled).
 */
#ifndef DTRPY_MOVE_H
#define DTRPY_MOVE_H

#include "_core.h"

/* One tensor of a call: its buffers and what the caller gets back. */
typedef struct {
    Py_buffer in, out;
    bool has_in, has_out;
    PyObject *kind;   /* NULL for numpy; else what the helpers wrap results as (torch) */
    PyObject *result; /* new reference: the output object, NULL where this rank has none */
    dtr_dtype_t dtype;
    int64_t local[DTR_MAX_TENSOR_DIMS];
    int ndim;
    /* An error of this rank's own arrays (a block of the wrong shape, a bad `out`), kept
     * until the call has made the other ranks fail with it rather than wait for this one. */
    PyObject *err_type, *err_value, *err_tb;
} dtrpy_tensor_t;

/* What a call needs beside the tensors. */
typedef struct {
    dtrpy_mesh_t *mesh, *to; /* to: NULL within one mesh */
    dtrpy_context_t *ctx;
    bool in_src, in_dst;     /* this rank's parts */
    bool called;             /* the collective call was made (errors after it are shared) */
    bool settle;             /* results need the context synchronised (dtrpy_enter) */
    bool scaled;             /* block_scale asked: refused as its two agreements, the amax's
                                on the source mesh, then the move's (dtrpy_call_refuse) */
} dtrpy_call_t;

/* ---- the Request of async_op ---- */

typedef struct {
    PyObject_HEAD
    dtr_request_t *req;
    dtr_plan_t *plan;
    dtr_change_t *change;    /* a batch of redistribute_many (owned), and its arrays */
    const void **in;
    void **out;
    size_t *in_bytes, *out_bytes;
    dtr_cross_plan_t *cross; /* a change between meshes (owned) */
    dtrpy_tensor_t *tensors;
    int n;
    PyObject *mesh;
    dtrpy_context_t *context; /* (its lock) */
    PyObject *result;  /* what wait() returns */
    dtr_status_t status;
    bool done;
    bool settle; /* the context is synchronised once it completes (dtrpy_enter) */
} dtrpy_request_t;

/* ---- the steps of a call (_move.c) ---- */

void dtrpy_tensor_defer(dtrpy_tensor_t *t);
void dtrpy_tensor_release(dtrpy_tensor_t *t);
int dtrpy_output(const dtrpy_call_t *c, PyObject *out, const char *what,
                 dtrpy_tensor_t *t, const dtr_spec_t *spec, int rank);
void dtrpy_request_started(dtrpy_request_t *r, dtr_status_t st);
PyObject *dtrpy_request_done(PyObject *result);
dtrpy_request_t *dtrpy_request_new(dtrpy_call_t *c, dtrpy_tensor_t *t, int n,
                                   PyObject *mesh_obj, PyObject *result);
int dtrpy_call_setup(PyObject *mesh_obj, PyObject *to_obj, dtrpy_call_t *c);
void dtrpy_call_refuse(const dtrpy_call_t *c);
PyObject *dtrpy_setup_failed(const dtrpy_call_t *c);
int dtrpy_tensor_specs(const dtrpy_call_t *c, PyObject *local, PyObject *src,
                       PyObject *dst, PyObject *shape_obj, PyObject *dtype_obj,
                       PyObject *to_dtype_obj, const char *what, const char *dt_what,
                       const char *to_what, dtrpy_tensor_t *t, dtr_spec_t *s,
                       dtr_spec_t *d);
int dtrpy_enter(dtrpy_call_t *c, const dtrpy_tensor_t *t, int n);
dtr_status_t dtrpy_settle(const dtrpy_call_t *c, dtr_status_t st);
PyObject *dtrpy_status_or(dtr_status_t st, PyObject *result);
PyObject *dtrpy_poison(dtrpy_call_t *c, dtrpy_tensor_t *t);

/* dtr.redistribute's arguments (NULL where not given), as _many.c's entry parses them. */
typedef struct {
    PyObject *local, *mesh, *src, *dst, *shape, *out, *to, *dtype, *to_dtype, *relabel, *cap;
    PyObject *block; /* block_scale: the call goes through the change object (_many.c) */
    bool async_op;
} dtrpy_one_args_t;

/* dtr.redistribute of one tensor without block_scale: the plan cache's plan (one mesh) or a
 * change between meshes, run or started. */
PyObject *dtrpy_redistribute_one(const dtrpy_one_args_t *a);

#endif
