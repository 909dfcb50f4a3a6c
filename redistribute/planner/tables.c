/*
 * Figures over every rank from tables per tensor dim, for layouts that are not even (the
 * per-rank loops of plan.c and bound.c otherwise).
 *
 * What a rank receives in a step, and an exchange's sends and peers, are products over
 * tensor dims of per-dim terms: the lengths of its blocks before and after along d, their
 * overlap, and for an exchange the sum over its peers' cells of d and how many of its
 * sources' cells meet it. Each term reads only the rank's coordinates on the mesh dims that
 * split d in either layout (M_d). So each term is computed once per coordinate of M_d
 * (reps.c's coordinates), and a rank's figures are a few lookups and products: about
 * sum_d |coordinates of M_d| x (a layout and two sums) + ranks x D lookups, instead of
 * ranks x (two layouts and 2D sums).
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

#define DTR__TABLE_MAX (1 << 20) /* entries of one pair's tables, at most */

/* Table d's entry at the rank's coordinates (reps' index where a mesh dim collapses). */
static const dtr__term_t *dtr__entry(const dtr__reps_t *r, const dtr__table_t *tb,
                                     const int64_t *coord, const int64_t *at) {
    int64_t e = 0;
    for (int q = 0; q < tb->k; q++) {
        int i = tb->dims[q];
        e = e * tb->radix[q] + (r->all[i] ? coord[i] : at[i]);
    }
    return &tb->terms[e];
}

void dtr__pair_terms(const dtr__ctx_t *ctx, const dtr__pair_t *p, const dtr__reps_t *r,
                     const int64_t *coord, const int64_t *at, const dtr__term_t **terms) {
    for (int d = 0; d < ctx->ndim; d++) terms[d] = dtr__entry(r, &p->t[d], coord, at);
}

/* What a table's entries share: d's shard sequences and the sums' mesh dims. */
typedef struct {
    const dtr__ctx_t *ctx;
    int d, kb, ka;
    int before[DTR_MAX_MESH_DIMS], after[DTR_MAX_MESH_DIMS]; /* d's shard sequences */
    bool cells;
    bool send_sub[DTR_MAX_MESH_DIMS], source_sub[DTR_MAX_MESH_DIMS];
} dtr__fill_t;

/* Block [off, off+len) of tensor dim d at coord, down a shard sequence. */
static void dtr__along(const dtr__ctx_t *ctx, const int *dims, int k, int d, const int64_t *coord,
                       int64_t *len, int64_t *off) {
    *len = ctx->shape[d];
    *off = 0;
    for (int q = 0; q < k; q++) dtr__split(ctx->msize[dims[q]], coord[dims[q]], len, off);
}

static void dtr__term_at(const dtr__fill_t *f, const int64_t *coord, dtr__term_t *t) {
    const dtr__ctx_t *ctx = f->ctx;
    int64_t ts, to, cs, co;
    dtr__along(ctx, f->after, f->ka, f->d, coord, &ts, &to);
    dtr__along(ctx, f->before, f->kb, f->d, coord, &cs, &co);
    int64_t lo = to > co ? to : co, hi = to + ts < co + cs ? to + ts : co + cs;
    t->alen = ts;
    t->blen = cs;
    t->meet = hi > lo ? hi - lo : 0;
    t->sum = t->hits = 0;
    if (!f->cells) return;
    /* as plan.c's dtr__exchange_rank */
    __int128 unused;
    dtr__cells_seq(ctx, f->after, f->ka, f->d, f->send_sub, coord, co, cs, &t->sum, &unused);
    dtr__cells_seq(ctx, f->before, f->kb, f->d, f->source_sub, coord, to, ts, &unused, &t->hits);
}

