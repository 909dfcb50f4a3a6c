/*
 * The planner's rules of reduce_exchange (P -> S(d) on mesh dim i while a later mesh dim
 * shards d): a balanced reduce-scatter-v over the group (balance.c says who reduces what),
 * then an all-to-all-v delivering each reduced part to its owner.
 */
#include "redistribute/planner/internal.h"

static void dtr__rx_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                          dtr__rank_moves_t *out) {
    const int64_t *coord = v->coord, *bs = v->bs, *bo = v->bo, *as = v->as, *ao = v->ao;
    int64_t n = v->n;
    dtr__balance_t own;
    const dtr__balance_t *bal = v->member != NULL ? v->member->bal : &own;
    __int128 h, dl, at, x;
    if (v->member == NULL) {
        dtr__balance_init(ctx, s->before, s->after, s->mesh_dim, coord, &own);
        dtr__balance_share(&own, coord[s->mesh_dim], &at, &x);
    } else {
        x = v->member->share;
    }
    dtr__balance_member(bal, coord[s->mesh_dim], &h, &dl);
    /* phase 1: the other members' contributions to my part, mine to theirs; phase 2: the
     * rest of my target in, my share out */
    out->recv = (__int128)(n - 1) * (h + x) + dl;
    out->send = dtr__numel(ctx, bs) - (h + x) + x;
    /* the packed contributions, then my reduced part; the delivery reuses the first */
    out->stage = (dtr__numel(ctx, bs) > dl ? dtr__numel(ctx, bs) : dl) + h + x;
    /* at most: the group, and the members of each other group holding a piece of my target.
     * The groups differ on the inner dims, which shard only the target's dim d: elsewhere
     * every group's block is mine, so they meet my target where their cells of d do (counted
     * over the inner dims' coordinates, mine among them). */
    int d = s->to.dim;
    bool inner[DTR_MAX_MESH_DIMS], others = true;
    for (int j = 0; j < ctx->mdims; j++) inner[j] = bal->serve[j] && j != s->mesh_dim;
    for (int e = 0; e < ctx->ndim; e++)
        others = others && (e == d || (bo[e] < ao[e] + as[e] && ao[e] < bo[e] + bs[e]));
    __int128 cells = 0, unused;
    if (others) dtr__cells_of(ctx, s->before, d, inner, coord, ao[d], as[d], &unused, &cells);
    bool mine = bo[d] < ao[d] + as[d] && ao[d] < bo[d] + bs[d];
    int64_t groups = others ? (int64_t)(cells - mine) : 0;
    out->peers = (int)((n - 1) + n * groups);
}

/* From the groups' classes on even layouts (even.c); otherwise group by group, its balance
 * once, every member. */
static void dtr__rx_figures(const dtr__ctx_t *ctx, dtr_step_t *s) {
    if (dtr__balance_figures_even(ctx, s)) return;
    int i = s->mesh_dim;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    bool vary[DTR_MAX_MESH_DIMS];
    for (int j = 0; j < ctx->mdims; j++)
        vary[j] = j != i && (s->before[j].kind == DTR_SHARD || s->after[j].kind == DTR_SHARD);
    do {
        dtr__balance_t bal;
        dtr__balance_init(ctx, s->before, s->after, i, coord, &bal);
        __int128 at = 0;
        for (coord[i] = 0; coord[i] < ctx->msize[i]; coord[i]++) {
            dtr__balance_member_t member = {&bal, dtr__balance_next_share(&bal, coord[i], at)};
            at += member.share;
            dtr__step_figures_at(ctx, s, coord, &member);
        }
        coord[i] = 0;
    } while (dtr__next_coord(ctx, vary, coord));
}

static unsigned dtr__rx_positional(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    (void)ctx;
    (void)s;
    return ~0u;
}

/* The group, then the later shards of d its delivery serves. */
static bool dtr__rx_crosses(const dtr_step_t *s, int mdims, const int64_t *msize, int k) {
    (void)mdims;
    (void)msize;
    int i = s->mesh_dim;
    return k == i || (k > i && s->before[k].kind == DTR_SHARD && s->before[k].dim == s->after[i].dim);
}

/* Two operations (the reduce over mesh dim i, then the delivery over the mesh dims the
 * targets vary on), their pack and unpack passes like an exchange's. */
static double dtr__rx_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    const dtr_cost_model_t *m = ctx->cost;
    int i = s->mesh_dim;
    double alpha = m->alpha_us[i], bw = m->bandwidth_gbps[i];
    for (int k = 0; k < ctx->mdims; k++) {
        if (!(links >> k & 1)) continue;
        if (m->alpha_us[k] > alpha) alpha = m->alpha_us[k];
        if (m->bandwidth_gbps[k] < bw) bw = m->bandwidth_gbps[k];
    }
    return s->peers_max * alpha + (double)s->recv_bytes_max / (bw * 1e3) +
           (double)(s->send_bytes_max + s->extra_bytes_max) / (m->local_gbps * 1e3);
}

const dtr__kind_t dtr__kind_reduce_exchange = {
    .info = {"reduce_exchange", true,
             "P -> S(d) under a later shard of d: reduce balanced parts over the mesh dim, "
             "then send each part to its owner"},
    .reduces = true,
    .per_rank = true,
    .varies_even = true,
    .moves = dtr__rx_moves,
    .figures = dtr__rx_figures,
    .positional = dtr__rx_positional,
    .crosses = dtr__rx_crosses,
    .time = dtr__rx_time,
};
