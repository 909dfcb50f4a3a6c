#include "tests/support/interp.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_SCALE 20736.0 /* 2^8 * 3^4 */

typedef struct {
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    double *data;
} block_t;

struct interp {
    const dtr_mesh_t *mesh;
    int mdims, ndim;
    int64_t msize[DTR_MAX_MESH_DIMS];
    int64_t gshape[DTR_MAX_TENSOR_DIMS];
    int64_t nranks;
    block_t *ranks; /* by row-major mesh position */
    dtr_placement_t src[DTR_MAX_MESH_DIMS]; /* the source's placements */
    double *want;   /* mixed Partial ops: the tensor by their order (NULL: T itself) */
};

static int fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

static void coord_of(const interp_t *in, int64_t p, int64_t *coord) {
    for (int i = in->mdims - 1; i >= 0; i--) {
        coord[i] = p % in->msize[i];
        p /= in->msize[i];
    }
}

static int64_t position_of(const interp_t *in, const int64_t *coord) {
    int64_t p = 0;
    for (int i = 0; i < in->mdims; i++) p = p * in->msize[i] + coord[i];
    return p;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static double tensor_value(int64_t index) { return K_SCALE * (double)(1 + index); }

/* Contribution of partial index q (of count) to element e, for op. */
static double contribution(dtr_reduce_op_t op, double t, int64_t e, int64_t q, int64_t count,
                           uint64_t seed, int64_t total_avg_factor) {
    uint64_t h = mix(seed ^ mix((uint64_t)e * 1315423911u));
    int64_t q0 = (int64_t)(h % (uint64_t)count);
    switch (op) {
    case DTR_REDUCE_SUM:
    case DTR_REDUCE_AVG: {
        /* Random multiples of K for all but the last index, which makes the sum right. */
        double target = t * (double)total_avg_factor, others = 0;
        for (int64_t k = 0; k < count - 1; k++) {
            double r = K_SCALE * (double)((int64_t)(mix(h + (uint64_t)k) % 201) - 100);
            if (k == q) return r;
            others += r;
        }
        return target - others;
    }
    case DTR_REDUCE_MAX:
        return q == q0 ? t : t - K_SCALE * (double)(1 + mix(h + (uint64_t)q) % 50);
    case DTR_REDUCE_MIN:
        return q == q0 ? t : t + K_SCALE * (double)(1 + mix(h + (uint64_t)q) % 50);
    default: /* product: T at q0, then 2 and 0.5 on two other indices, 1 elsewhere */
        if (q == q0) return t;
        if (count >= 3) {
            int64_t q1 = (q0 + 1) % count, q2 = (q0 + 2) % count;
            if (q == q1) return 2.0;
            if (q == q2) return 0.5;
        }
        return 1.0;
    }
}

static double reduce2(dtr_reduce_op_t op, double a, double b) {
    switch (op) {
    case DTR_REDUCE_MAX: return a > b ? a : b;
    case DTR_REDUCE_MIN: return a < b ? a : b;
    case DTR_REDUCE_PRODUCT: return a * b;
    default: return a + b;
    }
}

/* Reduces the last axis (n values in a row) of vals[count] in place, as an all-reduce of
 * one mesh dim does: members in coordinate order, avg divided once at the end. */
static int64_t reduce_last_axis(double *vals, int64_t count, int64_t n, dtr_reduce_op_t op) {
    for (int64_t g = 0; g < count / n; g++) {
        double acc = vals[g * n];
        for (int64_t k = 1; k < n; k++) acc = reduce2(op, acc, vals[g * n + k]);
        vals[g] = op == DTR_REDUCE_AVG ? acc / (double)n : acc;
    }
    return count / n;
}

/* Do the source's Partial dims (of more than one rank) mix ops that do not commute? */
static bool mixed_ops(const interp_t *in, const dtr_placement_t *pl) {
    int first = -1;
    for (int i = 0; i < in->mdims; i++) {
        if (pl[i].kind != DTR_PARTIAL || in->msize[i] == 1) continue;
        if (first < 0) first = i;
        dtr_reduce_op_t a = pl[first].op, b = pl[i].op;
        bool sums = (a == DTR_REDUCE_SUM || a == DTR_REDUCE_AVG) &&
                    (b == DTR_REDUCE_SUM || b == DTR_REDUCE_AVG);
        if (a != b && !sums) return true;
    }
    return false;
}

/* Mixed ops: contribution q of element e is a small integer (exact under every op for
 * meshes of 1, 2 and 4 ranks per dim); want[e] is their reduction innermost mesh dim first
 * (docs/semantics.md). */
static double mixed_contribution(uint64_t seed, int64_t e, int64_t q) {
    static const double values[6] = {-3, -2, -1, 1, 2, 3}; /* (no 0: it hides a product's order) */
    return values[mix(seed ^ mix((uint64_t)e * 2654435761u + (uint64_t)q)) % 6];
}

static int fill_want(interp_t *in, const dtr_spec_t *src, int64_t count, uint64_t seed) {
    int64_t total = numel(in->ndim, in->gshape);
    in->want = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    double *vals = malloc((size_t)count * sizeof(double));
    if (in->want == NULL || vals == NULL) {
        free(vals);
        return -1;
    }
    for (int64_t e = 0; e < total; e++) {
        for (int64_t q = 0; q < count; q++) vals[q] = mixed_contribution(seed, e, q);
        int64_t left = count;
        for (int i = in->mdims - 1; i >= 0; i--)
            if (src->placements[i].kind == DTR_PARTIAL)
                left = reduce_last_axis(vals, left, in->msize[i], src->placements[i].op);
        in->want[e] = vals[0];
    }
    free(vals);
    return 0;
}

interp_t *interp_create(const dtr_spec_t *src, uint64_t seed) {
    interp_t *in = calloc(1, sizeof *in);
    if (in == NULL) return NULL;
    in->mesh = src->mesh;
    in->mdims = dtr_mesh_ndims(src->mesh);
    in->ndim = src->ndim;
    memcpy(in->gshape, src->shape, sizeof in->gshape);
    in->nranks = dtr_mesh_nranks(src->mesh);
    for (int i = 0; i < in->mdims; i++) in->msize[i] = dtr_mesh_size(src->mesh, i);
    memcpy(in->src, src->placements, (size_t)in->mdims * sizeof *in->src);
    in->ranks = calloc((size_t)in->nranks, sizeof *in->ranks);
    if (in->ranks == NULL) {
        free(in);
        return NULL;
    }
    /* Partial dims of the source: their coordinates index the contribution. */
    dtr_reduce_op_t op = DTR_REDUCE_SUM;
    int64_t count = 1, avg_factor = 1;
    for (int i = 0; i < in->mdims; i++)
        if (src->placements[i].kind == DTR_PARTIAL) {
            op = src->placements[i].op;
            count *= in->msize[i];
            if (op == DTR_REDUCE_AVG) avg_factor *= in->msize[i];
        }
    bool mixed = mixed_ops(in, src->placements);
    if (mixed && fill_want(in, src, count, seed) != 0) {
        interp_destroy(in);
        return NULL;
    }
    for (int64_t p = 0; p < in->nranks; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        coord_of(in, p, coord);
        dtr_layout_t l;
        dtr_spec_layout_at(src, coord, &l);
        block_t *b = &in->ranks[p];
        memcpy(b->shape, l.local_shape, sizeof b->shape);
        b->data = malloc((size_t)(l.numel > 0 ? l.numel : 1) * sizeof(double));
        int64_t q = 0;
        for (int i = 0; i < in->mdims; i++)
            if (src->placements[i].kind == DTR_PARTIAL) q = q * in->msize[i] + coord[i];
        int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
        for (int64_t k = 0; k < l.numel; k++) {
            int64_t e = 0;
            for (int d = 0; d < in->ndim; d++) e = e * in->gshape[d] + l.global_offset[d] + idx[d];
            double t = tensor_value(e);
            if (mixed)
                b->data[k] = mixed_contribution(seed, e, q);
            else
                b->data[k] = count > 1 ? contribution(op, t, e, q, count, seed, avg_factor) : t;
            for (int d = in->ndim - 1; d >= 0; d--) {
                if (++idx[d] < l.local_shape[d]) break;
                idx[d] = 0;
            }
        }
    }
    return in;
}

void interp_destroy(interp_t *in) {
    if (in == NULL) return;
    for (int64_t p = 0; p < in->nranks && in->ranks != NULL; p++) free(in->ranks[p].data);
    free(in->ranks);
    free(in->want);
    free(in);
}

/* Row-major strides of a shape. */
static void strides_of(int ndim, const int64_t *shape, int64_t *st) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d];
    }
}

