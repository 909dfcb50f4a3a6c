/*
 * A batch's coalesced rounds: every member step of a round moves in one collective over one
 * packed buffer. Pieces are packed peer-major, member after member inside a peer's piece
 * (in the round's member order, which every rank shares), with the context's box copies:
 *
 *   all_gather      each member's block, back to back; one all_gather (all_gatherv when
 *                   the members' chunks are uneven, or padded pieces without it); each
 *                   received piece is cut into its members' chunks, placed along their dims
 *   reduce_scatter  piece k: every member's chunk k of its reduced dim; one reduce_scatter
 *                   (v, or padded); this rank's piece is its members' outputs back to back
 *   all_reduce      the members' blocks back to back; one all_reduce
 *   all_to_all,     piece for peer p: each member's box that p's target block covers; one
 *   exchange        all_to_allv; what arrives from p is cut into the boxes p's source
 *                   blocks give each member's target
 *
 * then each member's divide for AVG done as SUM. A member's step gets the same arguments as
 * in its own plan (steps.c prepares it), so it computes the same result.
 */
#include <stddef.h>
#include <stdlib.h>
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

/* What dtr__moves does besides counting. */
typedef enum { DTR__COUNT = 0, DTR__PACK, DTR__UNPACK } dtr__pass_t;

/* An all_to_allv round, peer by peer and member by member: counts and displacements
 * (bytes) into arr[0..3] and the totals into arr[4] (DTR__COUNT, DTR__PACK), with the
 * pieces packed into stage_send (DTR__PACK) or placed from stage_recv (DTR__UNPACK, on the
 * displacements the count left). */
