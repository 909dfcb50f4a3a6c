/*
 * The planner's rules of exchange (any layout change over the whole mesh: each rank sends
 * each peer exactly what that peer needs and lacks, one all-to-all-v): a rank's moves, the
 * figures over the ranks (classes on even layouts, per-tensor-dim tables, or the ranks'
 * representatives), the mesh dims it crosses, what it brings into a node, its time.
 */
#include <math.h>
#include <stdlib.h>

#include "redistribute/planner/internal.h"

/* Past this many coordinates to visit, an exchange is charged as if every rank's bytes
 * crossed nodes (what a collective over the dim would bring). */
#define DTR__NODE_COORDS_MAX (1 << 14)

/*
 * Exchange: r's sources are the ranks that agree with r on every mesh dim the "before"
 * placements do not shard (so replicas serve their own side, and Partial contributions stay
 * with their own index); those sources' blocks tile the tensor, so r receives
 * |T_r| - |T_r ∩ C_r|. What r sends, and how many peers it hears from, are sums over peers of
 * products over tensor dims of interval overlaps; a peer's interval on dim d depends only on
 * its coordinates on the mesh dims that shard d, and each mesh dim shards one tensor dim at
 * most, so the sums factor per tensor dim: O(D * prod of those sizes) instead of O(peers).
 */
static void dtr__exchange_rank(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                               const int64_t *ts, const int64_t *to, const int64_t *cs,
                               const int64_t *co, __int128 *send, __int128 *recv, int *peers) {
    __int128 self = dtr__overlap(ctx, ts, to, cs, co);
    *recv = dtr__numel(ctx, ts) - self;
    /* Peers p vary on the mesh dims "before" shards; what p needs (T_p) depends on p's
     * coordinates on the dims "after" shards. */
    bool vary[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < ctx->mdims; i++) vary[i] = s->before[i].kind == DTR_SHARD;
    __int128 send_sum = 1, sources = 1;
    for (int i = 0; i < ctx->mdims; i++) /* varying dims that shard nothing "after" */
        if (vary[i] && s->after[i].kind != DTR_SHARD) send_sum *= ctx->msize[i];
    for (int d = 0; d < ctx->ndim; d++) {
        /* Send: sum over the varying coordinates of the "after" shards of d. */
        bool sub[DTR_MAX_MESH_DIMS] = {false};
        for (int i = 0; i < ctx->mdims; i++)
            sub[i] = vary[i] && s->after[i].kind == DTR_SHARD && s->after[i].dim == d;
        __int128 sum, hits, unused;
        dtr__cells_of(ctx, s->after, d, sub, coord, co[d], cs[d], &sum, &unused);
        send_sum *= sum;
        /* Sources: count the coordinates of the "before" shards of d that overlap T_r. */
        for (int i = 0; i < ctx->mdims; i++)
            sub[i] = vary[i] && s->before[i].dim == d;
        dtr__cells_of(ctx, s->before, d, sub, coord, to[d], ts[d], &unused, &hits);
        sources *= hits;
    }
    /* Every varying mesh dim shards some tensor dim, so the products cover all peers;
     * drop r itself. */
    *send = send_sum - self;
    *peers = (int)(sources - (self > 0));
}

static void dtr__x_moves(const dtr__ctx_t *ctx, const dtr_step_t *s, const dtr__rank_view_t *v,
                         dtr__rank_moves_t *out) {
    dtr__exchange_rank(ctx, s, v->coord, v->as, v->ao, v->bs, v->bo, &out->send, &out->recv,
                       &out->peers);
}

/* Only what one rank receives: two layouts and an overlap, without the sums over peers
 * that sending needs. */
static __int128 dtr__x_recv(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord) {
    int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], cs[DTR_MAX_TENSOR_DIMS],
        co[DTR_MAX_TENSOR_DIMS];
    dtr__layout(ctx, s->after, coord, ts, to);
    dtr__layout(ctx, s->before, coord, cs, co);
    return dtr__numel(ctx, ts) - dtr__overlap(ctx, ts, to, cs, co);
}

