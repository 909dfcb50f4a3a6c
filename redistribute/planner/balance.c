/*
 * The balanced reduction of a reduce_exchange step: P(op) -> S(d) on mesh dim i while a
 * later mesh dim (an "inner" one) already shards d, so the members of i's group do not end
 * up with pieces of the block they reduce (the canonical reduce-scatter is not valid there).
 *
 * Terms. The group g: the n ranks that differ only on mesh dim i; they hold contributions to
 * one block C (i is Partial "before"). The targets g serves: the ranks whose coordinates
 * equal g's except on i and on the inner mesh dims that shard d; their "after" blocks T(t)
 * are disjoint, and T(t) ∩ C is t's piece from g. A piece is "home" when t is a member of g
 * (t differs from g only on i), "foreign" otherwise.
 *
 * The step: every member reduces its own home piece in full (it receives the other n-1
 * contributions of each element), and the foreign pieces, laid end to end in the order of
 * their targets' coordinates (each piece row-major), are cut into n consecutive shares, one
 * per member; a member reduces its share and sends each part to the part's target. Member
 * a then receives (n-1)(h_a + x_a) + d_a elements: h_a its home piece, x_a its share, d_a
 * the rest of its own target delivered by the other groups. The shares fill the members up
 * to one level in member order: the least level L >= max_a base_a, base_a = (n-1)h_a + d_a,
 * at which sum_a floor((L - base_a)/(n-1)) >= F, the foreign elements.
 *
 * Phase 1 is a reduce-scatter-v over i's group (member a's count h_a + x_a); phase 2 an
 * all-to-all-v over the mesh. Everything here is a function of the coordinates, the same
 * on every rank, so planner, executor and tests agree on who sends what.
 */
#include <string.h>

#include "redistribute/planner/internal.h"

static void dtr__meet_box(int nd, const int64_t *as, const int64_t *ao, const int64_t *bs,
                          const int64_t *bo, int64_t *lo, int64_t *ext, __int128 *count) {
    __int128 c = 1;
    for (int d = 0; d < nd; d++) {
        int64_t x0 = ao[d] > bo[d] ? ao[d] : bo[d];
        int64_t x1 = ao[d] + as[d] < bo[d] + bs[d] ? ao[d] + as[d] : bo[d] + bs[d];
        ext[d] = x1 > x0 ? x1 - x0 : 0;
        lo[d] = x0;
        c *= ext[d];
    }
    *count = c;
}

static __int128 dtr__box_numel(int nd, const int64_t *shape) {
    __int128 c = 1;
    for (int d = 0; d < nd; d++) c *= shape[d];
    return c;
}

bool dtr__balance_applies(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                          const dtr_placement_t *after, int i) {
    if (i < 0 || i >= ctx->mdims || ctx->msize[i] < 2) return false;
    if (before[i].kind != DTR_PARTIAL || after[i].kind != DTR_SHARD) return false;
    for (int j = 0; j < ctx->mdims; j++)
        if (j != i && !dtr_placement_equal(before[j], after[j])) return false;
    return !dtr__innermost(ctx, before, i, after[i].dim);
}

/* Member a's target block along d = after[i].dim: a's chunk at mesh dim i's level, then
 * the levels below. */
static void dtr__member_d(const dtr__balance_t *b, int64_t a, int64_t *len_out, int64_t *off_out) {
    int64_t len = b->above_len, start = b->chunk_i * a, off = b->above_off;
    if (start < len) {
        int which = start + b->chunk_i <= len ? 0 : 1;
        off += start + b->inner_off[which];
        len = b->inner_len[which];
    } else {
        off += len;
        len = 0;
    }
    *len_out = len;
    *off_out = off;
}

void dtr__balance_target(const dtr__balance_t *b, int64_t a, int64_t *shape, int64_t *offset) {
    int d = b->after[b->i].dim;
    memcpy(shape, b->ts0, sizeof b->ts0);
    memcpy(offset, b->to0, sizeof b->to0);
    dtr__member_d(b, a, &shape[d], &offset[d]);
}

