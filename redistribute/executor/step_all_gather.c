/*
 * all_gather (S(d) -> R on one mesh dim): each member's chunk of dim d, gathered. Pieces of
 * the leading dim land in place; even pieces of a non-leading dim land in place through the
 * backend's strided form where it places them as fast as it gathers; otherwise large
 * outputs are gathered in cache-sized slices (DTR_SLICE_BYTES), small ones staged and
 * unpacked. Uneven pieces use all_gatherv, or are padded where the backend lacks it.
 */
#include <string.h>

#include "redistribute/executor/internal.h"

/* A gather is sliced when its output holds at least this many slices; smaller ones are
 * one operation (their output stays in cache, where one pass costs little). */
#define DTR__SLICES_MIN 8

/*
 * A gather along a dim d that is not the block's leading one, viewed as [outer, len, inner
 * bytes]: each member's piece is [outer, c, inner], and piece m goes to rows of[m].. of
 * every outer row. Gathered whole, the pieces would be interleaved by a pass over the whole
 * output (or by the backend's strided types, slower still). In slices, each slice's pieces
 * land in stage_recv, small enough to stay in cache, and are placed before the next slice
 * starts: the output is written once, with streaming stores when it is large. A slice is a
 * run of whole outer rows, or (even pieces, one outer row larger than a slice) a run of
 * rows of each member's piece within one outer row. The send side of a slice is a
 * contiguous run of the input either way.
 */
static void dtr__slice_setup(dtr_request_t *r, int64_t slice_bytes, const int64_t *sz,
                             int64_t ci, bool even) {
    dtr__pending_t *p = &r->pend;
    int64_t row = p->dst_len * p->inner; /* one outer row of the output */
    p->slice = true;
    p->even = even;
    p->mine = sz[ci];
    p->so = p->sx = 0;
    p->stream = p->out_numel * r->pctx.item >= DTR__STREAM_MIN_BYTES;
    if (row <= slice_bytes || !even) {
        p->sx_whole = true;
        p->sno = slice_bytes / (row > 0 ? row : 1);
        if (p->sno < 1) p->sno = 1;
        if (p->sno > p->outer) p->sno = p->outer;
    } else {
        p->sx_whole = false;
        p->sno = 1;
        p->snx = slice_bytes / (p->n * p->inner);
        if (p->snx < 1) p->snx = 1;
        if (p->snx > sz[0]) p->snx = sz[0];
    }
}

/* The bytes of stage_recv the largest slice needs. */
static int64_t dtr__slice_stage(const dtr__pending_t *p) {
    return p->sx_whole ? p->sno * p->dst_len * p->inner : p->n * p->snx * p->inner;
}

/* Starts the gather of the current slice into stage_recv. */
static dtr_status_t dtr__slice_issue(dtr_request_t *r) {
    dtr_context_t *ctx = r->ctx;
    const dtr__pending_t *p = &r->pend;
    const char *src = p->src;
    if (!p->sx_whole) {
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        return ctx->ops->all_gather(r->group, src + (p->so * p->mine + p->sx) * p->inner,
                                    rows * p->inner, ctx->stage_recv, &r->breq);
    }
    int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
    const char *send = src + p->so * p->mine * p->inner;
    if (p->even)
        return ctx->ops->all_gather(r->group, send, no * p->mine * p->inner, ctx->stage_recv,
                                    &r->breq);
    int64_t *a[6];
    DTR_CHECK(dtr__arrays(ctx, p->n, a));
    int64_t *rc = a[2], *rd = a[3];
    for (int64_t m = 0; m < p->n; m++) {
        int64_t size, off;
        dtr_chunk(p->dst_len, p->n, m, &size, &off);
        rc[m] = no * size * p->inner;
        rd[m] = no * off * p->inner; /* the pieces back to back */
    }
    return ctx->ops->all_gatherv(r->group, send, no * p->mine * p->inner, ctx->stage_recv, rc,
                                 rd, &r->breq);
}

