/*
 * What the step kinds' batch rounds share (each kind's round lives in its step_<kind>.c,
 * reached through the step table; batch_round.c drives them): the pieces of a gather or
 * reduce-scatter round, the boxes of an all-to-all or exchange round, the members' blocks
 * back to back, and the span lists of a round the backend runs in place. Pieces are packed
 * peer-major, member after member inside a peer's piece, in the round's member order, which
 * every rank shares.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/executor/internal.h"

/* Peer p's coordinate: mine with mesh dim i set to p, or (i < 0) row-major over the mesh. */
static void dtr__peer_coord(const dtr__ctx_t *pc, const int64_t *mine, int i, int64_t p,
                            int64_t *coord) {
    if (i >= 0) {
        memcpy(coord, mine, sizeof(int64_t) * (size_t)pc->mdims);
        coord[i] = p;
        return;
    }
    for (int q = pc->mdims - 1; q >= 0; q--) {
        coord[q] = p % pc->msize[q];
        p /= pc->msize[q];
    }
}

/* The box of member step a's block that a peer's piece covers: its input against the
 * peer's target (send) or its output against the peer's source (receive). Elements; 0
 * where the peer is not one of this step's (an exchange takes each element from the one
 * peer that agrees with this rank on every mesh dim the source does not shard). */
static int64_t dtr__box(const dtr__ctx_t *pc, const dtr__step_args_t *a, const int64_t *mine,
                        const int64_t *pcoord, bool send, int64_t *lo, int64_t *ext) {
    const dtr_step_t *s = a->s;
    for (int q = 0; q < pc->mdims; q++)
        if (s->before[q].kind != DTR_SHARD && pcoord[q] != mine[q]) return 0;
    int64_t ps[DTR_MAX_TENSOR_DIMS], po[DTR_MAX_TENSOR_DIMS];
    if (send) {
        dtr__layout(pc, s->after, pcoord, ps, po);
        return dtr__meet(a->nd, a->ioff, a->ish, po, ps, lo, ext);
    }
    dtr__layout(pc, s->before, pcoord, ps, po);
    return dtr__meet(a->nd, a->ooff, a->osh, po, ps, lo, ext);
}

dtr_status_t dtr__round_moves(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr,
                              dtr__pass_t pass) {
    int64_t at_s = 0, at_r = 0, zero[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t p = 0; p < b->n; p++) {
        if (pass == DTR__UNPACK) {
            at_r = arr[3][p];
        } else {
            arr[0][p] = arr[2][p] = 0;
            arr[1][p] = at_s;
            arr[3][p] = at_r;
        }
        for (int j = 0; j < b->count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            const dtr__ctx_t *pc = b->rm[j].pc;
            int64_t pcoord[DTR_MAX_MESH_DIMS], lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
            dtr__peer_coord(pc, b->m->coord, a->i, p, pcoord);
            if (pass != DTR__UNPACK) {
                int64_t cnt = dtr__box(pc, a, b->m->coord, pcoord, true, lo, ext) * a->item;
                if (pass == DTR__PACK && cnt > 0 && !b->bare)
                    DTR_CHECK(dtr__m_box(ctx, a->nd, a->item, a->src, a->ish, lo, ext,
                                         (char *)ctx->stage_send + at_s, ext, zero));
                at_s += cnt;
                arr[0][p] += cnt;
            }
            int64_t rcnt = dtr__box(pc, a, b->m->coord, pcoord, false, lo, ext) * a->item;
            if (pass == DTR__UNPACK && rcnt > 0)
                DTR_CHECK(dtr__m_box(ctx, a->nd, a->item, (char *)ctx->stage_recv + at_r, ext,
                                     zero, ext, a->dst, a->osh, lo));
            at_r += rcnt;
            if (pass != DTR__UNPACK) arr[2][p] += rcnt;
        }
    }
    if (pass != DTR__UNPACK) {
        arr[4][0] = at_s;
        arr[4][1] = at_r;
    }
    return DTR_OK;
}

