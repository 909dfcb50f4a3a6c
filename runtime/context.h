/*
 * The runtime's context, for the modules built on it (redistribute/executor, the group
 * collectives' users through group.h): its layout and the calls they share. Not installed;
 * runtime.h is the public face.
 *
 * The files, by what they own:
 *   context.c      contexts: creation, settings, memory space, destruction, aborted ones,
 *                  dtr_context_alloc
 *   comms.c        the communicator cache: per-mesh entries and the groups they hold
 *   agree.c        the argument agreement: a hash and a verdict in one small all-reduce
 *   memory.c       scratch memory and local work on the context's memory space
 *   deadline.c     completing a backend operation under the context's deadline
 *   registry.c     backends by name
 *   refuse.c       dtr_refuse: a rank that cannot make a call joins its agreement
 *   collectives.c  dtr_all_reduce, dtr_reduce_scatter and the group queries (group.h)
 *   staged.c       a host backend run on another memory space through host staging
 *   stream.c       streaming copies (stream.h)
 */
#ifndef DTR_RUNTIME_CONTEXT_H
#define DTR_RUNTIME_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "runtime/group.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"

#define DTR__MESH_SLOTS 8
/* The tag of every group a context creates (a whole mesh, one mesh dim, a dims mask, the
 * ranks of two meshes): one tag, so that ranks that make the same group for different calls
 * (a mesh of another shape over the same ranks on one rank) meet in the call's agreement and
 * fail there, instead of each waiting in a creation the others never join. Creations never
 * overlap (a context is used from one thread at a time), so they need no tags apart. */
#define DTR__TAG_GROUP 0x4d00

/* ---- the context -------------------------------------------------------------------- */

typedef struct dtr__group {
    struct dtr__group *next;
    uint64_t hash;
    void *handle;
    int n;
    int ranks[]; /* in group order */
} dtr__group_t;

/* A mesh this context ran plans on: this rank's coordinate and groups (owned by the
 * context's group list, not by the entry). */
typedef struct {
    dtr_mesh_t *mesh; /* the context's own copy; NULL for a free slot */
    uint64_t hash;
    int64_t coord[DTR_MAX_MESH_DIMS];
    void *dim_group[DTR_MAX_MESH_DIMS]; /* NULL where the mesh dim has one rank */
    void *all;                          /* every rank of the mesh, by position */
    uint64_t used;
} dtr__mesh_entry_t;

struct dtr_context {
    const dtr_backend_ops_t *ops;
    void *state;
    int rank;
    const dtr_memory_ops_t *mem; /* NULL: host memory, read and written here */
    void *mem_state;
    dtr_backend_ops_t staged_ops; /* ops points here when the backend stages through host */
    int64_t *agree_dev;           /* 6 int64 of the memory space: an agreement's send, recv */
    int64_t agree_cap;
    dtr__mesh_entry_t meshes[DTR__MESH_SLOTS];
    uint64_t clock;
    dtr__group_t *groups;
    void *buf[2];
    int64_t buf_cap[2];
    void *stage_send, *stage_recv;
    int64_t send_cap, recv_cap;
    int64_t *arrays; /* send counts, send displs, recv counts, recv displs, sizes, offsets */
    int64_t arrays_cap;
    bool busy;
    bool agree; /* DTR_AGREE=0 turns the argument agreement off */
    int64_t slice_bytes; /* gathered bytes per slice of a non-leading gather; 0: no slices */
    double timeout_s; /* per backend operation; 0: wait forever */
    bool aborted;     /* an operation timed out and may still be pending in the backend */
    char abort_msg[384];
    struct dtr_context *next_aborted;
    /* the group collectives' one operation in flight (kept here, not on the stack, so a
     * timed-out operation never points into a dead frame) */
    int64_t gsend[3], grecv[3];
    dtr_backend_req_t gbreq;
    /* the started group operations of autograd's parameter groups (group.h): a
     * reduce-scatter and an all-reduce may be in flight at once, and their shared pack
     * buffer */
    dtr__group_op_t gops[DTR__GROUP_SLOTS];
    void *grad_scratch;
    int64_t grad_scratch_cap;
    void *cross_mid; /* a change between meshes: the source block after its reduction */
    int64_t cross_mid_cap;
    void *cross_cast; /* a change between meshes on a memory space: a box cast as packed */
    int64_t cross_cast_cap;
    struct dtr__alloc *allocs; /* dtr_context_alloc's that the backend did not make */
    /* the executor's state (its requests, a batch's state: redistribute/executor), made by
     * its first call and freed through exec_free with the context; the runtime never
     * looks inside */
    void *exec;
    void (*exec_free)(struct dtr_context *ctx);
};

/* ---- context.c ---------------------------------------------------------------------- */

