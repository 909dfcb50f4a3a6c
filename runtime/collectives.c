/*
 * Collectives on a mesh's groups (runtime.h): dtr_all_reduce and dtr_reduce_scatter over
 * the ranks that share this rank's coordinate outside `dims`, with the same agreement,
 * deadlines and communicator cache as dtr_redistribute; the gradient hooks run on these.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "numeric/numeric.h"
#include "runtime/context.h"

static dtr_status_t dtr__check_dims(const dtr_mesh_t *mesh, unsigned dims, const char *func) {
    if (mesh == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "mesh: must not be NULL");
    int nd = dtr_mesh_ndims(mesh);
    if ((dims >> nd) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "dims: 0x%x names a mesh dim past the %d of this mesh", dims, nd);
    return DTR_OK;
}

dtr_status_t dtr_mesh_group_size(const dtr_mesh_t *mesh, unsigned dims, int64_t *n) {
    DTR_CHECK_PTR(n, __func__);
    DTR_CHECK(dtr__check_dims(mesh, dims, __func__));
    int64_t size = 1;
    for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
        if (dims & (1u << i)) size *= dtr_mesh_size(mesh, i);
    *n = size;
    return DTR_OK;
}

dtr_status_t dtr_mesh_group_index(const dtr_mesh_t *mesh, unsigned dims, int rank,
                                  int64_t *index) {
    DTR_CHECK_PTR(index, __func__);
    DTR_CHECK(dtr__check_dims(mesh, dims, __func__));
    int64_t coord[DTR_MAX_MESH_DIMS], k = 0;
    if (dtr_mesh_coord(mesh, rank, coord) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "rank: %d is not on the mesh",
                          rank);
    for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
        if (dims & (1u << i)) k = k * dtr_mesh_size(mesh, i) + coord[i];
    *index = k;
    return DTR_OK;
}

/* This rank's group for `dims`: NULL for a group of one. */
static dtr_status_t dtr__dims_group(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    const char *func, void **group, int64_t *n) {
    int64_t coord[DTR_MAX_MESH_DIMS], c[DTR_MAX_MESH_DIMS];
    int nd = dtr_mesh_ndims(mesh);
    if (dtr_mesh_coord(mesh, ctx->rank, coord) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "mesh: rank %d (this process) is not on the mesh", ctx->rank);
    DTR_CHECK(dtr_mesh_group_size(mesh, dims, n));
    *group = NULL;
    if (*n == 1) return DTR_OK;
    int *ranks = malloc((size_t)*n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "rank list of %lld", (long long)*n);
    memcpy(c, coord, sizeof c);
    for (int i = 0; i < nd; i++)
        if (dims & (1u << i)) c[i] = 0;
    for (int64_t p = 0; p < *n; p++) {
        dtr_mesh_rank_at(mesh, c, &ranks[p]);
        for (int i = nd - 1; i >= 0; i--) {
            if (!(dims & (1u << i))) continue;
            if (++c[i] < dtr_mesh_size(mesh, i)) break;
            c[i] = 0;
        }
    }
    dtr_status_t st = dtr__group(ctx, ranks, (int)*n, DTR__TAG_GROUP, group);
    free(ranks);
    return st;
}

dtr_status_t dtr__group_of_dims(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                const char *func, void **group) {
    int64_t n;
    return dtr__dims_group(ctx, mesh, dims, func, group, &n);
}

/* The checks every group call starts with; *group and *n for `dims`. */
static dtr_status_t dtr__group_enter(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                     const char *func, void **group, int64_t *n) {
    if (ctx == NULL) return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ctx: must not be NULL");
    DTR_CHECK(dtr__check_dims(mesh, dims, func));
    DTR_CHECK(dtr__check_ready(ctx, func));
    return dtr__dims_group(ctx, mesh, dims, func, group, n);
}

dtr_status_t dtr__group_agree(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                              const char *func, uint64_t hash, dtr_status_t local,
                              const char *msg) {
    void *group;
    int64_t n;
    DTR_CHECK(dtr__group_enter(ctx, mesh, dims, func, &group, &n));
    return dtr__agree_on(ctx, group, func, dtr__fnv(dtr__mesh_hash(mesh), (int64_t)hash) ^ dims,
                         local, msg);
}

