/*
 * Batches: dtr_redistribute_batch and friends. A batch's request runs its rounds in order
 * (planner.h says how they are chosen): before a round, each of its members runs the local
 * steps that precede its step there; a coalesced round then packs, starts one collective
 * and unpacks (batch_round.c); a member-by-member round (reduce_exchange) runs each member's
 * step as its own plan would. After the last round every member runs its remaining local
 * steps. Member steps run through the same step code as plans (steps.c), so each member
 * gets exactly its plan's result; AVG is always SUM then one divide, so that members of one
 * coalesced reduction share its op.
 *
 * One argument agreement covers the batch: every member plan's hash and every member's
 * buffers, in one small all-reduce over the mesh before any data moves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/executor/internal.h"

#define DTR__FUNC "dtr_redistribute_batch"
#define DTR__ARENA_ALIGN 64

/* The plan's hash (computed once, by dtr_batch_plan_create) and the slice size, which
 * decides how the members' own steps run. */
static uint64_t dtr__batch_hash(const dtr_context_t *ctx, const dtr_batch_plan_t *p) {
    return dtr__fnv(p->hash, (uint64_t)ctx->slice_bytes);
}

/* This rank's own checks of member t's sizes and pointers; the message into b->local_msg. */
static void dtr__check_member(dtr__batch_t *b, int t, size_t out_bytes) {
    const dtr__member_t *mm = &b->mem[t];
    size_t in_bytes = b->in_bytes[t];
    char *msg = b->local_msg;
    size_t len = sizeof b->local_msg;
    dtr_status_t st = DTR_ERR_INVALID_ARGUMENT;
    if ((int64_t)in_bytes != mm->src_bytes) {
        snprintf(msg, len, "in_bytes[%d]: %zu, but this rank's source block of tensor %d is %lld "
                 "bytes", t, in_bytes, t, (long long)mm->src_bytes);
    } else if ((int64_t)out_bytes < mm->dst_bytes) {
        st = DTR_ERR_BUFFER_TOO_SMALL;
        snprintf(msg, len, "out_bytes[%d]: %zu, but this rank's target block of tensor %d is %lld "
                 "bytes", t, out_bytes, t, (long long)mm->dst_bytes);
    } else if (b->in[t] == NULL && in_bytes > 0) {
        snprintf(msg, len, "in[%d]: must not be NULL", t);
    } else if (b->out[t] == NULL && mm->dst_bytes > 0) {
        snprintf(msg, len, "out[%d]: must not be NULL", t);
    }
    if (msg[0] != '\0') b->local_status = st;
}

/* A buffer of the call, for the overlap sweep. */
typedef struct {
    uintptr_t lo, hi;
    int t;
    bool out;
} dtr__span_t;

