/* Node-aware cost (planner.h): dtr_cost_model_nodes, dtr_mesh_dims_parse, which steps cross
 * nodes, and a plan that changes once a mesh dim crosses nodes (docs/nodes.md). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "redistribute/planner/testing.h"
#include "tests/support/plan_util.h"
#include "tests/support/rand_cases.h"

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

/* P,R -> S(0),S(0) on 2x4: on one node a reduce-scatter over mesh dim 0, which moves
 * (n-1)/n of the tensor between nodes; with mesh dim 0 across nodes each rank first keeps
 * its quarter, all-reduces only that over the nodes, and the exchange that cuts it is served
 * inside the node (its source is replicated over mesh dim 0). */
Test(nodes, plan_moves_inside_nodes) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from("2x4", "1024x1024", "P,R", "S(0),S(0)", DTR_F32, &mesh, &src, &dst),
                 DTR_OK, "%s", dtr_last_error());
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    dtr_plan_t plan;
    char text[512];
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &plan), DTR_OK);
    steps_text(&plan, text, sizeof text);
    cr_expect_str_eq(text, "0:P(sum)->S(0):reduce_scatter; 1:R->S(0):local_chunk");
    cr_expect(dtr_step_across_nodes(&plan, 0, 1u), "the reduce-scatter runs over mesh dim 0");
    cr_expect(!dtr_step_across_nodes(&plan, 0, 2u));
    cr_expect(!dtr_step_across_nodes(&plan, 0, 0u));
    cr_expect(!dtr_step_across_nodes(&plan, 1, 1u), "a local step");
    cr_expect(!dtr_step_across_nodes(&plan, 2, 1u), "out of range");
    cr_assert_eq(dtr_cost_model_nodes(&cost, 1u, NULL, NULL), DTR_OK);
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &plan), DTR_OK);
    steps_text(&plan, text, sizeof text);
    cr_expect_str_eq(text, "1:R->S(0):local_chunk; 0:P(sum)->R:all_reduce; "
                           "-1:R,S(0)->S(0),S(0):exchange");
    cr_expect(!dtr_step_across_nodes(&plan, 0, 1u));
    cr_expect(dtr_step_across_nodes(&plan, 1, 1u), "the all-reduce runs over mesh dim 0");
    cr_expect(!dtr_step_across_nodes(&plan, 2, 1u), "the exchange reads its node's replica");
    cr_expect(dtr_step_across_nodes(&plan, 2, 2u), "its peers differ on mesh dim 1");
    /* the all-reduce of a quarter (1 MiB, 2 ranks: 1 MiB in), then up to 128 rows in */
    cr_expect_eq(plan.steps[1].recv_bytes_max, 1048576);
    cr_expect_eq(plan.steps[2].recv_bytes_max, 524288);
    cr_expect_eq(plan.recv_bytes_max, 1572864);
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
    cr_expect_eq(a.nsteps, 2);
    cr_expect_eq(b.nsteps, 3);
    cr_assert_eq(dtr_plan_cache_get(cache, &src, &dst, &opts, &b, &hit), DTR_OK);
    cr_expect(hit, "and the same key again hits");
    dtr_plan_cache_destroy(cache);
    dtr_mesh_destroy(mesh);
}

/* Which mesh dims an exchange's bytes cross: those its source shards, except where the
 * target splits that tensor dim the same way down to them. The node-aware model charges the
 * link of those dims only, so an exchange served inside the node keeps its plan. */
