/*
 * reduce_scatter (P -> S(d) on one mesh dim): the members' blocks reduced, each keeping its
 * chunk of dim d. Chunks of a non-leading dim are packed member by member first; uneven
 * chunks use reduce_scatterv, or are padded where the backend lacks it (then the padded
 * piece is cut back to the chunk when it completes).
 */
#include "redistribute/executor/internal.h"

dtr_status_t dtr__reduce_scatter_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_step_t *s = a->s;
    int nd = a->nd;
    int64_t item = a->item;
    int64_t n = a->n;
    int64_t ci = a->ci;
    int64_t in_numel = a->in_numel;
    const int64_t *ish = a->ish;
    const void *src = a->src;
    void *dst = a->dst;
    void *group = a->group;
    dtr_reduce_op_t op = a->op;
    dtr_dtype_t dtype = a->dtype;
    bool bare = a->bare;
    dtr__pending_t *pend = &r->pend;
    int64_t *arrays[6];
    DTR_CHECK(dtr__arrays(ctx, n, arrays));
    int64_t *rc = arrays[2], *sz = arrays[4], *of = arrays[5];
    dtr_status_t st = DTR_OK;
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
    return dtr__step_issued(r, st);
}

/* ---- the batch round: piece k holds every member's chunk k of its reduced dim ----------- */

static dtr_status_t dtr__rs_round_size(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                                       int64_t *send, int64_t *recv) {
    DTR_CHECK(dtr__round_pieces(ctx, b, arr, false, false));
    dtr__round_piece_bytes(b, arr, b->rm[0].a.item, false, send, recv);
    return DTR_OK;
}

static dtr_status_t dtr__rs_round_spans(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    int64_t bytes = 0;
    for (int64_t k = 0; k < b->n; k++) bytes += arr[0][k];
    return dtr__round_spans_start(ctx, b, DTR_SPANS_REDUCE_SCATTER, bytes * b->rm[0].a.item,
                                  arr[0]);
}

static dtr_status_t dtr__rs_round_pack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    return dtr__round_pieces(ctx, b, arr, false, true);
}

/* reduce_scatterv where the pieces are uneven, padded to the largest without it */
static dtr_status_t dtr__rs_round_start(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    void *s = ctx->stage_send, *r = ctx->stage_recv;
    dtr_reduce_op_t op = b->rm[0].a.op;
    if (b->padded || dtr__all_equal(arr[0], b->n))
        return ctx->ops->reduce_scatter(b->group, s, r, b->padded ? b->pad : arr[0][0],
                                        rd->dtype, op, &b->breq);
    return ctx->ops->reduce_scatterv(b->group, s, r, arr[0], rd->dtype, op, &b->breq);
}

const dtr__round_ops_t dtr__reduce_scatter_round = {
    .size = dtr__rs_round_size,
    .spans = dtr__rs_round_spans,
    .pack = dtr__rs_round_pack,
    .start = dtr__rs_round_start,
    .unpack = dtr__round_unpack_blocks, /* this rank's piece: its members' outputs */
};
