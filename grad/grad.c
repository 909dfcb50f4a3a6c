/* Gradient reduction: DDP hooks, the FSDP/HSDP reducer, the fused all-reduce (grad.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "grad/grad.h"
#include "grad/internal.h"
#include "core/common.h"
#include "dtensor/dtensor.h"
#include "runtime/group.h"

dtr_status_t dtr__float_arg(dtr_dtype_t t, const char *func, const char *name) {
    if (t == DTR_F32 || t == DTR_F64 || t == DTR_F16 || t == DTR_BF16) return DTR_OK;
    const char *s = dtr_dtype_name(t);
    return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                      "%s: %s, gradients are f32, f64, f16 or bf16", name, s != NULL ? s : "?");
}

dtr_status_t dtr__space_factors(const dtr_context_t *ctx, double factor, double pre,
                                double post, const char *func) {
    if (!dtr__group_on_space(ctx) || (pre == floor(pre) && post == floor(post))) return DTR_OK;
    return dtr__error(DTR_ERR_UNSUPPORTED, func,
                      "desc->factor: %g divides by %g and %g, and %s memory divides by whole "
                      "numbers only",
                      factor, pre, post, dtr_context_memory(ctx));
}

static int64_t dtr__item(dtr_dtype_t t) { return dtr_dtype_info(t)->size; }

/*
 * A rank that cannot go on (no memory, a bad argument) still has to meet its peers in the
 * agreement their next group call starts with, or they would wait for it forever: it enters
 * it with its error, which makes every peer return DTR_ERR_REMOTE, and returns the error.
 */
static dtr_status_t dtr__fail_together(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                       unsigned dims, dtr_status_t st, const char *func,
                                       const char *what) {
    return dtr__group_agree(ctx, mesh, dims, func, 0, st, what);
}

/* ---- DDP hooks ---------------------------------------------------------------------- */

/* Whether the all-reduce hook over the group of `dims` runs as one all-reduce over span
 * lists in place (dtr__hook_spans), reducing `count` elements of `rdtype`: host memory, no
 * pre-multiplied SUM, and a backend whose span lists divide and cast and take this group
 * (the same answer on every member). */
static bool dtr__hook_spans_ok(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                               int64_t count, dtr_dtype_t rdtype) {
    return count > 0 && dtr__group_spans_scale(ctx) && !dtr__group_on_space(ctx) &&
           !dtr__group_premul(ctx, mesh, dims) &&
           dtr__group_spans_ok(ctx, mesh, dims, DTR_SPANS_ALL_REDUCE, rdtype, DTR_REDUCE_SUM,
                               count * dtr_dtype_info(rdtype)->size);
}

/* The all-reduce hook's divide and SUM as one all-reduce over span lists, buf in place (each
 * piece read before its result is written): buf's `dtype` elements cast to `rdtype` as they
 * are read and divided by n there, summed, and cast back as they are written. The same bits
 * as a cast pass, a divide pass, the SUM and a cast back; one pass over memory. */
static dtr_status_t dtr__hook_spans(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    void *buf, int64_t count, dtr_dtype_t dtype,
                                    dtr_dtype_t rdtype, int64_t n) {
    dtr_span_t sp = {buf, 1, count * dtr_dtype_info(dtype)->size, 0};
    dtr_spans_op_t op = {.kind = DTR_SPANS_ALL_REDUCE, .send = &sp, .recv = &sp, .nsend = 1,
                         .nrecv = 1, .counts = &count, .dtype = rdtype, .op = DTR_REDUCE_SUM,
                         .cast = dtype != rdtype, .send_dtype = dtype, .pre = (double)n,
                         .recv_cast = dtype != rdtype, .recv_dtype = dtype};
    DTR_CHECK(dtr__group_start_spans(ctx, DTR__SLOT_RS, mesh, dims, &op));
    bool done;
    return dtr__group_complete(ctx, DTR__SLOT_RS, true, &done);
}

/* The all-reduce hook's checks and agreement (before anything is divided, so that an error
 * anywhere leaves buf as it was); *n the group's size. */