/* Copies the sub-block [lo, lo+ext) of src (shape sshape) into dst (shape dshape) at doff. */
static void copy_box(int ndim, const double *src, const int64_t *sshape, const int64_t *lo,
                     const int64_t *ext, double *dst, const int64_t *dshape, const int64_t *doff) {
    int64_t ss[DTR_MAX_TENSOR_DIMS], ds[DTR_MAX_TENSOR_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0};
    strides_of(ndim, sshape, ss);
    strides_of(ndim, dshape, ds);
    int64_t n = numel(ndim, ext);
    for (int64_t k = 0; k < n; k++) {
        int64_t si = 0, di = 0;
        for (int d = 0; d < ndim; d++) {
            si += (lo[d] + idx[d]) * ss[d];
            di += (doff[d] + idx[d]) * ds[d];
        }
        dst[di] = src[si];
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < ext[d]) break;
            idx[d] = 0;
        }
    }
}

static void chunk_rule(int64_t len, int64_t n, int64_t r, int64_t *size, int64_t *off) {
    dtr_chunk(len, n, r, size, off);
}

/* Ranks (positions) of p's group along mesh dim i, in coordinate order. */
static void group_of(const interp_t *in, int64_t p, int i, int64_t *members) {
    int64_t coord[DTR_MAX_MESH_DIMS];
    coord_of(in, p, coord);
    for (int64_t c = 0; c < in->msize[i]; c++) {
        coord[i] = c;
        members[c] = position_of(in, coord);
    }
}

