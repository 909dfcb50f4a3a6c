/*
 * The order in which Partial mesh dims are reduced (docs/semantics.md, "Mixed Partial ops").
 *
 * A tensor that is Partial on several mesh dims with ops that do not commute, such as
 * [P(sum), P(max)], is the reduction of its contributions innermost mesh dim first, as in
 * PyTorch 2.4 and later: max over mesh dim 1, then sum over mesh dim 0. Sum and avg commute
 * with each other and every op with itself; a mesh dim of one rank holds one contribution
 * and commutes with everything.
 *
 * A plan keeps the tensor's value when no reduction of a mesh dim comes before the
 * reduction of a later mesh dim whose op does not commute with it. The Partial dims the
 * target keeps count as reduced after the plan: a target that keeps P(sum) on mesh dim 1
 * while mesh dim 0's P(max) is reduced would change the value, so the optimal strategy
 * reduces such a kept dim too and makes it Partial again at the end (dtr__partials_forced).
 */
#include <stdio.h>

#include "redistribute/planner/internal.h"

/* A tensor without elements has no value to keep: any order will do. */
static bool dtr__no_elements(const dtr__ctx_t *ctx) {
    for (int d = 0; d < ctx->ndim; d++)
        if (ctx->shape[d] == 0) return true;
    return false;
}

bool dtr__ops_commute(dtr_reduce_op_t a, dtr_reduce_op_t b) {
    bool a_sum = a == DTR_REDUCE_SUM || a == DTR_REDUCE_AVG;
    bool b_sum = b == DTR_REDUCE_SUM || b == DTR_REDUCE_AVG;
    return a == b || (a_sum && b_sum);
}

/* Source Partial dims of more than one rank: reduced (the target is not Partial there) or
 * kept (the target is the same Partial). */
static void dtr__partial_sets(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                              const dtr_placement_t *dst, unsigned *reduced, unsigned *kept) {
    *reduced = *kept = 0;
    if (dtr__no_elements(ctx)) return;
    for (int i = 0; i < ctx->mdims; i++) {
        if (src[i].kind != DTR_PARTIAL || ctx->msize[i] == 1) continue;
        if (dst[i].kind == DTR_PARTIAL)
            *kept |= 1u << i;
        else
            *reduced |= 1u << i;
    }
}

/* Do the reductions of mesh dims s and k commute? (A zero-filled dim's do with any.) */
static bool dtr__dims_commute(const dtr__ctx_t *ctx, const dtr_placement_t *src, int s, int k) {
    return ((ctx->disjoint >> s) & 1) || ((ctx->disjoint >> k) & 1) ||
           dtr__ops_commute(src[s].op, src[k].op);
}

/* Does some dim of `outer` before k hold an op that does not commute with k's? */
static bool dtr__blocks(const dtr__ctx_t *ctx, const dtr_placement_t *src, unsigned outer,
                        int k) {
    for (int s = 0; s < k; s++)
        if ((outer >> s & 1) && !dtr__dims_commute(ctx, src, s, k)) return true;
    return false;
}

unsigned dtr__partials_forced(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                              const dtr_placement_t *dst) {
    unsigned reduced, kept, forced = 0;
    dtr__partial_sets(ctx, src, dst, &reduced, &kept);
    /* Ascending: a kept dim forced into the reduction may force a later one in turn. */
    for (int k = 0; k < ctx->mdims; k++)
        if ((kept >> k & 1) && dtr__blocks(ctx, src, reduced | forced, k)) forced |= 1u << k;
    return forced;
}

bool dtr__partials_mixed(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst) {
    unsigned reduced, kept;
    dtr__partial_sets(ctx, src, dst, &reduced, &kept);
    reduced |= dtr__partials_forced(ctx, src, dst);
    for (int k = 0; k < ctx->mdims; k++)
        if ((reduced >> k & 1) && dtr__blocks(ctx, src, reduced, k)) return true;
    return false;
}

