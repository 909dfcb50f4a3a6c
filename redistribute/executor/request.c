/*
 * Requests: a request is a small state machine. Phase "agree" runs one all-reduce of the
 * plan's hash and of the ranks' argument checks over the mesh (runtime/agree.c); then one phase per
 * step, started and finished through the table of step kinds (steps.c), which this file
 * knows no kind of by name. A collective step's operation completes under the context's
 * deadline: polled here with the backend's test, so a peer that never joins makes this
 * rank fail with DTR_ERR_TIMEOUT instead of waiting forever. The operation is then still
 * pending in the backend, which may write into its buffers whenever the peer joins: the
 * context is marked aborted and refuses further calls (runtime/context.c).
 *
 * Buffers of a run: step k reads `in` (k = 0) or scratch buf[(k-1)%2], and writes `out`
 * (last step) or buf[k%2], so `in` is only read and `out` only written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/executor/internal.h"

/* ---- the executor's state in a context ------------------------------------------------ */

/* Frees what dtr__exec made, through the context's memory space (still there). */
static void dtr__exec_free(dtr_context_t *ctx) {
    dtr__exec_t *e = ctx->exec;
    if (e->batch != NULL) {
        dtr__m_free(ctx, e->batch->arena);
        free(e->batch->mem);
        free(e->batch->rm);
        free(e->batch->span);
        free(e->batch);
    }
    free(e);
    ctx->exec = NULL;
}

dtr_status_t dtr__exec(dtr_context_t *ctx, const char *func, dtr__exec_t **out) {
    if (ctx->exec == NULL) {
        dtr__exec_t *e = calloc(1, sizeof *e);
        if (e == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the executor's state");
        ctx->exec = e;
        ctx->exec_free = dtr__exec_free;
    }
    *out = ctx->exec;
    return DTR_OK;
}

/* Forgets the operation a fused call started beside its agreement, if one is in flight:
 * no member has read another's data before the agreement completes (backend.h). */
static void dtr__drop_started(dtr_request_t *r) {
    if (r->in_flight) r->ctx->ops->cancel(r->group, &r->breq);
    r->in_flight = false;
}

/* Completes (block) or tests the agreement in flight. A failed one cancels the operation a
 * fused call started beside it: no member has read another's data yet (backend.h). */
static dtr_status_t dtr__agreement(dtr_request_t *r, bool block, bool *done) {
    dtr_status_t st = dtr__poll(r->ctx, r->m->all, &r->abreq, r->at0, block, done);
    if (st == DTR_OK && !*done) return DTR_OK;
    r->agreeing = false;
    *done = true;
    if (st != DTR_OK) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dtr_last_error());
        /* the first operation goes as the agreement did: nowhere (an unfused call would not
         * have started it), so the group is free for the next call */
        dtr__drop_started(r);
        return dtr__error(st, "dtr_redistribute", "argument agreement over the mesh: %s", detail);
    }
    st = dtr__agree_done(r->ctx, r->agree_recv);
    if (st == DTR_OK)
        st = dtr__agree_verdict(r->agree_recv, "dtr_redistribute", r->local_status, r->local_msg,
                                "plan: the ranks of the mesh hold different plans (specs, "
                                "strategy or steps differ) or their contexts different slice "
                                "sizes (DTR_SLICE_BYTES)");
    if (st != DTR_OK) dtr__drop_started(r);
    if (st == DTR_OK && r->phase == DTR__PHASE_AGREE) {
        r->phase = DTR__PHASE_STEPS;
        r->step = 0;
    }
    return st;
}

/* Advances as far as possible without blocking (or, with block, to the end). A fused call's
 * operation is not tested before its agreement has completed. */
static dtr_status_t dtr__progress(dtr_request_t *r, bool block) {
    for (;;) {
        if (r->agreeing) {
            bool done = false;
            DTR_CHECK(dtr__agreement(r, block, &done));
            if (!done) return DTR_OK;
        }
        if (r->in_flight) {
            bool done = false;
            DTR_CHECK(dtr__step_poll(r, block, &done));
            if (!done) return DTR_OK;
            r->step++;
        }
        if (r->phase == DTR__PHASE_STEPS) {
            if (r->cast_pending) { /* (before the first step, or into the output) */
                DTR_CHECK(dtr__cast_input(r));
            } else if (r->step == 0 && r->last_real < 0 && !r->bare && !r->cast_out) {
                /* nothing changes */
                DTR_CHECK(dtr__m_copy(r->ctx, r->out, r->in, (int64_t)r->in_bytes));
            }
            while (!r->in_flight && r->step < r->plan->nsteps) {
                dtr_status_t st = dtr__step_start(r);
                if (st != DTR_OK) return st;
                if (!r->in_flight) r->step++;
            }
            if (r->in_flight || r->agreeing) continue; /* (no success before the verdict) */
            if (r->cast_out) DTR_CHECK(dtr__cast_output(r)); /* (after the last step) */
            r->phase = DTR__PHASE_DONE;
            return DTR_OK;
        }
        return DTR_OK; /* done, or (not reached) waiting for an agreement not in flight */
    }
}