dtr_status_t dtr__group_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                               const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                               dtr_reduce_op_t op, bool scatter, bool agree, double scale) {
    const char *func = scatter ? "dtr_reduce_scatter" : "dtr_all_reduce";
    void *group;
    int64_t n;
    DTR_CHECK(dtr__group_enter(ctx, mesh, dims, func, &group, &n));

    /* What this rank can check alone; a bad argument still takes part in the agreement. */
    dtr_status_t local = DTR_ERR_INVALID_ARGUMENT;
    const char *msg = NULL;
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    int64_t item = info != NULL ? info->size : 1;
    int64_t send_count = scatter ? count * n : count;
    if (info == NULL) msg = "dtype: not a dtr_dtype_t";
    else if (info->storage_only) msg = "dtype: storage only (fp8), never reduced";
    else if ((unsigned)op >= DTR_REDUCE_OP_LAST) msg = "op: not a dtr_reduce_op_t";
    else if (info->is_complex && op != DTR_REDUCE_SUM && op != DTR_REDUCE_AVG)
        msg = "op: complex dtypes reduce by sum and avg only";
    else if (count < 0) msg = "count: must be >= 0";
    else if (count > 0 && send == NULL) msg = "send: must not be NULL";
    else if (count > 0 && recv == NULL) msg = "recv: must not be NULL";
    else if (scale != 1 && (op != DTR_REDUCE_SUM || group == NULL || !ctx->ops->premul_sum))
        msg = "scale: a pre-multiplied SUM needs a backend with one and a group of two or more";
    else if (send != recv || scatter) {
        if (dtr__bytes_overlap(send, (size_t)(send_count * item), recv, (size_t)(count * item)))
            msg = scatter ? "recv: overlaps send" : "recv: overlaps send (pass send == recv for in place)";
    }
    if (msg == NULL) local = DTR_OK;
    if (agree) {
        uint64_t h = dtr__fnv(dtr__fnv(dtr__fnv(dtr__fnv(dtr__mesh_hash(mesh), dims), count),
                                       dtype),
                              op * 2 + scatter);
        if (scale != 1) {
            int64_t bits;
            memcpy(&bits, &scale, sizeof bits);
            h = dtr__fnv(h, bits);
        }
        DTR_CHECK(dtr__agree_on(ctx, group, func, h, local, msg));
    } else if (local != DTR_OK) {
        return dtr__error(local, func, "%s", msg);
    }
    if (group == NULL) {
        if (send != recv) DTR_CHECK(dtr__m_copy(ctx, recv, send, count * item));
        return DTR_OK;
    }
    if (count == 0) return DTR_OK; /* every member has 0: counts are agreed, or the caller's */
    if (send == recv) {
        DTR_CHECK(dtr__reserve(ctx, &ctx->stage_send, &ctx->send_cap, count * item, "in-place send"));
        DTR_CHECK(dtr__m_copy(ctx, ctx->stage_send, send, count * item));
        send = ctx->stage_send;
    }
    bool divide = op == DTR_REDUCE_AVG && !(ctx->ops->caps & DTR_BACKEND_CAP_AVG);
    dtr_reduce_op_t bop = divide ? DTR_REDUCE_SUM : op;
    dtr_status_t st =
        scale != 1 ? ctx->ops->premul_sum(group, send, recv, count, dtype, scale, scatter,
                                          &ctx->gbreq)
        : scatter  ? ctx->ops->reduce_scatter(group, send, recv, count, dtype, bop, &ctx->gbreq)
                   : ctx->ops->all_reduce(group, send, recv, count, dtype, bop, &ctx->gbreq);
    st = dtr__wait_op(ctx, group, st);
    if (st != DTR_OK) return dtr__error(st, func, "%s", dtr_last_error());
    if (divide) DTR_CHECK(dtr__m_divide(ctx, dtype, recv, recv, count, n));
    return DTR_OK;
}

