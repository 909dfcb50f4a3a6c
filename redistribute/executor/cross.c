/*
 * A change between meshes on this rank (dtr_redistribute_cross, _batch): one argument
 * agreement over the ranks of both meshes; then round by round: the reductions on the
 * source mesh of the tensors that start in it (a plan of their own, run by the source ranks
 * alone, into the context's scratch), and one all-to-all-v over the ranks of both meshes,
 * each rank packing the boxes it sends from its (reduced) source blocks and placing the
 * boxes it receives into its target blocks (or, where each is one run of its block, one a
 * peer, sending and receiving them where they lie: dtr__xdirect); the boxes it keeps are
 * copied in their tensor's first round. A rank in neither mesh returns at once. The _start forms return
 * after the first round's all-to-all-v has started; test and wait place its boxes and run
 * the next rounds (their reductions blocking, their moves overlapping the caller).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "redistribute/executor/internal.h"

/* This rank's part in one tensor: its blocks of src, mid and dst (whether it holds them),
 * its buffers, and where its reduced source block is. */
typedef struct {
    bool src, dst;
    dtr_layout_t sl, ml, dl;
    const void *in, *mid;
    size_t in_bytes, out_bytes;
    void *out;
} dtr__xside_t;


/* What this rank can check alone of tensor i: its buffers against its blocks; the detail
 * into msg (naming the entry for a batch). */
static dtr_status_t dtr__xlocal(const dtr__xside_t *x, int i, bool batch, char *msg, size_t len) {
    char at[24] = "";
    if (batch) snprintf(at, sizeof at, "[%d]", i);
    if (x->src && (int64_t)x->in_bytes != x->sl.bytes)
        snprintf(msg, len, "in_bytes%s: %zu, but this rank's source block is %lld bytes", at,
                 x->in_bytes, (long long)x->sl.bytes);
    else if (x->src && x->in == NULL && x->in_bytes > 0)
        snprintf(msg, len, "in%s: must not be NULL", at);
    else if (x->dst && (int64_t)x->out_bytes < x->dl.bytes)
        snprintf(msg, len, "out_bytes%s: %zu, but this rank's target block is %lld bytes", at,
                 x->out_bytes, (long long)x->dl.bytes);
    else if (x->dst && x->out == NULL && x->dl.bytes > 0)
        snprintf(msg, len, "out%s: must not be NULL", at);
    else if (x->src && x->dst && dtr__bytes_overlap(x->in, x->in_bytes, x->out, (size_t)x->dl.bytes))
        snprintf(msg, len, "out%s: overlaps in%s", at, at);
    else
        return DTR_OK;
    return x->dst && (int64_t)x->out_bytes < x->dl.bytes ? DTR_ERR_BUFFER_TOO_SMALL
                                                          : DTR_ERR_INVALID_ARGUMENT;
}

/* The counts and displacements of this rank's sends (a[0], a[1]) and receives (a[2], a[3])
 * in a round over the plan's ranks, and their totals (bytes). */