bool dtr__reduction_order_ok(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_plan_t *plan, char *why, size_t len) {
    /* The reductions in plan order, then the source Partial dims no step reduces. */
    int dims[2 * DTR_MAX_MESH_DIMS], n = 0;
    unsigned done = 0;
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        int i = s->mesh_dim;
        if (i < 0 || s->from.kind != DTR_PARTIAL || s->to.kind == DTR_PARTIAL) continue;
        if (ctx->msize[i] == 1 || (done >> i & 1)) continue;
        done |= 1u << i;
        dims[n++] = i;
    }
    if (dtr__no_elements(ctx)) return true;
    int nreduced = n;
    for (int i = ctx->mdims - 1; i >= 0; i--)
        if (src[i].kind == DTR_PARTIAL && ctx->msize[i] > 1 && !(done >> i & 1)) dims[n++] = i;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int x = dims[a], y = dims[b];
            if (x > y || dtr__dims_commute(ctx, src, x, y)) continue;
            if (why != NULL) {
                char px[32], py[32];
                dtr_placement_format(src[x], px, sizeof px);
                dtr_placement_format(src[y], py, sizeof py);
                if (b < nreduced)
                    snprintf(why, len,
                             "it reduces mesh dim %d's %s before mesh dim %d's %s, but mixed "
                             "Partial ops are reduced innermost mesh dim first",
                             x, px, y, py);
                else
                    snprintf(why, len,
                             "it reduces mesh dim %d's %s but keeps mesh dim %d's %s, which "
                             "the value reduces first (mixed Partial ops are reduced "
                             "innermost mesh dim first)",
                             x, px, y, py);
            }
            return false;
        }
    return true;
}

/* A new P(sum) divides by its mesh size; a Partial product reduced before it (a later mesh
 * dim) would multiply the divided values. */
static bool dtr__scale_ok(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                          const dtr_placement_t *dst, char *why, size_t len) {
    for (int i = 0; i < ctx->mdims; i++) {
        if (src[i].kind != DTR_REPLICATE || dst[i].kind != DTR_PARTIAL ||
            dst[i].op != DTR_REDUCE_SUM || ctx->msize[i] == 1)
            continue;
        for (int j = i + 1; j < ctx->mdims; j++)
            if (dst[j].kind == DTR_PARTIAL && dst[j].op == DTR_REDUCE_PRODUCT && ctx->msize[j] > 1) {
                snprintf(why, len,
                         "mesh dim %d: R -> P(sum) divides by %lld, but mesh dim %d's "
                         "P(product), reduced first (mixed Partial ops are reduced innermost "
                         "mesh dim first), would multiply the divided values",
                         i, (long long)ctx->msize[i], j);
                return false;
            }
    }
    return true;
}

bool dtr__partials_ok(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                             const dtr_placement_t *dst, bool backward, char *why, size_t len) {
    if (dtr__no_elements(ctx)) return true;
    if (!backward && !dtr__scale_ok(ctx, src, dst, why, len)) return false;
    unsigned reduced, kept, forced = dtr__partials_forced(ctx, src, dst);
    dtr__partial_sets(ctx, src, dst, &reduced, &kept);
    for (int k = 0; k < ctx->mdims; k++) {
        if (!(forced >> k & 1)) continue;
        if (src[k].op != DTR_REDUCE_PRODUCT && !backward) continue;
        int s = 0;
        while (!((reduced | forced) >> s & 1) || dtr__dims_commute(ctx, src, s, k)) s++;
        char pk[32], ps[32];
        dtr_placement_format(src[k], pk, sizeof pk);
        dtr_placement_format(src[s], ps, sizeof ps);
        snprintf(why, len,
                 "mesh dim %d: %s stays, but mesh dim %d's %s is reduced, and mixed Partial ops "
                 "are reduced innermost mesh dim first: keeping the value means reducing mesh "
                 "dim %d too and making it %s again, which %s; make it R in the target",
                 k, pk, s, ps, k, pk,
                 backward ? "a backward plan does not do (its R -> P steps pass values through)"
                          : "no partition of a value into a product allows");
        return false;
    }
    return true;
}