/* Member a's target block, its home piece (box in global indices) and their sizes. */
static void dtr__member(const dtr__balance_t *b, int64_t a, __int128 *target, __int128 *home) {
    if (a < b->ncached) {
        *target = b->target[a];
        *home = b->home[a];
        return;
    }
    int64_t len, off;
    dtr__member_d(b, a, &len, &off);
    int d = b->after[b->i].dim;
    int64_t lo = off > b->co[d] ? off : b->co[d];
    int64_t hi = off + len < b->co[d] + b->cs[d] ? off + len : b->co[d] + b->cs[d];
    *target = b->rest_target * len;
    *home = hi > lo ? b->rest_home * (hi - lo) : 0;
}

/* Member 0's target, split into d's block above mesh dim i's level and the other tensor
 * dims' factors, and the levels below i for either chunk length (dtr__member). */
static void dtr__member_init(dtr__balance_t *b) {
    const dtr__ctx_t *ctx = b->ctx;
    int d = b->after[b->i].dim;
    int64_t *ts = b->ts0, *to = b->to0;
    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
    __int128 unused;
    dtr__layout(ctx, b->after, b->g, ts, to);
    dtr__meet_box(ctx->ndim, ts, to, b->cs, b->co, lo, ext, &unused);
    b->rest_target = b->rest_home = 1;
    for (int e = 0; e < ctx->ndim; e++) {
        if (e == d) continue;
        b->rest_target *= ts[e];
        b->rest_home *= ext[e];
    }
    int seq[DTR_MAX_MESH_DIMS], k = dtr__shard_seq(b->after, ctx->mdims, d, seq), l = 0;
    b->above_len = ctx->shape[d];
    b->above_off = 0;
    for (; seq[l] != b->i; l++) dtr__split(ctx->msize[seq[l]], b->g[seq[l]], &b->above_len, &b->above_off);
    int64_t len = b->above_len;
    b->chunk_i = len / b->n + (len % b->n != 0);
    int64_t full = len / (b->chunk_i > 0 ? b->chunk_i : 1);
    int64_t lens[2] = {b->chunk_i, len - full * b->chunk_i};
    for (int w = 0; w < 2; w++) {
        b->inner_len[w] = lens[w];
        b->inner_off[w] = 0;
        for (int q = l + 1; q < k; q++)
            dtr__split(ctx->msize[seq[q]], b->g[seq[q]], &b->inner_len[w], &b->inner_off[w]);
    }
}

void dtr__balance_member(const dtr__balance_t *b, int64_t a, __int128 *home, __int128 *delivered) {
    __int128 t;
    dtr__member(b, a, &t, home);
    *delivered = t - *home;
}

void dtr__pieces_begin(const dtr__balance_t *b, dtr__piece_iter_t *it) {
    memset(it, 0, sizeof *it);
    memcpy(it->coord, b->g, sizeof it->coord);
    for (int j = 0; j < b->ctx->mdims; j++)
        if (b->serve[j]) it->coord[j] = 0;
    it->started = false;
}

bool dtr__pieces_next(const dtr__balance_t *b, dtr__piece_iter_t *it) {
    const dtr__ctx_t *ctx = b->ctx;
    for (;;) {
        if (it->started) {
            int j = ctx->mdims - 1;
            for (; j >= 0; j--) {
                if (!b->serve[j]) continue;
                if (++it->coord[j] < ctx->msize[j]) break;
                it->coord[j] = 0;
            }
            if (j < 0) return false;
            it->pos += it->count;
        }
        it->started = true;
        bool home = true;
        for (int j = 0; j < ctx->mdims; j++)
            if (j != b->i && it->coord[j] != b->g[j]) home = false;
        if (home) {
            it->count = 0;
            continue;
        }
        int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS];
        dtr__layout(ctx, b->after, it->coord, ts, to);
        dtr__meet_box(ctx->ndim, ts, to, b->cs, b->co, it->lo, it->ext, &it->count);
        for (int d = 0; d < ctx->ndim; d++) it->tlo[d] = it->lo[d] - to[d];
        for (int d = 0; d < ctx->ndim; d++) it->lo[d] -= b->co[d];
        if (it->count > 0) return true;
    }
}

bool dtr__pieces_in_share(const dtr__balance_t *b, dtr__piece_iter_t *it, __int128 start,
                          __int128 count, int64_t *u, int64_t *v) {
    while (dtr__pieces_next(b, it)) {
        __int128 lo = it->pos > start ? it->pos : start;
        __int128 hi = it->pos + it->count < start + count ? it->pos + it->count : start + count;
        if (hi <= lo) continue;
        *u = (int64_t)(lo - it->pos);
        *v = (int64_t)(hi - it->pos);
        return true;
    }
    return false;
}