static void dtr__xcounts(const dtr_cross_plan_t *p, int round, int rank, int64_t **a,
                         int64_t *send, int64_t *recv) {
    int64_t first, n;
    for (int64_t k = 0; k < p->nranks; k++) a[0][k] = a[2][k] = 0;
    dtr__cross_sends(p, round, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++)
        if (p->msgs[k].to != rank) a[0][dtr__xpos(p, p->msgs[k].to)] += p->msgs[k].bytes;
    dtr__cross_recvs(p, round, rank, &first, &n);
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

static int64_t dtr__xrun(int nd, int64_t item, const int64_t *shape, const int64_t *lo,
                         const int64_t *ext);

/* The box of message m relative to a block at offset off: its corner in lo. */
static void dtr__xcorner(const dtr__xmsg_t *m, const dtr_layout_t *l, int nd, int64_t *lo) {
    for (int d = 0; d < nd; d++) lo[d] = m->lo[d] - l->global_offset[d];
}

/* Message m's box from this rank's (reduced) source block into dst's box: a copy, or where
 * the tensor's cast runs on the wire, a cast from the source's dtype as it is packed. */
static dtr_status_t dtr__xbox(dtr_context_t *ctx, const dtr__xtensor_t *t, const dtr__xside_t *x,
                              const int64_t *lo, const int64_t *ext, void *dst,
                              const int64_t *dshape, const int64_t *dlo) {
    int nd = t->dst.ndim;
    if (t->wire_cast)
        return dtr__m_box_cast(ctx, nd, t->src.dtype, x->mid, x->ml.local_shape, lo, ext,
                               t->dst.dtype, dst, dshape, dlo);
    return dtr__m_box(ctx, nd, dtr_dtype_info(t->dst.dtype)->size, x->mid, x->ml.local_shape, lo,
                      ext, dst, dshape, dlo);
}

/* The boxes this rank sends in a round, packed in message order into stage_send (none
 * where `direct`: they go from where they lie); the ones it keeps, copied from its reduced
 * blocks into its targets. */
static dtr_status_t dtr__xpack(dtr_context_t *ctx, const dtr_cross_plan_t *p, int round,
                               const dtr__xside_t *xs, bool direct) {
    int rank = ctx->rank;
    int64_t first, n, at = 0;
    int64_t lo[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
    dtr__cross_sends(p, round, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        const dtr__xside_t *x = &xs[m->tensor];
        const dtr__xtensor_t *t = &p->t[m->tensor];
        dtr__xcorner(m, &x->ml, t->dst.ndim, lo);
        if (m->to == rank && t->at_receiver) continue; /* (summed with the others: dtr__xsum) */
        if (m->to == rank) {
            dtr__xcorner(m, &x->dl, t->dst.ndim, to);
            DTR_CHECK(dtr__xbox(ctx, t, x, lo, m->ext, x->out, x->dl.local_shape, to));
            continue;
        }
        if (direct) continue;
        DTR_CHECK(dtr__xbox(ctx, t, x, lo, m->ext, (char *)ctx->stage_send + at, m->ext, zero));
        at += m->bytes;
    }
    return DTR_OK;
}

/* An addend of a box summed at the receiver: its message, and where its bytes lie (in
 * stage_recv; NULL: in this rank's own source block). */
typedef struct {
    const dtr__xmsg_t *m;
    const char *data;
} dtr__xaddend_t;

/* By tensor, box and addend: a box's addends together, in addend order. */
static int dtr__cmp_addend(const void *a, const void *b) {
    const dtr__xmsg_t *x = ((const dtr__xaddend_t *)a)->m, *y = ((const dtr__xaddend_t *)b)->m;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++)
        if (x->lo[d] != y->lo[d]) return x->lo[d] < y->lo[d] ? -1 : 1;
    return (x->part > y->part) - (x->part < y->part);
}

/* Where box [lo, lo + ext) of a block of shape `shape` is one run of it: its first byte's
 * offset; -1 otherwise. */
static int64_t dtr__xrun(int nd, int64_t item, const int64_t *shape, const int64_t *lo,
                         const int64_t *ext) {
    int j = 0;
    while (j < nd && ext[j] == 1) j++;
    for (int d = j + 1; d < nd; d++)
        if (ext[d] != shape[d]) return -1;
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off = off * shape[d] + lo[d];
    return off * item;
}

/* A box where it lies: its first byte, and each dim's stride in bytes, in a block of
 * `shape` whose corner the box has at lo. */
typedef struct {
    const char *at;
    int64_t stride[DTR_MAX_TENSOR_DIMS];
} dtr__xview_t;

static dtr__xview_t dtr__xview(const void *block, int nd, int64_t item, const int64_t *shape,
                               const int64_t *lo) {
    dtr__xview_t v = {.at = block};
    int64_t s = item;
    for (int d = nd - 1; d >= 0; d--) {
        v.stride[d] = s;
        v.at += lo[d] * s;
        s *= shape[d];
    }
    return v;
}

/* What the receivers combine a source's addends with: its Partial dims' op (one op; the
 * planner takes no other to the receivers). */
static dtr_reduce_op_t dtr__xop(const dtr_spec_t *src) {
    int i = 0, m = dtr_mesh_ndims(src->mesh);
    while (i < m && src->placements[i].kind != DTR_PARTIAL) i++;
    return i < m ? src->placements[i].op : DTR_REDUCE_SUM;
}

/* On host memory: the n addends' views combined by op (a sum; a ragged source's max, min or
 * product) into out's, a row of the box (its last dim) at a time, in addend order
 * (dtr__reduce_n: halves widened, rounded once). */
static void dtr__xsum_rows(dtr_dtype_t dtype, dtr_reduce_op_t op, int nd, const int64_t *ext,
                           const dtr__xview_t *v, int n, const dtr__xview_t *out, const void **in) {
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0}, len = nd > 0 ? ext[nd - 1] : 1;
    for (;;) {
        int64_t o = 0;
        for (int d = 0; d + 1 < nd; d++) o += idx[d] * out->stride[d];
        for (int k = 0; k < n; k++) {
            int64_t off = 0;
            for (int d = 0; d + 1 < nd; d++) off += idx[d] * v[k].stride[d];
            in[k] = v[k].at + off;
        }
        dtr__reduce_n(dtype, op, in, n, (char *)out->at + o, len);
        int d = nd - 2;
        for (; d >= 0 && ++idx[d] == ext[d]; d--) idx[d] = 0;
        if (d < 0) return;
    }
}

