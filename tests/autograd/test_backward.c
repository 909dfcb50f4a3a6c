/* Backward plans: the placement rule, the R -> P pass-through, errors, the cache key, and
 * random backward plans checked value by value by the reference interpreter. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "dtr.h"
#include "tests/redistribute/interp.h"
#include "tests/redistribute/plan_util.h"

static void placements(const char *text, dtr_placement_t *p) {
    int n;
    cr_assert_eq(dtr_placements_parse(text, p, DTR_MAX_MESH_DIMS, &n), DTR_OK, "%s", text);
}

Test(backward, placement_rule) {
    dtr_placement_t src[3], grad[3], out[3];
    placements("P(sum),S(0),P(avg)", src);
    placements("R,S(1),P(avg)", grad);
    cr_assert_eq(dtr_backward_placements(src, grad, 3, out), DTR_OK);
    char text[64];
    dtr_placements_format(out, 3, text, sizeof text);
    cr_expect_str_eq(text, "R,S(0),P(avg)", "a Partial source under a non-Partial gradient "
                                             "becomes R; the rest is the source");
    placements("P(max),R,S(1)", src);
    placements("S(0),P(sum),S(0)", grad);
    cr_assert_eq(dtr_backward_placements(src, grad, 3, out), DTR_OK);
    dtr_placements_format(out, 3, text, sizeof text);
    cr_expect_str_eq(text, "R,R,S(1)");
}

Test(backward, placement_rule_errors) {
    dtr_placement_t src[1] = {dtr_replicate()}, grad[1] = {dtr_replicate()};
    dtr_placement_t out[1] = {dtr_shard(7)};
    cr_expect_eq(dtr_backward_placements(src, grad, 0, out), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "n: 0, must be 1..8") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_backward_placements(NULL, grad, 1, out), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "src: must not be NULL") != NULL);
    grad[0].kind = (dtr_placement_kind_t)9;
    cr_expect_eq(dtr_backward_placements(src, grad, 1, out), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "grad[0]: not a placement") != NULL);
    cr_expect(out[0].kind == DTR_SHARD && out[0].dim == 7, "out untouched on error");
}

typedef struct {
    const char *mesh, *shape, *forward_src, *grad, *steps;
} case_t;

/* forward_src, the gradient's placements -> the backward plan's steps */
static const case_t cases[] = {
    {"4", "8x8", "S(0)", "R", "0:R->S(0):local_chunk"},
    {"4", "8x8", "P", "R", ""},                              /* P source: R target, no steps */
    {"4", "8x8", "R", "P", "0:P(sum)->R:all_reduce"},       /* a partial gradient is reduced */
    {"4", "8x8", "S(1)", "P", "0:P(sum)->S(1):reduce_scatter"},
    {"2x2", "8x8", "R,P", "S(0),R", "0:S(0)->R:all_gather"},
    {"4", "8x8", "S(0)", "S(1)", "0:S(1)->S(0):all_to_all"},
};

Test(backward, step_tables) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const case_t *c = &cases[k];
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_parse(c->mesh, NULL, 0, &mesh), DTR_OK);
        dtr_spec_t fsrc, grad;
        cr_assert_eq(spec_from(mesh, c->shape, c->forward_src, DTR_F32, &fsrc), DTR_OK);
        cr_assert_eq(spec_from(mesh, c->shape, c->grad, DTR_F32, &grad), DTR_OK);
        dtr_plan_t *plan = malloc(sizeof *plan);
        cr_assert_eq(dtr_plan_backward(&fsrc, &grad, NULL, plan), DTR_OK, "%s", dtr_last_error());
        char text[512];
        steps_text(plan, text, sizeof text);
        cr_expect_str_eq(text, c->steps, "backward of %s with a gradient in %s", c->forward_src,
                         c->grad);
        cr_expect(plan->backward);
        free(plan);
        dtr_mesh_destroy(mesh);
    }
}

