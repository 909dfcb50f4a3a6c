/* Backward plans: the placement rule, the R -> P pass-through, errors, the cache key, and
 * random backward plans checked value by value by the reference interpreter. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "dtr.h"
#include "tests/support/interp.h"
#include "tests/support/plan_util.h"

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
    cr_expect_eq(dtr_plan_create(&s0, &p, &bwd, plan), DTR_ERR_UNSUPPORTED);
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

/* PyTorch's backward_dtype: the gradient cast to it first, its steps in it, the result cast
 * back to the input's dtype last; the figures count the steps in it and both casts. */
Test(backward, backward_dtype_runs_the_steps_in_it) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &mesh), DTR_OK);
    dtr_spec_t fsrc, grad, grad16;
    cr_assert_eq(spec_from(mesh, "8x4", "S(0)", DTR_F32, &fsrc), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x4", "P", DTR_F32, &grad), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x4", "P", DTR_F16, &grad16), DTR_OK);
    dtr_cost_model_t cost;
    cost_bytes_only(&cost);
    dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    dtr_plan_t *in_f32 = malloc(sizeof *in_f32), *in_bf16 = malloc(sizeof *in_bf16);
    cr_assert_eq(dtr_plan_backward(&fsrc, &grad, &opts, in_f32), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(in_f32->op_dtype, DTR_F32);
    cr_assert_eq(dtr_plan_backward_in(&fsrc, &grad, DTR_BF16, &opts, in_bf16), DTR_OK, "%s",
                 dtr_last_error());
    char text[512];
    steps_text(in_bf16, text, sizeof text);
    cr_expect_str_eq(text, "0:P(sum)->S(0):reduce_scatter");
    cr_expect(in_bf16->backward);
    cr_expect_eq(in_bf16->src.dtype, DTR_F32);
    cr_expect_eq(in_bf16->op_dtype, DTR_BF16);
    cr_expect_eq(in_bf16->dst.dtype, DTR_F32, "the gradient comes back in the input's dtype");
    /* the reduce-scatter moves 3 of 4 chunks of 2x4 values: 24 values, 2 bytes each */
    cr_expect_eq(in_f32->steps[0].recv_bytes_max, 96);
    cr_expect_eq(in_bf16->steps[0].recv_bytes_max, 48);
    cr_expect_eq(in_bf16->recv_bytes_max, 48);
    cr_expect_eq(in_bf16->lower_bound_recv_bytes, 48);
    /* the same dtype as the input's: dtr_plan_backward's plan */
    cr_assert_eq(dtr_plan_backward_in(&fsrc, &grad, DTR_F32, &opts, in_bf16), DTR_OK);
    cr_expect_eq(in_bf16->op_dtype, DTR_F32);
    cr_expect_eq(in_bf16->steps[0].recv_bytes_max, 96);
    /* a gradient of the forward's f16 (--to-dtype f16), its steps in f64 */
    cr_assert_eq(dtr_plan_backward_in(&fsrc, &grad16, DTR_F64, &opts, in_bf16), DTR_OK);
    cr_expect(in_bf16->src.dtype == DTR_F16 && in_bf16->op_dtype == DTR_F64 &&
              in_bf16->dst.dtype == DTR_F32);
    cr_expect_eq(in_bf16->steps[0].recv_bytes_max, 192);
    /* refusals name backward_dtype; *out is untouched */
    in_bf16->nsteps = 77;
    cr_expect_eq(dtr_plan_backward_in(&fsrc, &grad, DTR_I32, &opts, in_bf16), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_plan_backward_in: backward_dtype: i32 between the gradient's f32 and "
                     "the input's f32: a redistribution casts between float dtypes (f32 f64 f16 "
                     "bf16) or between complex ones (c64 c128)");
    cr_expect_eq(dtr_plan_backward_in(&fsrc, &grad, DTR_C64, &opts, in_bf16), DTR_ERR_UNSUPPORTED);
    cr_expect_eq(dtr_plan_backward_in(&fsrc, &grad, (dtr_dtype_t)99, &opts, in_bf16),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_plan_backward_in: backward_dtype: 99 is not a dtype");
    cr_expect_eq(dtr_plan_backward_in(NULL, &grad, DTR_BF16, &opts, in_bf16),
                 DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(in_bf16->nsteps, 77, "out untouched on error");
    /* the planner's own entry point: op_dtype named */
    cr_expect_eq(dtr_plan_create_in(&grad, &fsrc, DTR_U8, NULL, in_bf16), DTR_ERR_UNSUPPORTED);
    cr_expect(strstr(dtr_last_error(), "dtr_plan_create_in: op_dtype: u8 between src's f32 and "
                                       "dst's f32") != NULL, "%s", dtr_last_error());
    free(in_f32);
    free(in_bf16);
    dtr_mesh_destroy(mesh);
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
    /* n, pre, post: docs/design.md's examples and the first few */
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

/* ---- every pair of placements ------------------------------------------------------ */

/* The communicating steps of a plan, "all_gather+all_reduce" ("" for none). */
static void collectives_text(const dtr_plan_t *plan, char *buf, size_t len) {
    buf[0] = '\0';
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *st = &plan->steps[k];
        const dtr_step_kind_info_t *info = dtr_step_kind_info(st->kind);
        if (!info->collective) continue;
        /* An exchange in which no rank hears from another is local re-slicing. */
        if (st->kind == DTR_STEP_EXCHANGE && st->peers_max == 0 && st->recv_bytes_max == 0)
            continue;
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s", at ? "+" : "", info->name);
    }
}

/* Prints "src -> dst: target [collectives]" for a forward pair; "" if the forward is refused. */
static void pair_line(dtr_mesh_t *mesh, const char *shape, const char *src, const char *dst,
                      char *line, size_t len) {
    dtr_spec_t s, d;
    dtr_plan_t *fwd = malloc(sizeof *fwd), *bwd = malloc(sizeof *bwd);
    line[0] = '\0';
    cr_assert_eq(spec_from(mesh, shape, src, DTR_F32, &s), DTR_OK);
    cr_assert_eq(spec_from(mesh, shape, dst, DTR_F32, &d), DTR_OK);
    if (dtr_plan_create(&s, &d, NULL, fwd) == DTR_OK) {
        cr_assert_eq(dtr_plan_backward(&s, &d, NULL, bwd), DTR_OK, "%s -> %s: %s", src, dst,
                     dtr_last_error());
        char target[64], coll[256];
        dtr_placements_format(bwd->dst.placements, dtr_mesh_ndims(mesh), target, sizeof target);
        collectives_text(bwd, coll, sizeof coll);
        snprintf(line, len, "%s -> %s: %s [%s]", src, dst, target, coll);
    }
    free(fwd);
    free(bwd);
}


/* Forward src -> dst with the gradient arriving in dst's placements: the gradient's target
 * placement (the rule) and the backward plan's collectives. Reviewed by hand against the
 * rule: R -> S forward gives an all-gather back; P -> R forward nothing (the gradient stays
 * Replicate); a Partial gradient is all-reduced unless the source was Partial too; an
 * S -> P(sum) forward (a zero fill) gives a reduce-scatter back. */
typedef struct {
    const char *src, *dst, *want; /* want NULL: the forward plan is refused */
} pair_t;

static const pair_t pairs_1d[] = {
    {"S(0)", "S(0)", "S(0) []"},
    {"S(0)", "S(1)", "S(0) [all_to_all]"},
    {"S(0)", "R", "S(0) []"},
    {"S(0)", "P", "S(0) [reduce_scatter]"},
    {"S(1)", "S(0)", "S(1) [all_to_all]"},
    {"S(1)", "S(1)", "S(1) []"},
    {"S(1)", "R", "S(1) []"},
    {"S(1)", "P", "S(1) [reduce_scatter]"},
    {"R", "S(0)", "R [all_gather]"},
    {"R", "S(1)", "R [all_gather]"},
    {"R", "R", "R []"},
    {"R", "P", "R [all_reduce]"},
    {"P", "S(0)", "R [all_gather]"},
    {"P", "S(1)", "R [all_gather]"},
    {"P", "R", "R []"},
    {"P", "P", "P(sum) []"},
};
static const pair_t pairs_2d[] = {
    {"S(0),S(1)", "S(0),S(1)", "S(0),S(1) []"},
    {"S(0),S(1)", "S(0),R", "S(0),S(1) []"},
    {"S(0),S(1)", "S(0),P", "S(0),S(1) [reduce_scatter]"},
    {"S(0),S(1)", "R,S(1)", "S(0),S(1) []"},
    {"S(0),S(1)", "R,R", "S(0),S(1) []"},
    {"S(0),S(1)", "R,P", "S(0),S(1) [reduce_scatter]"},
    {"S(0),S(1)", "P,S(1)", "S(0),S(1) [reduce_scatter]"},
    {"S(0),S(1)", "P,R", "S(0),S(1) [reduce_scatter]"},
    {"S(0),S(1)", "P,P", "S(0),S(1) [reduce_scatter+reduce_scatter]"},
    {"S(0),R", "S(0),S(1)", "S(0),R [all_gather]"},
    {"S(0),R", "S(0),R", "S(0),R []"},
    {"S(0),R", "S(0),P", "S(0),R [all_reduce]"},
    {"S(0),R", "R,S(1)", "S(0),R [all_gather]"},
    {"S(0),R", "R,R", "S(0),R []"},
    {"S(0),R", "R,P", "S(0),R [all_reduce]"},
    {"S(0),R", "P,S(1)", "S(0),R [reduce_scatter+all_gather]"},
    {"S(0),R", "P,R", "S(0),R [reduce_scatter]"},
    {"S(0),R", "P,P", "S(0),R [reduce_scatter+all_reduce]"},
    {"S(0),P", "S(0),S(1)", "S(0),R [all_gather]"},
    {"S(0),P", "S(0),R", "S(0),R []"},
    {"S(0),P", "S(0),P", "S(0),P(sum) []"},
    {"S(0),P", "R,S(1)", "S(0),R [all_gather]"},
    {"S(0),P", "R,R", "S(0),R []"},
    {"S(0),P", "R,P", "S(0),P(sum) []"},
    {"S(0),P", "P,S(1)", "S(0),R [reduce_scatter+all_gather]"},
    {"S(0),P", "P,R", "S(0),R [reduce_scatter]"},
    {"S(0),P", "P,P", "S(0),P(sum) [reduce_scatter]"},
    {"R,S(1)", "S(0),S(1)", "R,S(1) [all_gather]"},
    {"R,S(1)", "S(0),R", "R,S(1) [all_gather]"},
    {"R,S(1)", "S(0),P", "R,S(1) [reduce_scatter+all_gather]"},
    {"R,S(1)", "R,S(1)", "R,S(1) []"},
    {"R,S(1)", "R,R", "R,S(1) []"},
    {"R,S(1)", "R,P", "R,S(1) [reduce_scatter]"},
    {"R,S(1)", "P,S(1)", "R,S(1) [all_reduce]"},
    {"R,S(1)", "P,R", "R,S(1) [all_reduce]"},
    {"R,S(1)", "P,P", "R,S(1) [reduce_scatter+all_reduce]"},
    {"R,R", "S(0),S(1)", "R,R [all_gather+all_gather]"},
    {"R,R", "S(0),R", "R,R [all_gather]"},
    {"R,R", "S(0),P", "R,R [all_reduce+all_gather]"},
    {"R,R", "R,S(1)", "R,R [all_gather]"},
    {"R,R", "R,R", "R,R []"},
    {"R,R", "R,P", "R,R [all_reduce]"},
    {"R,R", "P,S(1)", "R,R [all_reduce+all_gather]"},
    {"R,R", "P,R", "R,R [all_reduce]"},
    {"R,R", "P,P", "R,R [all_reduce+all_reduce]"},
    {"R,P", "S(0),S(1)", "R,R [all_gather+all_gather]"},
    {"R,P", "S(0),R", "R,R [all_gather]"},
    {"R,P", "S(0),P", "R,P(sum) [all_gather]"},
    {"R,P", "R,S(1)", "R,R [all_gather]"},
    {"R,P", "R,R", "R,R []"},
    {"R,P", "R,P", "R,P(sum) []"},
    {"R,P", "P,S(1)", "R,R [all_reduce+all_gather]"},
    {"R,P", "P,R", "R,R [all_reduce]"},
    {"R,P", "P,P", "R,P(sum) [all_reduce]"},
    {"P,S(1)", "S(0),S(1)", "R,S(1) [all_gather]"},
    {"P,S(1)", "S(0),R", "R,S(1) [all_gather]"},
    {"P,S(1)", "S(0),P", "R,S(1) [reduce_scatter+all_gather]"},
    {"P,S(1)", "R,S(1)", "R,S(1) []"},
    {"P,S(1)", "R,R", "R,S(1) []"},
    {"P,S(1)", "R,P", "R,S(1) [reduce_scatter]"},
    {"P,S(1)", "P,S(1)", "P(sum),S(1) []"},
    {"P,S(1)", "P,R", "P(sum),S(1) []"},
    {"P,S(1)", "P,P", "P(sum),S(1) [reduce_scatter]"},
    {"P,R", "S(0),S(1)", "R,R [all_gather+all_gather]"},
    {"P,R", "S(0),R", "R,R [all_gather]"},
    {"P,R", "S(0),P", "R,R [all_reduce+all_gather]"},
    {"P,R", "R,S(1)", "R,R [all_gather]"},
    {"P,R", "R,R", "R,R []"},
    {"P,R", "R,P", "R,R [all_reduce]"},
    {"P,R", "P,S(1)", "P(sum),R [all_gather]"},
    {"P,R", "P,R", "P(sum),R []"},
    {"P,R", "P,P", "P(sum),R [all_reduce]"},
    {"P,P", "S(0),S(1)", "R,R [all_gather+all_gather]"},
    {"P,P", "S(0),R", "R,R [all_gather]"},
    {"P,P", "S(0),P", "R,P(sum) [all_gather]"},
    {"P,P", "R,S(1)", "R,R [all_gather]"},
    {"P,P", "R,R", "R,R []"},
    {"P,P", "R,P", "R,P(sum) []"},
    {"P,P", "P,S(1)", "P(sum),R [all_gather]"},
    {"P,P", "P,R", "P(sum),R []"},
    {"P,P", "P,P", "P(sum),P(sum) []"},
};

static void check_pairs(const char *mesh_text, const pair_t *pairs, size_t n) {
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse(mesh_text, NULL, 0, &mesh), DTR_OK);
    for (size_t k = 0; k < n; k++) {
        char line[512], want[512] = "";
        pair_line(mesh, "8x8", pairs[k].src, pairs[k].dst, line, sizeof line);
        if (pairs[k].want != NULL)
            snprintf(want, sizeof want, "%s -> %s: %s", pairs[k].src, pairs[k].dst,
                     pairs[k].want);
        cr_expect_str_eq(line, want, "mesh %s, forward %s -> %s", mesh_text, pairs[k].src,
                         pairs[k].dst);
    }
    dtr_mesh_destroy(mesh);
}

Test(backward, every_pair_on_a_1d_mesh) {
    check_pairs("4", pairs_1d, sizeof pairs_1d / sizeof pairs_1d[0]);
}

Test(backward, every_pair_on_a_2d_mesh) {
    check_pairs("2x2", pairs_2d, sizeof pairs_2d / sizeof pairs_2d[0]);
}

Test(gradient_reduction, divide_factors_1_to_1024) {
    /* pre is a power of two that stopped the doubling: the first f with n % f != 0 or
     * n / f <= f; so f / 2 still divided n and left a larger quotient. pre * post == n. */
    for (int64_t n = 1; n <= 1024; n++) {
        double pre, post;
        cr_assert_eq(dtr_divide_factors(n, &pre, &post), DTR_OK);
        int64_t f = (int64_t)pre;
        cr_expect(pre == (double)f && f >= 1 && (f & (f - 1)) == 0, "n=%lld: pre %g", (long long)n, pre);
        cr_expect(pre * post == (double)n, "n=%lld: pre %g x post %g", (long long)n, pre, post);
        cr_expect(n % f != 0 || n / f <= f, "n=%lld: pre %lld should have doubled", (long long)n,
                  (long long)f);
        if (f > 1)
            cr_expect(n % (f / 2) == 0 && n / (f / 2) > f / 2, "n=%lld: pre %lld doubled too far",
                      (long long)n, (long long)f);
    }
}
