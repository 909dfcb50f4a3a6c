/* The planner's rules of all_reduce (P -> R on one mesh dim), costed as a ring: a
 * reduce-scatter, then an all-gather, of n chunks of the block. */
#include "redistribute/planner/internal.h"

/* What a ring all-reduce of numel elements over n members moves each way per member. */
static __int128 dtr__ar_ring(__int128 numel, int64_t n) {
    return 2 * (__int128)(n - 1) * (numel / n + (numel % n != 0));
}

static void dtr__ar_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                          dtr__rank_moves_t *out) {
    (void)s;
    out->recv = out->send = dtr__ar_ring(dtr__numel(ctx, v->bs), v->n);
}

static __int128 dtr__ar_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                   const dtr__term_t *const *t) {
    int64_t n = ctx->msize[s->mesh_dim];
    __int128 r = 1;
    for (int d = 0; d < ctx->ndim; d++) r *= t[d]->blen;
    __int128 q = r <= INT64_MAX ? (__int128)((int64_t)r / n) : r / n;
    return 2 * (__int128)(n - 1) * (q + (q * n != r));
}

static double dtr__ar_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    (void)links;
    const dtr_cost_model_t *m = ctx->cost;
    int i = s->mesh_dim;
    return 2.0 * (double)(ctx->msize[i] - 1) * m->alpha_us[i] +
           (double)s->recv_bytes_max / (m->bandwidth_gbps[i] * 1e3);
}

static double dtr__ar_alpha(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    return 2.0 * (double)(ctx->msize[s->mesh_dim] - 1) * ctx->cost->alpha_us[s->mesh_dim];
}

static __int128 dtr__ar_seed_moved(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                                   const int64_t *coord, const int64_t *bs) {
    (void)coord;
    return dtr__ar_ring(dtr__numel(ctx, bs), ctx->msize[plan->steps[k].mesh_dim]);
}

const dtr__kind_t dtr__kind_all_reduce = {
    .info = {"all_reduce", true, "P -> R: reduce, everyone keeps the result"},
    .reduces = true,
    .coalesces = true,
    .seed = true,
    .follows = true,
    .moves = dtr__ar_moves,
    .recv_terms = dtr__ar_recv_terms,
    .time = dtr__ar_time,
    .alpha = dtr__ar_alpha,
    .seed_moved = dtr__ar_seed_moved,
};
