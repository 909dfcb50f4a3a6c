/*
 * The planner's figures from classes of ranks (classes.c, even.c) against visiting every
 * rank (dtr__even_off, the planner as it was before them), on random changes, seeded
 * (DTR_SEED overrides; the seed and a failing case are printed so it can be replayed).
 *
 * Every plan, both strategies, must be identical field by field: steps, their byte, peer,
 * memory and time figures, the plan's totals, the chosen candidate and the lower bound.
 * Shapes are even (every tensor dim a multiple of the mesh's size) in most cases, so the
 * classes are used; the rest are uneven, where both ways visit every rank. Counts of the
 * even exchanges and balanced reductions seen are asserted, so the comparison cannot pass
 * by never taking the new path.
 *
 * The uneven shapes use reps.c instead (one coordinate per chunk-length signature where a
 * figure reads no offsets); a second test draws uneven changes on meshes with larger dims,
 * where mesh dims really collapse to a few coordinates, and counts that they do.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/testing.h"
#include "tests/support/rand_cases.h"

static uint64_t seed_from_env(uint64_t fallback) {
    const char *s = getenv("DTR_SEED");
    return s != NULL ? strtoull(s, NULL, 0) : fallback;
}

/* The first difference between two plans, into why; false when identical. */
static bool plans_differ(const dtr_plan_t *a, const dtr_plan_t *b, char *why, size_t len) {
#define DIFF(field, fmt, cast)                                                                 \
    if (a->field != b->field) {                                                                \
        snprintf(why, len, #field ": classes " fmt ", every rank " fmt, (cast)a->field,        \
                 (cast)b->field);                                                              \
        return true;                                                                           \
    }
    DIFF(nsteps, "%lld", long long)
    for (int k = 0; k < a->nsteps; k++) {
        const dtr_step_t *s = &a->steps[k], *t = &b->steps[k];
        int m = s->nplacements;
        bool same = s->kind == t->kind && s->mesh_dim == t->mesh_dim &&
                    s->tensor_dim == t->tensor_dim && s->tensor_dim2 == t->tensor_dim2 &&
                    m == t->nplacements && dtr_placement_equal(s->from, t->from) &&
                    dtr_placement_equal(s->to, t->to);
        for (int i = 0; same && i < m; i++)
            same = dtr_placement_equal(s->before[i], t->before[i]) &&
                   dtr_placement_equal(s->after[i], t->after[i]);
        if (!same) {
            snprintf(why, len, "step %d: another step", k);
            return true;
        }
#define SDIFF(field, fmt, cast)                                                                \
    if (s->field != t->field) {                                                                \
        snprintf(why, len, "step %d (%s) " #field ": classes " fmt ", every rank " fmt, k,     \
                 dtr_step_kind_info(s->kind)->name, (cast)s->field, (cast)t->field);           \
        return true;                                                                           \
    }
        SDIFF(recv_bytes_max, "%lld", long long)
        SDIFF(send_bytes_max, "%lld", long long)
        SDIFF(extra_bytes_max, "%lld", long long)
        SDIFF(peers_max, "%d", int)
        SDIFF(time_us, "%.17g", double)
    }
    DIFF(recv_bytes_max, "%lld", long long)
    DIFF(lower_bound_recv_bytes, "%lld", long long)
    DIFF(peak_extra_bytes, "%lld", long long)
    DIFF(time_us, "%.17g", double)
    DIFF(seed_blocks, "%d", int)
    if ((a->chosen_by == NULL) != (b->chosen_by == NULL) ||
        (a->chosen_by != NULL && strcmp(a->chosen_by, b->chosen_by) != 0)) {
        snprintf(why, len, "chosen_by: classes %s, every rank %s", a->chosen_by ? a->chosen_by : "-",
                 b->chosen_by ? b->chosen_by : "-");
        return true;
    }
    return false;
}

typedef struct {
    int cases, even, exchanges, balanced, direct_balanced, ordered_balanced, direct_exchanges,
        refused, collapsed;
} tally_t;

/* The balanced step on every mesh dim where it applies, and one exchange straight from a
 * to b (no Partial dims): their figures from classes equal to those visiting every rank. */
