/*
 * The executor: interprets a plan's steps on this rank's buffers through a backend.
 *
 * Buffers of a run: step k reads `in` (k = 0) or scratch buf[(k-1)%2], and writes `out`
 * (last step) or buf[k%2], so `in` is only read and `out` only written. Collectives whose
 * pieces are not contiguous in the block (a gather of a non-leading dim, the pieces of an
 * exchange) go through the staging buffers with a pack before and an unpack after. All
 * scratch belongs to the context and only grows, so after the first call of a plan nothing
 * is allocated.
 *
 * A request is a small state machine: phase "agree" (one all-reduce of the plan's hash and
 * of the ranks' argument checks over the mesh), then one phase per step; a collective step
 * starts its operation and finishes (unpack, divide for AVG) when the backend's test says
 * it completed.
 *
 * Deadlines: with a timeout set (DTR_TIMEOUT_S, dtr_context_set_timeout), every backend
 * operation is completed by polling its test under a deadline counted from its start, so a
 * peer that never joins makes this rank fail with DTR_ERR_TIMEOUT instead of waiting forever.
 * The operation is then still pending in the backend, which may write into its buffers
 * whenever the peer joins: the context is marked aborted, refuses further calls, and its
 * memory (scratch, request state) is never freed, only kept reachable on a process-wide list.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redistribute/execute.h"
#include "redistribute/internal.h"

#define DTR__MESH_SLOTS 8
#define DTR__TAG_MESH 0x4d00
#define DTR__TAG_DIM 0x4d10

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

typedef enum { DTR__PHASE_AGREE = 0, DTR__PHASE_STEPS, DTR__PHASE_DONE } dtr__phase_t;

/* What the step in flight still has to do when its operation completes. */
typedef struct {
    void *dst;            /* the step's output block */
    int64_t out_numel;
    int64_t n;            /* group size */
    bool divide;          /* AVG done as SUM: divide by n */
    /* unpack from stage_recv: pieces in a 3-d view [outer, len, inner bytes] */
    bool unpack3;
    int64_t outer, inner, dst_len, piece_len, npieces;
    bool unpack_exchange;
    /* a gather in slices (dtr__slice_setup): the current slice covers outer rows
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
    bool in_flight;
    void *group;
    dtr_backend_req_t breq;
    dtr__pending_t pend;
    double t0; /* when the operation in flight started (monotonic seconds) */
    int64_t agree_send[3], agree_recv[3];
    dtr_status_t local_status; /* an argument error found before the agreement */
    char local_msg[512];
};

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
    dtr_request_t req;
    /* the group collectives' one operation in flight (kept here, not on the stack, so a
     * timed-out operation never points into a dead frame) */
    int64_t gsend[3], grecv[3];
    dtr_backend_req_t gbreq;
};

/* Aborted contexts: never freed (their backend operations may still complete into them),
 * kept reachable here so leak checkers see them as owned. */
static pthread_mutex_t dtr__aborted_lock = PTHREAD_MUTEX_INITIALIZER;
static dtr_context_t *dtr__aborted_list;

#define DTR__DEFAULT_TIMEOUT_S 600.0
#define DTR__DEFAULT_SLICE_BYTES (1 << 20)
/* A gather is sliced when its output holds at least this many slices; smaller ones are
 * one operation (their output stays in cache, where one pass costs little). */
#define DTR__SLICES_MIN 8

double dtr__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * Completes (block) or tests one backend operation started at t0, under the context's
 * deadline. With no timeout it is the backend's own wait or test. A timeout aborts the
 * context and returns DTR_ERR_TIMEOUT; the caller adds which operation it was.
 */
static dtr_status_t dtr__poll(dtr_context_t *ctx, void *group, dtr_backend_req_t *breq, double t0,
                              bool block, bool *done) {
    const dtr_backend_ops_t *ops = ctx->ops;
    if (ctx->timeout_s <= 0) {
        if (!block) return ops->test(group, breq, done);
        *done = true;
        return ops->wait(group, breq);
    }
    for (unsigned spin = 0;; spin++) {
        *done = false;
        DTR_CHECK(ops->test(group, breq, done));
        if (*done) return DTR_OK;
        double waited = dtr__now() - t0;
        if (waited > ctx->timeout_s) {
            ctx->aborted = true;
            snprintf(ctx->abort_msg, sizeof ctx->abort_msg,
                     "no completion within %g s (DTR_TIMEOUT_S or dtr_context_set_timeout); a "
                     "peer failed, stopped or never made this call",
                     ctx->timeout_s);
            return dtr__error(DTR_ERR_TIMEOUT, "deadline", "%s", ctx->abort_msg);
        }
        if (!block) return DTR_OK;
        if (spin >= 64) sched_yield(); /* ranks may share cores: let the peer run */
    }
}

dtr_status_t dtr__env_timeout(const char *func, double *out) {
    const char *env = getenv("DTR_TIMEOUT_S");
    *out = DTR__DEFAULT_TIMEOUT_S;
    if (env == NULL || *env == '\0') return DTR_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(env, &end);
    if (end == env || *end != '\0' || errno != 0 || !(v >= 0) || isinf(v))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "DTR_TIMEOUT_S: \"%.40s\" is not a number of seconds >= 0 (0: no "
                          "deadline)",
                          env);
    *out = v;
    return DTR_OK;
}

dtr_status_t dtr__env_bytes(const char *name, const char *func, int64_t dflt, int64_t min,
                            int64_t max, const char *what, int64_t *out) {
    const char *env = getenv(name);
    *out = dflt;
    if (env == NULL || *env == '\0') return DTR_OK;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(env, &end, 10);
    if (end == env || *end != '\0' || errno != 0 || v < min || v > max)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: \"%.40s\" is not %s", name, env,
                          what);
    *out = v;
    return DTR_OK;
}

/* ---- small helpers ---------------------------------------------------------------- */

/* Grows a scratch buffer to `need` bytes. On a memory space the old contents are not kept
 * (no caller needs them: a buffer grows before it is filled). */
static dtr_status_t dtr__reserve(dtr_context_t *ctx, void **p, int64_t *cap, int64_t need,
                                 const char *what) {
    if (need <= *cap) return DTR_OK;
    if (ctx->mem != NULL) {
        void *q = NULL;
        dtr_status_t st = ctx->mem->alloc(ctx->mem_state, need > 0 ? need : 1, &q);
        if (st != DTR_OK)
            return dtr__error(st, "dtr_redistribute", "%s: cannot grow scratch to %lld bytes of "
                              "%s memory: %s", what, (long long)need, ctx->mem->name,
                              dtr_last_error());
        ctx->mem->free(ctx->mem_state, *p);
        *p = q;
        *cap = need;
        return DTR_OK;
    }
    void *q = realloc(*p, (size_t)(need > 0 ? need : 1));
    if (q == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute",
                          "%s: cannot grow scratch to %lld bytes", what, (long long)need);
    /* Touch the new pages now: the first run pays for the page faults, later runs do not,
     * and the baseline does not read the kernel's shared zero page (which stays in cache
     * and would make it look faster than any real buffer). */
    memset((char *)q + *cap, 0, (size_t)(need - *cap));
    *p = q;
    *cap = need;
    return DTR_OK;
}

static int64_t dtr__prod(const int64_t *shape, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= shape[d];
    return p;
}

/* Copies ext rows of a 3-d view: [outer, *, inner bytes] from src (dim length slen, from
 * row slo) to dst (length dlen, at row dlo). */
static void dtr__copy3(const void *src, int64_t slen, int64_t slo, void *dst, int64_t dlen,
                       int64_t dlo, int64_t outer, int64_t ext, int64_t inner) {
    if (ext == 0 || inner == 0 || outer == 0) return;
    const char *s = src;
    char *d = dst;
    if (outer == 1 || (slen == ext && dlen == ext)) {
        memcpy(d + dlo * inner, s + slo * inner, (size_t)(outer * ext * inner));
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        memcpy(d + (o * dlen + dlo) * inner, s + (o * slen + slo) * inner,
               (size_t)(ext * inner));
}

static void dtr__copy(void *dst, const void *src, int64_t n) { memcpy(dst, src, (size_t)n); }

/* Copies the box [lo, lo+ext) of an N-d row-major block src (shape sshape, item bytes) to
 * dst (shape dshape) at dlo, each run with `copy` (dtr__copy or dtr__stream_copy, whose
 * caller fences). Trailing dims the box spans whole are copied as one run. */
static void dtr__box_copy(int nd, int64_t item, const void *src, const int64_t *sshape,
                          const int64_t *slo, const int64_t *ext, void *dst,
                          const int64_t *dshape, const int64_t *dlo,
                          void (*copy)(void *, const void *, int64_t)) {
    for (int d = 0; d < nd; d++)
        if (ext[d] == 0) return;
    /* The run: the innermost dims where both blocks are spanned whole, plus one more. */
    int inner = nd;
    int64_t run = item;
    while (inner > 0 && ext[inner - 1] == sshape[inner - 1] && ext[inner - 1] == dshape[inner - 1]) {
        run *= ext[inner - 1];
        inner--;
    }
    if (inner > 0) run *= ext[--inner];
    int64_t sst[DTR_MAX_TENSOR_DIMS], dst_st[DTR_MAX_TENSOR_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0};
    int64_t s = item, t = item;
    for (int d = nd - 1; d >= 0; d--) {
        sst[d] = s;
        dst_st[d] = t;
        s *= sshape[d];
        t *= dshape[d];
    }
    /* Short runs far apart defeat the hardware prefetcher, which stops at each gap: fetch
     * the run about 8 KiB ahead along the innermost iterated dim while copying this one
     * (2 KiB runs 4 KiB apart copied 1.4-1.7x faster out of memory, docs/executor.md). */
    int64_t ahead = 0;
    if (inner > 0 && run <= DTR__PREFETCH_RUN_MAX) ahead = (DTR__PREFETCH_RUN_MAX + run - 1) / run;
    const char *sp = src;
    char *dp = dst;
    for (;;) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < nd; d++) {
            int64_t extra = d < inner ? idx[d] : 0;
            so += (slo[d] + extra) * sst[d];
            doff += (dlo[d] + extra) * dst_st[d];
        }
        if (ahead > 0 && idx[inner - 1] + ahead < ext[inner - 1]) {
            const char *next = sp + so + ahead * sst[inner - 1];
            for (int64_t b = 0; b < run; b += 64) __builtin_prefetch(next + b, 0, 3);
        }
        copy(dp + doff, sp + so, run);
        int d = inner - 1;
        for (; d >= 0; d--) {
            if (++idx[d] < ext[d]) break;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
}

/* The box where block a (offset aoff, shape ash) meets block b: its corner relative to a
 * in lo, its extent in ext; returns its element count (0 when they do not meet). */
static int64_t dtr__meet(int nd, const int64_t *aoff, const int64_t *ash, const int64_t *boff,
                         const int64_t *bsh, int64_t *lo, int64_t *ext) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) {
        int64_t b0 = aoff[d] > boff[d] ? aoff[d] : boff[d];
        int64_t b1 = aoff[d] + ash[d] < boff[d] + bsh[d] ? aoff[d] + ash[d] : boff[d] + bsh[d];
        ext[d] = b1 > b0 ? b1 - b0 : 0;
        lo[d] = b0 - aoff[d];
        count *= ext[d];
    }
    return count;
}

