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

void dtr__cursor_init(const dtr__ctx_t *ctx, const dtr__reps_t *r, const bool *vary,
                      dtr__pair_t *p, int np, dtr__cursor_t *c) {
    c->p = p;
    c->np = np;
    c->ndim = ctx->ndim;
    c->nv = 0;
    for (int i = 0; i < ctx->mdims; i++) {
        if (!vary[i]) continue;
        int64_t lim = r->all[i] ? ctx->msize[i] : r->n[i];
        int j = c->nv++; /* (by size: the largest innermost, so that it carries least) */
        for (; j > 0 && c->lim[j - 1] > lim; j--) {
            c->dims[j] = c->dims[j - 1];
            c->lim[j] = c->lim[j - 1];
        }
        c->dims[j] = i;
        c->lim[j] = lim;
    }
    memset(c->pos, 0, sizeof c->pos);
    for (int k = 0; k < np; k++) {
        memset(p[k].cur, 0, sizeof p[k].cur);
        for (int d = 0; d < ctx->ndim; d++)
            c->inner[k][d] = c->nv > 0 ? p[k].t[d].stride[c->dims[c->nv - 1]] : 0;
    }
}

/* The innermost walked mesh dim wrapped: carry outward. */
bool dtr__cursor_carry(dtr__cursor_t *c) {
    for (int j = c->nv - 1; j >= 0; j--) {
        int i = c->dims[j];
        int64_t step = 1;
        bool more = j == c->nv - 1 ? false : ++c->pos[j] < c->lim[j];
        if (!more) {
            step = 1 - c->lim[j]; /* (pos was lim - 1 before the step that wrapped it) */
            c->pos[j] = 0;
        }
        for (int k = 0; k < c->np; k++)
            for (int d = 0; d < c->ndim; d++) c->p[k].cur[d] += step * c->p[k].t[d].stride[i];
        if (more) return true;
    }
    return false;
}

/* One shard sequence of tensor dim d walked level by level (len[l], off[l]: the block after
 * its first l levels), so that moving the table's fastest coordinates re-splits only the
 * levels below the first mesh dim that moved. */
typedef struct {
    int k;
    const int *dims;
    int first[DTR_MAX_MESH_DIMS]; /* per table position q: the first level q's move reaches */
    int64_t len[DTR_MAX_MESH_DIMS + 1], off[DTR_MAX_MESH_DIMS + 1];
    int64_t chunk[DTR_MAX_MESH_DIMS]; /* level l's chunk length, for a parent of parent[l] */
    int64_t parent[DTR_MAX_MESH_DIMS];
} dtr__walk_t;

static void dtr__walk_init(const dtr__ctx_t *ctx, dtr__walk_t *w, const int *dims, int k, int d,
                           const dtr__table_t *tb) {
    w->k = k;
    w->dims = dims;
    w->len[0] = ctx->shape[d];
    w->off[0] = 0;
    for (int l = 0; l < k; l++) w->parent[l] = -1;
    for (int q = tb->k - 1, first = k; q >= 0; q--) { /* positions q.. move together */
        for (int l = 0; l < first; l++)
            if (dims[l] == tb->dims[q]) first = l;
        w->first[q] = first;
    }
}

/* Levels `level` on again (dtr__split's rule). A level's parent length takes few values
 * (a full chunk or the shorter one of the level above), so its chunk length is kept for the
 * last one: most moves divide nothing. */
static void dtr__walk_from(const dtr__ctx_t *ctx, dtr__walk_t *w, int level, const int64_t *coord) {
    for (int l = level; l < w->k; l++) {
        int64_t len = w->len[l];
        if (len != w->parent[l]) {
            int64_t n = ctx->msize[w->dims[l]];
            w->chunk[l] = len / n + (len % n != 0);
            w->parent[l] = len;
        }
        int64_t chunk = w->chunk[l], start = chunk * coord[w->dims[l]];
        int64_t end = start + chunk < len ? start + chunk : len;
        w->off[l + 1] = w->off[l] + (start < len ? start : len);
        w->len[l + 1] = end > start ? end - start : 0;
    }
}

/* What a table's entries share: d's shard sequences, walked, and for an exchange the
 * sums' mesh dims and their values by the coordinates they read. */
