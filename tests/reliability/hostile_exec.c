/* The hostile-input table's cases for contexts, execution (a 1-rank mesh over the solo
 * backend) and autograd (hostile.h; the table is test_hostile.c's). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reliability/hostile.h"

/* ---- contexts and execution (1-rank mesh, solo backend) -------------------------------- */

CASE(context_null_ops) {
    dtr_context_t *c = (dtr_context_t *)(uintptr_t)0x5e;
    *st = dtr_context_create(NULL, NULL, &c);
    return c == (dtr_context_t *)(uintptr_t)0x5e;
}
CASE(context_missing_operation) {
    dtr_backend_ops_t ops = solo_backend_ops;
    ops.test = NULL;
    dtr_context_t *c = (dtr_context_t *)(uintptr_t)0x5e;
    *st = dtr_context_create(&ops, NULL, &c);
    return c == (dtr_context_t *)(uintptr_t)0x5e;
}
CASE(context_bad_timeout_env) {
    setenv("DTR_TIMEOUT_S", "soon", 1);
    dtr_context_t *c = (dtr_context_t *)(uintptr_t)0x5e;
    *st = dtr_context_create(&solo_backend_ops, NULL, &c);
    unsetenv("DTR_TIMEOUT_S");
    return c == (dtr_context_t *)(uintptr_t)0x5e;
}
CASE(context_nan_timeout) {
    dtr_context_t *c = solo_context();
    double before = dtr_context_timeout(c);
    *st = dtr_context_set_timeout(c, NAN);
    bool ok = dtr_context_timeout(c) == before;
    dtr_context_destroy(c);
    return ok;
}

typedef struct {
    dtr_mesh_t *m;
    dtr_plan_t plan;
    dtr_context_t *ctx;
    float in[8], in_keep[8], out[8], out_keep[8];
} run_t;