/* Concatenation of the group's blocks along d; members must agree on the other dims. */
static int concat(const interp_t *in, const block_t *blocks, const int64_t *members, int64_t n,
                  int d, block_t *out, char *err, size_t len) {
    memcpy(out->shape, blocks[members[0]].shape, sizeof out->shape);
    out->shape[d] = 0;
    for (int64_t k = 0; k < n; k++) {
        const block_t *b = &blocks[members[k]];
        for (int e = 0; e < in->ndim; e++)
            if (e != d && b->shape[e] != out->shape[e])
                return fail(err, len, "concat along dim %d: members disagree on dim %d (%lld vs %lld)",
                            d, e, (long long)b->shape[e], (long long)out->shape[e]);
        out->shape[d] += b->shape[d];
    }
    int64_t total = numel(in->ndim, out->shape);
    out->data = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    int64_t at[DTR_MAX_TENSOR_DIMS] = {0}, zero[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        const block_t *b = &blocks[members[k]];
        copy_box(in->ndim, b->data, b->shape, zero, b->shape, out->data, out->shape, at);
        at[d] += b->shape[d];
    }
    return 0;
}

/* The chunk r of n along d of a block. */
static void take_chunk(int ndim, const block_t *whole, int d, int64_t n, int64_t r, block_t *out) {
    int64_t size, off, lo[DTR_MAX_TENSOR_DIMS] = {0}, zero[DTR_MAX_TENSOR_DIMS] = {0};
    chunk_rule(whole->shape[d], n, r, &size, &off);
    memcpy(out->shape, whole->shape, sizeof out->shape);
    out->shape[d] = size;
    lo[d] = off;
    int64_t total = numel(ndim, out->shape);
    out->data = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    copy_box(ndim, whole->data, whole->shape, lo, out->shape, out->data, out->shape, zero);
}

