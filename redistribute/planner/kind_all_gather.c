/* The planner's rules of all_gather (S(d) -> R on one mesh dim): every member's chunk of d,
 * padded to the largest, as NCCL needs equal counts. */
#include <string.h>

#include "redistribute/planner/internal.h"

static void dtr__ag_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                          dtr__rank_moves_t *out) {
    int a = s->tensor_dim;
    int64_t c = v->as[a] / v->n + (v->as[a] % v->n != 0);
    out->recv = out->send = (__int128)(v->n - 1) * c * dtr__numel_except(ctx, v->as, a, -1);
}

__int128 dtr__ring_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                              const dtr__term_t *const *t, bool after) {
    int64_t n = ctx->msize[s->mesh_dim];
    __int128 r = 1;
    for (int d = 0; d < ctx->ndim; d++) {
        int64_t len = after ? t[d]->alen : t[d]->blen;
        r *= d == s->tensor_dim ? len / n + (len % n != 0) : len;
    }
    return (n - 1) * r;
}

static __int128 dtr__ag_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                   const dtr__term_t *const *t) {
    return dtr__ring_recv_terms(ctx, s, t, true); /* the chunks of the gathered block */
}

/* n - 1 rounds on the mesh dim's link (all-gather and reduce-scatter alike) */
double dtr__ring_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    (void)links;
    const dtr_cost_model_t *m = ctx->cost;
    int i = s->mesh_dim;
    return (double)(ctx->msize[i] - 1) * m->alpha_us[i] +
           (double)s->recv_bytes_max / (m->bandwidth_gbps[i] * 1e3);
}

double dtr__ring_alpha(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    return (double)(ctx->msize[s->mesh_dim] - 1) * ctx->cost->alpha_us[s->mesh_dim];
}

/* The seed's gather concatenates the members' blocks: padded to the largest of them. */
static __int128 dtr__ag_seed_moved(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                                   const int64_t *coord, const int64_t *bs) {
    const dtr_step_t *s = &plan->steps[k];
    int i = s->mesh_dim, a = s->tensor_dim;
    int64_t n = ctx->msize[i], member[DTR_MAX_MESH_DIMS], ms[DTR_MAX_TENSOR_DIMS], c = 0;
    memcpy(member, coord, (size_t)ctx->mdims * sizeof *member);
    for (int64_t m = 0; m < n; m++) {
        member[i] = m;
        dtr__seed_block(ctx, plan, k, member, ms);
        if (ms[a] > c) c = ms[a];
    }
    return (__int128)(n - 1) * c * dtr__numel_except(ctx, bs, a, -1);
}

const dtr__kind_t dtr__kind_all_gather = {
    .info = {"all_gather", true, "S(d) -> R: gather the chunks of dim d"},
    .coalesces = true,
    .seed = true,
    .gathers = true,
    .follows = true,
    .moves = dtr__ag_moves,
    .recv_terms = dtr__ag_recv_terms,
    .time = dtr__ring_time,
    .alpha = dtr__ring_alpha,
    .seed_moved = dtr__ag_seed_moved,
};
