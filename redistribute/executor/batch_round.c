/*
 * A batch's coalesced rounds: every member step of a round moves in one collective over one
 * packed buffer (or over span lists where the backend reads and writes the members' blocks
 * in place). The driver here prepares the member steps, sizes the packed buffers, packs,
 * starts, unpacks and divides; what each of those is for a kind is the round of its row in
 * the step table (dtr__step_impls[kind].round, in its step_<kind>.c; round_pack.c holds
 * what they share). A member's step gets the same arguments as in its own plan (steps.c
 * prepares it), so it computes the same result.
 */
#include <stddef.h>
#include <string.h>

#include "redistribute/executor/internal.h"

void dtr__member_request(dtr_context_t *ctx, dtr__batch_t *b, int t, int k) {
    dtr_request_t *r = &b->solo;
    const dtr__member_t *mm = &b->mem[t];
    memset(r, 0, offsetof(dtr_request_t, local_msg) + 1); /* (the message need not be cleared) */
    r->ctx = ctx;
    r->plan = &b->plan->plans[t];
    r->in = b->in != NULL ? b->in[t] : NULL;
    r->out = b->out != NULL ? b->out[t] : NULL;
    r->in_bytes = b->in_bytes != NULL ? b->in_bytes[t] : 0;
    r->m = b->m;
    r->pctx = mm->pctx;
    r->bare = b->bare;
    r->phase = DTR__PHASE_STEPS;
    r->step = k;
    r->last_real = mm->last_real;
    r->cur = mm->cur;
    r->dst_next = mm->cur == mm->buf[0] ? mm->buf[1] : mm->buf[0];
    r->avg_as_sum = true;
}

dtr_status_t dtr__round_error(const dtr__batch_t *b, dtr_status_t st) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", dtr_last_error());
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    char dim[24];
    if (rd->mesh_dim >= 0)
        snprintf(dim, sizeof dim, "mesh dim %d", rd->mesh_dim);
    else
        snprintf(dim, sizeof dim, "over the whole mesh");
    return dtr__error(st, "dtr_redistribute_batch", "round %d (%s of %d tensors, %s): %s",
                      b->round + 1, dtr_step_kind_info(rd->kind)->name, rd->count, dim, detail);
}

/* The round of a kind in the step table; NULL for a kind without one (an internal error:
 * the planner makes coalesced rounds only of kinds that have). */
static const dtr__round_ops_t *dtr__round_of(const dtr__batch_t *b) {
    dtr_step_kind_t kind = b->plan->rounds[b->round].kind;
    return (unsigned)kind < DTR_STEP_KIND_LAST ? dtr__step_impls[kind].round : NULL;
}

dtr_status_t dtr__round_issue(dtr_context_t *ctx, dtr__batch_t *b) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    const dtr__round_ops_t *ro = dtr__round_of(b);
    if (ro == NULL)
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute_batch",
                          "round %d: step kind %d runs no coalesced round", b->round + 1,
                          (int)rd->kind);
    b->count = rd->count;
    for (int j = 0; j < b->count; j++) {
        const dtr_batch_item_t *it = &b->plan->items[rd->first + j];
        dtr__member_request(ctx, b, it->tensor, it->step);
        bool skip = false;
        DTR_CHECK(dtr__step_prepare(&b->solo, &b->rm[j].a, &skip));
        if (skip)
            return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute_batch",
                              "round %d: tensor %d's step %d changes nothing on this mesh",
                              b->round + 1, it->tensor, it->step + 1);
        b->rm[j].pc = &b->mem[it->tensor].pctx;
        b->rm[j].divide = b->solo.pend.divide;
        b->rm[j].divisor = b->solo.pend.divisor;
        b->mem[it->tensor].cur = b->solo.cur;
    }
    b->n = b->rm[0].a.n;
    int64_t *arr[6];
    DTR_CHECK(dtr__arrays(ctx, b->n > 2 ? b->n : 2, arr));
    b->group = b->rm[0].a.group;
    b->padded = false;
    b->spans = false;
    b->total = 0;
    int64_t send = 0, recv = 0;
    DTR_CHECK(ro->size(ctx, b, arr, &send, &recv));
    if (ro->spans != NULL) {
        dtr_status_t st = ro->spans(ctx, b, arr);
        if (st != DTR_OK) return dtr__round_error(b, st);
    }
    if (!b->spans) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, send, "batch send buffer"));
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, recv,
                               "batch receive buffer"));
        if (!b->bare) DTR_CHECK(ro->pack(ctx, b, arr));
        dtr_status_t st = ro->start(ctx, b, arr);
        if (st != DTR_OK) return dtr__round_error(b, st);
    }
    b->in_flight = true;
    b->t0 = dtr__now();
    return DTR_OK;
}

dtr_status_t dtr__round_finish(dtr_context_t *ctx, dtr__batch_t *b) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    if (b->bare) return DTR_OK;
    int64_t *arr[6];
    DTR_CHECK(dtr__arrays(ctx, b->n > 2 ? b->n : 2, arr)); /* the counts the start left there */
    if (!b->spans) DTR_CHECK(dtr__round_of(b)->unpack(ctx, b, arr)); /* (spans: written in place) */
    for (int j = 0; j < b->count; j++) {
        const dtr__round_member_t *m = &b->rm[j];
        if (m->divide)
            DTR_CHECK(dtr__m_divide(ctx, m->a.dtype, m->a.dst, m->a.dst, m->a.out_numel,
                                     m->divisor));
        b->mem[b->plan->items[rd->first + j].tensor].next = b->plan->items[rd->first + j].step + 1;
    }
    return DTR_OK;
}