static run_t *run_setup(void) {
    static run_t r;
    memset(&r, 0, sizeof r);
    r.m = mesh_of("1");
    plan_of(&r.plan, r.m, "R", "S(0)", "8", DTR_F32);
    r.ctx = solo_context();
    for (int k = 0; k < 8; k++) r.in[k] = (float)k, r.out[k] = -1;
    memcpy(r.in_keep, r.in, sizeof r.in), memcpy(r.out_keep, r.out, sizeof r.out);
    return &r;
}
static bool run_done(run_t *r) {
    bool ok = memcmp(r->in, r->in_keep, sizeof r->in) == 0 &&
              memcmp(r->out, r->out_keep, sizeof r->out) == 0;
    dtr_context_destroy(r->ctx);
    dtr_mesh_destroy(r->m);
    return ok;
}
CASE(run_null_context) {
    run_t *r = run_setup();
    *st = dtr_redistribute(NULL, &r->plan, r->in, 32, r->out, 32);
    return run_done(r);
}
CASE(run_null_plan) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, NULL, r->in, 32, r->out, 32);
    return run_done(r);
}
CASE(run_wrong_in_bytes) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, &r->plan, r->in, 31, r->out, 32);
    return run_done(r);
}
CASE(run_huge_in_bytes) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, &r->plan, r->in, SIZE_MAX, r->out, 32);
    return run_done(r);
}
CASE(run_small_out) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, &r->plan, r->in, 32, r->out, 16);
    return run_done(r);
}
CASE(run_null_in) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, &r->plan, NULL, 32, r->out, 32);
    return run_done(r);
}
CASE(run_out_overlaps_in) {
    run_t *r = run_setup();
    *st = dtr_redistribute(r->ctx, &r->plan, r->in, 32, r->in + 2, 32);
    return run_done(r);
}
CASE(run_corrupt_plan) {
    run_t *r = run_setup();
    r->plan.nsteps = 1000;
    *st = dtr_redistribute(r->ctx, &r->plan, r->in, 32, r->out, 32);
    return run_done(r);
}
CASE(run_start_null_request) {
    run_t *r = run_setup();
    *st = dtr_redistribute_start(r->ctx, &r->plan, r->in, 32, r->out, 32, NULL);
    return run_done(r);
}
CASE(request_wait_null) {
    *st = dtr_request_wait(NULL);
    return true;
}
CASE(all_reduce_dims_beyond_mesh) {
    run_t *r = run_setup();
    *st = dtr_all_reduce(r->ctx, r->m, 0x4, r->in, r->out, 8, DTR_F32, DTR_REDUCE_SUM);
    return run_done(r);
}
CASE(all_reduce_negative_count) {
    run_t *r = run_setup();
    *st = dtr_all_reduce(r->ctx, r->m, 0x1, r->in, r->out, -8, DTR_F32, DTR_REDUCE_SUM);
    return run_done(r);
}
CASE(all_reduce_fp8) {
    run_t *r = run_setup();
    *st = dtr_all_reduce(r->ctx, r->m, 0x1, r->in, r->out, 8, DTR_F8E5M2, DTR_REDUCE_SUM);
    return run_done(r);
}
CASE(all_reduce_bad_op) {
    run_t *r = run_setup();
    *st = dtr_all_reduce(r->ctx, r->m, 0x1, r->in, r->out, 8, DTR_F32, (dtr_reduce_op_t)40);
    return run_done(r);
}
CASE(all_reduce_complex_max) {
    run_t *r = run_setup();
    *st = dtr_all_reduce(r->ctx, r->m, 0x1, r->in, r->out, 4, DTR_C64, DTR_REDUCE_MAX);
    return run_done(r);
}
CASE(reduce_scatter_overlap) {
    run_t *r = run_setup();
    *st = dtr_reduce_scatter(r->ctx, r->m, 0x1, r->in, r->in + 1, 4, DTR_F32, DTR_REDUCE_SUM);
    return run_done(r);
}
CASE(group_index_rank_outside) {
    dtr_mesh_t *m = mesh_of("2x2");
    int64_t i = -9;
    *st = dtr_mesh_group_index(m, 0x1, 9, &i);
    dtr_mesh_destroy(m);
    return i == -9;
}
CASE(pattern_fill_wrong_size) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t s;
    spec_of(&s, m, "S(0)", "8", DTR_F32);
    float buf[4] = {-1, -1, -1, -1};
    *st = dtr_pattern_fill(&s, 0, buf, 12);
    dtr_mesh_destroy(m);
    return buf[0] == -1 && buf[3] == -1;
}

/* ---- between meshes (1-rank meshes over the solo backend) ------------------------------ */

typedef struct {
    dtr_mesh_t *m;
    dtr_spec_t a, b;
    dtr_cross_plan_t *plan;
    dtr_context_t *ctx;
    float in[8], in_keep[8], out[8], out_keep[8];
} cross_t;