static dtr_status_t dtr__hook_agree(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    const void *buf, int64_t count, dtr_dtype_t dtype,
                                    int64_t *n) {
    static const char func[] = "dtr_hook_all_reduce";
    DTR_CHECK_PTR(ctx, func);
    DTR_CHECK(dtr_mesh_group_size(mesh, dims, n));
    /* a wrong dtype on one rank is this rank's vote in the agreement, not a return before it
     * (the group's other ranks would wait there) */
    char why[192] = "";
    if (dtr__float_arg(dtype, func, "dtype") != DTR_OK)
        snprintf(why, sizeof why, "%s", dtr__last_detail());
    const char *msg = why[0] != '\0'               ? why
                      : count < 0                  ? "count: must be >= 0"
                      : count > 0 && buf == NULL ? "buf: must not be NULL"
                                                   : NULL;
    uint64_t h = dtr__fnv(dtr__fnv(1469598103934665603ull, count), dtype);
    return dtr__group_agree(ctx, mesh, dims, func, h,
                            msg != NULL ? DTR_ERR_INVALID_ARGUMENT : DTR_OK, msg);
}

dtr_status_t dtr_hook_all_reduce(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                 unsigned dims, void *buf, int64_t count, dtr_dtype_t dtype) {
    (void)arg;
    int64_t n;
    DTR_CHECK(dtr__hook_agree(ctx, mesh, dims, buf, count, dtype, &n));
    if (dtr__hook_spans_ok(ctx, mesh, dims, count, dtype))
        return dtr__hook_spans(ctx, mesh, dims, buf, count, dtype, dtype, n);
    /* A backend with a pre-multiplied SUM (NCCL) multiplies by 1 / n inside the collective;
     * otherwise a divide first (on a memory space, its kernel: n is whole). */
    if (dtr__group_premul(ctx, mesh, dims))
        return dtr__group_reduce(ctx, mesh, dims, buf, buf, count, dtype, DTR_REDUCE_SUM, false,
                                 false, 1.0 / (double)n);
    DTR_CHECK(dtr__group_divide(ctx, dtype, buf, count, (double)n, __func__));
    return dtr__group_reduce(ctx, mesh, dims, buf, buf, count, dtype, DTR_REDUCE_SUM, false,
                             false, 1);
}

/* Runs `hook` on a `low` copy of buf and casts the result back. */
static dtr_status_t dtr__compressed(dtr_grad_hook_fn hook, void *hook_arg, dtr_dtype_t low,
                                    dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    void *buf, int64_t count, dtr_dtype_t dtype,
                                    const char *func) {
    DTR_CHECK_PTR(ctx, func);
    if (low != DTR_F16 && low != DTR_BF16) /* (the same on every rank: dtr's own hooks) */
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "low: %s, must be f16 or bf16",
                          dtr_dtype_name(low) != NULL ? dtr_dtype_name(low) : "?");
    if (dtr__float_arg(dtype, func, "dtype") != DTR_OK) { /* one rank's: fail the group */
        char why[192];
        snprintf(why, sizeof why, "%s", dtr__last_detail());
        return dtr__fail_together(ctx, mesh, dims, DTR_ERR_INVALID_ARGUMENT, func, why);
    }
    if (dtype == low || count <= 0 || buf == NULL)
        return hook(hook_arg, ctx, mesh, dims, buf, count, dtype);
    /* The all-reduce hook itself: the casts ride on its one all-reduce over span lists
     * (agreed as the hook agrees on its low-precision call) */
    if (hook == dtr_hook_all_reduce && dtr__hook_spans_ok(ctx, mesh, dims, count, low)) {
        int64_t n;
        DTR_CHECK(dtr__hook_agree(ctx, mesh, dims, buf, count, low, &n));
        return dtr__hook_spans(ctx, mesh, dims, buf, count, dtype, low, n);
    }
    /* The copy and both casts are of the context's memory (its space's kernels). */
    void *tmp = NULL;
    dtr_status_t st = dtr__group_alloc(ctx, count * 2, &tmp, func);
    if (st == DTR_OK) st = dtr__group_cast(ctx, dtype, buf, low, tmp, count, func);
    if (st != DTR_OK) {
        dtr__group_free(ctx, tmp);
        return dtr__fail_together(ctx, mesh, dims, st, func,
                                  "no low-precision copy (allocation or cast failed)");
    }
    st = hook(hook_arg, ctx, mesh, dims, tmp, count, low);
    if (st == DTR_OK) st = dtr__group_cast(ctx, low, tmp, dtype, buf, count, func);
    dtr__group_free(ctx, tmp);
    return st;
}