dtr_status_t dtr_all_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                            const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                            dtr_reduce_op_t op) {
    return dtr__group_reduce(ctx, mesh, dims, send, recv, count, dtype, op, false, true, 1);
}

dtr_status_t dtr_reduce_scatter(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                                dtr_reduce_op_t op) {
    return dtr__group_reduce(ctx, mesh, dims, send, recv, count, dtype, op, true, true, 1);
}

/* ---- started group operations (group.h) --------------------------------------------- */

/* What starting an operation in `slot` checks first: the slot free, the dims, the context
 * alive; *group (NULL for a group of one) and *n for `dims`. */
static dtr_status_t dtr__slot_enter(dtr_context_t *ctx, int slot, const dtr_mesh_t *mesh,
                                    unsigned dims, const char *func, void **group, int64_t *n) {
    if (ctx->gops[slot].group != NULL)
        return dtr__error(DTR_ERR_BUSY, func, "group operation slot %d is in flight", slot);
    DTR_CHECK(dtr__check_dims(mesh, dims, func));
    DTR_CHECK(dtr__check_alive(ctx, func));
    return dtr__dims_group(ctx, mesh, dims, func, group, n);
}

/* Completes the other slot's operation first where the backend cannot hold it beside a new
 * one: a staging context holds one operation (staged.c: its received bytes are copied back
 * then), a backend without DTR_BACKEND_CAP_CONCURRENT one per group. Every member starts
 * the slots' operations in the same order, so the other's is started everywhere and
 * completes; its owner's complete then finds it done. */
static dtr_status_t dtr__slot_make_room(dtr_context_t *ctx, int slot, void *group) {
    const dtr__group_op_t *other = &ctx->gops[1 - slot];
    if (other->group == NULL) return DTR_OK;
    if (ctx->ops != &ctx->staged_ops &&
        (other->group != group || (ctx->ops->caps & DTR_BACKEND_CAP_CONCURRENT)))
        return DTR_OK;
    bool done;
    return dtr__group_complete(ctx, 1 - slot, true, &done);
}

dtr_status_t dtr__group_start(dtr_context_t *ctx, int slot, const dtr_mesh_t *mesh,
                              unsigned dims, dtr__group_kind_t kind, const void *send,
                              void *recv, int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                              double scale) {
    static const char *const funcs[] = {"all_reduce", "reduce_scatter", "all_gather"};
    const char *func = funcs[kind];
    dtr__group_op_t *g = &ctx->gops[slot];
    void *group;
    int64_t n;
    DTR_CHECK(dtr__slot_enter(ctx, slot, mesh, dims, func, &group, &n));
    int64_t item = kind == DTR__GROUP_ALL_GATHER ? 1 : dtr_dtype_info(dtype)->size;
    if (scale != 1 && (kind == DTR__GROUP_ALL_GATHER || op != DTR_REDUCE_SUM || group == NULL ||
                       !ctx->ops->premul_sum))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "scale: %g, a pre-multiplied SUM needs a backend with one and a "
                          "group of two or more", scale);
    if (group == NULL) {
        if (count > 0) DTR_CHECK(dtr__m_copy(ctx, recv, send, count * item));
        return DTR_OK;
    }
    if (count == 0) return DTR_OK;
    DTR_CHECK(dtr__slot_make_room(ctx, slot, group));
    dtr_status_t st =
        scale != 1 ? ctx->ops->premul_sum(group, send, recv, count, dtype, scale,
                                          kind == DTR__GROUP_REDUCE_SCATTER, &g->req)
        : kind == DTR__GROUP_ALL_REDUCE
            ? ctx->ops->all_reduce(group, send, recv, count, dtype, op, &g->req)
        : kind == DTR__GROUP_REDUCE_SCATTER
            ? ctx->ops->reduce_scatter(group, send, recv, count, dtype, op, &g->req)
            : ctx->ops->all_gather(group, send, count, recv, &g->req);
    if (st != DTR_OK) return dtr__error(st, func, "%s", dtr_last_error());
    g->group = group;
    g->started = dtr__now();
    return DTR_OK;
}

