/*
 * The optimal strategy: build a few plans, each in O(M^2 D) (M mesh dims, D tensor dims),
 * and keep the cheapest under the cost model (ties: less peak memory, then fewer steps,
 * then the earlier candidate):
 *
 *   greedy    per-mesh-dim collectives, all-to-all for S(a) -> S(b) where valid, scheduled
 *             so each step reads the canonical layout it assumes; where no valid step is
 *             left, one exchange finishes the layout change;
 *   safe      replicate then shard, correctly: reduce, gather every mesh dim that is not a
 *             common prefix of its tensor dim's nesting (innermost first), then split
 *             (outermost first);
 *   exchange  reduce, then one exchange to the target layout;
 *   balanced  where only one mesh dim changes, P -> S(d), and a later mesh dim shards d
 *             (no reduce-scatter is valid in place): one reduce_exchange step (balance.c),
 *             which meets the lower bound on even shapes;
 *   compat    the seed plan, when it is safe.
 *
 * With mixed Partial ops (partial_order.c) only candidates that reduce innermost mesh dim
 * first count; safe then does all its reductions that way, so one always does.
 *
 * compat being a candidate is what makes optimal never worse than compat under the model.
 * Every candidate ends with the local Replicate -> Partial steps.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "redistribute/planner/internal.h"

/* What the layout phase aims at: the target, with Partial dims that are Replicate in the
 * source, or kept Partial dims that mixed ops force into the reduction, made Replicate
 * (they become Partial by a local step at the end). */
static void dtr__layout_target(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                               const dtr_placement_t *dst, dtr_placement_t *out) {
    for (int i = 0; i < ctx->mdims; i++) {
        bool forced = ctx->partials_forced >> i & 1;
        out[i] = dst[i].kind == DTR_PARTIAL && (src[i].kind != DTR_PARTIAL || forced)
                     ? dtr_replicate()
                     : dst[i];
    }
}

static void dtr__finish_partials(dtr__builder_t *b, const dtr_placement_t *dst) {
    for (int i = 0; i < b->ctx->mdims; i++)
        if (dst[i].kind == DTR_PARTIAL) dtr__emit(b, i, dst[i]);
}

/* Does mesh dim i shard the same tensor dim at the same nesting level, after the same outer
 * mesh dims (in the shard order), in both placements? Then its chunks already agree. */
static bool dtr__aligned(const dtr_placement_t *a, const dtr_placement_t *b, int m, int i) {
    if (a[i].kind != DTR_SHARD || !dtr_placement_equal(a[i], b[i])) return false;
    int sa[DTR_MAX_MESH_DIMS], sb[DTR_MAX_MESH_DIMS];
    int na = dtr__shard_seq(a, m, a[i].dim, sa), nb = dtr__shard_seq(b, m, b[i].dim, sb);
    for (int k = 0; k < na && k < nb; k++) {
        if (sa[k] != sb[k]) return false;
        if (sa[k] == i) return true;
    }
    return false;
}

/* Shard orders: would a new shard of d at mesh dim i extend the current order of d toward
 * the target's (the mesh dims of more than one rank splitting d so far, then i, are how the
 * target's order begins)? */
static bool dtr__order_next(const dtr__ctx_t *ctx, const dtr_placement_t *cur,
                            const dtr_placement_t *tgt, int i, int d) {
    if (ctx->msize[i] == 1) return true;
    int sc[DTR_MAX_MESH_DIMS], st[DTR_MAX_MESH_DIMS], nc = 0, nt = 0;
    int all[DTR_MAX_MESH_DIMS];
    int n = dtr__shard_seq(cur, ctx->mdims, d, all);
    for (int k = 0; k < n; k++)
        if (ctx->msize[all[k]] > 1) sc[nc++] = all[k];
    sc[nc++] = i;
    n = dtr__shard_seq(tgt, ctx->mdims, d, all);
    for (int k = 0; k < n; k++)
        if (ctx->msize[all[k]] > 1) st[nt++] = all[k];
    if (nc > nt) return false;
    for (int k = 0; k < nc; k++)
        if (sc[k] != st[k]) return false;
    return true;
}

