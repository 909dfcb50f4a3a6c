/* Parameter groups: foreach reduce-scatter into a fused, aligned buffer, one all-reduce per
 * replicate group, foreach all-gather (param_group.h). The pipeline is in pipeline.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/param_group_internal.h"
#include "grad/internal.h"
#include "core/common.h"
#include "dtensor/dtensor.h"
#include "runtime/group.h"

/* One parameter's checks at create; the error names desc->params[i]'s field. */
static dtr_status_t dtr__check_param(const dtr_param_desc_t *p, int i, const char *func) {
    if (p->ndim < 1 || p->ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "desc->params[%d].ndim: %d, must be 1..%d", i, p->ndim,
                          DTR_MAX_TENSOR_DIMS);
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] < 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "desc->params[%d].shape[%d]: %lld, must be >= 0", i, d,
                              (long long)p->shape[d]);
    if (p->shard_dim < 0 || p->shard_dim >= p->ndim)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "desc->params[%d].shard_dim: %d, the parameter has dims 0..%d", i,
                          p->shard_dim, p->ndim - 1);
    char name[64];
    snprintf(name, sizeof name, "desc->params[%d].dtype", i);
    return dtr__float_arg(p->dtype, func, name);
}

static dtr_status_t dtr__check_desc(const dtr_param_group_desc_t *d, const char *func,
                                    int64_t *rs, int64_t *ar) {
    if (d->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "desc->mesh: must not be NULL");
    if (d->shard_dims & d->replicate_dims)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "desc: mesh dims 0x%x are in both shard_dims and replicate_dims",
                          d->shard_dims & d->replicate_dims);
    DTR_CHECK(dtr_mesh_group_size(d->mesh, d->shard_dims, rs));
    DTR_CHECK(dtr_mesh_group_size(d->mesh, d->replicate_dims, ar));
    if (d->nparams < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "desc->nparams: %d, a group has at least one parameter", d->nparams);
    if (d->params == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "desc->params: must not be NULL");
    DTR_CHECK(dtr__float_arg(d->reduce_dtype, func, "desc->reduce_dtype"));
    if (isnan(d->factor) || isinf(d->factor))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "desc->factor: not finite");
    for (int i = 0; i < d->nparams; i++) DTR_CHECK(dtr__check_param(&d->params[i], i, func));
    return DTR_OK;
}

/* Each parameter's geometry and its place in the fused buffer and the gathered one. */
static void dtr__layout(dtr_param_group_t *g) {
    int64_t ritem = dtr_dtype_info(g->reduce_dtype)->size, at = 0, gat = 0;
    for (int i = 0; i < g->n; i++) {
        const dtr_param_desc_t *p = &g->params[i];
        dtr__gparam_t *m = &g->m[i];
        int64_t off;
        m->item = dtr_dtype_info(p->dtype)->size;
        m->outer = m->inner = 1;
        for (int d = 0; d < p->shard_dim; d++) m->outer *= p->shape[d];
        for (int d = p->shard_dim + 1; d < p->ndim; d++) m->inner *= p->shape[d];
        m->len = p->shape[p->shard_dim];
        m->chunk = (m->len + g->rs - 1) / g->rs; /* torch.chunk's size: the last pieces pad */
        dtr_chunk(m->len, g->rs, g->index, &m->rows, &off);
        m->piece = m->outer * m->chunk * m->inner;
        m->offset = at;
        at += dtr__fused_align(m->piece * ritem);
        m->goffset = gat;
        gat += dtr__fused_align(m->piece * m->item);
    }
    g->fused_bytes = at;
    g->gather_bytes = gat;
}

