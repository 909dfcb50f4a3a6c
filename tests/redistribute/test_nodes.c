/* Node-aware cost (planner.h): dtr_cost_model_nodes, dtr_mesh_dims_parse, which steps cross
 * nodes, and a plan that changes once a mesh dim crosses nodes (docs/nodes.md). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/redistribute/plan_util.h"

Test(nodes, dims_parse) {
    uint32_t mask = 77;
    cr_assert_eq(dtr_mesh_dims_parse("0,2", 3, &mask), DTR_OK);
    cr_expect_eq(mask, 5u);
    cr_assert_eq(dtr_mesh_dims_parse("none", 3, &mask), DTR_OK);
    cr_expect_eq(mask, 0u);
    cr_assert_eq(dtr_mesh_dims_parse("", 3, &mask), DTR_OK);
    cr_expect_eq(mask, 0u);
    mask = 77;
    cr_expect_eq(dtr_mesh_dims_parse("3", 3, &mask), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_mesh_dims_parse: \"3\": item 0 is not a mesh dim of a 3-d mesh (0..2)");
    cr_expect_eq(dtr_mesh_dims_parse("1,1", 3, &mask), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_mesh_dims_parse: \"1,1\": mesh dim 1 named twice");
    cr_expect_eq(dtr_mesh_dims_parse("0,x", 2, &mask), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_mesh_dims_parse: \"0,x\": item 1 is not a mesh dim of a 2-d mesh (0..1)");
    cr_expect_eq(dtr_mesh_dims_parse("-1", 2, &mask), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_mesh_dims_parse(NULL, 2, &mask), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(mask, 77u, "written on error");
}

Test(nodes, cost_model_nodes) {
    dtr_cost_model_t m, keep;
    dtr_cost_model_default(&m);
    cr_expect_eq(m.across_nodes, 0u);
    cr_assert_eq(dtr_cost_model_nodes(&m, 1u, NULL, NULL), DTR_OK);
    cr_expect(m.alpha_us[0] == DTR_DEFAULT_INTER_ALPHA_US &&
              m.bandwidth_gbps[0] == DTR_DEFAULT_INTER_BANDWIDTH_GBPS);
    cr_expect(m.alpha_us[1] == DTR_DEFAULT_ALPHA_US &&
              m.bandwidth_gbps[1] == DTR_DEFAULT_BANDWIDTH_GBPS, "other dims keep theirs");
    cr_expect_eq(m.across_nodes, 1u);
    cr_assert_eq(dtr_cost_model_nodes(&m, 6u, "30", "2.5"), DTR_OK);
    cr_expect(m.alpha_us[1] == 30 && m.bandwidth_gbps[2] == 2.5 && m.across_nodes == 6u);
    keep = m;
    cr_expect_eq(dtr_cost_model_nodes(&m, 1u, "-1", NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_cost_model_nodes: inter_alpha_us \"-1\": must be one finite number >= 0");
    cr_expect_eq(dtr_cost_model_nodes(&m, 1u, NULL, "0"), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cost_model_nodes: inter_bandwidth_gbps \"0\": must "
                                       "be one finite number > 0");
    cr_expect_eq(dtr_cost_model_nodes(&m, 1u << DTR_MAX_MESH_DIMS, NULL, NULL),
                 DTR_ERR_INVALID_ARGUMENT);
    setenv("DTR_INTER_BANDWIDTH_GBPS", "fast", 1);
    cr_expect_eq(dtr_cost_model_nodes(&m, 1u, NULL, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_cost_model_nodes: DTR_INTER_BANDWIDTH_GBPS "
                                       "\"fast\": must be one finite number > 0");
    cr_expect_eq(memcmp(&m, &keep, sizeof m), 0, "model written on error");
    setenv("DTR_INTER_BANDWIDTH_GBPS", "3", 1);
    cr_assert_eq(dtr_cost_model_nodes(&m, 1u, NULL, NULL), DTR_OK);
    cr_expect(m.bandwidth_gbps[0] == 3);
    unsetenv("DTR_INTER_BANDWIDTH_GBPS");
    cr_expect_eq(dtr_cost_model_nodes(NULL, 1u, NULL, NULL), DTR_ERR_INVALID_ARGUMENT);
}

/* R,S(0) -> S(0),S(0) on 2x4: on one node one exchange; with mesh dim 0 across nodes the
 * rows come from inside the node (a gather along mesh dim 1, then local chunks). */
Test(nodes, plan_moves_inside_nodes) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from("2x4", "1024x1024", "R,S(0)", "S(0),S(0)", DTR_F32, &mesh, &src, &dst),
                 DTR_OK, "%s", dtr_last_error());
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    dtr_plan_t plan;
    char text[512];
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &plan), DTR_OK);
    steps_text(&plan, text, sizeof text);
    cr_expect_str_eq(text, "-1:R,S(0)->S(0),S(0):exchange");
    cr_expect(dtr_step_across_nodes(&plan, 0, 1u), "the exchange changes mesh dim 0");
    cr_expect(!dtr_step_across_nodes(&plan, 0, 0u));
    cr_expect(!dtr_step_across_nodes(&plan, 1, 1u), "out of range");
    cr_assert_eq(dtr_cost_model_nodes(&cost, 1u, NULL, NULL), DTR_OK);
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &plan), DTR_OK);
    steps_text(&plan, text, sizeof text);
    cr_expect_str_eq(text, "1:S(0)->R:all_gather; 0:R->S(0):local_chunk; 1:R->S(0):local_chunk");
    for (int k = 0; k < plan.nsteps; k++)
        cr_expect(!dtr_step_across_nodes(&plan, k, 1u), "step %d stays inside the node", k);
    cr_expect_eq(plan.cost.across_nodes, 1u);
    /* the cache keeps the two apart */
    dtr_plan_cache_t *cache = NULL;
    cr_assert_eq(dtr_plan_cache_create(4, &cache), DTR_OK);
    dtr_plan_t a, b;
    bool hit = true;
    dtr_cost_model_default(&cost);
    cr_assert_eq(dtr_plan_cache_get(cache, &src, &dst, &opts, &a, &hit), DTR_OK);
    cr_expect(!hit);
    cr_assert_eq(dtr_cost_model_nodes(&cost, 1u, NULL, NULL), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &src, &dst, &opts, &b, &hit), DTR_OK);
    cr_expect(!hit, "node-aware: another key");
    cr_expect_eq(a.nsteps, 1);
    cr_expect_eq(b.nsteps, 3);
    cr_assert_eq(dtr_plan_cache_get(cache, &src, &dst, &opts, &b, &hit), DTR_OK);
    cr_expect(hit, "and the same key again hits");
    dtr_plan_cache_destroy(cache);
    dtr_mesh_destroy(mesh);
}
