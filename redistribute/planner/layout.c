/* The layout of any placements at a mesh coordinate (PyTorch's chunk rule, mesh dims
 * nesting in each tensor dim's shard order): what the builder (plan.c), the balanced reduction (balance.c) and
 * the executor compute every block from; and which elements a Shard -> P(sum) change keeps
 * (zero_fill.c plans it). */
#include <string.h>

#include "redistribute/planner/internal.h"

void dtr__ctx_init(dtr__ctx_t *ctx, const dtr_spec_t *spec, const dtr_cost_model_t *cost) {
    memset(ctx, 0, sizeof *ctx);
    ctx->mesh = spec->mesh;
    ctx->mdims = dtr_mesh_ndims(spec->mesh);
    for (int i = 0; i < ctx->mdims; i++) ctx->msize[i] = dtr_mesh_size(spec->mesh, i);
    ctx->ndim = spec->ndim;
    memcpy(ctx->shape, spec->shape, sizeof ctx->shape);
    ctx->item = dtr_dtype_info(spec->dtype)->size;
    ctx->cost = cost;
}

__int128 dtr__numel(const dtr__ctx_t *ctx, const int64_t *shape) {
    __int128 n = 1;
    for (int d = 0; d < ctx->ndim; d++) n *= shape[d];
    return n;
}

__int128 dtr__numel_except(const dtr__ctx_t *ctx, const int64_t *shape, int skip1, int skip2) {
    __int128 n = 1;
    for (int d = 0; d < ctx->ndim; d++)
        if (d != skip1 && d != skip2) n *= shape[d];
    return n;
}

__int128 dtr__overlap(const dtr__ctx_t *ctx, const int64_t *as, const int64_t *ao,
                      const int64_t *bs, const int64_t *bo) {
    __int128 n = 1;
    for (int d = 0; d < ctx->ndim; d++) {
        int64_t lo = ao[d] > bo[d] ? ao[d] : bo[d];
        int64_t hi = ao[d] + as[d] < bo[d] + bs[d] ? ao[d] + as[d] : bo[d] + bs[d];
        if (hi <= lo) return 0;
        n *= hi - lo;
    }
    return n;
}

/* One level of a tensor dim's split: the chunk rule, or a ragged shard's sizes. */
static inline void dtr__split_level(dtr_placement_t p, int64_t n, int64_t c, int64_t *shape,
                                    int64_t *offset) {
    if (p.nsizes == 0) {
        dtr__split(n, c, shape, offset);
        return;
    }
    int64_t size, off;
    dtr__split_piece(p, *shape, n, c, &size, &off);
    *offset += off;
    *shape = size;
}

void dtr__layout(const dtr__ctx_t *ctx, const dtr_placement_t *pl, const int64_t *coord,
                 int64_t *shape, int64_t *offset) {
    memcpy(shape, ctx->shape, sizeof ctx->shape);
    memset(offset, 0, sizeof ctx->shape);
    /* Every tensor dim split in mesh-dim order (no shard order: the planner's own steps
     * mostly): one pass over the mesh dims. It runs for every rank in the per-rank loops. */
    bool ordered = false;
    for (int i = 0; i < ctx->mdims; i++)
        ordered = ordered || (pl[i].kind == DTR_SHARD && pl[i].order != 0);
    if (!ordered) {
        for (int i = 0; i < ctx->mdims; i++)
            if (pl[i].kind == DTR_SHARD)
                dtr__split_level(pl[i], ctx->msize[i], coord[i], &shape[pl[i].dim],
                                 &offset[pl[i].dim]);
        return;
    }
    for (int d = 0; d < ctx->ndim; d++) {
        int dims[DTR_MAX_MESH_DIMS];
        int k = dtr__shard_seq(pl, ctx->mdims, d, dims);
        for (int q = 0; q < k; q++)
            dtr__split_level(pl[dims[q]], ctx->msize[dims[q]], coord[dims[q]], &shape[d],
                             &offset[d]);
    }
}

/* Mesh dim i shards d now: it is the last (of more than one rank) to split d. Otherwise a
 * new shard at i goes last in d's order; the canonical rule asks that no mesh dim after i
 * shards d, so that the order stays mesh-dim order. */