bool dtr__group_spans_cast(const dtr_context_t *ctx) {
    return (ctx->ops->caps & DTR_BACKEND_CAP_SPANS_CAST) != 0;
}

bool dtr__group_spans_scale(const dtr_context_t *ctx) {
    return (ctx->ops->caps & DTR_BACKEND_CAP_SPANS_SCALE) != 0;
}

bool dtr__group_spans_ok(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                         dtr_spans_kind_t kind, dtr_dtype_t dtype, dtr_reduce_op_t op,
                         int64_t bytes) {
    void *group = NULL;
    int64_t n = 1;
    if (ctx->ops->spans_ok == NULL || ctx->ops->spans_start == NULL || ctx->mem != NULL ||
        dtr__dims_group(ctx, mesh, dims, "spans", &group, &n) != DTR_OK || group == NULL)
        return false;
    return ctx->ops->spans_ok(group, kind, dtype, op, bytes);
}

dtr_status_t dtr__group_start_spans(dtr_context_t *ctx, int slot, const dtr_mesh_t *mesh,
                                    unsigned dims, const dtr_spans_op_t *op) {
    static const char *const names[] = {"all_gather (spans)", "reduce_scatter (spans)",
                                        "all_reduce (spans)"};
    const char *func = names[op->kind];
    dtr__group_op_t *g = &ctx->gops[slot];
    void *group;
    int64_t n;
    DTR_CHECK(dtr__slot_enter(ctx, slot, mesh, dims, func, &group, &n));
    if (group == NULL || ctx->ops->spans_start == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, func, "no span lists for this group");
    DTR_CHECK(dtr__slot_make_room(ctx, slot, group));
    dtr_status_t st = ctx->ops->spans_start(group, op, &g->req);
    if (st != DTR_OK) return dtr__error(st, func, "%s", dtr_last_error());
    g->group = group;
    g->started = dtr__now();
    return DTR_OK;
}

dtr_status_t dtr__group_complete(dtr_context_t *ctx, int slot, bool block, bool *done) {
    dtr__group_op_t *g = &ctx->gops[slot];
    *done = true;
    if (g->group == NULL) return DTR_OK;
    dtr_status_t st = dtr__poll(ctx, g->group, &g->req, g->started, block, done);
    /* A failed operation is over too (a timeout aborted the context). */
    if (st != DTR_OK || *done) g->group = NULL;
    if (st != DTR_OK) *done = true;
    return st;
}

bool dtr__group_has_avg(const dtr_context_t *ctx) {
    return (ctx->ops->caps & DTR_BACKEND_CAP_AVG) != 0;
}

bool dtr__group_premul(const dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims) {
    int64_t n = 1;
    return ctx->ops->premul_sum != NULL && dtr_mesh_group_size(mesh, dims, &n) == DTR_OK &&
           n > 1;
}

dtr_status_t dtr__group_scratch(dtr_context_t *ctx, int64_t bytes, void **p) {
    DTR_CHECK(dtr__reserve(ctx, &ctx->grad_scratch, &ctx->grad_scratch_cap, bytes,
                           "parameter group send buffer"));
    *p = ctx->grad_scratch;
    return DTR_OK;
}

/* ---- local work for the parameter groups (group.h) ----------------------------------- */

bool dtr__group_on_space(const dtr_context_t *ctx) { return ctx->mem != NULL; }

bool dtr__group_can_add(const dtr_context_t *ctx) {
    return ctx->mem == NULL || ctx->mem->add != NULL;
}

