/*
 * Gradient reductions over span lists (internal.h, group_internal.h): the gradients are read
 * where they lie and, where the collective is the last stage of a synced reduction, the
 * outputs written where they go, with the pre-divide, the post-divide and both casts done by
 * the collective as it reads and writes (the backend's DTR_BACKEND_CAP_SPANS_SCALE). Each
 * gradient is then read from memory once and each output written once, where packing into
 * the fused buffer and unpacking out of it read and wrote every byte twice more. The results
 * are those of the packed path bit for bit: the same casts, divides and sums, each element
 * summed over the same members in member order.
 */
#include <stdlib.h>

#include "grad/param_group_internal.h"
#include "core/common.h"
#include "dtensor/dtensor.h"
#include "runtime/group.h"

/* Zeros for the send lists: padding and alignment gaps read from here, never written. */
static const char dtr__zeros[DTR__TRASH];

/* Spans of `len` bytes over `base` (DTR__TRASH bytes, its rows stride 0 apart); returns how
 * many (0..2). */
static int dtr__fill_spans(dtr_span_t *sp, char *base, int64_t len) {
    int n = 0;
    if (len >= DTR__TRASH) sp[n++] = (dtr_span_t){base, len / DTR__TRASH, DTR__TRASH, 0};
    if (len % DTR__TRASH) sp[n++] = (dtr_span_t){base, 1, len % DTR__TRASH, 0};
    return n;
}

/* Per parameter and member: each outer row a data span after up to two of padding, the
 * gap's folded into the next; and the last. */
int64_t dtr__layout_most(const dtr__glayout_t *l, int64_t members) {
    int64_t most = 2;
    for (int i = 0; i < l->n; i++) most += members * (3 * l->m[i].outer + 2);
    return most;
}

/* Elements of the reduce dtype from the end of parameter i's piece to the next view. */
static int64_t dtr__gap(const dtr__glayout_t *l, int i) {
    int64_t end = i + 1 < l->n ? l->m[i + 1].offset : l->block;
    return (end - l->m[i].offset) / dtr_dtype_info(l->rdtype)->size - l->m[i].piece;
}

int64_t dtr__layout_send(const dtr__glayout_t *l, const void *const *grads, dtr_span_t *sp) {
    int64_t ns = 0, zero = 0; /* zero: bytes of zeros not yet listed (parameter dtype) */
    for (int64_t k = 0; k < l->rs; k++)
        for (int i = 0; i < l->n; i++) {
            const dtr__gparam_t *m = &l->m[i];
            int64_t lo = k * m->chunk, hi = lo + m->chunk < m->len ? lo + m->chunk : m->len;
            int64_t real = (hi > lo ? (hi - lo) * m->inner : 0) * m->item;
            int64_t slice = m->chunk * m->inner * m->item, row = m->len * m->inner * m->item;
            const char *src = (const char *)grads[i] + lo * m->inner * m->item;
            bool whole = real == slice && m->outer > 1; /* every row full: one strided span */
            for (int64_t o = 0; o < m->outer; o++) {
                if (real > 0) {
                    ns += dtr__fill_spans(sp + ns, (char *)dtr__zeros, zero);
                    zero = 0;
                    sp[ns++] = (dtr_span_t){(char *)src + o * row, whole ? m->outer : 1, real,
                                            whole ? row : 0};
                }
                zero += slice - real;
                if (whole) break;
            }
            zero += dtr__gap(l, i) * m->item;
        }
    return ns + dtr__fill_spans(sp + ns, (char *)dtr__zeros, zero);
}

int64_t dtr__layout_recv(const dtr__glayout_t *l, void *const *outs, char *trash,
                         dtr_span_t *sp) {
    int64_t ns = 0, waste = 0; /* bytes of trash not yet listed (parameter dtype) */
    for (int i = 0; i < l->n; i++) {
        const dtr__gparam_t *m = &l->m[i];
        int64_t real = m->rows * m->inner * m->item, slice = m->chunk * m->inner * m->item;
        bool whole = real == slice; /* no padding: the rows follow each other in outs[i] */
        for (int64_t o = 0; o < m->outer; o++) {
            if (real > 0) {
                ns += dtr__fill_spans(sp + ns, trash, waste);
                waste = 0;
                sp[ns++] = (dtr_span_t){(char *)outs[i] + o * real, 1,
                                        whole ? m->outer * real : real, 0};
            }
            waste += slice - real;
            if (whole && real > 0) break;
        }
        waste += dtr__gap(l, i) * m->item;
    }
    return ns + dtr__fill_spans(sp + ns, trash, waste);
}

/* ---- the parameter groups' collectives ------------------------------------------------ */

static dtr__glayout_t dtr__group_layout(const dtr_param_group_t *g) {
    return (dtr__glayout_t){g->m, g->n, g->rs, g->fused_bytes, g->params[0].dtype,
                            g->reduce_dtype};
}

static dtr_status_t dtr__spans_oom(void *a, void *b, void *c) {
    free(a);
    free(b);
    free(c);
    return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_param_group_reduce", "span lists");
}

