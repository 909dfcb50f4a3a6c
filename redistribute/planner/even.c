/*
 * Figures over every rank without visiting every rank, on even layouts: where each tensor
 * dim splits exactly at every level of its shard order, every rank's block has one shape,
 * and its offset along tensor dim d is sum_i coord[i] * w[d][i] (w: the chunk length at the
 * level where mesh dim i splits d). What differs between ranks is then how blocks of two
 * layouts sit against each other, a few linear forms of the coordinates, whose distinct
 * values classes.c finds in about the sum of the mesh dims' sizes.
 *
 * Each function gives exactly what visiting every rank gives (plan.c's loops, kept for the
 * layouts that are not even); tests/redistribute/planner/test_plan_classes.c compares the two on
 * random changes.
 */
#include <string.h>

#include "redistribute/planner/internal.h"

bool dtr__even_off = false;

#define DTR__CLASSES_MAX (1 << 15)

typedef struct {
    int64_t w[DTR_MAX_TENSOR_DIMS][DTR_MAX_MESH_DIMS]; /* offset weights */
    int64_t len[DTR_MAX_TENSOR_DIMS];                   /* block length */
    __int128 numel;
} dtr__grid_t;

static bool dtr__grid(const dtr__ctx_t *ctx, const dtr_placement_t *pl, dtr__grid_t *g) {
    memset(g, 0, sizeof *g);
    g->numel = 1;
    for (int d = 0; d < ctx->ndim; d++) {
        int dims[DTR_MAX_MESH_DIMS];
        int k = dtr__shard_seq(pl, ctx->mdims, d, dims);
        int64_t l = ctx->shape[d];
        for (int q = 0; q < k; q++) {
            int64_t n = ctx->msize[dims[q]];
            if (l % n != 0) return false;
            l /= n;
            g->w[d][dims[q]] = l;
        }
        g->len[d] = l;
        g->numel *= l;
    }
    return true;
}

bool dtr__even(const dtr__ctx_t *ctx, const dtr_placement_t *pl) {
    dtr__grid_t g;
    return !dtr__even_off && dtr__grid(ctx, pl, &g);
}

/* Elements [x, x+la) and [0, lb) share. */
static int64_t dtr__meet_at(int64_t x, int64_t la, int64_t lb) {
    int64_t lo = x > 0 ? x : 0, hi = x + la < lb ? x + la : lb;
    return hi > lo ? hi - lo : 0;
}

/* Form x_d: a's offset less b's along d, windowed where the blocks meet. */
static void dtr__meet_form(const dtr__ctx_t *ctx, const dtr__grid_t *a, const dtr__grid_t *b, int d,
                           bool kill, dtr__form_t *f) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < ctx->mdims; i++) f->w[i] = a->w[d][i] - b->w[d][i];
    f->windowed = true;
    f->kill = kill;
    f->lo = 1 - a->len[d];
    f->hi = b->len[d] - 1;
    /* one block inside the other: they share the smaller whole */
    f->plateau = a->len[d] > 0 && b->len[d] > 0;
    int64_t slack = b->len[d] - a->len[d];
    f->plo = slack < 0 ? slack : 0;
    f->phi = slack > 0 ? slack : 0;
}

static int64_t dtr__meet_value(int64_t x, int64_t la, int64_t lb) {
    if (x == DTR__DEAD) return 0;
    if (x == DTR__PLATEAU) return la < lb ? la : lb;
    return dtr__meet_at(x, la, lb);
}

/* The product of the meets of forms [first, first+ndim) of state v (DEAD: 0). */
static __int128 dtr__self(const dtr__ctx_t *ctx, const dtr__grid_t *a, const dtr__grid_t *b,
                          const int64_t *v) {
    __int128 self = 1;
    for (int d = 0; d < ctx->ndim; d++)
        self *= dtr__meet_value(v[d], a->len[d], b->len[d]);
    return self;
}

