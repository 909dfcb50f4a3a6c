/*
 * The planner's test hooks: what tests (and the fuzzer) reach below the public API to check
 * the planner's parts one by one: building plans step by step, the balanced reduction's
 * bound, the seed plan where it is unsafe, the lower bound, the rank representatives, the
 * partial-order rules, and switches that turn the even-layout shortcuts and the bounded
 * candidates off. internal.h includes it for the planner's own files.
 */
#ifndef DTR_REDISTRIBUTE_PLANNER_TESTING_H
#define DTR_REDISTRIBUTE_PLANNER_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redistribute/planner/geometry.h"

/* A plan under construction. Steps are checked as they are added: one whose inputs are not
 * the canonical layout its collective assumes (a gather of a tensor dim that a later mesh
 * dim still shards, say) marks the plan invalid, with the reason. */
typedef struct {
    const dtr__ctx_t *ctx;
    dtr_placement_t cur[DTR_MAX_MESH_DIMS];
    dtr_plan_t *plan;
    bool valid;
    bool misaligned_only; /* invalid only because steps work on non-canonical layouts */
    char why[256];
    int scaled_at; /* the first R -> P(sum) scale step (1-based), 0 if none yet */
} dtr__builder_t;

void dtr__builder_init(dtr__builder_t *b, const dtr__ctx_t *ctx, const dtr_placement_t *start,
                       dtr_plan_t *plan);

/* Appends one exchange from the current placements to `to` (same Partial dims). */
bool dtr__emit_exchange(dtr__builder_t *b, const dtr_placement_t *to);

/* Coordinates standing for every rank in a per-rank loop (reps.c): on each mesh dim, all
 * of them (all[i]: where the caller's figure reads offsets along what it splits, the
 * `positional` mesh dims, or where there are too many kinds), else one per distinct
 * signature, the chunk lengths the coordinate gives at its level in each of the layouts
 * for every parent length (c[i][0..n[i]), c[i][0] = 0). A figure that depends on such a
 * mesh dim's coordinate only through block lengths takes its largest value over every
 * rank at one of these. */
#define DTR__REPS_MAX 64
typedef struct {
    bool all[DTR_MAX_MESH_DIMS];
    int64_t n[DTR_MAX_MESH_DIMS];
    int64_t c[DTR_MAX_MESH_DIMS][DTR__REPS_MAX];
} dtr__reps_t;
void dtr__reps_init(const dtr__ctx_t *ctx, const dtr_placement_t *const *layouts, int nlayouts,
                    unsigned positional, dtr__reps_t *r);

/* The mesh dims that split a tensor dim both layouts split, unless they split it the same
 * way (then a rank's two blocks coincide along it): where two blocks' offsets meet (the
 * positional mask of an exchange or of the bound's overlaps). */
unsigned dtr__both_split(const dtr__ctx_t *ctx, const dtr_placement_t *a, const dtr_placement_t *b);

/* Would a step at mesh dim i that gathers or splits tensor dim d read a canonical layout?
 * A gather: i is the last mesh dim (of more than one rank) in d's shard order. A new shard
 * of d at i: no mesh dim after i shards d (so the order stays mesh-dim order). */
bool dtr__innermost(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int i, int d);

/* Does a step from `before` to `after` need the balanced reduction at mesh dim i? (Only i
 * changes, P -> S(d), and a later mesh dim of more than one rank shards d.) */
bool dtr__balance_applies(const dtr__ctx_t *ctx, const dtr_placement_t *before,
                          const dtr_placement_t *after, int i);

/* The least elements g's busiest member can receive under the step's model (plan.c's bound). */
__int128 dtr__balance_bound(const dtr__balance_t *b);

/* Appends a reduce_exchange step: mesh dim i, P -> `to` (see balance.c). */
bool dtr__emit_reduce_exchange(dtr__builder_t *b, int i, dtr_placement_t to);

int64_t dtr__lower_bound(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                         const dtr_placement_t *dst);

/* Mixed Partial ops (partial_order.c). Do ops a and b give the same result in either order? */
bool dtr__ops_commute(dtr_reduce_op_t a, dtr_reduce_op_t b);

/* Partial dims the target keeps that must still be reduced (and made Partial again) so that
 * the value holds: a mesh dim before them is reduced with an op that does not commute. */
unsigned dtr__partials_forced(const dtr__ctx_t *ctx, const dtr_placement_t *src,
                              const dtr_placement_t *dst);

/* The seed plan, steps and totals, even where it is unsafe; returns whether it is safe
 * (and why not, into why). With follow, a plan whose steps work on layouts that are not
 * canonical is followed (seed_follow.c) and safe when every element lands right; without,
 * it is unsafe. With beat (optimal's best candidate so far), such a plan is followed only
 * where it is better than beat (else: false, why untouched). Records no error. */
bool dtr__plan_compat(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                      bool follow, const dtr_plan_t *beat, dtr_plan_t *plan, char *why,
                      size_t why_len);

/* Even layouts (even.c): every tensor dim splits exactly at every level of its shard order,
 * so every rank's block has one shape and offsets linear in its coordinates. Test hook:
 * with dtr__even_off set, the planner visits every rank as it did before even.c (no
 * classes, no reps.c coordinates, no tables.c tables). */
extern bool dtr__even_off;
/* Test hook: the optimal strategy bounds its candidates before costing them exactly on
 * meshes of at least this many ranks (optimal.c). */
extern int64_t dtr__bound_ranks;
/* Candidates skipped so far, over all threads (tests count them). Atomic rather than
 * thread-local: a TLS variable lands in libdtr.so's dynamic symbol table. */
extern _Atomic int64_t dtr__bound_skips;

/* Test hook: compat's plan even where it is unsafe, so tests can show it corrupts data.
 * Checks its arguments as dtr_plan_create does. */
dtr_status_t dtr__plan_compat_unchecked(const dtr_spec_t *src, const dtr_spec_t *dst,
                                        dtr_plan_t *out, bool *safe);

#endif
