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