/* Elements member a may take at level L (foreign share), or -1 if its base is above L. */
static __int128 dtr__cap(__int128 L, __int128 base, int64_t n) {
    return L < base ? -1 : (L - base) / (n - 1);
}

/* Sizes are far below 2^63 in practice: divide in 64 bits when they fit. */
static inline __int128 dtr__div(__int128 a, int64_t n) {
    return a >= 0 && a <= INT64_MAX ? (__int128)((int64_t)a / n) : a / n;
}

/* The members by kind: the distinct (target, home) sizes balance_init found, or each
 * member where there were too many; kind a's sizes and how many members have them. */
static int64_t dtr__member_kinds(const dtr__balance_t *b) { return b->ndistinct >= 0 ? b->ndistinct : b->n; }
static int64_t dtr__kind(const dtr__balance_t *b, int64_t a, __int128 *t, __int128 *h) {
    if (b->ndistinct < 0) {
        dtr__member(b, a, t, h);
        return 1;
    }
    *t = b->dtarget[a];
    *h = b->dhome[a];
    return b->dcount[a];
}

/* What the members can take at level L, summed until it reaches need: their foreign shares
 * (the step's level, is_bound false) or the elements each can reduce under the bound's
 * model (is_bound true). Over the distinct member sizes where balance_init found few. */
static __int128 dtr__room(const dtr__balance_t *b, bool is_bound, __int128 L, __int128 need) {
    int64_t n = b->n;
    __int128 room = 0;
    int64_t count = dtr__member_kinds(b);
    for (int64_t a = 0; a < count && room < need; a++) {
        __int128 t, h;
        int64_t times = dtr__kind(b, a, &t, &h);
        __int128 z;
        if (!is_bound) {
            /* (balance_init searches from the largest base up: L >= base) */
            __int128 base = (n - 1) * h + (t - h);
            z = L < base ? 0 : dtr__div(L - base, n - 1);
        } else if (n == 2) { /* the largest z with (n-1)z + t - min(h, z) <= L */
            z = h + (L - t);
        } else {
            z = dtr__div(L - t, n - 2);
            if (z >= h) z = dtr__div(L - t + h, n - 1);
        }
        room += times * z;
    }
    return room;
}

/* The least L in [lo, hi] with room(L) >= need, given room(hi) >= need and that no L below
 * from (<= the answer) has it: from there in doubling steps of n, then halving, so that
 * a group costs O(log) sums instead of O(log |C|). */
