#define _POSIX_C_SOURCE 200809L
/*
 * PyTorch's own DTensor test expectations, as tables (issue 27, item 7). Each row names the
 * test in PyTorch's test/distributed/tensor/test_redistribute.py (main, read 2026-11) it
 * comes from and the number of collectives that test asserts (CommDebugMode's total, or the
 * one collective it counts). dtr's optimal and compat plans must have the counts the row
 * gives, and run right in the reference interpreter. Where dtr's count differs from
 * PyTorch's, the row says why (`differs`); docs/semantics.md ("Where dtr differs from
 * PyTorch's tests") lists the same differences. Ranks: PyTorch's tests run 4 ranks
 * (RedistributeTest) or 8 (MultiDimRedistributeTest); the tables use the same meshes.
 */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "tests/support/interp.h"
#include "tests/support/plan_util.h"

typedef struct {
    const char *test; /* PyTorch's test */
    const char *mesh, *shape, *from, *to;
    int torch;        /* collectives PyTorch's test asserts */
    int optimal;      /* dtr's optimal plan */
    int compat;       /* dtr's compat plan (-1: refused) */
    const char *differs; /* why optimal differs from PyTorch's count (NULL: it does not) */
} torch_case_t;

static int collectives(const dtr_plan_t *plan) {
    int n = 0;
    for (int k = 0; k < plan->nsteps; k++) n += dtr_step_kind_info(plan->steps[k].kind)->collective;
    return n;
}

/* Plans the change with both strategies (backward: the gradient arriving in `to`, back to
 * `from`, as dtr_plan_backward) and checks the counts and the interpreter. */
static void check_row(const torch_case_t *c, bool backward) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from(c->mesh, c->shape, c->from, c->to, DTR_F32, &mesh, &src, &dst),
                 DTR_OK, "%s: %s", c->test, dtr_last_error());
    const char *what = backward ? "backward" : "forward";
    if (c->differs == NULL)
        cr_expect_eq(c->optimal, c->torch, "%s: a row whose count differs must say why", c->test);
    for (int k = 0; k < 2; k++) {
        dtr_plan_options_t o = {.strategy = k == 0 ? DTR_STRATEGY_OPTIMAL : DTR_STRATEGY_COMPAT};
        dtr_plan_t plan;
        dtr_status_t st = backward ? dtr_plan_backward(&src, &dst, &o, &plan)
                                   : dtr_plan_create(&src, &dst, &o, &plan);
        int want = k == 0 ? c->optimal : c->compat;
        const char *name = k == 0 ? "optimal" : "compat";
        if (want < 0) {
            cr_expect_eq(st, DTR_ERR_UNSUPPORTED, "%s (%s %s): compat should refuse", c->test, what,
                         name);
            continue;
        }
        cr_assert_eq(st, DTR_OK, "%s (%s %s): %s", c->test, what, name, dtr_last_error());
        char steps[1024], err[512];
        steps_text(&plan, steps, sizeof steps);
        cr_expect_eq(collectives(&plan), want, "%s (%s %s) %s %s -> %s on %s: %d collectives (%s)",
                     c->test, what, name, c->shape, c->from, c->to, c->mesh, collectives(&plan),
                     steps);
        cr_expect_eq(interp_plan(&plan.src, &plan.dst, &plan, 11, err, sizeof err), 0,
                     "%s (%s %s): %s", c->test, what, name, err);
    }
    dtr_mesh_destroy(mesh);
}

#define RT "test_redistribute.py::RedistributeTest::"
#define MT "test_redistribute.py::MultiDimRedistributeTest::"
#define A2A_1 "dtr: one exchange (an all-to-all-v) where PyTorch runs two collectives"

