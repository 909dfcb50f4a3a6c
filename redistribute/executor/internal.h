/*
 * Internals of the executor: the one header its files share. It is built on the runtime
 * (runtime/context.h: the context, its communicators, agreement, memory and deadlines). Of
 * the planner it includes planner.h and geometry.h (what it reads of a plan: layouts at a
 * coordinate, a seed plan's blocks, the balanced reduction, the hashes), never the
 * planner's internal.h; never a backend's header.
 *
 * The files, by what they own:
 *   request.c      the request state machine, dtr_redistribute and friends; the
 *                  executor's state in a context (dtr__exec)
 *   copy.c         the local copies (boxes, ranges, rows) through the context's memory space
 *   batch.c        batches: dtr_redistribute_batch, its rounds in order, the member steps
 *   batch_round.c  a coalesced round: prepare the member steps, size, pack, start, unpack
 *                  (through the kind's round in the step table)
 *   round_pack.c   what the kinds' rounds share: pieces, boxes, blocks, span lists
 *   cross.c        changes between meshes: dtr_redistribute_cross
 *   change_run.c   one change, any form: dtr_change_run and dtr_change_start
 *   digest.c       proof of delivery: dtr_digest
 *   steps.c        the table of step kinds; a step's start (this rank's side of it)
 *   step_common.c  what the step kinds share: the end of a start and of a finish
 *   step_*.c       one step kind each: its start, finish and bare (baseline) form
 */
#ifndef DTR_REDISTRIBUTE_EXECUTOR_INTERNAL_H
#define DTR_REDISTRIBUTE_EXECUTOR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "redistribute/executor/executor.h"
#include "redistribute/planner/geometry.h"
#include "runtime/context.h"

/* ---- the executor's state in a context (ctx->exec) and its requests ------------------ */

typedef enum { DTR__PHASE_AGREE = 0, DTR__PHASE_STEPS, DTR__PHASE_DONE } dtr__phase_t;

/* What the step in flight still has to do when its operation completes. */
typedef struct {
    void *dst;            /* the step's output block */
    int64_t out_numel;
    int64_t n;            /* group size */
    bool divide;          /* AVG done as SUM: divide by divisor */
    int64_t divisor;      /* n, or for a plan reducing AVG in several steps, their product */
    /* unpack from stage_recv: pieces in a 3-d view [outer, len, inner bytes] */
    bool unpack3;
    int64_t outer, inner, dst_len, piece_len, npieces;
    const int64_t *psz, *pof; /* the pieces' lengths and offsets along the dim when they
                               * are not the chunk rule's (a seed_blocks gather), else NULL */
    bool unpack_exchange;
    /* a gather in slices (step_all_gather.c): the current slice covers outer rows
     * [so, so + sno) and, when sx_whole is false, rows [sx, sx + snx) of each member's
     * piece in one outer row */
    bool slice;
    bool sx_whole, even, stream;
    int64_t so, sno, sx, snx;
    int64_t mine;    /* this rank's piece length along the dim (dst_len: the whole dim) */
    const void *src; /* the step's input block */
    /* reduce_exchange: after the reduce, start the delivery (rx_deliver); after the
     * delivery, place the received parts (rx_unpack) */
    bool rx_deliver, rx_divide, rx_unpack;
} dtr__pending_t;

