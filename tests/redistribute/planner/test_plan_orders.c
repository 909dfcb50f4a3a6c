/*
 * Shard orders in the planner (docs/semantics.md, "Shard orders").
 *
 * orders_table: exact step lists for the changes FSDP2 with tensor parallelism makes
 * (PyTorch's shard_order / _StridedShard), each run in the reference interpreter.
 *
 * random_orders_plan_correctly: seeded random changes (DTR_SEED overrides; the seed and every
 * failing case are printed) where a tensor dim is sharded by several mesh dims in a random
 * order on either side. The optimal plan must produce the target in the interpreter (which
 * follows each step's data, not the planner's layouts), stay at or above the lower bound,
 * and compat must refuse by name. Shard -> Partial(sum) zero fills are among them (the
 * interpreter checks every zero).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/rand_cases.h"
#include "tests/support/interp.h"
#include "tests/support/plan_util.h"

typedef struct {
    const char *mesh, *shape, *from, *to, *steps;
} order_row_t;

static const order_row_t rows[] = {
    /* FSDP2 + TP on one dim: tp (mesh dim 1) splits first, dp second. Unsharding dp is one
     * all-gather: dp is last in the order. */
    {"2x4", "16x8", "S(0)[1],S(0)[0]", "R,S(0)", "0:S(0)[1]->R:all_gather"},
    {"2x4", "16x8", "R,S(0)", "S(0)[1],S(0)[0]", "0:R->S(0)[1]:local_chunk"},
    /* The full tensor: dp first (last in the order), then tp. */
    {"2x2", "8x8", "S(0)[1],S(0)[0]", "R,R", "0:S(0)[1]->R:all_gather; 1:S(0)->R:all_gather"},
    /* Reduce-scatters into an order: tp's first. */
    {"2x2", "8x8", "P,P", "S(0)[1],S(0)[0]",
     "1:P(sum)->S(0):reduce_scatter; 0:P(sum)->S(0)[1]:reduce_scatter"},
    /* The last in the order moves to another tensor dim: one all-to-all. */
    {"2x2", "8x8", "S(0)[1],S(0)[0]", "S(1),S(0)", "0:S(0)[1]->S(1):all_to_all"},
    /* Mesh-dim order to the reverse: one exchange (every rank's block moves). */
    {"2x2", "8x8", "S(0),S(0)", "S(0)[1],S(0)[0]",
     "-1:S(0),S(0)->S(0)[1],S(0)[0]:exchange"},
    /* A one-rank mesh dim's place in the order changes nothing. */
    {"1x4", "8", "S(0)[1],S(0)[0]", "S(0),S(0)", ""},
    {"2x1x2", "8", "S(0)[2],S(0)[0],S(0)[1]", "R,S(0),S(0)", "0:S(0)[2]->R:all_gather"},
};

/* Plans every row (optimal, under cost), checks its exact steps, runs it in the reference
 * interpreter, and holds it to the lower bound: at it (at_bound) or from below. */
static void check_rows(const order_row_t *rows_, size_t n, const dtr_cost_model_t *cost,
                       bool at_bound) {
    for (size_t k = 0; k < n; k++) {
        const order_row_t *r = &rows_[k];
        dtr_mesh_t *mesh;
        dtr_spec_t src, dst;
        cr_assert_eq(change_from(r->mesh, r->shape, r->from, r->to, DTR_F64, &mesh, &src, &dst),
                     DTR_OK, "row %zu: %s", k, dtr_last_error());
        dtr_plan_options_t o = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = cost};
        dtr_plan_t plan;
        cr_assert_eq(dtr_plan_create(&src, &dst, &o, &plan), DTR_OK, "row %zu: %s", k,
                     dtr_last_error());
        char text[1024], err[512];
        steps_text(&plan, text, sizeof text);
        cr_expect_str_eq(text, r->steps, "row %zu: %s %s -> %s", k, r->mesh, r->from, r->to);
        cr_expect_eq(interp_plan(&src, &dst, &plan, 7 + k, err, sizeof err), 0, "row %zu: %s", k,
                     err);
        if (at_bound)
            cr_expect_eq(plan.recv_bytes_max, plan.lower_bound_recv_bytes, "row %zu", k);
        else
            cr_expect_geq(plan.recv_bytes_max, plan.lower_bound_recv_bytes, "row %zu", k);
        dtr_mesh_destroy(mesh);
    }
}