/* Even layouts: the figures from classes of ranks (even.c); otherwise, or past its limits,
 * from the tables or over the ranks' representatives, which read the offsets along the
 * tensor dims both layouts split. */
static void dtr__x_figures(const dtr__ctx_t *ctx, dtr_step_t *s) {
    if (dtr__even(ctx, s->before) && dtr__even(ctx, s->after) && dtr__exchange_figures_even(ctx, s))
        return;
    dtr__step_figures_each(ctx, s, dtr__both_split(ctx, s->before, s->after), true);
}

static __int128 dtr__x_recv_terms(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                  const dtr__term_t *const *t) {
    (void)s;
    __int128 r = 1, self = 1;
    for (int d = 0; d < ctx->ndim; d++) {
        r *= t[d]->alen;
        self *= t[d]->meet;
    }
    return r - self;
}

static unsigned dtr__x_positional(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    return dtr__both_split(ctx, s->before, s->after);
}

/* Does "before" split tensor dim d, down to mesh dim k, exactly as "after" does (the same
 * mesh dims of more than one rank, in the same order)? Then a rank's target on d lies in the
 * chunk its own coordinates on those dims pick, which the sources sharing them hold: nothing
 * crosses mesh dim k. */
static bool dtr__same_split_to(const dtr_step_t *s, int mdims, const int64_t *msize, int d,
                               int k) {
    int b[DTR_MAX_MESH_DIMS], a[DTR_MAX_MESH_DIMS];
    int nb = dtr__shard_seq(s->before, mdims, d, b), na = dtr__shard_seq(s->after, mdims, d, a);
    for (int x = 0, y = 0;; x++, y++) {
        while (x < nb && msize[b[x]] <= 1) x++;
        while (y < na && msize[a[y]] <= 1) y++;
        if (x == nb || y == na || b[x] != a[y]) return false;
        if (b[x] == k) return true;
    }
}

/* Peers differ from a rank only where "before" shards. */
static bool dtr__x_crosses(const dtr_step_t *s, int mdims, const int64_t *msize, int k) {
    return s->before[k].kind == DTR_SHARD &&
           !dtr__same_split_to(s, mdims, msize, s->before[k].dim, k);
}

/*
 * Exchange: each element of a rank's target comes from one source, a rank agreeing with it
 * on every mesh dim "before" does not shard; the sources on its node agree with it on the
 * mesh dims across nodes too. So what a rank r brings in from other nodes is
 * |T_r| - prod_d S_d(r), S_d summing what the cells of d's source shards that stay inside
 * the node (taken over their coordinates) share with T_r on d. That depends on r's
 * coordinates on the mesh dims "after" shards and the source shards across nodes (M) only:
 * visit those, and weigh each by the ranks of its node that share it.
 */
static bool dtr__exchange_node_max(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned across,
                                   __int128 *out) {
    bool visit[DTR_MAX_MESH_DIMS];
    int64_t coords = 1, weight = 1, nodes = 1;
    for (int k = 0; k < ctx->mdims; k++) {
        bool x = across >> k & 1;
        visit[k] = ctx->msize[k] > 1 && (s->after[k].kind == DTR_SHARD ||
                                         (x && s->before[k].kind == DTR_SHARD));
        if (visit[k]) {
            coords *= ctx->msize[k];
            if (x) nodes *= ctx->msize[k];
        } else if (!x) {
            weight *= ctx->msize[k];
        }
        if (coords > DTR__NODE_COORDS_MAX) return false;
    }
    /* per tensor dim: its source shards that stay inside the node */
    bool sub[DTR_MAX_TENSOR_DIMS][DTR_MAX_MESH_DIMS];
    for (int d = 0; d < ctx->ndim; d++)
        for (int k = 0; k < ctx->mdims; k++)
            sub[d][k] = s->before[k].kind == DTR_SHARD && s->before[k].dim == d &&
                        !(across >> k & 1);
    __int128 *total = calloc((size_t)nodes, sizeof *total);
    if (total == NULL) return false;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    do {
        int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS];
        dtr__layout(ctx, s->after, coord, ts, to);
        __int128 same = 1;
        for (int d = 0; d < ctx->ndim && same > 0; d++) {
            __int128 sum, hits;
            dtr__cells_of(ctx, s->before, d, sub[d], coord, to[d], ts[d], &sum, &hits);
            same *= sum;
        }
        int64_t node = 0;
        for (int k = 0; k < ctx->mdims; k++)
            if (visit[k] && (across >> k & 1)) node = node * ctx->msize[k] + coord[k];
        total[node] += (dtr__numel(ctx, ts) - same) * weight;
    } while (dtr__next_coord(ctx, visit, coord));
    __int128 most = 0;
    for (int64_t v = 0; v < nodes; v++)
        if (total[v] > most) most = total[v];
    free(total);
    *out = most;
    return true;
}