/* The least (or largest) number of elements a rank's a-block shares with its b-block. */
static bool dtr__self_extreme(const dtr__ctx_t *ctx, const dtr__grid_t *a, const dtr__grid_t *b,
                              bool largest, __int128 *out) {
    dtr__classes_t cl = {.nforms = ctx->ndim};
    for (int d = 0; d < ctx->ndim; d++) dtr__meet_form(ctx, a, b, d, largest, &cl.form[d]);
    if (!dtr__classes_run(ctx, &cl, DTR__CLASSES_MAX)) return false;
    __int128 best = largest ? 0 : -1;
    for (int64_t k = 0; k < cl.n; k++) {
        __int128 s = dtr__self(ctx, a, b, dtr__classes_state(&cl, k));
        if (largest ? s > best : best < 0 || s < best) best = s;
    }
    dtr__classes_free(&cl);
    *out = best < 0 ? 0 : best;
    return true;
}

/* Sum over the coordinates of the sub dims of the elements that [y + sum q_j w_j, + la)
 * shares with [0, lb): the cells are disjoint (the sub dims split d at different levels),
 * so only cells crossing 0 or lb are split further. */
static __int128 dtr__cover(const int64_t *w, const int64_t *n, int k, int j, int64_t y,
                           int64_t la, int64_t lb) {
    if (j == k) return dtr__meet_at(y, la, lb);
    int64_t span = la;
    __int128 count = 1;
    for (int q = j; q < k; q++) {
        span += (n[q] - 1) * w[q];
        count *= n[q];
    }
    if (y >= lb || y + span <= 0) return 0;
    if (y >= 0 && y + span <= lb) return count * la;
    __int128 sum = 0;
    for (int64_t c = 0; c < n[j]; c++) sum += dtr__cover(w, n, k, j + 1, y + c * w[j], la, lb);
    return sum;
}