/* DistributeWithDeviceOrderTest.test_ordered_redistribute (PyTorch main, November 2026):
 * 8x8x8 on 2x2x2, with the trace PyTorch asserts. dtr's optimal plan is one exchange at the
 * lower bound where PyTorch gathers and splits (docs/semantics.md, "Where dtr differs"). */
static const order_row_t torch_rows[] = {
    /* PyTorch: S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]
     * (3 all-gathers, 2 local splits) */
    {"2x2x2", "8x8x8", "S(0),S(0),S(0)", "R,S(0),S(0)",
     "-1:S(0),S(0),S(0)->R,S(0),S(0):exchange"},
    /* PyTorch: S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RS(0)[0]S(0)[1]
     * (2 all-gathers, 1 local split) */
    {"2x2x2", "8x8x8", "S(0)[1],S(0)[0],S(0)[2]", "R,S(0),S(0)",
     "-1:S(0)[1],S(0)[0],S(0)[2]->R,S(0),S(0):exchange"},
    /* PyTorch: ...->S(0)[1]S(0)[0]R->RS(0)R->RRR->S(0)RR->S(0)[0]S(0)[1]R (3 all-gathers) */
    {"2x2x2", "8x8x8", "S(0)[1],S(0)[0],S(0)[2]", "S(0),S(0),R",
     "-1:S(0)[1],S(0)[0],S(0)[2]->S(0),S(0),R:exchange"},
    /* PyTorch: S(0)[0]S(0)[1]R->S(0)RR->S(0)S(1)R->RS(1)R->RS(1)S(0) (2 all-gathers) */
    {"2x2x2", "8x8x8", "S(0),S(0),R", "R,S(1),S(0)", "-1:S(0),S(0),R->R,S(1),S(0):exchange"},
};

Test(plan_orders, pytorch_ordered_redistribute) {
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    check_rows(torch_rows, sizeof torch_rows / sizeof torch_rows[0], &cost, true);
}

Test(plan_orders, orders_table) {
    dtr_cost_model_t cost;
    cost_bytes_only(&cost);
    check_rows(rows, sizeof rows / sizeof rows[0], &cost, false);
}

/* The orders are what a step reports after it: a new shard goes last. */
Test(plan_orders, a_new_shard_goes_last) {
    dtr_cost_model_t cost;
    cost_bytes_only(&cost);
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from("2x2", "8x8", "P,P", "S(0)[1],S(0)[0]", DTR_F64, &mesh, &src, &dst),
                 DTR_OK);
    dtr_plan_options_t o = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    dtr_plan_t plan;
    cr_assert_eq(dtr_plan_create(&src, &dst, &o, &plan), DTR_OK, "%s", dtr_last_error());
    char a[128];
    dtr_placements_format(plan.steps[0].after, 2, a, sizeof a);
    cr_expect_str_eq(a, "P(sum),S(0)");
    dtr_placements_format(plan.steps[1].after, 2, a, sizeof a);
    cr_expect_str_eq(a, "S(0)[1],S(0)[0]");
    dtr_mesh_destroy(mesh);
}

Test(plan_orders, compat_refuses_by_name) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from("2x2", "8x8", "S(0)[1],S(0)[0]", "R,R", DTR_F32, &mesh, &src, &dst),
                 DTR_OK);
    dtr_plan_options_t o = {.strategy = DTR_STRATEGY_COMPAT};
    dtr_plan_t plan;
    cr_expect_eq(dtr_plan_create(&src, &dst, &o, &plan), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_plan_create: compat: the seed algorithm knows only mesh-dim order, not "
                     "the shard order of src; the optimal strategy handles this change");
    dtr_mesh_destroy(mesh);
}

/* Shard -> Partial(sum) from an order: the last in the order zero-fills first; one before it
 * waits for the ones after it to be gathered. */
Test(plan_orders, zero_fills_follow_the_order) {
    static const order_row_t zrows[] = {
        {"2x2", "8x8", "S(0)[1],S(0)[0]", "P,S(0)", "0:S(0)[1]->P(sum):local_zero_fill"},
        {"2x2", "8x8", "S(0)[1],S(0)[0]", "S(0),P",
         "0:S(0)[1]->R:all_gather; 1:S(0)->P(sum):local_zero_fill; 0:R->S(0):local_chunk"},
    };
    dtr_cost_model_t cost;
    cost_bytes_only(&cost);
    check_rows(zrows, sizeof zrows / sizeof zrows[0], &cost, false);
}

static bool has_order(const dtr_spec_t *s) {
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++)
        if (s->placements[i].kind == DTR_SHARD && s->placements[i].order != 0) return true;
    return false;
}