static void direct_steps(const dtr__ctx_t *ctx, const dtr_spec_t *a, const dtr_spec_t *b,
                         const char *desc, tally_t *tally) {
    for (int k = 0; k < ctx->mdims; k++) {
        if (!dtr__balance_applies(ctx, a->placements, b->placements, k)) continue;
        dtr_plan_t p[2];
        for (int off = 0; off < 2; off++) {
            dtr__builder_t builder;
            dtr__even_off = off;
            dtr__builder_init(&builder, ctx, a->placements, &p[off]);
            cr_assert(dtr__emit_reduce_exchange(&builder, k, b->placements[k]), "%s", desc);
        }
        dtr__even_off = false;
        const dtr_step_t *x = &p[0].steps[0], *y = &p[1].steps[0];
        cr_assert(x->recv_bytes_max == y->recv_bytes_max && x->send_bytes_max == y->send_bytes_max &&
                      x->extra_bytes_max == y->extra_bytes_max && x->peers_max == y->peers_max,
                  "%s: balanced step on mesh dim %d: recv %lld/%lld send %lld/%lld extra %lld/%lld "
                  "peers %d/%d (classes/every rank)",
                  desc, k, (long long)x->recv_bytes_max, (long long)y->recv_bytes_max,
                  (long long)x->send_bytes_max, (long long)y->send_bytes_max,
                  (long long)x->extra_bytes_max, (long long)y->extra_bytes_max, x->peers_max,
                  y->peers_max);
        tally->direct_balanced++;
        bool ordered = false;
        for (int i = 0; i < ctx->mdims; i++) ordered = ordered || b->placements[i].order != 0;
        tally->ordered_balanced += ordered;
    }
    /* One exchange straight from the source to the target (no Partial dims), directly. */
    bool partial = false;
    for (int i = 0; i < ctx->mdims; i++)
        partial = partial || a->placements[i].kind == DTR_PARTIAL || b->placements[i].kind == DTR_PARTIAL;
    if (!partial) {
        dtr_plan_t p[2];
        for (int off = 0; off < 2; off++) {
            dtr__builder_t builder;
            dtr__even_off = off;
            dtr__builder_init(&builder, ctx, a->placements, &p[off]);
            cr_assert(dtr__emit_exchange(&builder, b->placements), "%s", desc);
        }
        dtr__even_off = false;
        if (p[0].nsteps == 1 && p[0].steps[0].kind == DTR_STEP_EXCHANGE) {
            const dtr_step_t *x = &p[0].steps[0], *y = &p[1].steps[0];
            cr_assert(x->recv_bytes_max == y->recv_bytes_max &&
                          x->send_bytes_max == y->send_bytes_max &&
                          x->extra_bytes_max == y->extra_bytes_max && x->peers_max == y->peers_max,
                      "%s: exchange: recv %lld/%lld send %lld/%lld extra %lld/%lld peers %d/%d "
                      "(classes/every rank)",
                      desc, (long long)x->recv_bytes_max, (long long)y->recv_bytes_max,
                      (long long)x->send_bytes_max, (long long)y->send_bytes_max,
                      (long long)x->extra_bytes_max, (long long)y->extra_bytes_max, x->peers_max,
                      y->peers_max);
            tally->direct_exchanges++;
        }
    }
}