/* Piece k of member step a along its dim d (the gathered one, or the reduced one): rows,
 * and the [outer, rows, inner bytes] view around them. */
static void dtr__piece(const dtr__step_args_t *a, bool gather, int64_t k, int64_t *rows,
                       int64_t *off, int64_t *outer, int64_t *inner, int64_t *len) {
    int d = a->s->tensor_dim;
    const int64_t *sh = gather ? a->osh : a->ish;
    dtr_chunk(sh[d], a->n, k, rows, off);
    *outer = dtr__prod(sh, 0, d);
    *inner = dtr__prod(sh, d + 1, a->nd) * a->item;
    *len = sh[d];
}

dtr_status_t dtr__round_pieces(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr, bool gather,
                               bool copy) {
    int64_t at = 0, most = 0, n = b->n;
    for (int64_t k = 0; k < n; k++) {
        arr[0][k] = 0;
        for (int j = 0; j < b->count; j++) {
            int64_t rows, off, outer, inner, len;
            dtr__piece(&b->rm[j].a, gather, k, &rows, &off, &outer, &inner, &len);
            arr[0][k] += outer * rows * inner / (gather ? 1 : b->rm[j].a.item);
        }
        if (arr[0][k] > most) most = arr[0][k];
    }
    b->padded = !dtr__all_equal(arr[0], n) &&
                (gather ? ctx->ops->all_gatherv == NULL : ctx->ops->reduce_scatterv == NULL);
    b->pad = most;
    for (int64_t k = 0; k < n; k++) {
        arr[1][k] = b->padded ? k * most : at;
        at += arr[0][k];
    }
    if (!copy || b->bare) return DTR_OK;
    if (gather) return dtr__round_pack_blocks(ctx, b, arr); /* this rank's piece: its blocks */
    int64_t item = b->rm[0].a.item;
    for (int64_t k = 0; k < n; k++) {
        char *to = (char *)ctx->stage_send + arr[1][k] * item;
        for (int j = 0; j < b->count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            int64_t rows, off, outer, inner, len;
            dtr__piece(a, false, k, &rows, &off, &outer, &inner, &len);
            DTR_CHECK(dtr__m_copy3(ctx, a->src, len, off, to, rows, 0, outer, rows, inner));
            to += outer * rows * inner;
        }
    }
    return DTR_OK;
}

void dtr__round_piece_bytes(const dtr__batch_t *b, int64_t **arr, int64_t item, bool gather,
                            int64_t *send, int64_t *recv) {
    int64_t all = 0;
    for (int64_t k = 0; k < b->n; k++) all += arr[0][k];
    int64_t whole = b->padded ? b->n * b->pad : all;
    int64_t mine = b->padded ? b->pad : arr[0][b->rm[0].a.ci];
    *send = (gather ? mine : whole) * item;
    *recv = (gather ? whole : mine) * item;
}

dtr_status_t dtr__round_gather_unpack(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    for (int64_t k = 0; k < b->n; k++) {
        const char *at = (const char *)ctx->stage_recv + arr[1][k];
        for (int j = 0; j < b->count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            int64_t rows, off, outer, inner, len;
            dtr__piece(a, true, k, &rows, &off, &outer, &inner, &len);
            DTR_CHECK(dtr__m_copy3(ctx, at, rows, 0, a->dst, len, off, outer, rows, inner));
            at += outer * rows * inner;
        }
    }
    return DTR_OK;
}

/* The members' blocks back to back: their inputs into stage_send (pack), or stage_recv into
 * their outputs. */