/*
 * One box's n addends (a[0..n), in addend order) summed into this rank's target block: on
 * host memory row by row, each addend read where it lies (dtr__xsum_rows); on a memory
 * space the first copied into scratch (this rank's own out of its source block), the others
 * added in turn (its `add`), then the sum copied into the target.
 */
static dtr_status_t dtr__xsum(dtr_context_t *ctx, const dtr_cross_plan_t *p,
                              const dtr__xside_t *xs, const dtr__xaddend_t *a, int n,
                              const void **in, dtr__xview_t *v) {
    const dtr__xmsg_t *m = a[0].m;
    const dtr__xtensor_t *t = &p->t[m->tensor];
    const dtr__xside_t *x = &xs[m->tensor];
    int nd = t->dst.ndim;
    int64_t item = dtr_dtype_info(t->dst.dtype)->size, count = m->bytes / item;
    int64_t lo[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0}, gap = (m->bytes + 63) / 64 * 64;
    if (ctx->mem == NULL) {
        for (int k = 0; k < n; k++) {
            dtr__xcorner(a[k].m, &x->ml, nd, lo);
            v[k] = a[k].data != NULL ? dtr__xview(a[k].data, nd, item, m->ext, zero)
                                     : dtr__xview(x->mid, nd, item, x->ml.local_shape, lo);
        }
        dtr__xcorner(m, &x->dl, nd, lo);
        dtr__xview_t out = dtr__xview(x->out, nd, item, x->dl.local_shape, lo);
        dtr__xsum_rows(t->dst.dtype, dtr__xop(&t->src), nd, m->ext, v, n, &out, in);
        return DTR_OK;
    }
    if (dtr__xop(&t->src) != DTR_REDUCE_SUM)
        return dtr__error(DTR_ERR_UNSUPPORTED, "dtr_redistribute_cross",
                          "a Partial(%s) combined at the receiver: a memory space only adds "
                          "(move this ragged source's blocks on host memory)",
                          dtr_reduce_op_name(dtr__xop(&t->src)));
    if (ctx->mem->add == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, "dtr_redistribute_cross",
                          "a Partial summed at the receiver: this memory space cannot add "
                          "(plan with DTR_CROSS_REDUCE=source)");
    DTR_CHECK(dtr__reserve(ctx, &ctx->cross_cast, &ctx->cross_cast_cap, 2 * gap,
                           "a box summed at the receiver"));
    char *acc = ctx->cross_cast, *own = acc + gap;
    for (int k = 0; k < n; k++) {
        in[k] = a[k].data;
        if (in[k] != NULL) continue;
        dtr__xcorner(a[k].m, &x->ml, nd, lo);
        DTR_CHECK(dtr__m_box(ctx, nd, item, x->mid, x->ml.local_shape, lo, m->ext, own, m->ext, zero));
        in[k] = own;
    }
    DTR_CHECK(dtr__m_copy(ctx, acc, in[0], m->bytes));
    for (int k = 1; k < n; k++) {
        dtr_status_t st = ctx->mem->add(ctx->mem_state, t->dst.dtype, in[k], acc, count);
        if (st != DTR_OK) return dtr__m_fail(ctx, st, "add");
    }
    dtr__xcorner(m, &x->dl, nd, lo);
    return dtr__m_box(ctx, nd, item, acc, m->ext, zero, m->ext, x->out, x->dl.local_shape, lo);
}