/* Elementwise reduction of the group's blocks (same shapes). */
static int reduce_group(const interp_t *in, const block_t *blocks, const int64_t *members,
                        int64_t n, dtr_reduce_op_t op, block_t *out, char *err, size_t len) {
    memcpy(out->shape, blocks[members[0]].shape, sizeof out->shape);
    int64_t total = numel(in->ndim, out->shape);
    for (int64_t k = 1; k < n; k++)
        if (memcmp(blocks[members[k]].shape, out->shape, sizeof out->shape) != 0)
            return fail(err, len, "reduce: members hold blocks of different shapes");
    out->data = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    for (int64_t e = 0; e < total; e++) {
        double acc = blocks[members[0]].data[e];
        for (int64_t k = 1; k < n; k++) acc = reduce2(op, acc, blocks[members[k]].data[e]);
        out->data[e] = op == DTR_REDUCE_AVG ? acc / (double)n : acc;
    }
    return 0;
}

static void layout_for(const interp_t *in, const dtr_placement_t *pl, const int64_t *coord,
                       int64_t *shape, int64_t *offset) {
    memcpy(shape, in->gshape, sizeof in->gshape);
    memset(offset, 0, sizeof in->gshape);
    /* Shard orders: the mesh dims sharding a tensor dim split it by increasing order, ties
     * by mesh dim (all orders 0: mesh-dim order). */
    for (int k = 0; k < DTR_MAX_MESH_DIMS; k++)
        for (int i = 0; i < in->mdims; i++) {
            if (pl[i].kind != DTR_SHARD || pl[i].order != k) continue;
            int64_t size, off;
            chunk_rule(shape[pl[i].dim], in->msize[i], coord[i], &size, &off);
            shape[pl[i].dim] = size;
            offset[pl[i].dim] += off;
        }
}

/* The exchange, by its definition: every rank assembles its "after" block from the ranks
 * that agree with it on the mesh dims "before" does not shard and hold the element. */
static int apply_exchange(interp_t *in, const dtr_step_t *s, block_t *next, char *err,
                          size_t len) {
    for (int64_t p = 0; p < in->nranks; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS], ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS];
        coord_of(in, p, coord);
        layout_for(in, s->after, coord, ts, to);
        block_t *out = &next[p];
        memcpy(out->shape, ts, sizeof ts);
        int64_t total = numel(in->ndim, ts);
        out->data = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
        int64_t filled = 0;
        /* Walk the sources: vary the coordinates of the mesh dims "before" shards. */
        int64_t sc[DTR_MAX_MESH_DIMS];
        memcpy(sc, coord, sizeof sc);
        for (int i = 0; i < in->mdims; i++)
            if (s->before[i].kind == DTR_SHARD) sc[i] = 0;
        for (;;) {
            int64_t cs[DTR_MAX_TENSOR_DIMS], co[DTR_MAX_TENSOR_DIMS];
            layout_for(in, s->before, sc, cs, co);
            const block_t *src = &in->ranks[position_of(in, sc)];
            if (memcmp(src->shape, cs, sizeof cs) != 0)
                return fail(err, len, "exchange: a source holds a block of the wrong shape");
            int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS], at[DTR_MAX_TENSOR_DIMS];
            bool empty = false;
            for (int d = 0; d < in->ndim; d++) {
                int64_t a = co[d] > to[d] ? co[d] : to[d];
                int64_t b = co[d] + cs[d] < to[d] + ts[d] ? co[d] + cs[d] : to[d] + ts[d];
                if (b <= a) empty = true;
                lo[d] = a - co[d];
                at[d] = a - to[d];
                ext[d] = b - a;
            }
            if (!empty) {
                copy_box(in->ndim, src->data, src->shape, lo, ext, out->data, out->shape, at);
                filled += numel(in->ndim, ext);
            }
            int i = in->mdims - 1;
            for (; i >= 0; i--) {
                if (s->before[i].kind != DTR_SHARD) continue;
                if (++sc[i] < in->msize[i]) break;
                sc[i] = 0;
            }
            if (i < 0) break;
        }
        if (filled != total)
            return fail(err, len, "exchange: rank at position %lld assembled %lld of %lld elements",
                        (long long)p, (long long)filled, (long long)total);
    }
    return 0;
}

