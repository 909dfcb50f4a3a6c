/* from_local / to_local backward and the tape (tape.h). */
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/common.h"
#include "runtime/group.h"

dtr_status_t dtr_to_local_backward(const dtr_spec_t *forward, const dtr_placement_t *grad_placements,
                                   dtr_spec_t *out) {
    DTR_CHECK_PTR(forward, __func__);
    DTR_CHECK_PTR(out, __func__);
    if (forward->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "forward: not initialised by dtr_spec_init");
    int n = dtr_mesh_ndims(forward->mesh);
    const dtr_placement_t *p = grad_placements != NULL ? grad_placements : forward->placements;
    dtr_spec_t s;
    dtr_status_t st = dtr_spec_init(&s, forward->mesh, p, n, forward->shape, forward->ndim,
                                    forward->dtype);
    if (st != DTR_OK)
        return dtr__error(st, __func__, "grad_placements: %s", dtr_last_error());
    *out = s;
    return DTR_OK;
}

dtr_status_t dtr_from_local_backward(const dtr_spec_t *forward, const dtr_spec_t *grad,
                                     const dtr_plan_options_t *opts, dtr_plan_t *out) {
    DTR_CHECK_AS(dtr_plan_backward(forward, grad, opts, out), __func__);
    return DTR_OK;
}

/* ---- the tape ----------------------------------------------------------------------- */

typedef enum { DTR__FROM_LOCAL = 0, DTR__REDISTRIBUTE, DTR__TO_LOCAL } dtr__kind_t;

typedef struct {
    dtr__kind_t kind;
    dtr_spec_t in, out; /* from_local: both the DTensor's spec */
    dtr_spec_t grad;    /* to_local: the gradient's spec */
} dtr__record_t;

struct dtr_tape {
    dtr_plan_options_t opts;
    dtr__record_t *recs;
    int n, cap;
    dtr_plan_t *plan; /* the backward plan being run */
};

dtr_status_t dtr_tape_create(const dtr_plan_options_t *opts, dtr_tape_t **out) {
    DTR_CHECK_PTR(out, __func__);
    dtr_tape_t *t = calloc(1, sizeof *t);
    if (t == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "tape");
    t->opts = (dtr_plan_options_t){.strategy = DTR_STRATEGY_OPTIMAL, .cost = NULL};
    if (opts != NULL) t->opts = *opts;
    t->plan = malloc(sizeof *t->plan);
    if (t->plan == NULL) {
        free(t);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "tape");
    }
    *out = t;
    return DTR_OK;
}

void dtr_tape_destroy(dtr_tape_t *tape) {
    if (tape == NULL) return;
    free(tape->recs);
    free(tape->plan);
    free(tape);
}

int dtr_tape_length(const dtr_tape_t *tape) { return tape != NULL ? tape->n : 0; }

static bool dtr__spec_equal(const dtr_spec_t *a, const dtr_spec_t *b) {
    if (!dtr_mesh_equal(a->mesh, b->mesh) || a->ndim != b->ndim || a->dtype != b->dtype)
        return false;
    for (int i = 0; i < dtr_mesh_ndims(a->mesh); i++)
        if (!dtr_placement_equal(a->placements[i], b->placements[i])) return false;
    return memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

/* Whether r can follow what the tape holds: the chain rule. */
static dtr_status_t dtr__can_record(const dtr_tape_t *t, const dtr__record_t *r,
                                    const char *func) {
    if (t->n > 0 && t->recs[t->n - 1].kind == DTR__TO_LOCAL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "tape: ends with to_local; nothing can be recorded after it");
    if (r->kind == DTR__FROM_LOCAL && t->n > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "tape: from_local must be the first record (the tape holds %d)", t->n);
    if (t->n > 0 && !dtr__spec_equal(&t->recs[t->n - 1].out, &r->in))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "the input is not the previous record's output (mesh, shape, "
                          "placements or dtype differ): the tape is a chain");
    return DTR_OK;
}

static dtr_status_t dtr__push(dtr_tape_t *t, const dtr__record_t *r, const char *func) {
    DTR_CHECK(dtr__can_record(t, r, func));
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        dtr__record_t *p = realloc(t->recs, (size_t)cap * sizeof *p);
        if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "tape of %d records", cap);
        t->recs = p;
        t->cap = cap;
    }
    t->recs[t->n++] = *r;
    return DTR_OK;
}

dtr_status_t dtr_tape_from_local(dtr_tape_t *tape, const dtr_spec_t *spec) {
    DTR_CHECK_PTR(tape, __func__);
    DTR_CHECK_PTR(spec, __func__);
    if (spec->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "spec: not initialised by dtr_spec_init");
    dtr__record_t r = {.kind = DTR__FROM_LOCAL, .in = *spec, .out = *spec};
    return dtr__push(tape, &r, __func__);
}

dtr_status_t dtr_tape_redistribute(dtr_tape_t *tape, dtr_context_t *ctx, const dtr_plan_t *plan,
                                   const void *in, size_t in_bytes, void *out, size_t out_bytes) {
    DTR_CHECK_PTR(tape, __func__);
    DTR_CHECK_PTR(plan, __func__);
    dtr__record_t r = {.kind = DTR__REDISTRIBUTE, .in = plan->src, .out = plan->dst};
    /* Check the chain before running, so a refused record has not moved data either. */
    DTR_CHECK(dtr__can_record(tape, &r, __func__));
    DTR_CHECK(dtr_redistribute(ctx, plan, in, in_bytes, out, out_bytes));
    return dtr__push(tape, &r, __func__);
}