struct dtr_request {
    dtr_context_t *ctx;
    const dtr_plan_t *plan;
    const void *in;
    void *out;
    size_t in_bytes;
    dtr__mesh_entry_t *m;
    dtr__ctx_t pctx;
    bool bare;
    dtr__phase_t phase;
    int step;
    int last_real;   /* the last step that is not a no-op; -1 if none */
    const void *cur; /* where the block is now: in, or a step buffer */
    bool cast_pending; /* a cast plan: the input still to be cast to op_dtype */
    bool cast_out;     /* the result still to be cast from op_dtype to dst's dtype */
    int64_t out_numel; /* elements of this rank's target block */
    bool in_flight;
    void *group;
    dtr_backend_req_t breq;
    dtr__pending_t pend;
    double t0; /* when the operation in flight started (monotonic seconds) */
    int64_t agree_send[3], agree_recv[3];
    bool agreeing; /* the agreement is in flight (abreq, on the mesh's group), perhaps beside
                    * the first operation (request.c) */
    dtr_backend_req_t abreq;
    double at0;
    uint64_t hash; /* the plan's and the slice size's, what the agreement compares */
    dtr_status_t local_status; /* an argument error found before the agreement */
    /* a batch member's step (batch.c): the output of a step before the last goes here
     * instead of the context's step buffers, and AVG is always SUM then a divide */
    void *dst_next;
    bool avg_as_sum;
    /* a batch's request (batch.c) makes progress through this; NULL: a plan's */
    dtr_status_t (*progress)(dtr_request_t *r, bool block);
    void *xstate; /* a change between meshes in flight (cross.c); NULL otherwise */
    char local_msg[512]; /* last: a batch member's request clears only what comes before it */
};

/* What the executor keeps in a context (ctx->exec): the request of dtr_redistribute*
 * (req), the change between meshes' (xreq: its rounds' reductions on the source mesh run
 * as calls of their own, through req) and a batch's state. */
typedef struct {
    dtr_request_t req;
    dtr_request_t xreq;
    struct dtr__batch *batch; /* made by the first batch call */
    /* this rank's block sizes under the last plan run (request.c): reused while the plan's
     * address, hash and the rank are the same (a plan's struct is the caller's to change) */
    const dtr_plan_t *sized_plan;
    uint64_t sized_hash;
    int sized_rank;
    int64_t sized_src_bytes, sized_dst_bytes;
} dtr__exec_t;

/* The context's executor state into *out, made at the first call that needs it (and freed
 * with the context); DTR_ERR_OUT_OF_MEMORY naming func where it cannot be (request.c). */
dtr_status_t dtr__exec(dtr_context_t *ctx, const char *func, dtr__exec_t **out);

/* ---- copy.c ------------------------------------------------------------------------- */

int64_t dtr__prod(const int64_t *shape, int from, int to);
void dtr__chunks(int64_t len, int64_t n, int64_t *size, int64_t *off);
bool dtr__all_equal(const int64_t *v, int64_t n);
/* memcpy as a run copier for dtr__box_copy (dtr__stream_copy is the other). */
void dtr__copy(void *dst, const void *src, int64_t n);
/* Copies the box [lo, lo+ext) of an N-d row-major block src (shape sshape, item bytes) to
 * dst (shape dshape) at dlo, each run with `copy`; host memory. */
void dtr__box_copy(int nd, int64_t item, const void *src, const int64_t *sshape,
                   const int64_t *slo, const int64_t *ext, void *dst, const int64_t *dshape,
                   const int64_t *dlo, void (*copy)(void *, const void *, int64_t));
/* The box where block a (offset aoff, shape ash) meets block b: its corner relative to a
 * in lo, its extent in ext; returns its element count (0 when they do not meet). */
int64_t dtr__meet(int nd, const int64_t *aoff, const int64_t *ash, const int64_t *boff,
                  const int64_t *bsh, int64_t *lo, int64_t *ext);

/* Local work on the context's memory: host memory directly, a memory space by its table. */
dtr_status_t dtr__m_box(dtr_context_t *ctx, int nd, int64_t item, const void *src,
                        const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                        void *dst, const int64_t *dshape, const int64_t *dlo);
/* dtr__m_box with a cast: the box of src (dtype sdt) into dst's box as ddt. Host memory
 * converts run by run; a memory space copies the box out into the context's cross_cast
 * scratch and casts it: into dst itself where the box is all of dst (a packed message),
 * else back into the scratch, then copied into dst's box. */
dtr_status_t dtr__m_box_cast(dtr_context_t *ctx, int nd, dtr_dtype_t sdt, const void *src,
                             const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                             dtr_dtype_t ddt, void *dst, const int64_t *dshape,
                             const int64_t *dlo);
/* A box of [outer, ext, inner bytes]: ext rows from src (dim length slen, from row slo) to
 * dst (length dlen, at row dlo). */