dtr_status_t dtr_hook_fp16_compress(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                    unsigned dims, void *buf, int64_t count, dtr_dtype_t dtype) {
    (void)arg;
    return dtr__compressed(dtr_hook_all_reduce, NULL, DTR_F16, ctx, mesh, dims, buf, count,
                           dtype, __func__);
}

dtr_status_t dtr_hook_bf16_compress(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                    unsigned dims, void *buf, int64_t count, dtr_dtype_t dtype) {
    (void)arg;
    return dtr__compressed(dtr_hook_all_reduce, NULL, DTR_BF16, ctx, mesh, dims, buf, count,
                           dtype, __func__);
}

dtr_status_t dtr_hook_compress_wrapper(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                       unsigned dims, void *buf, int64_t count,
                                       dtr_dtype_t dtype) {
    const dtr_compress_wrapper_t *w = arg;
    if (w == NULL || w->hook == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "arg: must point to a dtr_compress_wrapper_t with a hook");
    return dtr__compressed(w->hook, w->hook_arg, w->low, ctx, mesh, dims, buf, count, dtype,
                           __func__);
}

/* ---- runtime divide factors --------------------------------------------------------- */

dtr_status_t dtr_grad_factors(int64_t rs_size, int64_t ar_size, dtr_dtype_t reduce_dtype,
                              double user_factor, bool force_sum, dtr_grad_factors_t *out) {
    DTR_CHECK_PTR(out, __func__);
    if (rs_size < 1 || ar_size < 1)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "%s: %lld, must be >= 1",
                          rs_size < 1 ? "rs_size" : "ar_size",
                          (long long)(rs_size < 1 ? rs_size : ar_size));
    DTR_CHECK(dtr__float_arg(reduce_dtype, __func__, "reduce_dtype"));
    if (isnan(user_factor) || isinf(user_factor))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "user_factor: not finite");
    dtr_grad_factors_t f = {.rs_size = rs_size, .ar_size = ar_size,
                            .world = rs_size * ar_size, .pre = 1, .post = 1,
                            .rs_op = DTR_REDUCE_SUM, .ar_op = DTR_REDUCE_SUM};
    bool user = user_factor > 0;
    f.factor = user ? user_factor : (double)f.world;
    bool overflow_risk = reduce_dtype == DTR_F16;
    if (!overflow_risk && !force_sum) {
        if (!user || f.factor == (double)f.world) {
            f.factor = (double)f.world;
            if (f.world > 1) f.rs_op = f.ar_op = DTR_REDUCE_AVG;
        } else {
            f.pre = f.factor; /* premul-sum on NCCL: a divide before the SUM here */
        }
    } else if (overflow_risk) {
        if (f.factor == floor(f.factor) && f.factor <= 9.0e15) {
            DTR_CHECK(dtr_divide_factors((int64_t)f.factor, &f.pre, &f.post));
        } else {
            /* A fractional factor: the loop's f % pre is 1.0 % 1 = 0 once, so pre = 1. */
            f.pre = 1;
            f.post = f.factor;
        }
    } else {
        f.post = f.factor;
    }
    *out = f;
    return DTR_OK;
}

/* ---- the FSDP / HSDP reducer -------------------------------------------------------- */

struct dtr_reducer {
    dtr_context_t *ctx;
    dtr_reducer_desc_t d;
    dtr_grad_factors_t f;
    int64_t rs, index; /* the shard group's size, this rank's place in it */
    int64_t outer, len, inner; /* the gradient as [outer, len, inner] around shard_dim */
    int64_t chunk, rows;       /* padded rows per rank, this rank's real rows */
    int64_t piece;             /* padded piece: outer * chunk * inner elements */
    void *send, *recv, *acc;   /* rs * piece, piece, piece elements of the reduce dtype */
    bool have_acc;
    bool premul; /* the pre-divide is the reduce-scatter's pre-multiply (NCCL), not the pack's */
    bool spans;  /* host memory, and the backend's span lists cast and divide: the collectives
                  * may read the gradient and write the output in place (internal.h) */
    dtr__gparam_t m; /* the gradient as a group of one parameter lays it out */
    char *trash;     /* where a receive list writes padding */
    uint64_t hash;
};