/* The most a rank sends in an exchange from B to A. */
static bool dtr__exchange_send(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__grid_t *A,
                               const dtr__grid_t *B, __int128 *out) {
    /* send = K prod_d SS_d - self: SS_d sums what the peers' targets (over the sub dims,
     * those that shard d after and shard something before) take of my source block; the
     * after-dims of d that shard nothing before are fixed at my coordinates (form y_d). */
    bool vary[DTR_MAX_MESH_DIMS];
    __int128 K = 1;
    for (int i = 0; i < ctx->mdims; i++) {
        vary[i] = s->before[i].kind == DTR_SHARD;
        if (vary[i] && s->after[i].kind != DTR_SHARD) K *= ctx->msize[i];
    }
    dtr__classes_t cl = {.nforms = 2 * ctx->ndim};
    int64_t sw[DTR_MAX_TENSOR_DIMS][DTR_MAX_MESH_DIMS], sn[DTR_MAX_TENSOR_DIMS][DTR_MAX_MESH_DIMS];
    int sk[DTR_MAX_TENSOR_DIMS];
    bool fixed[DTR_MAX_TENSOR_DIMS], tiled[DTR_MAX_TENSOR_DIMS];
    int64_t spans[DTR_MAX_TENSOR_DIMS];
    __int128 flat[DTR_MAX_TENSOR_DIMS] = {0}; /* SS_d on the plateau (not tiled) */
    for (int d = 0; d < ctx->ndim; d++) {
        dtr__meet_form(ctx, A, B, d, false, &cl.form[d]);
        dtr__form_t *f = &cl.form[ctx->ndim + d];
        memset(f, 0, sizeof *f);
        int dims[DTR_MAX_MESH_DIMS];
        int k = dtr__shard_seq(s->after, ctx->mdims, d, dims);
        sk[d] = 0;
        fixed[d] = false;
        tiled[d] = true; /* no fixed dim inside a sub dim: the cells tile [y, y+span) */
        int64_t span = A->len[d];
        for (int q = 0; q < k; q++) {
            int i = dims[q];
            if (ctx->msize[i] == 1) continue;
            if (vary[i]) {
                sw[d][sk[d]] = A->w[d][i];
                sn[d][sk[d]++] = ctx->msize[i];
                span += (ctx->msize[i] - 1) * A->w[d][i];
            } else {
                f->w[i] = A->w[d][i];
                fixed[d] = true;
                tiled[d] = tiled[d] && sk[d] == 0;
            }
        }
        spans[d] = span;
        for (int i = 0; i < ctx->mdims; i++) f->w[i] -= B->w[d][i];
        /* (all after-dims of d sub: the peers' targets tile d, SS_d = |my source| on d) */
        f->windowed = fixed[d];
        f->kill = true;
        f->lo = 1 - span;
        f->hi = B->len[d] - 1;
        if (tiled[d]) { /* SS_d = the meet of [y, y+span) with my block, a trapezoid */
            int64_t slack = B->len[d] - span;
            f->plateau = true;
            f->plo = slack < 0 ? slack : 0;
            f->phi = slack > 0 ? slack : 0;
        } else {
            /* Where the outermost sub dim's run of cells overhangs my block on both sides,
             * y in [lb - n0 w0, w0 - (the rest's span)], SS_d is periodic in y with its
             * weight w0; and constant there when my block is whole periods long. */
            int64_t w0 = sk[d] > 0 ? sw[d][0] : 1, n0 = sk[d] > 0 ? sn[d][0] : 1;
            int64_t rlo = B->len[d] - n0 * w0, rhi = w0 - (span - (n0 - 1) * w0);
            __int128 inner = A->len[d];
            for (int q = 1; q < sk[d]; q++) inner *= sn[d][q];
            if (sk[d] > 0 && B->len[d] % w0 == 0 && rlo <= rhi) {
                f->plateau = true;
                f->plo = rlo;
                f->phi = rhi;
                flat[d] = B->len[d] / w0 * inner;
            } else { /* every cell inside my source block */
                f->plateau = span <= B->len[d];
                f->plo = 0;
                f->phi = B->len[d] - span;
                flat[d] = n0 * inner;
                f->period = sk[d] > 0 ? w0 : 0;
                f->rlo = rlo;
                f->rhi = rhi;
            }
        }
        if (!fixed[d]) memset(f->w, 0, sizeof f->w);
    }
    if (!dtr__classes_run(ctx, &cl, DTR__CLASSES_MAX)) return false;
    __int128 send = 0;
    for (int64_t k = 0; k < cl.n; k++) {
        const int64_t *v = dtr__classes_state(&cl, k);
        __int128 sum = K;
        for (int d = 0; d < ctx->ndim; d++) {
            int64_t y = v[ctx->ndim + d];
            const dtr__form_t *f = &cl.form[ctx->ndim + d];
            if (dtr__classes_residue(&cl, v, ctx->ndim + d)) /* any y in range with it */
                y = f->rlo + ((y - f->rlo) % f->period + f->period) % f->period;
            sum *= !fixed[d]  ? (__int128)B->len[d]
                   : tiled[d] ? (__int128)dtr__meet_value(y, spans[d], B->len[d])
                   : y == DTR__PLATEAU ? flat[d]
                                       : dtr__cover(sw[d], sn[d], sk[d], 0, y, A->len[d], B->len[d]);
        }
        sum -= dtr__self(ctx, A, B, v);
        if (sum > send) send = sum;
    }
    dtr__classes_free(&cl);

    *out = send;
    return true;
}

/* The most peers a rank hears from in an exchange from B to A. */
static bool dtr__exchange_peers(const dtr__ctx_t *ctx, const dtr__grid_t *A, const dtr__grid_t *B,
                                __int128 *out) {
    dtr__classes_t cl = {.nforms = 2 * ctx->ndim};
    for (int d = 0; d < ctx->ndim; d++) dtr__meet_form(ctx, A, B, d, false, &cl.form[d]);
    /* peers = prod_d (source blocks meeting my target on d) - (I hold some of it): the
     * before-blocks tile d, so the count depends on my target's offset modulo their length
     * (form z_d). */
    for (int d = 0; d < ctx->ndim; d++) {
        dtr__form_t *f = &cl.form[ctx->ndim + d];
        memset(f, 0, sizeof *f);
        /* (every target block inside one source block: one each, whatever the offset) */
        if (B->len[d] % A->len[d] != 0) memcpy(f->w, A->w[d], sizeof f->w);
        f->mod = B->len[d];
    }
    if (!dtr__classes_run(ctx, &cl, DTR__CLASSES_MAX)) return false;
    __int128 peers = 0;
    for (int64_t k = 0; k < cl.n; k++) {
        const int64_t *v = dtr__classes_state(&cl, k);
        __int128 hits = 1;
        for (int d = 0; d < ctx->ndim; d++) {
            int64_t z = v[ctx->ndim + d], lb = B->len[d];
            hits *= (z + A->len[d] + lb - 1) / lb;
        }
        hits -= dtr__self(ctx, A, B, v) > 0;
        if (hits > peers) peers = hits;
    }
    dtr__classes_free(&cl);

    *out = peers;
    return true;
}