static void one_case(int mdims, const int64_t *msize, int ndim, const int64_t *shape,
                     const dtr_placement_t *src, const dtr_placement_t *dst, dtr_dtype_t dtype,
                     uint64_t seed, int n, tally_t *tally) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
    dtr_spec_t a, b;
    char m[64], s[64], from[160], to[160], desc[600];
    dtr_shape_format(msize, mdims, m, sizeof m);
    dtr_shape_format(shape, ndim, s, sizeof s);
    dtr_placements_format(src, mdims, from, sizeof from);
    dtr_placements_format(dst, mdims, to, sizeof to);
    snprintf(desc, sizeof desc, "seed %llu case %d: --mesh %s --shape %s --from '%s' --to '%s' --dtype %s",
             (unsigned long long)seed, n, m, s, from, to, dtr_dtype_name(dtype));
    if (dtr_spec_init(&a, mesh, src, mdims, shape, ndim, dtype) != DTR_OK ||
        dtr_spec_init(&b, mesh, dst, mdims, shape, ndim, dtype) != DTR_OK) {
        dtr_mesh_destroy(mesh);
        return;
    }
    tally->cases++;
    bool even = true;
    for (int d = 0; d < ndim; d++) {
        int64_t all = 1;
        for (int i = 0; i < mdims; i++) all *= msize[i];
        even = even && shape[d] % all == 0;
    }
    tally->even += even;
    { /* does some mesh dim collapse to fewer coordinates for the direct exchange? */
        dtr__ctx_t c0;
        dtr_cost_model_t cm;
        dtr_cost_model_default(&cm);
        dtr__ctx_init(&c0, &a, &cm);
        const dtr_placement_t *lays[2] = {a.placements, b.placements};
        dtr__reps_t reps;
        dtr__reps_init(&c0, lays, 2, dtr__both_split(&c0, a.placements, b.placements), &reps);
        bool collapsed = false;
        for (int i = 0; i < mdims; i++) collapsed = collapsed || (!reps.all[i] && reps.n[i] < msize[i]);
        tally->collapsed += !even && collapsed;
    }
    for (int strategy = 0; strategy < 2; strategy++) {
        dtr_plan_options_t opts = {.strategy = strategy ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL};
        dtr_plan_t classes, every;
        dtr__even_off = false;
        dtr_status_t st1 = dtr_plan_create(&a, &b, &opts, &classes);
        dtr__even_off = true;
        dtr_status_t st2 = dtr_plan_create(&a, &b, &opts, &every);
        dtr__even_off = false;
        cr_assert_eq(st1, st2, "%s: strategy %d: status %d with classes, %d visiting every rank",
                     desc, strategy, st1, st2);
        if (st1 != DTR_OK) {
            tally->refused++;
            continue;
        }
        char why[400];
        cr_assert(!plans_differ(&classes, &every, why, sizeof why), "%s: %s: %s", desc,
                  strategy ? "compat" : "optimal", why);
        for (int k = 0; even && k < classes.nsteps; k++) {
            tally->exchanges += classes.steps[k].kind == DTR_STEP_EXCHANGE;
            tally->balanced += classes.steps[k].kind == DTR_STEP_REDUCE_EXCHANGE;
        }
    }
    /* The balanced step on every mesh dim where it applies, one exchange and the lower
     * bound, directly (a candidate's figures count even where another candidate wins). */
    dtr__ctx_t ctx;
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr__ctx_init(&ctx, &a, &cost);
    direct_steps(&ctx, &a, &b, desc, tally);
    int64_t bound[2];
    for (int off = 0; off < 2; off++) {
        dtr__even_off = off;
        bound[off] = dtr__lower_bound(&ctx, a.placements, b.placements);
    }
    dtr__even_off = false;
    cr_assert_eq(bound[0], bound[1], "%s: lower bound %lld with classes, %lld visiting every rank",
                 desc, (long long)bound[0], (long long)bound[1]);
    dtr_mesh_destroy(mesh);
}

/* Meshes of 1..5 dims with sizes 1..6 (at most 512 ranks), shapes of 1..3 dims; even
 * shapes are a multiple of the mesh's size, uneven ones anything up to twice it. */