/* The trash the receive lists write padding into (the group's, made once). */
static bool dtr__trash(dtr_param_group_t *g) {
    if (g->trash == NULL) g->trash = malloc(DTR__TRASH);
    return g->trash != NULL;
}

/* The op's divides and casts for a synced reduction's last stage, written into outs. */
static void dtr__to_outs(const dtr_param_group_t *g, dtr_spans_op_t *op) {
    op->post = g->post;
    op->recv_cast = g->params[0].dtype != g->reduce_dtype;
    op->recv_dtype = g->params[0].dtype;
}

dtr_status_t dtr__rs_spans(dtr_param_group_t *g, const void *const *grads, bool to_outs) {
    dtr__glayout_t l = dtr__group_layout(g);
    dtr_span_t *sp = malloc((size_t)dtr__layout_most(&l, g->rs) * sizeof *sp), *rp = NULL;
    int64_t *counts = malloc((size_t)g->rs * sizeof *counts);
    if (to_outs) rp = malloc((size_t)dtr__layout_most(&l, 1) * sizeof *rp);
    if (sp == NULL || counts == NULL || (to_outs && (rp == NULL || !dtr__trash(g))))
        return dtr__spans_oom(sp, rp, counts);
    for (int64_t k = 0; k < g->rs; k++)
        counts[k] = g->fused_bytes / dtr_dtype_info(g->reduce_dtype)->size;
    dtr_span_t recv = {g->fused, 1, g->fused_bytes, 0};
    dtr_spans_op_t op = {.kind = DTR_SPANS_REDUCE_SCATTER, .send = sp, .recv = &recv,
                         .nsend = (int)dtr__layout_send(&l, grads, sp), .nrecv = 1,
                         .counts = counts, .dtype = g->reduce_dtype, .op = g->rs_op,
                         .cast = g->params[0].dtype != g->reduce_dtype,
                         .send_dtype = g->params[0].dtype, .pre = g->f.pre};
    if (to_outs) {
        op.recv = rp;
        op.nrecv = (int)dtr__layout_recv(&l, g->outs, g->trash, rp);
        dtr__to_outs(g, &op);
    }
    dtr_status_t st = dtr__group_start_spans(g->ctx, DTR__SLOT_RS, g->mesh, g->shard_dims, &op);
    free(sp);
    free(rp);
    free(counts);
    return st;
}

dtr_status_t dtr__ar_spans(dtr_param_group_t *g, const void *const *grads) {
    dtr_span_t *sp = malloc((size_t)g->n * sizeof *sp), *rp = malloc((size_t)g->n * sizeof *rp);
    if (sp == NULL || rp == NULL) return dtr__spans_oom(sp, rp, NULL);
    int ns = 0;
    int64_t count = 0;
    for (int i = 0; i < g->n; i++) {
        const dtr__gparam_t *m = &g->m[i];
        int64_t numel = m->outer * m->len * m->inner;
        if (numel == 0) continue;
        sp[ns] = (dtr_span_t){(char *)grads[i], 1, numel * m->item, 0};
        rp[ns++] = (dtr_span_t){g->outs[i], 1, numel * m->item, 0};
        count += numel;
    }
    dtr_spans_op_t op = {.kind = DTR_SPANS_ALL_REDUCE, .send = sp, .recv = rp, .nsend = ns,
                         .nrecv = ns, .counts = &count, .dtype = g->reduce_dtype,
                         .op = g->ar_op, .cast = g->params[0].dtype != g->reduce_dtype,
                         .send_dtype = g->params[0].dtype, .pre = g->f.pre};
    dtr__to_outs(g, &op);
    dtr_status_t st = dtr__group_start_spans(g->ctx, DTR__SLOT_RS, g->mesh, g->replicate_dims, &op);
    free(sp);
    free(rp);
    return st;
}

dtr_status_t dtr__ar_spans_fused(dtr_param_group_t *g) {
    dtr__glayout_t l = dtr__group_layout(g);
    dtr_span_t *rp = malloc((size_t)dtr__layout_most(&l, 1) * sizeof *rp);
    if (rp == NULL || !dtr__trash(g)) return dtr__spans_oom(rp, NULL, NULL);
    int64_t count = g->fused_bytes / dtr_dtype_info(g->reduce_dtype)->size;
    dtr_span_t send = {g->fused, 1, g->fused_bytes, 0};
    dtr_spans_op_t op = {.kind = DTR_SPANS_ALL_REDUCE, .send = &send, .recv = rp, .nsend = 1,
                         .nrecv = (int)dtr__layout_recv(&l, g->outs, g->trash, rp),
                         .counts = &count, .dtype = g->reduce_dtype, .op = g->ar_op};
    dtr__to_outs(g, &op);
    dtr_status_t st = dtr__group_start_spans(g->ctx, DTR__SLOT_AR, g->mesh, g->replicate_dims, &op);
    free(rp);
    return st;
}