/* Places the current slice's pieces (back to back in stage_recv) into the output. */
static dtr_status_t dtr__slice_unpack(dtr_request_t *r) {
    const dtr__pending_t *p = &r->pend;
    const char *at = r->ctx->stage_recv;
    char *dst = p->dst;
    int64_t len = p->dst_len, inner = p->inner;
    if (r->ctx->mem != NULL) { /* one box per member */
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
        for (int64_t m = 0; m < p->n; m++) {
            int64_t size, off;
            dtr_chunk(len, p->n, m, &size, &off);
            if (!p->sx_whole)
                DTR_CHECK(dtr__m_copy(r->ctx, dst + (p->so * len + off + p->sx) * inner,
                                      at + m * rows * inner, rows * inner));
            else
                DTR_CHECK(dtr__m_copy3(r->ctx, at + no * off * inner, size, 0,
                                       dst + p->so * len * inner, len, off, no, size, inner));
        }
        return DTR_OK;
    }
    void (*copy)(void *, const void *, int64_t) = p->stream ? dtr__stream_copy : dtr__copy;
    if (!p->sx_whole) {
        int64_t rows = p->mine - p->sx < p->snx ? p->mine - p->sx : p->snx;
        for (int64_t m = 0; m < p->n; m++) {
            int64_t size, off;
            dtr_chunk(len, p->n, m, &size, &off);
            copy(dst + (p->so * len + off + p->sx) * inner, at + m * rows * inner, rows * inner);
        }
    } else {
        /* member m's piece is [no, size, inner] and starts at no * off * inner; write the
         * output row by row */
        int64_t no = p->outer - p->so < p->sno ? p->outer - p->so : p->sno;
        for (int64_t j = 0; j < no; j++)
            for (int64_t m = 0; m < p->n; m++) {
                int64_t size, off;
                dtr_chunk(len, p->n, m, &size, &off);
                copy(dst + ((p->so + j) * len + off) * inner, at + (no * off + j * size) * inner,
                     size * inner);
            }
    }
    if (p->stream) dtr__stream_fence();
    return DTR_OK;
}

/* Moves to the next slice; false after the last. */
static bool dtr__slice_next(dtr__pending_t *p) {
    if (!p->sx_whole) {
        p->sx += p->snx;
        if (p->sx < p->mine) return true;
        p->sx = 0;
        p->so++;
    } else {
        p->so += p->sno;
    }
    return p->so < p->outer;
}

dtr_status_t dtr__all_gather_start(dtr_request_t *r, const dtr__step_args_t *a) {
    dtr_context_t *ctx = r->ctx;
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_step_t *s = a->s;
    int nd = a->nd;
    int64_t item = a->item;
    int64_t n = a->n;
    int64_t ci = a->ci;
    int64_t out_numel = a->out_numel;
    const int64_t *osh = a->osh;
    const void *src = a->src;
    void *dst = a->dst;
    void *group = a->group;
    bool bare = a->bare;
    dtr__pending_t *pend = &r->pend;
    int64_t *arrays[6];
    DTR_CHECK(dtr__arrays(ctx, n, arrays));
    int64_t *rc = arrays[2], *rd = arrays[3], *sz = arrays[4], *of = arrays[5];
    dtr_status_t st = DTR_OK;
    int d = s->tensor_dim;
    int64_t len = osh[d], outer = dtr__prod(osh, 0, d), inner = dtr__prod(osh, d + 1, nd) * item;
    bool seed = r->plan->seed_blocks;
    if (seed) { /* the members' own blocks, concatenated in coordinate order */
        dtr__seed_pieces(&r->pctx, r->plan, a->k, r->m->coord, sz);
        for (int64_t m = 0, at = 0; m < n; at += sz[m++]) of[m] = at;
        pend->psz = sz;
        pend->pof = of;
    } else {
        dtr__chunks(len, n, sz, of);
    }
    bool even = dtr__all_equal(sz, n);
    bool padded = !even && ops->all_gatherv == NULL;
    int64_t c = sz[0], piece;
    for (int64_t m = 1; m < n; m++) c = sz[m] > c ? sz[m] : c; /* (the chunk rule's is sz[0]) */
    piece = outer * c * inner;
    const void *send = src;
    void *recv = dst;
    /* Even pieces of a non-leading dim can land in place, rows apart, through the
     * backend's strided form: instead of slices where the backend places them as fast as
     * it gathers (strided_in_place), else for gathers too small to slice. */
    bool strided = even && !seed && !bare && outer > 1 && c > 0 &&
                   ops->all_gather_strided != NULL;
    bool in_place = strided && ops->strided_in_place != NULL && ops->strided_in_place(group);
    if (!in_place && (padded || outer > 1 || bare)) {
        int64_t need = (even || padded) ? n * piece : outer * len * inner;
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, need, "receive staging"));
        recv = ctx->stage_recv;
        pend->unpack3 = !bare;
    }
    if (padded) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, piece, "send staging"));
        if (!bare) {
            DTR_CHECK(dtr__m_zero(ctx, ctx->stage_send, piece));
            DTR_CHECK(dtr__m_copy3(ctx, src, sz[ci], 0, ctx->stage_send, c, 0, outer, sz[ci],
                                   inner));
        }
        send = ctx->stage_send;
    } else if (bare) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, outer * sz[ci] * inner,
                               "send staging"));
        send = ctx->stage_send;
    }
    pend->outer = outer;
    pend->inner = inner;
    pend->dst_len = len;
    pend->npieces = n;
    if (!in_place && !bare && !seed && outer > 1 && out_numel > 0 && ctx->slice_bytes > 0 &&
        out_numel * item / DTR__SLICES_MIN >= ctx->slice_bytes &&
        (even || ops->all_gatherv != NULL)) {
        pend->unpack3 = false;
        pend->src = src;
        dtr__slice_setup(r, ctx->slice_bytes, sz, ci, even);
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, dtr__slice_stage(pend),
                               "receive staging"));
        return dtr__step_issued(r, dtr__slice_issue(r));
    }
    if (strided) {
        st = ops->all_gather_strided(group, src, outer, c * inner, len * inner, dst, &r->breq);
        if (st == DTR_OK) {
            pend->unpack3 = false;
            return dtr__step_issued(r, st);
        }
        /* in place, nothing was staged to fall back on */
        if (st != DTR_ERR_UNSUPPORTED || in_place) return dtr__step_error(r, st);
    }
    if (even || padded) {
        pend->piece_len = c;
        st = ops->all_gather(group, send, piece, recv, &r->breq);
    } else {
        int64_t at = 0;
        for (int64_t m = 0; m < n; m++) {
            rc[m] = outer * sz[m] * inner;
            rd[m] = recv == dst ? of[m] * inner : at;
            at += rc[m];
        }
        pend->piece_len = -1; /* unpadded pieces: lengths from the chunk rule */
        st = ops->all_gatherv(group, send, outer * sz[ci] * inner, recv, rc, rd, &r->breq);
    }
    if (recv == dst) pend->unpack3 = false;
    return dtr__step_issued(r, st);
}