/* The boxes summed at this rank in a round (na addends in a), box by box. */
static dtr_status_t dtr__xsums(dtr_context_t *ctx, const dtr_cross_plan_t *p,
                               const dtr__xside_t *xs, dtr__xaddend_t *a, int64_t na) {
    qsort(a, (size_t)na, sizeof *a, dtr__cmp_addend);
    const void **in = malloc(sizeof *in * (size_t)(na > 0 ? na : 1));
    dtr__xview_t *v = malloc(sizeof *v * (size_t)(na > 0 ? na : 1));
    if (in == NULL || v == NULL) {
        free(in), free(v);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute_cross", "addends");
    }
    dtr_status_t st = DTR_OK;
    for (int64_t k = 0, j; k < na && st == DTR_OK; k = j) {
        for (j = k + 1; j < na && a[j].m->part > a[j - 1].m->part; j++) {}
        st = dtr__xsum(ctx, p, xs, a + k, (int)(j - k), in, v);
    }
    free(in), free(v);
    return st;
}

/* The boxes this rank received in a round, from stage_recv into its targets (by sender, in
 * message order); those of a Partial summed at the receiver, with this rank's own addends,
 * summed box by box (dtr__xsums). */
static dtr_status_t dtr__xunpack(dtr_context_t *ctx, const dtr_cross_plan_t *p, int round,
                                 const dtr__xside_t *xs, bool direct) {
    if (direct) return DTR_OK; /* (each box arrived where it belongs) */
    int rank = ctx->rank;
    int64_t first, n, at = 0, na = 0;
    int64_t to[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
    dtr__xaddend_t *a = NULL;
    dtr__cross_recvs(p, round, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[p->by_to[k]];
        const dtr__xside_t *x = &xs[m->tensor];
        int nd = p->t[m->tensor].dst.ndim;
        char *data = m->from == rank ? NULL : (char *)ctx->stage_recv + at;
        if (p->t[m->tensor].at_receiver) {
            if (a == NULL && (a = malloc(sizeof *a * (size_t)n)) == NULL)
                return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute_cross", "addends");
            a[na++] = (dtr__xaddend_t){m, data};
        } else if (data != NULL) {
            dtr__xcorner(m, &x->dl, nd, to);
            dtr_status_t st = dtr__m_box(ctx, nd, dtr_dtype_info(p->t[m->tensor].dst.dtype)->size,
                                         data, m->ext, zero, m->ext, x->out, x->dl.local_shape, to);
            if (st != DTR_OK) {
                free(a);
                return st;
            }
        }
        if (data != NULL) at += m->bytes;
    }
    dtr_status_t st = na > 0 ? dtr__xsums(ctx, p, xs, a, na) : DTR_OK;
    free(a);
    return st;
}

/* The mids' scratch (the plan's mid_bytes) and each tensor's reduced block in it. */
static dtr_status_t dtr__xmids(dtr_context_t *ctx, const dtr_cross_plan_t *p, dtr__xside_t *xs) {
    if (p->mid_bytes > 0)
        DTR_CHECK(dtr__reserve(ctx, &ctx->cross_mid, &ctx->cross_mid_cap, p->mid_bytes,
                               "the reduced source blocks"));
    for (int t = 0; t < p->ntensors; t++)
        if (p->t[t].has_pre && xs[t].src) xs[t].mid = (char *)ctx->cross_mid + p->t[t].mid_offset;
    return DTR_OK;
}

/* The reductions on the source mesh of the tensors whose first round is `round`: those
 * its batch coalesces in one call, the others one by one (a rank with empty blocks still
 * takes part). */
static dtr_status_t dtr__xpre(dtr_context_t *ctx, const dtr_cross_plan_t *p, int round,
                              dtr__xside_t *xs, const char *func) {
    dtr_status_t st = DTR_OK;
    const dtr_batch_plan_t *bp = p->pre_batch != NULL ? p->pre_batch[round] : NULL;
    if (bp != NULL && xs[0].src) { /* (every tensor's source is on one mesh) */
        const void **in = malloc(sizeof *in * (size_t)bp->ntensors);
        void **out = malloc(sizeof *out * (size_t)bp->ntensors);
        size_t *ib = malloc(sizeof *ib * (size_t)bp->ntensors), *ob = malloc(sizeof *ob * (size_t)bp->ntensors);
        int m = 0;
        for (int t = 0; in && out && ib && ob && t < p->ntensors; t++)
            if (p->t[t].round == round && dtr__xcoalesced(p, t))
                in[m] = xs[t].in, ib[m] = xs[t].in_bytes, out[m] = (void *)xs[t].mid,
                ob[m++] = (size_t)xs[t].ml.bytes;
        st = in && out && ib && ob ? dtr_redistribute_batch(ctx, bp, in, ib, out, ob)
                                   : dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the reductions' arrays");
        free(in), free(out), free(ib), free(ob);
    }
    for (int t = 0; st == DTR_OK && t < p->ntensors; t++) {
        dtr__xside_t *x = &xs[t];
        if (!p->t[t].has_pre || !x->src || p->t[t].round != round || dtr__xcoalesced(p, t)) continue;
        st = dtr_redistribute(ctx, p->t[t].pre, x->in, x->in_bytes, (void *)x->mid, (size_t)x->ml.bytes);
    }
    if (st != DTR_OK)
        return dtr__error(st, func, "the reduction on the source mesh%s: %s",
                          p->ntensors > 1 ? " (a tensor of the batch)" : "", dtr_last_error());
    return DTR_OK;
}

/* A change between meshes in flight (the executor state's xreq, its progress below): the sides
 * (owned), the group, the round and whether its all-to-all-v is in flight. */
typedef struct {
    const dtr_cross_plan_t *plan;
    dtr__xside_t *xs;
    void *group;
    int round;
    bool moving;
    bool dsend, drecv; /* the round's boxes sent from / received into the blocks themselves */
    double t0;
    const char *func;
} dtr__xstate_t;

/*
 * Whether this rank's sends (send true) or receives in a round can skip the staging: host
 * memory, every box to or from another rank one of a single tensor, no cast on the wire
 * (nor, received, a sum at the receiver), each one run of its block, at most one per peer
 * (the all-to-all-v takes one displacement a peer). Then the
 * all-to-all-v moves them from where they lie (*base: that block; displs[k]: the box to or
 * from the rank at position k). Each rank decides for itself: the all-to-all-v's counts do
 * not change, only where this rank's bytes lie.
 */
static bool dtr__xdirect(dtr_context_t *ctx, const dtr_cross_plan_t *p, int round,
                         const dtr__xside_t *xs, bool send, char **base, int64_t *displs) {
    int64_t first, n;
    int tensor = -1;
    if (ctx->mem != NULL) return false;
    if (send) dtr__cross_sends(p, round, ctx->rank, &first, &n);
    else dtr__cross_recvs(p, round, ctx->rank, &first, &n);
    for (int64_t k = 0; k < p->nranks; k++) displs[k] = -1;
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &p->msgs[send ? k : p->by_to[k]];
        const dtr__xtensor_t *t = &p->t[m->tensor];
        if (m->from == m->to) continue;
        if ((tensor >= 0 && m->tensor != tensor) || t->wire_cast || (!send && t->at_receiver)) return false;
        tensor = m->tensor;
        const dtr__xside_t *x = &xs[tensor];
        const dtr_layout_t *l = send ? &x->ml : &x->dl;
        int64_t lo[DTR_MAX_TENSOR_DIMS], peer = dtr__xpos(p, send ? m->to : m->from);
        dtr__xcorner(m, l, t->dst.ndim, lo);
        int64_t run = dtr__xrun(t->dst.ndim, dtr_dtype_info(t->dst.dtype)->size, l->local_shape, lo, m->ext);
        if (run < 0 || displs[peer] >= 0) return false;
        displs[peer] = run;
        *base = send ? (char *)x->mid : (char *)x->out;
    }
    if (tensor < 0) return false;
    for (int64_t k = 0; k < p->nranks; k++)
        if (displs[k] < 0) displs[k] = 0; /* (no bytes to or from that rank) */
    return true;
}