dtr_status_t dtr__group_alloc(dtr_context_t *ctx, int64_t bytes, void **p, const char *func) {
    if (bytes < 1) bytes = 1;
    if (ctx->mem == NULL) {
        *p = malloc((size_t)bytes);
        if (*p == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%lld bytes", (long long)bytes);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->alloc(ctx->mem_state, bytes, p);
    if (st != DTR_OK)
        return dtr__error(st, func, "%lld bytes of %s memory: %s", (long long)bytes,
                          ctx->mem->name, dtr_last_error());
    return DTR_OK;
}

void dtr__group_free(dtr_context_t *ctx, void *p) { dtr__m_free(ctx, p); }

dtr_status_t dtr__group_cast(dtr_context_t *ctx, dtr_dtype_t src_dtype, const void *src,
                             dtr_dtype_t dst_dtype, void *dst, int64_t count, const char *func) {
    if (count <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__convert(src_dtype, src, dst_dtype, dst, count);
        return DTR_OK;
    }
    if (src_dtype == dst_dtype)
        return dtr__m_copy(ctx, dst, src, count * dtr_dtype_info(src_dtype)->size);
    dtr_status_t st = ctx->mem->cast(ctx->mem_state, src_dtype, src, dst_dtype, dst, count);
    return st == DTR_OK ? DTR_OK
                        : dtr__error(st, func, "%s memory: cast failed: %s",
                                     ctx->mem->name, dtr_last_error());
}

dtr_status_t dtr__group_zero(dtr_context_t *ctx, void *p, int64_t bytes) {
    return dtr__m_zero(ctx, p, bytes);
}

dtr_status_t dtr__group_copy(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes) {
    return dtr__m_copy(ctx, dst, src, bytes);
}

dtr_status_t dtr__group_divide(dtr_context_t *ctx, dtr_dtype_t dtype, void *buf,
                               int64_t count, double d, const char *func) {
    if (count <= 0 || d == 1) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__divide_by(dtype, buf, count, d);
        return DTR_OK;
    }
    if (d != (double)(int64_t)d)
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "a divide by %g on %s memory (its divide takes whole numbers)", d,
                          ctx->mem->name);
    return dtr__m_divide(ctx, dtype, buf, buf, count, (int64_t)d);
}

/* Elements per block of dtr__group_cast_divide: 32 KB of f64, well inside L2. */
#define DTR__CAST_BLOCK 4096

dtr_status_t dtr__group_cast_divide(dtr_context_t *ctx, dtr_dtype_t src_dtype, void *src,
                                    dtr_dtype_t dst_dtype, void *dst, int64_t count, double d,
                                    bool divide_first, const char *func) {
    if (d == 1 || count <= 0)
        return dtr__group_cast(ctx, src_dtype, src, dst_dtype, dst, count, func);
    if (ctx->mem != NULL) {
        if (divide_first) DTR_CHECK(dtr__group_divide(ctx, src_dtype, src, count, d, func));
        DTR_CHECK(dtr__group_cast(ctx, src_dtype, src, dst_dtype, dst, count, func));
        return divide_first ? DTR_OK : dtr__group_divide(ctx, dst_dtype, dst, count, d, func);
    }
    int64_t si = dtr_dtype_info(src_dtype)->size, di = dtr_dtype_info(dst_dtype)->size;
    for (int64_t at = 0; at < count; at += DTR__CAST_BLOCK) {
        int64_t n = count - at < DTR__CAST_BLOCK ? count - at : DTR__CAST_BLOCK;
        char *s = (char *)src + at * si, *o = (char *)dst + at * di;
        if (divide_first) dtr__divide_by(src_dtype, s, n, d);
        dtr__convert(src_dtype, s, dst_dtype, o, n);
        if (!divide_first) dtr__divide_by(dst_dtype, o, n, d);
    }
    return DTR_OK;
}

dtr_status_t dtr__group_add(dtr_context_t *ctx, dtr_dtype_t dtype, const void *src, void *dst,
                            int64_t count, const char *func) {
    if (count <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__combine(dtype, DTR_REDUCE_SUM, src, dst, count);
        return DTR_OK;
    }
    if (ctx->mem->add == NULL)
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "%s memory has no add (memory.h): microbatches cannot accumulate there",
                          ctx->mem->name);
    dtr_status_t st = ctx->mem->add(ctx->mem_state, dtype, src, dst, count);
    return st == DTR_OK ? DTR_OK
                        : dtr__error(st, func, "%s memory: add failed: %s", ctx->mem->name,
                                     dtr_last_error());
}
