/*
 * all_to_all (S(a) -> S(b) on one mesh dim): gathers dim a and scatters dim b at once. Even
 * chunks of non-leading dims move in place through the backend's strided form (this
 * member's own piece a box copy, with streaming stores when large); otherwise pieces are
 * packed and unpacked around all_to_all (even) or all_to_allv.
 */
#include <string.h>

#include "redistribute/executor/internal.h"

dtr_status_t dtr__all_to_all_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_step_t *s = a->s;
    int nd = a->nd;
    int64_t item = a->item;
    int64_t n = a->n;
    int64_t ci = a->ci;
    int64_t in_numel = a->in_numel;
    int64_t out_numel = a->out_numel;
    const int64_t *ish = a->ish;
    const int64_t *osh = a->osh;
    const void *src = a->src;
    void *dst = a->dst;
    void *group = a->group;
    bool bare = a->bare;
    dtr__pending_t *pend = &r->pend;
    int64_t *arrays[6];
    DTR_CHECK(dtr__arrays(ctx, n, arrays));
    int64_t *sc = arrays[0], *sd = arrays[1], *rc = arrays[2], *rd = arrays[3];
    int64_t *sz = arrays[4], *of = arrays[5];
    dtr_status_t st = DTR_OK;
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
        if (st == DTR_OK) return dtr__step_issued(r, st);
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
    return dtr__step_issued(r, st);
}

/* ---- the batch round: for each peer, every member's box its target covers; one
 * all_to_allv (round_pack.c's dtr__round_moves, shared with the exchange's round) -------- */

static dtr_status_t dtr__a2a_round_size(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                                        int64_t *send, int64_t *recv) {
    DTR_CHECK(dtr__round_moves(ctx, b, arr, DTR__COUNT));
    *send = arr[4][0];
    *recv = arr[4][1];
    return DTR_OK;
}

static dtr_status_t dtr__a2a_round_pack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    return dtr__round_moves(ctx, b, arr, DTR__PACK);
}

static dtr_status_t dtr__a2a_round_start(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    return ctx->ops->all_to_allv(b->group, ctx->stage_send, arr[0], arr[1], ctx->stage_recv,
                                 arr[2], arr[3], &b->breq);
}

static dtr_status_t dtr__a2a_round_unpack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    return dtr__round_moves(ctx, b, arr, DTR__UNPACK);
}

const dtr__round_ops_t dtr__all_to_all_round = {
    .size = dtr__a2a_round_size,
    .pack = dtr__a2a_round_pack,
    .start = dtr__a2a_round_start,
    .unpack = dtr__a2a_round_unpack,
};
