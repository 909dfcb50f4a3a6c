/*
 * reduce_exchange (P -> S(d) on mesh dim i while a later mesh dim shards d): the balanced
 * reduction of balance.c in two operations. Phase 1, a reduce-scatter(-v) over mesh dim i:
 * each member reduces its home piece and its share of the foreign pieces. Phase 2, an
 * all-to-all-v over the whole mesh: each reduced part goes to the rank whose target holds
 * it, which places the parts as ranges of its block.
 */
#include <string.h>

#include "redistribute/executor/internal.h"

dtr_status_t dtr__reduce_exchange_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_step_t *s = a->s;
    const dtr__ctx_t *pc = &r->pctx;
    int nd = a->nd;
    int k = a->k;
    int i = a->i;
    int64_t item = a->item;
    int64_t n = a->n;
    int64_t ci = a->ci;
    int64_t in_numel = a->in_numel;
    const int64_t *ish = a->ish;
    const int64_t *ioff = a->ioff;
    const void *src = a->src;
    void *group = a->group;
    dtr_reduce_op_t op = a->op;
    dtr_dtype_t dtype = a->dtype;
    bool bare = a->bare;
    dtr__pending_t *pend = &r->pend;
    int64_t *arrays[6];
    DTR_CHECK(dtr__arrays(ctx, n, arrays));
    int64_t *rc = arrays[2];
    dtr_status_t st = DTR_OK;
    /* Phase 1 (balance.c): member m reduces its home piece and its share of the foreign
     * pieces; every member packs its contributions to them in member order. */
    dtr__balance_t bal;
    dtr__balance_init(pc, s->before, s->after, i, r->m->coord, &bal);
    int64_t total = 0, most = 0;
    for (int64_t m = 0; m < n; m++) {
        __int128 h, dl, at, x;
        dtr__balance_member(&bal, m, &h, &dl);
        dtr__balance_share(&bal, m, &at, &x);
        rc[m] = (int64_t)(h + x);
        total += rc[m];
        if (rc[m] > most) most = rc[m];
    }
    if (total != in_numel)
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                          "step %d (reduce_exchange): the members' parts cover %lld of %lld "
                          "elements",
                          k + 1, (long long)total, (long long)in_numel);
    bool padded = ops->reduce_scatterv == NULL && !dtr__all_equal(rc, n);
    int64_t slot = padded ? most : -1;
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap,
                           (padded ? n * most : total) * item, "send staging"));
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, (padded ? most : rc[ci]) * item,
                           "receive staging"));
    if (!bare) {
        if (padded) DTR_CHECK(dtr__m_zero(ctx, ctx->stage_send, n * most * item));
        char *at = ctx->stage_send;
        int64_t mc[DTR_MAX_MESH_DIMS];
        memcpy(mc, r->m->coord, sizeof mc);
        for (int64_t m = 0; m < n; m++) {
            char *start = at;
            int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
                ext[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
            mc[i] = m;
            dtr__layout(pc, s->after, mc, ts, to);
            int64_t h = dtr__meet(nd, ioff, ish, to, ts, lo, ext);
            if (h > 0) DTR_CHECK(dtr__m_box(ctx, nd, item, src, ish, lo, ext, at, ext, zero));
            at += h * item;
            __int128 sh0, x;
            dtr__balance_share(&bal, m, &sh0, &x);
            dtr__piece_iter_t it;
            int64_t u, v;
            dtr__pieces_begin(&bal, &it);
            while (dtr__pieces_in_share(&bal, &it, sh0, x, &u, &v)) {
                DTR_CHECK(dtr__m_range(ctx, nd, item, (char *)src, ish, it.lo, it.ext, u, v,
                                       at, false));
                at += (v - u) * item;
            }
            if (padded) at = start + most * item;
        }
    }
    pend->rx_deliver = true;
    pend->rx_divide = pend->divide;
    pend->divide = false;
    if (slot >= 0)
        st = ops->reduce_scatter(group, ctx->stage_send, ctx->stage_recv, slot, dtype, op,
                                 &r->breq);
    else if (dtr__all_equal(rc, n))
        st = ops->reduce_scatter(group, ctx->stage_send, ctx->stage_recv, rc[0], dtype, op,
                                 &r->breq);
    else
        st = ops->reduce_scatterv(group, ctx->stage_send, ctx->stage_recv, rc, dtype, op,
                                  &r->breq);
    return dtr__step_issued(r, st);
}

/*
 * reduce_exchange, phase 2: what this rank receives from the other groups' members (the
 * parts of its target they reduced), in the order of the source groups and their members.
 * Fills the receive counts and displacements (bytes, by mesh position) and, in first, where
 * each part starts in the piece it belongs to (elements, row-major); returns the total.
 */
