/*
 * exchange (any layout change, one all-to-all-v over the mesh's ranks, or over one mesh
 * dim's): each rank sends each peer exactly the part of its block the peer's target needs
 * and lacks, packed as boxes, and places what it receives box by box. An exchange in which
 * no rank receives from another is a local re-slicing.
 */
#include <string.h>

#include "redistribute/executor/internal.h"

dtr_status_t dtr__exchange_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_step_t *s = a->s;
    const dtr__ctx_t *pc = &r->pctx;
    int nd = a->nd;
    int k = a->k;
    int64_t item = a->item;
    int64_t n = a->n;
    int64_t out_numel = a->out_numel;
    const int64_t *ish = a->ish;
    const int64_t *ioff = a->ioff;
    const int64_t *osh = a->osh;
    const int64_t *ooff = a->ooff;
    const void *src = a->src;
    void *group = a->group;
    bool bare = a->bare;
    dtr__pending_t *pend = &r->pend;
    /* An exchange in which no rank receives anything from another is a local re-slicing. */
    if (s->peers_max == 0 && s->recv_bytes_max == 0) {
        if (bare || out_numel == 0) return DTR_OK;
        int64_t lo[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
        for (int d = 0; d < nd; d++) {
            lo[d] = ooff[d] - ioff[d];
            if (lo[d] < 0 || lo[d] + osh[d] > ish[d])
                return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                                  "step %d (exchange): marked local, but this rank's target "
                                  "block is not inside its source block",
                                  k + 1);
        }
        return dtr__m_box(ctx, nd, item, a->src, ish, lo, osh, a->dst, osh, zero);
    }
    int64_t *arrays[6];
    DTR_CHECK(dtr__arrays(ctx, n, arrays));
    int64_t *sc = arrays[0], *sd = arrays[1], *rc = arrays[2], *rd = arrays[3];
    dtr_status_t st = DTR_OK;
    /* Peers: the ranks that agree with me on every mesh dim "before" does not shard. */
    int mdims = pc->mdims;
    int64_t pcoord[DTR_MAX_MESH_DIMS], total_send = 0, total_recv = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t at_s = 0, at_r = 0;
        memset(pcoord, 0, sizeof pcoord);
        for (int64_t p = 0; p < n; p++) {
            bool peer = true;
            for (int q = 0; q < mdims; q++)
                if (s->before[q].kind != DTR_SHARD && pcoord[q] != r->m->coord[q]) peer = false;
            sc[p] = rc[p] = 0;
            if (peer) {
                int64_t ps[DTR_MAX_TENSOR_DIMS], po[DTR_MAX_TENSOR_DIMS];
                int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
                /* send: my "before" block ∩ the peer's "after" block */
                dtr__layout(pc, s->after, pcoord, ps, po);
                int64_t cnt = item * dtr__meet(nd, ioff, ish, po, ps, lo, ext);
                sc[p] = cnt;
                if (pass == 1 && cnt > 0 && !bare) {
                    int64_t zero[DTR_MAX_TENSOR_DIMS] = {0};
                    DTR_CHECK(dtr__m_box(ctx, nd, item, src, ish, lo, ext,
                                         (char *)ctx->stage_send + at_s, ext, zero));
                }
                /* receive: the peer's "before" block ∩ my "after" block */
                dtr__layout(pc, s->before, pcoord, ps, po);
                rc[p] = item * dtr__meet(nd, ooff, osh, po, ps, lo, ext);
            }
            sd[p] = at_s;
            rd[p] = at_r;
            at_s += sc[p];
            at_r += rc[p];
            for (int q = mdims - 1; q >= 0; q--) {
                if (++pcoord[q] < pc->msize[q]) break;
                pcoord[q] = 0;
            }
        }
        total_send = at_s;
        total_recv = at_r;
        if (pass == 0) {
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, total_send, "send staging"));
            DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, total_recv,
                                   "receive staging"));
        }
    }
    if (!bare && total_recv != out_numel * item)
        return dtr__error(DTR_ERR_INTERNAL, "dtr_redistribute",
                          "step %d (exchange): pieces cover %lld of %lld bytes", k + 1,
                          (long long)total_recv, (long long)(out_numel * item));
    pend->unpack_exchange = !bare;
    st = ops->all_to_allv(group, ctx->stage_send, sc, sd, ctx->stage_recv, rc, rd, &r->breq);
    return dtr__step_issued(r, st);
}

/* Unpacks the received pieces of an exchange into the step's output block. */
static dtr_status_t dtr__exchange_unpack(dtr_request_t *r) {
    const dtr__ctx_t *pc = &r->pctx;
    const dtr_step_t *s = &r->plan->steps[r->step];
    int nd = pc->ndim, mdims = pc->mdims;
    int64_t item = pc->item, n = r->pend.n, at = 0;
    int64_t osh[DTR_MAX_TENSOR_DIMS], ooff[DTR_MAX_TENSOR_DIMS], pcoord[DTR_MAX_MESH_DIMS] = {0};
    dtr__layout(pc, s->after, r->m->coord, osh, ooff);
    for (int64_t p = 0; p < n; p++) {
        bool peer = true;
        for (int q = 0; q < mdims; q++)
            if (s->before[q].kind != DTR_SHARD && pcoord[q] != r->m->coord[q]) peer = false;
        if (peer) {
            int64_t ps[DTR_MAX_TENSOR_DIMS], po[DTR_MAX_TENSOR_DIMS];
            int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS], cnt = item;
            int64_t zero[DTR_MAX_TENSOR_DIMS] = {0};
            dtr__layout(pc, s->before, pcoord, ps, po);
            cnt *= dtr__meet(nd, ooff, osh, po, ps, lo, ext);
            if (cnt > 0)
                DTR_CHECK(dtr__m_box(r->ctx, nd, item, (char *)r->ctx->stage_recv + at, ext, zero,
                                     ext, r->pend.dst, osh, lo));
            at += cnt;
        }
        for (int q = mdims - 1; q >= 0; q--) {
            if (++pcoord[q] < pc->msize[q]) break;
            pcoord[q] = 0;
        }
    }
    return DTR_OK;
}

dtr_status_t dtr__exchange_finish(dtr_request_t *r) {
    if (r->pend.unpack_exchange) DTR_CHECK(dtr__exchange_unpack(r));
    return dtr__step_done(r);
}