Test(plan_classes, figures_equal_visiting_every_rank, .timeout = 600) {
    uint64_t seed = seed_from_env(20261125);
    printf("plan_classes: seed %llu (DTR_SEED=%llu replays)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    tally_t tally = {0};
    const dtr_reduce_op_t ops[] = {DTR_REDUCE_SUM, DTR_REDUCE_AVG, DTR_REDUCE_MAX};
    for (int n = 0; n < 3000; n++) {
        rng_state = seed * 1000003u + (uint64_t)n;
        int mdims = 1 + pick(5), ndim = 1 + pick(3);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS], ranks = 1;
        for (int i = 0; i < mdims; i++) {
            msize[i] = 1 + pick(mdims <= 2 ? 6 : mdims == 3 ? 4 : 3);
            ranks *= msize[i];
        }
        bool even = pick(4) != 0;
        for (int d = 0; d < ndim; d++)
            shape[d] = even ? ranks * (pick(8) == 0 ? 0 : 1 + pick(3)) : 1 + pick((int)(2 * ranks));
        dtr_reduce_op_t op = ops[pick(3)];
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        int kind = pick(5);
        for (int i = 0; i < mdims; i++) {
            src[i] = random_placement(ndim, op);
            dst[i] = random_placement(ndim, op);
            if (dst[i].kind == DTR_PARTIAL && src[i].kind != DTR_PARTIAL) dst[i] = dtr_replicate();
        }
        if (kind == 0 && mdims >= 2) { /* the balanced reduction: P -> S(d) under shards of d */
            int i = pick(mdims - 1), d = pick(ndim);
            for (int j = 0; j < mdims; j++) dst[j] = src[j];
            src[i] = dtr_partial(op);
            dst[i] = dtr_shard(d);
            for (int j = i + 1; j < mdims; j++)
                if (pick(2)) src[j] = dst[j] = dtr_shard(d);
        } else if (kind == 1) { /* shard orders */
            random_orders(mdims, src);
            random_orders(mdims, dst);
        } else if (kind == 2 && mdims >= 2) { /* the balanced reduction in a shard order */
            int i = pick(mdims), d = pick(ndim);
            for (int j = 0; j < mdims; j++) {
                src[j] = j == i ? dtr_partial(op) : pick(2) ? dtr_shard(d) : dtr_replicate();
                dst[j] = j == i ? dtr_shard(d) : src[j];
            }
            random_orders(mdims, dst);
            /* the source's order: the target's without i */
            for (int j = 0; j < mdims; j++)
                if (j != i && dst[j].kind == DTR_SHARD)
                    src[j].order = dst[j].order - (dst[j].order > dst[i].order);
        }
        one_case(mdims, msize, ndim, shape, src, dst, pick(2) ? DTR_F32 : DTR_BF16, seed, n,
                 &tally);
    }
    printf("plan_classes: %d changes (%d even), %d refused plans; even plans held %d exchanges "
           "and %d balanced reductions; compared alone: %d balanced steps (%d in a shard order), "
           "%d exchanges\n",
           tally.cases, tally.even, tally.refused, tally.exchanges, tally.balanced,
           tally.direct_balanced, tally.ordered_balanced, tally.direct_exchanges);
    cr_assert_gt(tally.cases, 2500);
    cr_assert_gt(tally.exchanges, 100, "too few even exchanges to compare");
    cr_assert_gt(tally.balanced, 50, "too few balanced reductions to compare");
    cr_assert_gt(tally.ordered_balanced, 15, "too few balanced steps in a shard order");
    cr_assert_gt(tally.direct_exchanges, 500, "too few exchanges compared alone");
}

/* The issue's large meshes, where visiting every rank is slow but still done here once:
 * the classes give the same plans. */
