/*
 * The planner's view of nodes (a node-aware cost model, dtr_cost_model_nodes): the bytes a
 * step brings into one node from the others. The ranks of a node share its link, so what
 * limits a step over nodes is the busiest node's total, not one rank's: a collective over a
 * mesh dim that crosses nodes brings every rank's bytes across, but an exchange may serve
 * some ranks inside their node and others from outside it.
 */
#include <stdlib.h>

#include "redistribute/planner/internal.h"

/* Past this many coordinates to visit, an exchange is charged as if every rank's bytes
 * crossed (what a collective over the dim would bring). */
#define DTR__NODE_COORDS_MAX (1 << 14)

int64_t dtr__node_ranks(const dtr__ctx_t *ctx, unsigned across) {
    int64_t n = 1;
    for (int k = 0; k < ctx->mdims; k++)
        if (!(across >> k & 1)) n *= ctx->msize[k];
    return n;
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

void dtr__step_node_bytes(const dtr__ctx_t *ctx, dtr_step_t *s) {
    unsigned across = ctx->cost->across_nodes;
    s->node_recv_bytes_max = 0;
    if ((dtr__step_links(s, ctx->mdims, ctx->msize) & across) == 0) return;
    __int128 most = (__int128)s->recv_bytes_max * dtr__node_ranks(ctx, across), elems;
    if (s->kind == DTR_STEP_EXCHANGE && dtr__exchange_node_max(ctx, s, across, &elems))
        most = elems * ctx->item;
    s->node_recv_bytes_max = dtr__sat(most);
}