bool dtr__exchange_figures_even(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__grid_t A, B;
    if (dtr__even_off || !dtr__grid(ctx, s->after, &A) || !dtr__grid(ctx, s->before, &B))
        return false;
    int64_t item = ctx->item;
    if (A.numel == 0) { /* (an empty tensor dim: every block of both is empty) */
        s->recv_bytes_max = s->send_bytes_max = s->extra_bytes_max = 0;
        s->peers_max = 0;
        return true;
    }
    /* recv = |T| - self, at its largest where self is least. */
    __int128 least;
    if (!dtr__self_extreme(ctx, &A, &B, false, &least)) return false;
    __int128 recv = A.numel - least;

    __int128 send, peers;
    if (!dtr__exchange_send(ctx, s, &A, &B, &send) || !dtr__exchange_peers(ctx, &A, &B, &peers))
        return false;
    s->recv_bytes_max = dtr__sat(recv * item);
    s->send_bytes_max = dtr__sat(send * item);
    s->peers_max = (int)peers;
    /* extra: my target block plus what I receive (an exchange stages what it receives) */
    s->extra_bytes_max = dtr__sat((__int128)dtr__sat(A.numel * item) + s->recv_bytes_max);
    return true;
}

bool dtr__need_max_even(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                        const dtr_placement_t *dst, __int128 *need) {
    if (dtr__even_off || dtr__zero_fill_dims(ctx, src, dst) != 0) return false;
    dtr_placement_t cl[DTR_MAX_MESH_DIMS], tl[DTR_MAX_MESH_DIMS];
    bool reduces = dtr__bound_layouts(ctx, src, dst, cl, tl);
    dtr__grid_t C, T;
    if (!dtr__grid(ctx, cl, &C) || !dtr__grid(ctx, tl, &T)) return false;
    __int128 best = T.numel;
    if (!reduces) {
        __int128 least;
        if (!dtr__self_extreme(ctx, &T, &C, false, &least)) return false;
        best = T.numel - least;
    }
    for (int k = 0; k < ctx->mdims; k++) {
        int64_t n = ctx->msize[k];
        if (!(src[k].kind == DTR_PARTIAL && dst[k].kind != DTR_PARTIAL) || n == 1) continue;
        dtr_placement_t ul[DTR_MAX_MESH_DIMS];
        memcpy(ul, tl, sizeof ul);
        ul[k] = dtr_replicate();
        dtr__grid_t U;
        __int128 u;
        if (!dtr__grid(ctx, ul, &U) || !dtr__self_extreme(ctx, &U, &C, true, &u)) return false;
        __int128 moved = dtr__reduce_moved(dst[k].kind == DTR_REPLICATE, u, n); /* (grows with u) */
        if (moved > best) best = moved;
    }
    *need = best;
    return true;
}

/*
 * The balanced reduction (balance.c) of P -> S(d) on mesh dim i, under the inner mesh dims
 * j > i that shard d on both sides. Number the inner dims' coordinates as one index q in
 * [0, Q) (mixed radix, mesh order); with the outer ones at 0, group q reduces the source
 * cell q of d and member a's target is the target cell a*Q + q, n times smaller. On even
 * layouts every target cell lies in one source cell, floor((a*Q + q) / n), so member a is
 * home (h = t, its whole target) exactly when q(n-1) <= a*Q <= q(n-1) + n-1: the members
 * [a0, a1], a run. Nothing else differs between groups (the other tensor dims and the
 * outer dims are the same on both sides), so a group's figures follow from t = |T|,
 * |C| = n t and its run of home members: the level, the shares (foreign members take
 * cap_f each in member order, home members cap_h, until the foreign elements run out) and
 * each member's bytes (plan.c's dtr__step_rank), all in O(1). The run changes at 2n values
 * of q at most. So a balanced reduction costs O(n log) here instead of O(ranks * n).
 */
