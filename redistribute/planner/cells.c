/* Sums over the nested chunks of one tensor dim (dtr__cells_of, internal.h): what the
 * cells a set of mesh dims' coordinates reach share with an interval, without visiting
 * every cell. Used by the exchange's per-rank sums (plan.c) and its node figures (nodes.c). */
#include "redistribute/planner/internal.h"

/* Sums over a block nesting of tensor dim d (mesh dims `dims`, in its shard order, from
 * level q on): the cells reached with every `sub` dim's coordinate taken (the others at
 * coord), against [lo, hi): the elements they share with it (*sum) and how many of them
 * share any (*hits). A cell inside [lo, hi) counts whole, one outside not at all, so only
 * the cells crossing lo or hi are split: O(levels x mesh size), not O(cells). */
typedef struct {
    const dtr__ctx_t *ctx;
    const int *dims;
    int k;
    const bool *sub;
    const int64_t *coord;
    int64_t lo, hi;
    /* Without hits: the levels from sub_from on all sum over their coordinates, so a block
     * there is tiled by its cells and its sum is its overlap with [lo, hi). */
    bool hits;
    int sub_from;
} dtr__cells_t;

/* A cell of length len at level q, inside [lo, hi): its elements and nonempty leaves. */
static void dtr__cells_inside(const dtr__cells_t *c, int q, int64_t len, __int128 *sum,
                              __int128 *hits) {
    __int128 count = 1;
    for (; q < c->k && len > 0; q++) {
        int i = c->dims[q];
        int64_t n = c->ctx->msize[i], chunk = len / n + (len % n != 0);
        if (!c->sub[i]) { /* one child: the coordinate's chunk */
            int64_t start = chunk * c->coord[i];
            len = start >= len ? 0 : (start + chunk < len ? chunk : len - start);
            continue;
        }
        /* full chunks, then one shorter one: both the same below when it is also full */
        int64_t full = len / chunk, rest = len - full * chunk;
        if (rest > 0) {
            __int128 s2, h2;
            dtr__cells_inside(c, q + 1, rest, &s2, &h2);
            __int128 s1, h1;
            dtr__cells_inside(c, q + 1, chunk, &s1, &h1);
            *sum = count * (full * s1 + s2);
            *hits = count * (full * h1 + h2);
            return;
        }
        count *= full;
        len = chunk;
    }
    *sum = len > 0 ? count * len : 0;
    *hits = len > 0 ? count : 0;
}