static dtr_status_t dtr__moves(dtr_context_t *ctx, dtr__batch_t *b, int count, int64_t n,
                               int64_t **arr, dtr__pass_t pass) {
    int64_t at_s = 0, at_r = 0, zero[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t p = 0; p < n; p++) {
        if (pass == DTR__UNPACK) {
            at_r = arr[3][p];
        } else {
            arr[0][p] = arr[2][p] = 0;
            arr[1][p] = at_s;
            arr[3][p] = at_r;
        }
        for (int j = 0; j < count; j++) {
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
static void dtr__piece(const dtr__step_args_t *a, int64_t k, int64_t *rows, int64_t *off,
                       int64_t *outer, int64_t *inner, int64_t *len) {
    int d = a->s->tensor_dim;
    const int64_t *sh = a->s->kind == DTR_STEP_ALL_GATHER ? a->osh : a->ish;
    dtr_chunk(sh[d], a->n, k, rows, off);
    *outer = dtr__prod(sh, 0, d);
    *inner = dtr__prod(sh, d + 1, a->nd) * a->item;
    *len = sh[d];
}

/* A gather or reduce-scatter round: each piece's size (bytes for a gather, elements for a
 * reduction) in arr[0], its start in arr[1]; with copy the send buffer packed. */
static dtr_status_t dtr__pieces(dtr_context_t *ctx, dtr__batch_t *b, int count, int64_t n,
                                int64_t **arr, bool copy) {
    bool gather = b->plan->rounds[b->round].kind == DTR_STEP_ALL_GATHER;
    int64_t at = 0, most = 0;
    for (int64_t k = 0; k < n; k++) {
        arr[0][k] = 0;
        for (int j = 0; j < count; j++) {
            int64_t rows, off, outer, inner, len;
            dtr__piece(&b->rm[j].a, k, &rows, &off, &outer, &inner, &len);
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
    if (gather) { /* this rank's piece: its members' blocks back to back */
        char *to = ctx->stage_send;
        for (int j = 0; j < count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            DTR_CHECK(dtr__m_copy(ctx, to, a->src, a->in_numel * a->item));
            to += a->in_numel * a->item;
        }
        return DTR_OK;
    }
    int64_t item = b->rm[0].a.item;
    for (int64_t k = 0; k < n; k++) {
        char *to = (char *)ctx->stage_send + arr[1][k] * item;
        for (int j = 0; j < count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            int64_t rows, off, outer, inner, len;
            dtr__piece(a, k, &rows, &off, &outer, &inner, &len);
            DTR_CHECK(dtr__m_copy3(ctx, a->src, len, off, to, rows, 0, outer, rows, inner));
            to += outer * rows * inner;
        }
    }
    return DTR_OK;
}

static dtr_status_t dtr__gather_unpack(dtr_context_t *ctx, dtr__batch_t *b, int count,
                                       int64_t n, int64_t **arr) {
    for (int64_t k = 0; k < n; k++) {
        const char *at = (const char *)ctx->stage_recv + arr[1][k];
        for (int j = 0; j < count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            int64_t rows, off, outer, inner, len;
            dtr__piece(a, k, &rows, &off, &outer, &inner, &len);
            DTR_CHECK(dtr__m_copy3(ctx, at, rows, 0, a->dst, len, off, outer, rows, inner));
            at += outer * rows * inner;
        }
    }
    return DTR_OK;
}

/* Piece k of member step a (dtr__piece) in its buffer buf, as a span (rows: its outer index). */
static int dtr__piece_span(const dtr__step_args_t *a, int64_t k, const void *buf,
                           dtr_span_t *to) {
    int64_t rows, off, outer, inner, len;
    dtr__piece(a, k, &rows, &off, &outer, &inner, &len);
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

/*
 * Where the backend takes span lists (backend.h) for this round's kind, dtype and size, its
 * collective reads the members' blocks and writes their outputs in place: the pieces in the
 * order the packed buffer would hold them (peer-major, member order inside a piece), so
 * the bytes are the same and only the pack and unpack passes go. Sets b->spans where it
 * started; nothing where the backend says no.
 */
static dtr_status_t dtr__round_spans(dtr_context_t *ctx, dtr__batch_t *b, int count, int64_t n,
                                     int64_t **arr, int64_t total) {
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    const dtr__step_args_t *a0 = &b->rm[0].a;
    if (b->bare || ops->spans_start == NULL || ops->spans_ok == NULL) return DTR_OK;
    dtr_spans_kind_t kind;
    int64_t bytes = 0;
    if (rd->kind == DTR_STEP_ALL_GATHER || rd->kind == DTR_STEP_REDUCE_SCATTER) {
        kind = rd->kind == DTR_STEP_ALL_GATHER ? DTR_SPANS_ALL_GATHER : DTR_SPANS_REDUCE_SCATTER;
        for (int64_t k = 0; k < n; k++) bytes += arr[0][k];
        if (kind == DTR_SPANS_REDUCE_SCATTER) bytes *= a0->item;
    } else if (rd->kind == DTR_STEP_ALL_REDUCE) {
        kind = DTR_SPANS_ALL_REDUCE;
        bytes = total * a0->item;
    } else {
        return DTR_OK;
    }
    if (!ops->spans_ok(b->group, kind, rd->dtype, a0->op, bytes)) return DTR_OK;
    int64_t need = (int64_t)count * (n + 1);
    if (need > b->span_cap) {
        dtr_span_t *grown = realloc(b->span, sizeof *grown * (size_t)need);
        if (grown == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute_batch",
                              "round %d: %lld spans", b->round + 1, (long long)need);
        b->span = grown;
        b->span_cap = (int)need;
    }
    dtr_span_t *sp = b->span;
    int ns = 0, nr = 0;
    if (kind != DTR_SPANS_REDUCE_SCATTER) /* the members' blocks, back to back */
        for (int j = 0; j < count; j++)
            ns += dtr__block_span(&b->rm[j].a, b->rm[j].a.src, b->rm[j].a.in_numel, sp + ns);
    else /* piece k: every member's chunk k of its reduced dim */
        for (int64_t k = 0; k < n; k++)
            for (int j = 0; j < count; j++) ns += dtr__piece_span(&b->rm[j].a, k, b->rm[j].a.src, sp + ns);
    dtr_span_t *rp = sp + ns;
    if (kind != DTR_SPANS_ALL_GATHER) /* the members' outputs, back to back */
        for (int j = 0; j < count; j++)
            nr += dtr__block_span(&b->rm[j].a, b->rm[j].a.dst, b->rm[j].a.out_numel, rp + nr);
    else /* piece k: each member's chunk k, placed along its dim */
        for (int64_t k = 0; k < n; k++)
            for (int j = 0; j < count; j++) nr += dtr__piece_span(&b->rm[j].a, k, b->rm[j].a.dst, rp + nr);
    dtr_spans_op_t op = {.kind = kind, .send = sp, .recv = rp, .nsend = ns, .nrecv = nr,
                         .counts = kind == DTR_SPANS_ALL_REDUCE ? &total : arr[0],
                         .dtype = rd->dtype, .op = a0->op};
    dtr_status_t st = ops->spans_start(b->group, &op, &b->breq);
    if (st != DTR_OK) return dtr__round_error(b, st);
    b->spans = true;
    return DTR_OK;
}

/* Starts the round's collective on the packed buffers. */
static dtr_status_t dtr__round_start(dtr_context_t *ctx, dtr__batch_t *b, int64_t n,
                                     int64_t **arr, int64_t total) {
    const dtr_backend_ops_t *ops = ctx->ops;
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    const dtr__step_args_t *a0 = &b->rm[0].a;
    void *s = ctx->stage_send, *r = ctx->stage_recv;
    switch (rd->kind) {
    case DTR_STEP_ALL_GATHER:
        if (b->padded || dtr__all_equal(arr[0], n))
            return ops->all_gather(b->group, s, b->padded ? b->pad : arr[0][0], r, &b->breq);
        return ops->all_gatherv(b->group, s, arr[0][a0->ci], r, arr[0], arr[1], &b->breq);
    case DTR_STEP_REDUCE_SCATTER:
        if (b->padded || dtr__all_equal(arr[0], n))
            return ops->reduce_scatter(b->group, s, r, b->padded ? b->pad : arr[0][0], rd->dtype,
                                       a0->op, &b->breq);
        return ops->reduce_scatterv(b->group, s, r, arr[0], rd->dtype, a0->op, &b->breq);
    case DTR_STEP_ALL_REDUCE:
        return ops->all_reduce(b->group, s, r, total, rd->dtype, a0->op, &b->breq);
    default:
        return ops->all_to_allv(b->group, s, arr[0], arr[1], r, arr[2], arr[3], &b->breq);
    }
}

dtr_status_t dtr__round_issue(dtr_context_t *ctx, dtr__batch_t *b) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    int count = rd->count;
    for (int j = 0; j < count; j++) {
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
    const dtr__step_args_t *a0 = &b->rm[0].a;
    int64_t n = a0->n, *arr[6];
    DTR_CHECK(dtr__arrays(ctx, n > 2 ? n : 2, arr));
    b->group = a0->group;
    b->padded = false;
    b->spans = false;
    int64_t send = 0, recv = 0, total = 0;
    if (rd->kind == DTR_STEP_ALL_TO_ALL || rd->kind == DTR_STEP_EXCHANGE) {
        DTR_CHECK(dtr__moves(ctx, b, count, n, arr, DTR__COUNT));
        send = arr[4][0];
        recv = arr[4][1];
    } else if (rd->kind == DTR_STEP_ALL_REDUCE) {
        for (int j = 0; j < count; j++) total += b->rm[j].a.in_numel;
        send = recv = total * a0->item;
    } else {
        DTR_CHECK(dtr__pieces(ctx, b, count, n, arr, false));
        int64_t item = rd->kind == DTR_STEP_ALL_GATHER ? 1 : a0->item, all = 0;
        for (int64_t k = 0; k < n; k++) all += arr[0][k];
        int64_t whole = b->padded ? n * b->pad : all, mine = b->padded ? b->pad : arr[0][a0->ci];
        send = (rd->kind == DTR_STEP_ALL_GATHER ? mine : whole) * item;
        recv = (rd->kind == DTR_STEP_ALL_GATHER ? whole : mine) * item;
    }
    DTR_CHECK(dtr__round_spans(ctx, b, count, n, arr, total));
    if (b->spans) {
        b->in_flight = true;
        b->t0 = dtr__now();
        return DTR_OK;
    }
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, send, "batch send buffer"));
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, recv, "batch receive buffer"));
    if (rd->kind == DTR_STEP_ALL_TO_ALL || rd->kind == DTR_STEP_EXCHANGE) {
        DTR_CHECK(dtr__moves(ctx, b, count, n, arr, DTR__PACK));
    } else if (rd->kind == DTR_STEP_ALL_REDUCE) {
        char *to = ctx->stage_send;
        for (int j = 0; j < count && !b->bare; j++) {
            DTR_CHECK(dtr__m_copy(ctx, to, b->rm[j].a.src, b->rm[j].a.in_numel * a0->item));
            to += b->rm[j].a.in_numel * a0->item;
        }
    } else {
        DTR_CHECK(dtr__pieces(ctx, b, count, n, arr, true));
    }
    dtr_status_t st = dtr__round_start(ctx, b, n, arr, total);
    if (st != DTR_OK) return dtr__round_error(b, st);
    b->in_flight = true;
    b->t0 = dtr__now();
    return DTR_OK;
}

dtr_status_t dtr__round_finish(dtr_context_t *ctx, dtr__batch_t *b) {
    const dtr_batch_round_t *rd = &b->plan->rounds[b->round];
    int count = rd->count;
    if (b->bare) return DTR_OK;
    const dtr__step_args_t *a0 = &b->rm[0].a;
    int64_t n = a0->n, *arr[6];
    DTR_CHECK(dtr__arrays(ctx, n > 2 ? n : 2, arr)); /* the counts the start left there */
    if (b->spans) {
        /* (the collective wrote every output in place) */
    } else if (rd->kind == DTR_STEP_ALL_TO_ALL || rd->kind == DTR_STEP_EXCHANGE) {
        DTR_CHECK(dtr__moves(ctx, b, count, n, arr, DTR__UNPACK));
    } else if (rd->kind == DTR_STEP_ALL_GATHER) {
        DTR_CHECK(dtr__gather_unpack(ctx, b, count, n, arr));
    } else { /* reductions: this rank's piece, its members' outputs back to back */
        const char *at = ctx->stage_recv;
        for (int j = 0; j < count; j++) {
            const dtr__step_args_t *a = &b->rm[j].a;
            DTR_CHECK(dtr__m_copy(ctx, a->dst, at, a->out_numel * a->item));
            at += a->out_numel * a->item;
        }
    }
    for (int j = 0; j < count; j++) {
        const dtr__round_member_t *m = &b->rm[j];
        if (m->divide)
            DTR_CHECK(dtr__m_divide(ctx, m->a.dtype, m->a.dst, m->a.dst, m->a.out_numel,
                                     m->divisor));
        b->mem[b->plan->items[rd->first + j].tensor].next = b->plan->items[rd->first + j].step + 1;
    }
    return DTR_OK;
}
