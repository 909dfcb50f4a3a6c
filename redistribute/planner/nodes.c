/*
 * The planner's view of nodes (a node-aware cost model, dtr_cost_model_nodes): the bytes a
 * step brings into one node from the others. The ranks of a node share its link, so what
 * limits a step over nodes is the busiest node's total, not one rank's: a collective over a
 * mesh dim that crosses nodes brings every rank's bytes across, but an exchange may serve
 * some ranks inside their node and others from outside it (its row's node_most,
 * kind_exchange.c).
 */
#include "redistribute/planner/internal.h"

int64_t dtr__node_ranks(const dtr__ctx_t *ctx, unsigned across) {
    int64_t n = 1;
    for (int k = 0; k < ctx->mdims; k++)
        if (!(across >> k & 1)) n *= ctx->msize[k];
    return n;
}

void dtr__step_node_bytes(const dtr__ctx_t *ctx, dtr_step_t *s) {
    unsigned across = ctx->cost->across_nodes;
    s->node_recv_bytes_max = 0;
    if ((dtr__step_links(s, ctx->mdims, ctx->msize) & across) == 0) return;
    __int128 most = (__int128)s->recv_bytes_max * dtr__node_ranks(ctx, across), elems;
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (kind->node_most != NULL && kind->node_most(ctx, s, across, &elems))
        most = elems * ctx->item;
    s->node_recv_bytes_max = dtr__sat(most);
}