/* Copies elements [u, v) of a box (extent ext, row-major) between a block (shape bshape,
 * the box at corner blo) and the contiguous `flat`; to_block picks the direction. */
static void dtr__box_range(int nd, int64_t item, char *block, const int64_t *bshape,
                           const int64_t *blo, const int64_t *ext, int64_t u, int64_t v,
                           char *flat, bool to_block) {
    if (v <= u) return;
    /* Trailing dims the box spans whole merge into its innermost run. */
    int64_t sh[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS], ex[DTR_MAX_TENSOR_DIMS];
    int k = nd;
    int64_t merged = 1;
    while (k > 1 && ext[k - 1] == bshape[k - 1]) merged *= ext[--k];
    for (int d = 0; d < k; d++) {
        sh[d] = bshape[d];
        lo[d] = blo[d];
        ex[d] = ext[d];
    }
    sh[k - 1] *= merged;
    lo[k - 1] *= merged;
    ex[k - 1] *= merged;
    for (int64_t f = u; f < v;) {
        int64_t rem = f, idx[DTR_MAX_TENSOR_DIMS] = {0};
        for (int d = k - 1; d >= 0; d--) {
            idx[d] = rem % ex[d];
            rem /= ex[d];
        }
        int64_t run = ex[k - 1] - idx[k - 1];
        if (run > v - f) run = v - f;
        int64_t off = 0;
        for (int d = 0; d < k; d++) off = off * sh[d] + lo[d] + idx[d];
        char *b = block + off * item, *c = flat + (f - u) * item;
        memcpy(to_block ? b : c, to_block ? c : b, (size_t)(run * item));
        f += run;
    }
}

/* ---- local operations on the context's memory ---------------------------------------
 * Host memory is handled by the functions above; a memory space by its table. */

static dtr_status_t dtr__m_fail(const dtr_context_t *ctx, dtr_status_t st, const char *op) {
    char detail[400];
    snprintf(detail, sizeof detail, "%s", dtr_last_error());
    return dtr__error(st, "dtr_redistribute", "%s memory: %s failed: %s", ctx->mem->name, op,
                      detail);
}

static dtr_status_t dtr__m_box(dtr_context_t *ctx, int nd, int64_t item, const void *src,
                               const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                               void *dst, const int64_t *dshape, const int64_t *dlo) {
    if (ctx->mem == NULL) {
        dtr__box_copy(nd, item, src, sshape, slo, ext, dst, dshape, dlo, dtr__copy);
        return DTR_OK;
    }
    for (int d = 0; d < nd; d++)
        if (ext[d] == 0) return DTR_OK;
    dtr_status_t st = ctx->mem->copy_box(ctx->mem_state, nd, item, src, sshape, slo, ext, dst,
                                         dshape, dlo);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy_box");
}

/* dtr__copy3 on the context's memory: a box of [outer, ext, inner bytes]. */
static dtr_status_t dtr__m_copy3(dtr_context_t *ctx, const void *src, int64_t slen, int64_t slo,
                                 void *dst, int64_t dlen, int64_t dlo, int64_t outer, int64_t ext,
                                 int64_t inner) {
    if (ctx->mem == NULL) {
        dtr__copy3(src, slen, slo, dst, dlen, dlo, outer, ext, inner);
        return DTR_OK;
    }
    int64_t ss[3] = {outer, slen, inner}, sl[3] = {0, slo, 0}, ex[3] = {outer, ext, inner};
    int64_t ds[3] = {outer, dlen, inner}, dl[3] = {0, dlo, 0};
    return dtr__m_box(ctx, 3, 1, src, ss, sl, ex, dst, ds, dl);
}

static dtr_status_t dtr__m_range(dtr_context_t *ctx, int nd, int64_t item, char *block,
                                 const int64_t *bshape, const int64_t *blo, const int64_t *ext,
                                 int64_t u, int64_t v, char *flat, bool to_block) {
    if (ctx->mem == NULL) {
        dtr__box_range(nd, item, block, bshape, blo, ext, u, v, flat, to_block);
        return DTR_OK;
    }
    if (v <= u) return DTR_OK;
    dtr_status_t st = ctx->mem->copy_range(ctx->mem_state, nd, item, block, bshape, blo, ext, u,
                                           v, flat, to_block);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy_range");
}

static dtr_status_t dtr__m_zero(dtr_context_t *ctx, void *p, int64_t bytes) {
    if (bytes <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        memset(p, 0, (size_t)bytes);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->zero(ctx->mem_state, p, bytes);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "zero");
}

/* memcpy within the context's memory */
static dtr_status_t dtr__m_copy(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes) {
    if (bytes <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        memcpy(dst, src, (size_t)bytes);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->copy(ctx->mem_state, dst, src, bytes, DTR_COPY_WITHIN);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy");
}

/* between host memory and the context's (to_host: from the space into host) */
static dtr_status_t dtr__m_host(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes,
                                bool to_host) {
    if (ctx->mem == NULL) return dtr__m_copy(ctx, dst, src, bytes);
    dtr_status_t st = ctx->mem->copy(ctx->mem_state, dst, src, bytes,
                                     to_host ? DTR_COPY_TO_HOST : DTR_COPY_FROM_HOST);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, to_host ? "copy to host" : "copy from host");
}

static dtr_status_t dtr__m_divide(dtr_context_t *ctx, dtr_dtype_t dtype, const void *src,
                                  void *dst, int64_t count, int64_t n) {
    if (count <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__divide(dtype, src, dst, count, n);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->divide(ctx->mem_state, dtype, src, dst, count, n);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "divide");
}

static void dtr__m_free(dtr_context_t *ctx, void *p) {
    if (ctx->mem == NULL) free(p);
    else if (p != NULL) ctx->mem->free(ctx->mem_state, p);
}

uint64_t dtr__fnv(uint64_t h, int64_t v) {
    for (int b = 0; b < 8; b++) {
        h ^= (uint64_t)((v >> (8 * b)) & 0xff);
        h *= 1099511628211ull;
    }
    return h;
}

static int64_t dtr__placement_key(dtr_placement_t p) {
    int64_t detail = p.kind == DTR_SHARD ? (int64_t)p.dim : p.kind == DTR_PARTIAL ? (int64_t)p.op : 0;
    return (int64_t)p.kind * 1000 + detail;
}

static uint64_t dtr__plan_hash(const dtr_plan_t *plan) {
    uint64_t h = dtr__mesh_hash(plan->src.mesh);
    const dtr_spec_t *sp[2] = {&plan->src, &plan->dst};
    int mdims = dtr_mesh_ndims(plan->src.mesh);
    for (int k = 0; k < 2; k++) {
        h = dtr__fnv(h, sp[k]->ndim);
        h = dtr__fnv(h, sp[k]->dtype);
        for (int d = 0; d < sp[k]->ndim; d++) h = dtr__fnv(h, sp[k]->shape[d]);
        for (int i = 0; i < mdims; i++) h = dtr__fnv(h, dtr__placement_key(sp[k]->placements[i]));
    }
    h = dtr__fnv(h, plan->strategy);
    h = dtr__fnv(h, plan->nsteps);
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        h = dtr__fnv(h, s->kind);
        h = dtr__fnv(h, s->mesh_dim);
        h = dtr__fnv(h, s->tensor_dim);
        h = dtr__fnv(h, s->tensor_dim2);
        for (int i = 0; i < mdims; i++) h = dtr__fnv(h, dtr__placement_key(s->after[i]));
    }
    return h;
}

/* ---- contexts and their per-mesh groups ------------------------------------------- */

/* The buffers an agreement's all-reduce runs on: the host arrays, or on a memory space its
 * own 6 int64 with `send` copied in (the result comes back through dtr__agree_result). */
static dtr_status_t dtr__agree_buffers(dtr_context_t *ctx, const int64_t *send, int64_t **dsend,
                                       int64_t **drecv) {
    if (ctx->mem == NULL) return DTR_OK;
    DTR_CHECK(dtr__reserve(ctx, (void **)&ctx->agree_dev, &ctx->agree_cap, 6 * sizeof(int64_t),
                           "agreement"));
    DTR_CHECK(dtr__m_host(ctx, ctx->agree_dev, send, 3 * sizeof(int64_t), false));
    *dsend = ctx->agree_dev;
    *drecv = ctx->agree_dev + 3;
    return DTR_OK;
}

static dtr_status_t dtr__agree_result(dtr_context_t *ctx, int64_t *recv) {
    if (ctx->mem == NULL) return DTR_OK;
    return dtr__m_host(ctx, recv, ctx->agree_dev + 3, 3 * sizeof(int64_t), true);
}

dtr_status_t dtr_context_create(const dtr_backend_ops_t *ops, void *state, dtr_context_t **out) {
    dtr_status_t st = DTR_OK;
    if (ops == NULL || out == NULL) {
        st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: must not be NULL",
                        ops == NULL ? "ops" : "out");
        goto fail;
    }
    const struct {
        const char *name;
        bool missing;
    } required[] = {
        {"rank", ops->rank == NULL},
        {"group_create", ops->group_create == NULL},
        {"group_destroy", ops->group_destroy == NULL},
        {"all_gather", ops->all_gather == NULL},
        {"reduce_scatter", ops->reduce_scatter == NULL},
        {"all_reduce", ops->all_reduce == NULL},
        {"all_to_allv", ops->all_to_allv == NULL},
        {"test", ops->test == NULL},
        {"wait", ops->wait == NULL},
    };
    for (size_t k = 0; k < sizeof required / sizeof required[0]; k++) {
        if (!required[k].missing) continue;
        st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                        "ops->%s (backend %s): NULL, but required (the optional ones are "
                        "all_gatherv, reduce_scatterv, all_to_all, the strided forms, "
                        "strided_in_place and destroy)",
                        required[k].name, ops->name != NULL ? ops->name : "unnamed");
        goto fail;
    }
    dtr__stream_init();
    dtr_context_t *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "context");
        goto fail;
    }
    ctx->ops = ops;
    ctx->state = state;
    st = dtr__env_timeout("dtr_context_create", &ctx->timeout_s);
    if (st == DTR_OK)
        st = dtr__env_bytes("DTR_SLICE_BYTES", "dtr_context_create", DTR__DEFAULT_SLICE_BYTES, 0,
                            INT64_MAX, "a byte count >= 0 (0: no slices)", &ctx->slice_bytes);
    if (st != DTR_OK) {
        free(ctx);
        goto fail;
    }
    ctx->rank = ops->rank(state);
    const char *agree = getenv("DTR_AGREE");
    ctx->agree = agree == NULL || strcmp(agree, "0") != 0;
    *out = ctx;
    return DTR_OK;
fail:
    if (ops != NULL && ops->destroy != NULL && state != NULL) ops->destroy(state);
    return st;
}