/* Checks the arguments a rank can check alone; the message goes to r->local_msg. */
static dtr_status_t dtr__check_local(dtr_request_t *r, const void *in, size_t in_bytes,
                                     void *out, size_t out_bytes, int64_t src_bytes,
                                     int64_t dst_bytes) {
    const char *what = NULL;
    dtr_status_t st = DTR_ERR_INVALID_ARGUMENT;
    char buf[sizeof r->local_msg];
    if ((int64_t)in_bytes != src_bytes) {
        snprintf(buf, sizeof buf, "in_bytes: %zu, but this rank's source block is %lld bytes",
                 in_bytes, (long long)src_bytes);
        what = buf;
    } else if ((int64_t)out_bytes < dst_bytes) {
        st = DTR_ERR_BUFFER_TOO_SMALL;
        snprintf(buf, sizeof buf, "out_bytes: %zu, but this rank's target block is %lld bytes",
                 out_bytes, (long long)dst_bytes);
        what = buf;
    } else if (in == NULL && in_bytes > 0) {
        what = "in: must not be NULL";
    } else if (out == NULL && dst_bytes > 0) {
        what = "out: must not be NULL";
    } else if (dtr__bytes_overlap(in, in_bytes, out, (size_t)dst_bytes)) {
        what = "out: overlaps in (the input is never written, so they must be apart)";
    }
    if (what == NULL) return DTR_OK;
    snprintf(r->local_msg, sizeof r->local_msg, "%s", what);
    r->local_status = st;
    return st;
}

/*
 * Starts the call's argument agreement over the mesh, and, where the backend can cancel
 * (backend.h), this rank's first operation beside it ("fused"): the call then waits for its
 * peers once instead of twice. A rank whose own arguments are bad runs nothing and waits
 * for the verdict, which every rank then shares.
 */
static dtr_status_t dtr__start_agreement(dtr_request_t *r, const char *func) {
    dtr_context_t *ctx = r->ctx;
    const dtr_plan_t *plan = r->plan;
    dtr__agree_fill(r->agree_send, r->hash, ctx->rank, r->local_status);
    r->phase = DTR__PHASE_AGREE;
    dtr_status_t st = dtr__agree_start(ctx, r->m->all, r->agree_send, r->agree_recv, &r->abreq);
    if (st != DTR_OK) {
        ctx->busy = false;
        return dtr__error(st, func, "argument agreement over the mesh: %s", dtr_last_error());
    }
    r->agreeing = true;
    if (ctx->ops->cancel == NULL || r->local_status != DTR_OK) {
        r->at0 = dtr__now();
        return DTR_OK;
    }
    r->phase = DTR__PHASE_STEPS;
    st = DTR_OK;
    while (st == DTR_OK && !r->in_flight && r->step < plan->nsteps) {
        if (r->step == 0 && r->last_real < 0) break; /* (progress copies the input) */
        if (r->cast_pending) st = dtr__cast_input(r);
        if (st != DTR_OK) break;
        st = dtr__step_start(r);
        if (st == DTR_OK && !r->in_flight) r->step++;
    }
    r->at0 = r->in_flight ? r->t0 : dtr__now(); /* (one clock read where a step started) */
    if (st != DTR_OK) {
        /* the peers wait for this rank's agreement: complete it (which leaves the step's
         * error in place unless it fails itself), then fail as an unfused call would */
        dtr__drop_started(r);
        bool done = false;
        dtr_status_t ast = dtr__poll(ctx, r->m->all, &r->abreq, r->at0, true, &done);
        ctx->busy = false;
        return ast != DTR_OK ? ast : st;
    }
    return DTR_OK;
}

/* This rank's source and target block sizes under r's plan into e->sized_*: the last call's
 * where the plan (its address and its hash) and the rank are the same (two layouts a call
 * were a visible part of a small call's time beyond its collective). */