dtr_status_t dtr__all_gather_finish(dtr_request_t *r) {
    dtr__pending_t *p = &r->pend;
    if (p->slice) DTR_CHECK(dtr__slice_unpack(r));
    DTR_CHECK(dtr__step_done(r));
    if (p->slice && dtr__slice_next(p)) return dtr__step_issued(r, dtr__slice_issue(r));
    return DTR_OK;
}

/* ---- the batch round: each member's block, back to back, gathered in one operation ------ */

static dtr_status_t dtr__ag_round_size(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                                       int64_t *send, int64_t *recv) {
    DTR_CHECK(dtr__round_pieces(ctx, b, arr, true, false));
    dtr__round_piece_bytes(b, arr, 1, true, send, recv);
    return DTR_OK;
}

static dtr_status_t dtr__ag_round_spans(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    int64_t bytes = 0;
    for (int64_t k = 0; k < b->n; k++) bytes += arr[0][k];
    return dtr__round_spans_start(ctx, b, DTR_SPANS_ALL_GATHER, bytes, arr[0]);
}

static dtr_status_t dtr__ag_round_pack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    return dtr__round_pieces(ctx, b, arr, true, true);
}

/* all_gatherv where the members' pieces are uneven, padded to the largest without it */
static dtr_status_t dtr__ag_round_start(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    void *s = ctx->stage_send, *r = ctx->stage_recv;
    if (b->padded || dtr__all_equal(arr[0], b->n))
        return ctx->ops->all_gather(b->group, s, b->padded ? b->pad : arr[0][0], r, &b->breq);
    return ctx->ops->all_gatherv(b->group, s, arr[0][b->rm[0].a.ci], r, arr[0], arr[1],
                                 &b->breq);
}

const dtr__round_ops_t dtr__all_gather_round = {
    .size = dtr__ag_round_size,
    .spans = dtr__ag_round_spans,
    .pack = dtr__ag_round_pack,
    .start = dtr__ag_round_start,
    .unpack = dtr__round_gather_unpack,
};