void dtr_context_destroy(dtr_context_t *ctx) {
    if (ctx == NULL) return;
    if (ctx->aborted) {
        /* Its backend may still complete an operation into the context's memory. */
        pthread_mutex_lock(&dtr__aborted_lock);
        ctx->next_aborted = dtr__aborted_list;
        dtr__aborted_list = ctx;
        pthread_mutex_unlock(&dtr__aborted_lock);
        return;
    }
    for (int k = 0; k < DTR__MESH_SLOTS; k++) dtr_mesh_destroy(ctx->meshes[k].mesh);
    while (ctx->groups != NULL) {
        dtr__group_t *g = ctx->groups;
        ctx->groups = g->next;
        ctx->ops->group_destroy(ctx->state, g->handle);
        free(g);
    }
    dtr__m_free(ctx, ctx->buf[0]);
    dtr__m_free(ctx, ctx->buf[1]);
    dtr__m_free(ctx, ctx->stage_send);
    dtr__m_free(ctx, ctx->stage_recv);
    dtr__m_free(ctx, ctx->agree_dev);
    free(ctx->arrays);
    if (ctx->ops->destroy != NULL) ctx->ops->destroy(ctx->state);
    if (ctx->mem != NULL && ctx->mem->destroy != NULL) ctx->mem->destroy(ctx->mem_state);
    free(ctx);
}

dtr_status_t dtr_context_set_memory(dtr_context_t *ctx, const dtr_memory_ops_t *ops,
                                    void *state) {
    dtr_status_t st = DTR_OK;
    const char *bad = NULL;
    if (ctx == NULL) bad = "ctx: must not be NULL";
    else if (ops == NULL) bad = "ops: must not be NULL";
    else if (ops->alloc == NULL || ops->free == NULL || ops->copy == NULL || ops->zero == NULL ||
             ops->copy_box == NULL || ops->copy_range == NULL || ops->divide == NULL ||
             ops->cast == NULL || ops->sync == NULL)
        bad = "ops: every slot but destroy is required (alloc, free, copy, zero, copy_box, "
              "copy_range, divide, cast, sync)";
    else if (ctx->mem != NULL) bad = "ctx: already has a memory space (set once per context)";
    else if (ctx->busy || ctx->groups != NULL || dtr_context_scratch_bytes(ctx) > 0 ||
             ctx->aborted)
        bad = "ctx: already used (set the memory space before the context's first call)";
    if (bad != NULL) {
        st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s", bad);
        goto fail;
    }
    if (!(ctx->ops->caps & DTR_BACKEND_CAP_DEVICE)) {
        void *staged = NULL;
        st = dtr__staged_create(ctx->ops, ctx->state, ops, state, &ctx->staged_ops, &staged);
        if (st != DTR_OK) goto fail;
        ctx->ops = &ctx->staged_ops;
        ctx->state = staged;
    }
    ctx->mem = ops;
    ctx->mem_state = state;
    return DTR_OK;
fail:
    if (ops != NULL && ops->destroy != NULL && state != NULL) ops->destroy(state);
    return st;
}

dtr_status_t dtr__host_only(const dtr_context_t *ctx, const char *func) {
    if (ctx == NULL || ctx->mem == NULL) return DTR_OK;
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                      "ctx: its memory is %s; gradient hooks, reducers and the tape work on host "
                      "buffers only (dtr_all_reduce and dtr_reduce_scatter take %s buffers)",
                      ctx->mem->name, ctx->mem->name);
}

const char *dtr_context_memory(const dtr_context_t *ctx) {
    if (ctx == NULL) return "";
    return ctx->mem == NULL ? "host" : ctx->mem->name != NULL ? ctx->mem->name : "unnamed";
}

dtr_status_t dtr_context_sync(dtr_context_t *ctx) {
    DTR_CHECK_PTR(ctx, __func__);
    if (ctx->mem == NULL) return DTR_OK;
    dtr_status_t st = ctx->mem->sync(ctx->mem_state);
    if (st != DTR_OK)
        return dtr__error(st, __func__, "%s memory: %s", ctx->mem->name, dtr_last_error());
    return DTR_OK;
}

/* A backend that only reads device memory needs the context's memory space set. */
static dtr_status_t dtr__check_memory(const dtr_context_t *ctx, const char *func) {
    if (!(ctx->ops->caps & DTR_BACKEND_CAP_DEVICE) || ctx->mem != NULL) return DTR_OK;
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                      "ctx: backend %s works on device memory, but the context's memory is "
                      "host (dtr_context_set_memory)",
                      ctx->ops->name != NULL ? ctx->ops->name : "unnamed");
}

const char *dtr_context_backend(const dtr_context_t *ctx) {
    return ctx != NULL && ctx->ops->name != NULL ? ctx->ops->name : "";
}

int dtr_context_rank(const dtr_context_t *ctx) { return ctx != NULL ? ctx->rank : -1; }

dtr_status_t dtr_context_set_timeout(dtr_context_t *ctx, double seconds) {
    DTR_CHECK_PTR(ctx, __func__);
    if (!(seconds >= 0) || isinf(seconds))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "seconds: %g, must be a finite number >= 0 (0: no deadline)", seconds);
    ctx->timeout_s = seconds;
    return DTR_OK;
}

double dtr_context_timeout(const dtr_context_t *ctx) { return ctx != NULL ? ctx->timeout_s : 0; }

dtr_status_t dtr_context_set_slice_bytes(dtr_context_t *ctx, int64_t bytes) {
    DTR_CHECK_PTR(ctx, __func__);
    if (bytes < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "bytes: %lld, must be >= 0 (0: no slices)", (long long)bytes);
    ctx->slice_bytes = bytes;
    return DTR_OK;
}

int64_t dtr_context_slice_bytes(const dtr_context_t *ctx) {
    return ctx != NULL ? ctx->slice_bytes : 0;
}

bool dtr_context_aborted(const dtr_context_t *ctx) { return ctx != NULL && ctx->aborted; }

/* DTR_ERR_ABORTED for a context an earlier timeout aborted. */
static dtr_status_t dtr__check_alive(const dtr_context_t *ctx, const char *func) {
    if (!ctx->aborted) return DTR_OK;
    return dtr__error(DTR_ERR_ABORTED, func,
                      "ctx: aborted by an earlier timeout (%s); its operations may still be "
                      "pending: destroy it, and end or rebuild the job",
                      ctx->abort_msg);
}

int64_t dtr_context_scratch_bytes(const dtr_context_t *ctx) {
    if (ctx == NULL) return 0;
    return ctx->buf_cap[0] + ctx->buf_cap[1] + ctx->send_cap + ctx->recv_cap +
           ctx->arrays_cap * 6 * (int64_t)sizeof(int64_t);
}

/* A copy of the mesh the context can keep after the caller frees theirs. */
static dtr_status_t dtr__mesh_clone(const dtr_mesh_t *mesh, dtr_mesh_t **out) {
    int nd = dtr_mesh_ndims(mesh);
    int64_t sizes[DTR_MAX_MESH_DIMS], coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(mesh);
    for (int i = 0; i < nd; i++) sizes[i] = dtr_mesh_size(mesh, i);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "mesh copy of %lld ranks",
                          (long long)n);
    for (int64_t p = 0; p < n; p++) {
        dtr_mesh_rank_at(mesh, coord, &ranks[p]);
        for (int i = nd - 1; i >= 0; i--) {
            if (++coord[i] < sizes[i]) break;
            coord[i] = 0;
        }
    }
    dtr_status_t st = dtr_mesh_create(nd, sizes, ranks, n, out);
    free(ranks);
    return st;
}

/* A group's communicator, created the first time any mesh needs that ordered rank list and
 * kept until the context is destroyed. Never evicted: every member of a group first needs
 * it in the same collective call (each member's group along that mesh dim is this very
 * list), so creation stays matched across ranks only if no rank ever drops and re-creates
 * one on its own schedule (a bystander's calls would otherwise skew the ranks' caches). */
static dtr_status_t dtr__group(dtr_context_t *ctx, const int *ranks, int n, int tag,
                               void **out) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++) h = dtr__fnv(h, ranks[k]);
    for (dtr__group_t *g = ctx->groups; g != NULL; g = g->next)
        if (g->hash == h && g->n == n && memcmp(g->ranks, ranks, (size_t)n * sizeof *ranks) == 0) {
            *out = g->handle;
            return DTR_OK;
        }
    dtr__group_t *g = calloc(1, sizeof *g + (size_t)n * sizeof *ranks);
    if (g == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "group of %d ranks", n);
    g->hash = h;
    g->n = n;
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    dtr_status_t st = ctx->ops->group_create(ctx->state, ranks, n, tag, &g->handle);
    if (st != DTR_OK) {
        free(g);
        return st;
    }
    g->next = ctx->groups;
    ctx->groups = g;
    *out = g->handle;
    return DTR_OK;
}

/* This rank's groups on a mesh (collective over each group the first time). */
static dtr_status_t dtr__mesh_entry(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                    const int64_t *coord, dtr__mesh_entry_t **out) {
    uint64_t h = dtr__mesh_hash(mesh);
    dtr__mesh_entry_t *victim = &ctx->meshes[0];
    for (int k = 0; k < DTR__MESH_SLOTS; k++) {
        dtr__mesh_entry_t *e = &ctx->meshes[k];
        if (e->mesh != NULL && e->hash == h && dtr_mesh_equal(e->mesh, mesh)) {
            e->used = ++ctx->clock;
            *out = e;
            return DTR_OK;
        }
        if (e->mesh == NULL || (victim->mesh != NULL && e->used < victim->used)) victim = e;
    }
    dtr__mesh_entry_t e = {0};
    dtr_status_t st = DTR_OK;
    int nd = dtr_mesh_ndims(mesh);
    int64_t n = dtr_mesh_nranks(mesh);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "rank list of %lld",
                          (long long)n);
    DTR_CHECK_GOTO(dtr__mesh_clone(mesh, &e.mesh), st, done);
    e.hash = h;
    memcpy(e.coord, coord, (size_t)nd * sizeof *coord);
    if (n > 1) {
        int64_t c[DTR_MAX_MESH_DIMS] = {0};
        for (int64_t p = 0; p < n; p++) {
            dtr_mesh_rank_at(mesh, c, &ranks[p]);
            for (int i = nd - 1; i >= 0; i--) {
                if (++c[i] < dtr_mesh_size(mesh, i)) break;
                c[i] = 0;
            }
        }
        DTR_CHECK_GOTO(dtr__group(ctx, ranks, (int)n, DTR__TAG_MESH, &e.all), st, done);
    }
    for (int i = 0; i < nd; i++) {
        int64_t count = 0;
        if (dtr_mesh_size(mesh, i) == 1) continue;
        dtr_mesh_group(mesh, ctx->rank, i, ranks, n, &count);
        DTR_CHECK_GOTO(dtr__group(ctx, ranks, (int)count, DTR__TAG_DIM + i, &e.dim_group[i]), st,
                       done);
    }
    dtr_mesh_destroy(victim->mesh);
    e.used = ++ctx->clock;
    *victim = e;
    *out = victim;
    e.mesh = NULL;
done:
    free(ranks);
    dtr_mesh_destroy(e.mesh);
    return st;
}

/* ---- the steps -------------------------------------------------------------------- */

/* Wraps a backend failure with the step it happened in. */
static dtr_status_t dtr__step_error(const dtr_request_t *r, dtr_status_t st) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", dtr_last_error());
    if (r->phase == DTR__PHASE_AGREE)
        return dtr__error(st, "dtr_redistribute", "argument agreement over the mesh: %s", detail);
    const dtr_step_t *s = &r->plan->steps[r->step];
    if (s->mesh_dim < 0)
        return dtr__error(st, "dtr_redistribute", "step %d (%s, over the whole mesh): %s",
                          r->step + 1, dtr_step_kind_info(s->kind)->name, detail);
    return dtr__error(st, "dtr_redistribute", "step %d (%s, mesh dim %d): %s", r->step + 1,
                      dtr_step_kind_info(s->kind)->name, s->mesh_dim, detail);
}