Test(backward, replicate_to_partial_is_a_pass_through) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &mesh), DTR_OK);
    dtr_spec_t r, p;
    cr_assert_eq(spec_from(mesh, "8", "R", DTR_F32, &r), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8", "P", DTR_F32, &p), DTR_OK);
    dtr_plan_t *plan = malloc(sizeof *plan);
    dtr_plan_options_t fwd = {.strategy = DTR_STRATEGY_OPTIMAL}, bwd = fwd;
    bwd.backward = true;
    cr_assert_eq(dtr_plan_create(&r, &p, &fwd, plan), DTR_OK);
    cr_expect(plan->nsteps == 1 && plan->steps[0].kind == DTR_STEP_LOCAL_SCALE &&
                  plan->steps[0].scale == 0.25,
              "forward: R -> P(sum) divides by 4");
    cr_assert_eq(dtr_plan_create(&r, &p, &bwd, plan), DTR_OK);
    cr_expect(plan->nsteps == 1 && plan->steps[0].kind == DTR_STEP_LOCAL_RELABEL &&
                  plan->steps[0].scale == 1.0 && plan->count[DTR_STEP_LOCAL_SCALE] == 0 &&
                  plan->count[DTR_STEP_LOCAL_RELABEL] == 1 && plan->time_us == 0,
              "backward: the values are kept");
    /* integers and P(product) cannot be divided, but a pass-through needs no division */
    dtr_spec_t ri, pi, pprod;
    cr_assert_eq(spec_from(mesh, "8", "R", DTR_I32, &ri), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8", "P", DTR_I32, &pi), DTR_OK);
    cr_expect_eq(dtr_plan_create(&ri, &pi, &fwd, plan), DTR_ERR_UNSUPPORTED);
    cr_expect_eq(dtr_plan_create(&ri, &pi, &bwd, plan), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8", "P(product)", DTR_F32, &pprod), DTR_OK);
    cr_expect_eq(dtr_plan_create(&r, &pprod, &fwd, plan), DTR_ERR_UNSUPPORTED);
    cr_expect_eq(dtr_plan_create(&r, &pprod, &bwd, plan), DTR_OK);
    /* the other refusals still hold */
    dtr_spec_t s0;
    cr_assert_eq(spec_from(mesh, "8", "S(0)", DTR_F32, &s0), DTR_OK);
    cr_expect_eq(dtr_plan_create(&s0, &p, &bwd, plan), DTR_ERR_INVALID_ARGUMENT);
    free(plan);
    dtr_mesh_destroy(mesh);
}

Test(backward, cache_keeps_backward_apart) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &mesh), DTR_OK);
    dtr_spec_t r, p;
    cr_assert_eq(spec_from(mesh, "8", "R", DTR_F32, &r), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8", "P", DTR_F32, &p), DTR_OK);
    dtr_plan_cache_t *cache;
    cr_assert_eq(dtr_plan_cache_create(4, &cache), DTR_OK);
    dtr_plan_t *plan = malloc(sizeof *plan);
    dtr_plan_options_t fwd = {.strategy = DTR_STRATEGY_OPTIMAL}, bwd = fwd;
    bwd.backward = true;
    bool hit;
    cr_assert_eq(dtr_plan_cache_get(cache, &r, &p, &fwd, plan, &hit), DTR_OK);
    cr_expect(!hit && plan->steps[0].kind == DTR_STEP_LOCAL_SCALE);
    cr_assert_eq(dtr_plan_cache_get(cache, &r, &p, &bwd, plan, &hit), DTR_OK);
    cr_expect(!hit && plan->steps[0].kind == DTR_STEP_LOCAL_RELABEL,
              "a backward plan is not the cached forward one");
    cr_assert_eq(dtr_plan_cache_get(cache, &r, &p, &bwd, plan, &hit), DTR_OK);
    cr_expect(hit && plan->backward);
    free(plan);
    dtr_plan_cache_destroy(cache);
    dtr_mesh_destroy(mesh);
}

Test(backward, errors) {
    dtr_mesh_t *m4, *m22;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &m4), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &m22), DTR_OK);
    dtr_spec_t a, b;
    cr_assert_eq(spec_from(m4, "8", "R", DTR_F32, &a), DTR_OK);
    cr_assert_eq(spec_from(m22, "8", "R,R", DTR_F32, &b), DTR_OK);
    dtr_plan_t *plan = malloc(sizeof *plan);
    plan->nsteps = 77;
    cr_expect_eq(dtr_plan_backward(&a, &b, NULL, plan), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "grad: its mesh differs") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_plan_backward(NULL, &a, NULL, plan), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_plan_backward(&a, &a, NULL, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(plan->nsteps, 77, "out untouched on error");
    free(plan);
    dtr_mesh_destroy(m4);
    dtr_mesh_destroy(m22);
}