dtr_status_t dtr_reducer_create(dtr_context_t *ctx, const dtr_reducer_desc_t *desc,
                                dtr_reducer_t **out) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(desc, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_reducer_desc_t *d = desc;
    if (d->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "desc->mesh: must not be NULL");
    if (d->shard_dims & d->replicate_dims)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "desc: mesh dims 0x%x are in both shard_dims and replicate_dims",
                          d->shard_dims & d->replicate_dims);
    int64_t rs, ar, index;
    DTR_CHECK(dtr_mesh_group_size(d->mesh, d->shard_dims, &rs));
    DTR_CHECK(dtr_mesh_group_size(d->mesh, d->replicate_dims, &ar));
    if (d->ndim < 1 || d->ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "desc->ndim: %d, must be 1..%d",
                          d->ndim, DTR_MAX_TENSOR_DIMS);
    for (int i = 0; i < d->ndim; i++)
        if (d->shape[i] < 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "desc->shape[%d]: %lld, must be >= 0", i, (long long)d->shape[i]);
    if (d->shard_dim < 0 || d->shard_dim >= d->ndim)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "desc->shard_dim: %d, the gradient has dims 0..%d", d->shard_dim,
                          d->ndim - 1);
    DTR_CHECK(dtr__float_arg(d->param_dtype, __func__, "desc->param_dtype"));
    DTR_CHECK(dtr__float_arg(d->reduce_dtype, __func__, "desc->reduce_dtype"));
    if (isnan(d->factor) || isinf(d->factor))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "desc->factor: not finite");
    if (dtr_mesh_group_index(d->mesh, d->shard_dims, dtr_context_rank(ctx), &index) != DTR_OK)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "ctx: rank %d (this process) is not on desc->mesh",
                          dtr_context_rank(ctx));
    dtr_reducer_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "reducer");
    r->ctx = ctx;
    r->d = *d;
    r->rs = rs;
    r->index = index;
    dtr_status_t st =
        dtr_grad_factors(rs, ar, d->reduce_dtype, d->factor, d->force_sum, &r->f);
    r->premul = st == DTR_OK && r->f.pre != 1 && dtr__group_premul(ctx, d->mesh, d->shard_dims);
    if (st == DTR_OK)
        st = dtr__space_factors(ctx, r->f.factor, r->premul ? 1 : r->f.pre, r->f.post, __func__);
    if (st != DTR_OK) {
        free(r);
        return st;
    }
    r->outer = r->inner = 1;
    for (int i = 0; i < d->shard_dim; i++) r->outer *= d->shape[i];
    for (int i = d->shard_dim + 1; i < d->ndim; i++) r->inner *= d->shape[i];
    r->len = d->shape[d->shard_dim];
    int64_t off;
    dtr_chunk(r->len, rs, index, &r->rows, &off);
    r->chunk = (r->len + rs - 1) / rs; /* torch.chunk's size: uneven dims pad the last pieces */
    r->piece = r->outer * r->chunk * r->inner;
    r->m = (dtr__gparam_t){.item = dtr__item(d->param_dtype), .outer = r->outer, .len = r->len,
                           .inner = r->inner, .chunk = r->chunk, .rows = r->rows,
                           .piece = r->piece};
    r->spans = dtr__group_spans_scale(ctx) && !dtr__group_on_space(ctx) && !r->premul &&
               (d->param_dtype == d->reduce_dtype || dtr__group_spans_cast(ctx));
    /* The buffers are of the context's memory; the accumulator comes with the first
     * microbatch that skips the all-reduce. */
    int64_t item = dtr__item(d->reduce_dtype);
    st = dtr__group_alloc(ctx, rs * r->piece * item, &r->send, __func__);
    if (st == DTR_OK) st = dtr__group_alloc(ctx, r->piece * item, &r->recv, __func__);
    if (st != DTR_OK) {
        dtr_reducer_destroy(r);
        return st;
    }
    uint64_t h = 1469598103934665603ull;
    h = dtr__fnv(h, d->shard_dims);
    h = dtr__fnv(h, d->replicate_dims);
    h = dtr__fnv(h, d->shard_dim);
    for (int i = 0; i < d->ndim; i++) h = dtr__fnv(h, d->shape[i]);
    h = dtr__fnv(h, (int64_t)d->param_dtype * 64 + d->reduce_dtype);
    int64_t bits;
    memcpy(&bits, &r->f.factor, sizeof bits);
    r->hash = dtr__fnv(dtr__fnv(h, bits), d->force_sum);
    *out = r;
    return DTR_OK;
}

