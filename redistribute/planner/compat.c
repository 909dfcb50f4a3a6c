/*
 * The seed algorithm ("compat"), exactly: PyTorch 2.1's _decompose_reshard followed by the
 * stable "replicate then shard" sort.
 *
 * Walk mesh dims i = 0..M-1, counting for the current and the target placements how many
 * mesh dims so far (i included) shard each tensor dim. If both placements on i are Shard and
 * their tensor dims differ, or those counts differ (a misaligned nested shard), the step is
 * replaced by S(a) -> R followed by R -> S(b). Then the steps are sorted stably by key: -i
 * for Shard -> Replicate/Partial, +i for Replicate/Partial -> Shard, 0 otherwise. Steps whose
 * two placements are equal do nothing and are dropped.
 *
 * The counts miss some misalignments: [S(0),R,S(0)] -> [R,S(0),S(0)] has equal counts on
 * mesh dim 2, so mesh dim 0 gathers tensor dim 0 while mesh dim 2 still shards it, and the
 * gathered pieces are not the chunks the all-gather assumes. The builder notices (each step
 * checks that no later mesh dim shards the tensor dims it works on); such a plan is then
 * followed for the shape at hand (seed_follow.c) and returned where every element lands
 * right; otherwise it is refused, saying which. Where it lands right through blocks of other
 * lengths than the canonical layout of the steps' placements, the plan is marked seed_blocks
 * and its blocks are sized as the seed sizes them (seed_blocks.c).
 */
#include <stdio.h>
#include <string.h>

#include "redistribute/planner/internal.h"

typedef struct {
    int mesh_dim;
    dtr_placement_t from, to;
    int key;
} dtr__compat_entry_t;

static int dtr__compat_key(const dtr__compat_entry_t *e) {
    bool from_shard = e->from.kind == DTR_SHARD, to_shard = e->to.kind == DTR_SHARD;
    if (from_shard && !to_shard) return -e->mesh_dim;
    if (!from_shard && to_shard) return e->mesh_dim;
    return 0;
}

bool dtr__plan_compat(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                      bool follow, const dtr_plan_t *beat, dtr_plan_t *plan, char *why,
                      size_t why_len) {
    dtr__compat_entry_t entries[2 * DTR_MAX_MESH_DIMS];
    int n = 0;
    int count_cur[DTR_MAX_TENSOR_DIMS] = {0}, count_tgt[DTR_MAX_TENSOR_DIMS] = {0};
    for (int i = 0; i < ctx->mdims; i++) {
        dtr_placement_t cur = src->placements[i], tgt = dst->placements[i];
        if (cur.kind == DTR_SHARD) count_cur[cur.dim]++;
        if (tgt.kind == DTR_SHARD) count_tgt[tgt.dim]++;
        if (cur.kind == DTR_SHARD && tgt.kind == DTR_SHARD &&
            (cur.dim != tgt.dim || count_cur[cur.dim] != count_tgt[tgt.dim])) {
            entries[n++] = (dtr__compat_entry_t){i, cur, dtr_replicate(), 0};
            entries[n++] = (dtr__compat_entry_t){i, dtr_replicate(), tgt, 0};
        } else {
            entries[n++] = (dtr__compat_entry_t){i, cur, tgt, 0};
        }
    }
    for (int k = 0; k < n; k++) entries[k].key = dtr__compat_key(&entries[k]);
    /* Stable insertion sort by key. */
    for (int k = 1; k < n; k++) {
        dtr__compat_entry_t e = entries[k];
        int j = k - 1;
        while (j >= 0 && entries[j].key > e.key) {
            entries[j + 1] = entries[j];
            j--;
        }
        entries[j + 1] = e;
    }
    dtr__builder_t b;
    dtr__builder_init(&b, ctx, src->placements, plan);
    for (int k = 0; k < n; k++) {
        if (dtr_placement_equal(entries[k].from, entries[k].to)) continue;
        dtr__emit(&b, entries[k].mesh_dim, entries[k].to);
    }
    plan->strategy = DTR_STRATEGY_COMPAT;
    plan->chosen_by = "compat";
    dtr__plan_summarize(ctx, src, dst, plan);
    char order[320];
    if (!dtr__reduction_order_ok(ctx, src->placements, plan, order, sizeof order)) {
        /* The seed reduces in its own order (mesh dim 0 first, then its sort). */
        if (why != NULL)
            snprintf(why, why_len, "the seed algorithm's plan would give another value: %s",
                     order);
        return false;
    }
    if (b.valid) return true;
    /* Following costs up to thousands of classes; a plan that could not win is not. */
    if (beat != NULL && !dtr__plan_better(plan, beat)) return false;
    char found[320] = "";
    dtr__seed_verdict_t v = DTR__SEED_MISPLACES;
    if (follow && b.misaligned_only) {
        v = dtr__seed_follow(ctx, src, dst, plan, found, sizeof found);
        if (v == DTR__SEED_RIGHT) return true;
        /* Right, through blocks of other lengths: run with the seed's own blocks. */
        if (v == DTR__SEED_UNEVEN && dtr__seed_figures(ctx, plan)) {
            dtr__plan_summarize(ctx, src, dst, plan);
            return true;
        }
    }
    if (why == NULL) return false;
    if (v == DTR__SEED_UNEVEN)
        snprintf(why, why_len,
                 "the seed algorithm's plan holds blocks of other lengths than the canonical "
                 "layout, on more mesh coordinates than are followed to size them: %s: %s",
                 b.why, found);
    else if (v == DTR__SEED_UNDECIDED)
        snprintf(why, why_len, "the seed algorithm's plan may corrupt data: %s (not followed: %s)",
                 b.why, found);
    else
        snprintf(why, why_len, "the seed algorithm's plan would corrupt data: %s%s%s", b.why,
                 found[0] ? ": " : "", found);
    return false;
}