static uint64_t dtr__group_hash(const dtr_param_group_t *g) {
    uint64_t h = 1469598103934665603ull;
    h = dtr__fnv(h, g->shard_dims);
    h = dtr__fnv(h, g->replicate_dims);
    h = dtr__fnv(h, g->n);
    for (int i = 0; i < g->n; i++) {
        const dtr_param_desc_t *p = &g->params[i];
        h = dtr__fnv(dtr__fnv(h, p->ndim), p->shard_dim * 64 + p->dtype);
        for (int d = 0; d < p->ndim; d++) h = dtr__fnv(h, p->shape[d]);
    }
    int64_t bits;
    memcpy(&bits, &g->f.factor, sizeof bits);
    h = dtr__fnv(dtr__fnv(h, g->reduce_dtype), bits);
    return dtr__fnv(h, g->force_sum);
}

dtr_status_t dtr_param_group_create(dtr_context_t *ctx, const dtr_param_group_desc_t *desc,
                                    dtr_param_group_t **out) {
    static const char func[] = "dtr_param_group_create";
    DTR_CHECK_PTR(ctx, func);
    DTR_CHECK_PTR(desc, func);
    DTR_CHECK_PTR(out, func);
    int64_t rs, ar, index;
    DTR_CHECK(dtr__check_desc(desc, func, &rs, &ar));
    if (dtr_mesh_group_index(desc->mesh, desc->shard_dims, dtr_context_rank(ctx), &index) !=
        DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "ctx: rank %d (this process) is not on desc->mesh",
                          dtr_context_rank(ctx));
    dtr_grad_factors_t f;
    DTR_CHECK(dtr_grad_factors(rs, ar, desc->reduce_dtype, desc->factor, desc->force_sum, &f));
    dtr_param_group_t *g = calloc(1, sizeof *g);
    int n = desc->nparams;
    if (g != NULL) {
        g->ctx = ctx;
        g->params = malloc((size_t)n * sizeof *g->params);
        g->m = calloc((size_t)n, sizeof *g->m);
        g->outs = calloc((size_t)n, sizeof *g->outs);
    }
    if (g == NULL || g->params == NULL || g->m == NULL || g->outs == NULL) {
        dtr_param_group_destroy(g);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "a group of %d parameters", n);
    }
    memcpy(g->params, desc->params, (size_t)n * sizeof *g->params);
    g->ctx = ctx;
    g->mesh = desc->mesh;
    g->shard_dims = desc->shard_dims;
    g->replicate_dims = desc->replicate_dims;
    g->n = n;
    g->reduce_dtype = desc->reduce_dtype;
    g->force_sum = desc->force_sum;
    g->rs = rs;
    g->ar = ar;
    g->index = index;
    g->f = f;
    /* AVG on a backend without it: SUM on both collectives and one divide by D at the end,
     * instead of a divide after each. */
    g->rs_op = f.rs_op;
    g->ar_op = f.ar_op;
    g->post = f.post;
    if (f.rs_op == DTR_REDUCE_AVG && !dtr__group_has_avg(ctx)) {
        g->rs_op = g->ar_op = DTR_REDUCE_SUM;
        g->post = f.post * (double)f.world;
    }
    g->premul = f.pre != 1 && dtr__group_premul(ctx, desc->mesh, desc->shard_dims);
    g->scale = dtr__group_spans_scale(ctx);
    g->direct = (f.pre == 1 || g->scale) && !g->premul && !dtr__group_on_space(ctx) &&
                (desc->params[0].dtype == g->reduce_dtype || dtr__group_spans_cast(ctx));
    for (int i = 1; i < n; i++)
        g->direct = g->direct && desc->params[i].dtype == desc->params[0].dtype;
    g->scale = g->scale && g->direct;
    dtr_status_t st = dtr__space_factors(ctx, f.factor, g->premul ? 1 : f.pre, g->post, func);
    if (st != DTR_OK) {
        dtr_param_group_destroy(g);
        return st;
    }
    dtr__layout(g);
    st = dtr__group_alloc(ctx, g->fused_bytes, &g->fused, func);
    if (st == DTR_OK && ar > 1) st = dtr__group_alloc(ctx, g->fused_bytes, &g->result, func);
    if (st == DTR_OK && ar == 1) g->result = g->fused;
    if (st != DTR_OK) {
        dtr_param_group_destroy(g);
        return st;
    }
    g->hash = dtr__group_hash(g);
    *out = g;
    return DTR_OK;
}