typedef struct {
    const dtr__ctx_t *ctx;
    const dtr__reps_t *r;
    const dtr__table_t *tb;
    int d;
    int before[DTR_MAX_MESH_DIMS], after[DTR_MAX_MESH_DIMS]; /* d's shard sequences */
    dtr__walk_t wb, wa;
    bool send_sub[DTR_MAX_MESH_DIMS], source_sub[DTR_MAX_MESH_DIMS];
    /* The peers' cell sum reads the before block and the "after" coordinates it does not
     * sum over; the sources' cell count the after block and the "before" ones likewise.
     * Each is computed once per value of the table positions it reads (mask). */
    unsigned send_mask, source_mask;
    int send_from, source_from; /* the first level of each sequence that is summed over */
    int32_t *send, *source;
} dtr__fill_t;

typedef enum { DTR__FILL_TERMS, DTR__FILL_SEND, DTR__FILL_SOURCE } dtr__fill_kind_t;

/* Index of the table position values idx among the positions in mask (last fastest). */
static int64_t dtr__masked_index(const dtr__table_t *tb, unsigned mask, const int64_t *idx) {
    int64_t e = 0;
    for (int q = 0; q < tb->k; q++)
        if (mask >> q & 1) e = e * tb->radix[q] + idx[q];
    return e;
}

/* The peers' cell sum, and the sources' cell count, at the walks' blocks. */
/* (Both start at their sequence's first summed level, from the walk's block there.) */
static int32_t dtr__send_sum(const dtr__fill_t *f, const int64_t *coord) {
    __int128 sum;
    int q = f->send_from;
    dtr__cells_below(f->ctx, f->after, f->wa.k, q, f->send_sub, coord, f->wa.off[q],
                     f->wa.len[q], f->wb.off[f->wb.k], f->wb.len[f->wb.k], &sum, NULL);
    return (int32_t)sum;
}

static int32_t dtr__source_hits(const dtr__fill_t *f, const int64_t *coord) {
    __int128 hits, unused;
    int q = f->source_from;
    dtr__cells_below(f->ctx, f->before, f->wb.k, q, f->source_sub, coord, f->wb.off[q],
                     f->wb.len[q], f->wa.off[f->wa.k], f->wa.len[f->wa.k], &unused, &hits);
    return (int32_t)hits;
}

static void dtr__fill_at(dtr__fill_t *f, dtr__fill_kind_t kind, const int64_t *coord,
                         const int64_t *idx, int64_t e, dtr__table_t *tb) {
    if (kind == DTR__FILL_SEND) { /* as plan.c's dtr__exchange_rank */
        f->send[e] = dtr__send_sum(f, coord);
        return;
    }
    if (kind == DTR__FILL_SOURCE) {
        f->source[e] = dtr__source_hits(f, coord);
        return;
    }
    int64_t ts = f->wa.len[f->wa.k], to = f->wa.off[f->wa.k];
    int64_t cs = f->wb.len[f->wb.k], co = f->wb.off[f->wb.k];
    dtr__term_t *t = &tb->terms[e];
    int64_t lo = to > co ? to : co, hi = to + ts < co + cs ? to + ts : co + cs;
    t->alen = (int32_t)ts;
    t->blen = (int32_t)cs;
    t->meet = (int32_t)(hi > lo ? hi - lo : 0);
    if (tb->sums == NULL) return;
    tb->sums[e].sum = f->send != NULL ? f->send[dtr__masked_index(tb, f->send_mask, idx)]
                                      : dtr__send_sum(f, coord);
    tb->sums[e].hits = f->source != NULL ? f->source[dtr__masked_index(tb, f->source_mask, idx)]
                                         : dtr__source_hits(f, coord);
}

/* Visits every value of the table positions in mask (the others at their first), dims[k-1]
 * fastest, with both walks kept current. */
static void dtr__fill_over(dtr__fill_t *f, dtr__fill_kind_t kind, unsigned mask,
                           dtr__table_t *tb) {
    const dtr__reps_t *r = f->r;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, idx[DTR_MAX_MESH_DIMS] = {0};
    for (int q = 0; q < tb->k; q++) coord[tb->dims[q]] = r->all[tb->dims[q]] ? 0 : r->c[tb->dims[q]][0];
    dtr__walk_from(f->ctx, &f->wb, 0, coord);
    dtr__walk_from(f->ctx, &f->wa, 0, coord);
    for (int64_t e = 0;; e++) {
        dtr__fill_at(f, kind, coord, idx, e, tb);
        int q = tb->k - 1;
        for (; q >= 0; q--) { /* the next */
            if (!(mask >> q & 1)) continue;
            int i = tb->dims[q];
            bool carry = ++idx[q] == tb->radix[q];
            if (carry) idx[q] = 0;
            coord[i] = r->all[i] ? idx[q] : r->c[i][idx[q]];
            if (!carry) break;
        }
        if (q < 0) return;
        dtr__walk_from(f->ctx, &f->wb, f->wb.first[q], coord);
        dtr__walk_from(f->ctx, &f->wa, f->wa.first[q], coord);
    }
}