static void exchange_links(const char *meshs, const char *from, const char *to, uint32_t across,
                           const char *want_steps, bool want_across) {
    dtr_mesh_t *mesh;
    dtr_spec_t src, dst;
    cr_assert_eq(change_from(meshs, "1024x1024", from, to, DTR_F32, &mesh, &src, &dst), DTR_OK,
                 "%s", dtr_last_error());
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    dtr_plan_t one, aware;
    char text[512], text2[512];
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &one), DTR_OK);
    cr_assert_eq(dtr_cost_model_nodes(&cost, across, NULL, NULL), DTR_OK);
    cr_assert_eq(dtr_plan_create(&src, &dst, &opts, &aware), DTR_OK);
    steps_text(&one, text, sizeof text);
    steps_text(&aware, text2, sizeof text2);
    cr_expect_str_eq(text, want_steps, "%s: %s -> %s", meshs, from, to);
    cr_expect_eq(one.nsteps, 1);
    cr_expect_eq(dtr_step_across_nodes(&one, 0, across), want_across, "%s: %s -> %s across 0x%x",
                 meshs, from, to, (unsigned)across);
    if (!want_across) { /* the link is not used: the same plan, the same modeled time */
        cr_expect_str_eq(text2, text, "%s: %s -> %s", meshs, from, to);
        cr_expect(aware.time_us == one.time_us, "%s: %s -> %s: %.3f against %.3f", meshs, from,
                  to, aware.time_us, one.time_us);
    }
    dtr_mesh_destroy(mesh);
}

Test(nodes, exchange_crosses_only_where_its_source_differs) {
    /* replicated over the node dim: served inside the node */
    exchange_links("2x4", "R,S(0)", "S(0),S(0)", 1u, "-1:R,S(0)->S(0),S(0):exchange", false);
    exchange_links("2x4", "R,S(0)", "S(0),S(1)", 1u, "-1:R,S(0)->S(0),S(1):exchange", false);
    /* dim 0 split first by mesh dim 0 in both: the half a rank needs is on its node */
    exchange_links("2x2x2", "S(0),S(0),R", "S(0),S(1),S(1)", 1u,
                   "-1:S(0),S(0),R->S(0),S(1),S(1):exchange", false);
    /* ... but its peers differ on mesh dim 1, which the target no longer splits dim 0 by */
    exchange_links("2x2x2", "S(0),S(0),R", "S(0),S(1),S(1)", 2u,
                   "-1:S(0),S(0),R->S(0),S(1),S(1):exchange", true);
    /* the source shards dim 0 over mesh dim 0, the target dim 1 */
    exchange_links("2x4", "S(0),S(1)", "S(1),S(0)", 1u, "-1:S(0),S(1)->S(1),S(0):exchange", true);
}


/* node_recv_bytes_max of an exchange against a count over every pair of ranks from the public
 * layouts: a rank's sources agree with it on every mesh dim the step's source does not
 * shard; what a node brings in is what its ranks' targets share with sources on other nodes
 * (a node: the ranks with the same coordinates on the mesh dims across nodes). */
static int64_t node_bytes_by_pairs(const dtr_spec_t *a, const dtr_spec_t *b, uint32_t across) {
    const dtr_mesh_t *mesh = a->mesh;
    int m = dtr_mesh_ndims(mesh), n = (int)dtr_mesh_nranks(mesh);
    int64_t node_of[64], total[64] = {0}, most = 0;
    int64_t coord[64][DTR_MAX_MESH_DIMS];
    for (int r = 0; r < n; r++) {
        cr_assert_eq(dtr_mesh_coord(mesh, r, coord[r]), DTR_OK);
        node_of[r] = 0;
        for (int k = 0; k < m; k++)
            if (across >> k & 1) node_of[r] = node_of[r] * dtr_mesh_size(mesh, k) + coord[r][k];
    }
    for (int r = 0; r < n; r++) {
        dtr_layout_t t;
        cr_assert_eq(dtr_spec_layout(b, r, &t), DTR_OK);
        for (int p = 0; p < n; p++) {
            bool source = node_of[p] != node_of[r];
            for (int k = 0; k < m && source; k++)
                source = a->placements[k].kind == DTR_SHARD || coord[p][k] == coord[r][k];
            if (!source) continue;
            dtr_layout_t c;
            cr_assert_eq(dtr_spec_layout(a, p, &c), DTR_OK);
            int64_t share = 1;
            for (int d = 0; d < t.ndim; d++) {
                int64_t lo = t.global_offset[d] > c.global_offset[d] ? t.global_offset[d]
                                                                     : c.global_offset[d];
                int64_t te = t.global_offset[d] + t.local_shape[d],
                        ce = c.global_offset[d] + c.local_shape[d];
                share *= (te < ce ? te : ce) > lo ? (te < ce ? te : ce) - lo : 0;
            }
            total[node_of[r]] += share;
        }
    }
    for (int v = 0; v < n; v++)
        if (total[v] > most) most = total[v];
    return most * (int64_t)dtr_dtype_info(a->dtype)->size;
}