static dtr_status_t dtr__round_blocks(dtr_context_t *ctx, dtr__batch_t *b, bool pack) {
    char *at = pack ? ctx->stage_send : ctx->stage_recv;
    for (int j = 0; j < b->count; j++) {
        const dtr__step_args_t *a = &b->rm[j].a;
        int64_t bytes = (pack ? a->in_numel : a->out_numel) * a->item;
        if (pack)
            DTR_CHECK(dtr__m_copy(ctx, at, a->src, bytes));
        else
            DTR_CHECK(dtr__m_copy(ctx, a->dst, at, bytes));
        at += bytes;
    }
    return DTR_OK;
}

dtr_status_t dtr__round_pack_blocks(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    (void)arr;
    return dtr__round_blocks(ctx, b, true);
}

dtr_status_t dtr__round_unpack_blocks(dtr_context_t *ctx, dtr__batch_t *b, int64_t **arr) {
    (void)arr;
    return dtr__round_blocks(ctx, b, false);
}

/* Piece k of member step a (dtr__piece) in its buffer buf, as a span (rows: its outer index). */
static int dtr__piece_span(const dtr__step_args_t *a, bool gather, int64_t k, const void *buf,
                           dtr_span_t *to) {
    int64_t rows, off, outer, inner, len;
    dtr__piece(a, gather, k, &rows, &off, &outer, &inner, &len);
    if (outer * rows * inner == 0) return 0;
    *to = (dtr_span_t){.base = (char *)buf + off * inner, .rows = outer, .run = rows * inner,
                       .stride = len * inner};
    return 1;
}

/* A member's whole block of numel elements as a span. */
static int dtr__block_span(const dtr__step_args_t *a, const void *buf, int64_t numel,
                           dtr_span_t *to) {
    int64_t bytes = numel * a->item;
    if (bytes == 0) return 0;
    *to = (dtr_span_t){.base = (char *)buf, .rows = 1, .run = bytes, .stride = bytes};
    return 1;
}

/* One side's spans: the members' blocks back to back, or piece k of every member for each
 * peer k in turn (a gather's receive side, a reduce-scatter's send side). */
static int dtr__side_spans(const dtr__batch_t *b, bool send, bool pieces, bool gather,
                           dtr_span_t *sp) {
    int ns = 0;
    for (int64_t k = 0; k < (pieces ? b->n : 1); k++)
        for (int j = 0; j < b->count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            const void *buf = send ? a->src : a->dst;
            ns += pieces ? dtr__piece_span(a, gather, k, buf, sp + ns)
                         : dtr__block_span(a, buf, send ? a->in_numel : a->out_numel, sp + ns);
        }
    return ns;
}

dtr_status_t dtr__round_spans_start(dtr_context_t *ctx, dtr__batch_t *b, dtr_spans_kind_t kind,
                                    int64_t bytes, const int64_t *counts) {
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    const dtr__step_args_t *a0 = &b->rm[0].a;
    if (b->bare || ops->spans_start == NULL || ops->spans_ok == NULL) return DTR_OK;
    if (!ops->spans_ok(b->group, kind, rd->dtype, a0->op, bytes)) return DTR_OK;
    int64_t need = (int64_t)b->count * (b->n + 1);
    if (need > b->span_cap) {
        dtr_span_t *grown = realloc(b->span, sizeof *grown * (size_t)need);
        if (grown == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute_batch",
                              "round %d: %lld spans", b->round + 1, (long long)need);
        b->span = grown;
        b->span_cap = (int)need;
    }
    bool gather = kind == DTR_SPANS_ALL_GATHER;
    int ns = dtr__side_spans(b, true, kind == DTR_SPANS_REDUCE_SCATTER, gather, b->span);
    int nr = dtr__side_spans(b, false, gather, gather, b->span + ns);
    dtr_spans_op_t op = {.kind = kind, .send = b->span, .recv = b->span + ns, .nsend = ns,
                         .nrecv = nr, .counts = counts, .dtype = rd->dtype, .op = a0->op};
    DTR_CHECK(ops->spans_start(b->group, &op, &b->breq));
    b->spans = true;
    return DTR_OK;
}