void dtr_reducer_destroy(dtr_reducer_t *r) {
    if (r == NULL) return;
    dtr__group_free(r->ctx, r->send);
    dtr__group_free(r->ctx, r->recv);
    dtr__group_free(r->ctx, r->acc);
    free(r->trash);
    free(r);
}

dtr_status_t dtr_reducer_info(const dtr_reducer_t *r, dtr_grad_factors_t *factors,
                              int64_t *shard_numel, int64_t *shard_shape) {
    DTR_CHECK_PTR(r, __func__);
    if (factors != NULL) *factors = r->f;
    if (shard_numel != NULL) *shard_numel = r->outer * r->rows * r->inner;
    if (shard_shape != NULL) {
        memcpy(shard_shape, r->d.shape, (size_t)r->d.ndim * sizeof *shard_shape);
        shard_shape[r->d.shard_dim] = r->rows;
    }
    return DTR_OK;
}

int dtr_grad_ops(const dtr_grad_factors_t *f, const char **names, int cap) {
    static const char *const rs_names[] = {"reduce_scatter:sum", "reduce_scatter:avg"};
    static const char *const ar_names[] = {"all_reduce:sum", "all_reduce:avg"};
    int n = 0;
    if (f == NULL || names == NULL) return 0;
    if (f->rs_size > 1 && n < cap) names[n++] = rs_names[f->rs_op == DTR_REDUCE_AVG];
    if (f->ar_size > 1 && n < cap) names[n++] = ar_names[f->ar_op == DTR_REDUCE_AVG];
    return n;
}

/* Packs the gradient into rs equal pieces of the reduce dtype: piece k holds rows
 * [k * chunk, (k + 1) * chunk) of the shard dim, zero past the end; pre-divided unless the
 * reduce-scatter pre-multiplies. */
static dtr_status_t dtr__pack(dtr_reducer_t *r, const void *grad) {
    dtr_context_t *ctx = r->ctx;
    dtr_dtype_t pt = r->d.param_dtype, rt = r->d.reduce_dtype;
    int64_t pitem = dtr__item(pt), ritem = dtr__item(rt);
    int64_t row = r->chunk * r->inner; /* elements of one outer slice of a piece */
    DTR_CHECK(dtr__group_zero(ctx, r->send, r->rs * r->piece * ritem));
    for (int64_t k = 0; k < r->rs; k++) {
        int64_t lo = k * r->chunk, hi = lo + r->chunk < r->len ? lo + r->chunk : r->len;
        if (hi <= lo) continue;
        for (int64_t o = 0; o < r->outer; o++) {
            const char *src = (const char *)grad + ((o * r->len + lo) * r->inner) * pitem;
            char *dst = (char *)r->send + (k * r->piece + o * row) * ritem;
            /* grad is not written: the pre-divide is of the cast copy */
            DTR_CHECK(dtr__group_cast_divide(ctx, pt, (void *)src, rt, dst, (hi - lo) * r->inner,
                                             r->premul ? 1 : r->f.pre, false,
                                             "dtr_reducer_reduce"));
        }
    }
    return DTR_OK;
}

/* Copies this rank's real rows of the reduced piece into out, post-divided in the reduce
 * dtype and cast to the param dtype. */
static dtr_status_t dtr__unpack(dtr_reducer_t *r, void *out) {
    dtr_dtype_t pt = r->d.param_dtype, rt = r->d.reduce_dtype;
    int64_t pitem = dtr__item(pt), ritem = dtr__item(rt);
    for (int64_t o = 0; o < r->outer && r->rows > 0; o++)
        DTR_CHECK(dtr__group_cast_divide(r->ctx, rt,
                                         (char *)r->recv + o * r->chunk * r->inner * ritem, pt,
                                         (char *)out + o * r->rows * r->inner * pitem,
                                         r->rows * r->inner, r->f.post, true,
                                         "dtr_reducer_reduce"));
    return DTR_OK;
}

/* What a collective of the reducer over the group of `dims` divides its sums by: the
 * group's size for AVG (the MPI backend has none: SUM, then the executor's divide), 1 for
 * SUM. */
