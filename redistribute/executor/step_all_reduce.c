/* all_reduce (P -> R on one mesh dim): the members' blocks reduced, every member keeping the
 * result. */
#include "redistribute/executor/internal.h"

dtr_status_t dtr__all_reduce_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    int64_t item = a->item;
    int64_t in_numel = a->in_numel;
    const void *src = a->src;
    void *dst = a->dst;
    void *group = a->group;
    dtr_reduce_op_t op = a->op;
    dtr_dtype_t dtype = a->dtype;
    bool bare = a->bare;
    dtr_status_t st = DTR_OK;
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
    return dtr__step_issued(r, st);
}

/* ---- the batch round: the members' blocks back to back, reduced in one operation -------- */

static dtr_status_t dtr__ar_round_size(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                                       int64_t *send, int64_t *recv) {
    (void)ctx;
    (void)arr;
    for (int j = 0; j < b->count; j++) b->total += b->rm[j].a.in_numel;
    *send = *recv = b->total * b->rm[0].a.item;
    return DTR_OK;
}

static dtr_status_t dtr__ar_round_spans(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    (void)arr;
    return dtr__round_spans_start(ctx, b, DTR_SPANS_ALL_REDUCE, b->total * b->rm[0].a.item,
                                  &b->total);
}

static dtr_status_t dtr__ar_round_start(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    (void)arr;
    return ctx->ops->all_reduce(b->group, ctx->stage_send, ctx->stage_recv, b->total,
                                b->plan->rounds[b->round].dtype, b->rm[0].a.op, &b->breq);
}

const dtr__round_ops_t dtr__all_reduce_round = {
    .size = dtr__ar_round_size,
    .spans = dtr__ar_round_spans,
    .pack = dtr__round_pack_blocks,
    .start = dtr__ar_round_start,
    .unpack = dtr__round_unpack_blocks,
};