dtr_status_t dtr__m_copy3(dtr_context_t *ctx, const void *src, int64_t slen, int64_t slo,
                          void *dst, int64_t dlen, int64_t dlo, int64_t outer, int64_t ext,
                          int64_t inner);
/* Elements [u, v) of a box (row-major) between a block and the contiguous `flat`. */
dtr_status_t dtr__m_range(dtr_context_t *ctx, int nd, int64_t item, char *block,
                          const int64_t *bshape, const int64_t *blo, const int64_t *ext,
                          int64_t u, int64_t v, char *flat, bool to_block);

/* ---- steps.c and step_*.c: the step kinds ------------------------------------------- */

/* What a step kind's start gets: the step and this rank's side of it. */
typedef struct {
    const dtr_step_t *s;
    int k;        /* the step's index in the plan */
    int nd;       /* tensor dims */
    int64_t item; /* bytes per element */
    int64_t ish[DTR_MAX_TENSOR_DIMS], ioff[DTR_MAX_TENSOR_DIMS]; /* input block, offset */
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS]; /* output block, offset */
    int64_t in_numel, out_numel;
    const void *src; /* the input block */
    void *dst;       /* the output block: `out`, or a step buffer */
    int i;           /* mesh dim; -1 for the whole mesh */
    int64_t n, ci;   /* the group's size and this rank's place in it */
    void *group;     /* NULL where n is 1 */
    dtr_reduce_op_t op; /* what the backend reduces with (AVG as SUM where it lacks AVG) */
    dtr_dtype_t dtype;
    bool bare;       /* the baseline: the same operations on scratch, nothing else */
} dtr__step_args_t;

struct dtr__batch;

/* A step kind's batch round (batch_round.c drives it): every member step of the round in
 * one collective. arr holds dtr__arrays' six arrays of the group's size, what size leaves
 * there the later calls read. */
typedef struct {
    /* Sizes the round: its counts and displacements into arr, b->padded and b->total where
     * the kind uses them, and the bytes of the packed send and receive buffers. */
    dtr_status_t (*size)(dtr_context_t *ctx, struct dtr__batch *b, int64_t **arr,
                         int64_t *send, int64_t *recv);
    /* Starts the round over span lists where the backend takes them for it (sets b->spans,
     * b->breq); leaves b->spans false otherwise. NULL: the kind has no span-list form. */
    dtr_status_t (*spans)(dtr_context_t *ctx, struct dtr__batch *b, int64_t **arr);
    /* The members' pieces into stage_send (not called for a bare round). */
    dtr_status_t (*pack)(dtr_context_t *ctx, struct dtr__batch *b, int64_t **arr);
    /* Starts the collective on the packed buffers (into b->breq). */
    dtr_status_t (*start)(dtr_context_t *ctx, struct dtr__batch *b, int64_t **arr);
    /* What arrived in stage_recv, into the members' outputs. */
    dtr_status_t (*unpack)(dtr_context_t *ctx, struct dtr__batch *b, int64_t **arr);
} dtr__round_ops_t;

/* One row of the table: what a step kind does on this rank. */
typedef struct {
    /* Starts the step: a local one completes here; a collective starts its operation and
     * sets r->in_flight (through dtr__step_issued). */
    dtr_status_t (*start)(dtr_request_t *r, const dtr__step_args_t *a);
    /* After the operation completed: unpacks and divides, or starts the step's next
     * operation (r->in_flight set again). NULL for local kinds. */
    dtr_status_t (*finish)(dtr_request_t *r);
    /* The step leaves every rank's block as it is (a relabel): skipped. */
    bool keeps_block;
    /* Its coalesced batch round; NULL for the local kinds and for reduce_exchange, whose
     * rounds run member by member (each member's balanced pieces differ). */
    const dtr__round_ops_t *round;
} dtr__step_impl_t;

/* A step that leaves every rank's block as it is: a relabel, or over one rank. */
bool dtr__step_noop(const dtr_request_t *r, int k);
bool dtr__step_avg_reduces(const dtr_step_t *s);
/* This rank's side of step r->step (steps.c): its blocks, buffers (r->cur moves to its
 * output), group and op, and r->pend's divide; *skip for a no-op, which changes nothing. */