static int dtr__span_cmp(const void *x, const void *y) {
    const dtr__span_t *a = x, *b = y;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* No output may share a byte with an input or another output (inputs may share: they are
 * only read). One sweep over the buffers sorted by address, O(T log T): an output that
 * starts before the furthest end seen overlaps something, and so does any buffer that
 * starts before the furthest end of an output. */
static void dtr__check_overlaps(dtr__batch_t *b) {
    int n = b->plan->ntensors, m = 0;
    dtr__span_t *sp = malloc(sizeof *sp * 2 * (size_t)n);
    if (sp == NULL) {
        snprintf(b->local_msg, sizeof b->local_msg, "out of memory checking %d buffers", 2 * n);
        b->local_status = DTR_ERR_OUT_OF_MEMORY;
        return;
    }
    for (int t = 0; t < n; t++) {
        if (b->in_bytes[t] > 0)
            sp[m++] = (dtr__span_t){(uintptr_t)b->in[t], (uintptr_t)b->in[t] + b->in_bytes[t], t, false};
        int64_t dst_bytes = b->mem[t].dst_bytes; /* the bytes the call writes */
        if (dst_bytes > 0)
            sp[m++] = (dtr__span_t){(uintptr_t)b->out[t], (uintptr_t)b->out[t] + (size_t)dst_bytes,
                                    t, true};
    }
    qsort(sp, (size_t)m, sizeof *sp, dtr__span_cmp);
    int far_all = -1, far_out = -1; /* the spans reaching furthest: any, and outputs */
    for (int k = 0; k < m; k++) {
        int other = -1;
        if (sp[k].out && far_all >= 0 && sp[k].lo < sp[far_all].hi) other = far_all;
        else if (far_out >= 0 && sp[k].lo < sp[far_out].hi) other = far_out;
        if (other >= 0) {
            const dtr__span_t *o = sp[k].out ? &sp[k] : &sp[other];
            const dtr__span_t *x = sp[k].out ? &sp[other] : &sp[k];
            snprintf(b->local_msg, sizeof b->local_msg, "out[%d]: overlaps %s[%d] (outputs must "
                     "be apart from every input and output)", o->t, x->out ? "out" : "in", x->t);
            b->local_status = DTR_ERR_INVALID_ARGUMENT;
            break;
        }
        if (far_all < 0 || sp[k].hi > sp[far_all].hi) far_all = k;
        if (sp[k].out && (far_out < 0 || sp[k].hi > sp[far_out].hi)) far_out = k;
    }
    free(sp);
}

/* Checks what this rank can check alone: every member, then the overlaps. */
static void dtr__check_members(dtr__batch_t *b, const size_t *out_bytes) {
    for (int t = 0; t < b->plan->ntensors && b->local_status == DTR_OK; t++)
        dtr__check_member(b, t, out_bytes[t]);
    if (b->local_status == DTR_OK) dtr__check_overlaps(b);
}

/* What the plan fixes for this rank's members (dtr__member_t's fixed part, numbers only):
 * their last real step, step buffer sizes and block sizes, and room for the largest round.
 * Derived on the first call with a plan and kept while calls bring the same plan (the
 * same address and hash, so the same content): a framework runs one batch plan every
 * step. */
static dtr_status_t dtr__batch_fix(dtr_context_t *ctx, dtr__batch_t *b, const int64_t *coord) {
    const dtr_batch_plan_t *p = b->plan;
    if (b->fixed_plan == p && b->fixed_hash == p->hash) return DTR_OK;
    b->fixed_plan = NULL;
    if (b->mem_cap < p->ntensors) {
        dtr__member_t *m = realloc(b->mem, sizeof *m * (size_t)p->ntensors);
        if (m == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "state of %d tensors", p->ntensors);
        b->mem = m;
        b->mem_cap = p->ntensors;
    }
    int most = 1;
    for (int r = 0; r < p->nrounds; r++)
        if (p->rounds[r].count > most) most = p->rounds[r].count;
    if (b->rm_cap < most) {
        dtr__round_member_t *rm = realloc(b->rm, sizeof *rm * (size_t)most);
        if (rm == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "a round of %d tensors", most);
        b->rm = rm;
        b->rm_cap = most;
    }
    int64_t total = 0;
    for (int t = 0; t < p->ntensors; t++) {
        dtr__member_t *mm = &b->mem[t];
        memset(mm, 0, sizeof *mm);
        dtr__ctx_init(&mm->pctx, &p->plans[t].src, &p->plans[t].cost);
        dtr__member_request(ctx, b, t, 0); /* for the no-op test */
        mm->last_real = -1;
        for (int k = 0; k < p->plans[t].nsteps; k++) {
            b->solo.pctx = mm->pctx;
            if (!dtr__step_noop(&b->solo, k)) mm->last_real = k;
        }
        int64_t size = 0;
        for (int k = 0; k < mm->last_real; k++) {
            const dtr_step_t *s = &p->plans[t].steps[k];
            int64_t bytes = dtr__prod(s->shape_after, 0, p->plans[t].src.ndim) * mm->pctx.item;
            if (bytes > size) size = bytes;
        }
        mm->buf_bytes = (size + DTR__ARENA_ALIGN - 1) / DTR__ARENA_ALIGN * DTR__ARENA_ALIGN;
        total += 2 * mm->buf_bytes;
        dtr_layout_t sl, dl;
        dtr_spec_layout_at(&p->plans[t].src, coord, &sl);
        dtr_spec_layout_at(&p->plans[t].dst, coord, &dl);
        mm->src_bytes = sl.bytes;
        mm->dst_bytes = dl.bytes;
    }
    b->fixed_arena = total;
    b->fixed_plan = p;
    b->fixed_hash = p->hash;
    return DTR_OK;
}

/* This call's member state: the fixed part (dtr__batch_fix), the step buffers (the arena)
 * and where each block starts. */
static dtr_status_t dtr__batch_members(dtr_context_t *ctx, dtr__batch_t *b, const int64_t *coord) {
    const dtr_batch_plan_t *p = b->plan;
    DTR_CHECK(dtr__batch_fix(ctx, b, coord));
    if (!b->bare)
        DTR_CHECK(dtr__reserve(ctx, &b->arena, &b->arena_cap, b->fixed_arena,
                               "batch step buffers"));
    int64_t at = 0;
    for (int t = 0; t < p->ntensors; t++) {
        dtr__member_t *mm = &b->mem[t];
        dtr__ctx_init(&mm->pctx, &p->plans[t].src, &p->plans[t].cost); /* (pointers: not kept) */
        mm->cur = b->in != NULL ? b->in[t] : NULL;
        mm->next = 0;
        mm->buf[0] = mm->buf[1] = NULL;
        if (b->bare || mm->buf_bytes == 0) continue;
        mm->buf[0] = (char *)b->arena + at;
        mm->buf[1] = (char *)b->arena + at + mm->buf_bytes;
        at += 2 * mm->buf_bytes;
    }
    return DTR_OK;
}

/* Member t runs its step k as in its own plan; b->solo_active while its operation is in
 * flight. */
static dtr_status_t dtr__solo_start(dtr_context_t *ctx, dtr__batch_t *b, int t, int k) {
    dtr__member_request(ctx, b, t, k);
    dtr_status_t st = dtr__step_start(&b->solo);
    if (st != DTR_OK) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dtr_last_error());
        return dtr__error(st, DTR__FUNC, "tensor %d: %s", t, detail);
    }
    b->solo_t = t;
    b->solo_active = b->solo.in_flight;
    if (!b->solo_active) {
        b->mem[t].cur = b->solo.cur;
        b->mem[t].next = k + 1;
    }
    return DTR_OK;
}