static void dtr__cells(const dtr__cells_t *c, int q, int64_t off, int64_t len, __int128 *sum,
                       __int128 *hits) {
    *sum = *hits = 0;
    if (len == 0 || off >= c->hi || off + len <= c->lo) return;
    if (q >= c->sub_from && !(off >= c->lo && off + len <= c->hi)) {
        /* Every level below sums: the block is tiled by its cells. The sum is the overlap;
         * hits, when the leaf holding the overlap's start holds all of it, is one. */
        int64_t a = off > c->lo ? off : c->lo, b = off + len < c->hi ? off + len : c->hi;
        *sum = b - a;
        if (!c->hits) return;
        /* the leaves from a's on, while a few reach b (a short interval meets one or two) */
        for (int64_t at = a, count = 1; count <= 3; count++) {
            int64_t lo = off, l = len;
            for (int r = q; r < c->k; r++) {
                int64_t n = c->ctx->msize[c->dims[r]], chunk = l / n + (l % n != 0);
                int64_t x = (at - lo) / chunk;
                lo += x * chunk;
                l = l - x * chunk < chunk ? l - x * chunk : chunk;
            }
            if (lo + l >= b) {
                *hits = count;
                return;
            }
            at = lo + l; /* (the next leaf: nonempty, as the block's leaves tile it) */
        }
        *sum = 0;
    }
    if (off >= c->lo && off + len <= c->hi) {
        dtr__cells_inside(c, q, len, sum, hits);
        return;
    }
    if (q == c->k) {
        int64_t a = off > c->lo ? off : c->lo, b = off + len < c->hi ? off + len : c->hi;
        *sum = b - a;
        *hits = 1;
        return;
    }
    int i = c->dims[q];
    int64_t n = c->ctx->msize[i], chunk = len / n + (len % n != 0);
    if (!c->sub[i]) { /* one child: the coordinate's chunk (the checks above place it) */
        int64_t start = chunk * c->coord[i];
        if (start < len)
            dtr__cells(c, q + 1, off + start, start + chunk < len ? chunk : len - start, sum, hits);
        return;
    }
    int64_t nonempty = (len + chunk - 1) / chunk; /* chunks x < this hold elements */
    int64_t from = c->sub[i] ? 0 : c->coord[i], to = c->sub[i] ? nonempty : c->coord[i] + 1;
    if (to > nonempty) to = nonempty;
    /* The chunks holding lo and hi - 1 are split further; those between lie inside. */
    int64_t xlo = c->lo > off ? (c->lo - off) / chunk : 0;
    int64_t xhi = (c->hi - 1 - off) / chunk;
    if (from < xlo) from = xlo; /* (chunks before lo or after hi - 1 share nothing) */
    if (to > xhi + 1) to = xhi + 1;
    for (int64_t x = from; x < to; x++) {
        if (x > xlo && x < xhi && c->sub[i]) { /* the run inside, at once */
            int64_t last = xhi < to ? xhi : to; /* [x, last) */
            int64_t whole = last, shorter = 0;  /* chunk x' is whole when (x'+1)chunk <= len */
            if (last * chunk > len) {
                whole = last - 1;
                shorter = 1;
            }
            __int128 s2, h2;
            if (whole > x) {
                dtr__cells_inside(c, q + 1, chunk, &s2, &h2);
                *sum += (whole - x) * s2;
                *hits += (whole - x) * h2;
            }
            if (shorter) {
                dtr__cells_inside(c, q + 1, len - (last - 1) * chunk, &s2, &h2);
                *sum += s2;
                *hits += h2;
            }
            x = last - 1;
            continue;
        }
        int64_t start = chunk * x;
        __int128 s2, h2;
        dtr__cells(c, q + 1, off + start, start + chunk < len ? chunk : len - start, &s2, &h2);
        *sum += s2;
        *hits += h2;
    }
}

/* (The general walk alone: the per-rank loops' reference for the tables' quicker paths.) */
static void dtr__cells_seq(const dtr__ctx_t *ctx, const int *dims, int k, int d, const bool *sub,
                           const int64_t *coord, int64_t lo, int64_t len, __int128 *sum,
                           __int128 *hits) {
    dtr__cells_t c = {ctx, dims, k, sub, coord, lo, lo + len, true, k + 1};
    *sum = *hits = 0;
    if (len > 0) dtr__cells(&c, 0, 0, ctx->shape[d], sum, hits);
}

void dtr__cells_below(const dtr__ctx_t *ctx, const int *dims, int k, int q, const bool *sub,
                      const int64_t *coord, int64_t off, int64_t blen, int64_t lo, int64_t len,
                      __int128 *sum, __int128 *hits) {
    dtr__cells_t c = {ctx, dims, k, sub, coord, lo, lo + len, hits != NULL, k};
    while (c.sub_from > 0 && sub[dims[c.sub_from - 1]]) c.sub_from--;
    if (c.sub_from == k) c.sub_from = k + 1; /* (a leaf: the checks below count it) */
    __int128 unused;
    if (hits == NULL) hits = &unused;
    if (q == k - 1 && sub[dims[q]]) { /* one level of chunks, which tile the block */
        int64_t n = ctx->msize[dims[q]], chunk = blen / n + (blen % n != 0);
        int64_t a = off > lo ? off : lo, b = off + blen < lo + len ? off + blen : lo + len;
        *sum = *hits = 0;
        if (b > a) {
            *sum = b - a;
            *hits = (b - 1 - off) / chunk - (a - off) / chunk + 1;
        }
        return;
    }
    *sum = *hits = 0;
    if (len > 0) dtr__cells(&c, q, off, blen, sum, hits);
}

/* The sums of dtr__cells for placements pl on tensor dim d, from the whole dim. */
void dtr__cells_of(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int d,
                          const bool *sub, const int64_t *coord, int64_t lo, int64_t len,
                          __int128 *sum, __int128 *hits) {
    int dims[DTR_MAX_MESH_DIMS];
    int k = dtr__shard_seq(pl, ctx->mdims, d, dims);
    dtr__cells_seq(ctx, dims, k, d, sub, coord, lo, len, sum, hits);
}