static void dtr__sized(dtr__exec_t *e, const dtr_request_t *r, const int64_t *coord) {
    if (e->sized_plan == r->plan && e->sized_hash == r->hash && e->sized_rank == r->ctx->rank)
        return;
    dtr_layout_t sl, dl;
    dtr_spec_layout_at(&r->plan->src, coord, &sl);
    dtr_spec_layout_at(&r->plan->dst, coord, &dl);
    e->sized_plan = r->plan;
    e->sized_hash = r->hash;
    e->sized_rank = r->ctx->rank;
    e->sized_src_bytes = sl.bytes;
    e->sized_dst_bytes = dl.bytes;
}

static dtr_status_t dtr__start(dtr_context_t *ctx, const dtr_plan_t *plan, const void *in,
                               size_t in_bytes, void *out, size_t out_bytes, bool bare,
                               dtr_request_t **req) {
    const char *func = bare ? "dtr_redistribute_baseline" : "dtr_redistribute";
    if (ctx == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ctx: must not be NULL");
    if (plan == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "plan: must not be NULL");
    if (plan->src.mesh == NULL || plan->nsteps < 0 || plan->nsteps > DTR_MAX_PLAN_STEPS ||
        plan->src.ndim < 0 || plan->src.ndim > DTR_MAX_TENSOR_DIMS ||
        (unsigned)plan->src.dtype >= DTR_DTYPE_LAST || plan->dst.mesh == NULL ||
        (unsigned)plan->op_dtype >= DTR_DTYPE_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "plan: not a plan from dtr_plan_create (mesh, step count or spec out "
                          "of range)");
    for (int k = 0; plan->seed_blocks && k < plan->nsteps; k++)
        if (!dtr__seed_kind_ok(plan->steps[k].kind))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "plan->steps[%d]: kind %s in a plan with seed_blocks, which "
                              "only the seed algorithm's step kinds can have",
                              k, (unsigned)plan->steps[k].kind < DTR_STEP_KIND_LAST
                                     ? dtr_step_kind_info(plan->steps[k].kind)->name
                                     : "unknown");
    DTR_CHECK(dtr__check_ready(ctx, func));
    dtr__exec_t *e = NULL;
    DTR_CHECK(dtr__exec(ctx, func, &e));
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(plan->src.mesh, ctx->rank, coord) != DTR_OK) {
        /* A bystander: the input is the result. */
        if (bare) {
            memset(&e->req, 0, sizeof e->req);
            e->req.ctx = ctx;
            e->req.phase = DTR__PHASE_DONE;
            ctx->busy = true;
            *req = &e->req;
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
            } else if (dtr__bytes_overlap(in, in_bytes, out, in_bytes)) {
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                                  "out: overlaps in (rank %d is outside the mesh and copies "
                                  "its input; on %s memory they must be equal or apart)",
                                  ctx->rank, ctx->mem->name);
            } else {
                DTR_CHECK(dtr__m_copy(ctx, out, in, (int64_t)in_bytes));
            }
        }
        memset(&e->req, 0, sizeof e->req);
        e->req.ctx = ctx;
        e->req.phase = DTR__PHASE_DONE;
        ctx->busy = true;
        *req = &e->req;
        return DTR_OK;
    }
    dtr_request_t *r = &e->req;
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->plan = plan;
    r->in = in;
    r->out = out;
    r->in_bytes = in_bytes;
    r->bare = bare;
    r->cur = in;
    dtr_spec_t in_op = plan->dst; /* the steps run in op_dtype */
    in_op.dtype = plan->op_dtype;
    dtr__ctx_init(&r->pctx, &in_op, &plan->cost);
    r->last_real = -1;
    for (int k = 0; k < plan->nsteps; k++)
        if (!dtr__step_noop(r, k)) r->last_real = k;
    r->cast_pending = !bare && plan->src.dtype != plan->op_dtype;
    r->cast_out = !bare && plan->op_dtype != plan->dst.dtype;
    DTR_CHECK(dtr__mesh_entry(ctx, plan->src.mesh, coord, &r->m));
    if (!bare) {
        /* the slice size decides how many operations a gather takes: it must agree too */
        r->hash = dtr__plan_hash(plan) ^ ((uint64_t)ctx->slice_bytes * 0x9e3779b97f4a7c15ull);
        dtr__sized(e, r, coord);
        dtr__check_local(r, in, in_bytes, out, out_bytes, e->sized_src_bytes,
                         e->sized_dst_bytes);
        r->out_numel = e->sized_dst_bytes / dtr_dtype_info(plan->dst.dtype)->size;
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
    return dtr__start_agreement(r, func);
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
    dtr_status_t st = req->progress != NULL ? req->progress(req, false) : dtr__progress(req, false);
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
    dtr_status_t st = req->progress != NULL ? req->progress(req, true) : dtr__progress(req, true);
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