/* One rank's side of a step over one mesh dim: its block after the step, from its group's
 * blocks (members, n of them, in group order) or its own. */
typedef struct {
    interp_t *in;
    const dtr_step_t *s;
    const int64_t *coord, *members;
    int64_t n;
    const block_t *own;
    block_t *out;
} rank_step_t;

static int rank_gather(const rank_step_t *r, char *err, size_t len) {
    return concat(r->in, r->in->ranks, r->members, r->n, r->s->tensor_dim, r->out, err, len);
}

static int rank_all_to_all(const rank_step_t *r, char *err, size_t len) {
    block_t tmp = {0};
    int rc = concat(r->in, r->in->ranks, r->members, r->n, r->s->tensor_dim, &tmp, err, len);
    if (rc == 0)
        take_chunk(r->in->ndim, &tmp, r->s->tensor_dim2, r->n, r->coord[r->s->mesh_dim], r->out);
    free(tmp.data);
    return rc;
}

static int rank_all_reduce(const rank_step_t *r, char *err, size_t len) {
    return reduce_group(r->in, r->in->ranks, r->members, r->n, r->s->op, r->out, err, len);
}

static int rank_reduce_scatter(const rank_step_t *r, char *err, size_t len) {
    block_t tmp = {0};
    int rc = reduce_group(r->in, r->in->ranks, r->members, r->n, r->s->op, &tmp, err, len);
    if (rc == 0)
        take_chunk(r->in->ndim, &tmp, r->s->tensor_dim, r->n, r->coord[r->s->mesh_dim], r->out);
    free(tmp.data);
    return rc;
}

static int rank_chunk(const rank_step_t *r, char *err, size_t len) {
    (void)err;
    (void)len;
    take_chunk(r->in->ndim, r->own, r->s->tensor_dim, r->n, r->coord[r->s->mesh_dim], r->out);
    return 0;
}

/* own block at its place in zeros of the after block */
static int rank_zero_fill(const rank_step_t *r, char *err, size_t len) {
    (void)err;
    (void)len;
    const interp_t *in = r->in;
    int64_t bs[DTR_MAX_TENSOR_DIMS], bo[DTR_MAX_TENSOR_DIMS], zero[DTR_MAX_TENSOR_DIMS] = {0};
    int64_t ao[DTR_MAX_TENSOR_DIMS];
    layout_for(in, r->s->before, r->coord, bs, bo);
    layout_for(in, r->s->after, r->coord, r->out->shape, ao);
    for (int d = 0; d < in->ndim; d++) bo[d] -= ao[d];
    int64_t total = numel(in->ndim, r->out->shape);
    r->out->data = calloc((size_t)(total > 0 ? total : 1), sizeof(double));
    copy_box(in->ndim, r->own->data, r->own->shape, zero, r->own->shape, r->out->data,
             r->out->shape, bo);
    return 0;
}

/* the block times f: 1/n for a scale, 1 for a relabel */
static int rank_scaled(const rank_step_t *r, double f) {
    int64_t total = numel(r->in->ndim, r->own->shape);
    memcpy(r->out->shape, r->own->shape, sizeof r->own->shape);
    r->out->data = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    for (int64_t e = 0; e < total; e++) r->out->data[e] = r->own->data[e] * f;
    return 0;
}