/* Forward changes: the count each test asserts. */
static const torch_case_t forward_rows[] = {
    /* test_shard_to_replicate_forward_backward: one all_gather_into_tensor */
    {RT "test_shard_to_replicate_forward_backward", "4", "12x3", "S(0)", "R", 1, 1, 1, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "13x3", "S(0)", "R", 1, 1, 1, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "14x3", "S(0)", "R", 1, 1, 1, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "3x12", "S(1)", "R", 1, 1, 1, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "3x13", "S(1)", "R", 1, 1, 1, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "3x14", "S(1)", "R", 1, 1, 1, NULL},
    /* test_replicate_to_replicate_forward_backward, test_partial_to_partial_forward_backward:
     * no communication */
    {RT "test_replicate_to_replicate_forward_backward", "4", "12x3", "R", "R", 0, 0, 0, NULL},
    {RT "test_partial_to_partial_forward_backward", "4", "12x3", "P", "P", 0, 0, 0, NULL},
    /* test_replicate_to_shard_forward_backward: a local chunk */
    {RT "test_replicate_to_shard_forward_backward", "4", "13x3", "R", "S(0)", 0, 0, 0, NULL},
    {RT "test_replicate_to_shard_forward_backward", "4", "3x14", "R", "S(1)", 0, 0, 0, NULL},
    /* test_partial_to_replicate_forward_backward: one all_reduce */
    {RT "test_partial_to_replicate_forward_backward", "4", "12x3", "P", "R", 1, 1, 1, NULL},
    /* test_replicate_to_partial: no communication (PyTorch refuses it in redistribute and
     * runs it through Redistribute.apply; dtr plans it, docs/semantics.md) */
    {RT "test_replicate_to_partial", "4", "12x3", "R", "P", 0, 0, 0, NULL},
    {RT "test_replicate_to_partial", "2x2", "12x3", "R,R", "P,P", 0, 0, 0, NULL},
    /* test_partial_to_shard: one reduce_scatter_tensor */
    {RT "test_partial_to_shard", "4", "12x3", "P", "S(0)", 1, 1, 1, NULL},
    {RT "test_partial_to_shard", "4", "13x3", "P", "S(0)", 1, 1, 1, NULL},
    {RT "test_partial_to_shard", "4", "14x3", "P", "S(0)", 1, 1, 1, NULL},
    {RT "test_partial_to_shard", "4", "3x12", "P", "S(1)", 1, 1, 1, NULL},
    {RT "test_partial_to_shard", "4", "3x13", "P", "S(1)", 1, 1, 1, NULL},
    {RT "test_partial_to_shard", "4", "3x14", "P", "S(1)", 1, 1, 1, NULL},
    /* test_redistribute_shard_dim_change, 1-d mesh: one shard_dim_alltoall (compat, the seed,
     * gathers and chunks: also one collective) */
    {RT "test_redistribute_shard_dim_change", "4", "8x8", "S(0)", "S(1)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "4", "8x8x8", "S(0)", "S(1)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "4", "8x5", "S(0)", "S(1)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "4", "5x8", "S(1)", "S(0)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "4", "5x5", "S(0)", "S(1)", 1, 1, 1, NULL},
    /* ... 2-d mesh, comm_counts_2d = [1, 2, 2] (+ [2, 1] for 3-d tensors) */
    {RT "test_redistribute_shard_dim_change", "2x2", "8x8", "S(0),S(1)", "S(0),S(0)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "2x2", "5x5", "S(0),S(1)", "S(0),S(0)", 1, 1, 1, NULL},
    {RT "test_redistribute_shard_dim_change", "2x2", "8x8", "S(0),S(1)", "S(1),S(0)", 2, 1, 2, A2A_1},
    {RT "test_redistribute_shard_dim_change", "2x2", "5x8", "S(0),S(1)", "S(1),S(0)", 2, 1, 2, A2A_1},
    {RT "test_redistribute_shard_dim_change", "2x2", "8x8", "S(0),S(0)", "S(1),S(1)", 2, 2, 2, NULL},
    {RT "test_redistribute_shard_dim_change", "2x2", "5x5", "S(0),S(0)", "S(1),S(1)", 2, 2, 2, NULL},
    {RT "test_redistribute_shard_dim_change", "2x2", "8x8x8", "S(0),S(2)", "S(1),S(0)", 2, 2, 2, NULL},
    {RT "test_redistribute_shard_dim_change", "2x2", "8x8x8", "S(1),S(1)", "S(1),S(2)", 1, 1, 1, NULL},
    /* test_one_chunk_mesh: on 4x1, [S(0), src] -> [S(0), dst] for src in S(1), R, P and dst in
     * S(0), S(1), R: no collective (issue 27, item 1) */
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),S(1)", "S(0),S(0)", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),S(1)", "S(0),R", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),R", "S(0),S(0)", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),R", "S(0),S(1)", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),P", "S(0),S(0)", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),P", "S(0),S(1)", 0, 0, 0, NULL},
    {RT "test_one_chunk_mesh", "4x1", "16x8", "S(0),P", "S(0),R", 0, 0, 0, NULL},
    /* test_redistribute_to_partial: the changes PyTorch allows */
    {RT "test_redistribute_to_partial", "2x2", "12x8", "P,S(0)", "P,S(0)", 0, 0, 0, NULL},
    {RT "test_redistribute_to_partial", "2x2", "12x8", "P,S(0)", "P,S(1)", 1, 1, 1, NULL},
    {RT "test_redistribute_to_partial", "2x2", "12x8", "S(0),P", "R,P", 1, 1, 1, NULL},
    {RT "test_redistribute_to_partial", "2x2", "12x8", "S(0),P(product)", "R,P(product)", 1, 1, 1,
     NULL},
    /* MultiDimRedistributeTest.test_redistribute_shard_dim_multi_dim_mesh: 2x2x2, 8x8x8,
     * comm_counts_3d = [3, 3, 2, 1, 2, 2] */
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(0),S(0),S(0)",
     "S(1),S(1),S(1)", 3, 3, 3, NULL},
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(0),S(1),S(0)",
     "S(1),S(0),S(0)", 3, 1, 2, "dtr: one exchange (an all-to-all-v) where PyTorch runs three"},
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(0),S(1),S(2)",
     "S(2),S(1),S(0)", 2, 1, 2, A2A_1},
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(1),S(0),S(0)",
     "R,S(0),S(0)", 1, 1, 1, NULL},
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(1),R,S(0)",
     "R,S(0),S(0)", 2, 1, 2, A2A_1},
    {MT "test_redistribute_shard_dim_multi_dim_mesh", "2x2x2", "8x8x8", "S(0),S(0),S(1)",
     "S(0),S(1),S(2)", 2, 2, 2, NULL},
};