typedef struct {
    int64_t n, Q, t; /* members, inner groups, elements of a target */
    bool other;      /* balance.c's enumeration of groups reaches a foreign target's group */
} dtr__even_balance_t;

/* With shard orders "inner" means after i in d's order. The figures count the other group
 * holding a foreign target the way balance.c enumerates groups, over the mesh dims after i:
 * where every inner dim is one of those it is found, where none is it is not, and where
 * some are the figures are not taken here (any_inner: the bound, which counts no groups). */
static bool dtr__even_balance(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                              const dtr_placement_t *after, int i, bool any_inner,
                              dtr__even_balance_t *e) {
    dtr__grid_t B, A;
    if (dtr__even_off || !dtr__grid(ctx, before, &B) || !dtr__grid(ctx, after, &A)) return false;
    int d = after[i].dim;
    int dims[DTR_MAX_MESH_DIMS], k = dtr__shard_seq(after, ctx->mdims, d, dims);
    int src[DTR_MAX_MESH_DIMS], ks = dtr__shard_seq(before, ctx->mdims, d, src);
    int p = 0;
    while (p < k && dims[p] != i) p++;
    if (p == k || ks != k - 1) return false;
    for (int q = 0, r = 0; q < k; q++) { /* the source's order is the target's without i */
        if (q == p) continue;
        if (src[r++] != dims[q]) return false;
    }
    int after_i = 0;
    for (int q = p + 1; q < k; q++) after_i += dims[q] > i;
    if (!any_inner && after_i != 0 && after_i != k - 1 - p) return false;
    e->other = after_i > 0;
    e->n = ctx->msize[i];
    e->Q = 1;
    for (int q = p + 1; q < k; q++) e->Q *= ctx->msize[dims[q]];
    if (A.numel > INT64_MAX / e->n) return false;
    e->t = (int64_t)A.numel;
    return true;
}

/* The home members [*a0, *a1] of group q (*a0 > *a1: none). */
static void dtr__home_run(const dtr__even_balance_t *e, int64_t q, int64_t *a0, int64_t *a1) {
    int64_t lo = q * (e->n - 1), hi = lo + e->n - 1;
    *a0 = (lo + e->Q - 1) / e->Q;
    *a1 = hi / e->Q;
    if (*a1 > e->n - 1) *a1 = e->n - 1;
}

/* Calls fn for one q of every run of home members (at most 2n+1 of them). */
static void dtr__each_run(const dtr__even_balance_t *e, void (*fn)(const dtr__even_balance_t *,
                                                                   int64_t, int64_t, void *),
                          void *arg) {
    int64_t q = 0;
    while (q < e->Q) {
        int64_t a0, a1;
        dtr__home_run(e, q, &a0, &a1);
        fn(e, a0, a1, arg);
        /* The next q whose run differs: where a0 or a1 moves on (both grow with q). */
        int64_t next = e->Q;
        if (a0 <= e->n - 1) { /* a0 grows once q(n-1) > (a0)Q: q > a0 Q / (n-1) */
            int64_t m = a0 * e->Q / (e->n - 1) + 1;
            if (m > q && m < next) next = m;
        }
        if (a1 + 1 <= e->n - 1) { /* a1 grows once q(n-1) + n-1 >= (a1+1) Q */
            int64_t num = (a1 + 1) * e->Q - (e->n - 1);
            int64_t m = num <= 0 ? q + 1 : (num + e->n - 2) / (e->n - 1);
            if (m > q && m < next) next = m;
        }
        q = next;
    }
}

/* Elements member a may take at level L (balance.c's dtr__cap), at least 0. */
static __int128 dtr__cap0(__int128 L, __int128 base, int64_t n) {
    return L < base ? 0 : (L - base) / (n - 1);
}

typedef struct {
    __int128 r, w, stage; /* the most over members, elements */
    bool foreign;          /* some member is not home */
} dtr__balance_max_t;