/* The table positions whose mesh dims a cell sum reads: the other layout's sequence (its
 * block) and its own sequence's dims that it does not sum over. */
static unsigned dtr__reads(const dtr__table_t *tb, const int *own, int kown, const bool *sub,
                           const int *other, int kother) {
    unsigned mask = 0;
    for (int q = 0; q < tb->k; q++) {
        for (int l = 0; l < kown; l++)
            if (own[l] == tb->dims[q] && !sub[own[l]]) mask |= 1u << q;
        for (int l = 0; l < kother; l++)
            if (other[l] == tb->dims[q]) mask |= 1u << q;
    }
    return mask;
}

static int64_t dtr__masked_size(const dtr__table_t *tb, unsigned mask) {
    int64_t n = 1;
    for (int q = 0; q < tb->k; q++)
        if (mask >> q & 1) n *= tb->radix[q];
    return n;
}

/* Fills table d: every coordinate of M_d (the other coordinates 0, which it does not read).
 * False where out of memory. */
static bool dtr__table_fill(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                            const dtr_placement_t *after, const dtr__reps_t *r, int d,
                            dtr__table_t *tb) {
    dtr__fill_t f = {.ctx = ctx, .r = r, .tb = tb, .d = d};
    int kb = dtr__shard_seq(before, ctx->mdims, d, f.before);
    int ka = dtr__shard_seq(after, ctx->mdims, d, f.after);
    dtr__walk_init(ctx, &f.wb, f.before, kb, d, tb);
    dtr__walk_init(ctx, &f.wa, f.after, ka, d, tb);
    unsigned all = tb->k == 0 ? 0 : (unsigned)((1ull << tb->k) - 1);
    if (tb->sums != NULL) {
        for (int i = 0; i < ctx->mdims; i++) { /* peers vary on the mesh dims "before" shards */
            f.send_sub[i] = before[i].kind == DTR_SHARD && after[i].kind == DTR_SHARD &&
                            after[i].dim == d;
            f.source_sub[i] = before[i].kind == DTR_SHARD && before[i].dim == d;
        }
        while (f.send_from < ka && !f.send_sub[f.after[f.send_from]]) f.send_from++;
        while (f.source_from < kb && !f.source_sub[f.before[f.source_from]]) f.source_from++;
        f.send_mask = dtr__reads(tb, f.after, ka, f.send_sub, f.before, kb);
        f.source_mask = dtr__reads(tb, f.before, kb, f.source_sub, f.after, ka);
        /* (a sum that reads every position is computed in the entry's own visit) */
        if (f.send_mask != all) {
            f.send = malloc((size_t)dtr__masked_size(tb, f.send_mask) * sizeof *f.send);
            if (f.send == NULL) return false;
            dtr__fill_over(&f, DTR__FILL_SEND, f.send_mask, tb);
        }
        if (f.source_mask != all) {
            f.source = malloc((size_t)dtr__masked_size(tb, f.source_mask) * sizeof *f.source);
            if (f.source == NULL) {
                free(f.send);
                return false;
            }
            dtr__fill_over(&f, DTR__FILL_SOURCE, f.source_mask, tb);
        }
    }
    dtr__fill_over(&f, DTR__FILL_TERMS, all, tb);
    free(f.send);
    free(f.source);
    return true;
}

/* A pair's tables kept for the rest of a planning call: the candidates' exchanges, the
 * plan's busiest rank and the bound often tabulate the same pair of layouts. Only tables
 * that visit every coordinate of their mesh dims are kept (they do not depend on which
 * coordinates a loop's reps chose), and only large ones (small ones cost little). */
#define DTR__PAIR_CACHE_MIN 4096
struct dtr__cached_pair {
    dtr_placement_t before[DTR_MAX_MESH_DIMS], after[DTR_MAX_MESH_DIMS];
    dtr__pair_t pair;
};