static dtr_status_t dtr__solo_poll(dtr__batch_t *b, bool block, bool *done) {
    dtr_status_t st = dtr__step_poll(&b->solo, block, done);
    if (st != DTR_OK) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dtr_last_error());
        b->solo_active = false;
        return dtr__error(st, DTR__FUNC, "tensor %d: %s", b->solo_t, detail);
    }
    if (*done) {
        b->solo_active = false;
        b->mem[b->solo_t].cur = b->solo.cur;
        b->mem[b->solo_t].next = b->solo.step + 1;
    }
    return DTR_OK;
}

/* Starts the next thing of the round under way; *started when an operation went in flight.
 * Advances b->round past a finished member-by-member round. */
static dtr_status_t dtr__round_next(dtr_context_t *ctx, dtr__batch_t *b) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    if (b->stage == DTR__STAGE_BEFORE) {
        /* each member's local steps before its step in this round */
        for (; b->j < rd->count; b->j++) {
            const dtr_batch_item_t *it = &b->plan->items[rd->first + b->j];
            while (!b->bare && b->mem[it->tensor].next < it->step) {
                DTR_CHECK(dtr__solo_start(ctx, b, it->tensor, b->mem[it->tensor].next));
                if (b->solo_active) return DTR_OK;
            }
        }
        b->j = 0;
        b->stage = rd->coalesced ? DTR__STAGE_ISSUE : DTR__STAGE_SOLO;
    }
    if (b->stage == DTR__STAGE_ISSUE) return dtr__round_issue(ctx, b);
    for (; b->j < rd->count; b->j++) {
        const dtr_batch_item_t *it = &b->plan->items[rd->first + b->j];
        if (b->mem[it->tensor].next > it->step) continue; /* (done: its operation completed) */
        DTR_CHECK(dtr__solo_start(ctx, b, it->tensor, it->step));
        if (b->solo_active) return DTR_OK;
    }
    b->round++;
    b->j = 0;
    b->stage = DTR__STAGE_BEFORE;
    return DTR_OK;
}

/* After the rounds: every member's remaining local steps, or its copy when it has none. */
static dtr_status_t dtr__tail(dtr_context_t *ctx, dtr__batch_t *b, bool *finished) {
    *finished = false;
    for (; b->tail < b->plan->ntensors; b->tail++) {
        int t = b->tail;
        const dtr_plan_t *p = &b->plan->plans[t];
        dtr__member_t *mm = &b->mem[t];
        if (mm->last_real < 0 && mm->next == 0 && b->in_bytes[t] > 0) {
            DTR_CHECK(dtr__m_copy(ctx, b->out[t], b->in[t], (int64_t)b->in_bytes[t]));
            mm->next = p->nsteps;
        }
        while (mm->next < p->nsteps) {
            DTR_CHECK(dtr__solo_start(ctx, b, t, mm->next));
            if (b->solo_active) return DTR_OK;
        }
    }
    *finished = true;
    return DTR_OK;
}

