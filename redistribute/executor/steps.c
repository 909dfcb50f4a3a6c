/*
 * The table of step kinds, and what every step shares: working out this rank's side of a
 * step (its blocks, buffers, group), and the end of a collective (unpack, divide). A kind's
 * own logic, its batch round included, lives in its step_*.c; adding a kind is one file and
 * one row here.
 */
#include <string.h>

#include "redistribute/executor/internal.h"

const dtr__step_impl_t dtr__step_impls[DTR_STEP_KIND_LAST] = {
    [DTR_STEP_ALL_GATHER] = {.start = dtr__all_gather_start, .finish = dtr__all_gather_finish,
                             .round = &dtr__all_gather_round},
    [DTR_STEP_REDUCE_SCATTER] = {.start = dtr__reduce_scatter_start, .finish = dtr__step_done,
                                 .round = &dtr__reduce_scatter_round},
    [DTR_STEP_ALL_REDUCE] = {.start = dtr__all_reduce_start, .finish = dtr__step_done,
                             .round = &dtr__all_reduce_round},
    [DTR_STEP_ALL_TO_ALL] = {.start = dtr__all_to_all_start, .finish = dtr__step_done,
                             .round = &dtr__all_to_all_round},
    /* (an exchange's round is the all-to-all-v of the same boxes as an all_to_all's) */
    [DTR_STEP_EXCHANGE] = {.start = dtr__exchange_start, .finish = dtr__exchange_finish,
                           .round = &dtr__all_to_all_round},
    [DTR_STEP_REDUCE_EXCHANGE] = {.start = dtr__reduce_exchange_start,
                                  .finish = dtr__reduce_exchange_finish},
    [DTR_STEP_LOCAL_CHUNK] = {.start = dtr__local_chunk_start},
    [DTR_STEP_LOCAL_SCALE] = {.start = dtr__local_scale_start},
    [DTR_STEP_LOCAL_RELABEL] = {.start = dtr__local_relabel_start, .keeps_block = true},
    [DTR_STEP_LOCAL_ZERO_FILL] = {.start = dtr__local_zero_fill_start},
};

/* A step that reduces Partial(avg) contributions (its mesh dim leaves Partial). */
bool dtr__step_avg_reduces(const dtr_step_t *s) {
    return s->op == DTR_REDUCE_AVG && s->from.kind == DTR_PARTIAL && s->to.kind != DTR_PARTIAL &&
           (s->kind == DTR_STEP_REDUCE_SCATTER || s->kind == DTR_STEP_ALL_REDUCE ||
            s->kind == DTR_STEP_REDUCE_EXCHANGE);
}

/* A step that leaves every rank's block as it is. */
bool dtr__step_noop(const dtr_request_t *r, int k) {
    const dtr_step_t *s = &r->plan->steps[k];
    if ((unsigned)s->kind < DTR_STEP_KIND_LAST && dtr__step_impls[s->kind].keeps_block)
        return true;
    if (s->mesh_dim >= 0) return r->pctx.msize[s->mesh_dim] == 1;
    return dtr_mesh_nranks(r->pctx.mesh) == 1;
}