static double dtr__x_time(const dtr__ctx_t *ctx, const dtr_step_t *s, unsigned links) {
    const dtr_cost_model_t *m = ctx->cost;
    double alpha = 0, bw = INFINITY, bw_in = INFINITY;
    unsigned across = m->across_nodes;
    for (int k = 0; k < ctx->mdims; k++) {
        if (!(links >> k & 1)) continue;
        if (m->alpha_us[k] > alpha) alpha = m->alpha_us[k];
        if (m->bandwidth_gbps[k] < bw) bw = m->bandwidth_gbps[k];
        if (!(across >> k & 1) && m->bandwidth_gbps[k] < bw_in) bw_in = m->bandwidth_gbps[k];
    }
    if (isinf(bw)) bw = m->bandwidth_gbps[0];
    /* Pieces of an exchange are boxes of the blocks: the executor packs what it sends and
     * unpacks what it receives (its own piece included), two local passes that the
     * per-mesh-dim collectives, which move whole rows, do not make. */
    double wire = (double)s->recv_bytes_max / (bw * 1e3);
    if ((links & across) != 0) {
        /* Over nodes, the busiest node's bytes share its link: a rank's part of them at the
         * inter-node rate (all of its bytes where every rank's cross, as in a collective),
         * the rest of the busiest rank's bytes inside the node. */
        double cross = (double)s->node_recv_bytes_max / (double)dtr__node_ranks(ctx, across);
        if (cross > (double)s->recv_bytes_max) cross = (double)s->recv_bytes_max;
        double inside = isinf(bw_in) ? 0 : ((double)s->recv_bytes_max - cross) / (bw_in * 1e3);
        wire = cross / (bw * 1e3) + inside;
    }
    return s->peers_max * alpha + wire +
           (double)(s->send_bytes_max + s->extra_bytes_max) / (m->local_gbps * 1e3);
}

/* The latency a coalesced round pays once: over the mesh dims whose placement changes. */
static double dtr__x_alpha(const dtr__ctx_t *ctx, const dtr_step_t *s) {
    double alpha = 0;
    for (int k = 0; k < ctx->mdims; k++)
        if (!dtr_placement_equal(s->before[k], s->after[k]) && ctx->cost->alpha_us[k] > alpha)
            alpha = ctx->cost->alpha_us[k];
    return (double)s->peers_max * alpha;
}

const dtr__kind_t dtr__kind_exchange = {
    .info = {"exchange", true,
             "any layout change: each rank sends each peer exactly what that peer needs and "
             "lacks (one all-to-all-v over the mesh)"},
    .whole_mesh = true,
    .coalesces = true,
    .quiet_local = true,
    .per_rank = true,
    .varies_even = true,
    .moves = dtr__x_moves,
    .recv = dtr__x_recv,
    .figures = dtr__x_figures,
    .recv_terms = dtr__x_recv_terms,
    .positional = dtr__x_positional,
    .crosses = dtr__x_crosses,
    .node_most = dtr__exchange_node_max,
    .time = dtr__x_time,
    .alpha = dtr__x_alpha,
};