static double dtr__reducer_post(const dtr_reducer_t *r, unsigned dims, dtr_reduce_op_t op) {
    int64_t n = 1;
    if (op == DTR_REDUCE_AVG) dtr_mesh_group_size(r->d.mesh, dims, &n);
    return (double)n;
}

/* Whether the collective over the group of `dims` runs over span lists: a reducer that may
 * (r->spans), a backend without AVG where op is AVG (the divide then rides on the writes),
 * never both an AVG divide and a post factor (the packed path rounds twice), and the
 * group's answer, the same on every member of the group. */
static bool dtr__reducer_spans_ok(dtr_reducer_t *r, dtr_spans_kind_t kind, int64_t bytes) {
    bool rs = kind == DTR_SPANS_REDUCE_SCATTER;
    dtr_reduce_op_t op = rs ? r->f.rs_op : r->f.ar_op;
    if (!r->spans || (op == DTR_REDUCE_AVG && dtr__group_has_avg(r->ctx))) return false;
    if (op == DTR_REDUCE_AVG && r->f.post != 1) return false;
    return dtr__group_spans_ok(r->ctx, r->d.mesh, rs ? r->d.shard_dims : r->d.replicate_dims,
                               kind, r->d.reduce_dtype, DTR_REDUCE_SUM, bytes);
}

/*
 * One collective over span lists (internal.h's layout of one parameter), blocking:
 *   REDUCE_SCATTER  the gradient where it lies (cast and pre-divided as read) into recv, or
 *                   into out (the last stage: padding dropped, post-divided, cast back);
 *   ALL_REDUCE      from the gradient (grad: DDP, pre-divided) or from recv (grad NULL) into
 *                   out, post-divided and cast back.
 * The same casts and divides as the packed path, so the same bits.
 */
static dtr_status_t dtr__reducer_spans(dtr_reducer_t *r, dtr_spans_kind_t kind,
                                       const void *grad, void *out) {
    static const char func[] = "dtr_reducer_reduce";
    bool rs = kind == DTR_SPANS_REDUCE_SCATTER;
    dtr_dtype_t pt = r->d.param_dtype, rt = r->d.reduce_dtype;
    int64_t ritem = dtr__item(rt);
    dtr__glayout_t l = {&r->m, 1, rs ? r->rs : 1, r->piece * ritem, pt, rt};
    dtr_span_t *sp = malloc((size_t)dtr__layout_most(&l, l.rs) * sizeof *sp);
    dtr_span_t *rp = malloc((size_t)dtr__layout_most(&l, 1) * sizeof *rp);
    int64_t *counts = malloc((size_t)l.rs * sizeof *counts);
    if (r->trash == NULL) r->trash = malloc(DTR__TRASH);
    if (sp == NULL || rp == NULL || counts == NULL || r->trash == NULL) {
        free(sp), free(rp), free(counts);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "span lists");
    }
    for (int64_t k = 0; k < l.rs; k++) counts[k] = r->piece;
    dtr_spans_op_t op = {.kind = kind, .send = sp, .recv = rp, .counts = counts, .dtype = rt,
                         .op = DTR_REDUCE_SUM};
    if (grad != NULL) { /* read from the gradient: cast and pre-divided */
        op.nsend = (int)dtr__layout_send(&l, (const void *const *)&grad, sp);
        op.cast = pt != rt;
        op.send_dtype = pt;
        op.pre = r->f.pre;
    } else {
        sp[0] = (dtr_span_t){r->recv, 1, r->piece * ritem, 0};
        op.nsend = 1;
    }
    unsigned dims = rs ? r->d.shard_dims : r->d.replicate_dims;
    double post = dtr__reducer_post(r, dims, rs ? r->f.rs_op : r->f.ar_op);
    if (out != NULL) { /* the last stage: the output in place */
        op.nrecv = (int)dtr__layout_recv(&l, &out, r->trash, rp);
        op.post = post != 1 ? post : r->f.post;
        op.recv_cast = pt != rt;
        op.recv_dtype = pt;
    } else {
        rp[0] = (dtr_span_t){r->recv, 1, r->piece * ritem, 0};
        op.nrecv = 1;
        op.post = post;
    }
    dtr_status_t st = dtr__group_start_spans(r->ctx, DTR__SLOT_RS, r->d.mesh, dims, &op);
    free(sp), free(rp), free(counts);
    bool done;
    return st == DTR_OK ? dtr__group_complete(r->ctx, DTR__SLOT_RS, true, &done) : st;
}