static bool dtr__same_placements(const dtr__ctx_t *ctx, const dtr_placement_t *a,
                                 const dtr_placement_t *b) {
    for (int i = 0; i < ctx->mdims; i++)
        if (!dtr_placement_equal(a[i], b[i]) || (a[i].kind == DTR_SHARD && a[i].order != b[i].order))
            return false;
    return true;
}

static bool dtr__pair_cached(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                             const dtr_placement_t *after, bool cells, dtr__pair_t *p) {
    for (int k = 0; ctx->memo != NULL && k < ctx->memo->npairs; k++) {
        struct dtr__cached_pair *c = ctx->memo->pairs[k];
        if ((cells && c->pair.sums_store == NULL) || !dtr__same_placements(ctx, c->before, before) ||
            !dtr__same_placements(ctx, c->after, after))
            continue;
        *p = c->pair;
        p->borrowed = true;
        return true;
    }
    return false;
}

static void dtr__pair_keep(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                           const dtr_placement_t *after, dtr__pair_t *p) {
    dtr__plan_memo_t *memo = ctx->memo;
    if (memo == NULL || memo->npairs == DTR__PAIR_CACHE) return;
    struct dtr__cached_pair *c = malloc(sizeof *c);
    if (c == NULL) return;
    memcpy(c->before, before, (size_t)ctx->mdims * sizeof *before);
    memcpy(c->after, after, (size_t)ctx->mdims * sizeof *after);
    c->pair = *p;
    memo->pairs[memo->npairs++] = c;
    p->borrowed = true;
}

void dtr__pair_cache_free(dtr__plan_memo_t *memo) {
    for (int k = 0; k < memo->npairs; k++) {
        memo->pairs[k]->pair.borrowed = false;
        dtr__pair_free(&memo->pairs[k]->pair);
        free(memo->pairs[k]);
    }
    memo->npairs = 0;
}

bool dtr__pair_init(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                    const dtr_placement_t *after, bool cells, const dtr__reps_t *r,
                    dtr__pair_t *p) {
    p->store = NULL;
    p->sums_store = NULL;
    p->borrowed = false;
    if (dtr__even_off) return false; /* (the test hook: every rank visited as it was) */
    bool every = true; /* every table visits every coordinate of its mesh dims */
    int64_t entries[DTR_MAX_TENSOR_DIMS], total = 0;
    for (int d = 0; d < ctx->ndim; d++) {
        dtr__table_t *tb = &p->t[d];
        if (ctx->shape[d] > INT32_MAX) return false; /* (32-bit terms) */
        tb->k = 0;
        entries[d] = 1;
        memset(tb->stride, 0, sizeof tb->stride);
        for (int i = 0; i < ctx->mdims; i++) {
            bool splits = (before[i].kind == DTR_SHARD && before[i].dim == d) ||
                          (after[i].kind == DTR_SHARD && after[i].dim == d);
            if (!splits || ctx->msize[i] == 1) continue;
            tb->dims[tb->k] = i;
            tb->radix[tb->k] = r->all[i] ? ctx->msize[i] : r->n[i];
            every = every && r->all[i];
            entries[d] *= tb->radix[tb->k++];
            if (entries[d] > DTR__TABLE_MAX) return false;
        }
        /* The largest radix fastest: the walks and the rank loops carry least often. */
        for (int q = 1; q < tb->k; q++)
            for (int j = q; j > 0 && tb->radix[j - 1] > tb->radix[j]; j--) {
                int di = tb->dims[j];
                int64_t ra = tb->radix[j];
                tb->dims[j] = tb->dims[j - 1];
                tb->radix[j] = tb->radix[j - 1];
                tb->dims[j - 1] = di;
                tb->radix[j - 1] = ra;
            }
        for (int q = tb->k - 1, stride = 1; q >= 0; stride *= (int)tb->radix[q], q--)
            tb->stride[tb->dims[q]] = stride;
        total += entries[d];
        if (total > DTR__TABLE_MAX) return false;
    }
    bool keep = every && total >= DTR__PAIR_CACHE_MIN;
    if (keep && dtr__pair_cached(ctx, before, after, cells, p)) return true;
    p->store = malloc((size_t)(total > 0 ? total : 1) * sizeof *p->store);
    if (cells) p->sums_store = malloc((size_t)(total > 0 ? total : 1) * sizeof *p->sums_store);
    if (p->store == NULL || (cells && p->sums_store == NULL)) {
        dtr__pair_free(p);
        return false; /* (the caller visits every rank) */
    }
    bool ok = true;
    for (int d = 0, first = 0; ok && d < ctx->ndim; first += (int)entries[d], d++) {
        p->t[d].terms = p->store + first;
        p->t[d].sums = cells ? p->sums_store + first : NULL;
        ok = dtr__table_fill(ctx, before, after, r, d, &p->t[d]);
    }
    if (!ok) dtr__pair_free(p);
    if (ok && keep) dtr__pair_keep(ctx, before, after, p);
    return ok;
}

