/*
 * The backend interface: what the runtime asks of a communication engine (MPI, NCCL, Gloo,
 * or a framework's own), as a const table of operations plus the backend's state. A backend
 * includes this header, the contexts' (runtime.h), the memory spaces' (memory.h) and the
 * streaming copies (stream.h), nothing else of the library above it.
 */
#ifndef DTR_RUNTIME_BACKEND_H
#define DTR_RUNTIME_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room a backend has for one in-flight operation's handle, owned by the executor. */
typedef struct {
    DTR_ALIGNAS(16) unsigned char bytes[160];
} dtr_backend_req_t;

/* The backend reduces P(avg) itself (otherwise the executor does SUM, then divides). */
#define DTR_BACKEND_CAP_AVG 1u
/* The backend's operations take buffers of the context's memory space (device memory, as
 * NCCL does), never host memory: such a context needs dtr_context_set_memory. Without it,
 * a context on a non-host space stages each operation through host memory. */
#define DTR_BACKEND_CAP_DEVICE 2u

/* The backend's span lists take a cast on reading (dtr_spans_op_t.cast): the send spans
 * hold send_dtype elements, converted to the operation's dtype as they are read. */
#define DTR_BACKEND_CAP_SPANS_CAST 4u

/* The backend's reductions over span lists divide as they read and write and cast as they
 * write (dtr_spans_op_t.pre, .post, .recv_cast): a gradient reduction's divides and casts
 * ride on the collective's own passes over memory. */
#define DTR_BACKEND_CAP_SPANS_SCALE 8u

/* One group holds several started operations at once (they complete in start order, as
 * NCCL's on a stream and Gloo's by their tags do). Without it the executor completes a
 * group's operation in flight before it starts another on the same group: the MPI backend's
 * shared-memory segment holds one operation a group. */
#define DTR_BACKEND_CAP_CONCURRENT 16u

/* Bytes of a buffer that need not be contiguous: `rows` rows of `run` bytes, `stride` bytes
 * apart, from `base`. A list of spans is read or written in order as one stream of bytes. */
typedef struct {
    char *base;
    int64_t rows, run, stride;
} dtr_span_t;

/* The collectives a backend may take over span lists (spans_start). */
typedef enum {
    DTR_SPANS_ALL_GATHER = 0,
    DTR_SPANS_REDUCE_SCATTER,
    DTR_SPANS_ALL_REDUCE
} dtr_spans_kind_t;

/*
 * A gather or reduction over span lists, for the executor's batches: every member's pieces
 * are read from, and the results written to, the members' own tensors, with no pack or
 * unpack pass. The streams, member k's piece counts[k] (bytes for the gather, elements for
 * the reductions; every member passes the same counts):
 *   ALL_GATHER      send: this member's piece; recv: every member's piece, in member order
 *   REDUCE_SCATTER  send: every member's piece, in member order; recv: this member's, reduced
 *   ALL_REDUCE      send and recv: counts[0] elements (counts has one entry)
 * No span of recv may overlap a span of send, except that on a backend with
 * DTR_BACKEND_CAP_SPANS_SCALE an ALL_REDUCE's recv list may be its send list (in place, the
 * same spans; with casts each element keeps its place): each piece is read before its
 * result is written.
 */
typedef struct {
    dtr_spans_kind_t kind;
    const dtr_span_t *send, *recv;
    int nsend, nrecv;
    const int64_t *counts;
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    /* Reductions on a backend with DTR_BACKEND_CAP_SPANS_CAST: the send spans hold
     * send_dtype elements (a float dtype), each converted to dtype (rounded to nearest even)
     * as it is read, so the counts and the streams' lengths are in dtype; false: the send
     * spans are the stream's bytes as they are. */
    bool cast;
    dtr_dtype_t send_dtype;
    /* Reductions on a backend with DTR_BACKEND_CAP_SPANS_SCALE (0 or 1: none): every
     * element read is divided by pre in dtype (after the cast: the results are those of a
     * cast pass, then a divide pass), and every result divided by post in dtype before it is
     * written; with recv_cast the recv spans hold recv_dtype elements (a float dtype), each
     * result converted to it (rounded to nearest even) as it is written, the counts and the
     * streams' lengths still in dtype. */
    double pre, post;
    bool recv_cast;
    dtr_dtype_t recv_dtype;
} dtr_spans_op_t;

/*
 * A backend. Groups are ordered lists of the backend's ranks; group_create is collective
 * over exactly the ranks it lists (all call it with the same list and tag) and returns a
 * handle the other operations take. Counts and displacements are in bytes for the moving
 * operations and in elements for the reducing ones; arrays have one entry per group member,
 * in group order. Operations start and return; test/wait complete them (test sets *done and
 * may be called again until it does). Optional slots may be NULL: the executor then pads
 * uneven pieces to equal ones (or uses all_to_allv). The executor picks an operation from
 * facts every member shares (chunk sizes, never one rank's counts), so all members of a
 * group always make the same call. Errors are returned with dtr's thread-local detail set.
 */