static void dtr__xstate_free(dtr_request_t *r) {
    dtr__xstate_t *x = r->xstate;
    if (x != NULL) free(x->xs);
    free(x);
    r->xstate = NULL;
}

/* Round x->round begun: the reductions of the tensors starting there (blocking, on the
 * source mesh: the context is marked idle meanwhile, so that they run as calls of their
 * own), counts, staging, pack, and the round's all-to-all-v started. */
static dtr_status_t dtr__xbegin(dtr_context_t *ctx, dtr__xstate_t *x) {
    const dtr_cross_plan_t *p = x->plan;
    int64_t *a[6], send, recv;
    bool busy = ctx->busy;
    ctx->busy = false;
    dtr_status_t st = dtr__xpre(ctx, p, x->round, x->xs, x->func);
    ctx->busy = busy;
    DTR_CHECK(st);
    DTR_CHECK(dtr__arrays(ctx, p->nranks > 2 ? p->nranks : 2, a));
    dtr__xcounts(p, x->round, ctx->rank, a, &send, &recv);
    char *sbase = NULL, *rbase = NULL;
    x->dsend = dtr__xdirect(ctx, p, x->round, x->xs, true, &sbase, a[4]);
    x->drecv = dtr__xdirect(ctx, p, x->round, x->xs, false, &rbase, a[5]);
    if (!x->dsend)
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, send, "cross send staging"));
    if (!x->drecv)
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_recv, &ctx->recv_cap, recv, "cross receive staging"));
    DTR_CHECK(dtr__xpack(ctx, p, x->round, x->xs, x->dsend));
    if (x->group == NULL) return DTR_OK; /* one rank: its boxes were all kept */
    st = ctx->ops->all_to_allv(x->group, x->dsend ? sbase : ctx->stage_send, a[0],
                               x->dsend ? a[4] : a[1], x->drecv ? rbase : ctx->stage_recv, a[2],
                               x->drecv ? a[5] : a[3], &ctx->gbreq);
    if (st != DTR_OK)
        return dtr__error(st, x->func, "the moves between the meshes (round %d of %d): %s",
                          x->round, p->nrounds, dtr_last_error());
    x->moving = true;
    x->t0 = dtr__now();
    return DTR_OK;
}