void dtr_param_group_destroy(dtr_param_group_t *g) {
    if (g == NULL) return;
    if (g->ctx != NULL) {
        if (g->result != g->fused) dtr__group_free(g->ctx, g->result);
        dtr__group_free(g->ctx, g->fused);
        dtr__group_free(g->ctx, g->acc);
    }
    free(g->trash);
    free(g->params);
    free(g->m);
    free(g->outs);
    free(g);
}

dtr_status_t dtr_param_group_info(const dtr_param_group_t *g, dtr_grad_factors_t *factors,
                                  int64_t *fused_bytes) {
    DTR_CHECK_PTR(g, __func__);
    if (factors != NULL) *factors = g->f;
    if (fused_bytes != NULL) *fused_bytes = g->fused_bytes;
    return DTR_OK;
}

dtr_status_t dtr_param_group_param(const dtr_param_group_t *g, int i, int64_t *shard_numel,
                                   int64_t *shard_shape, int64_t *view_offset) {
    DTR_CHECK_PTR(g, __func__);
    if (i < 0 || i >= g->n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "i: %d, the group has 0..%d", i,
                          g->n - 1);
    const dtr__gparam_t *m = &g->m[i];
    if (shard_numel != NULL) *shard_numel = m->outer * m->rows * m->inner;
    if (shard_shape != NULL) {
        memcpy(shard_shape, g->params[i].shape, (size_t)g->params[i].ndim * sizeof *shard_shape);
        shard_shape[g->params[i].shard_dim] = m->rows;
    }
    if (view_offset != NULL) *view_offset = m->offset;
    return DTR_OK;
}

/* ---- the reduction's stages ------------------------------------------------------------ */

/* Packs every gradient into rs blocks of fused_bytes: block k holds each parameter's rows
 * [k * chunk, (k + 1) * chunk) of its shard dim at its view's offset, cast to the reduce
 * dtype, zero past the end of the dim and in the alignment gaps; pre-divided unless the
 * reduce-scatter pre-multiplies. */
static dtr_status_t dtr__pack(dtr_param_group_t *g, const void *const *grads, char *send) {
    dtr_context_t *ctx = g->ctx;
    dtr_dtype_t rt = g->reduce_dtype;
    int64_t ritem = dtr_dtype_info(rt)->size;
    for (int64_t k = 0; k < g->rs; k++) {
        char *block = send + k * g->fused_bytes;
        for (int i = 0; i < g->n; i++) {
            const dtr__gparam_t *m = &g->m[i];
            int64_t lo = k * m->chunk, hi = lo + m->chunk < m->len ? lo + m->chunk : m->len;
            int64_t real = hi > lo ? (hi - lo) * m->inner : 0, slice = m->chunk * m->inner;
            char *dst = block + m->offset;
            for (int64_t o = 0; o < m->outer; o++) {
                const char *src = (const char *)grads[i] + (o * m->len + lo) * m->inner * m->item;
                /* grads[i] is not written: the pre-divide is of the cast copy */
                DTR_CHECK(dtr__group_cast_divide(ctx, g->params[i].dtype, (void *)src, rt,
                                                 dst + o * slice * ritem, real,
                                                 g->premul ? 1 : g->f.pre, false,
                                                 "dtr_param_group_reduce"));
                DTR_CHECK(dtr__group_zero(ctx, dst + (o * slice + real) * ritem,
                                          (slice - real) * ritem));
            }
            int64_t end = i + 1 < g->n ? g->m[i + 1].offset : g->fused_bytes;
            DTR_CHECK(dtr__group_zero(ctx, dst + m->piece * ritem,
                                      end - m->offset - m->piece * ritem));
        }
    }
    return DTR_OK;
}