dtr_status_t dtr_reducer_reduce(dtr_reducer_t *r, const void *grad, size_t grad_bytes, bool sync,
                                void *out, size_t out_bytes) {
    static const char func[] = "dtr_reducer_reduce";
    DTR_CHECK_PTR(r, func);
    const dtr_mesh_t *mesh = r->d.mesh;
    unsigned all = r->d.shard_dims | r->d.replicate_dims;
    int64_t pitem = dtr__item(r->d.param_dtype);
    int64_t numel = r->outer * r->len * r->inner, shard = r->outer * r->rows * r->inner;

    /* One agreement over both groups, before any data moves: the same reducer and the same
     * sync on every member, and every member's buffers good. */
    char msg[256] = "";
    dtr_status_t local = DTR_ERR_INVALID_ARGUMENT;
    if ((int64_t)grad_bytes != numel * pitem)
        snprintf(msg, sizeof msg, "grad_bytes: %zu, the full gradient is %lld bytes",
                 grad_bytes, (long long)(numel * pitem));
    else if (grad == NULL && numel > 0)
        snprintf(msg, sizeof msg, "grad: must not be NULL");
    else if (sync && (int64_t)out_bytes < shard * pitem) {
        local = DTR_ERR_BUFFER_TOO_SMALL;
        snprintf(msg, sizeof msg, "out_bytes: %zu, this rank's shard is %lld bytes", out_bytes,
                 (long long)(shard * pitem));
    } else if (sync && out == NULL && shard > 0)
        snprintf(msg, sizeof msg, "out: must not be NULL");
    else if (!sync && !dtr__group_can_add(r->ctx)) {
        local = DTR_ERR_UNSUPPORTED;
        snprintf(msg, sizeof msg, "sync: false needs the memory space's add (memory.h) to "
                                  "accumulate, and %s memory has none",
                 dtr_context_memory(r->ctx));
    } else
        local = DTR_OK;
    DTR_CHECK(dtr__group_agree(r->ctx, mesh, all, func, dtr__fnv(r->hash, sync), local, msg));

    dtr_dtype_t rt = r->d.reduce_dtype;
    int64_t bytes = r->piece * dtr__item(rt);
    /* Over span lists where the groups take them (DDP: the one all-reduce; FSDP: the
     * reduce-scatter, into out when it is the last stage), else packed. Both groups agreed
     * above: the collectives skip their own agreement. */
    bool last = sync && !r->have_acc;
    if (r->rs == 1 && last && dtr__reducer_spans_ok(r, DTR_SPANS_ALL_REDUCE, bytes))
        return dtr__reducer_spans(r, DTR_SPANS_ALL_REDUCE, grad, out);
    if (r->rs > 1 && dtr__reducer_spans_ok(r, DTR_SPANS_REDUCE_SCATTER, r->rs * bytes)) {
        bool to_out = last && r->f.ar_size == 1;
        DTR_CHECK(dtr__reducer_spans(r, DTR_SPANS_REDUCE_SCATTER, grad, to_out ? out : NULL));
        if (to_out) return DTR_OK;
    } else {
        DTR_CHECK(dtr__pack(r, grad));
        DTR_CHECK(dtr__group_reduce(r->ctx, mesh, r->d.shard_dims, r->send, r->recv, r->piece,
                                    rt, r->f.rs_op, true, false, r->premul ? 1.0 / r->f.pre : 1));
    }
    if (!sync) {
        /* Skips the all-reduce: keep the reduce-scatter output for the synced microbatch. */
        if (r->acc == NULL) DTR_CHECK(dtr__group_alloc(r->ctx, bytes, &r->acc, func));
        if (r->have_acc) DTR_CHECK(dtr__group_add(r->ctx, rt, r->recv, r->acc, r->piece, func));
        else DTR_CHECK(dtr__group_copy(r->ctx, r->acc, r->recv, bytes));
        r->have_acc = true;
        return DTR_OK;
    }
    dtr_status_t st = DTR_OK;
    if (r->have_acc) st = dtr__group_add(r->ctx, rt, r->acc, r->recv, r->piece, func);
    r->have_acc = false;
    DTR_CHECK(st);
    if (r->f.ar_size > 1 && dtr__reducer_spans_ok(r, DTR_SPANS_ALL_REDUCE, bytes))
        return dtr__reducer_spans(r, DTR_SPANS_ALL_REDUCE, NULL, out);
    DTR_CHECK(dtr__group_reduce(r->ctx, mesh, r->d.replicate_dims, r->recv, r->recv, r->piece,
                                rt, r->f.ar_op, false, false, 1));
    return dtr__unpack(r, out);
}

