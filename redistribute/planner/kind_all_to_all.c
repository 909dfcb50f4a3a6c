/* The planner's rules of all_to_all (S(a) -> S(b) on one mesh dim: gather a, scatter b at
 * once), with exact counts: no padding. */
#include "redistribute/planner/internal.h"

/* Members of the rank's group that send it something: those whose "before" block is not
 * empty on the dim it gathers. They differ from the rank only on the step's mesh dim, so
 * their cells are the chunks of one parent: full ones, one shorter, empty ones, each taken
 * down the levels below at the rank's coordinates. */
static int dtr__a2a_peers(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                          const int64_t *as, const int64_t *bs) {
    if (dtr__numel(ctx, as) == 0) return 0;
    int d = s->tensor_dim, i = s->mesh_dim;
    int dims[DTR_MAX_MESH_DIMS], k = dtr__shard_seq(s->before, ctx->mdims, d, dims), q = 0;
    int64_t len = ctx->shape[d];
    for (; q < k && dims[q] != i; q++) { /* the parent: the levels above i */
        int64_t n = ctx->msize[dims[q]], c = len / n + (len % n != 0), start = c * coord[dims[q]];
        len = start >= len ? 0 : (start + c < len ? c : len - start);
    }
    if (q == k) return 0; /* (i does not split d before: not an all-to-all of d) */
    int64_t n = ctx->msize[i], c = len / n + (len % n != 0);
    int64_t full = c > 0 ? len / c : 0, rest = len - full * c;
    int64_t lens[2] = {c, rest}, counts[2] = {full, rest > 0};
    int64_t peers = 0;
    for (int x = 0; x < 2; x++) { /* each chunk length down the levels below i */
        int64_t l = lens[x];
        for (int r = q + 1; r < k && l > 0; r++) {
            int64_t m = ctx->msize[dims[r]], cc = l / m + (l % m != 0), start = cc * coord[dims[r]];
            l = start >= l ? 0 : (start + cc < l ? cc : l - start);
        }
        if (l > 0) peers += counts[x];
    }
    return (int)(peers - (bs[d] > 0));
}

static void dtr__a2a_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                           dtr__rank_moves_t *out) {
    int a = s->tensor_dim, b = s->tensor_dim2;
    __int128 rest = dtr__numel_except(ctx, v->bs, a, b);
    out->recv = (__int128)(v->as[a] - v->bs[a]) * v->as[b] * rest;
    out->send = (__int128)v->bs[a] * (v->bs[b] - v->as[b]) * rest;
    out->peers = dtr__a2a_peers(ctx, s, v->coord, v->as, v->bs);
}

/* Even layouts move the same on every rank; otherwise the figures are read over the ranks'
 * representatives (block lengths only: no offsets). */
static void dtr__a2a_figures(const dtr__ctx_t *ctx, dtr_step_t *s) {
    if (dtr__even(ctx, s->before) && dtr__even(ctx, s->after)) {
        int64_t zero[DTR_MAX_MESH_DIMS] = {0};
        dtr__step_figures_at(ctx, s, zero, NULL);
        return;
    }
    dtr__step_figures_each(ctx, s, 0, false);
}

static __int128 dtr__a2a_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                    const dtr__term_t *const *t) {
    int a = s->tensor_dim, b = s->tensor_dim2;
    __int128 r = 1;
    for (int d = 0; d < ctx->ndim; d++)
        r *= d == a ? t[d]->alen - t[d]->blen : d == b ? t[d]->alen : t[d]->blen;
    return r;
}

/* all-to-all-v: a round per peer that sends something */
static double dtr__a2a_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    (void)links;
    const dtr_cost_model_t *m = ctx->cost;
    int i = s->mesh_dim;
    return (double)s->peers_max * m->alpha_us[i] +
           (double)s->recv_bytes_max / (m->bandwidth_gbps[i] * 1e3);
}

static double dtr__a2a_alpha(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    return (double)s->peers_max * ctx->cost->alpha_us[s->mesh_dim];
}

const dtr__kind_t dtr__kind_all_to_all = {
    .info = {"all_to_all", true, "S(a) -> S(b): gather a and scatter b at once"},
    .coalesces = true,
    .per_rank = true,
    .gathers = true,
    .chunks2 = true,
    .follows = true,
    .moves = dtr__a2a_moves,
    .figures = dtr__a2a_figures,
    .recv_terms = dtr__a2a_recv_terms,
    .time = dtr__a2a_time,
    .alpha = dtr__a2a_alpha,
};