static int rank_scale(const rank_step_t *r, char *err, size_t len) {
    (void)err;
    (void)len;
    return rank_scaled(r, 1.0 / (double)r->n);
}

static int rank_relabel(const rank_step_t *r, char *err, size_t len) {
    (void)err;
    (void)len;
    return rank_scaled(r, 1.0);
}

static int apply_step(interp_t *in, const dtr_step_t *s, char *err, size_t len);

/* By its meaning, whatever parts the members reduce: the mesh dim's reduction (as an
 * all-reduce), then every rank takes its "after" block (as an exchange). */
static int apply_reduce_exchange(interp_t *in, const dtr_step_t *s, char *err, size_t len) {
    dtr_step_t reduce = *s, move = *s;
    reduce.kind = DTR_STEP_ALL_REDUCE;
    reduce.to = dtr_replicate();
    reduce.after[s->mesh_dim] = dtr_replicate();
    for (int i = 0; i < in->mdims; i++)
        if (i != s->mesh_dim) reduce.after[i] = s->before[i];
    move.kind = DTR_STEP_EXCHANGE;
    move.mesh_dim = -1;
    memcpy(move.before, reduce.after, sizeof move.before);
    int rc = apply_step(in, &reduce, err, len);
    return rc != 0 ? rc : apply_step(in, &move, err, len);
}

/* The reference's row of a step kind: a rank's side of a step over one mesh dim (rank), or
 * the step over the whole mesh at once (whole). Every kind has a row: adding one to the
 * library adds one here (redistribute/README.md). */
typedef struct {
    int (*rank)(const rank_step_t *r, char *err, size_t len);
    int (*whole)(interp_t *in, const dtr_step_t *s, char *err, size_t len);
} kind_rule_t;

static int apply_exchange_whole(interp_t *in, const dtr_step_t *s, char *err, size_t len);

static const kind_rule_t kind_rules[DTR_STEP_KIND_LAST] = {
    [DTR_STEP_ALL_GATHER] = {.rank = rank_gather},
    [DTR_STEP_REDUCE_SCATTER] = {.rank = rank_reduce_scatter},
    [DTR_STEP_ALL_REDUCE] = {.rank = rank_all_reduce},
    [DTR_STEP_ALL_TO_ALL] = {.rank = rank_all_to_all},
    [DTR_STEP_EXCHANGE] = {.whole = apply_exchange_whole},
    [DTR_STEP_REDUCE_EXCHANGE] = {.whole = apply_reduce_exchange},
    [DTR_STEP_LOCAL_CHUNK] = {.rank = rank_chunk},
    [DTR_STEP_LOCAL_SCALE] = {.rank = rank_scale},
    [DTR_STEP_LOCAL_RELABEL] = {.rank = rank_relabel},
    [DTR_STEP_LOCAL_ZERO_FILL] = {.rank = rank_zero_fill},
};

/* Every rank's block replaced by next's (the old ones freed). */
static void replace_blocks(interp_t *in, block_t *next) {
    block_t *old = in->ranks;
    in->ranks = next;
    for (int64_t p = 0; p < in->nranks; p++) free(old[p].data);
    free(old);
}

static int apply_exchange_whole(interp_t *in, const dtr_step_t *s, char *err, size_t len) {
    block_t *next = calloc((size_t)in->nranks, sizeof *next);
    int rc = apply_exchange(in, s, next, err, len);
    replace_blocks(in, next);
    return rc;
}

