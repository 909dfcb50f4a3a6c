/*
 * What the runtime offers the layers above it (grad/, autograd's tape) beyond its public
 * API: the group collectives with the argument agreement apart, started operations for the
 * parameter groups, and local work (casts, divides, copies) on the context's memory.
 */
#ifndef DTR_RUNTIME_GROUP_H
#define DTR_RUNTIME_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

/*
 * Group collectives for a layer above the runtime that checks its arguments once over a
 * wider group (grad/grad.c): dtr__group_agree runs the agreement of dtr_all_reduce over
 * the group of `dims` on `hash` (what the members must share) and this rank's verdict
 * (`local`, with `msg` for its error); dtr__group_reduce is dtr_all_reduce (scatter false) or
 * dtr_reduce_scatter, with the agreement left out when `agree` is false. `scale` other than
 * 1 makes it the backend's pre-multiplied SUM (premul_sum: every addend times `scale` in
 * dtype first), for op SUM on a group where dtr__group_premul holds; the agreement then
 * covers the scale too.
 */
dtr_status_t dtr__group_agree(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                              const char *func, uint64_t hash, dtr_status_t local,
                              const char *msg);
/* This rank's group for `dims` (NULL: a group of one); errors name func. */
dtr_status_t dtr__group_of_dims(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                const char *func, void **group);
dtr_status_t dtr__group_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                               const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                               dtr_reduce_op_t op, bool scatter, bool agree, double scale);
/* Whether the group of `dims` has two or more members and the context's backend a
 * pre-multiplied SUM (NCCL's): the gradient reduction then multiplies by 1 / its pre-divide
 * factor inside the collective instead of dividing first. */
bool dtr__group_premul(const dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims);

/* The communicator of an ordered rank list, created (collectively) the first time (comms.c). */
dtr_status_t dtr__group(dtr_context_t *ctx, const int *ranks, int n, int tag, void **out);

/* The context's backend table and memory table with their states (*mem NULL: host memory),
 * for a test of a backend's own operations (tests/grad/premul_mpi_test.c). */
void dtr__context_tables(const dtr_context_t *ctx, const dtr_backend_ops_t **ops,
                         const dtr_memory_ops_t **mem, void **mem_state);

/*
 * Started group operations, for the parameter groups (grad/param_group.c), which keep
 * a reduce-scatter on one group in flight while an all-reduce runs on another. A slot of
 * the context holds each (its backend handle lives in the context, so a timed-out operation
 * never points into freed memory). dtr__group_start starts one without an agreement (the
 * caller agreed over a wider group) and never in place (send and recv apart); `count` is
 * elements for the reductions and bytes per member for the all-gather; `op` goes to the
 * backend as is (AVG only where dtr__group_has_avg); `scale` as for dtr__group_reduce. A
 * group of one copies and is done.
 * dtr__group_complete tests (block false) or waits for the slot's operation under the
 * context's deadline; *done true frees the slot. A context staging a host backend for a
 * memory space holds one operation (staged.c): there a start first completes the other
 * slot's operation.
 */
typedef enum {
    DTR__GROUP_ALL_REDUCE = 0,
    DTR__GROUP_REDUCE_SCATTER,
    DTR__GROUP_ALL_GATHER,
} dtr__group_kind_t;

#define DTR__GROUP_SLOTS 2

typedef struct {
    void *group;     /* the backend's group; NULL: nothing in flight */
    double started;  /* for the deadline */
    dtr_backend_req_t req;
} dtr__group_op_t;

dtr_status_t dtr__group_start(dtr_context_t *ctx, int slot, const dtr_mesh_t *mesh,
                              unsigned dims, dtr__group_kind_t kind, const void *send,
                              void *recv, int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                              double scale);
dtr_status_t dtr__group_complete(dtr_context_t *ctx, int slot, bool block, bool *done);
/* The same over span lists (backend.h's spans_ok / spans_start), where the backend takes
 * them for this group: a reduction that reads each member's pieces where they lie and writes
 * its results where they go, with no pack or unpack pass. dtr__group_spans_ok is false for a group of one, a staging context, or a
 * backend without span lists; its answer is the same on every member (backend.h). */
/* Whether the backend's span lists cast on reading (DTR_BACKEND_CAP_SPANS_CAST), and
 * whether they divide on reading and writing and cast on writing (_SPANS_SCALE). */
bool dtr__group_spans_cast(const dtr_context_t *ctx);
bool dtr__group_spans_scale(const dtr_context_t *ctx);
bool dtr__group_spans_ok(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                         dtr_spans_kind_t kind, dtr_dtype_t dtype, dtr_reduce_op_t op,
                         int64_t bytes);
dtr_status_t dtr__group_start_spans(dtr_context_t *ctx, int slot, const dtr_mesh_t *mesh,
                                    unsigned dims, const dtr_spans_op_t *op);
/* Whether the backend reduces AVG itself (otherwise callers SUM and divide once). */
bool dtr__group_has_avg(const dtr_context_t *ctx);
/* A host buffer of at least `bytes` owned by the context, for packing one operation's send;
 * valid until the next call with a larger size or the context's end. */
dtr_status_t dtr__group_scratch(dtr_context_t *ctx, int64_t bytes, void **p);

/*
 * Local work on the context's memory for the parameter groups: host memory directly, a
 * memory space (dtr_context_set_memory) through its table. dtr__group_divide divides by d
 * (on a space d must be a whole number: its divide takes an integer; UNSUPPORTED
 * otherwise); dtr__group_add is dst += src (UNSUPPORTED on a space without `add`).
 * Errors name func.
 */
bool dtr__group_on_space(const dtr_context_t *ctx);
bool dtr__group_can_add(const dtr_context_t *ctx);
dtr_status_t dtr__group_alloc(dtr_context_t *ctx, int64_t bytes, void **p, const char *func);
void dtr__group_free(dtr_context_t *ctx, void *p);
dtr_status_t dtr__group_cast(dtr_context_t *ctx, dtr_dtype_t src_dtype, const void *src,
                             dtr_dtype_t dst_dtype, void *dst, int64_t count, const char *func);
dtr_status_t dtr__group_zero(dtr_context_t *ctx, void *p, int64_t bytes);
dtr_status_t dtr__group_copy(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes);
dtr_status_t dtr__group_divide(dtr_context_t *ctx, dtr_dtype_t dtype, void *buf,
                               int64_t count, double d, const char *func);
dtr_status_t dtr__group_add(dtr_context_t *ctx, dtr_dtype_t dtype, const void *src, void *dst,
                            int64_t count, const char *func);
/*
 * A cast and a divide by d in one pass over memory: with divide_first, each element of src
 * is divided in src_dtype (src is the caller's own buffer and is divided in place) and then
 * cast into dst; otherwise it is cast and then divided in dst_dtype. The results are those
 * of the two passes apart; on the host they run a cache-sized block at a time, so the data
 * crosses memory once. d == 1: the cast alone.
 */
dtr_status_t dtr__group_cast_divide(dtr_context_t *ctx, dtr_dtype_t src_dtype, void *src,
                                    dtr_dtype_t dst_dtype, void *dst, int64_t count, double d,
                                    bool divide_first, const char *func);

#endif