static void dtr__candidate_safe(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                                const dtr_placement_t *dst, dtr_plan_t *plan) {
    dtr_placement_t tgt[DTR_MAX_MESH_DIMS];
    dtr__layout_target(ctx, src, dst, tgt);
    dtr__builder_t b;
    dtr__builder_init(&b, ctx, src, plan);
    if (ctx->partials_ordered) {
        /* Mixed ops: every reduction as an all-reduce, innermost mesh dim first. */
        for (int i = ctx->mdims - 1; i >= 0; i--)
            if (src[i].kind == DTR_PARTIAL && tgt[i].kind != DTR_PARTIAL)
                dtr__emit(&b, i, dtr_replicate());
    }
    for (int i = 0; i < ctx->mdims; i++)
        if (src[i].kind == DTR_PARTIAL && tgt[i].kind == DTR_REPLICATE) dtr__emit(&b, i, tgt[i]);
    for (int i = ctx->mdims - 1; i >= 0; i--)
        if (b.cur[i].kind == DTR_SHARD && !dtr__aligned(src, tgt, ctx->mdims, i))
            dtr__emit(&b, i, dtr_replicate());
    for (int i = 0; i < ctx->mdims; i++)
        if (tgt[i].kind == DTR_SHARD && !dtr_placement_equal(b.cur[i], tgt[i]))
            dtr__emit(&b, i, tgt[i]);
    dtr__finish_partials(&b, dst);
    plan->chosen_by = b.valid ? "safe" : NULL;
}

static void dtr__candidate_exchange(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                                    const dtr_placement_t *dst, dtr_plan_t *plan) {
    dtr_placement_t tgt[DTR_MAX_MESH_DIMS];
    dtr__layout_target(ctx, src, dst, tgt);
    dtr__builder_t b;
    dtr__builder_init(&b, ctx, src, plan);
    /* Reduce-scatters where they are valid in place (they shrink what follows), then
     * all-reduces for the rest. */
    for (int i = 0; i < ctx->mdims; i++)
        if (src[i].kind == DTR_PARTIAL && tgt[i].kind == DTR_SHARD &&
            dtr__innermost(ctx, b.cur, i, tgt[i].dim))
            dtr__emit(&b, i, tgt[i]);
    for (int i = 0; i < ctx->mdims; i++)
        if (b.cur[i].kind == DTR_PARTIAL && tgt[i].kind != DTR_PARTIAL)
            dtr__emit(&b, i, dtr_replicate());
    dtr__emit_exchange(&b, tgt);
    dtr__finish_partials(&b, dst);
    plan->chosen_by = b.valid ? "exchange" : NULL;
}

static void dtr__candidate_balanced(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                                    const dtr_placement_t *dst, dtr_plan_t *plan) {
    dtr_placement_t tgt[DTR_MAX_MESH_DIMS];
    dtr__layout_target(ctx, src, dst, tgt);
    plan->chosen_by = NULL;
    int i = -1;
    for (int k = 0; k < ctx->mdims; k++)
        if (!dtr_placement_equal(src[k], tgt[k])) {
            if (i >= 0) return;
            i = k;
        }
    if (i < 0 || !dtr__balance_applies(ctx, src, tgt, i)) return;
    dtr__builder_t b;
    dtr__builder_init(&b, ctx, src, plan);
    dtr__emit_reduce_exchange(&b, i, tgt[i]);
    dtr__finish_partials(&b, dst);
    plan->chosen_by = b.valid ? "balanced" : NULL;
}

/* Greedy: pending per-mesh-dim changes, run in priority order while one is valid. */
enum { DTR__NONE, DTR__CHUNK, DTR__A2A, DTR__RS, DTR__AR, DTR__AG };

static int dtr__pending_kind(dtr_placement_t cur, dtr_placement_t tgt) {
    if (dtr_placement_equal(cur, tgt)) return DTR__NONE;
    if (cur.kind == DTR_SHARD) /* (the same dim at another place in its order: gather first) */
        return tgt.kind == DTR_SHARD && tgt.dim != cur.dim ? DTR__A2A : DTR__AG;
    if (cur.kind == DTR_PARTIAL) return tgt.kind == DTR_SHARD ? DTR__RS : DTR__AR;
    return DTR__CHUNK; /* R -> S */
}

/* Is a gather of tensor dim d still pending at some mesh dim before i? Splitting d at i
 * first would block it. */
static bool dtr__gather_pending_before(const dtr_placement_t *cur, const dtr_placement_t *tgt,
                                       const bool *resplit, int i, int d) {
    for (int j = 0; j < i; j++)
        if (cur[j].kind == DTR_SHARD && cur[j].dim == d &&
            (resplit[j] || !dtr_placement_equal(cur[j], tgt[j])))
            return true;
    return false;
}