/* DTR_ERR_ABORTED for a context an earlier timeout aborted. */
dtr_status_t dtr__check_alive(const dtr_context_t *ctx, const char *func);
/* A backend that only reads device memory needs the context's memory space set. */
dtr_status_t dtr__check_memory(const dtr_context_t *ctx, const char *func);
/* Before a call that moves data: the context alive, its memory space right for its backend,
 * no request in flight on it (DTR_ERR_BUSY). */
dtr_status_t dtr__check_ready(const dtr_context_t *ctx, const char *func);

/* ---- comms.c ------------------------------------------------------------------------ */

/* dtr__group: in group.h. */
/* This rank's groups on a mesh (collective over each group the first time). */
dtr_status_t dtr__mesh_entry(dtr_context_t *ctx, const dtr_mesh_t *mesh, const int64_t *coord,
                             dtr__mesh_entry_t **out);
/* Frees the mesh entries and every group (the context's destruction). */
void dtr__comms_destroy(dtr_context_t *ctx);

/* ---- agree.c ------------------------------------------------------------------------ */

/* Starts an agreement of send into recv (3 int64, host memory) over group: the backend's
 * agree where it has one, else its all-reduce under MAX; dtr__agree_done after it completed
 * puts the result in recv. */
dtr_status_t dtr__agree_start(dtr_context_t *ctx, void *group, int64_t *send, int64_t *recv,
                              dtr_backend_req_t *breq);
dtr_status_t dtr__agree_done(dtr_context_t *ctx, int64_t *recv);
/* The agreement over a group, blocking: every member's hash equal and every member's own
 * argument check good, in one small all-reduce. */
dtr_status_t dtr__agree_on(dtr_context_t *ctx, void *group, const char *func, uint64_t h,
                           dtr_status_t local, const char *msg);
/* An agreement's send: this rank's hash h, and whether its own arguments (local) were bad. */
void dtr__agree_fill(int64_t *send, uint64_t h, int rank, dtr_status_t local);
/* Its verdict from recv: this rank's own error (msg), then another rank's rejection
 * (DTR_ERR_REMOTE), then different hashes (DTR_ERR_MISMATCH with `mismatch`). */
dtr_status_t dtr__agree_verdict(const int64_t *recv, const char *func, dtr_status_t local,
                                const char *msg, const char *mismatch);

/* ---- memory.c ----------------------------------------------------------------------- */

/* Grows a scratch buffer to `need` bytes (contents not kept on a memory space). */
dtr_status_t dtr__reserve(dtr_context_t *ctx, void **p, int64_t *cap, int64_t need,
                          const char *what);
/* int64 arrays from the context: 6 of n each (send counts, send displs, recv counts, recv
 * displs, sizes, offsets). */
dtr_status_t dtr__arrays(dtr_context_t *ctx, int64_t n, int64_t **a);
dtr_status_t dtr__m_zero(dtr_context_t *ctx, void *p, int64_t bytes);
/* memcpy within the context's memory */
dtr_status_t dtr__m_copy(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes);
/* between host memory and the context's (to_host: from the space into host) */
dtr_status_t dtr__m_host(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes,
                         bool to_host);
dtr_status_t dtr__m_divide(dtr_context_t *ctx, dtr_dtype_t dtype, const void *src, void *dst,
                           int64_t count, int64_t n);
void dtr__m_free(dtr_context_t *ctx, void *p);
/* A memory space's failed operation `op`, as the error of the call (its detail kept). */
dtr_status_t dtr__m_fail(const dtr_context_t *ctx, dtr_status_t st, const char *op);

/* ---- deadline.c --------------------------------------------------------------------- */

/* Completes (block) or tests one backend operation started at t0, under the context's
 * deadline; a timeout aborts the context and returns DTR_ERR_TIMEOUT. */
dtr_status_t dtr__poll(dtr_context_t *ctx, void *group, dtr_backend_req_t *breq, double t0,
                       bool block, bool *done);
/* One blocking backend operation (the context's gbreq), under the deadline; `started` is
 * what starting it returned. */
dtr_status_t dtr__wait_op(dtr_context_t *ctx, void *group, dtr_status_t started);

/* ---- staged.c ----------------------------------------------------------------------- */

/* A backend running `inner` (host memory) on buffers of the memory space `mem`, staging
 * each operation through host memory; fills *ops (the caller keeps it as long as the
 * state) and *state. The state owns inner_state from then on (destroys it), not mem. */
dtr_status_t dtr__staged_create(const dtr_backend_ops_t *inner, void *inner_state,
                                const dtr_memory_ops_t *mem, void *mem_state,
                                dtr_backend_ops_t *ops, void **state);

/* The backend such a state stages: its table in *ops, its state returned. */
void *dtr__staged_inner(void *state, const dtr_backend_ops_t **ops);

#endif