/* Backward: the gradient arriving in `to` goes back to `from` (Partial there becoming R). */
static const torch_case_t backward_rows[] = {
    /* test_shard_to_replicate_forward_backward: the gradient comes back as a shard, no
     * communication */
    {RT "test_shard_to_replicate_forward_backward", "4", "13x3", "S(0)", "R", 0, 0, 0, NULL},
    {RT "test_shard_to_replicate_forward_backward", "4", "3x14", "S(1)", "R", 0, 0, 0, NULL},
    {RT "test_replicate_to_replicate_forward_backward", "4", "12x3", "R", "R", 0, 0, 0, NULL},
    {RT "test_partial_to_partial_forward_backward", "4", "12x3", "P", "P", 0, 0, 0, NULL},
    /* test_replicate_to_shard_forward_backward: one all_gather_into_tensor */
    {RT "test_replicate_to_shard_forward_backward", "4", "13x3", "R", "S(0)", 1, 1, 1, NULL},
    {RT "test_replicate_to_shard_forward_backward", "4", "3x14", "R", "S(1)", 1, 1, 1, NULL},
    /* test_partial_to_replicate_forward_backward: the R -> P is a pass-through */
    {RT "test_partial_to_replicate_forward_backward", "4", "12x3", "P", "R", 0, 0, 0, NULL},
};

Test(pytorch_tables, forward_collective_counts) {
    for (size_t k = 0; k < sizeof forward_rows / sizeof forward_rows[0]; k++)
        check_row(&forward_rows[k], false);
}

Test(pytorch_tables, backward_collective_counts) {
    for (size_t k = 0; k < sizeof backward_rows / sizeof backward_rows[0]; k++)
        check_row(&backward_rows[k], true);
}

/* test_redistribute_to_partial: which changes into Partial are allowed. PyTorch refuses
 * R -> P in redistribute; dtr plans it (docs/semantics.md lists the difference). */