static int apply_step(interp_t *in, const dtr_step_t *s, char *err, size_t len) {
    if ((unsigned)s->kind >= DTR_STEP_KIND_LAST)
        return fail(err, len, "unknown step kind %d", (int)s->kind);
    if (s->kind == DTR_STEP_LOCAL_RELABEL && s->mesh_dim < 0)
        return 0; /* (an exchange over mesh dims of one rank: every block stays) */
    const kind_rule_t *rule = &kind_rules[s->kind];
    if (rule->whole != NULL) return rule->whole(in, s, err, len);
    block_t *next = calloc((size_t)in->nranks, sizeof *next);
    int64_t members[64];
    int rc = 0;
    for (int64_t p = 0; p < in->nranks && rc == 0; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        coord_of(in, p, coord);
        group_of(in, p, s->mesh_dim, members);
        rank_step_t r = {in, s, coord, members, in->msize[s->mesh_dim], &in->ranks[p], &next[p]};
        rc = rule->rank(&r, err, len);
    }
    replace_blocks(in, next);
    return rc;
}

int interp_run(interp_t *in, const dtr_plan_t *plan, char *err, size_t len) {
    for (int k = 0; k < plan->nsteps; k++) {
        char inner[256];
        if (apply_step(in, &plan->steps[k], inner, sizeof inner) != 0)
            return fail(err, len, "step %d (%s): %s", k + 1,
                        dtr_step_kind_info(plan->steps[k].kind)->name, inner);
    }
    return 0;
}

/* The dst Partial dims' reduction at the rank whose coordinate is 0 on them (coord): the
 * blocks of its Partial group, reduced innermost mesh dim first, into acc (numel values). */
static int reduce_partials(const interp_t *in, const dtr_spec_t *dst, const int64_t *coord,
                           int64_t numel_, double *acc) {
    int64_t count = 1;
    for (int i = 0; i < in->mdims; i++)
        if (dst->placements[i].kind == DTR_PARTIAL) count *= in->msize[i];
    double *vals = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
    const double **blocks = malloc((size_t)count * sizeof *blocks);
    if (vals == NULL || blocks == NULL) {
        free(vals);
        free(blocks);
        return -1;
    }
    int64_t pc[DTR_MAX_MESH_DIMS];
    memcpy(pc, coord, sizeof pc);
    for (int64_t q = 0; q < count; q++) {
        blocks[q] = in->ranks[position_of(in, pc)].data;
        for (int i = in->mdims - 1; i >= 0; i--) {
            if (dst->placements[i].kind != DTR_PARTIAL) continue;
            if (++pc[i] < in->msize[i]) break;
            pc[i] = 0;
        }
    }
    for (int64_t e = 0; e < numel_; e++) {
        for (int64_t q = 0; q < count; q++) vals[q] = blocks[q][e];
        int64_t left = count;
        for (int i = in->mdims - 1; i >= 0; i--)
            if (dst->placements[i].kind == DTR_PARTIAL)
                left = reduce_last_axis(vals, left, in->msize[i], dst->placements[i].op);
        acc[e] = vals[0];
    }
    free(vals);
    free(blocks);
    return 0;
}

/* Shard -> P(sum): does the rank at coord keep the element at global index g (else it must
 * hold a zero)? It keeps the elements whose source holders share its coordinates on the
 * mesh dims that become Partial (docs/semantics.md). */
static bool kept_at(const interp_t *in, const dtr_spec_t *dst, const int64_t *coord,
                    const int64_t *g) {
    int64_t lo[DTR_MAX_TENSOR_DIMS] = {0}, ext[DTR_MAX_TENSOR_DIMS];
    memcpy(ext, in->gshape, sizeof ext);
    for (int k = 0; k < DTR_MAX_MESH_DIMS; k++) /* (shard orders: by order, then mesh dim) */
        for (int i = 0; i < in->mdims; i++) {
            if (in->src[i].kind != DTR_SHARD || in->src[i].order != k) continue;
            int d = in->src[i].dim;
            for (int64_t c = 0; c < in->msize[i]; c++) {
                int64_t size, off;
                chunk_rule(ext[d], in->msize[i], c, &size, &off);
                if (g[d] < lo[d] + off || g[d] >= lo[d] + off + size) continue;
                if (dst->placements[i].kind == DTR_PARTIAL && c != coord[i]) return false;
                lo[d] += off;
                ext[d] = size;
                break;
            }
        }
    return true;
}

