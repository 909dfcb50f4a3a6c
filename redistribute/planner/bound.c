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
 *    This is the collective model (docs/design.md, "Minimal bytes per rank"): each reduction is done by the
 *    mesh dim's groups on their own data, as every plan here does. Replicas holding the same
 *    contributions could share that work across groups and go lower; the bound does not
 *    claim those algorithms.
 *  - balanced reduction: when the change is P -> S(d) on mesh dim k alone and a later mesh
 *    dim shards d, a member of r's k-group cannot have its target reduced in place. Under
 *    the same model, with each element reduced at one member that receives the other n-1
 *    contributions (as docs/design.md's reduce-scatter figure counts), member a reducing z
 *    elements receives at least (n-1)z + |T_a| - min(h_a, z) (h_a: the part of T_a in the
 *    group's block C; every element of T_a it did not reduce arrives once), and the members
 *    reduce all of C between them. The least level at which that is possible
 *    (dtr__balance_bound in balance.c) bounds the busiest member; the reduce_exchange step
 *    meets it where reducing home pieces at home costs nothing, as on even shapes.
 * Single-mesh-dim changes of even shapes meet it: all-gather (n-1)S/n, reduce-scatter
 * (n-1)S/n, all-reduce 2(n-1)S/n, all-to-all (n-1)S/n^2, local steps 0, and the exchange
 * |T_r \ C_r| exactly (docs/design.md, "Minimal bytes per rank").
 */
/* What the bound's per-rank terms need of the change, the same at every rank. */
typedef struct {
    const dtr_placement_t *src, *dst;
    dtr_placement_t cl[DTR_MAX_MESH_DIMS], tl[DTR_MAX_MESH_DIMS];
    bool reduces, zero_fill;
    int nreduced;                                       /* mesh dims reduced from Partial */
    int reduced[DTR_MAX_MESH_DIMS];                     /* which, */
    dtr_placement_t ul[DTR_MAX_MESH_DIMS][DTR_MAX_MESH_DIMS]; /* and tl with it replicated */
} dtr__need_t;

static void dtr__need_init(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                           const dtr_placement_t *dst, dtr__need_t *nd) {
    nd->src = src;
    nd->dst = dst;
    nd->reduces = dtr__bound_layouts(ctx, src, dst, nd->cl, nd->tl);
    nd->zero_fill = dtr__zero_fill_dims(ctx, src, dst) != 0;
    nd->nreduced = 0;
    for (int k = 0; k < ctx->mdims; k++) {
        if (!(src[k].kind == DTR_PARTIAL && dst[k].kind != DTR_PARTIAL) || ctx->msize[k] == 1)
            continue;
        memcpy(nd->ul[nd->nreduced], nd->tl, sizeof nd->tl);
        nd->ul[nd->nreduced][k] = dtr_replicate();
        nd->reduced[nd->nreduced++] = k;
    }
}

/* What the rank at coord must receive in any plan, from its own blocks alone (the bound's
 * per-rank terms; the balanced reduction adds a term per group). */
static __int128 dtr__need_at(const dtr__ctx_t *ctx, const dtr__need_t *nd, const int64_t *coord) {
    int64_t ts[DTR_MAX_TENSOR_DIMS], to[DTR_MAX_TENSOR_DIMS], cs[DTR_MAX_TENSOR_DIMS],
        co[DTR_MAX_TENSOR_DIMS];
    dtr__layout(ctx, nd->tl, coord, ts, to);
    dtr__layout(ctx, nd->cl, coord, cs, co);
    /* Shard -> P(sum): only the values the rank keeps are needed, the rest are zeros. Its
     * own source block is among them, so the overlaps below stay as they are. */
    __int128 kept = nd->zero_fill ? dtr__zero_fill_kept(ctx, nd->src, nd->dst, coord, ts, to) : -1;
    __int128 t = kept >= 0 ? kept : dtr__numel(ctx, ts);
    __int128 need = nd->reduces ? t : t - dtr__overlap(ctx, ts, to, cs, co);
    for (int r = 0; r < nd->nreduced; r++) {
        int k = nd->reduced[r];
        int64_t us[DTR_MAX_TENSOR_DIMS], uo[DTR_MAX_TENSOR_DIMS];
        dtr__layout(ctx, nd->ul[r], coord, us, uo);
        __int128 u = dtr__overlap(ctx, us, uo, cs, co);
        __int128 moved = dtr__reduce_moved(nd->dst[k].kind == DTR_REPLICATE, u, ctx->msize[k]);
        if (moved > need) need = moved;
    }
    return need;
}

int64_t dtr__need_bytes_at(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                           const dtr_placement_t *dst, const int64_t *coord) {
    dtr__need_t nd;
    dtr__need_init(ctx, src, dst, &nd);
    return dtr__sat(dtr__need_at(ctx, &nd, coord) * ctx->item);
}

/* The per-rank terms' largest value from tables per tensor dim (tables.c): t and its
 * overlap with C from the pair (cl, tl), each reduced mesh dim's u from (cl, ul). False
 * where the tables do not apply. */
static bool dtr__need_max_tables(const dtr__ctx_t *ctx, const dtr__need_t *nd,
                                 const dtr__reps_t *reps, const bool *vary, __int128 *best) {
    dtr__pair_t p[1 + DTR_MAX_MESH_DIMS];
    int built = 0;
    bool ok = dtr__pair_init(ctx, nd->cl, nd->tl, false, reps, &p[0]);
    built += ok;
    for (int r = 0; ok && r < nd->nreduced; r++) {
        ok = dtr__pair_init(ctx, nd->cl, nd->ul[r], false, reps, &p[1 + r]);
        built += ok;
    }
    if (ok) {
        /* As dtr__need_at. A reduction's moved elements grow with its u, so each reduced
         * mesh dim's largest u over the ranks gives its most. */
        __int128 umax[DTR_MAX_MESH_DIMS] = {0};
        dtr__cursor_t cur;
        dtr__cursor_init(ctx, reps, vary, p, built, &cur);
        do {
            __int128 tn = 1, ov = 1;
            for (int d = 0; d < ctx->ndim; d++) {
                const dtr__term_t *t = &p[0].t[d].terms[p[0].cur[d]];
                tn *= t->alen;
                ov *= t->meet;
            }
            __int128 need = nd->reduces ? tn : tn - ov;
            if (need > *best) *best = need;
            for (int r = 0; r < nd->nreduced; r++) {
                __int128 u = 1;
                for (int d = 0; d < ctx->ndim; d++) u *= p[1 + r].t[d].terms[p[1 + r].cur[d]].meet;
                if (u > umax[r]) umax[r] = u;
            }
        } while (dtr__cursor_next(&cur));
        for (int r = 0; r < nd->nreduced; r++) {
            int k = nd->reduced[r];
            __int128 moved = dtr__reduce_moved(nd->dst[k].kind == DTR_REPLICATE, umax[r], ctx->msize[k]);
            if (moved > *best) *best = moved;
        }
    }
    for (int k = 0; k < built; k++) dtr__pair_free(&p[k]);
    return ok;
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
    __int128 best = 0;
    dtr__need_t nd;
    dtr__need_init(ctx, src, dst, &nd);
    /* The per-rank terms over coordinates standing for every rank (reps.c): they read the
     * offsets where the target (or its reduced form) and the source split one tensor dim
     * differently; a zero fill reads more, so every coordinate. */
    const dtr_placement_t *layouts[2 + DTR_MAX_MESH_DIMS] = {nd.cl, nd.tl};
    unsigned positional = nd.zero_fill ? ~0u : dtr__both_split(ctx, nd.tl, nd.cl);
    for (int r = 0; r < nd.nreduced; r++) {
        layouts[2 + r] = nd.ul[r];
        positional |= dtr__both_split(ctx, nd.ul[r], nd.cl);
    }
    dtr__reps_t reps;
    dtr__reps_init(ctx, layouts, 2 + nd.nreduced, positional, &reps);
    if (nd.zero_fill || !dtr__need_max_tables(ctx, &nd, &reps, vary, &best)) {
        int64_t coord[DTR_MAX_MESH_DIMS], at[DTR_MAX_MESH_DIMS] = {0};
        dtr__reps_first(ctx, &reps, coord);
        do {
            __int128 need = dtr__need_at(ctx, &nd, coord);
            if (need > best) best = need;
        } while (dtr__reps_next(ctx, &reps, vary, coord, at));
    }
    /* The balanced reductions' terms, once a group (coordinate 0 on its mesh dim). */
    for (int k = 0; k < ctx->mdims; k++) {
        if (ctx->msize[k] == 1 || !dtr__balance_applies(ctx, src, dst, k)) continue;
        bool groups[DTR_MAX_MESH_DIMS];
        memcpy(groups, vary, sizeof groups);
        groups[k] = false;
        int64_t coord[DTR_MAX_MESH_DIMS] = {0};
        do {
            dtr__balance_t bal;
            dtr__balance_init(ctx, src, dst, k, coord, &bal);
            __int128 m = dtr__balance_bound(&bal);
            if (m > best) best = m;
        } while (dtr__next_coord(ctx, groups, coord));
    }
    return dtr__sat(best * ctx->item);
}