/* After the verdict: the mids placed and the first round begun (done at once where there
 * is none). */
static dtr_status_t dtr__xafter(dtr_request_t *r, dtr__xstate_t *x) {
    DTR_CHECK(dtr__xmids(r->ctx, x->plan, x->xs));
    if (x->plan->nrounds == 0) {
        r->phase = DTR__PHASE_DONE;
        return DTR_OK;
    }
    return dtr__xbegin(r->ctx, x);
}

/* The agreement over both meshes' ranks tested (or waited on); once it completed, its
 * verdict (this rank's own error first, then another's rejection or different plans) and,
 * where it passed, dtr__xafter. */
static dtr_status_t dtr__xagreed(dtr_request_t *r, bool block, bool *done) {
    dtr__xstate_t *x = r->xstate;
    dtr_status_t st = dtr__poll(r->ctx, x->group, &r->abreq, r->at0, block, done);
    if (st == DTR_OK && !*done) return DTR_OK;
    r->agreeing = false;
    *done = true;
    if (st != DTR_OK)
        return dtr__error(st, x->func, "argument agreement over the group: %s",
                          dtr_last_error());
    st = dtr__agree_done(r->ctx, r->agree_recv);
    if (st == DTR_OK)
        st = dtr__agree_verdict(r->agree_recv, x->func, r->local_status, r->local_msg,
                                "the group's members called with different arguments (counts, "
                                "dtypes, ops, meshes or settings)");
    return st == DTR_OK ? dtr__xafter(r, x) : st;
}