static cross_t *cross_setup(const char *to) {
    static cross_t x;
    memset(&x, 0, sizeof x);
    x.m = mesh_of("1");
    spec_of(&x.a, x.m, "R", "8", DTR_F32);
    spec_of(&x.b, x.m, to, "8", DTR_F32);
    if (strcmp(to, "P") != 0)
        cr_assert_eq(dtr_cross_plan_create(&x.a, &x.b, NULL, &x.plan), DTR_OK, "fixture plan");
    x.ctx = solo_context();
    for (int k = 0; k < 8; k++) x.in[k] = (float)k, x.out[k] = -1;
    memcpy(x.in_keep, x.in, sizeof x.in), memcpy(x.out_keep, x.out, sizeof x.out);
    return &x;
}
static bool cross_done(cross_t *x) {
    bool ok = memcmp(x->in, x->in_keep, sizeof x->in) == 0 &&
              memcmp(x->out, x->out_keep, sizeof x->out) == 0;
    dtr_cross_plan_destroy(x->plan);
    dtr_context_destroy(x->ctx);
    dtr_mesh_destroy(x->m);
    return ok;
}
CASE(cross_null_plan) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_redistribute_cross(x->ctx, NULL, x->in, 32, x->out, 32);
    return cross_done(x);
}
CASE(cross_wrong_in_bytes) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_redistribute_cross(x->ctx, x->plan, x->in, 28, x->out, 32);
    return cross_done(x);
}
CASE(cross_small_out) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_redistribute_cross(x->ctx, x->plan, x->in, 32, x->out, 16);
    return cross_done(x);
}
CASE(cross_null_out) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_redistribute_cross(x->ctx, x->plan, x->in, 32, NULL, 32);
    return cross_done(x);
}
CASE(cross_out_overlaps_in) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_redistribute_cross(x->ctx, x->plan, x->in, 32, x->in + 4, 32);
    return cross_done(x);
}
CASE(cross_plan_partial_dst) {
    cross_t *x = cross_setup("P");
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)(uintptr_t)0x5e;
    *st = dtr_cross_plan_create(&x->a, &x->b, NULL, &p);
    return cross_done(x) && p == (dtr_cross_plan_t *)(uintptr_t)0x5e;
}
CASE(cross_plan_null_out) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_cross_plan_create(&x->a, &x->b, NULL, NULL);
    return cross_done(x);
}
CASE(cross_plan_uninitialised_dst) {
    cross_t *x = cross_setup("S(0)");
    dtr_spec_t junk;
    memset(&junk, 0x7f, sizeof junk);
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)(uintptr_t)0x5e;
    *st = dtr_cross_plan_create(&x->a, &junk, NULL, &p);
    return cross_done(x) && p == (dtr_cross_plan_t *)(uintptr_t)0x5e;
}
CASE(cross_figures_null_out) {
    cross_t *x = cross_setup("S(0)");
    *st = dtr_cross_plan_figures(x->plan, NULL);
    return cross_done(x);
}
CASE(cross_rank_bytes_null_send) {
    cross_t *x = cross_setup("S(0)");
    int64_t recv = -9;
    *st = dtr_cross_plan_rank_bytes(x->plan, 0, NULL, &recv);
    return cross_done(x) && recv == -9;
}
CASE(cross_print_json_null_plan) {
    *st = dtr_cross_plan_print_json(NULL, stdout);
    return true;
}

CASE(cross_dst_out_of_range) {
    cross_t *x = cross_setup("S(0)");
    dtr_spec_t keep, out;
    memset(&out, 0x3c, sizeof out), memcpy(&keep, &out, sizeof out);
    *st = dtr_cross_plan_dst(x->plan, 1, &out);
    return cross_done(x) && SAME(out, keep);
}
CASE(cross_batch_null_arrays) {
    cross_t *x = cross_setup("S(0)");
    size_t bytes[1] = {32};
    *st = dtr_redistribute_cross_batch(x->ctx, x->plan, NULL, bytes, NULL, bytes);
    return cross_done(x);
}
CASE(cross_batch_plan_to_single_call) {
    cross_t *x = cross_setup("S(0)");
    dtr_spec_t a[2] = {x->a, x->a}, b[2] = {x->b, x->b};
    dtr_cross_plan_t *two = NULL;
    cr_assert_eq(dtr_cross_plan_create_batch(2, a, b, NULL, &two), DTR_OK, "fixture batch");
    *st = dtr_redistribute_cross(x->ctx, two, x->in, 32, x->out, 32);
    dtr_cross_plan_destroy(two);
    return cross_done(x);
}
CASE(cross_batch_negative_count) {
    cross_t *x = cross_setup("S(0)");
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)(uintptr_t)0x5e;
    *st = dtr_cross_plan_create_batch(-1, &x->a, &x->b, NULL, &p);
    return cross_done(x) && p == (dtr_cross_plan_t *)(uintptr_t)0x5e;
}
CASE(cross_cap_below_an_element) {
    cross_t *x = cross_setup("S(0)");
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)(uintptr_t)0x5e;
    dtr_cross_options_t opts = {.staging_cap_bytes = 2};
    *st = dtr_cross_plan_create(&x->a, &x->b, &opts, &p);
    return cross_done(x) && p == (dtr_cross_plan_t *)(uintptr_t)0x5e;
}

