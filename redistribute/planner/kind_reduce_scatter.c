/* The planner's rules of reduce_scatter (P -> S(d) on one mesh dim): the members' blocks
 * reduced, each keeping its chunk of d; chunks padded to the largest. */
#include "redistribute/planner/internal.h"

/* The chunk of d of a block of shape bs over n members, times the other dims: what one
 * member's piece holds (padded). */
static __int128 dtr__rs_piece(const dtr__ctx_t *ctx, const int64_t *bs, int d, int64_t n) {
    int64_t c = bs[d] / n + (bs[d] % n != 0);
    return (__int128)c * dtr__numel_except(ctx, bs, d, -1);
}

static void dtr__rs_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                          dtr__rank_moves_t *out) {
    out->recv = out->send = (v->n - 1) * dtr__rs_piece(ctx, v->bs, s->tensor_dim, v->n);
}

static __int128 dtr__rs_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                   const dtr__term_t *const *t) {
    return dtr__ring_recv_terms(ctx, s, t, false); /* the chunks of the reduced block */
}

static __int128 dtr__rs_seed_moved(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                                   const int64_t *coord, const int64_t *bs) {
    (void)coord;
    const dtr_step_t *s = &plan->steps[k];
    int64_t n = ctx->msize[s->mesh_dim];
    return (n - 1) * dtr__rs_piece(ctx, bs, s->tensor_dim, n);
}

const dtr__kind_t dtr__kind_reduce_scatter = {
    .info = {"reduce_scatter", true, "P -> S(d): reduce, keep chunk of d"},
    .reduces = true,
    .coalesces = true,
    .seed = true,
    .chunks = true,
    .follows = true,
    .moves = dtr__rs_moves,
    .recv_terms = dtr__rs_recv_terms,
    .time = dtr__ring_time,
    .alpha = dtr__ring_alpha,
    .seed_moved = dtr__rs_seed_moved,
};