typedef struct dtr_backend_ops {
    const char *name;
    unsigned caps; /* DTR_BACKEND_CAP_* */
    int (*rank)(void *state); /* this process's rank in the backend's world */
    dtr_status_t (*group_create)(void *state, const int *ranks, int n, int tag, void **group);
    void (*group_destroy)(void *state, void *group);
    /* every member sends `bytes`; recv holds n * bytes in member order */
    dtr_status_t (*all_gather)(void *group, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req);
    /* optional: member k sends counts[k] bytes, placed at recv + displs[k] */
    dtr_status_t (*all_gatherv)(void *group, const void *send, int64_t bytes, void *recv,
                                const int64_t *counts, const int64_t *displs,
                                dtr_backend_req_t *req);
    /* send holds n pieces of `count` elements; member k gets the reduction of piece k */
    dtr_status_t (*reduce_scatter)(void *group, const void *send, void *recv, int64_t count,
                                   dtr_dtype_t dtype, dtr_reduce_op_t op,
                                   dtr_backend_req_t *req);
    /* optional: pieces of counts[k] elements, back to back */
    dtr_status_t (*reduce_scatterv)(void *group, const void *send, void *recv,
                                    const int64_t *counts, dtr_dtype_t dtype,
                                    dtr_reduce_op_t op, dtr_backend_req_t *req);
    dtr_status_t (*all_reduce)(void *group, const void *send, void *recv, int64_t count,
                               dtr_dtype_t dtype, dtr_reduce_op_t op, dtr_backend_req_t *req);
    /* optional: every member sends `bytes` to every member, pieces in member order both ways */
    dtr_status_t (*all_to_all)(void *group, const void *send, int64_t bytes, void *recv,
                               dtr_backend_req_t *req);
    /*
     * optional, strided forms for pieces that are not contiguous (a gather or scatter of a
     * non-leading tensor dim), so the backend moves them without a pack or unpack pass:
     * a side is `rows` rows of `block` bytes, `row` bytes apart; member k's piece starts at
     * byte k * block of the buffer. all_gather_strided sends a contiguous rows x block.
     * all_to_all_strided moves the other members' pieces only: the caller has copied its
     * own before the call (with streaming stores where that pays).
     * DTR_ERR_UNSUPPORTED (sizes the backend cannot describe) makes the executor stage.
     */
    dtr_status_t (*all_gather_strided)(void *group, const void *send, int64_t rows,
                                       int64_t block, int64_t row, void *recv,
                                       dtr_backend_req_t *req);
    dtr_status_t (*all_to_all_strided)(void *group, const void *send, int64_t send_rows,
                                       int64_t send_block, int64_t send_row, void *recv,
                                       int64_t recv_rows, int64_t recv_block, int64_t recv_row,
                                       dtr_backend_req_t *req);
    /* optional: true where this group's all_gather_strided places pieces as fast as a
     * contiguous gather (no datatype engine): the executor then gathers a large non-leading
     * dim in place instead of in slices (dtr_context_set_slice_bytes) */
    bool (*strided_in_place)(void *group);
    dtr_status_t (*all_to_allv)(void *group, const void *send, const int64_t *send_counts,
                                const int64_t *send_displs, void *recv,
                                const int64_t *recv_counts, const int64_t *recv_displs,
                                dtr_backend_req_t *req);
    dtr_status_t (*test)(void *group, dtr_backend_req_t *req, bool *done);
    dtr_status_t (*wait)(void *group, dtr_backend_req_t *req);
    void (*destroy)(void *state); /* frees the state (with the context) */
    /*
     * optional, both or neither: the argument agreement beside the first operation.
     * agree: an all-reduce under MAX of three int64 in host memory, completed with test and
     * wait like the others, which may be in flight while one other operation of the group
     * has been started and not yet tested. cancel: forgets such an operation, started and
     * never tested or waited on, leaving the group as if it had never been started (every
     * member cancels it, or every member completes it). A backend that offers them promises
     * that starting an operation reads nothing of the other members' (it may publish this
     * member's data); the first test or wait does. With them the executor starts a call's
     * first operation before its agreement has completed (executor.h, docs/reliability.md).
     */
    dtr_status_t (*agree)(void *group, const int64_t *send, int64_t *recv,
                          dtr_backend_req_t *req);
    void (*cancel)(void *group, dtr_backend_req_t *req);
    /*
     * optional, both or neither: collectives over span lists (dtr_spans_op_t). spans_ok says
     * whether this group takes an operation of that kind, dtype, op and total bytes (the sum
     * of every member's piece): facts every member shares, so all decide alike; where it says
     * no, the executor packs into one buffer and calls the plain form.
     */
    bool (*spans_ok)(void *group, dtr_spans_kind_t kind, dtr_dtype_t dtype, dtr_reduce_op_t op,
                     int64_t bytes);
    dtr_status_t (*spans_start)(void *group, const dtr_spans_op_t *op, dtr_backend_req_t *req);
    /*
     * optional: a SUM whose every addend is first multiplied by `scale` taken in `dtype`
     * (rounded to it as a C cast from double through float does), as reduce_scatter (scatter
     * true: send holds n pieces of `count` elements) or all_reduce; NCCL's
     * ncclRedOpCreatePreMulSum. Float dtypes (f32, f64, f16, bf16). The gradient reduction
     * (autograd/) hands it its pre-divide factors as 1 / factor instead of a divide pass
     * before a SUM, as PyTorch's FSDP2 does on NCCL; without it, it divides.
     */
    dtr_status_t (*premul_sum)(void *group, const void *send, void *recv, int64_t count,
                               dtr_dtype_t dtype, double scale, bool scatter,
                               dtr_backend_req_t *req);
    /*
     * optional: memory the backend's operations move fastest (dtr_context_alloc), collective
     * over the backend's world (every rank calls it, in the same order; bytes >= 1 may differ
     * between ranks). The MPI backend's is mapped by every rank of the node, so that its
     * reductions read the members' buffers where they are. mem_free is local and returns
     * false for a pointer mem_alloc did not return (or already freed).
     */
    dtr_status_t (*mem_alloc)(void *state, int64_t bytes, void **p);
    bool (*mem_free)(void *state, void *p);
} dtr_backend_ops_t;

#ifdef __cplusplus
}
#endif

#endif