dtr_status_t dtr__step_prepare(dtr_request_t *r, dtr__step_args_t *out, bool *skip) {
    dtr_context_t *ctx = r->ctx;
    const dtr_plan_t *plan = r->plan;
    const dtr__ctx_t *pc = &r->pctx;
    int k = r->step;
    /* Steps that change nothing (a mesh dim of one rank, a relabel) pass the current
     * buffer on; the last step that changes something writes the output. */
    *skip = !r->bare && (k > r->last_real || dtr__step_noop(r, k));
    if (*skip) return DTR_OK;
    dtr__step_args_t a;
    a.s = &plan->steps[k];
    a.k = k;
    a.nd = pc->ndim;
    a.item = pc->item;
    a.bare = r->bare;
    a.dtype = plan->op_dtype; /* (a cast plan's input was cast to it: dtr__cast_input) */
    if (plan->seed_blocks) {
        /* The seed's own blocks (planner/seed_blocks.c): sized by following the steps
         * (their kinds were checked when the request started). */
        dtr__seed_block(pc, plan, k, r->m->coord, a.ish);
        dtr__seed_block(pc, plan, k + 1, r->m->coord, a.osh);
        memset(a.ioff, 0, sizeof a.ioff); /* (no step kind of theirs reads offsets) */
        memset(a.ooff, 0, sizeof a.ooff);
    } else {
        dtr__layout(pc, a.s->before, r->m->coord, a.ish, a.ioff);
        dtr__layout(pc, a.s->after, r->m->coord, a.osh, a.ooff);
    }
    a.in_numel = dtr__prod(a.ish, 0, a.nd);
    a.out_numel = dtr__prod(a.osh, 0, a.nd);
    a.src = r->cur;
    if (k == r->last_real && !r->cast_out) {
        a.dst = r->out;
    } else if (r->dst_next != NULL) { /* a batch member's own step buffer */
        a.dst = r->dst_next;
    } else {
        int b = r->cur == ctx->buf[0] ? 1 : 0;
        DTR_CHECK(dtr__reserve(ctx, &ctx->buf[b], &ctx->buf_cap[b], a.out_numel * a.item,
                               "step buffer"));
        a.dst = ctx->buf[b];
    }
    r->cur = a.dst; /* where the data is once this step completes */
    a.i = a.s->mesh_dim;
    a.n = a.i >= 0 ? pc->msize[a.i] : dtr_mesh_nranks(pc->mesh);
    a.ci = a.i >= 0 ? r->m->coord[a.i] : 0;
    a.group = a.i >= 0 ? r->m->dim_group[a.i] : r->m->all;
    dtr__pending_t *pend = &r->pend;
    memset(pend, 0, sizeof *pend);
    pend->dst = a.dst;
    pend->out_numel = a.out_numel;
    pend->n = a.n;
    if ((unsigned)a.s->kind >= DTR_STEP_KIND_LAST)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_redistribute", "plan->steps[%d].kind: %d",
                          k, (int)a.s->kind);
    a.op = a.s->op;
    if (a.op == DTR_REDUCE_AVG) {
        /* AVG over several mesh dims is their SUM divided once by the product of their
         * sizes (docs/design.md): per-step divides would truncate integers at every step and
         * round floats more than once. One AVG step alone may use the backend's AVG
         * (not in a batch, whose coalesced rounds reduce every member with one op). */
        int64_t divisor = 1, last = -1, steps = 0;
        for (int j = 0; j < plan->nsteps; j++) {
            const dtr_step_t *s = &plan->steps[j];
            if (!dtr__step_avg_reduces(s) || dtr__step_noop(r, j)) continue;
            divisor *= s->mesh_dim >= 0 ? pc->msize[s->mesh_dim] : dtr_mesh_nranks(pc->mesh);
            last = j;
            steps++;
        }
        if (steps > 1 || r->avg_as_sum || !(ctx->ops->caps & DTR_BACKEND_CAP_AVG)) {
            a.op = DTR_REDUCE_SUM;
            pend->divide = !a.bare && (steps <= 1 || k == last);
            pend->divisor = steps > 1 ? divisor : a.n;
        }
    }
    *out = a;
    return DTR_OK;
}

dtr_status_t dtr__cast_input(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr_plan_t *plan = r->plan;
    r->cast_pending = false;
    int64_t n = (int64_t)r->in_bytes / dtr_dtype_info(plan->src.dtype)->size;
    void *to = r->out;
    if (r->last_real >= 0 || r->cast_out) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->buf[0], &ctx->buf_cap[0], n * r->pctx.item,
                               "cast buffer"));
        to = ctx->buf[0];
    }
    DTR_CHECK(dtr__group_cast(ctx, plan->src.dtype, r->in, plan->op_dtype, to, n,
                              "dtr_redistribute"));
    r->cur = to;
    return DTR_OK;
}

dtr_status_t dtr__cast_output(dtr_request_t *r) {
    r->cast_out = false;
    DTR_CHECK(dtr__group_cast(r->ctx, r->plan->op_dtype, r->cur, r->plan->dst.dtype, r->out,
                              r->out_numel, "dtr_redistribute"));
    r->cur = r->out;
    return DTR_OK;
}

dtr_status_t dtr__step_start(dtr_request_t *r) {
    dtr__step_args_t a;
    bool skip = false;
    DTR_CHECK(dtr__step_prepare(r, &a, &skip));
    if (skip) return DTR_OK;
    /* Steps over one rank never get here unless bare: they are no-ops, skipped above. */
    if (a.n == 1) {
        if (a.bare) return DTR_OK;
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                          "step %d (%s): a no-op step was not skipped", a.k + 1,
                          dtr_step_kind_info(a.s->kind)->name);
    }
    r->group = a.group;
    return dtr__step_impls[a.s->kind].start(r, &a);
}