static void dtr__balance_run_figures(const dtr__even_balance_t *e, int64_t a0, int64_t a1,
                                     void *arg) {
    dtr__balance_max_t *mx = arg;
    int64_t n = e->n, H = a1 >= a0 ? a1 - a0 + 1 : 0;
    __int128 t = e->t, C = (__int128)n * t, F = C - (__int128)H * t;
    __int128 bh = (n - 1) * t, bf = t; /* bases: (n-1)h + (t - h) */
    /* The level (balance.c's dtr__balance_init): the least L >= the largest base at which
     * the caps hold the foreign elements. */
    __int128 top = H > 0 ? (bh > bf ? bh : bf) : bf, lo = top, hi = top + (n - 1) * F;
    while (lo < hi) {
        __int128 mid = lo + (hi - lo) / 2;
        __int128 room = H * dtr__cap0(mid, bh, n) + (n - H) * dtr__cap0(mid, bf, n);
        if (room >= F)
            hi = mid;
        else
            lo = mid + 1;
    }
    __int128 ch = dtr__cap0(lo, bh, n), cf = dtr__cap0(lo, bf, n);
    /* Shares in member order: foreign [0, a0), home [a0, a1], foreign (a1, n). The first
     * member of a run takes the most of it. */
    __int128 at = 0, xh = -1, xf = -1;
    int64_t runs[3][2] = {{0, H > 0 ? a0 : n}, {a0, H > 0 ? a1 + 1 : a0}, {H > 0 ? a1 + 1 : n, n}};
    for (int k = 0; k < 3; k++) {
        int64_t m = runs[k][1] - runs[k][0];
        if (m <= 0) continue;
        __int128 cap = k == 1 ? ch : cf, left = F - at;
        __int128 first = cap < left ? cap : left;
        if (k == 1)
            xh = first;
        else if (first > xf)
            xf = first;
        at += m * cap < left ? m * cap : left;
    }
    if (xh >= 0) { /* home: h = t, nothing delivered */
        __int128 r = (n - 1) * (t + xh), stage = C + t + xh;
        if (r > mx->r) mx->r = r;
        if (stage > mx->stage) mx->stage = stage;
        if (C - t > mx->w) mx->w = C - t;
    }
    if (xf >= 0) { /* foreign: h = 0, its whole target delivered */
        __int128 r = (n - 1) * xf + t, stage = (C > t ? C : t) + xf;
        if (r > mx->r) mx->r = r;
        if (stage > mx->stage) mx->stage = stage;
        if (C > mx->w) mx->w = C;
        mx->foreign = true;
    }
}

bool dtr__balance_figures_even(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__even_balance_t e;
    if (!dtr__even_balance(ctx, s->before, s->after, s->mesh_dim, false, &e)) return false;
    dtr__balance_max_t mx = {0, 0, 0, false};
    dtr__each_run(&e, dtr__balance_run_figures, &mx);
    int64_t item = ctx->item;
    s->recv_bytes_max = dtr__sat(mx.r * item);
    s->send_bytes_max = dtr__sat(mx.w * item);
    int64_t out = dtr__sat((__int128)e.t * item);
    s->extra_bytes_max = dtr__sat((__int128)out + dtr__sat(mx.stage * item));
    /* the group, and the members of the one other group holding a foreign target */
    s->peers_max = (int)((e.n - 1) + (mx.foreign && e.other && e.t > 0 ? e.n : 0));
    return true;
}

static void dtr__balance_run_bound(const dtr__even_balance_t *e, int64_t a0, int64_t a1,
                                   void *arg) {
    __int128 *best = arg;
    int64_t n = e->n, H = a1 >= a0 ? a1 - a0 + 1 : 0;
    __int128 t = e->t, need = (__int128)n * t;
    /* balance.c's dtr__balance_bound, its members' sum as H home and n-H foreign ones */
    __int128 lo = t, hi = t + (n - 1) * need;
    while (lo < hi) {
        __int128 mid = lo + (hi - lo) / 2, room = 0;
        for (int home = 0; home < 2; home++) {
            __int128 h = home ? t : 0, z;
            if (n == 2) {
                z = h + (mid - t);
            } else {
                z = (mid - t) / (n - 2);
                if (z >= h) z = (mid - t + h) / (n - 1);
            }
            room += (home ? H : n - H) * z;
        }
        if (room >= need)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo > *best) *best = lo;
}

bool dtr__balance_bound_even(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, int k, __int128 *best) {
    dtr__even_balance_t e;
    if (!dtr__even_balance(ctx, src, dst, k, true, &e)) return false;
    dtr__each_run(&e, dtr__balance_run_bound, best);
    return true;
}