/* The argument checks of a reduction on this rank; msg says what was wrong. */
static dtr_status_t dtr__check_reduce(const dtr_param_group_t *g, const void *const *grads,
                                      const size_t *grad_bytes, bool sync, void *const *outs,
                                      const size_t *out_bytes, char *msg, size_t cap) {
    if (grads == NULL || grad_bytes == NULL) {
        snprintf(msg, cap, "%s: must not be NULL", grads == NULL ? "grads" : "grad_bytes");
        return DTR_ERR_INVALID_ARGUMENT;
    }
    if (sync && (outs == NULL || out_bytes == NULL)) {
        snprintf(msg, cap, "%s: must not be NULL with sync", outs == NULL ? "outs" : "out_bytes");
        return DTR_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < g->n; i++) {
        const dtr__gparam_t *m = &g->m[i];
        int64_t full = m->outer * m->len * m->inner * m->item;
        int64_t shard = m->outer * m->rows * m->inner * m->item;
        if ((int64_t)grad_bytes[i] != full) {
            snprintf(msg, cap, "grad_bytes[%d]: %zu, parameter %d's full gradient is %lld bytes",
                     i, grad_bytes[i], i, (long long)full);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        if (grads[i] == NULL && full > 0) {
            snprintf(msg, cap, "grads[%d]: must not be NULL", i);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        if (!sync) continue;
        if ((int64_t)out_bytes[i] < shard) {
            snprintf(msg, cap, "out_bytes[%d]: %zu, parameter %d's shard is %lld bytes", i,
                     out_bytes[i], i, (long long)shard);
            return DTR_ERR_BUFFER_TOO_SMALL;
        }
        if (outs[i] == NULL && shard > 0) {
            snprintf(msg, cap, "outs[%d]: must not be NULL", i);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        for (int j = 0; j < g->n && shard > 0; j++) {
            int64_t fj = g->m[j].outer * g->m[j].len * g->m[j].inner * g->m[j].item;
            if (dtr__bytes_overlap(outs[i], (size_t)shard, grads[j], (size_t)fj)) {
                snprintf(msg, cap, "outs[%d]: overlaps grads[%d] (inputs are never written)",
                         i, j);
                return DTR_ERR_INVALID_ARGUMENT;
            }
        }
    }
    return DTR_OK;
}

static dtr_status_t dtr__group_pack_start(dtr_param_group_t *g, const void *const *grads);

dtr_status_t dtr__group_begin(dtr_param_group_t *g, const void *const *grads,
                              const size_t *grad_bytes, bool sync, void *const *outs,
                              const size_t *out_bytes, const char *func) {
    if (g->pending)
        return dtr__error(DTR_ERR_BUSY, func,
                          "g: its previous reduction is still in a pipeline (finish it first)");
    char msg[256] = "";
    dtr_status_t local =
        dtr__check_reduce(g, grads, grad_bytes, sync, outs, out_bytes, msg, sizeof msg);
    if (local == DTR_OK && !sync && !dtr__group_can_add(g->ctx)) {
        local = DTR_ERR_UNSUPPORTED;
        snprintf(msg, sizeof msg, "sync: false needs the memory space's add (memory.h) to "
                                  "accumulate, and %s memory has none",
                 dtr_context_memory(g->ctx));
    }
    DTR_CHECK(dtr__group_agree(g->ctx, g->mesh, g->shard_dims | g->replicate_dims, func,
                               dtr__fnv(g->hash, sync), local, msg));
    if (sync) memcpy(g->outs, outs, (size_t)g->n * sizeof *g->outs);
    g->sync = sync;
    g->written = false;
    /* A synced microbatch with nothing accumulated, whose collective is the last stage (no
     * all-reduce after the reduce-scatter, or no reduce-scatter before the all-reduce),
     * writes the outputs itself. */
    bool last = sync && !g->have_acc && g->scale;
    dtr_status_t st = DTR_OK;
    if (g->rs > 1 && g->direct &&
        dtr__group_spans_ok(g->ctx, g->mesh, g->shard_dims, DTR_SPANS_REDUCE_SCATTER,
                            g->reduce_dtype, g->rs_op, g->rs * g->fused_bytes)) {
        g->written = last && g->ar == 1;
        st = dtr__rs_spans(g, grads, g->written);
    } else if (g->rs == 1 && g->ar > 1 && last &&
               dtr__group_spans_ok(g->ctx, g->mesh, g->replicate_dims, DTR_SPANS_ALL_REDUCE,
                                   g->reduce_dtype, g->ar_op, g->fused_bytes)) {
        g->written = true;
        st = dtr__ar_spans(g, grads);
    } else {
        return dtr__group_pack_start(g, grads);
    }
    g->pending = st == DTR_OK;
    if (st != DTR_OK) g->written = false;
    return st;
}

/* The packed form of begin's reduce-scatter: the gradients into the fused buffer first. */
static dtr_status_t dtr__group_pack_start(dtr_param_group_t *g, const void *const *grads) {
    char *send = g->fused;
    if (g->rs > 1)
        DTR_CHECK(dtr__group_scratch(g->ctx, g->rs * g->fused_bytes, (void **)&send));
    DTR_CHECK(dtr__pack(g, grads, send));
    g->pending = true;
    if (g->rs == 1) return DTR_OK;
    int64_t count = g->fused_bytes / dtr_dtype_info(g->reduce_dtype)->size;
    dtr_status_t st = dtr__group_start(g->ctx, DTR__SLOT_RS, g->mesh, g->shard_dims,
                                       DTR__GROUP_REDUCE_SCATTER, send, g->fused, count,
                                       g->reduce_dtype, g->rs_op, g->premul ? 1.0 / g->f.pre : 1);
    if (st != DTR_OK) g->pending = false;
    return st;
}

dtr_status_t dtr__group_rs_done(dtr_param_group_t *g) {
    bool done;
    dtr_status_t st = dtr__group_complete(g->ctx, DTR__SLOT_RS, true, &done);
    if (st != DTR_OK) {
        g->pending = false;
        return st;
    }
    int64_t count = g->fused_bytes / dtr_dtype_info(g->reduce_dtype)->size;
    if (!g->sync) {
        /* Keep this microbatch's output: the first becomes the accumulator itself. */
        if (g->have_acc) {
            st = dtr__group_add(g->ctx, g->reduce_dtype, g->fused, g->acc, count,
                                "dtr_param_group_reduce");
        } else {
            if (g->acc == NULL)
                st = dtr__group_alloc(g->ctx, g->fused_bytes, &g->acc, "dtr_param_group_reduce");
            if (st != DTR_OK) {
                g->pending = false;
                return st;
            }
            void *t = g->acc;
            g->acc = g->fused;
            if (g->result == g->fused) g->result = t;
            g->fused = t;
            g->have_acc = true;
        }
        g->pending = false;
        return st;
    }
    if (g->have_acc)
        st = dtr__group_add(g->ctx, g->reduce_dtype, g->acc, g->fused, count,
                            "dtr_param_group_reduce");
    g->have_acc = false;
    if (st != DTR_OK) g->pending = false;
    return st;
}

dtr_status_t dtr__group_ar_start(dtr_param_group_t *g) {
    if (g->ar == 1 || g->written) return DTR_OK;
    dtr_status_t st;
    if (g->scale && dtr__group_spans_ok(g->ctx, g->mesh, g->replicate_dims,
                                        DTR_SPANS_ALL_REDUCE, g->reduce_dtype, g->ar_op,
                                        g->fused_bytes)) {
        st = dtr__ar_spans_fused(g); /* the fused sums into the outputs, divided and cast */
        g->written = st == DTR_OK;
        if (st != DTR_OK) g->pending = false;
        return st;
    }
    int64_t count = g->fused_bytes / dtr_dtype_info(g->reduce_dtype)->size;
    st = dtr__group_start(g->ctx, DTR__SLOT_AR, g->mesh, g->replicate_dims,
                                       DTR__GROUP_ALL_REDUCE, g->fused, g->result, count,
                                       g->reduce_dtype, g->ar_op, 1);
    if (st != DTR_OK) g->pending = false;
    return st;
}

/* Copies each parameter's real rows of the reduced piece into its output, divided by the
 * post factor in the reduce dtype (in place in the result) and cast back. */
static dtr_status_t dtr__unpack(dtr_param_group_t *g) {
    dtr_dtype_t rt = g->reduce_dtype;
    int64_t ritem = dtr_dtype_info(rt)->size;
    for (int i = 0; i < g->n; i++) {
        const dtr__gparam_t *m = &g->m[i];
        char *src = (char *)g->result + m->offset;
        for (int64_t o = 0; o < m->outer && m->rows > 0; o++)
            DTR_CHECK(dtr__group_cast_divide(
                g->ctx, rt, src + o * m->chunk * m->inner * ritem, g->params[i].dtype,
                (char *)g->outs[i] + o * m->rows * m->inner * m->item, m->rows * m->inner,
                g->post, true, "dtr_param_group_reduce"));
    }
    return DTR_OK;
}

dtr_status_t dtr__group_ar_done(dtr_param_group_t *g) {
    bool done, written = g->written;
    dtr_status_t st = g->ar > 1 ? dtr__group_complete(g->ctx, DTR__SLOT_AR, true, &done) : DTR_OK;
    g->pending = false;
    g->written = false;
    if (st != DTR_OK || written) return st;
    return dtr__unpack(g);
}

dtr_status_t dtr_param_group_reduce(dtr_param_group_t *g, const void *const *grads,
                                    const size_t *grad_bytes, bool sync, void *const *outs,
                                    const size_t *out_bytes) {
    static const char func[] = "dtr_param_group_reduce";
    DTR_CHECK_PTR(g, func);
    DTR_CHECK(dtr__group_begin(g, grads, grad_bytes, sync, outs, out_bytes, func));
    DTR_CHECK(dtr__group_rs_done(g));
    if (!sync) return DTR_OK;
    DTR_CHECK(dtr__group_ar_start(g));
    return dtr__group_ar_done(g);
}

/* ---- foreach all-gather ------------------------------------------------------------------ */

static dtr_status_t dtr__check_gather(const dtr_param_group_t *g, const void *const *shards,
                                      const size_t *shard_bytes, void *const *fulls,
                                      const size_t *full_bytes, char *msg, size_t cap) {
    if (shards == NULL || shard_bytes == NULL || fulls == NULL || full_bytes == NULL) {
        snprintf(msg, cap, "%s: must not be NULL",
                 shards == NULL ? "shards" : shard_bytes == NULL ? "shard_bytes"
                 : fulls == NULL ? "fulls" : "full_bytes");
        return DTR_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < g->n; i++) {
        const dtr__gparam_t *m = &g->m[i];
        int64_t full = m->outer * m->len * m->inner * m->item;
        int64_t shard = m->outer * m->rows * m->inner * m->item;
        if ((int64_t)shard_bytes[i] != shard) {
            snprintf(msg, cap, "shard_bytes[%d]: %zu, parameter %d's shard is %lld bytes", i,
                     shard_bytes[i], i, (long long)shard);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        if (shards[i] == NULL && shard > 0) {
            snprintf(msg, cap, "shards[%d]: must not be NULL", i);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        if ((int64_t)full_bytes[i] < full) {
            snprintf(msg, cap, "full_bytes[%d]: %zu, parameter %d is %lld bytes", i,
                     full_bytes[i], i, (long long)full);
            return DTR_ERR_BUFFER_TOO_SMALL;
        }
        if (fulls[i] == NULL && full > 0) {
            snprintf(msg, cap, "fulls[%d]: must not be NULL", i);
            return DTR_ERR_INVALID_ARGUMENT;
        }
        for (int j = 0; j < g->n && full > 0; j++) {
            int64_t sj = g->m[j].outer * g->m[j].rows * g->m[j].inner * g->m[j].item;
            if (dtr__bytes_overlap(fulls[i], (size_t)full, shards[j], (size_t)sj)) {
                snprintf(msg, cap, "fulls[%d]: overlaps shards[%d] (inputs are never written)",
                         i, j);
                return DTR_ERR_INVALID_ARGUMENT;
            }
        }
    }
    return DTR_OK;
}

dtr_status_t dtr_param_group_all_gather(dtr_param_group_t *g, const void *const *shards,
                                        const size_t *shard_bytes, void *const *fulls,
                                        const size_t *full_bytes) {
    static const char func[] = "dtr_param_group_all_gather";
    DTR_CHECK_PTR(g, func);
    if (g->pending)
        return dtr__error(DTR_ERR_BUSY, func,
                          "g: a reduction is still in a pipeline (finish it first)");
    char msg[256] = "";
    dtr_status_t local =
        dtr__check_gather(g, shards, shard_bytes, fulls, full_bytes, msg, sizeof msg);
    DTR_CHECK(dtr__group_agree(g->ctx, g->mesh, g->shard_dims, func, dtr__fnv(g->hash, 'g'),
                               local, msg));
    int64_t block = g->gather_bytes;
    char *send;
    DTR_CHECK(dtr__group_scratch(g->ctx, block * (g->rs + 1), (void **)&send));
    char *recv = send + block;
    /* This rank's shards, each padded to chunk rows, at their offsets in one block. */
    for (int i = 0; i < g->n; i++) {
        const dtr__gparam_t *m = &g->m[i];
        int64_t real = m->rows * m->inner * m->item, slice = m->chunk * m->inner * m->item;
        char *dst = send + m->goffset;
        for (int64_t o = 0; o < m->outer; o++) {
            DTR_CHECK(dtr__group_copy(g->ctx, dst + o * slice,
                                      (const char *)shards[i] + o * real, real));
            DTR_CHECK(dtr__group_zero(g->ctx, dst + o * slice + real, slice - real));
        }
        int64_t end = i + 1 < g->n ? g->m[i + 1].goffset : block;
        DTR_CHECK(dtr__group_zero(g->ctx, dst + m->outer * slice,
                                  end - m->goffset - m->outer * slice));
    }
    DTR_CHECK(dtr__group_start(g->ctx, DTR__SLOT_RS, g->mesh, g->shard_dims,
                               DTR__GROUP_ALL_GATHER, send, recv, block, DTR_U8,
                               DTR_REDUCE_SUM, 1));
    bool done;
    DTR_CHECK(dtr__group_complete(g->ctx, DTR__SLOT_RS, true, &done));
    /* Copy-out: member k's piece of each parameter is rows [k * chunk, ...) of its dim. */
    for (int64_t k = 0; k < g->rs; k++)
        for (int i = 0; i < g->n; i++) {
            const dtr__gparam_t *m = &g->m[i];
            int64_t lo = k * m->chunk, hi = lo + m->chunk < m->len ? lo + m->chunk : m->len;
            if (hi <= lo) continue;
            int64_t run = (hi - lo) * m->inner * m->item, slice = m->chunk * m->inner * m->item;
            const char *src = recv + k * block + m->goffset;
            for (int64_t o = 0; o < m->outer; o++)
                DTR_CHECK(dtr__group_copy(g->ctx,
                                          (char *)fulls[i] + (o * m->len + lo) * m->inner * m->item,
                                          src + o * slice, run));
        }
    return DTR_OK;
}
