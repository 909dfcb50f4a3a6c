/*
 * Contexts: a backend bound to the scratch memory, communicators and settings (deadline,
 * slice size, memory space) the executor reuses across calls. A context aborted by a
 * timeout is never freed: its backend may still complete an operation into its memory.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"

/* Aborted contexts: never freed (their backend operations may still complete into them),
 * kept reachable here so leak checkers see them as owned. */
static pthread_mutex_t dtr__aborted_lock = PTHREAD_MUTEX_INITIALIZER;
static dtr_context_t *dtr__aborted_list;

#define DTR__DEFAULT_SLICE_BYTES (1 << 20)

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

static void dtr__allocs_destroy(dtr_context_t *ctx);

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
    dtr__comms_destroy(ctx);
    dtr__m_free(ctx, ctx->buf[0]);
    dtr__m_free(ctx, ctx->buf[1]);
    dtr__m_free(ctx, ctx->stage_send);
    dtr__m_free(ctx, ctx->stage_recv);
    dtr__m_free(ctx, ctx->agree_dev);
    dtr__m_free(ctx, ctx->grad_scratch);
    dtr__m_free(ctx, ctx->cross_mid);
    dtr__m_free(ctx, ctx->cross_cast);
    free(ctx->arrays);
    dtr__allocs_destroy(ctx);
    if (ctx->exec != NULL) ctx->exec_free(ctx); /* before the memory space goes */
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
dtr_status_t dtr__check_memory(const dtr_context_t *ctx, const char *func) {
    if (!(ctx->ops->caps & DTR_BACKEND_CAP_DEVICE) || ctx->mem != NULL) return DTR_OK;
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                      "ctx: backend %s works on device memory, but the context's memory is "
                      "host (dtr_context_set_memory)",
                      ctx->ops->name != NULL ? ctx->ops->name : "unnamed");
}

const char *dtr_context_backend(const dtr_context_t *ctx) {
    return ctx != NULL && ctx->ops->name != NULL ? ctx->ops->name : "";
}

void *dtr_context_backend_state(const dtr_context_t *ctx, const dtr_backend_ops_t *ops) {
    if (ctx == NULL || ops == NULL) return NULL;
    if (ctx->ops != &ctx->staged_ops) return ctx->ops == ops ? ctx->state : NULL;
    const dtr_backend_ops_t *inner = NULL; /* the backend under a memory space's staging */
    void *state = dtr__staged_inner(ctx->state, &inner);
    return inner == ops ? state : NULL;
}

int dtr_context_rank(const dtr_context_t *ctx) { return ctx != NULL ? ctx->rank : -1; }

void dtr__context_tables(const dtr_context_t *ctx, const dtr_backend_ops_t **ops,
                         const dtr_memory_ops_t **mem, void **mem_state) {
    *ops = ctx->ops;
    *mem = ctx->mem;
    *mem_state = ctx->mem_state;
}

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
dtr_status_t dtr__check_alive(const dtr_context_t *ctx, const char *func) {
    if (!ctx->aborted) return DTR_OK;
    return dtr__error(DTR_ERR_ABORTED, func,
                      "ctx: aborted by an earlier timeout (%s); its operations may still be "
                      "pending: destroy it, and end or rebuild the job",
                      ctx->abort_msg);
}

dtr_status_t dtr__check_ready(const dtr_context_t *ctx, const char *func) {
    DTR_CHECK(dtr__check_alive(ctx, func));
    DTR_CHECK(dtr__check_memory(ctx, func));
    if (ctx->busy)
        return dtr__error(DTR_ERR_BUSY, func,
                          "ctx: a request is still in flight (complete it with "
                          "dtr_request_wait, or use another context)");
    return DTR_OK;
}

int64_t dtr_context_scratch_bytes(const dtr_context_t *ctx) {
    if (ctx == NULL) return 0;
    return ctx->buf_cap[0] + ctx->buf_cap[1] + ctx->send_cap + ctx->recv_cap +
           ctx->arrays_cap * 6 * (int64_t)sizeof(int64_t) + ctx->cross_mid_cap +
           ctx->cross_cast_cap;
}

/* ---- dtr_context_alloc and dtr_context_free: the backend's memory where it has its own
 * allocator, else the memory space's or the host's, remembered here so that free can tell
 * them apart and refuse a pointer the context never returned. */

typedef struct dtr__alloc {
    void *p;
    const dtr_memory_ops_t *mem; /* the space it came from; NULL: the host's heap */
    void *mem_state;
    struct dtr__alloc *next;
} dtr__alloc_t;

/* Frees an allocation and its record (from the space it came from, or the heap). */
static void dtr__alloc_release(dtr__alloc_t *a) {
    if (a->mem != NULL)
        a->mem->free(a->mem_state, a->p);
    else
        free(a->p);
    free(a);
}

dtr_status_t dtr_context_alloc(dtr_context_t *ctx, int64_t bytes, void **p) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(p, __func__);
    if (bytes < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "bytes: %lld, must be at least 1",
                          (long long)bytes);
    DTR_CHECK(dtr__check_alive(ctx, __func__));
    if (ctx->busy)
        return dtr__error(DTR_ERR_BUSY, __func__,
                          "ctx: an operation is in flight on it (allocating is collective)");
    if (ctx->mem == NULL && ctx->ops->mem_alloc != NULL)
        return ctx->ops->mem_alloc(ctx->state, bytes, p); /* its errors name the call */
    dtr__alloc_t *a = malloc(sizeof *a);
    if (a == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "allocation record");
    *a = (dtr__alloc_t){.mem = ctx->mem, .mem_state = ctx->mem_state, .next = ctx->allocs};
    dtr_status_t st = DTR_OK;
    if (ctx->mem != NULL) {
        st = ctx->mem->alloc(ctx->mem_state, bytes, &a->p);
    } else {
        a->p = aligned_alloc(64, (size_t)((bytes + 63) & ~(int64_t)63));
        if (a->p == NULL)
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "bytes: %lld", (long long)bytes);
    }
    if (st != DTR_OK) {
        free(a);
        return st;
    }
    ctx->allocs = a;
    *p = a->p;
    return DTR_OK;
}

dtr_status_t dtr_context_free(dtr_context_t *ctx, void *p) {
    DTR_CHECK_PTR(ctx, __func__);
    if (p == NULL) return DTR_OK;
    for (dtr__alloc_t **at = &ctx->allocs; *at != NULL; at = &(*at)->next) {
        dtr__alloc_t *a = *at;
        if (a->p != p) continue;
        *at = a->next;
        dtr__alloc_release(a);
        return DTR_OK;
    }
    if (ctx->ops->mem_free != NULL && ctx->ops->mem_free(ctx->state, p)) return DTR_OK;
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                      "p: %p was not returned by dtr_context_alloc on this context (or was "
                      "freed already)",
                      p);
}

static void dtr__allocs_destroy(dtr_context_t *ctx) {
    while (ctx->allocs != NULL) {
        dtr__alloc_t *a = ctx->allocs;
        ctx->allocs = a->next;
        dtr__alloc_release(a);
    }
}