/* int64 arrays from the context: 6 of n each. */
static dtr_status_t dtr__arrays(dtr_context_t *ctx, int64_t n, int64_t **a) {
    if (n > ctx->arrays_cap) {
        int64_t *p = realloc(ctx->arrays, (size_t)n * 6 * sizeof *p);
        if (p == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "count arrays for %lld ranks",
                              (long long)n);
        ctx->arrays = p;
        ctx->arrays_cap = n;
    }
    for (int k = 0; k < 6; k++) a[k] = ctx->arrays + k * ctx->arrays_cap;
    return DTR_OK;
}

static void dtr__chunks(int64_t len, int64_t n, int64_t *size, int64_t *off) {
    for (int64_t k = 0; k < n; k++) dtr_chunk(len, n, k, &size[k], &off[k]);
}

static bool dtr__all_equal(const int64_t *v, int64_t n) {
    for (int64_t k = 1; k < n; k++)
        if (v[k] != v[0]) return false;
    return true;
}

/* A step that leaves every rank's block as it is. */
static bool dtr__noop(const dtr_request_t *r, int k) {
    const dtr_step_t *s = &r->plan->steps[k];
    if (s->kind == DTR_STEP_LOCAL_RELABEL) return true;
    if (s->mesh_dim >= 0) return r->pctx.msize[s->mesh_dim] == 1;
    return dtr_mesh_nranks(r->pctx.mesh) == 1;
}

/* ---- gathers in slices ------------------------------------------------------------- */

/*
 * A gather along a dim d that is not the block's leading one, viewed as [outer, len, inner
 * bytes]: each member's piece is [outer, c, inner], and piece m goes to rows of[m].. of
 * every outer row. Gathered whole, the pieces would be interleaved by a pass over the whole
 * output (or by the backend's strided types, slower still). In slices, each slice's pieces
 * land in stage_recv, small enough to stay in cache, and are placed before the next slice
 * starts: the output is written once, with streaming stores when it is large. A slice is a
 * run of whole outer rows, or (even pieces, one outer row larger than a slice) a run of
 * rows of each member's piece within one outer row. The send side of a slice is a
 * contiguous run of the input either way.
 */
static void dtr__slice_setup(dtr_request_t *r, int64_t slice_bytes, const int64_t *sz,
                             int64_t ci, bool even) {
    dtr__pending_t *p = &r->pend;
    int64_t row = p->dst_len * p->inner; /* one outer row of the output */
    p->slice = true;
    p->even = even;
    p->mine = sz[ci];
    p->so = p->sx = 0;
    p->stream = p->out_numel * r->pctx.item >= DTR__STREAM_MIN_BYTES;
    if (row <= slice_bytes || !even) {
        p->sx_whole = true;
        p->sno = slice_bytes / (row > 0 ? row : 1);
        if (p->sno < 1) p->sno = 1;
        if (p->sno > p->outer) p->sno = p->outer;
    } else {
        p->sx_whole = false;
        p->sno = 1;
        p->snx = slice_bytes / (p->n * p->inner);
        if (p->snx < 1) p->snx = 1;
        if (p->snx > sz[0]) p->snx = sz[0];
    }
}

/* The bytes of stage_recv the largest slice needs. */
static int64_t dtr__slice_stage(const dtr__pending_t *p) {
    return p->sx_whole ? p->sno * p->dst_len * p->inner : p->n * p->snx * p->inner;
}

/* Starts the gather of the current slice into stage_recv. */
static dtr_status_t dtr__slice_issue(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr__pending_t *p = &r->pend;
    const char *src = p->src;
    if (!p->sx_whole) {
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        return ctx->ops->all_gather(r->group, src + (p->so * p->mine + p->sx) * p->inner,
                                    rows * p->inner, ctx->stage_recv, &r->breq);
    }
    int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
    const char *send = src + p->so * p->mine * p->inner;
    if (p->even)
        return ctx->ops->all_gather(r->group, send, no * p->mine * p->inner, ctx->stage_recv,
                                    &r->breq);
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(ctx, p->n, a));
    int64_t *rc = a[2], *rd = a[3];
    for (int64_t m = 0; m < p->n; m++) {
        int64_t size, off;
        dtr_chunk(p->dst_len, p->n, m, &size, &off);
        rc[m] = no * size * p->inner;
        rd[m] = no * off * p->inner; /* the pieces back to back */
    }
    return ctx->ops->all_gatherv(r->group, send, no * p->mine * p->inner, ctx->stage_recv, rc,
                                 rd, &r->breq);
}

/* Places the current slice's pieces (back to back in stage_recv) into the output. */
static dtr_status_t dtr__slice_unpack(dtr_request_t *r) {
    const dtr__pending_t *p = &r->pend;
    const char *at = r->ctx->stage_recv;
    char *dst = p->dst;
    int64_t len = p->dst_len, inner = p->inner;
    if (r->ctx->mem != NULL) { /* one box per member */
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
        for (int64_t m = 0; m < p->n; m++) {
            int64_t size, off;
            dtr_chunk(len, p->n, m, &size, &off);
            if (!p->sx_whole)
                DTR_CHECK(dtr__m_copy(r->ctx, dst + (p->so * len + off + p->sx) * inner,
                                      at + m * rows * inner, rows * inner));
            else
                DTR_CHECK(dtr__m_copy3(r->ctx, at + no * off * inner, size, 0,
                                       dst + p->so * len * inner, len, off, no, size, inner));
        }
        return DTR_OK;
    }
    void (*copy)(void *, const void *, int64_t) = p->stream ? dtr__stream_copy : dtr__copy;
    if (!p->sx_whole) {
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        for (int64_t m = 0; m < p->n; m++) {
            int64_t size, off;
            dtr_chunk(len, p->n, m, &size, &off);
            copy(dst + (p->so * len + off + p->sx) * inner, at + m * rows * inner, rows * inner);
        }
    } else {
        /* member m's piece is [no, size, inner] and starts at no * off * inner; write the
         * output row by row */
        int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
        for (int64_t j = 0; j < no; j++)
            for (int64_t m = 0; m < p->n; m++) {
                int64_t size, off;
                dtr_chunk(len, p->n, m, &size, &off);
                copy(dst + ((p->so + j) * len + off) * inner, at + (no * off + j * size) * inner,
                     size * inner);
            }
    }
    if (p->stream) dtr__stream_fence();
    return DTR_OK;
}

/* Moves to the next slice; false after the last. */
static bool dtr__slice_next(dtr__pending_t *p) {
    if (!p->sx_whole) {
        p->sx += p->snx;
        if (p->sx < p->mine) return true;
        p->sx = 0;
        p->so++;
    } else {
        p->so += p->sno;
    }
    return p->so < p->outer;
}