dtr_status_t dtr__step_prepare(dtr_request_t *r, dtr__step_args_t *a, bool *skip);
/* Starts step r->step: prepares it, skips a no-op, and calls the kind's start. */
dtr_status_t dtr__step_start(dtr_request_t *r);

/* Indexed by dtr_step_kind_t; every kind has a row. */
extern const dtr__step_impl_t dtr__step_impls[DTR_STEP_KIND_LAST];

/* step_common.c: a backend failure wrapped with the step it happened in (or the
 * agreement, in that phase). */
dtr_status_t dtr__step_error(const dtr_request_t *r, dtr_status_t st);
/* The end of a collective's start: st is what starting the operation returned. */
dtr_status_t dtr__step_issued(dtr_request_t *r, dtr_status_t st);
/* Drives the step in flight to its end: tests (or, with block, waits for) its operation,
 * then runs the kind's finish, which may start the step's next operation. *done once the
 * step has completed (r->in_flight false). */
dtr_status_t dtr__step_poll(dtr_request_t *r, bool block, bool *done);
/* What every collective's finish ends with: the pieces from stage_recv into the output
 * (unpack3) and the divide of AVG done as SUM. */
dtr_status_t dtr__step_done(dtr_request_t *r);

dtr_status_t dtr__all_gather_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__all_gather_finish(dtr_request_t *r);
dtr_status_t dtr__reduce_scatter_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__all_reduce_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__all_to_all_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__exchange_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__exchange_finish(dtr_request_t *r);
dtr_status_t dtr__reduce_exchange_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__reduce_exchange_finish(dtr_request_t *r);
dtr_status_t dtr__local_chunk_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__local_scale_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__local_relabel_start(dtr_request_t *r, const dtr__step_args_t *a);
dtr_status_t dtr__local_zero_fill_start(dtr_request_t *r, const dtr__step_args_t *a);
/* The kinds' batch rounds (the exchange's is the all_to_all's: the same boxes). */
extern const dtr__round_ops_t dtr__all_gather_round, dtr__reduce_scatter_round,
    dtr__all_reduce_round, dtr__all_to_all_round;
/* A cast plan's first pass: the input, cast to op_dtype, into a step buffer (or into the
 * output when no step changes anything); r->cur then points at it. */
dtr_status_t dtr__cast_input(dtr_request_t *r);
/* A plan with a last cast (op_dtype other than dst's): the result, into the output. */
dtr_status_t dtr__cast_output(dtr_request_t *r);

/* ---- batches (batch.c, batch_round.c) ------------------------------------------------ */

/* A member of a batch on this rank: where its block is and what it runs next. */
typedef struct {
    /* this call's */
    const void *cur;
    void *buf[2]; /* its step buffers, in the batch's arena */
    int next;     /* the next step to run */
    dtr__ctx_t pctx; /* its geometry (pointers into the plan: set on every call) */
    /* what the plan fixes on this rank: derived by the first call with the plan, kept
     * while later calls bring the same plan (batch.c, dtr__batch_fix) */
    int last_real;
    int64_t buf_bytes;            /* each of its two step buffers, rounded up */
    int64_t src_bytes, dst_bytes; /* this rank's source and target blocks */
} dtr__member_t;

/* A member step of the coalesced round in flight. */
typedef struct {
    dtr__step_args_t a;
    const dtr__ctx_t *pc; /* its member's geometry */
    bool divide;
    int64_t divisor;
} dtr__round_member_t;

typedef enum { DTR__STAGE_BEFORE = 0, DTR__STAGE_ISSUE, DTR__STAGE_SOLO } dtr__stage_t;