static void dtr__candidate_greedy(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                                  const dtr_placement_t *dst, dtr_plan_t *plan) {
    int M = ctx->mdims;
    dtr_placement_t tgt[DTR_MAX_MESH_DIMS];
    dtr__layout_target(ctx, src, dst, tgt);
    /* A shard kept on the same tensor dim but at another nesting position must be gathered
     * and split again: mark it, its pending step is then a gather. */
    bool resplit[DTR_MAX_MESH_DIMS] = {false};
    for (int i = 0; i < M; i++)
        resplit[i] = src[i].kind == DTR_SHARD && dtr_placement_equal(src[i], tgt[i]) &&
                     !dtr__aligned(src, tgt, M, i);
    bool rs_allowed[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < M; i++) rs_allowed[i] = true;
    dtr__builder_t b;
    dtr__builder_init(&b, ctx, src, plan);
    for (int guard = 0; guard < 4 * M + 4; guard++) {
        int best = -1, best_kind = DTR__NONE, best_prio = 99;
        bool any = false;
        for (int i = 0; i < M; i++) {
            int kind = resplit[i] ? DTR__AG : dtr__pending_kind(b.cur[i], tgt[i]);
            if (kind == DTR__RS && !rs_allowed[i]) kind = DTR__AR;
            if (kind == DTR__NONE) continue;
            any = true;
            bool ok;
            int d = tgt[i].kind == DTR_SHARD ? tgt[i].dim : -1;
            switch (kind) {
            case DTR__CHUNK:
            case DTR__RS:
                ok = ctx->ordered ? dtr__order_next(ctx, b.cur, tgt, i, d)
                                  : dtr__innermost(ctx, b.cur, i, d) &&
                                        !dtr__gather_pending_before(b.cur, tgt, resplit, i, d);
                break;
            case DTR__A2A:
                ok = dtr__innermost(ctx, b.cur, i, b.cur[i].dim) &&
                     (ctx->ordered ? dtr__order_next(ctx, b.cur, tgt, i, d)
                                   : dtr__innermost(ctx, b.cur, i, d) &&
                                         !dtr__gather_pending_before(b.cur, tgt, resplit, i, d));
                break;
            case DTR__AG:
                ok = dtr__innermost(ctx, b.cur, i, b.cur[i].dim);
                break;
            default:
                ok = true;
            }
            if (!ok) continue;
            /* Priority: free splits, all-to-all (innermost first), reduce-scatter, all-reduce,
             * then gathers innermost first; ties by mesh dim in that direction. */
            int prio = kind;
            bool later_wins = kind == DTR__A2A || kind == DTR__AG;
            if (ctx->partials_ordered && kind == DTR__AR) prio = DTR__RS;
            if (ctx->partials_ordered && prio == DTR__RS) later_wins = true; /* mixed ops */
            if (prio < best_prio || (prio == best_prio && later_wins)) {
                best = i;
                best_kind = kind;
                best_prio = prio;
            }
        }
        if (!any) break;
        if (best < 0) {
            /* Stuck. Blocked reduce-scatters become all-reduces (+ a later split); once only
             * layout changes are left, one exchange does them all. */
            bool changed = false;
            for (int i = 0; i < M; i++)
                if (b.cur[i].kind == DTR_PARTIAL && tgt[i].kind == DTR_SHARD && rs_allowed[i]) {
                    rs_allowed[i] = false;
                    changed = true;
                }
            if (changed) continue;
            dtr__emit_exchange(&b, tgt);
            break;
        }
        if (best_kind == DTR__AG) {
            dtr__emit(&b, best, dtr_replicate());
            resplit[best] = false;
        } else if (best_kind == DTR__AR) {
            dtr__emit(&b, best, dtr_replicate());
        } else {
            dtr__emit(&b, best, tgt[best]);
        }
    }
    dtr__finish_partials(&b, dst);
    plan->chosen_by = b.valid ? "greedy" : NULL;
}

/* Does the plan end in the target's placements? (A candidate that cannot follow a shard
 * order ends elsewhere.) */
static bool dtr__reaches(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst, const dtr_plan_t *plan) {
    const dtr_placement_t *end = plan->nsteps > 0 ? plan->steps[plan->nsteps - 1].after : src;
    for (int i = 0; i < ctx->mdims; i++)
        if (!dtr_placement_equal(end[i], dst[i])) return false;
    return true;
}

int64_t dtr__bound_ranks = 1024;
_Atomic int64_t dtr__bound_skips = 0;

/* Builds candidate c into *out; false when it is not one for this change. */
typedef void (*dtr__builder_fn)(const dtr__ctx_t *, const dtr_placement_t *,
                                const dtr_placement_t *, dtr_plan_t *);
static const dtr__builder_fn dtr__builders[] = {dtr__candidate_greedy, dtr__candidate_safe,
                                                dtr__candidate_exchange, dtr__candidate_balanced};
#define DTR__NBUILDERS (int)(sizeof dtr__builders / sizeof dtr__builders[0])