Test(pytorch_tables, changes_into_partial) {
    static const struct {
        const char *from, *to;
        bool torch_allows, dtr_allows;
        const char *error; /* dtr's, when it refuses */
    } rows[] = {
        {"P,S(0)", "P,S(0)", true, true, NULL},
        {"P,S(0)", "P,S(1)", true, true, NULL},
        {"S(0),P", "R,P", true, true, NULL},
        {"S(0),P(product)", "R,P(product)", true, true, NULL},
        {"S(0),R", "S(0),P", false, true, NULL},
        {"S(0),R", "R,P", false, true, NULL},
        {"S(0),S(1)", "R,P", true, true, NULL}, /* PyTorch 2.15: zeros outside the shard */
        {"S(0),S(1)", "R,P(max)", false, false,
         "mesh dim 1: S(1) -> P(max): a Shard becomes Partial only as P(sum)"},
        {"S(0),P(product)", "R,P(sum)", false, false,
         "mesh dim 1: P(product) -> P(sum): a Partial cannot change its reduce op"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        dtr_mesh_t *mesh;
        dtr_spec_t src, dst;
        cr_assert_eq(change_from("2x2", "12x8", rows[k].from, rows[k].to, DTR_F32, &mesh, &src,
                                 &dst),
                     DTR_OK);
        dtr_plan_t plan;
        dtr_status_t st = dtr_plan_create(&src, &dst, NULL, &plan);
        if (rows[k].dtr_allows) {
            cr_expect_eq(st, DTR_OK, "%s -> %s: %s", rows[k].from, rows[k].to, dtr_last_error());
            char err[512];
            if (st == DTR_OK)
                cr_expect_eq(interp_plan(&src, &dst, &plan, 3, err, sizeof err), 0, "%s -> %s: %s",
                             rows[k].from, rows[k].to, err);
        } else {
            cr_expect_neq(st, DTR_OK, "%s -> %s should be refused", rows[k].from, rows[k].to);
            cr_expect(strstr(dtr_last_error(), rows[k].error) != NULL, "%s -> %s: %s", rows[k].from,
                      rows[k].to, dtr_last_error());
        }
        /* A difference from PyTorch is only R -> P, which dtr plans on purpose. */
        if (rows[k].torch_allows != rows[k].dtr_allows)
            cr_expect(strchr(rows[k].from, 'R') != NULL && strchr(rows[k].to, 'P') != NULL,
                      "%s -> %s: an unexplained difference", rows[k].from, rows[k].to);
        dtr_mesh_destroy(mesh);
    }
}

/* MultiDimRedistributeTest.test_multi_dim_mesh: on a 4x2 mesh, a 16x24 tensor, every input
 * of R, S(0), S(1), P per mesh dim to every output of R, S(0), S(1): both strategies' plans
 * give the tensor (PyTorch checks full_tensor() against num_sums * the tensor; the
 * interpreter checks every rank's block). */
Test(pytorch_tables, multi_dim_mesh_every_change) {
    const char *ins[4] = {"R", "S(0)", "S(1)", "P"};
    int planned = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 3; c++)
                for (int d = 0; d < 3; d++) {
                    char from[32], to[32];
                    snprintf(from, sizeof from, "%s,%s", ins[a], ins[b]);
                    snprintf(to, sizeof to, "%s,%s", ins[c], ins[d]);
                    dtr_mesh_t *mesh;
                    dtr_spec_t src, dst;
                    cr_assert_eq(change_from("4x2", "16x24", from, to, DTR_F32, &mesh, &src, &dst),
                                 DTR_OK);
                    for (int k = 0; k < 2; k++) {
                        dtr_plan_options_t o = {.strategy = k == 0 ? DTR_STRATEGY_OPTIMAL
                                                                   : DTR_STRATEGY_COMPAT};
                        dtr_plan_t plan;
                        char err[512];
                        cr_assert_eq(dtr_plan_create(&src, &dst, &o, &plan), DTR_OK, "%s -> %s: %s",
                                     from, to, dtr_last_error());
                        cr_expect_eq(interp_plan(&src, &dst, &plan, 5, err, sizeof err), 0,
                                     "%s -> %s (%s): %s", from, to, k == 0 ? "optimal" : "compat",
                                     err);
                        planned++;
                    }
                    dtr_mesh_destroy(mesh);
                }
    cr_expect_eq(planned, 2 * 16 * 9);
}