/* Starts step r->step: local steps complete here; collectives leave r->in_flight set. */
static dtr_status_t dtr__step_start(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_plan_t *plan = r->plan;
    const dtr_step_t *s = &plan->steps[r->step];
    const dtr__ctx_t *pc = &r->pctx;
    int nd = pc->ndim, k = r->step;
    int64_t item = pc->item;
    int64_t ish[DTR_MAX_TENSOR_DIMS], ioff[DTR_MAX_TENSOR_DIMS];
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS];
    dtr__layout(pc, s->before, r->m->coord, ish, ioff);
    dtr__layout(pc, s->after, r->m->coord, osh, ooff);
    int64_t in_numel = dtr__prod(ish, 0, nd), out_numel = dtr__prod(osh, 0, nd);
    /* Steps that change nothing (a mesh dim of one rank, a relabel) pass the current
     * buffer on; the last step that changes something writes the output. */
    if (!r->bare && (k > r->last_real || dtr__noop(r, k))) return DTR_OK;
    const void *src = r->cur;
    void *dst;
    if (k == r->last_real) {
        dst = r->out;
    } else {
        int b = r->cur == ctx->buf[0] ? 1 : 0;
        DTR_CHECK(dtr__reserve(ctx, &ctx->buf[b], &ctx->buf_cap[b], out_numel * item, "step buffer"));
        dst = ctx->buf[b];
    }
    r->cur = dst; /* where the data is once this step completes */
    int i = s->mesh_dim;
    int64_t n = i >= 0 ? pc->msize[i] : dtr_mesh_nranks(pc->mesh);
    int64_t ci = i >= 0 ? r->m->coord[i] : 0;
    void *group = i >= 0 ? r->m->dim_group[i] : r->m->all;
    dtr__pending_t *pend = &r->pend;
    memset(pend, 0, sizeof *pend);
    pend->dst = dst;
    pend->out_numel = out_numel;
    pend->n = n;
    bool bare = r->bare;
    int64_t *a[6];
    dtr_status_t st = DTR_OK;

    /* An exchange in which no rank receives anything from another is a local re-slicing. */
    bool local_exchange = s->kind == DTR_STEP_EXCHANGE && s->peers_max == 0 && s->recv_bytes_max == 0;
    if (local_exchange) {
        if (bare || out_numel == 0) return DTR_OK;
        int64_t lo[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
        for (int d = 0; d < nd; d++) {
            lo[d] = ooff[d] - ioff[d];
            if (lo[d] < 0 || lo[d] + osh[d] > ish[d])
                return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                                  "step %d (exchange): marked local, but this rank's target "
                                  "block is not inside its source block",
                                  k + 1);
        }
        return dtr__m_box(ctx, nd, item, src, ish, lo, osh, dst, osh, zero);
    }
    /* Local steps. (Steps over one rank and relabels never get here unless bare: they are
     * no-ops, skipped above.) */
    if (s->kind == DTR_STEP_LOCAL_CHUNK || s->kind == DTR_STEP_LOCAL_SCALE ||
        s->kind == DTR_STEP_LOCAL_RELABEL || n == 1) {
        if (bare) return DTR_OK;
        if (s->kind == DTR_STEP_LOCAL_CHUNK) {
            int d = s->tensor_dim;
            int64_t size, off;
            dtr_chunk(ish[d], n, ci, &size, &off);
            return dtr__m_copy3(ctx, src, ish[d], off, dst, size, 0, dtr__prod(ish, 0, d), size,
                                dtr__prod(ish, d + 1, nd) * item);
        } else if (s->kind == DTR_STEP_LOCAL_SCALE) {
            return dtr__m_divide(ctx, plan->src.dtype, src, dst, in_numel, n);
        } else {
            return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                              "step %d (%s): a no-op step was not skipped", k + 1,
                              dtr_step_kind_info(s->kind)->name);
        }
        return DTR_OK;
    }

    DTR_CHECK(dtr__arrays(ctx, n, a));
    int64_t *sc = a[0], *sd = a[1], *rc = a[2], *rd = a[3], *sz = a[4], *of = a[5];
    dtr_reduce_op_t op = s->op;
    if (op == DTR_REDUCE_AVG && !(ops->caps & DTR_BACKEND_CAP_AVG)) {
        op = DTR_REDUCE_SUM;
        pend->divide = !bare;
    }
    dtr_dtype_t dtype = plan->src.dtype;
    r->group = group;

    switch (s->kind) {
    case DTR_STEP_ALL_GATHER: {
        int d = s->tensor_dim;
        int64_t len = osh[d], outer = dtr__prod(osh, 0, d), inner = dtr__prod(osh, d + 1, nd) * item;
        dtr__chunks(len, n, sz, of);
        bool even = dtr__all_equal(sz, n);
        bool padded = !even && ops->all_gatherv == NULL;
        int64_t c = sz[0], piece = outer * c * inner;
        const void *send = src;
        void *recv = dst;
        /* Even pieces of a non-leading dim can land in place, rows apart, through the
         * backend's strided form: instead of slices where the backend places them as fast as
         * it gathers (strided_in_place), else for gathers too small to slice. */
        bool strided = even && !bare && outer > 1 && c > 0 && ops->all_gather_strided != NULL;
        bool in_place = strided && ops->strided_in_place != NULL && ops->strided_in_place(group);
        if (!in_place && (padded || outer > 1 || bare)) {
            int64_t need = (even || padded) ? n * piece : outer * len * inner;
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, need, "receive staging"));
            recv = ctx->stage_recv;
            pend->unpack3 = !bare;
        }
        if (padded) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, piece, "send staging"));
            if (!bare) {
                DTR_CHECK(dtr__m_zero(ctx, ctx->stage_send, piece));
                DTR_CHECK(dtr__m_copy3(ctx, src, sz[ci], 0, ctx->stage_send, c, 0, outer, sz[ci],
                                       inner));
            }
            send = ctx->stage_send;
        } else if (bare) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, outer * sz[ci] * inner,
                                   "send staging"));
            send = ctx->stage_send;
        }
        pend->outer = outer;
        pend->inner = inner;
        pend->dst_len = len;
        pend->npieces = n;
        if (!in_place && !bare && outer > 1 && out_numel > 0 && ctx->slice_bytes > 0 &&
            out_numel * item / DTR__SLICES_MIN >= ctx->slice_bytes &&
            (even || ops->all_gatherv != NULL)) {
            pend->unpack3 = false;
            pend->src = src;
            dtr__slice_setup(r, ctx->slice_bytes, sz, ci, even);
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, dtr__slice_stage(pend),
                                   "receive staging"));
            st = dtr__slice_issue(r);
            break;
        }
        if (strided) {
            st = ops->all_gather_strided(group, src, outer, c * inner, len * inner, dst, &r->breq);
            if (st == DTR_OK) {
                pend->unpack3 = false;
                break;
            }
            /* in place, nothing was staged to fall back on */
            if (st != DTR_ERR_UNSUPPORTED || in_place) return dtr__step_error(r, st);
        }
        if (even || padded) {
            pend->piece_len = c;
            st = ops->all_gather(group, send, piece, recv, &r->breq);
        } else {
            int64_t at = 0;
            for (int64_t m = 0; m < n; m++) {
                rc[m] = outer * sz[m] * inner;
                rd[m] = recv == dst ? of[m] * inner : at;
                at += rc[m];
            }
            pend->piece_len = -1; /* unpadded pieces: lengths from the chunk rule */
            st = ops->all_gatherv(group, send, outer * sz[ci] * inner, recv, rc, rd, &r->breq);
        }
        if (recv == dst) pend->unpack3 = false;
        break;
    }
    case DTR_STEP_REDUCE_SCATTER: {
        int d = s->tensor_dim;
        int64_t len = ish[d], outer = dtr__prod(ish, 0, d), inner_el = dtr__prod(ish, d + 1, nd);
        int64_t inner = inner_el * item;
        dtr__chunks(len, n, sz, of);
        bool even = dtr__all_equal(sz, n);
        bool padded = !even && ops->reduce_scatterv == NULL;
        int64_t c = sz[0];
        const void *send = src;
        void *recv = dst;
        if (padded || outer > 1 || bare) {
            int64_t need = padded ? n * outer * c * inner : in_numel * item;
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, need, "send staging"));
            send = ctx->stage_send;
            if (!bare) {
                if (padded) DTR_CHECK(dtr__m_zero(ctx, ctx->stage_send, need));
                int64_t at = 0;
                for (int64_t m = 0; m < n; m++) {
                    int64_t rows = padded ? c : sz[m];
                    DTR_CHECK(dtr__m_copy3(ctx, src, len, of[m], (char *)ctx->stage_send + at,
                                           rows, 0, outer, sz[m], inner));
                    at += outer * rows * inner;
                }
            }
        }
        if (padded || bare) {
            int64_t need = (padded ? c : sz[ci]) * outer * inner;
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, need, "receive staging"));
            recv = ctx->stage_recv;
            if (padded && !bare) {
                pend->unpack3 = true;
                pend->outer = outer;
                pend->inner = inner;
                pend->piece_len = c;
                pend->dst_len = sz[ci];
                pend->npieces = 1;
            }
        }
        if (even || padded) {
            st = ops->reduce_scatter(group, send, recv, outer * c * inner_el, dtype, op, &r->breq);
        } else {
            for (int64_t m = 0; m < n; m++) rc[m] = outer * sz[m] * inner_el;
            st = ops->reduce_scatterv(group, send, recv, rc, dtype, op, &r->breq);
        }
        break;
    }
    case DTR_STEP_ALL_REDUCE: {
        const void *send = src;
        void *recv = dst;
        if (bare) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, in_numel * item, "send staging"));
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, in_numel * item,
                                   "receive staging"));
            send = ctx->stage_send;
            recv = ctx->stage_recv;
        }
        st = ops->all_reduce(group, send, recv, in_numel, dtype, op, &r->breq);
        break;
    }
    case DTR_STEP_ALL_TO_ALL: {
        int ga = s->tensor_dim, sb = s->tensor_dim2;
        int64_t lb = ish[sb], ob = dtr__prod(ish, 0, sb), ib = dtr__prod(ish, sb + 1, nd) * item;
        int64_t la = osh[ga], oa = dtr__prod(osh, 0, ga), ia = dtr__prod(osh, ga + 1, nd) * item;
        /* send: my block's chunks along sb; receive: the members' chunks along ga. Equal
         * chunks both ways are a fact all members share. */
        int64_t *sza = rd, *ofa = rc; /* borrowed until the counts are filled in */
        dtr__chunks(la, n, sza, ofa);
        bool even = dtr__all_equal(sza, n);
        int64_t ca = sza[0];
        dtr__chunks(lb, n, sz, of);
        even = even && dtr__all_equal(sz, n);
        if (even && !bare && (ob > 1 || oa > 1) && ops->all_to_all_strided != NULL &&
            sz[0] > 0 && ca > 0) {
            /* the backend moves the other members' pieces; this member's own is a box copy,
             * written with streaming stores when the output is large */
            int64_t slo[DTR_MAX_TENSOR_DIMS] = {0}, dlo[DTR_MAX_TENSOR_DIMS] = {0};
            int64_t ext[DTR_MAX_TENSOR_DIMS];
            memcpy(ext, ish, sizeof(int64_t) * (size_t)nd);
            ext[sb] = sz[ci];
            slo[sb] = of[ci];
            dlo[ga] = ofa[ci];
            if (ctx->mem == NULL && out_numel * item >= DTR__STREAM_MIN_BYTES) {
                dtr__box_copy(nd, item, src, ish, slo, ext, dst, osh, dlo, dtr__stream_copy);
                dtr__stream_fence();
            } else {
                DTR_CHECK(dtr__m_box(ctx, nd, item, src, ish, slo, ext, dst, osh, dlo));
            }
            st = ops->all_to_all_strided(group, src, ob, sz[0] * ib, lb * ib, dst, oa, ca * ia,
                                         la * ia, &r->breq);
            if (st == DTR_OK) break;
            if (st != DTR_ERR_UNSUPPORTED) return dtr__step_error(r, st);
        }
        const void *send = src;
        int64_t at = 0;
        bool pack = ob > 1 || bare;
        if (pack) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, in_numel * item, "send staging"));
            send = ctx->stage_send;
        }
        for (int64_t m = 0; m < n; m++) {
            sc[m] = ob * sz[m] * ib;
            sd[m] = pack ? at : of[m] * ib;
            if (pack && !bare)
                DTR_CHECK(dtr__m_copy3(ctx, src, lb, of[m], (char *)ctx->stage_send + at, sz[m], 0,
                                       ob, sz[m], ib));
            at += sc[m];
        }
        dtr__chunks(la, n, sz, of);
        void *recv = dst;
        bool unpack = oa > 1 || bare;
        if (unpack) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, out_numel * item,
                                   "receive staging"));
            recv = ctx->stage_recv;
            pend->unpack3 = !bare;
            pend->outer = oa;
            pend->inner = ia;
            pend->dst_len = la;
            pend->piece_len = -1;
            pend->npieces = n;
        }
        at = 0;
        for (int64_t m = 0; m < n; m++) {
            rc[m] = oa * sz[m] * ia;
            rd[m] = unpack ? at : of[m] * ia;
            at += rc[m];
        }
        if (even && ops->all_to_all != NULL)
            st = ops->all_to_all(group, send, sc[0], recv, &r->breq);
        else
            st = ops->all_to_allv(group, send, sc, sd, recv, rc, rd, &r->breq);
        break;
    }
    case DTR_STEP_EXCHANGE: {
        /* Peers: the ranks that agree with me on every mesh dim "before" does not shard. */
        int mdims = pc->mdims;
        int64_t pcoord[DTR_MAX_MESH_DIMS], total_send = 0, total_recv = 0;
        for (int pass = 0; pass < 2; pass++) {
            int64_t at_s = 0, at_r = 0;
            memset(pcoord, 0, sizeof pcoord);
            for (int64_t p = 0; p < n; p++) {
                bool peer = true;
                for (int q = 0; q < mdims; q++)
                    if (s->before[q].kind != DTR_SHARD && pcoord[q] != r->m->coord[q]) peer = false;
                sc[p] = rc[p] = 0;
                if (peer) {
                    int64_t ps[DTR_MAX_TENSOR_DIMS], po[DTR_MAX_TENSOR_DIMS];
                    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
                    /* send: my "before" block ∩ the peer's "after" block */
                    dtr__layout(pc, s->after, pcoord, ps, po);
                    int64_t cnt = item * dtr__meet(nd, ioff, ish, po, ps, lo, ext);
                    sc[p] = cnt;
                    if (pass == 1 && cnt > 0 && !bare) {
                        int64_t zero[DTR_MAX_TENSOR_DIMS] = {0};
                        DTR_CHECK(dtr__m_box(ctx, nd, item, src, ish, lo, ext,
                                             (char *)ctx->stage_send + at_s, ext, zero));
                    }
                    /* receive: the peer's "before" block ∩ my "after" block */
                    dtr__layout(pc, s->before, pcoord, ps, po);
                    rc[p] = item * dtr__meet(nd, ooff, osh, po, ps, lo, ext);
                }
                sd[p] = at_s;
                rd[p] = at_r;
                at_s += sc[p];
                at_r += rc[p];
                for (int q = mdims - 1; q >= 0; q--) {
                    if (++pcoord[q] < pc->msize[q]) break;
                    pcoord[q] = 0;
                }
            }
            total_send = at_s;
            total_recv = at_r;
            if (pass == 0) {
                DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, total_send, "send staging"));
                DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, total_recv,
                                       "receive staging"));
            }
        }
        if (!bare && total_recv != out_numel * item)
            return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                              "step %d (exchange): pieces cover %lld of %lld bytes", k + 1,
                              (long long)total_recv, (long long)(out_numel * item));
        pend->unpack_exchange = !bare;
        st = ops->all_to_allv(group, ctx->stage_send, sc, sd, ctx->stage_recv, rc, rd, &r->breq);
        break;
    }
    case DTR_STEP_REDUCE_EXCHANGE: {
        /* Phase 1 (balance.c): member m reduces its home piece and its share of the foreign
         * pieces; every member packs its contributions to them in member order. */
        dtr__balance_t bal;
        dtr__balance_init(pc, s->before, s->after, i, r->m->coord, &bal);
        int64_t total = 0, most = 0;
        for (int64_t m = 0; m < n; m++) {
            __int128 h, dl, at, x;
            dtr__balance_member(&bal, m, &h, &dl);
            dtr__balance_share(&bal, m, &at, &x);
            rc[m] = (int64_t)(h + x);
            total += rc[m];
            if (rc[m] > most) most = rc[m];
        }
        if (total != in_numel)
            return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                              "step %d (reduce_exchange): the members' parts cover %lld of %lld "
                              "elements",
                              k + 1, (long long)total, (long long)in_numel);
        bool padded = ops->reduce_scatterv == NULL && !dtr__all_equal(rc, n);
        int64_t slot = padded ? most : -1;
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap,
                               (padded ? n * most : total) * item, "send staging"));
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, (padded ? most : rc[ci]) * item,
                               "receive staging"));
        if (!bare) {
            if (padded) DTR_CHECK(dtr__m_zero(ctx, ctx->stage_send, n * most * item));
            char *at = ctx->stage_send;
            int64_t mc[DTR_MAX_MESH_DIMS];
            memcpy(mc, r->m->coord, sizeof mc);
            for (int64_t m = 0; m < n; m++) {
                char *start = at;
                int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
                    ext[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
                mc[i] = m;
                dtr__layout(pc, s->after, mc, ts, to);
                int64_t h = dtr__meet(nd, ioff, ish, to, ts, lo, ext);
                if (h > 0) DTR_CHECK(dtr__m_box(ctx, nd, item, src, ish, lo, ext, at, ext, zero));
                at += h * item;
                __int128 sh0, x;
                dtr__balance_share(&bal, m, &sh0, &x);
                dtr__piece_iter_t it;
                int64_t u, v;
                dtr__pieces_begin(&bal, &it);
                while (dtr__pieces_in_share(&bal, &it, sh0, x, &u, &v)) {
                    DTR_CHECK(dtr__m_range(ctx, nd, item, (char *)src, ish, it.lo, it.ext, u, v,
                                           at, false));
                    at += (v - u) * item;
                }
                if (padded) at = start + most * item;
            }
        }
        pend->rx_deliver = true;
        pend->rx_divide = pend->divide;
        pend->divide = false;
        if (slot >= 0)
            st = ops->reduce_scatter(group, ctx->stage_send, ctx->stage_recv, slot, dtype, op,
                                     &r->breq);
        else if (dtr__all_equal(rc, n))
            st = ops->reduce_scatter(group, ctx->stage_send, ctx->stage_recv, rc[0], dtype, op,
                                     &r->breq);
        else
            st = ops->reduce_scatterv(group, ctx->stage_send, ctx->stage_recv, rc, dtype, op,
                                      &r->breq);
        break;
    }
    default:
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_redistribute", "plan->steps[%d].kind: %d",
                          k, (int)s->kind);
    }
    if (st != DTR_OK) return dtr__step_error(r, st);
    r->in_flight = true;
    r->t0 = dtr__now();
    return DTR_OK;
}