dtr_status_t dtr_tape_to_local(dtr_tape_t *tape, const dtr_placement_t *grad_placements) {
    DTR_CHECK_PTR(tape, __func__);
    if (tape->n == 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "tape: empty; to_local needs a DTensor recorded before it");
    dtr__record_t r = {.kind = DTR__TO_LOCAL};
    r.in = r.out = tape->recs[tape->n - 1].out;
    DTR_CHECK(dtr_to_local_backward(&r.in, grad_placements, &r.grad));
    return dtr__push(tape, &r, __func__);
}

/* The two gradient buffers a backward alternates between, of the context's memory (host or
 * its space), held for one call. */
typedef struct {
    dtr_context_t *ctx;
    void *p[2];
    int64_t cap[2];
} dtr__tbufs_t;

static dtr_status_t dtr__grow(dtr__tbufs_t *b, int k, int64_t bytes) {
    if (bytes <= b->cap[k]) return DTR_OK;
    dtr__group_free(b->ctx, b->p[k]);
    b->p[k] = NULL;
    b->cap[k] = 0;
    DTR_CHECK(dtr__group_alloc(b->ctx, bytes, &b->p[k], "dtr_tape_backward"));
    b->cap[k] = bytes;
    return DTR_OK;
}

static dtr_status_t dtr__backward(dtr_tape_t *tape, dtr__tbufs_t *b, const void *grad,
                                  size_t grad_bytes, void *out, size_t out_bytes,
                                  dtr_spec_t *out_spec) {
    static const char func[] = "dtr_tape_backward";
    dtr_context_t *ctx = b->ctx;
    const dtr__record_t *last = &tape->recs[tape->n - 1];
    dtr_spec_t cur = last->kind == DTR__TO_LOCAL ? last->grad : last->out;
    const void *at = grad;
    size_t at_bytes = grad_bytes;
    int next = 0;
    int rank = dtr_context_rank(ctx);
    bool moved = false;
    for (int i = tape->n - 1; i >= 0; i--) {
        const dtr__record_t *r = &tape->recs[i];
        if (r->kind == DTR__TO_LOCAL) continue; /* its gradient spec is `cur` already */
        /* A redistribution's backward, or from_local's: both are the backward plan. */
        DTR_CHECK(dtr_plan_backward(&r->in, &cur, &tape->opts, tape->plan));
        dtr_layout_t l = {0};
        if (dtr_spec_layout(&tape->plan->dst, rank, &l) != DTR_OK) l.bytes = (int64_t)at_bytes;
        if (tape->plan->nsteps > 0) {
            DTR_CHECK(dtr__grow(b, next, l.bytes + 1));
            dtr_status_t st = dtr_redistribute(ctx, tape->plan, at, at_bytes, b->p[next],
                                               (size_t)l.bytes);
            if (st != DTR_OK)
                return dtr__error(st, func, "record %d (%s): %s", i + 1,
                                  r->kind == DTR__FROM_LOCAL ? "from_local" : "redistribute",
                                  dtr_last_error());
            at = b->p[next];
            at_bytes = (size_t)l.bytes;
            next ^= 1;
            moved = true;
        }
        cur = tape->plan->dst;
    }
    if (!moved) {
        /* No backward plan ran (and checked grad_bytes): check it here. */
        dtr_layout_t l = {0};
        if (dtr_spec_layout(&cur, rank, &l) == DTR_OK && (int64_t)grad_bytes != l.bytes)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "grad_bytes: %zu, but this rank's gradient block is %lld bytes",
                              grad_bytes, (long long)l.bytes);
        if (grad == NULL && grad_bytes > 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "grad: must not be NULL");
    }
    if (out_bytes < at_bytes)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, func,
                          "out_bytes: %zu, but this rank's input gradient is %zu bytes", out_bytes,
                          at_bytes);
    if (at_bytes > 0 && out == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "out: must not be NULL");
    if (at_bytes > 0 && out != at) {
        if (dtr__group_on_space(ctx)) {
            if (dtr__bytes_overlap(out, at_bytes, at, at_bytes))
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                                  "out: overlaps grad partly (pass the same buffer or separate ones)");
            DTR_CHECK(dtr__group_copy(ctx, out, at, (int64_t)at_bytes));
        } else {
            memmove(out, at, at_bytes);
        }
    }
    if (out_spec != NULL) *out_spec = cur;
    return DTR_OK;
}

dtr_status_t dtr_tape_backward(dtr_tape_t *tape, dtr_context_t *ctx, const void *grad,
                               size_t grad_bytes, void *out, size_t out_bytes,
                               dtr_spec_t *out_spec) {
    static const char func[] = "dtr_tape_backward";
    DTR_CHECK_PTR(tape, func);
    DTR_CHECK_PTR(ctx, func);
    if (tape->n == 0) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "tape: empty");
    dtr__tbufs_t b = {.ctx = ctx};
    dtr_status_t st = dtr__backward(tape, &b, grad, grad_bytes, out, out_bytes, out_spec);
    dtr__group_free(ctx, b.p[0]);
    dtr__group_free(ctx, b.p[1]);
    return st;
}
