/*
 * A change between meshes on this rank (dtr_redistribute_cross): one argument agreement over
 * the ranks of both meshes; the plan's reduction on the source mesh (a plan of its own, run
 * by the source ranks alone); then one all-to-all-v over the ranks of both meshes, each rank
 * packing the boxes it sends from its reduced block and placing the boxes it receives into
 * its target block, and copying the boxes it keeps. A rank in neither mesh returns at once.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/executor/internal.h"

#define DTR__FUNC "dtr_redistribute_cross"

/* This rank's parts: its blocks of src, mid and dst (numel 0 where it holds none). */
typedef struct {
    bool src, dst;
    dtr_layout_t sl, ml, dl;
} dtr__xside_t;

static int dtr__xcmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The position of rank r among the plan's ranks (the group's order). */
static int64_t dtr__xpos(const dtr_cross_plan_t *p, int r) {
    const int *at = bsearch(&r, p->ranks, (size_t)p->nranks, sizeof *p->ranks, dtr__xcmp);
    return at - p->ranks;
}

/* What this rank can check alone: its buffers against its blocks; the detail into msg. */
static dtr_status_t dtr__xlocal(const dtr__xside_t *x, const void *in, size_t in_bytes,
                                const void *out, size_t out_bytes, char *msg, size_t len) {
    if (x->src && (int64_t)in_bytes != x->sl.bytes)
        snprintf(msg, len, "in_bytes: %zu, but this rank's source block is %lld bytes", in_bytes,
                 (long long)x->sl.bytes);
    else if (x->src && in == NULL && in_bytes > 0)
        snprintf(msg, len, "in: must not be NULL");
    else if (x->dst && (int64_t)out_bytes < x->dl.bytes)
        snprintf(msg, len, "out_bytes: %zu, but this rank's target block is %lld bytes", out_bytes,
                 (long long)x->dl.bytes);
    else if (x->dst && out == NULL && x->dl.bytes > 0)
        snprintf(msg, len, "out: must not be NULL");
    else if (x->src && x->dst && dtr__bytes_overlap(in, in_bytes, out, (size_t)x->dl.bytes))
        snprintf(msg, len, "out: overlaps in");
    else
        return DTR_OK;
    return x->dst && (int64_t)out_bytes < x->dl.bytes ? DTR_ERR_BUFFER_TOO_SMALL
                                                       : DTR_ERR_INVALID_ARGUMENT;
}

/* The counts and displacements of this rank's sends (a[0], a[1]) and receives (a[2], a[3])
 * over the plan's ranks, and their totals (bytes). */
static void dtr__xcounts(const dtr_cross_plan_t *p, int rank, int64_t **a, int64_t *send,
                         int64_t *recv) {
    int64_t first, n;
    for (int64_t k = 0; k < p->nranks; k++) a[0][k] = a[2][k] = 0;
    dtr__cross_sends(p, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++)
        if (p->msgs[k].to != rank) a[0][dtr__xpos(p, p->msgs[k].to)] += p->msgs[k].bytes;
    dtr__cross_recvs(p, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[p->by_to[k]];
        if (m->from != rank) a[2][dtr__xpos(p, m->from)] += m->bytes;
    }
    *send = *recv = 0;
    for (int64_t k = 0; k < p->nranks; k++) {
        a[1][k] = *send;
        a[3][k] = *recv;
        *send += a[0][k];
        *recv += a[2][k];
    }
}

/* The box of message m relative to a block at offset off: its corner in lo. */
static void dtr__xcorner(const dtr__xmsg_t *m, const dtr_layout_t *l, int nd, int64_t *lo) {
    for (int d = 0; d < nd; d++) lo[d] = m->lo[d] - l->global_offset[d];
}

/* The boxes this rank sends, packed in message order into stage_send; the ones it keeps,
 * copied from its reduced block (mid) into out. */