/* Random (forward source, gradient) pairs: the backward plan moves the gradient's values
 * exactly to the rule's placements (the interpreter checks every element). */
Test(backward, random_plans_move_the_gradient_exactly) {
    uint64_t seed = 20261121;
    uint64_t x = seed;
#define NEXT() (x = x * 6364136223846793005ull + 1442695040888963407ull, (int)(x >> 33))
    int checked = 0;
    for (int k = 0; k < 2000; k++) {
        int mdims = 1 + NEXT() % 3, ndim = 1 + NEXT() % 3;
        int64_t sizes[3], shape[3];
        for (int i = 0; i < mdims; i++) sizes[i] = 1 + NEXT() % 3;
        for (int d = 0; d < ndim; d++) shape[d] = NEXT() % 8;
        dtr_reduce_op_t op = (dtr_reduce_op_t)(NEXT() % DTR_REDUCE_OP_LAST);
        dtr_placement_t fs[3], g[3];
        for (int i = 0; i < mdims; i++) {
            int a = NEXT() % 3, b = NEXT() % 3;
            fs[i] = a == 0 ? dtr_shard(NEXT() % ndim) : a == 1 ? dtr_replicate() : dtr_partial(op);
            g[i] = b == 0 ? dtr_shard(NEXT() % ndim) : b == 1 ? dtr_replicate() : dtr_partial(op);
        }
        dtr_mesh_t *mesh;
        cr_assert_eq(dtr_mesh_create(mdims, sizes, NULL, 0, &mesh), DTR_OK);
        dtr_spec_t fsrc, grad;
        cr_assert_eq(dtr_spec_init(&fsrc, mesh, fs, mdims, shape, ndim, DTR_F64), DTR_OK);
        cr_assert_eq(dtr_spec_init(&grad, mesh, g, mdims, shape, ndim, DTR_F64), DTR_OK);
        dtr_plan_t *plan = malloc(sizeof *plan);
        if (dtr_plan_backward(&fsrc, &grad, NULL, plan) == DTR_OK) {
            interp_t *in = interp_create(&grad, seed + (uint64_t)k);
            char err[512];
            int rc = interp_run(in, plan, err, sizeof err);
            if (rc == 0) rc = interp_check(in, &plan->dst, err, sizeof err);
            char a[64], b[64];
            dtr_placements_format(fs, mdims, a, sizeof a);
            dtr_placements_format(g, mdims, b, sizeof b);
            cr_expect_eq(rc, 0, "seed %llu case %d: forward src %s, gradient %s: %s",
                         (unsigned long long)seed, k, a, b, err);
            interp_destroy(in);
            checked++;
        }
        free(plan);
        dtr_mesh_destroy(mesh);
    }
    cr_expect_gt(checked, 1000, "only %d of 2000 cases were valid", checked);
}

Test(gradient_reduction, divide_factors) {
    /* n, pre, post: DESIGN.md's examples and the first few */
    static const double table[][3] = {{1, 1, 1},   {2, 2, 1},   {4, 2, 2},  {6, 4, 1.5},
                                      {8, 4, 2},   {12, 4, 3},  {16, 4, 4}, {32, 8, 4},
                                      {64, 8, 8},  {3, 2, 1.5}, {5, 2, 2.5}, {1024, 32, 32}};
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        double pre = -1, post = -1;
        cr_assert_eq(dtr_divide_factors((int64_t)table[k][0], &pre, &post), DTR_OK);
        cr_expect(pre == table[k][1] && post == table[k][2], "n=%g: pre %g post %g, want %g %g",
                  table[k][0], pre, post, table[k][1], table[k][2]);
    }
    double pre = 7, post = 7;
    cr_expect_eq(dtr_divide_factors(0, &pre, &post), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "n: 0, need at least 1 worker") != NULL);
    cr_expect(pre == 7 && post == 7, "outputs untouched on error");
    cr_expect_eq(dtr_divide_factors(4, NULL, &post), DTR_ERR_INVALID_ARGUMENT);
}