/* ---- autograd ----------------------------------------------------------------------- */

CASE(divide_factors_zero) {
    double pre = -9, post = -9;
    *st = dtr_divide_factors(0, &pre, &post);
    return pre == -9 && post == -9;
}
CASE(grad_factors_negative_size) {
    dtr_grad_factors_t f, k;
    memset(&f, 0x66, sizeof f), k = f;
    *st = dtr_grad_factors(-2, 1, DTR_F32, 0, false, &f);
    return SAME(f, k);
}
CASE(backward_placements_null) {
    dtr_placement_t out[1] = {dtr_replicate()}, k[1];
    memcpy(k, out, sizeof out);
    *st = dtr_backward_placements(NULL, NULL, 1, out);
    return SAME(out, k);
}
CASE(reducer_null_desc) {
    dtr_reducer_t *r = (dtr_reducer_t *)(uintptr_t)0x5e;
    dtr_context_t *c = solo_context();
    *st = dtr_reducer_create(c, NULL, &r);
    dtr_context_destroy(c);
    return r == (dtr_reducer_t *)(uintptr_t)0x5e;
}
CASE(tape_backward_empty) {
    dtr_tape_t *t = NULL;
    cr_assert_eq(dtr_tape_create(NULL, &t), DTR_OK);
    dtr_context_t *c = solo_context();
    float g[4] = {1, 2, 3, 4}, gk[4], out[4] = {-1, -1, -1, -1}, ok[4];
    memcpy(gk, g, sizeof g), memcpy(ok, out, sizeof out);
    *st = dtr_tape_backward(t, c, g, sizeof g, out, sizeof out, NULL);
    dtr_context_destroy(c);
    dtr_tape_destroy(t);
    return SAME(g, gk) && SAME(out, ok);
}