/* The zeros of a Shard -> P(sum) change, rank by rank. */
static int check_zeros(const interp_t *in, const dtr_spec_t *dst, char *err, size_t len) {
    bool any = false;
    for (int i = 0; i < in->mdims; i++)
        any |= in->src[i].kind == DTR_SHARD && dst->placements[i].kind == DTR_PARTIAL;
    for (int64_t p = 0; any && p < in->nranks; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0}, g[DTR_MAX_TENSOR_DIMS];
        coord_of(in, p, coord);
        dtr_layout_t l;
        dtr_spec_layout_at(dst, coord, &l);
        for (int64_t k = 0; k < l.numel; k++) {
            for (int d = 0; d < in->ndim; d++) g[d] = l.global_offset[d] + idx[d];
            if (!kept_at(in, dst, coord, g) && in->ranks[p].data[k] != 0)
                return fail(err, len,
                            "rank at position %lld, local element %lld: %.17g where the zero "
                            "fill keeps a zero",
                            (long long)p, (long long)k, in->ranks[p].data[k]);
            for (int d = in->ndim - 1; d >= 0; d--) {
                if (++idx[d] < l.local_shape[d]) break;
                idx[d] = 0;
            }
        }
    }
    return 0;
}

int interp_check(const interp_t *in, const dtr_spec_t *dst, char *err, size_t len) {
    for (int64_t p = 0; p < in->nranks; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        coord_of(in, p, coord);
        dtr_layout_t l;
        dtr_spec_layout_at(dst, coord, &l);
        if (memcmp(in->ranks[p].shape, l.local_shape, (size_t)in->ndim * sizeof(int64_t)) != 0)
            return fail(err, len, "rank at position %lld: local shape differs from the target's",
                        (long long)p);
    }
    if (check_zeros(in, dst, err, len) != 0) return -1;
    for (int64_t p = 0; p < in->nranks; p++) {
        int64_t coord[DTR_MAX_MESH_DIMS];
        coord_of(in, p, coord);
        /* Reduce over the Partial dims of dst, from the rank with coordinate 0 on them. */
        bool first = true;
        for (int i = 0; i < in->mdims; i++)
            if (dst->placements[i].kind == DTR_PARTIAL && coord[i] != 0) first = false;
        if (!first) continue;
        dtr_layout_t l;
        dtr_spec_layout_at(dst, coord, &l);
        double *acc = malloc((size_t)(l.numel > 0 ? l.numel : 1) * sizeof(double));
        if (acc == NULL || reduce_partials(in, dst, coord, l.numel, acc) != 0) {
            free(acc);
            return fail(err, len, "interp_check: out of memory");
        }
        int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
        for (int64_t k = 0; k < l.numel; k++) {
            int64_t e = 0;
            for (int d = 0; d < in->ndim; d++) e = e * in->gshape[d] + l.global_offset[d] + idx[d];
            double want = in->want != NULL ? in->want[e] : tensor_value(e);
            double got = acc[k];
            if (got != want) {
                free(acc);
                return fail(err, len,
                            "rank at position %lld, local element %lld (global %lld): %.17g, "
                            "want %.17g",
                            (long long)p, (long long)k, (long long)e, got, want);
            }
            for (int d = in->ndim - 1; d >= 0; d--) {
                if (++idx[d] < l.local_shape[d]) break;
                idx[d] = 0;
            }
        }
        free(acc);
    }
    return 0;
}

int interp_plan(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_plan_t *plan,
                uint64_t seed, char *err, size_t len) {
    interp_t *in = interp_create(src, seed);
    if (in == NULL) {
        snprintf(err, len, "interp_create: out of memory");
        return -2;
    }
    int rc = interp_run(in, plan, err, len) != 0 ? -1 : 0;
    if (rc == 0 && interp_check(in, dst, err, len) != 0) rc = -2;
    interp_destroy(in);
    return rc;
}