static int64_t dtr__rx_receives(dtr_request_t *r, int64_t *rc, int64_t *rd, int64_t *first) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int i = s->mesh_dim;
    int64_t item = pc->item, at = 0;
    const int64_t *me = r->m->coord;
    dtr__balance_t own;
    dtr__balance_init(pc, s->before, s->after, i, me, &own);
    bool inner[DTR_MAX_MESH_DIMS];
    int64_t g[DTR_MAX_MESH_DIMS];
    memcpy(g, me, (size_t)pc->mdims * sizeof *g);
    for (int j = 0; j < pc->mdims; j++) {
        inner[j] = own.serve[j] && j != i;
        if (inner[j]) g[j] = 0;
    }
    bool more = true;
    for (; more; more = dtr__next_coord(pc, inner, g)) {
        bool home = true;
        for (int j = 0; j < pc->mdims; j++) home = home && (j == i || g[j] == me[j]);
        if (home) continue;
        dtr__balance_t bal;
        dtr__balance_init(pc, s->before, s->after, i, g, &bal);
        __int128 pos, cnt;
        int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS], tlo[DTR_MAX_TENSOR_DIMS];
        if (!dtr__balance_find(&bal, me, &pos, &cnt, lo, ext, tlo)) continue;
        int64_t mc[DTR_MAX_MESH_DIMS];
        memcpy(mc, g, sizeof mc);
        for (int64_t m = 0; m < bal.n; m++) {
            __int128 sh0, x;
            dtr__balance_share(&bal, m, &sh0, &x);
            __int128 u = pos > sh0 ? pos : sh0, v = pos + cnt < sh0 + x ? pos + cnt : sh0 + x;
            if (v <= u) continue;
            mc[i] = m;
            int64_t peer = 0;
            for (int j = 0; j < pc->mdims; j++) peer = peer * pc->msize[j] + mc[j];
            rc[peer] = (int64_t)(v - u) * item;
            rd[peer] = at;
            first[peer] = (int64_t)(u - pos);
            at += rc[peer];
        }
    }
    return at;
}

/* reduce_exchange, after phase 2: each sender's part into the output block. The counts the
 * delivery was started with are still in the context's arrays (nothing runs in between);
 * a sender's group block meets this rank's target in the piece its part belongs to. */
static dtr_status_t dtr__rx_unpack(dtr_request_t *r) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int nd = pc->ndim;
    int64_t item = pc->item, ranks = dtr_mesh_nranks(pc->mesh);
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(r->ctx, ranks, a)); /* cannot fail: they hold ranks */
    const int64_t *rc = a[2], *rd = a[3], *first = a[4];
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS];
    dtr__layout(pc, s->after, r->m->coord, osh, ooff);
    int64_t pcoord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t p = 0; p < ranks; p++) {
        if (rc[p] > 0) {
            int64_t cs[DTR_MAX_TENSOR_DIMS], co[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
                ext[DTR_MAX_TENSOR_DIMS];
            dtr__layout(pc, s->before, pcoord, cs, co);
            dtr__meet(nd, ooff, osh, co, cs, lo, ext);
            DTR_CHECK(dtr__m_range(r->ctx, nd, item, r->pend.dst, osh, lo, ext, first[p],
                                   first[p] + rc[p] / item, (char *)r->ctx->stage_send + rd[p],
                                   true));
        }
        for (int q = pc->mdims - 1; q >= 0; q--) {
            if (++pcoord[q] < pc->msize[q]) break;
            pcoord[q] = 0;
        }
    }
    return DTR_OK;
}

/* reduce_exchange, phase 2: keep the home piece, send each part of the share to its owner. */
static dtr_status_t dtr__rx_deliver(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int i = s->mesh_dim, nd = pc->ndim;
    int64_t item = pc->item, ranks = dtr_mesh_nranks(pc->mesh);
    const int64_t *me = r->m->coord;
    dtr__balance_t bal;
    dtr__balance_init(pc, s->before, s->after, i, me, &bal);
    __int128 h, dl, sh0, x;
    dtr__balance_member(&bal, me[i], &h, &dl);
    dtr__balance_share(&bal, me[i], &sh0, &x);
    if (!r->bare) {
        if (r->pend.rx_divide)
            DTR_CHECK(dtr__m_divide(ctx, r->plan->op_dtype, ctx->stage_recv, ctx->stage_recv,
                                    (int64_t)(h + x), r->pend.divisor));
        int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS],
            ext[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
        dtr__layout(pc, s->after, me, osh, ooff);
        if (dtr__meet(nd, ooff, osh, bal.co, bal.cs, lo, ext) > 0)
            DTR_CHECK(dtr__m_box(ctx, nd, item, ctx->stage_recv, ext, zero, ext, r->pend.dst, osh,
                                 lo));
    }
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(ctx, ranks, a));
    int64_t *sc = a[0], *sd = a[1], *rc = a[2], *rd = a[3], *first = a[4];
    memset(sc, 0, (size_t)ranks * sizeof *sc);
    memset(sd, 0, (size_t)ranks * sizeof *sd);
    memset(rc, 0, (size_t)ranks * sizeof *rc);
    memset(rd, 0, (size_t)ranks * sizeof *rd);
    dtr__piece_iter_t it;
    int64_t u, v;
    dtr__pieces_begin(&bal, &it);
    while (dtr__pieces_in_share(&bal, &it, sh0, x, &u, &v)) {
        int64_t peer = 0;
        for (int j = 0; j < pc->mdims; j++) peer = peer * pc->msize[j] + it.coord[j];
        sc[peer] = (v - u) * item;
        sd[peer] = (int64_t)(it.pos + u - sh0) * item;
    }
    int64_t total = dtr__rx_receives(r, rc, rd, first);
    if (total != (int64_t)dl * item)
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                          "step %d (reduce_exchange): parts from other groups cover %lld of "
                          "%lld bytes",
                          r->step + 1, (long long)total, (long long)((int64_t)dl * item));
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, total, "receive staging"));
    r->pend.rx_unpack = !r->bare;
    r->group = r->m->all;
    return dtr__step_issued(r, ctx->ops->all_to_allv(r->m->all,
                                                     (char *)ctx->stage_recv + (int64_t)h * item,
                                                     sc, sd, ctx->stage_send, rc, rd, &r->breq));
}

dtr_status_t dtr__reduce_exchange_finish(dtr_request_t *r) {
    if (r->pend.rx_unpack) DTR_CHECK(dtr__rx_unpack(r));
    DTR_CHECK(dtr__step_done(r));
    if (!r->pend.rx_deliver) return DTR_OK; /* phase 2 completed */
    r->pend.rx_deliver = false;
    return dtr__rx_deliver(r);
}