Test(plan_classes, large_meshes_equal_visiting_every_rank, .timeout = 600) {
    struct {
        int mdims;
        int64_t msize[4];
        const char *from, *to;
    } cases[] = {
        {3, {8, 8, 8}, "S(0),S(1),R", "R,S(0),S(1)"},
        {2, {64, 32}, "S(0),S(1)", "S(1),S(0)"},
        {3, {16, 8, 8}, "S(0),S(0),S(0)", "R,S(0),S(1)"},
        {2, {32, 32}, "P,S(0)", "S(0),S(0)"},
        {2, {4, 64}, "P,S(0)", "S(0),S(0)"},
        {2, {64, 4}, "P,S(1)", "S(1),S(1)"},
        {3, {6, 5, 7}, "P,S(0),S(0)", "S(0),S(0),S(0)"},
        {3, {3, 7, 5}, "S(1),P,S(0)", "S(1),S(0),S(0)"},
        {4, {2, 3, 5, 7}, "P,S(1),S(0),S(0)", "S(0),S(1),S(0),S(0)"},
        /* strided targets: my block is not whole periods of the peers' cells */
        {3, {2, 2, 3}, "S(1),R,S(0)", "S(0),S(0),R"},
        {3, {4, 8, 3}, "S(1),R,S(0)", "S(0),S(0),R"},
        {3, {16, 4, 5}, "S(1),R,S(0)", "S(0),S(0),R"},
        {4, {4, 4, 4, 4}, "P,S(1),P,S(0)", "S(0),S(1),S(1),S(0)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        int n1, n2;
        cr_assert_eq(dtr_placements_parse(cases[c].from, src, DTR_MAX_MESH_DIMS, &n1), DTR_OK);
        cr_assert_eq(dtr_placements_parse(cases[c].to, dst, DTR_MAX_MESH_DIMS, &n2), DTR_OK);
        int64_t shape[2] = {65536 * 105, 65536 * 105}; /* (even on every mesh here) */
        tally_t tally = {0};
        one_case(cases[c].mdims, cases[c].msize, 2, shape, src, dst, DTR_F32, 0, (int)c, &tally);
        cr_assert_eq(tally.cases, 1, "%s -> %s did not plan", cases[c].from, cases[c].to);
    }
}

/* Uneven shapes on meshes of 1..4 dims with sizes up to 33 (at most 4,096 ranks), where the
 * per-rank loops visit one coordinate per signature: every plan, step and bound equal to
 * visiting every rank. Shapes from 1 to 3x the ranks, or near a multiple of a mesh dim. */
Test(plan_classes, uneven_figures_equal_visiting_every_rank, .timeout = 600) {
    uint64_t seed = seed_from_env(20261126);
    printf("plan_classes uneven: seed %llu (DTR_SEED=%llu replays)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    tally_t tally = {0};
    const int64_t sizes[] = {2, 3, 4, 5, 7, 8, 16, 17, 33};
    for (int n = 0; n < 2000; n++) {
        rng_state = seed * 1000003u + (uint64_t)n;
        int mdims = 1 + pick(4), ndim = 1 + pick(3);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS], ranks = 1;
        for (int i = 0; i < mdims; i++) {
            msize[i] = sizes[pick(9)];
            if (ranks * msize[i] > 4096) msize[i] = ranks * 2 > 4096 ? 1 : 2;
            ranks *= msize[i];
        }
        for (int d = 0; d < ndim; d++)
            shape[d] = pick(2) ? 1 + pick((int)(3 * ranks))
                               : msize[pick(mdims)] * (1 + pick(40)) + pick(3) - 1;
        for (int d = 0; d < ndim; d++)
            if (shape[d] < 1) shape[d] = 1;
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < mdims; i++) {
            src[i] = random_placement(ndim, DTR_REDUCE_SUM);
            dst[i] = random_placement(ndim, DTR_REDUCE_SUM);
            if (dst[i].kind == DTR_PARTIAL && src[i].kind != DTR_PARTIAL) dst[i] = dtr_replicate();
        }
        if (pick(4) == 0) {
            random_orders(mdims, src);
            random_orders(mdims, dst);
        }
        one_case(mdims, msize, ndim, shape, src, dst, DTR_F32, seed, n, &tally);
    }
    printf("plan_classes uneven: %d changes (%d even), %d refused plans, %d with a mesh dim "
           "collapsed for the exchange, %d exchanges compared alone\n",
           tally.cases, tally.even, tally.refused, tally.collapsed, tally.direct_exchanges);
    cr_assert_gt(tally.cases, 1800);
    cr_assert_gt(tally.collapsed, 200, "too few changes where a mesh dim collapses");
    cr_assert_gt(tally.direct_exchanges, 200, "too few exchanges compared alone");
}

/* The optimal strategy's bounded candidates (optimal.c: each candidate first bounded from
 * coordinate 0, the least-bounded one costed, those that cannot win skipped) against
 * costing every candidate: the same plan, field by field, on random changes with random
 * cost models (so that candidates' times differ by a little and by a lot), even and uneven
 * shapes, shard orders and balanced reductions. dtr__bound_ranks = 1 takes the bounded way
 * on these small meshes; the count of skipped candidates shows it skipped some. */