/* The request's progress: the round's all-to-all-v tested (or waited on), its boxes
 * placed, the next round begun; done after the last. */
static dtr_status_t dtr__xprogress(dtr_request_t *r, bool block) {
    dtr__xstate_t *x = r->xstate;
    dtr_context_t *ctx = r->ctx;
    dtr_status_t st = DTR_OK;
    if (r->agreeing) {
        bool done = false;
        st = dtr__xagreed(r, block, &done);
        if (st == DTR_OK && !done) return DTR_OK;
        if (st != DTR_OK || r->phase == DTR__PHASE_DONE) {
            dtr__xstate_free(r);
            return st;
        }
        if (!block && x->moving) return DTR_OK; /* the first round's exchange in flight */
    }
    while (st == DTR_OK && r->phase != DTR__PHASE_DONE) {
        if (x->moving) {
            bool done = false;
            st = dtr__poll(ctx, x->group, &ctx->gbreq, x->t0, block, &done);
            if (st != DTR_OK) {
                st = dtr__error(st, x->func, "the moves between the meshes (round %d of %d): %s",
                                x->round, x->plan->nrounds, dtr_last_error());
                break;
            }
            if (!done) return DTR_OK;
            x->moving = false;
            st = dtr__xunpack(ctx, x->plan, x->round, x->xs, x->drecv);
        }
        if (st == DTR_OK && ++x->round == x->plan->nrounds) r->phase = DTR__PHASE_DONE;
        else if (st == DTR_OK) st = dtr__xbegin(ctx, x);
        if (!block && x->moving) return st;
    }
    dtr__xstate_free(r);
    return st;
}

/* The call started: sides, and the agreement over both meshes' ranks started, not waited
 * for (owns xs); the progress completes it and begins the first round. A bystander's
 * request is complete at once. */
static dtr_status_t dtr__xstart(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                dtr__xside_t *xs, bool batch, const char *func,
                                dtr_request_t **req) {
    bool any = false;
    for (int t = 0; t < plan->ntensors; t++) {
        dtr__xside_t *x = &xs[t];
        x->src = dtr_spec_layout(&plan->t[t].src, ctx->rank, &x->sl) == DTR_OK;
        x->dst = dtr_spec_layout(&plan->t[t].dst, ctx->rank, &x->dl) == DTR_OK;
        if (x->src) dtr_spec_layout(&plan->t[t].mid, ctx->rank, &x->ml);
        x->mid = x->in;
        any |= x->src || x->dst;
    }
    dtr__exec_t *e = NULL;
    dtr_status_t made = dtr__exec(ctx, func, &e);
    if (made != DTR_OK) {
        free(xs);
        return made;
    }
    dtr_request_t *r = &e->xreq;
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->progress = dtr__xprogress;
    dtr__xstate_t *x = calloc(1, sizeof *x);
    if (x == NULL) {
        free(xs);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the request");
    }
    *x = (dtr__xstate_t){.plan = plan, .xs = xs, .func = func};
    r->xstate = x;
    dtr_status_t st = DTR_OK;
    if (any && plan->nranks > 1)
        st = dtr__group(ctx, plan->ranks, plan->nranks, DTR__TAG_GROUP, &x->group);
    dtr_status_t local = DTR_OK;
    for (int t = 0; any && t < plan->ntensors && local == DTR_OK; t++)
        local = dtr__xlocal(&xs[t], t, batch, r->local_msg, sizeof r->local_msg);
    if (any && local == DTR_OK && (local = dtr__xensure(plan, ctx->rank)) != DTR_OK)
        snprintf(r->local_msg, sizeof r->local_msg, "this rank's messages: %s", dtr_last_error());
    r->local_status = local;
    if (!any) {
        r->phase = DTR__PHASE_DONE; /* (a bystander takes no part) */
    } else if (st == DTR_OK && (x->group == NULL || !ctx->agree)) {
        st = local != DTR_OK ? dtr__error(local, func, "%s", r->local_msg) : dtr__xafter(r, x);
    } else if (st == DTR_OK) {
        /* started, not waited for: the call returns before the other ranks have called, and
         * the first test after the verdict begins the first round (dtr__xagreed) */
        dtr__agree_fill(r->agree_send, plan->hash, ctx->rank, local);
        st = dtr__agree_start(ctx, x->group, r->agree_send, r->agree_recv, &r->abreq);
        if (st != DTR_OK)
            st = dtr__error(st, func, "argument agreement over the group: %s", dtr_last_error());
        r->agreeing = st == DTR_OK;
        r->at0 = dtr__now();
    }
    if (st != DTR_OK) {
        dtr__xstate_free(r);
        return st;
    }
    if (r->phase == DTR__PHASE_DONE) dtr__xstate_free(r);
    ctx->busy = true;
    *req = r;
    return DTR_OK;
}