/* Unpacks the received pieces of an exchange into the step's output block. */
static dtr_status_t dtr__exchange_unpack(dtr_request_t *r) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int nd = pc->ndim, mdims = pc->mdims;
    int64_t item = pc->item, n = r->pend.n, at = 0;
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS], pcoord[DTR_MAX_MESH_DIMS] = {0};
    dtr__layout(pc, s->after, r->m->coord, osh, ooff);
    for (int64_t p = 0; p < n; p++) {
        bool peer = true;
        for (int q = 0; q < mdims; q++)
            if (s->before[q].kind != DTR_SHARD && pcoord[q] != r->m->coord[q]) peer = false;
        if (peer) {
            int64_t ps[DTR_MAX_TENSOR_DIMS], po[DTR_MAX_TENSOR_DIMS];
            int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS], cnt = item;
            int64_t zero[DTR_MAX_TENSOR_DIMS] = {0};
            dtr__layout(pc, s->before, pcoord, ps, po);
            cnt *= dtr__meet(nd, ooff, osh, po, ps, lo, ext);
            if (cnt > 0)
                DTR_CHECK(dtr__m_box(r->ctx, nd, item, (char *)r->ctx->stage_recv + at, ext, zero,
                                     ext, r->pend.dst, osh, lo));
            at += cnt;
        }
        for (int q = mdims - 1; q >= 0; q--) {
            if (++pcoord[q] < pc->msize[q]) break;
            pcoord[q] = 0;
        }
    }
    return DTR_OK;
}

/*
 * reduce_exchange, phase 2: what this rank receives from the other groups' members (the
 * parts of its target they reduced), in the order of the source groups and their members.
 * Fills the receive counts and displacements (bytes, by mesh position) and, in first, where
 * each part starts in the piece it belongs to (elements, row-major); returns the total.
 */
static int64_t dtr__rx_receives(dtr_request_t *r, int64_t *rc, int64_t *rd, int64_t *first) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int i = s->mesh_dim;
    int64_t item = pc->item, at = 0;
    const int64_t *me = r->m->coord;
    dtr__balance_t own;
    dtr__balance_init(pc, s->before, s->after, i, me, &own);
    bool inner[DTR_MAX_MESH_DIMS];
    int64_t g[DTR_MAX_MESH_DIMS];
    memcpy(g, me, (size_t)pc->mdims * sizeof *g);
    for (int j = 0; j < pc->mdims; j++) {
        inner[j] = own.serve[j] && j != i;
        if (inner[j]) g[j] = 0;
    }
    bool more = true;
    for (; more; more = dtr__next_coord(pc, inner, g)) {
        bool home = true;
        for (int j = 0; j < pc->mdims; j++) home = home && (j == i || g[j] == me[j]);
        if (home) continue;
        dtr__balance_t bal;
        dtr__balance_init(pc, s->before, s->after, i, g, &bal);
        __int128 pos, cnt;
        int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS], tlo[DTR_MAX_TENSOR_DIMS];
        if (!dtr__balance_find(&bal, me, &pos, &cnt, lo, ext, tlo)) continue;
        int64_t mc[DTR_MAX_MESH_DIMS];
        memcpy(mc, g, sizeof mc);
        for (int64_t m = 0; m < bal.n; m++) {
            __int128 sh0, x;
            dtr__balance_share(&bal, m, &sh0, &x);
            __int128 u = pos > sh0 ? pos : sh0, v = pos + cnt < sh0 + x ? pos + cnt : sh0 + x;
            if (v <= u) continue;
            mc[i] = m;
            int64_t peer = 0;
            for (int j = 0; j < pc->mdims; j++) peer = peer * pc->msize[j] + mc[j];
            rc[peer] = (int64_t)(v - u) * item;
            rd[peer] = at;
            first[peer] = (int64_t)(u - pos);
            at += rc[peer];
        }
    }
    return at;
}

/* reduce_exchange, after phase 2: each sender's part into the output block. The counts the
 * delivery was started with are still in the context's arrays (nothing runs in between);
 * a sender's group block meets this rank's target in the piece its part belongs to. */
static dtr_status_t dtr__rx_unpack(dtr_request_t *r) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int nd = pc->ndim;
    int64_t item = pc->item, ranks = dtr_mesh_nranks(pc->mesh);
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(r->ctx, ranks, a)); /* cannot fail: they hold ranks */
    const int64_t *rc = a[2], *rd = a[3], *first = a[4];
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS];
    dtr__layout(pc, s->after, r->m->coord, osh, ooff);
    int64_t pcoord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t p = 0; p < ranks; p++) {
        if (rc[p] > 0) {
            int64_t cs[DTR_MAX_TENSOR_DIMS], co[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
                ext[DTR_MAX_TENSOR_DIMS];
            dtr__layout(pc, s->before, pcoord, cs, co);
            dtr__meet(nd, ooff, osh, co, cs, lo, ext);
            DTR_CHECK(dtr__m_range(r->ctx, nd, item, r->pend.dst, osh, lo, ext, first[p],
                                   first[p] + rc[p] / item, (char *)r->ctx->stage_send + rd[p],
                                   true));
        }
        for (int q = pc->mdims - 1; q >= 0; q--) {
            if (++pcoord[q] < pc->msize[q]) break;
            pcoord[q] = 0;
        }
    }
    return DTR_OK;
}

/* reduce_exchange, phase 2: keep the home piece, send each part of the share to its owner. */
static dtr_status_t dtr__rx_deliver(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int i = s->mesh_dim, nd = pc->ndim;
    int64_t item = pc->item, ranks = dtr_mesh_nranks(pc->mesh);
    const int64_t *me = r->m->coord;
    dtr__balance_t bal;
    dtr__balance_init(pc, s->before, s->after, i, me, &bal);
    __int128 h, dl, sh0, x;
    dtr__balance_member(&bal, me[i], &h, &dl);
    dtr__balance_share(&bal, me[i], &sh0, &x);
    if (!r->bare) {
        if (r->pend.rx_divide)
            DTR_CHECK(dtr__m_divide(ctx, r->plan->src.dtype, ctx->stage_recv, ctx->stage_recv,
                                    (int64_t)(h + x), pc->msize[i]));
        int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
            ext[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
        dtr__layout(pc, s->after, me, osh, ooff);
        if (dtr__meet(nd, ooff, osh, bal.co, bal.cs, lo, ext) > 0)
            DTR_CHECK(dtr__m_box(ctx, nd, item, ctx->stage_recv, ext, zero, ext, r->pend.dst, osh,
                                 lo));
    }
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(ctx, ranks, a));
    int64_t *sc = a[0], *sd = a[1], *rc = a[2], *rd = a[3], *first = a[4];
    memset(sc, 0, (size_t)ranks * sizeof *sc);
    memset(sd, 0, (size_t)ranks * sizeof *sd);
    memset(rc, 0, (size_t)ranks * sizeof *rc);
    memset(rd, 0, (size_t)ranks * sizeof *rd);
    dtr__piece_iter_t it;
    int64_t u, v;
    dtr__pieces_begin(&bal, &it);
    while (dtr__pieces_in_share(&bal, &it, sh0, x, &u, &v)) {
        int64_t peer = 0;
        for (int j = 0; j < pc->mdims; j++) peer = peer * pc->msize[j] + it.coord[j];
        sc[peer] = (v - u) * item;
        sd[peer] = (int64_t)(it.pos + u - sh0) * item;
    }
    int64_t total = dtr__rx_receives(r, rc, rd, first);
    if (total != (int64_t)dl * item)
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                          "step %d (reduce_exchange): parts from other groups cover %lld of "
                          "%lld bytes",
                          r->step + 1, (long long)total, (long long)((int64_t)dl * item));
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, total, "receive staging"));
    r->pend.rx_unpack = !r->bare;
    r->group = r->m->all;
    dtr_status_t st = ctx->ops->all_to_allv(r->m->all, (char *)ctx->stage_recv + (int64_t)h * item,
                                            sc, sd, ctx->stage_send, rc, rd, &r->breq);
    if (st != DTR_OK) return dtr__step_error(r, st);
    r->in_flight = true;
    r->t0 = dtr__now();
    return DTR_OK;
}