static __int128 dtr__least_level(const dtr__balance_t *b, bool is_bound, __int128 lo,
                                 __int128 hi, __int128 from, __int128 need) {
    if (from > lo) lo = from;
    if (lo > hi) lo = hi;
    for (__int128 step = b->n; lo < hi; step *= 2) {
        __int128 p = hi - lo > step ? lo + step : hi;
        if (dtr__room(b, is_bound, p, need) >= need) {
            hi = p;
            break;
        }
        lo = p + 1;
    }
    while (lo < hi) {
        __int128 mid = lo + (hi - lo) / 2;
        if (dtr__room(b, is_bound, mid, need) >= need)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Adds a member's sizes to the distinct ones (ndistinct -1 once they are too many). */
static void dtr__distinct_add(dtr__balance_t *b, __int128 t, __int128 h) {
    if (b->ndistinct < 0) return;
    for (int k = 0; k < b->ndistinct; k++)
        if (b->dtarget[k] == t && b->dhome[k] == h) {
            b->dcount[k]++;
            return;
        }
    if (b->ndistinct == DTR__BALANCE_DISTINCT) {
        b->ndistinct = -1;
        return;
    }
    b->dtarget[b->ndistinct] = t;
    b->dhome[b->ndistinct] = h;
    b->dcount[b->ndistinct++] = 1;
}

void dtr__balance_init(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                       const dtr_placement_t *after, int i, const int64_t *coord,
                       dtr__balance_t *b) {
    /* (not the whole struct: its member caches are large, filled below, and read only up to
     * ncached and ndistinct) */
    memset(b->g, 0, sizeof b->g);
    memset(b->serve, 0, sizeof b->serve);
    b->ncached = 0;
    b->ndistinct = 0;
    b->ctx = ctx;
    b->before = before;
    b->after = after;
    b->i = i;
    b->n = ctx->msize[i];
    memcpy(b->g, coord, (size_t)ctx->mdims * sizeof *coord);
    b->g[i] = 0;
    int d = after[i].dim;
    for (int j = 0; j < ctx->mdims; j++)
        b->serve[j] = j == i || (j > i && before[j].kind == DTR_SHARD && before[j].dim == d &&
                                 ctx->msize[j] > 1);
    dtr__layout(ctx, before, b->g, b->cs, b->co);
    dtr__member_init(b);
    /* The targets g serves tile C (they split the same outer block of d finer, and agree
     * with C on every other tensor dim), so the foreign pieces are C less the home pieces. */
    __int128 top = 0, bases = 0;
    b->foreign = dtr__box_numel(ctx->ndim, b->cs);
    for (int64_t a = 0; a < b->n; a++) {
        __int128 t, h;
        dtr__member(b, a, &t, &h);
        if (a < DTR__BALANCE_CACHE) {
            b->target[a] = t;
            b->home[a] = h;
            b->ncached = a + 1;
        }
        dtr__distinct_add(b, t, h);
        b->foreign -= h;
        __int128 base = (b->n - 1) * h + (t - h);
        bases += base;
        if (base > top) top = base;
    }
    /* The least level at which the members' caps hold the foreign elements. Their caps
     * add up to at most (nL - bases)/(n-1), so it is not below ((n-1)F + bases)/n. */
    b->level = dtr__least_level(b, false, top, top + (b->n - 1) * b->foreign,
                                ((b->n - 1) * b->foreign + bases) / b->n, b->foreign);
}

__int128 dtr__balance_next_share(const dtr__balance_t *b, int64_t m, __int128 at) {
    __int128 h, dl;
    dtr__balance_member(b, m, &h, &dl);
    __int128 c = dtr__cap(b->level, (b->n - 1) * h + dl, b->n);
    if (c < 0) c = 0;
    return c > b->foreign - at ? b->foreign - at : c;
}

void dtr__balance_share(const dtr__balance_t *b, int64_t a, __int128 *start, __int128 *count) {
    __int128 at = 0;
    for (int64_t m = 0; m < a; m++) at += dtr__balance_next_share(b, m, at);
    *start = at;
    *count = dtr__balance_next_share(b, a, at);
}

/* Where a target's piece sits in group g's foreign sequence (and its size); false if g
 * holds none of it or it is home there. */
bool dtr__balance_find(const dtr__balance_t *b, const int64_t *target, __int128 *pos,
                       __int128 *count, int64_t *lo, int64_t *ext, int64_t *tlo) {
    dtr__piece_iter_t it;
    dtr__pieces_begin(b, &it);
    while (dtr__pieces_next(b, &it)) {
        if (memcmp(it.coord, target, (size_t)b->ctx->mdims * sizeof *target) != 0) continue;
        *pos = it.pos;
        *count = it.count;
        memcpy(lo, it.lo, sizeof it.lo);
        memcpy(ext, it.ext, sizeof it.ext);
        memcpy(tlo, it.tlo, sizeof it.tlo);
        return true;
    }
    return false;
}

/*
 * The bound under the model of the step (lower_bound's derivation in plan.c): each element
 * of C is reduced at one member, which receives the other n-1 contributions; every element
 * of a member's target that it did not reduce itself arrives once. Member a reducing z
 * elements receives at least (n-1)z + |T(a)| - min(h_a, z); the group must reduce |C|. The
 * least level L at which the members' largest z under L add up to |C| bounds the busiest
 * member. (Without the step's rule that home pieces are reduced at home, so it holds for any
 * assignment; where that rule costs nothing, as on even shapes, the step meets it.)
 */
__int128 dtr__balance_bound(const dtr__balance_t *b) {
    int64_t n = b->n;
    __int128 need = b->foreign, top = 0, targets = 0, homes = 0;
    int64_t count = dtr__member_kinds(b);
    for (int64_t a = 0; a < count; a++) {
        __int128 t, h;
        int64_t times = dtr__kind(b, a, &t, &h);
        need += times * h;
        targets += times * t;
        homes += times * h;
        if (t > top) top = t;
    }
    /* Member a reduces at most (L - t_a + h_a)/(n-1) at level L, so the level is not below
     * ((n-1)|C| + targets - homes)/n. */
    return dtr__least_level(b, true, top, top + (n - 1) * need,
                            ((n - 1) * need + targets - homes) / n, need);
}