static dtr_status_t dtr__batch_agreement(dtr_request_t *r, dtr__batch_t *b, bool block,
                                         bool *done) {
    dtr_status_t st = dtr__poll(r->ctx, b->m->all, &b->abreq, b->at0, block, done);
    if (st == DTR_OK && !*done) return DTR_OK;
    b->agreeing = false;
    *done = true;
    if (st != DTR_OK) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dtr_last_error());
        return dtr__error(st, DTR__FUNC, "argument agreement over the mesh: %s", detail);
    }
    DTR_CHECK(dtr__agree_done(r->ctx, b->agree_recv));
    return dtr__agree_verdict(b->agree_recv, DTR__FUNC, b->local_status, b->local_msg,
                              "plan: the ranks of the mesh hold different batches (tensors, "
                              "specs, strategy or rounds differ) or their contexts different "
                              "slice sizes (DTR_SLICE_BYTES)");
}

/* The batch request's progress (dtr_request_test and _wait call it). */
static dtr_status_t dtr__batch_progress(dtr_request_t *r, bool block) {
    dtr_context_t *ctx = r->ctx;
    dtr__batch_t *b = ((dtr__exec_t *)ctx->exec)->batch;
    if (r->phase == DTR__PHASE_DONE) return DTR_OK; /* a bystander's */
    for (;;) {
        bool done = false;
        if (b->agreeing) {
            DTR_CHECK(dtr__batch_agreement(r, b, block, &done));
            if (!done) return DTR_OK;
        }
        if (b->solo_active) {
            DTR_CHECK(dtr__solo_poll(b, block, &done));
            if (!done) return DTR_OK;
        }
        if (b->in_flight) {
            dtr_status_t st = dtr__poll(ctx, b->group, &b->breq, b->t0, block, &done);
            if (st == DTR_OK && !done) return DTR_OK;
            b->in_flight = false;
            if (st != DTR_OK) return dtr__round_error(b, st);
            DTR_CHECK(dtr__round_finish(ctx, b));
            b->round++;
            b->j = 0;
            b->stage = DTR__STAGE_BEFORE;
        }
        if (b->round < b->plan->nrounds) {
            DTR_CHECK(dtr__round_next(ctx, b));
            continue;
        }
        bool finished = true;
        if (!b->bare) DTR_CHECK(dtr__tail(ctx, b, &finished));
        if (!finished) continue;
        r->phase = DTR__PHASE_DONE;
        return DTR_OK;
    }
}

/* A rank outside the mesh: every input is its output. */
static dtr_status_t dtr__batch_bystander(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                         const void *const *in, const size_t *in_bytes,
                                         void *const *out, const size_t *out_bytes) {
    for (int t = 0; t < plan->ntensors; t++) {
        if (in_bytes[t] > out_bytes[t])
            return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, DTR__FUNC,
                              "out_bytes[%d]: %zu; rank %d is outside the mesh and returns its "
                              "input (%zu bytes)",
                              t, out_bytes[t], ctx->rank, in_bytes[t]);
        if (in_bytes[t] > 0 && (in[t] == NULL || out[t] == NULL))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC, "%s[%d]: must not be NULL",
                              in[t] == NULL ? "in" : "out", t);
    }
    for (int t = 0; t < plan->ntensors; t++)
        if (in_bytes[t] > 0 && in[t] != out[t])
            DTR_CHECK(dtr__m_copy(ctx, out[t], in[t], (int64_t)in_bytes[t]));
    return DTR_OK;
}