bool dtr__innermost(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int i, int d) {
    if (pl[i].kind == DTR_SHARD && pl[i].dim == d) {
        for (int j = 0; j < ctx->mdims; j++) {
            if (j == i || pl[j].kind != DTR_SHARD || pl[j].dim != d || ctx->msize[j] == 1)
                continue;
            if (pl[j].order > pl[i].order || (pl[j].order == pl[i].order && j > i)) return false;
        }
        return true;
    }
    for (int j = i + 1; j < ctx->mdims; j++)
        if (pl[j].kind == DTR_SHARD && pl[j].dim == d && ctx->msize[j] > 1) return false;
    return true;
}

bool dtr__bound_layouts(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                        const dtr_placement_t *dst, dtr_placement_t *cl, dtr_placement_t *tl) {
    bool reduces = false;
    memset(cl, 0, DTR_MAX_MESH_DIMS * sizeof *cl);
    memset(tl, 0, DTR_MAX_MESH_DIMS * sizeof *tl);
    for (int i = 0; i < ctx->mdims; i++) {
        cl[i] = src[i].kind == DTR_SHARD ? src[i] : dtr_replicate();
        tl[i] = dst[i].kind == DTR_SHARD ? dst[i] : dtr_replicate();
        if (src[i].kind == DTR_PARTIAL && dst[i].kind != DTR_PARTIAL && ctx->msize[i] > 1)
            reduces = true;
    }
    return reduces;
}

bool dtr__next_coord(const dtr__ctx_t *ctx, const bool *vary, int64_t *coord) {
    for (int i = ctx->mdims - 1; i >= 0; i--) {
        if (!vary[i]) continue;
        if (++coord[i] < ctx->msize[i]) return true;
        coord[i] = 0;
    }
    return false;
}

/* ---- Shard -> P(sum) (zero_fill.c) ---- */

/* (On a mesh dim of one rank the chunk is the whole: a relabel, not a zero fill.) */
unsigned dtr__zero_fill_dims(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst) {
    unsigned e = 0;
    for (int i = 0; i < ctx->mdims; i++)
        if (src[i].kind == DTR_SHARD && dst[i].kind == DTR_PARTIAL &&
            dst[i].op == DTR_REDUCE_SUM && ctx->msize[i] > 1)
            e |= 1u << i;
    return e;
}

/* Elements of [lo, lo+len) of tensor dim d that the rank at coord keeps: the source's
 * chunks of d, down to its innermost zero-filling mesh dim, that the rank's coordinates on
 * the zero-filling mesh dims select (every coordinate of the others that stay Shard). */
static int64_t dtr__kept_len(const dtr__ctx_t *ctx, const dtr_placement_t *src, unsigned e,
                             int d, const int64_t *coord, int64_t lo, int64_t len) {
    int dims[DTR_MAX_MESH_DIMS];
    int k = dtr__shard_seq(src, ctx->mdims, d, dims); /* (in d's shard order) */
    while (k > 0 && !(e >> dims[k - 1] & 1)) k--;
    if (k == 0) return len;
    int64_t c[DTR_MAX_MESH_DIMS];
    for (int q = 0; q < k; q++) c[q] = e >> dims[q] & 1 ? coord[dims[q]] : 0;
    int64_t kept = 0;
    for (;;) {
        int64_t off = 0, size = ctx->shape[d];
        for (int q = 0; q < k; q++) {
            int64_t o, s;
            dtr_chunk(size, ctx->msize[dims[q]], c[q], &s, &o);
            off += o;
            size = s;
        }
        int64_t a = off > lo ? off : lo, b = off + size < lo + len ? off + size : lo + len;
        if (b > a) kept += b - a;
        int q = k - 1;
        for (; q >= 0; q--) {
            if (e >> dims[q] & 1) continue;
            if (++c[q] < ctx->msize[dims[q]]) break;
            c[q] = 0;
        }
        if (q < 0) return kept;
    }
}

__int128 dtr__zero_fill_kept(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, const int64_t *coord,
                             const int64_t *shape, const int64_t *offset) {
    unsigned e = dtr__zero_fill_dims(ctx, src, dst);
    if (e == 0) return -1;
    __int128 n = 1;
    for (int d = 0; d < ctx->ndim; d++)
        n *= dtr__kept_len(ctx, src, e, d, coord, offset[d], shape[d]);
    return n;
}