/* After the step's operation completed: unpack and divide. */
static dtr_status_t dtr__step_finish(dtr_request_t *r) {
    dtr__pending_t *p = &r->pend;
    dtr_context_t *ctx = r->ctx;
    if (p->unpack3) {
        /* pieces back to back in stage_recv, each [outer, piece rows, inner] */
        const char *at = ctx->stage_recv;
        if (p->npieces == 1) { /* padded reduce-scatter: keep the first dst_len rows */
            DTR_CHECK(dtr__m_copy3(ctx, at, p->piece_len, 0, p->dst, p->dst_len, 0, p->outer,
                                   p->dst_len, p->inner));
        } else {
            for (int64_t m = 0; m < p->npieces; m++) {
                int64_t size, off;
                dtr_chunk(p->dst_len, p->npieces, m, &size, &off);
                int64_t rows = p->piece_len >= 0 ? p->piece_len : size;
                DTR_CHECK(dtr__m_copy3(ctx, at, rows, 0, p->dst, p->dst_len, off, p->outer, size,
                                       p->inner));
                at += p->outer * rows * p->inner;
            }
        }
    }
    if (p->slice) DTR_CHECK(dtr__slice_unpack(r));
    if (p->unpack_exchange) DTR_CHECK(dtr__exchange_unpack(r));
    if (p->rx_unpack) DTR_CHECK(dtr__rx_unpack(r));
    if (p->divide) DTR_CHECK(dtr__m_divide(ctx, r->plan->src.dtype, p->dst, p->dst, p->out_numel, p->n));
    return DTR_OK;
}

/* ---- requests --------------------------------------------------------------------- */

/* Advances as far as possible without blocking (or, with block, to the end). */
static dtr_status_t dtr__progress(dtr_request_t *r, bool block) {
    for (;;) {
        if (r->in_flight) {
            bool done = false;
            dtr_status_t st = dtr__poll(r->ctx, r->group, &r->breq, r->t0, block, &done);
            if (st == DTR_OK && !done) return DTR_OK;
            r->in_flight = false;
            if (st != DTR_OK) return dtr__step_error(r, st);
            if (r->phase == DTR__PHASE_AGREE) {
                dtr_status_t ast = dtr__agree_result(r->ctx, r->agree_recv);
                if (ast != DTR_OK) return dtr__step_error(r, ast);
                int64_t max_a = r->agree_recv[0], max_b = r->agree_recv[1];
                if (r->local_status != DTR_OK)
                    return dtr__error(r->local_status, "dtr_redistribute", "%s", r->local_msg);
                if (r->agree_recv[2] > 0)
                    return dtr__error(DTR_ERR_REMOTE, "dtr_redistribute",
                                      "rank %lld rejected its arguments (see its error); this "
                                      "rank's were good",
                                      (long long)(r->agree_recv[2] - 1));
                if (max_a != INT64_MAX - max_b) /* the max of h and of its complement: equal h everywhere */
                    return dtr__error(DTR_ERR_MISMATCH, "dtr_redistribute",
                                      "plan: the ranks of the mesh hold different plans (specs, "
                                      "strategy or steps differ) or their contexts different "
                                      "slice sizes (DTR_SLICE_BYTES)");
                r->phase = DTR__PHASE_STEPS;
                r->step = 0;
            } else {
                dtr_status_t fst = dtr__step_finish(r);
                if (fst != DTR_OK) return fst;
                if (r->pend.slice && dtr__slice_next(&r->pend)) {
                    dtr_status_t st2 = dtr__slice_issue(r);
                    if (st2 != DTR_OK) return dtr__step_error(r, st2);
                    r->in_flight = true;
                    r->t0 = dtr__now();
                    continue;
                }
                if (r->pend.rx_deliver) {
                    r->pend.rx_deliver = false;
                    dtr_status_t st2 = dtr__rx_deliver(r);
                    if (st2 != DTR_OK) return st2;
                    continue;
                }
                r->step++;
            }
        }
        if (r->phase == DTR__PHASE_STEPS) {
            if (r->step == 0 && r->last_real < 0 && !r->bare) /* nothing changes: the input */
                DTR_CHECK(dtr__m_copy(r->ctx, r->out, r->in, (int64_t)r->in_bytes));
            while (!r->in_flight && r->step < r->plan->nsteps) {
                dtr_status_t st = dtr__step_start(r);
                if (st != DTR_OK) return st;
                if (!r->in_flight) r->step++;
            }
            if (!r->in_flight) {
                r->phase = DTR__PHASE_DONE;
                return DTR_OK;
            }
        } else if (r->phase == DTR__PHASE_DONE) {
            return DTR_OK;
        }
    }
}

static bool dtr__overlap(const void *a, size_t na, const void *b, size_t nb) {
    if (na == 0 || nb == 0) return false;
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

/* Checks the arguments a rank can check alone; the message goes to r->local_msg. */
static dtr_status_t dtr__check_local(dtr_request_t *r, const void *in, size_t in_bytes,
                                     void *out, size_t out_bytes, const dtr_layout_t *src,
                                     const dtr_layout_t *dst) {
    const char *what = NULL;
    dtr_status_t st = DTR_ERR_INVALID_ARGUMENT;
    char buf[sizeof r->local_msg];
    if ((int64_t)in_bytes != src->bytes) {
        snprintf(buf, sizeof buf, "in_bytes: %zu, but this rank's source block is %lld bytes",
                 in_bytes, (long long)src->bytes);
        what = buf;
    } else if ((int64_t)out_bytes < dst->bytes) {
        st = DTR_ERR_BUFFER_TOO_SMALL;
        snprintf(buf, sizeof buf, "out_bytes: %zu, but this rank's target block is %lld bytes",
                 out_bytes, (long long)dst->bytes);
        what = buf;
    } else if (in == NULL && in_bytes > 0) {
        what = "in: must not be NULL";
    } else if (out == NULL && dst->bytes > 0) {
        what = "out: must not be NULL";
    } else if (dtr__overlap(in, in_bytes, out, (size_t)dst->bytes)) {
        what = "out: overlaps in (the input is never written, so they must be apart)";
    }
    if (what == NULL) return DTR_OK;
    snprintf(r->local_msg, sizeof r->local_msg, "%s", what);
    r->local_status = st;
    return st;
}

static dtr_status_t dtr__start(dtr_context_t *ctx, const dtr_plan_t *plan, const void *in,
                               size_t in_bytes, void *out, size_t out_bytes, bool bare,
                               dtr_request_t **req) {
    const char *func = bare ? "dtr_redistribute_baseline" : "dtr_redistribute";
    if (ctx == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ctx: must not be NULL");
    if (plan == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "plan: must not be NULL");
    if (plan->src.mesh == NULL || plan->nsteps < 0 || plan->nsteps > DTR_MAX_PLAN_STEPS ||
        plan->src.ndim < 0 || plan->src.ndim > DTR_MAX_TENSOR_DIMS ||
        (unsigned)plan->src.dtype >= DTR_DTYPE_LAST || plan->dst.mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "plan: not a plan from dtr_plan_create (mesh, step count or spec out "
                          "of range)");
    DTR_CHECK(dtr__check_alive(ctx, func));
    DTR_CHECK(dtr__check_memory(ctx, func));
    if (ctx->busy)
        return dtr__error(DTR_ERR_BUSY, func,
                          "ctx: a request is still in flight (complete it with "
                          "dtr_request_wait, or use another context)");
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(plan->src.mesh, ctx->rank, coord) != DTR_OK) {
        /* A bystander: the input is the result. */
        if (bare) {
            memset(&ctx->req, 0, sizeof ctx->req);
            ctx->req.ctx = ctx;
            ctx->req.phase = DTR__PHASE_DONE;
            ctx->busy = true;
            *req = &ctx->req;
            return DTR_OK;
        }
        if (in_bytes > out_bytes)
            return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, func,
                              "out_bytes: %zu; rank %d is outside the mesh and returns its "
                              "input (%zu bytes)",
                              out_bytes, ctx->rank, in_bytes);
        if (in_bytes > 0 && (in == NULL || out == NULL))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL",
                              in == NULL ? "in" : "out");
        if (in_bytes > 0 && in != out) {
            if (ctx->mem == NULL) {
                memmove(out, in, in_bytes);
            } else if (dtr__overlap(in, in_bytes, out, in_bytes)) {
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                                  "out: overlaps in (rank %d is outside the mesh and copies "
                                  "its input; on %s memory they must be equal or apart)",
                                  ctx->rank, ctx->mem->name);
            } else {
                DTR_CHECK(dtr__m_copy(ctx, out, in, (int64_t)in_bytes));
            }
        }
        memset(&ctx->req, 0, sizeof ctx->req);
        ctx->req.ctx = ctx;
        ctx->req.phase = DTR__PHASE_DONE;
        ctx->busy = true;
        *req = &ctx->req;
        return DTR_OK;
    }
    dtr_request_t *r = &ctx->req;
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->plan = plan;
    r->in = in;
    r->out = out;
    r->in_bytes = in_bytes;
    r->bare = bare;
    r->cur = in;
    dtr__ctx_init(&r->pctx, &plan->src, &plan->cost);
    r->last_real = -1;
    for (int k = 0; k < plan->nsteps; k++)
        if (!dtr__noop(r, k)) r->last_real = k;
    DTR_CHECK(dtr__mesh_entry(ctx, plan->src.mesh, coord, &r->m));
    if (!bare) {
        dtr_layout_t sl, dl;
        dtr_spec_layout_at(&plan->src, coord, &sl);
        dtr_spec_layout_at(&plan->dst, coord, &dl);
        dtr__check_local(r, in, in_bytes, out, out_bytes, &sl, &dl);
    }
    ctx->busy = true;
    *req = r;
    if (bare || r->m->all == NULL || !ctx->agree) {
        if (r->local_status != DTR_OK) {
            ctx->busy = false;
            return dtr__error(r->local_status, func, "%s", r->local_msg);
        }
        r->phase = DTR__PHASE_STEPS;
        return DTR_OK;
    }
    /* the slice size decides how many operations a gather takes: it must agree too */
    uint64_t h = dtr__plan_hash(plan) ^ ((uint64_t)ctx->slice_bytes * 0x9e3779b97f4a7c15ull);
    r->agree_send[0] = (int64_t)(h >> 1);
    r->agree_send[1] = INT64_MAX - (int64_t)(h >> 1);
    r->agree_send[2] = r->local_status != DTR_OK ? ctx->rank + 1 : 0;
    r->phase = DTR__PHASE_AGREE;
    r->group = r->m->all;
    int64_t *asend = r->agree_send, *arecv = r->agree_recv;
    dtr_status_t st = dtr__agree_buffers(ctx, asend, &asend, &arecv);
    if (st == DTR_OK)
        st = ctx->ops->all_reduce(r->m->all, asend, arecv, 3, DTR_I64, DTR_REDUCE_MAX, &r->breq);
    if (st != DTR_OK) {
        ctx->busy = false;
        return dtr__step_error(r, st);
    }
    r->in_flight = true;
    r->t0 = dtr__now();
    return DTR_OK;
}