static dtr_status_t dtr__batch_args(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                    const void *const *in, const size_t *in_bytes,
                                    void *const *out, const size_t *out_bytes, bool bare) {
    if (ctx == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC, "ctx: must not be NULL");
    if (plan == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC, "plan: must not be NULL");
    if (plan->ntensors <= 0 || plan->plans == NULL || plan->nrounds < 0 ||
        (plan->nrounds > 0 && (plan->rounds == NULL || plan->items == NULL)))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC,
                          "plan: not a batch from dtr_batch_plan_create");
    if (!bare && (in == NULL || in_bytes == NULL || out == NULL || out_bytes == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC, "%s: must not be NULL (one entry "
                          "per tensor)", in == NULL ? "in" : in_bytes == NULL ? "in_bytes"
                          : out == NULL ? "out" : "out_bytes");
    DTR_CHECK(dtr__check_ready(ctx, DTR__FUNC));
    dtr__exec_t *e = NULL;
    DTR_CHECK(dtr__exec(ctx, DTR__FUNC, &e));
    if (e->batch == NULL && (e->batch = calloc(1, sizeof *e->batch)) == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "batch state");
    return DTR_OK;
}

static dtr_status_t dtr__batch_start(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                     const void *const *in, const size_t *in_bytes,
                                     void *const *out, const size_t *out_bytes, bool bare,
                                     dtr_request_t **req) {
    DTR_CHECK(dtr__batch_args(ctx, plan, in, in_bytes, out, out_bytes, bare));
    dtr__exec_t *e = ctx->exec; /* made by dtr__batch_args */
    dtr_request_t *r = &e->req;
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->progress = dtr__batch_progress;
    int64_t coord[DTR_MAX_MESH_DIMS];
    const dtr_mesh_t *mesh = plan->plans[0].src.mesh;
    if (dtr_mesh_coord(mesh, ctx->rank, coord) != DTR_OK) {
        if (!bare) DTR_CHECK(dtr__batch_bystander(ctx, plan, in, in_bytes, out, out_bytes));
        r->phase = DTR__PHASE_DONE;
        ctx->busy = true;
        *req = r;
        return DTR_OK;
    }
    dtr__batch_t *b = e->batch;
    /* keep what the state owns (buffers) and what the plan fixed, reset the rest */
    *b = (dtr__batch_t){.plan = plan, .in = in, .in_bytes = in_bytes, .out = out, .bare = bare,
                        .mem = b->mem, .mem_cap = b->mem_cap, .rm = b->rm, .rm_cap = b->rm_cap,
                        .fixed_plan = b->fixed_plan, .fixed_hash = b->fixed_hash,
                        .fixed_arena = b->fixed_arena,
                        .arena = b->arena, .arena_cap = b->arena_cap, .span = b->span,
                        .span_cap = b->span_cap};
    DTR_CHECK(dtr__mesh_entry(ctx, mesh, coord, &b->m));
    DTR_CHECK(dtr__batch_members(ctx, b, coord));
    if (!bare) dtr__check_members(b, out_bytes);
    r->phase = DTR__PHASE_STEPS;
    if (bare || b->m->all == NULL || !ctx->agree) {
        if (b->local_status != DTR_OK)
            return dtr__error(b->local_status, DTR__FUNC, "%s", b->local_msg);
    } else {
        dtr__agree_fill(b->agree_send, dtr__batch_hash(ctx, plan), ctx->rank, b->local_status);
        dtr_status_t st = dtr__agree_start(ctx, b->m->all, b->agree_send, b->agree_recv,
                                           &b->abreq);
        if (st != DTR_OK)
            return dtr__error(st, DTR__FUNC, "argument agreement over the mesh: %s",
                              dtr_last_error());
        b->agreeing = true;
        b->at0 = dtr__now();
    }
    ctx->busy = true;
    *req = r;
    return DTR_OK;
}

dtr_status_t dtr_redistribute_batch_start(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                          const void *const *in, const size_t *in_bytes,
                                          void *const *out, const size_t *out_bytes,
                                          dtr_request_t **req) {
    DTR_CHECK_PTR(req, __func__);
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__batch_start(ctx, plan, in, in_bytes, out, out_bytes, false, &r));
    *req = r;
    return DTR_OK;
}

dtr_status_t dtr_redistribute_batch(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                    const void *const *in, const size_t *in_bytes,
                                    void *const *out, const size_t *out_bytes) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__batch_start(ctx, plan, in, in_bytes, out, out_bytes, false, &r));
    return dtr_request_wait(r);
}

dtr_status_t dtr_redistribute_batch_baseline(dtr_context_t *ctx, const dtr_batch_plan_t *plan) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__batch_start(ctx, plan, NULL, NULL, NULL, NULL, true, &r));
    return dtr_request_wait(r);
}