Test(plan_orders, random_orders_plan_correctly, .timeout = 600) {
    const char *env = getenv("DTR_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : 20261125;
    printf("random_orders_plan_correctly: seed %llu (DTR_SEED=%llu replays)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    rng_state = seed;
    const int ncases = 4000;
    int failures = 0, ordered = 0, no_exchange = 0, zero_fills = 0;
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    for (int n = 0; n < ncases;) {
        int mdims = 2 + pick(3), ndim = 1 + pick(2);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS];
        for (int i = 0; i < mdims; i++) msize[i] = 1 + pick(4);
        for (int d = 0; d < ndim; d++) shape[d] = pick(14);
        dtr_reduce_op_t op = (dtr_reduce_op_t)pick(DTR_REDUCE_OP_LAST);
        dtr_placement_t a[DTR_MAX_MESH_DIMS], b[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < mdims; i++) {
            a[i] = pick(3) ? dtr_shard(pick(ndim)) : random_placement(ndim, op);
            b[i] = pick(3) ? dtr_shard(pick(ndim)) : random_placement(ndim, op);
            /* Valid changes only: a Partial target from a Partial (same op), from a
             * Replicate but for product, or (a zero fill) from a Shard as P(sum). */
            if (b[i].kind == DTR_PARTIAL && a[i].kind == DTR_SHARD)
                b[i] = pick(2) ? dtr_partial(DTR_REDUCE_SUM) : dtr_replicate();
            else if (b[i].kind == DTR_PARTIAL && a[i].kind == DTR_REPLICATE && op == DTR_REDUCE_PRODUCT)
                b[i] = dtr_replicate();
        }
        random_orders(mdims, a);
        random_orders(mdims, b);
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
        dtr_spec_t src, dst;
        cr_assert_eq(dtr_spec_init(&src, mesh, a, mdims, shape, ndim, DTR_F64), DTR_OK, "%s",
                     dtr_last_error());
        cr_assert_eq(dtr_spec_init(&dst, mesh, b, mdims, shape, ndim, DTR_F64), DTR_OK, "%s",
                     dtr_last_error());
        if (!has_order(&src) && !has_order(&dst)) {
            dtr_mesh_destroy(mesh);
            continue;
        }
        n++;
        char m[64], s[64], f[128], t[128], err[512];
        dtr_shape_format(msize, mdims, m, sizeof m);
        dtr_shape_format(shape, ndim, s, sizeof s);
        dtr_placements_format(src.placements, mdims, f, sizeof f);
        dtr_placements_format(dst.placements, mdims, t, sizeof t);
        dtr_plan_options_t o = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
        dtr_plan_t plan;
        dtr_status_t st = dtr_plan_create(&src, &dst, &o, &plan);
        const char *bad = NULL;
        if (st != DTR_OK) {
            bad = dtr_last_error();
            snprintf(err, sizeof err, "%s", bad);
        } else if (interp_plan(&src, &dst, &plan, rng(), err, sizeof err) != 0) {
            bad = err;
        } else if (plan.recv_bytes_max < plan.lower_bound_recv_bytes) {
            snprintf(err, sizeof err, "receives %lld, below the bound %lld",
                     (long long)plan.recv_bytes_max, (long long)plan.lower_bound_recv_bytes);
            bad = err;
        }
        dtr_plan_t c;
        dtr_plan_options_t oc = {.strategy = DTR_STRATEGY_COMPAT, .cost = &cost};
        if (bad == NULL && dtr_plan_create(&src, &dst, &oc, &c) != DTR_ERR_UNSUPPORTED) {
            snprintf(err, sizeof err, "compat did not refuse");
            bad = err;
        }
        if (bad != NULL && failures++ < 20)
            printf("FAIL case %d: --mesh %s --shape %s --from '%s' --to '%s': %s\n", n, m, s, f,
                   t, bad);
        if (bad == NULL) {
            ordered++;
            no_exchange += plan.count[DTR_STEP_EXCHANGE] == 0;
            zero_fills += plan.count[DTR_STEP_LOCAL_ZERO_FILL] > 0;
        }
        dtr_mesh_destroy(mesh);
    }
    printf("random_orders_plan_correctly: %d cases, %d failures; %d planned right, %d of them "
           "without an exchange, %d with a zero fill\n",
           ncases, failures, ordered, no_exchange, zero_fills);
    cr_expect_gt(zero_fills, 100, "zero fills from shard orders should show up");
    cr_expect_eq(failures, 0, "%d of %d cases failed (seed %llu)", failures, ncases,
                 (unsigned long long)seed);
}

/* Elements two layouts' blocks share. */
static int64_t shared(const dtr_layout_t *a, const dtr_layout_t *b, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        int64_t ao = a->global_offset[d], bo = b->global_offset[d];
        int64_t lo = ao > bo ? ao : bo;
        int64_t ha = ao + a->local_shape[d], hb = bo + b->local_shape[d];
        int64_t hi = ha < hb ? ha : hb;
        n *= hi > lo ? hi - lo : 0;
    }
    return n;
}