dtr_status_t dtr_redistribute_start(dtr_context_t *ctx, const dtr_plan_t *plan, const void *in,
                                    size_t in_bytes, void *out, size_t out_bytes,
                                    dtr_request_t **req) {
    DTR_CHECK_PTR(req, __func__);
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__start(ctx, plan, in, in_bytes, out, out_bytes, false, &r));
    *req = r;
    return DTR_OK;
}

dtr_status_t dtr_request_test(dtr_request_t *req, bool *done) {
    DTR_CHECK_PTR(req, __func__);
    DTR_CHECK_PTR(done, __func__);
    if (req->ctx == NULL || !req->ctx->busy)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "req: not in flight (already completed and released)");
    dtr_status_t st = dtr__progress(req, false);
    if (st != DTR_OK || req->phase == DTR__PHASE_DONE) {
        req->ctx->busy = false;
        *done = true;
        return st;
    }
    *done = false;
    return DTR_OK;
}

dtr_status_t dtr_request_wait(dtr_request_t *req) {
    DTR_CHECK_PTR(req, __func__);
    if (req->ctx == NULL || !req->ctx->busy)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "req: not in flight (already completed and released)");
    dtr_status_t st = dtr__progress(req, true);
    req->ctx->busy = false;
    return st;
}

dtr_status_t dtr_redistribute(dtr_context_t *ctx, const dtr_plan_t *plan, const void *in,
                              size_t in_bytes, void *out, size_t out_bytes) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__start(ctx, plan, in, in_bytes, out, out_bytes, false, &r));
    return dtr_request_wait(r);
}

dtr_status_t dtr_redistribute_baseline(dtr_context_t *ctx, const dtr_plan_t *plan) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__start(ctx, plan, NULL, 0, NULL, 0, true, &r));
    return dtr_request_wait(r);
}

/* ---- collectives on a mesh's groups ----------------------------------------------- */

#define DTR__TAG_MASK 0x4d20

static dtr_status_t dtr__check_dims(const dtr_mesh_t *mesh, unsigned dims, const char *func) {
    if (mesh == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "mesh: must not be NULL");
    int nd = dtr_mesh_ndims(mesh);
    if ((dims >> nd) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "dims: 0x%x names a mesh dim past the %d of this mesh", dims, nd);
    return DTR_OK;
}

dtr_status_t dtr_mesh_group_size(const dtr_mesh_t *mesh, unsigned dims, int64_t *n) {
    DTR_CHECK_PTR(n, __func__);
    DTR_CHECK(dtr__check_dims(mesh, dims, __func__));
    int64_t size = 1;
    for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
        if (dims & (1u << i)) size *= dtr_mesh_size(mesh, i);
    *n = size;
    return DTR_OK;
}

dtr_status_t dtr_mesh_group_index(const dtr_mesh_t *mesh, unsigned dims, int rank,
                                  int64_t *index) {
    DTR_CHECK_PTR(index, __func__);
    DTR_CHECK(dtr__check_dims(mesh, dims, __func__));
    int64_t coord[DTR_MAX_MESH_DIMS], k = 0;
    if (dtr_mesh_coord(mesh, rank, coord) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "rank: %d is not on the mesh",
                          rank);
    for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
        if (dims & (1u << i)) k = k * dtr_mesh_size(mesh, i) + coord[i];
    *index = k;
    return DTR_OK;
}

/* This rank's group for `dims`: NULL for a group of one. */
static dtr_status_t dtr__dims_group(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    const char *func, void **group, int64_t *n) {
    int64_t coord[DTR_MAX_MESH_DIMS], c[DTR_MAX_MESH_DIMS];
    int nd = dtr_mesh_ndims(mesh);
    if (dtr_mesh_coord(mesh, ctx->rank, coord) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "mesh: rank %d (this process) is not on the mesh", ctx->rank);
    DTR_CHECK(dtr_mesh_group_size(mesh, dims, n));
    *group = NULL;
    if (*n == 1) return DTR_OK;
    int *ranks = malloc((size_t)*n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "rank list of %lld", (long long)*n);
    memcpy(c, coord, sizeof c);
    for (int i = 0; i < nd; i++)
        if (dims & (1u << i)) c[i] = 0;
    for (int64_t p = 0; p < *n; p++) {
        dtr_mesh_rank_at(mesh, c, &ranks[p]);
        for (int i = nd - 1; i >= 0; i--) {
            if (!(dims & (1u << i))) continue;
            if (++c[i] < dtr_mesh_size(mesh, i)) break;
            c[i] = 0;
        }
    }
    dtr_status_t st = dtr__group(ctx, ranks, (int)*n, DTR__TAG_MASK + (int)dims, group);
    free(ranks);
    return st;
}

/* One blocking backend operation (the context's gbreq), under the deadline. */
static dtr_status_t dtr__wait_op(dtr_context_t *ctx, void *group, dtr_status_t started) {
    if (started != DTR_OK) return started;
    bool done;
    return dtr__poll(ctx, group, &ctx->gbreq, dtr__now(), true, &done);
}

/* The agreement over a group: every member's hash equal and every member's own argument
 * check good, in one small all-reduce. */
static dtr_status_t dtr__agree_on(dtr_context_t *ctx, void *group, const char *func, uint64_t h,
                                  dtr_status_t local, const char *msg) {
    if (group == NULL || !ctx->agree) {
        if (local != DTR_OK) return dtr__error(local, func, "%s", msg);
        return DTR_OK;
    }
    int64_t *send = ctx->gsend, *recv = ctx->grecv, *dsend = send, *drecv = recv;
    send[0] = (int64_t)(h >> 1);
    send[1] = INT64_MAX - (int64_t)(h >> 1);
    send[2] = local != DTR_OK ? ctx->rank + 1 : 0;
    dtr_status_t st = dtr__agree_buffers(ctx, send, &dsend, &drecv);
    if (st == DTR_OK)
        st = dtr__wait_op(
            ctx, group,
            ctx->ops->all_reduce(group, dsend, drecv, 3, DTR_I64, DTR_REDUCE_MAX, &ctx->gbreq));
    if (st == DTR_OK) st = dtr__agree_result(ctx, recv);
    if (st != DTR_OK)
        return dtr__error(st, func, "argument agreement over the group: %s", dtr_last_error());
    if (local != DTR_OK) return dtr__error(local, func, "%s", msg);
    if (recv[2] > 0)
        return dtr__error(DTR_ERR_REMOTE, func,
                          "rank %lld rejected its arguments (see its error); this rank's were "
                          "good",
                          (long long)(recv[2] - 1));
    if (recv[0] != INT64_MAX - recv[1])
        return dtr__error(DTR_ERR_MISMATCH, func,
                          "the group's members called with different arguments (counts, "
                          "dtypes, ops, meshes or settings)");
    return DTR_OK;
}

/* The checks every group call starts with; *group and *n for `dims`. */
static dtr_status_t dtr__group_enter(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                     const char *func, void **group, int64_t *n) {
    if (ctx == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ctx: must not be NULL");
    DTR_CHECK(dtr__check_dims(mesh, dims, func));
    DTR_CHECK(dtr__check_alive(ctx, func));
    DTR_CHECK(dtr__check_memory(ctx, func));
    if (ctx->busy)
        return dtr__error(DTR_ERR_BUSY, func,
                          "ctx: a request is still in flight (complete it with "
                          "dtr_request_wait, or use another context)");
    return dtr__dims_group(ctx, mesh, dims, func, group, n);
}

dtr_status_t dtr__group_agree(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                              const char *func, uint64_t hash, dtr_status_t local,
                              const char *msg) {
    void *group;
    int64_t n;
    DTR_CHECK(dtr__group_enter(ctx, mesh, dims, func, &group, &n));
    return dtr__agree_on(ctx, group, func, dtr__fnv(dtr__mesh_hash(mesh), (int64_t)hash) ^ dims,
                         local, msg);
}

dtr_status_t dtr__group_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                               const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                               dtr_reduce_op_t op, bool scatter, bool agree) {
    const char *func = scatter ? "dtr_reduce_scatter" : "dtr_all_reduce";
    void *group;
    int64_t n;
    DTR_CHECK(dtr__group_enter(ctx, mesh, dims, func, &group, &n));

    /* What this rank can check alone; a bad argument still takes part in the agreement. */
    dtr_status_t local = DTR_ERR_INVALID_ARGUMENT;
    const char *msg = NULL;
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    int64_t item = info != NULL ? info->size : 1;
    int64_t send_count = scatter ? count * n : count;
    if (info == NULL) msg = "dtype: not a dtr_dtype_t";
    else if (info->storage_only) msg = "dtype: storage only (fp8), never reduced";
    else if ((unsigned)op >= DTR_REDUCE_OP_LAST) msg = "op: not a dtr_reduce_op_t";
    else if (count < 0) msg = "count: must be >= 0";
    else if (count > 0 && send == NULL) msg = "send: must not be NULL";
    else if (count > 0 && recv == NULL) msg = "recv: must not be NULL";
    else if (send != recv || scatter) {
        if (dtr__overlap(send, (size_t)(send_count * item), recv, (size_t)(count * item)))
            msg = scatter ? "recv: overlaps send" : "recv: overlaps send (pass send == recv for in place)";
    }
    if (msg == NULL) local = DTR_OK;
    if (agree) {
        uint64_t h = dtr__fnv(dtr__fnv(dtr__fnv(dtr__fnv(dtr__mesh_hash(mesh), dims), count),
                                       dtype),
                              op * 2 + scatter);
        DTR_CHECK(dtr__agree_on(ctx, group, func, h, local, msg));
    } else if (local != DTR_OK) {
        return dtr__error(local, func, "%s", msg);
    }
    if (group == NULL) {
        if (send != recv) DTR_CHECK(dtr__m_copy(ctx, recv, send, count * item));
        return DTR_OK;
    }
    if (count == 0) return DTR_OK; /* every member has 0: counts are agreed, or the caller's */
    if (send == recv) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, count * item, "in-place send"));
        DTR_CHECK(dtr__m_copy(ctx, ctx->stage_send, send, count * item));
        send = ctx->stage_send;
    }
    bool divide = op == DTR_REDUCE_AVG && !(ctx->ops->caps & DTR_BACKEND_CAP_AVG);
    dtr_reduce_op_t bop = divide ? DTR_REDUCE_SUM : op;
    dtr_status_t st =
        scatter ? ctx->ops->reduce_scatter(group, send, recv, count, dtype, bop, &ctx->gbreq)
                : ctx->ops->all_reduce(group, send, recv, count, dtype, bop, &ctx->gbreq);
    st = dtr__wait_op(ctx, group, st);
    if (st != DTR_OK) return dtr__error(st, func, "%s", dtr_last_error());
    if (divide) DTR_CHECK(dtr__m_divide(ctx, dtype, recv, recv, count, n));
    return DTR_OK;
}

dtr_status_t dtr_all_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                            const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                            dtr_reduce_op_t op) {
    return dtr__group_reduce(ctx, mesh, dims, send, recv, count, dtype, op, false, true);
}

dtr_status_t dtr_reduce_scatter(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                                dtr_reduce_op_t op) {
    return dtr__group_reduce(ctx, mesh, dims, send, recv, count, dtype, op, true, true);
}
