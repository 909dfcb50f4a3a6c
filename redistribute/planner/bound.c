/* The lower bound of a change, every plan's figures are set against (plan.c). */
#include <string.h>

#include "redistribute/planner/internal.h"

/*
 * The lower bound on the bytes the busiest rank must receive, max over ranks r of:
 *  - layout: every element of r's target block T_r that r does not hold must arrive, so at
 *    least |T_r \ C_r| elements (C_r: r's source block). When some Partial mesh dim is
 *    reduced, every element of T_r needs at least one element's worth from elsewhere (the
 *    other contributions, combined or not), so |T_r|.
 *  - reduction along each mesh dim k that goes from Partial to R or S(d), over its n ranks
 *    (r's k-group: the ranks that differ from r only on k): the group must combine the n
 *    contributions of every element it holds and its members need, W_r = C_r ∩ U_r (U_r:
 *    T_r with k replicated, the union of the members' targets). Each combination of two
 *    contributions moves one element, so the group receives at least (n-1)|W_r| in all and
 *    its busiest member (n-1)|W_r|/n. When the target is R, each member also needs the
 *    (n-1)|W_r|/n results it did not combine itself: 2(n-1)|W_r|/n, the all-reduce bound.
 *    This is the collective model (DESIGN.md's table): each reduction is done by the
 *    mesh dim's groups on their own data, as every plan here does. Replicas holding the same
 *    contributions could share that work across groups and go lower; the bound does not
 *    claim those algorithms.
 *  - balanced reduction: when the change is P -> S(d) on mesh dim k alone and a later mesh
 *    dim shards d, a member of r's k-group cannot have its target reduced in place. Under
 *    the same model, with each element reduced at one member that receives the other n-1
 *    contributions (as DESIGN.md's reduce-scatter figure counts), member a reducing z
 *    elements receives at least (n-1)z + |T_a| - min(h_a, z) (h_a: the part of T_a in the
 *    group's block C; every element of T_a it did not reduce arrives once), and the members
 *    reduce all of C between them. The least level at which that is possible
 *    (dtr__balance_bound in balance.c) bounds the busiest member; the reduce_exchange step
 *    meets it where reducing home pieces at home costs nothing, as on even shapes.
 * Single-mesh-dim changes of even shapes meet it: all-gather (n-1)S/n, reduce-scatter
 * (n-1)S/n, all-reduce 2(n-1)S/n, all-to-all (n-1)S/n^2, local steps 0, and the exchange
 * |T_r \ C_r| exactly (DESIGN.md's table).
 */
/* What the rank at coord must receive in any plan, from its own blocks alone (the bound's
 * per-rank terms; the balanced reduction adds a term per group). */
static __int128 dtr__need_at(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, const int64_t *coord) {
    dtr_placement_t cl[DTR_MAX_MESH_DIMS], tl[DTR_MAX_MESH_DIMS];
    bool reduces = dtr__bound_layouts(ctx, src, dst, cl, tl);
    int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], cs[DTR_MAX_TENSOR_DIMS],
        co[DTR_MAX_TENSOR_DIMS];
    dtr__layout(ctx, tl, coord, ts, to);
    dtr__layout(ctx, cl, coord, cs, co);
    /* Shard -> P(sum): only the values the rank keeps are needed, the rest are zeros. Its
     * own source block is among them, so the overlaps below stay as they are. */
    __int128 kept = dtr__zero_fill_kept(ctx, src, dst, coord, ts, to);
    __int128 t = kept >= 0 ? kept : dtr__numel(ctx, ts);
    __int128 need = reduces ? t : t - dtr__overlap(ctx, ts, to, cs, co);
    for (int k = 0; k < ctx->mdims; k++) {
        int64_t n = ctx->msize[k];
        if (!(src[k].kind == DTR_PARTIAL && dst[k].kind != DTR_PARTIAL) || n == 1) continue;
        dtr_placement_t ul[DTR_MAX_MESH_DIMS];
        memcpy(ul, tl, sizeof ul);
        ul[k] = dtr_replicate();
        int64_t us[DTR_MAX_TENSOR_DIMS], uo[DTR_MAX_TENSOR_DIMS];
        dtr__layout(ctx, ul, coord, us, uo);
        __int128 u = dtr__overlap(ctx, us, uo, cs, co);
        __int128 moved = dtr__reduce_moved(dst[k].kind == DTR_REPLICATE, u, n);
        if (moved > need) need = moved;
    }
    return need;
}

int64_t dtr__need_bytes_at(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                           const dtr_placement_t *dst, const int64_t *coord) {
    return dtr__sat(dtr__need_at(ctx, src, dst, coord) * ctx->item);
}

/* The balanced reduction's terms from the groups' classes (even.c); false where the
 * classes do not apply. */
static bool dtr__balance_bound_classes(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                                       const dtr_placement_t *dst, __int128 *best) {
    for (int k = 0; k < ctx->mdims; k++)
        if (ctx->msize[k] > 1 && dtr__balance_applies(ctx, src, dst, k) &&
            !dtr__balance_bound_even(ctx, src, dst, k, best))
            return false;
    return true;
}

int64_t dtr__lower_bound(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst) {
    __int128 even_best;
    if (dtr__need_max_even(ctx, src, dst, &even_best) &&
        dtr__balance_bound_classes(ctx, src, dst, &even_best))
        return dtr__sat(even_best * ctx->item);
    bool vary[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < ctx->mdims; i++)
        vary[i] = src[i].kind == DTR_SHARD || dst[i].kind == DTR_SHARD;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    __int128 best = 0;
    do {
        __int128 need = dtr__need_at(ctx, src, dst, coord);
        for (int k = 0; k < ctx->mdims; k++) {
            if (ctx->msize[k] == 1 || coord[k] != 0 || /* once a group */
                !dtr__balance_applies(ctx, src, dst, k))
                continue;
            dtr__balance_t bal;
            dtr__balance_init(ctx, src, dst, k, coord, &bal);
            __int128 m = dtr__balance_bound(&bal);
            if (m > need) need = m;
        }
        if (need > best) best = need;
    } while (dtr__next_coord(ctx, vary, coord));
    return dtr__sat(best * ctx->item);
}