/* What a rank sends in an exchange, counted from the layouts themselves (dtr_spec_layout
 * follows shard orders): what each rank of its exchange group (the ranks that agree with it
 * on every mesh dim the "before" placements do not shard) needs of its source block, less
 * its own part. The planner's per-rank figure must be exactly that; it once split the
 * peers' targets in mesh-dim order and miscounted ordered targets. */
Test(plan_orders, exchange_send_follows_the_order, .timeout = 300) {
    uint64_t seed = getenv("DTR_SEED") ? strtoull(getenv("DTR_SEED"), NULL, 0) : 20261125;
    printf("exchange_send_follows_the_order: seed %llu\n", (unsigned long long)seed);
    int exchanges = 0, ordered = 0;
    for (int n = 0; n < 400; n++) {
        rng_state = seed * 7919u + (uint64_t)n;
        int mdims = 2 + pick(3), ndim = 1 + pick(2);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS];
        for (int i = 0; i < mdims; i++) msize[i] = 1 + pick(3);
        for (int d = 0; d < ndim; d++) shape[d] = 1 + pick(24);
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < mdims; i++) {
            src[i] = pick(3) ? dtr_shard(pick(ndim)) : dtr_replicate();
            dst[i] = pick(3) ? dtr_shard(pick(ndim)) : dtr_replicate();
        }
        random_orders(mdims, src);
        random_orders(mdims, dst);
        dtr_mesh_t *mesh;
        dtr_spec_t a, b;
        cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
        if (dtr_spec_init(&a, mesh, src, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&b, mesh, dst, mdims, shape, ndim, DTR_F32) != DTR_OK) {
            dtr_mesh_destroy(mesh);
            continue;
        }
        dtr_plan_t plan;
        dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL};
        cr_assert_eq(dtr_plan_create(&a, &b, &opts, &plan), DTR_OK, "%s", dtr_last_error());
        for (int k = 0; k < plan.nsteps; k++) {
            const dtr_step_t *s = &plan.steps[k];
            if (s->kind != DTR_STEP_EXCHANGE) continue;
            dtr_spec_t before, after;
            cr_assert_eq(dtr_spec_init(&before, mesh, s->before, mdims, shape, ndim, DTR_F32), DTR_OK);
            cr_assert_eq(dtr_spec_init(&after, mesh, s->after, mdims, shape, ndim, DTR_F32), DTR_OK);
            exchanges++;
            ordered += has_order(&before) || has_order(&after);
            int64_t nranks = dtr_mesh_nranks(mesh);
            for (int r = 0; r < nranks; r++) {
                int64_t cr[DTR_MAX_MESH_DIMS], cp[DTR_MAX_MESH_DIMS];
                dtr_layout_t mine, theirs;
                cr_assert_eq(dtr_mesh_coord(mesh, r, cr), DTR_OK);
                cr_assert_eq(dtr_spec_layout(&before, r, &mine), DTR_OK);
                int64_t expect = 0;
                for (int p = 0; p < nranks; p++) {
                    cr_assert_eq(dtr_mesh_coord(mesh, p, cp), DTR_OK);
                    bool group = p != r;
                    for (int i = 0; i < mdims; i++)
                        if (s->before[i].kind != DTR_SHARD && cp[i] != cr[i]) group = false;
                    if (!group) continue;
                    cr_assert_eq(dtr_spec_layout(&after, p, &theirs), DTR_OK);
                    expect += shared(&theirs, &mine, ndim);
                }
                int64_t send, recv;
                cr_assert_eq(dtr_plan_step_bytes(&plan, k, r, &send, &recv), DTR_OK);
                cr_assert_eq(send, expect * 4,
                             "seed %llu case %d step %d rank %d: sends %lld bytes, its peers need "
                             "%lld of its block",
                             (unsigned long long)seed, n, k, r, (long long)send,
                             (long long)expect * 4);
            }
        }
        dtr_mesh_destroy(mesh);
    }
    printf("exchange_send_follows_the_order: %d exchanges, %d with shard orders\n", exchanges,
           ordered);
    cr_assert_gt(ordered, 20);
}