/* The checks of a single tensor's call. */
static dtr_status_t dtr__xone(dtr_context_t *ctx, const dtr_cross_plan_t *plan, const void *in,
                              size_t in_bytes, void *out, size_t out_bytes, const char *func,
                              dtr_request_t **req) {
    DTR_CHECK_PTR(ctx, func);
    DTR_CHECK_PTR(plan, func);
    DTR_CHECK_PTR(req, func);
    if (plan->ntensors != 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "plan: a batch of %d tensors (run it with dtr_redistribute_cross_batch)",
                          plan->ntensors);
    DTR_CHECK(dtr__check_ready(ctx, func));
    dtr__xside_t *x = calloc(1, sizeof *x);
    if (x == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "the request");
    *x = (dtr__xside_t){.in = in, .in_bytes = in_bytes, .out = out, .out_bytes = out_bytes};
    return dtr__xstart(ctx, plan, x, false, func, req);
}

/* The checks of a batch's call. */
static dtr_status_t dtr__xmany(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                               const void *const *in, const size_t *in_bytes, void *const *out,
                               const size_t *out_bytes, const char *func, dtr_request_t **req) {
    DTR_CHECK_PTR(ctx, func);
    DTR_CHECK_PTR(plan, func);
    DTR_CHECK_PTR(req, func);
    if (in == NULL || in_bytes == NULL || out == NULL || out_bytes == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL (one entry "
                          "per tensor)", in == NULL ? "in" : in_bytes == NULL ? "in_bytes"
                          : out == NULL ? "out" : "out_bytes");
    DTR_CHECK(dtr__check_ready(ctx, func));
    dtr__xside_t *xs = calloc((size_t)plan->ntensors, sizeof *xs);
    if (xs == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%d tensors", plan->ntensors);
    for (int t = 0; t < plan->ntensors; t++)
        xs[t] = (dtr__xside_t){.in = in[t], .in_bytes = in_bytes[t], .out = out[t], .out_bytes = out_bytes[t]};
    return dtr__xstart(ctx, plan, xs, true, func, req);
}

dtr_status_t dtr_redistribute_cross_start(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                          const void *in, size_t in_bytes, void *out,
                                          size_t out_bytes, dtr_request_t **req) {
    return dtr__xone(ctx, plan, in, in_bytes, out, out_bytes, __func__, req);
}

dtr_status_t dtr_redistribute_cross(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                    const void *in, size_t in_bytes, void *out,
                                    size_t out_bytes) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__xone(ctx, plan, in, in_bytes, out, out_bytes, __func__, &r));
    return dtr_request_wait(r);
}

dtr_status_t dtr_redistribute_cross_batch_start(dtr_context_t *ctx,
                                                const dtr_cross_plan_t *plan,
                                                const void *const *in, const size_t *in_bytes,
                                                void *const *out, const size_t *out_bytes,
                                                dtr_request_t **req) {
    return dtr__xmany(ctx, plan, in, in_bytes, out, out_bytes, __func__, req);
}

dtr_status_t dtr_redistribute_cross_batch(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                          const void *const *in, const size_t *in_bytes,
                                          void *const *out, const size_t *out_bytes) {
    dtr_request_t *r = NULL;
    DTR_CHECK(dtr__xmany(ctx, plan, in, in_bytes, out, out_bytes, __func__, &r));
    return dtr_request_wait(r);
}