/* Fills table d: every coordinate of M_d (the other coordinates 0, which it does not read). */
static void dtr__table_fill(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                            const dtr_placement_t *after, bool cells, const dtr__reps_t *r,
                            int d, dtr__table_t *tb, int64_t entries) {
    dtr__fill_t f = {.ctx = ctx, .d = d, .cells = cells};
    f.kb = dtr__shard_seq(before, ctx->mdims, d, f.before);
    f.ka = dtr__shard_seq(after, ctx->mdims, d, f.after);
    for (int i = 0; i < ctx->mdims; i++) { /* peers vary on the mesh dims "before" shards */
        f.send_sub[i] = before[i].kind == DTR_SHARD && after[i].kind == DTR_SHARD &&
                        after[i].dim == d;
        f.source_sub[i] = before[i].kind == DTR_SHARD && before[i].dim == d;
    }
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, idx[DTR_MAX_MESH_DIMS] = {0};
    for (int q = 0; q < tb->k; q++) coord[tb->dims[q]] = r->all[tb->dims[q]] ? 0 : r->c[tb->dims[q]][0];
    for (int64_t e = 0; e < entries; e++) {
        dtr__term_at(&f, coord, &tb->terms[e]);
        for (int q = tb->k - 1; q >= 0; q--) { /* the next, dims[k-1] fastest */
            int i = tb->dims[q];
            if (++idx[q] < tb->radix[q]) {
                coord[i] = r->all[i] ? idx[q] : r->c[i][idx[q]];
                break;
            }
            idx[q] = 0;
            coord[i] = r->all[i] ? 0 : r->c[i][0];
        }
    }
}

bool dtr__pair_init(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                    const dtr_placement_t *after, bool cells, const dtr__reps_t *r,
                    dtr__pair_t *p) {
    p->store = NULL;
    if (dtr__even_off) return false; /* (the test hook: every rank visited as it was) */
    int64_t entries[DTR_MAX_TENSOR_DIMS], total = 0;
    for (int d = 0; d < ctx->ndim; d++) {
        dtr__table_t *tb = &p->t[d];
        tb->k = 0;
        entries[d] = 1;
        for (int i = 0; i < ctx->mdims; i++) {
            bool splits = (before[i].kind == DTR_SHARD && before[i].dim == d) ||
                          (after[i].kind == DTR_SHARD && after[i].dim == d);
            if (!splits || ctx->msize[i] == 1) continue;
            tb->dims[tb->k] = i;
            tb->radix[tb->k] = r->all[i] ? ctx->msize[i] : r->n[i];
            entries[d] *= tb->radix[tb->k++];
            if (entries[d] > DTR__TABLE_MAX) return false;
        }
        total += entries[d];
        if (total > DTR__TABLE_MAX) return false;
    }
    p->store = malloc((size_t)(total > 0 ? total : 1) * sizeof *p->store);
    if (p->store == NULL) return false; /* (the caller visits every rank) */
    for (int d = 0, first = 0; d < ctx->ndim; first += (int)entries[d], d++) {
        p->t[d].terms = p->store + first;
        dtr__table_fill(ctx, before, after, cells, r, d, &p->t[d], entries[d]);
    }
    return true;
}

void dtr__pair_free(dtr__pair_t *p) {
    free(p->store);
    p->store = NULL;
}