static dtr_status_t dtr__xpack(dtr_context_t *ctx, const dtr_cross_plan_t *p,
                               const dtr__xside_t *x, const void *mid, void *out) {
    int nd = p->dst.ndim, rank = ctx->rank;
    int64_t item = dtr_dtype_info(p->dst.dtype)->size, first, n, at = 0;
    int64_t lo[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
    dtr__cross_sends(p, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        dtr__xcorner(m, &x->ml, nd, lo);
        if (m->to == rank) {
            dtr__xcorner(m, &x->dl, nd, to);
            DTR_CHECK(dtr__m_box(ctx, nd, item, mid, x->ml.local_shape, lo, m->ext, out,
                                 x->dl.local_shape, to));
            continue;
        }
        DTR_CHECK(dtr__m_box(ctx, nd, item, mid, x->ml.local_shape, lo, m->ext,
                             (char *)ctx->stage_send + at, m->ext, zero));
        at += m->bytes;
    }
    return DTR_OK;
}

/* The boxes this rank received, from stage_recv into out (by sender, in message order). */
static dtr_status_t dtr__xunpack(dtr_context_t *ctx, const dtr_cross_plan_t *p,
                                 const dtr__xside_t *x, void *out) {
    int nd = p->dst.ndim, rank = ctx->rank;
    int64_t item = dtr_dtype_info(p->dst.dtype)->size, first, n, at = 0;
    int64_t to[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
    dtr__cross_recvs(p, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[p->by_to[k]];
        if (m->from == rank) continue;
        dtr__xcorner(m, &x->dl, nd, to);
        DTR_CHECK(dtr__m_box(ctx, nd, item, (char *)ctx->stage_recv + at, m->ext, zero, m->ext,
                             out, x->dl.local_shape, to));
        at += m->bytes;
    }
    return DTR_OK;
}

/* The moves: counts, staging, pack, one all-to-all-v over the plan's ranks, unpack. */
static dtr_status_t dtr__xmoves(dtr_context_t *ctx, const dtr_cross_plan_t *p, void *group,
                                const dtr__xside_t *x, const void *mid, void *out) {
    int64_t *a[6], send, recv;
    DTR_CHECK(dtr__arrays(ctx, p->nranks > 2 ? p->nranks : 2, a));
    dtr__xcounts(p, ctx->rank, a, &send, &recv);
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, send, "cross send staging"));
    DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, recv, "cross receive staging"));
    DTR_CHECK(dtr__xpack(ctx, p, x, mid, out));
    if (group == NULL) return DTR_OK; /* one rank: its boxes were all kept */
    dtr_status_t st = ctx->ops->all_to_allv(group, ctx->stage_send, a[0], a[1], ctx->stage_recv,
                                            a[2], a[3], &ctx->gbreq);
    st = dtr__wait_op(ctx, group, st);
    if (st != DTR_OK)
        return dtr__error(st, DTR__FUNC, "the moves between the meshes: %s", dtr_last_error());
    return dtr__xunpack(ctx, p, x, out);
}

dtr_status_t dtr_redistribute_cross(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                    const void *in, size_t in_bytes, void *out,
                                    size_t out_bytes) {
    DTR_CHECK_PTR(ctx, DTR__FUNC);
    DTR_CHECK_PTR(plan, DTR__FUNC);
    DTR_CHECK(dtr__check_ready(ctx, DTR__FUNC));
    dtr__xside_t x = {0};
    x.src = dtr_spec_layout(&plan->src, ctx->rank, &x.sl) == DTR_OK;
    x.dst = dtr_spec_layout(&plan->dst, ctx->rank, &x.dl) == DTR_OK;
    if (!x.src && !x.dst) return DTR_OK; /* a bystander takes no part */
    if (x.src) dtr_spec_layout(&plan->mid, ctx->rank, &x.ml);
    void *group = NULL; /* none where both meshes are this one rank */
    if (plan->nranks > 1)
        DTR_CHECK(dtr__group(ctx, plan->ranks, plan->nranks, DTR__TAG_CROSS, &group));
    char msg[256] = "";
    dtr_status_t local = dtr__xlocal(&x, in, in_bytes, out, out_bytes, msg, sizeof msg);
    DTR_CHECK(dtr__agree_on(ctx, group, DTR__FUNC, plan->hash, local, msg));
    const void *mid = in;
    if (plan->has_pre && x.src) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->cross_mid, &ctx->cross_mid_cap, x.ml.bytes,
                               "the reduced source block"));
        dtr_status_t st = dtr_redistribute(ctx, &plan->pre, in, in_bytes, ctx->cross_mid,
                                           (size_t)x.ml.bytes);
        if (st != DTR_OK)
            return dtr__error(st, DTR__FUNC, "the reduction on the source mesh: %s",
                              dtr_last_error());
        mid = ctx->cross_mid;
    }
    return dtr__xmoves(ctx, plan, group, &x, mid, out);
}