/* Random changes on meshes of up to 3 dims (sizes 1-4, at most 64 ranks), uneven shapes, shard
 * orders on some, every non-empty mask of mesh dims across nodes: the exchange straight from
 * source to target. */
Test(nodes, exchange_node_bytes_match_every_pair) {
    uint64_t seed = 20261126;
    const char *env = getenv("DTR_SEED");
    if (env != NULL) seed = strtoull(env, NULL, 10);
    int checked = 0, crossing = 0;
    for (int c = 0; c < 400; c++) {
        rng_state = seed * 1000003u + (uint64_t)c;
        int mdims = 1 + pick(3), ndim = 1 + pick(3);
        int64_t msize[DTR_MAX_MESH_DIMS], shape[DTR_MAX_TENSOR_DIMS];
        for (int k = 0; k < mdims; k++) msize[k] = 1 + pick(4);
        for (int d = 0; d < ndim; d++) shape[d] = pick(13);
        dtr_placement_t src[DTR_MAX_MESH_DIMS], dst[DTR_MAX_MESH_DIMS];
        for (int k = 0; k < mdims; k++) {
            src[k] = random_placement(ndim, DTR_REDUCE_SUM);
            dst[k] = src[k].kind == DTR_PARTIAL ? src[k] : random_placement(ndim, DTR_REDUCE_SUM);
            if (dst[k].kind == DTR_PARTIAL && src[k].kind != DTR_PARTIAL) dst[k] = dtr_replicate();
        }
        if (pick(3) == 0) {
            random_orders(mdims, src);
            random_orders(mdims, dst);
        }
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_create(mdims, msize, NULL, 0, &mesh), DTR_OK);
        dtr_spec_t a, b;
        if (dtr_spec_init(&a, mesh, src, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&b, mesh, dst, mdims, shape, ndim, DTR_F32) != DTR_OK) {
            dtr_mesh_destroy(mesh);
            continue;
        }
        char desc[256], f[96], t[96];
        dtr_placements_format(a.placements, mdims, f, sizeof f);
        dtr_placements_format(b.placements, mdims, t, sizeof t);
        for (uint32_t across = 1; across < (1u << mdims); across++) {
            snprintf(desc, sizeof desc, "seed %llu case %d: mesh dims %d, %s -> %s, across 0x%x",
                     (unsigned long long)seed, c, mdims, f, t, (unsigned)across);
            dtr_cost_model_t cost;
            dtr_cost_model_default(&cost);
            cr_assert_eq(dtr_cost_model_nodes(&cost, across, NULL, NULL), DTR_OK);
            dtr__ctx_t ctx;
            dtr__ctx_init(&ctx, &a, &cost);
            dtr_plan_t p;
            dtr__builder_t builder;
            dtr__builder_init(&builder, &ctx, a.placements, &p);
            p.src = a; /* (dtr_step_across_nodes reads the mesh) */
            p.dst = b;
            cr_assert(dtr__emit_exchange(&builder, b.placements), "%s", desc);
            if (p.nsteps != 1 || p.steps[0].kind != DTR_STEP_EXCHANGE) continue;
            int64_t want = dtr_step_across_nodes(&p, 0, across) ? node_bytes_by_pairs(&a, &b, across)
                                                                : 0;
            cr_assert_eq(p.steps[0].node_recv_bytes_max, want, "%s: %lld, want %lld", desc,
                         (long long)p.steps[0].node_recv_bytes_max, (long long)want);
            if (!dtr_step_across_nodes(&p, 0, across))
                cr_assert_eq(node_bytes_by_pairs(&a, &b, across), 0,
                             "%s: bytes cross mesh dims the step does not name", desc);
            checked++;
            crossing += want > 0;
        }
        dtr_mesh_destroy(mesh);
    }
    printf("nodes: %d exchanges checked against every pair of ranks (%d bring bytes into a node), "
           "seed %llu\n", checked, crossing, (unsigned long long)seed);
    cr_expect_gt(crossing, 100);
}