typedef struct dtr__batch {
    const dtr_batch_plan_t *plan;
    const void *const *in;
    const size_t *in_bytes;
    void *const *out;
    bool bare;
    dtr__mesh_entry_t *m;
    dtr__member_t *mem;
    int mem_cap;
    const dtr_batch_plan_t *fixed_plan; /* mem's fixed part is this plan's (its hash) */
    uint64_t fixed_hash;
    int64_t fixed_arena; /* the step buffers' total */
    dtr__round_member_t *rm;
    int rm_cap;
    void *arena; /* the members' step buffers (the context's memory) */
    int64_t arena_cap;
    int round, j;      /* the round under way, and the member step in it */
    int count;         /* the coalesced round's member steps (its rd->count) */
    int64_t n;         /* and its group's size */
    int64_t total;     /* an all_reduce round's elements */
    dtr__stage_t stage;
    int tail;          /* after the rounds: the member whose last local steps run */
    bool in_flight;    /* the round's collective */
    void *group;
    dtr_backend_req_t breq;
    double t0;
    bool padded;       /* uneven pieces padded to `pad` (no v-form in the backend) */
    int64_t pad;
    bool spans;        /* the round's collective runs over span lists: no pack, no unpack */
    dtr_span_t *span;  /* its send spans, then its receive spans */
    int span_cap;
    dtr_request_t solo; /* one member step run as in a plan (local ones, reduce_exchange) */
    bool solo_active;
    int solo_t;
    bool agreeing;
    int64_t agree_send[3], agree_recv[3];
    dtr_backend_req_t abreq;
    double at0;
    uint64_t hash; /* the plan's and the slice size's, what the agreement compares */
    dtr_status_t local_status;
    char local_msg[512];
} dtr__batch_t;

/* ---- batch_round.c: a batch's members and its coalesced rounds ----------------------- */

/* What dtr__round_moves does besides counting. */
typedef enum { DTR__COUNT = 0, DTR__PACK, DTR__UNPACK } dtr__pass_t;

/* round_pack.c: an all_to_allv round (all_to_all, exchange), peer by peer and member by
 * member: counts and displacements (bytes) into arr[0..3] and the totals into arr[4]
 * (DTR__COUNT, DTR__PACK), with the pieces packed into stage_send (DTR__PACK) or placed from
 * stage_recv (DTR__UNPACK, on the displacements the count left). */
dtr_status_t dtr__round_moves(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                              dtr__pass_t pass);
/* A gather (gather) or reduce-scatter round: each peer's piece size (bytes for a gather,
 * elements for a reduction) in arr[0], its start in arr[1], b->padded and b->pad; with
 * copy (and not bare) the send buffer packed. */
dtr_status_t dtr__round_pieces(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr, bool gather,
                               bool copy);
/* The packed buffers' bytes of such a round, from the sizes dtr__round_pieces left (item:
 * bytes per unit of arr[0]). */
void dtr__round_piece_bytes(const dtr__batch_t *b, int64_t **arr, int64_t item, bool gather,
                            int64_t *send, int64_t *recv);
/* A gather round's arrivals, each peer's piece cut into its members' chunks along their dims. */
dtr_status_t dtr__round_gather_unpack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr);
/* The members' blocks back to back: their inputs into stage_send (pack), or stage_recv into
 * their outputs (unpack); arr is not read. */
dtr_status_t dtr__round_pack_blocks(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr);
dtr_status_t dtr__round_unpack_blocks(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr);
/* Starts the round as one span-list operation of `kind` where the backend takes it for
 * these bytes (b->spans set); nothing where it says no. A failure is the backend's (or out
 * of memory), which the driver wraps with the round. */
dtr_status_t dtr__round_spans_start(dtr_context_t *ctx, dtr__batch_t *b, dtr_spans_kind_t kind,
                                    int64_t bytes, const int64_t *counts);

/* b->solo set up as member t's request at step k. */
void dtr__member_request(dtr_context_t *ctx, dtr__batch_t *b, int t, int k);
/* Prepares the member steps of round b->round, packs them and starts its one collective
 * (b->in_flight). */
dtr_status_t dtr__round_issue(dtr_context_t *ctx, dtr__batch_t *b);
/* After the collective completed: each member's part into its output, and its divide. */
dtr_status_t dtr__round_finish(dtr_context_t *ctx, dtr__batch_t *b);
/* A failure of the round's collective, naming it. */
dtr_status_t dtr__round_error(const dtr__batch_t *b, dtr_status_t st);

#endif