bool dtr__exchange_figures_tables(const dtr__ctx_t *ctx, dtr_step_t *s, const dtr__reps_t *r,
                                  const bool *vary) {
    dtr__pair_t p;
    if (!dtr__pair_init(ctx, s->before, s->after, true, r, &p)) return false;
    __int128 K = 1; /* peers along varying mesh dims that shard nothing "after" */
    for (int i = 0; i < ctx->mdims; i++)
        if (s->before[i].kind == DTR_SHARD && s->after[i].kind != DTR_SHARD) K *= ctx->msize[i];
    int64_t coord[DTR_MAX_MESH_DIMS], at[DTR_MAX_MESH_DIMS] = {0};
    dtr__reps_first(ctx, r, coord);
    s->recv_bytes_max = s->send_bytes_max = s->extra_bytes_max = 0;
    s->peers_max = 0;
    do {
        const dtr__term_t *t[DTR_MAX_TENSOR_DIMS];
        dtr__pair_terms(ctx, &p, r, coord, at, t);
        __int128 numel = 1, self = 1, sum = K, sources = 1;
        for (int d = 0; d < ctx->ndim; d++) {
            numel *= t[d]->alen;
            self *= t[d]->meet;
            sum *= t[d]->sum;
            sources *= t[d]->hits;
        }
        /* as plan.c's dtr__step_rank_in and dtr__step_figures_at for an exchange */
        int64_t recv = dtr__sat((numel - self) * ctx->item);
        int64_t send = dtr__sat((sum - self) * ctx->item);
        int peers = (int)(sources - (self > 0));
        int64_t extra = dtr__sat((__int128)dtr__sat(numel * ctx->item) + recv);
        if (recv > s->recv_bytes_max) s->recv_bytes_max = recv;
        if (send > s->send_bytes_max) s->send_bytes_max = send;
        if (extra > s->extra_bytes_max) s->extra_bytes_max = extra;
        if (peers > s->peers_max) s->peers_max = peers;
    } while (dtr__reps_next(ctx, r, vary, coord, at));
    dtr__pair_free(&p);
    return true;
}

/* What the rank receives in step s (elements), from its terms: plan.c's
 * dtr__step_rank_in for each kind but the balanced reduction. */
static __int128 dtr__recv_from_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                     const dtr__term_t *const *t) {
    int64_t n = s->mesh_dim >= 0 ? ctx->msize[s->mesh_dim] : 1;
    int a = s->tensor_dim, b = s->tensor_dim2;
    __int128 r = 1;
    switch (s->kind) {
    case DTR_STEP_ALL_GATHER:
    case DTR_STEP_REDUCE_SCATTER: {
        for (int d = 0; d < ctx->ndim; d++) {
            int64_t len = s->kind == DTR_STEP_ALL_GATHER ? t[d]->alen : t[d]->blen;
            r *= d == a ? len / n + (len % n != 0) : len;
        }
        return (n - 1) * r;
    }
    case DTR_STEP_ALL_REDUCE:
        for (int d = 0; d < ctx->ndim; d++) r *= t[d]->blen;
        return 2 * (__int128)(n - 1) * (r / n + (r % n != 0));
    case DTR_STEP_ALL_TO_ALL:
        for (int d = 0; d < ctx->ndim; d++)
            r *= d == a ? t[d]->alen - t[d]->blen : d == b ? t[d]->alen : t[d]->blen;
        return r;
    case DTR_STEP_EXCHANGE: {
        __int128 self = 1;
        for (int d = 0; d < ctx->ndim; d++) {
            r *= t[d]->alen;
            self *= t[d]->meet;
        }
        return r - self;
    }
    default:
        return 0;
    }
}

bool dtr__plan_recv_tables(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const dtr__reps_t *r,
                           const bool *vary, __int128 *best_out) {
    dtr__pair_t p[DTR_MAX_PLAN_STEPS];
    int built = 0;
    bool ok = !dtr__even_off;
    for (int k = 0; ok && k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        ok = s->kind != DTR_STEP_REDUCE_EXCHANGE &&
             dtr__pair_init(ctx, s->before, s->after, false, r, &p[k]);
        built += ok;
    }
    if (ok) {
        int64_t coord[DTR_MAX_MESH_DIMS], at[DTR_MAX_MESH_DIMS] = {0};
        dtr__reps_first(ctx, r, coord);
        __int128 best = 0;
        do {
            __int128 total = 0;
            for (int k = 0; k < plan->nsteps; k++) {
                const dtr__term_t *t[DTR_MAX_TENSOR_DIMS];
                dtr__pair_terms(ctx, &p[k], r, coord, at, t);
                /* (as dtr__step_rank_recv: bytes, saturated, per step) */
                total += dtr__sat(dtr__recv_from_terms(ctx, &plan->steps[k], t) * ctx->item);
            }
            if (total > best) best = total;
        } while (dtr__reps_next(ctx, r, vary, coord, at));
        *best_out = best;
    }
    for (int k = 0; k < built; k++) dtr__pair_free(&p[k]);
    return ok;
}