void dtr__pair_free(dtr__pair_t *p) {
    if (!p->borrowed) {
        free(p->store);
        free(p->sums_store);
    }
    p->store = NULL;
    p->sums_store = NULL;
}

bool dtr__exchange_figures_tables(const dtr__ctx_t *ctx, dtr_step_t *s, const dtr__reps_t *r,
                                  const bool *vary) {
    dtr__pair_t p;
    if (!dtr__pair_init(ctx, s->before, s->after, true, r, &p)) return false;
    __int128 K = 1; /* peers along varying mesh dims that shard nothing "after" */
    for (int i = 0; i < ctx->mdims; i++)
        if (s->before[i].kind == DTR_SHARD && s->after[i].kind != DTR_SHARD) K *= ctx->msize[i];
    dtr__cursor_t cur;
    dtr__cursor_init(ctx, r, vary, &p, 1, &cur);
    s->recv_bytes_max = s->send_bytes_max = s->extra_bytes_max = 0;
    s->peers_max = 0;
    do {
        __int128 numel = 1, self = 1, sum = K, sources = 1;
        for (int d = 0; d < ctx->ndim; d++) {
            int64_t e = p.cur[d];
            const dtr__term_t *t = &p.t[d].terms[e];
            numel *= t->alen;
            self *= t->meet;
            sum *= p.t[d].sums[e].sum;
            sources *= p.t[d].sums[e].hits;
        }
        /* as kind_exchange.c's moves and plan.c's dtr__step_figures_at */
        int64_t recv = dtr__sat((numel - self) * ctx->item);
        int64_t send = dtr__sat((sum - self) * ctx->item);
        int peers = (int)(sources - (self > 0));
        int64_t extra = dtr__sat((__int128)dtr__sat(numel * ctx->item) + recv);
        if (recv > s->recv_bytes_max) s->recv_bytes_max = recv;
        if (send > s->send_bytes_max) s->send_bytes_max = send;
        if (extra > s->extra_bytes_max) s->extra_bytes_max = extra;
        if (peers > s->peers_max) s->peers_max = peers;
    } while (dtr__cursor_next(&cur));
    dtr__pair_free(&p);
    return true;
}

bool dtr__plan_recv_tables(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const dtr__reps_t *r,
                           const bool *vary, __int128 *best_out) {
    dtr__pair_t p[DTR_MAX_PLAN_STEPS];
    int built = 0;
    bool ok = !dtr__even_off;
    for (int k = 0; ok && k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        ok = dtr__kind_of(s)->recv_terms != NULL &&
             dtr__pair_init(ctx, s->before, s->after, false, r, &p[k]);
        built += ok;
    }
    if (ok) {
        dtr__cursor_t cur;
        dtr__cursor_init(ctx, r, vary, p, plan->nsteps, &cur);
        __int128 best = 0;
        do {
            __int128 total = 0;
            for (int k = 0; k < plan->nsteps; k++) {
                const dtr__term_t *t[DTR_MAX_TENSOR_DIMS];
                for (int d = 0; d < ctx->ndim; d++) t[d] = &p[k].t[d].terms[p[k].cur[d]];
                /* (as dtr__step_rank_recv: bytes, saturated, per step) */
                const dtr_step_t *s = &plan->steps[k];
                total += dtr__sat(dtr__kind_of(s)->recv_terms(ctx, s, t) * ctx->item);
            }
            if (total > best) best = total;
        } while (dtr__cursor_next(&cur));
        *best_out = best;
    }
    for (int k = 0; k < built; k++) dtr__pair_free(&p[k]);
    return ok;
}