CASE(hook_all_reduce_null_ctx) {
    dtr_mesh_t *m = mesh_of("4");
    float buf[4] = {1, 2, 3, 4}, keep[4];
    memcpy(keep, buf, sizeof buf);
    *st = dtr_hook_all_reduce(NULL, NULL, m, 0x1, buf, 4, DTR_F32);
    dtr_mesh_destroy(m);
    return SAME(buf, keep);
}
CASE(hook_fp16_integer_dtype) {
    run_t *r = run_setup();
    int32_t buf[4] = {1, 2, 3, 4}, keep[4];
    memcpy(keep, buf, sizeof buf);
    *st = dtr_hook_fp16_compress(NULL, r->ctx, r->m, 0x1, buf, 4, DTR_I32);
    bool ok = SAME(buf, keep);
    return run_done(r) && ok;
}
CASE(hook_wrapper_null_arg) {
    run_t *r = run_setup();
    *st = dtr_hook_compress_wrapper(NULL, r->ctx, r->m, 0x1, r->in, 8, DTR_F32);
    return run_done(r);
}
CASE(fused_negative_count) {
    run_t *r = run_setup();
    dtr_fused_entry_t e[1] = {{.buf = r->in, .count = -3, .dims = 0x1}};
    int64_t bytes = -9;
    *st = dtr_fused_all_reduce(r->ctx, r->m, e, 1, DTR_F32, DTR_REDUCE_SUM, &bytes);
    return run_done(r) && bytes == -9;
}
CASE(reducer_info_null) {
    dtr_grad_factors_t f, k;
    memset(&f, 0x66, sizeof f), k = f;
    int64_t n = -9;
    *st = dtr_reducer_info(NULL, &f, &n, NULL);
    return SAME(f, k) && n == -9;
}
CASE(reducer_reduce_null) {
    float g[4] = {1, 2, 3, 4}, gk[4], out[4] = {-1, -1, -1, -1}, ok[4];
    memcpy(gk, g, sizeof g), memcpy(ok, out, sizeof out);
    *st = dtr_reducer_reduce(NULL, g, sizeof g, true, out, sizeof out);
    return SAME(g, gk) && SAME(out, ok);
}
CASE(reducer_overlapping_groups) {
    dtr_mesh_t *m = mesh_of("2x2");
    dtr_context_t *c = solo_context();
    dtr_reducer_desc_t d = {.mesh = m, .shard_dims = 0x1, .replicate_dims = 0x3, .ndim = 1,
                            .shape = {8}, .param_dtype = DTR_F32, .reduce_dtype = DTR_F32};
    dtr_reducer_t *r = (dtr_reducer_t *)(uintptr_t)0x5e;
    *st = dtr_reducer_create(c, &d, &r);
    dtr_context_destroy(c);
    dtr_mesh_destroy(m);
    return r == (dtr_reducer_t *)(uintptr_t)0x5e;
}
CASE(plan_backward_null_grad) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t a;
    spec_of(&a, m, "S(0)", "8", DTR_F32);
    static dtr_plan_t p, k;
    memset(&p, 0x55, sizeof p), k = p;
    *st = dtr_plan_backward(&a, NULL, NULL, &p);
    dtr_mesh_destroy(m);
    return SAME(p, k);
}
CASE(to_local_backward_bad_grad) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t a, o, k;
    spec_of(&a, m, "S(0)", "8x4", DTR_F32);
    dtr_placement_t g = dtr_shard(5);
    memset(&o, 0x33, sizeof o), k = o;
    *st = dtr_to_local_backward(&a, &g, &o);
    dtr_mesh_destroy(m);
    return SAME(o, k);
}
CASE(from_local_backward_null_out) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t a;
    spec_of(&a, m, "S(0)", "8", DTR_F32);
    *st = dtr_from_local_backward(&a, &a, NULL, NULL);
    dtr_mesh_destroy(m);
    return true;
}
CASE(tape_to_local_empty) {
    dtr_tape_t *t = NULL;
    cr_assert_eq(dtr_tape_create(NULL, &t), DTR_OK);
    *st = dtr_tape_to_local(t, NULL);
    bool ok = dtr_tape_length(t) == 0;
    dtr_tape_destroy(t);
    return ok;
}
CASE(tape_from_local_null_spec) {
    dtr_tape_t *t = NULL;
    cr_assert_eq(dtr_tape_create(NULL, &t), DTR_OK);
    *st = dtr_tape_from_local(t, NULL);
    bool ok = dtr_tape_length(t) == 0;
    dtr_tape_destroy(t);
    return ok;
}
CASE(tape_redistribute_null_plan) {
    run_t *r = run_setup();
    dtr_tape_t *t = NULL;
    cr_assert_eq(dtr_tape_create(NULL, &t), DTR_OK);
    *st = dtr_tape_redistribute(t, r->ctx, NULL, r->in, 32, r->out, 32);
    bool ok = dtr_tape_length(t) == 0;
    dtr_tape_destroy(t);
    return run_done(r) && ok;
}
CASE(pattern_check_null_report) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t s;
    spec_of(&s, m, "S(0)", "8", DTR_F32);
    float buf[2] = {0, 0};
    *st = dtr_pattern_check(&s, &s, 0, buf, sizeof buf, NULL);
    dtr_mesh_destroy(m);
    return buf[0] == 0 && buf[1] == 0;
}
CASE(plan_print_json_null_plan) {
    *st = dtr_plan_print_json(NULL, stdout);
    return true;
}
CASE(mesh_group_size_null_out) {
    dtr_mesh_t *m = mesh_of("2x2");
    *st = dtr_mesh_group_size(m, 0x1, NULL);
    dtr_mesh_destroy(m);
    return true;
}