static bool dtr__candidate(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                           int c, dtr_plan_t *out) {
    dtr__builders[c](ctx, src->placements, dst->placements, out);
    if (out->chosen_by == NULL) return false; /* invalid, or (balanced) not for this change */
    if (!dtr__reaches(ctx, src->placements, dst->placements, out)) return false;
    /* (forced dims make the ops mixed: partials_ordered covers them) */
    if (ctx->partials_ordered && !dtr__reduction_order_ok(ctx, src->placements, out, NULL, 0))
        return false;
    dtr__plan_summarize(ctx, src, dst, out);
    return true;
}

/*
 * On large meshes an exchange or balanced step's figures cost O(ranks) (or the number of
 * distinct piece sizes), so the candidates are first built with those steps' figures at
 * coordinate 0 alone (memo.defer): each candidate's time then is a lower bound of its own.
 * The candidate with the least bound is costed in full, and a candidate whose bound exceeds
 * that time by more than a millionth is never costed: it is slower than that candidate by
 * far more than dtr__plan_better's tolerance, so it could win no comparison it would enter
 * and leaves the choice unchanged. The others are costed and compared in the usual order.
 */
dtr_status_t dtr__plan_optimal(const dtr__ctx_t *ctx_in, const dtr_spec_t *src,
                               const dtr_spec_t *dst, dtr_plan_t *plan) {
    dtr__plan_memo_t memo = {.n = 0, .defer = false, .npairs = 0};
    dtr__ctx_t with_memo = *ctx_in;
    with_memo.memo = &memo;
    with_memo.partials_forced = dtr__partials_forced(ctx_in, src->placements, dst->placements);
    with_memo.partials_ordered = dtr__partials_mixed(ctx_in, src->placements, dst->placements);
    const dtr__ctx_t *ctx = &with_memo;
    /* Candidates are built in turn in one scratch plan; the best so far is kept in *plan. */
    dtr_plan_t scratch;
    bool have = false;
    int64_t ranks = 1;
    for (int i = 0; i < ctx->mdims; i++) ranks *= ctx->msize[i];
    bool bounded = ranks >= dtr__bound_ranks && ctx->cost->across_nodes == 0;
    double bound[DTR__NBUILDERS], least = INFINITY;
    if (bounded) {
        int first = -1;
        memo.defer = true;
        for (int c = 0; c < DTR__NBUILDERS; c++) {
            bound[c] = dtr__candidate(ctx, src, dst, c, &scratch) &&
                               dtr__ragged_respects(ctx, &scratch)
                           ? scratch.time_us
                           : NAN;
            if (bound[c] < least) {
                least = bound[c];
                first = c;
            }
        }
        memo.defer = false;
        /* (first is valid: the builders do not look at figures; else nothing is skipped) */
        least = first >= 0 && dtr__candidate(ctx, src, dst, first, &scratch) ? scratch.time_us
                                                                             : INFINITY;
    }
    for (int c = 0; c <= DTR__NBUILDERS; c++) {
        if (c < DTR__NBUILDERS) {
            if (bounded && !(bound[c] <= least * (1 + 1e-6))) { /* (NAN: not one) */
                if (!isnan(bound[c]))
                    atomic_fetch_add_explicit(&dtr__bound_skips, 1, memory_order_relaxed);
                continue;
            }
            if (!dtr__candidate(ctx, src, dst, c, &scratch) ||
                !dtr__ragged_respects(ctx, &scratch))
                continue;
        } else if (ctx->ordered ||
                   !dtr__plan_compat(ctx, src, dst, true, have ? plan : NULL, &scratch, NULL, 0) ||
                   scratch.seed_blocks) { /* (a plan with its own blocks runs alone, not in batches) */
            continue;
        }
        if (!have || dtr__plan_better(&scratch, plan)) {
            *plan = scratch;
            have = true;
        }
    }
    if (!have && ctx->ragged_mdims != 0) { /* (none keeps the ragged shards: ragged.c) */
        dtr__pair_cache_free(&memo);
        return dtr__error(DTR_ERR_UNSUPPORTED, "dtr_plan_create",
                          "no plan within one mesh keeps the ragged shards as they are; a "
                          "change between meshes moves them (dtr_change_create does so by "
                          "itself, dtr_cross_plan_create, dtr run --to-mesh)");
    }
    if (!have) {
        dtr__pair_cache_free(&memo);
        return dtr__error(DTR_ERR_INTERNAL, "dtr_plan_create",
                          "optimal: no candidate plan was valid (a bug in dtr)");
    }
    /* Bytes over the whole plan and the lower bound cost O(ranks): for the winner only. */
    dtr__plan_finish(ctx, src, dst, plan);
    dtr__pair_cache_free(&memo);
    plan->strategy = DTR_STRATEGY_OPTIMAL;
    return DTR_OK;
}