/* ---- the fused all-reduce ----------------------------------------------------------- */

int64_t dtr__fused_align(int64_t bytes) {
    return (bytes + DTR_FUSED_ALIGN - 1) / DTR_FUSED_ALIGN * DTR_FUSED_ALIGN;
}

dtr_status_t dtr_fused_all_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                  dtr_fused_entry_t *entries, int n, dtr_dtype_t dtype,
                                  dtr_reduce_op_t op, int64_t *bytes_out) {
    static const char func[] = "dtr_fused_all_reduce";
    DTR_CHECK_PTR(ctx, func);
    DTR_CHECK_PTR(mesh, func);
    if (n < 0 || (n > 0 && entries == NULL))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "entries/n: %d entries at %p", n,
                          (void *)entries);
    DTR_CHECK(dtr__float_arg(dtype, func, "dtype"));
    if (op != DTR_REDUCE_SUM && op != DTR_REDUCE_AVG)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "op: %s, must be sum or avg",
                          dtr_reduce_op_name(op) != NULL ? dtr_reduce_op_name(op) : "?");
    int64_t item = dtr__item(dtype), largest = 0;
    for (int k = 0; k < n; k++) {
        int64_t gsize;
        DTR_CHECK(dtr_mesh_group_size(mesh, entries[k].dims, &gsize));
    }
    /* One pass per distinct group, in order of first appearance. */
    for (int first = 0; first < n; first++) {
        unsigned dims = entries[first].dims;
        bool seen = false;
        for (int k = 0; k < first && !seen; k++) seen = entries[k].dims == dims;
        if (seen) continue;
        const char *bad = NULL;
        int64_t total = 0;
        for (int k = first; k < n; k++) {
            if (entries[k].dims != dims) continue;
            if (entries[k].count < 0) bad = "entries: a count is negative";
            else if (entries[k].count > 0 && entries[k].buf == NULL) bad = "entries: a buf is NULL";
            else total += dtr__fused_align(entries[k].count * item);
        }
        if (bad != NULL)
            return dtr__fail_together(ctx, mesh, dims, DTR_ERR_INVALID_ARGUMENT, func, bad);
        /* The fused buffer, its packing and the divide are of the context's memory. */
        char *fused = NULL;
        dtr_status_t st = dtr__group_alloc(ctx, total, (void **)&fused, func);
        if (st == DTR_OK) st = dtr__group_zero(ctx, fused, total);
        int64_t at = 0;
        for (int k = first; k < n && st == DTR_OK; k++) {
            if (entries[k].dims != dims) continue;
            st = dtr__group_copy(ctx, fused + at, entries[k].buf, entries[k].count * item);
            at += dtr__fused_align(entries[k].count * item);
        }
        if (st != DTR_OK) {
            dtr__group_free(ctx, fused);
            return dtr__fail_together(ctx, mesh, dims, st, func,
                                      "no fused buffer (allocation or packing failed)");
        }
        /* The padding is zero everywhere, so it sums to zero: reduce the whole buffer. */
        int64_t gsize, count = total / item;
        dtr_mesh_group_size(mesh, dims, &gsize);
        st = dtr_all_reduce(ctx, mesh, dims, fused, fused, count, dtype, DTR_REDUCE_SUM);
        if (st == DTR_OK && op == DTR_REDUCE_AVG && gsize > 1)
            st = dtr__group_divide(ctx, dtype, fused, count, (double)gsize, func);
        at = 0;
        for (int k = first; k < n && st == DTR_OK; k++) {
            if (entries[k].dims != dims) continue;
            st = dtr__group_copy(ctx, entries[k].buf, fused + at, entries[k].count * item);
            at += dtr__fused_align(entries[k].count * item);
        }
        dtr__group_free(ctx, fused);
        if (st != DTR_OK) return st;
        if (total > largest) largest = total;
    }
    if (bytes_out != NULL) *bytes_out = largest;
    return DTR_OK;
}