Test(plan_classes, bounded_candidates_choose_the_same, .timeout = 600) {
    uint64_t seed = seed_from_env(20261127);
    printf("plan_classes bounded: seed %llu (DTR_SEED=%llu replays)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    const double alphas[] = {0.5, 2, 10, 40}, gbps[] = {1, 5, 25, 100};
    int cases = 0, refused = 0;
    int64_t skips0 = atomic_load(&dtr__bound_skips);
    for (int n = 0; n < 3000; n++) {
        rng_state = seed * 1000003u + (uint64_t)n;
        int mdims = 1 + pick(4), ndim = 1 + pick(3);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS], ranks = 1;
        for (int i = 0; i < mdims; i++) {
            msize[i] = 1 + pick(mdims <= 2 ? 9 : 4);
            ranks *= msize[i];
        }
        for (int d = 0; d < ndim; d++)
            shape[d] = pick(2) ? ranks * (1 + pick(3)) : 1 + pick((int)(3 * ranks));
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < mdims; i++) {
            src[i] = random_placement(ndim, DTR_REDUCE_SUM);
            dst[i] = random_placement(ndim, DTR_REDUCE_SUM);
            if (dst[i].kind == DTR_PARTIAL && src[i].kind != DTR_PARTIAL) dst[i] = dtr_replicate();
        }
        if (pick(4) == 0 && mdims >= 2) { /* the balanced reduction */
            int i = pick(mdims - 1), d = pick(ndim);
            for (int j = 0; j < mdims; j++) dst[j] = src[j];
            src[i] = dtr_partial(DTR_REDUCE_SUM);
            dst[i] = dtr_shard(d);
            for (int j = i + 1; j < mdims; j++)
                if (pick(2)) src[j] = dst[j] = dtr_shard(d);
        } else if (pick(4) == 0) {
            random_orders(mdims, src);
            random_orders(mdims, dst);
        }
        dtr_cost_model_t cost;
        dtr_cost_model_default(&cost);
        if (pick(2))
            for (int i = 0; i < mdims; i++) {
                cost.alpha_us[i] = alphas[pick(4)];
                cost.bandwidth_gbps[i] = gbps[pick(4)];
            }
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
        dtr_spec_t a, b;
        if (dtr_spec_init(&a, mesh, src, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&b, mesh, dst, mdims, shape, ndim, DTR_F32) != DTR_OK) {
            dtr_mesh_destroy(mesh);
            continue;
        }
        char m[64], sh[64], from[160], to[160];
        dtr_shape_format(msize, mdims, m, sizeof m);
        dtr_shape_format(shape, ndim, sh, sizeof sh);
        dtr_placements_format(src, mdims, from, sizeof from);
        dtr_placements_format(dst, mdims, to, sizeof to);
        dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
        dtr_plan_t bounded, every;
        dtr__bound_ranks = 1;
        dtr_status_t st1 = dtr_plan_create(&a, &b, &opts, &bounded);
        dtr__bound_ranks = INT64_MAX;
        dtr_status_t st2 = dtr_plan_create(&a, &b, &opts, &every);
        dtr__bound_ranks = 1024;
        cr_assert_eq(st1, st2, "seed %llu case %d: --mesh %s --shape %s --from '%s' --to '%s': "
                     "status %d bounded, %d costing every candidate",
                     (unsigned long long)seed, n, m, sh, from, to, st1, st2);
        cases++;
        if (st1 != DTR_OK) {
            refused++;
        } else {
            char why[400];
            cr_assert(!plans_differ(&bounded, &every, why, sizeof why),
                      "seed %llu case %d: --mesh %s --shape %s --from '%s' --to '%s': bounded "
                      "(\"classes\") against every candidate costed (\"every rank\"): %s",
                      (unsigned long long)seed, n, m, sh, from, to, why);
        }
        dtr_mesh_destroy(mesh);
    }
    int64_t skips = atomic_load(&dtr__bound_skips) - skips0;
    printf("plan_classes bounded: %d changes, %d refused, %lld candidates skipped\n", cases,
           refused, (long long)skips);
    cr_assert_gt(cases, 2500);
    cr_assert_gt(skips, 500, "too few candidates skipped to compare");
}
