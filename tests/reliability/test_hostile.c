/*
 * The hostile-input table: every public entry point tried with null, empty, huge, negative,
 * overflowing, out-of-range, malformed and inconsistent values. Each row calls one function
 * and must get the listed status, a one-line detail that names the function and holds the
 * listed fragment (which names the argument), and leave every output and input as it was
 * (outputs are filled with a sentinel before the call and compared after).
 *
 * Calls that need a context run on a 1-rank mesh over the solo backend (every operation
 * refuses), so the table needs no MPI; the multi-rank cases (specs differing between ranks,
 * a rank's buffer of the wrong size) are in tests/redistribute/mpi_exec_errors_test.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/reliability/solo_backend.h"
#include "tests/spec_fixture.h"
#include "tools/pattern/pattern.h"

/* ---- fixtures ----------------------------------------------------------------------- */

static void plan_of(dtr_plan_t *plan, const dtr_mesh_t *m, const char *from, const char *to,
                    const char *shape, dtr_dtype_t dtype) {
    dtr_spec_t a, b;
    spec_of(&a, m, from, shape, dtype);
    spec_of(&b, m, to, shape, dtype);
    cr_assert_eq(dtr_plan_create(&a, &b, NULL, plan), DTR_OK, "fixture plan");
}

static dtr_context_t *solo_context(void) {
    dtr_context_t *ctx = NULL;
    cr_assert_eq(dtr_context_create(&solo_backend_ops, NULL, &ctx), DTR_OK, "fixture context");
    return ctx;
}

#define SAME(a, b) (memcmp(&(a), &(b), sizeof(a)) == 0)
#define CASE(name) static bool name(dtr_status_t *st)

/* dtr_placements_parse(text) into room for cap placements: true when it wrote nothing. */
static bool placements_untouched(const char *text, int cap, dtr_status_t *st) {
    dtr_placement_t p[2], k[2];
    memset(p, 0x11, sizeof p), memcpy(k, p, sizeof p);
    int n = -9;
    *st = dtr_placements_parse(text, p, cap, &n);
    return SAME(p, k) && n == -9;
}

/* ---- parsers and formatters ------------------------------------------------------- */

CASE(placements_null_text) { return placements_untouched(NULL, 2, st); }
CASE(placements_null_out) {
    int n = -9;
    *st = dtr_placements_parse("S(0)", NULL, 2, &n);
    return n == -9;
}
CASE(placements_cap_zero) { return placements_untouched("S(0)", 0, st); }
CASE(placements_more_than_cap) { return placements_untouched("S(0),R,R", 2, st); }
CASE(placements_huge_dim) { return placements_untouched("S(99999999999)", 2, st); }
CASE(placements_unknown_op) { return placements_untouched("P(median)", 2, st); }
CASE(placements_trailing_garbage) { return placements_untouched("R,R)", 2, st); }
CASE(placement_format_null_buf) {
    *st = dtr_placement_format(dtr_shard(0), NULL, 16);
    return true;
}
CASE(placement_format_small_buf) {
    char buf[3] = "ab";
    *st = dtr_placement_format(dtr_shard(12), buf, sizeof buf);
    return true; /* a too-small buffer may hold a truncated, terminated string */
}
CASE(placement_format_bad_kind) {
    char buf[16] = "keep";
    dtr_placement_t p = dtr_replicate();
    p.kind = (dtr_placement_kind_t)42;
    *st = dtr_placement_format(p, buf, sizeof buf);
    return strcmp(buf, "keep") == 0;
}
CASE(placements_format_negative_count) {
    char buf[16] = "keep";
    dtr_placement_t p = dtr_replicate();
    *st = dtr_placements_format(&p, -1, buf, sizeof buf);
    return strcmp(buf, "keep") == 0;
}
CASE(shape_null_text) {
    int64_t sh[2] = {7, 7};
    int n = -9;
    *st = dtr_shape_parse(NULL, sh, 2, &n);
    return sh[0] == 7 && sh[1] == 7 && n == -9;
}
CASE(shape_more_than_cap) {
    int64_t sh[2] = {7, 7};
    int n = -9;
    *st = dtr_shape_parse("2x2x2", sh, 2, &n);
    return sh[0] == 7 && sh[1] == 7 && n == -9;
}
CASE(shape_negative) {
    int64_t sh[2] = {7, 7};
    int n = -9;
    *st = dtr_shape_parse("4x-3", sh, 2, &n);
    return sh[0] == 7 && sh[1] == 7 && n == -9;
}
CASE(shape_int64_overflow) {
    int64_t sh[2] = {7, 7};
    int n = -9;
    *st = dtr_shape_parse("99999999999999999999999", sh, 2, &n);
    return sh[0] == 7 && n == -9;
}
CASE(shape_format_negative_dim) {
    int64_t sh[2] = {4, -1};
    char buf[32] = "keep";
    *st = dtr_shape_format(sh, 2, buf, sizeof buf);
    return strcmp(buf, "keep") == 0;
}
CASE(shape_format_too_many_dims) {
    int64_t sh[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    char buf[64] = "keep";
    *st = dtr_shape_format(sh, 9, buf, sizeof buf);
    return strcmp(buf, "keep") == 0;
}
CASE(mesh_parse_null_text) {
    dtr_mesh_t *m = (dtr_mesh_t *)(uintptr_t)0x5e;
    *st = dtr_mesh_parse(NULL, NULL, 0, &m);
    return m == (dtr_mesh_t *)(uintptr_t)0x5e;
}
CASE(mesh_parse_null_out) {
    *st = dtr_mesh_parse("2x2", NULL, 0, NULL);
    return true;
}
CASE(mesh_parse_ranks_without_count) {
    int ranks[4] = {0, 1, 2, 3};
    dtr_mesh_t *m = (dtr_mesh_t *)(uintptr_t)0x5e;
    *st = dtr_mesh_parse("2x2", ranks, -4, &m);
    return m == (dtr_mesh_t *)(uintptr_t)0x5e;
}
CASE(mesh_create_zero_dims) {
    int64_t sizes[1] = {2};
    dtr_mesh_t *m = (dtr_mesh_t *)(uintptr_t)0x5e;
    *st = dtr_mesh_create(0, sizes, NULL, 0, &m);
    return m == (dtr_mesh_t *)(uintptr_t)0x5e;
}
CASE(mesh_create_null_sizes) {
    dtr_mesh_t *m = (dtr_mesh_t *)(uintptr_t)0x5e;
    *st = dtr_mesh_create(2, NULL, NULL, 0, &m);
    return m == (dtr_mesh_t *)(uintptr_t)0x5e;
}
CASE(mesh_create_huge) {
    int64_t sizes[3] = {1 << 20, 1 << 20, 1 << 20};
    dtr_mesh_t *m = (dtr_mesh_t *)(uintptr_t)0x5e;
    *st = dtr_mesh_create(3, sizes, NULL, 0, &m);
    return m == (dtr_mesh_t *)(uintptr_t)0x5e;
}
CASE(mesh_coord_rank_outside) {
    dtr_mesh_t *m = mesh_of("2x2");
    int64_t c[2] = {9, 9};
    *st = dtr_mesh_coord(m, 4, c);
    dtr_mesh_destroy(m);
    return c[0] == 9 && c[1] == 9;
}
CASE(mesh_coord_null_mesh) {
    int64_t c[2] = {9, 9};
    *st = dtr_mesh_coord(NULL, 0, c);
    return c[0] == 9;
}
CASE(mesh_rank_at_out_of_range) {
    dtr_mesh_t *m = mesh_of("2x2");
    int64_t c[2] = {0, 2};
    int r = -9;
    *st = dtr_mesh_rank_at(m, c, &r);
    dtr_mesh_destroy(m);
    return r == -9;
}
CASE(mesh_group_bad_dim) {
    dtr_mesh_t *m = mesh_of("2x2");
    int ranks[4] = {7, 7, 7, 7};
    int64_t n = -9;
    *st = dtr_mesh_group(m, 0, 5, ranks, 4, &n);
    dtr_mesh_destroy(m);
    return ranks[0] == 7 && n == -9;
}
CASE(mesh_group_small_cap) {
    dtr_mesh_t *m = mesh_of("2x4");
    int ranks[4] = {7, 7, 7, 7};
    int64_t n = -9;
    *st = dtr_mesh_group(m, 0, 1, ranks, 2, &n);
    dtr_mesh_destroy(m);
    return ranks[0] == 7 && ranks[1] == 7 && n == -9;
}
CASE(mesh_format_small_buf) {
    dtr_mesh_t *m = mesh_of("128x128");
    char buf[4] = "ab";
    *st = dtr_mesh_format(m, buf, sizeof buf);
    dtr_mesh_destroy(m);
    return true;
}
CASE(dtype_unknown) {
    dtr_dtype_t d = (dtr_dtype_t)77;
    *st = dtr_dtype_parse("float128", &d);
    return d == (dtr_dtype_t)77;
}
CASE(dtype_null_text) {
    dtr_dtype_t d = (dtr_dtype_t)77;
    *st = dtr_dtype_parse(NULL, &d);
    return d == (dtr_dtype_t)77;
}
CASE(reduce_op_unknown) {
    dtr_reduce_op_t op = (dtr_reduce_op_t)77;
    *st = dtr_reduce_op_parse("median", &op);
    return op == (dtr_reduce_op_t)77;
}
CASE(strategy_unknown) {
    dtr_strategy_t s = (dtr_strategy_t)77;
    *st = dtr_strategy_parse("fastest", &s);
    return s == (dtr_strategy_t)77;
}
CASE(cost_negative_alpha) {
    dtr_cost_model_t c, k;
    dtr_cost_model_default(&c), k = c;
    *st = dtr_cost_model_set(&c, "-1", NULL, NULL);
    return SAME(c, k);
}
CASE(cost_zero_bandwidth) {
    dtr_cost_model_t c, k;
    dtr_cost_model_default(&c), k = c;
    *st = dtr_cost_model_set(&c, NULL, "10,0", NULL);
    return SAME(c, k);
}
CASE(cost_nan_local) {
    dtr_cost_model_t c, k;
    dtr_cost_model_default(&c), k = c;
    *st = dtr_cost_model_set(&c, NULL, NULL, "nan");
    return SAME(c, k);
}
CASE(cost_malformed_list) {
    dtr_cost_model_t c, k;
    dtr_cost_model_default(&c), k = c;
    *st = dtr_cost_model_set(&c, "5,x", NULL, NULL);
    return SAME(c, k);
}
CASE(cost_from_bad_env) {
    dtr_cost_model_t c, k;
    memset(&c, 0x22, sizeof c), k = c;
    setenv("DTR_BANDWIDTH_GBPS", "fast", 1);
    *st = dtr_cost_model_from_env(&c);
    unsetenv("DTR_BANDWIDTH_GBPS");
    return SAME(c, k);
}

/* ---- specs and layouts -------------------------------------------------------------- */

static bool spec_call(dtr_status_t *st, const dtr_mesh_t *m, const char *pl, int np_override,
                      const int64_t *shape, int nd, dtr_dtype_t dtype) {
    dtr_placement_t p[DTR_MAX_MESH_DIMS];
    int np = 0;
    cr_assert_eq(dtr_placements_parse(pl, p, DTR_MAX_MESH_DIMS, &np), DTR_OK);
    if (np_override >= 0) np = np_override;
    dtr_spec_t s, k;
    memset(&s, 0x33, sizeof s), k = s;
    *st = dtr_spec_init(&s, m, p, np, shape, nd, dtype);
    return SAME(s, k);
}
CASE(spec_null_mesh) {
    int64_t sh[1] = {8};
    return spec_call(st, NULL, "S(0)", -1, sh, 1, DTR_F32);
}
CASE(spec_placement_count) {
    dtr_mesh_t *m = mesh_of("2x2");
    int64_t sh[1] = {8};
    bool ok = spec_call(st, m, "S(0)", -1, sh, 1, DTR_F32);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_shard_dim_out_of_range) {
    dtr_mesh_t *m = mesh_of("4");
    int64_t sh[2] = {8, 8};
    bool ok = spec_call(st, m, "S(2)", -1, sh, 2, DTR_F32);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_too_many_dims) {
    dtr_mesh_t *m = mesh_of("4");
    int64_t sh[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    bool ok = spec_call(st, m, "R", -1, sh, 9, DTR_F32);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_null_shape) {
    dtr_mesh_t *m = mesh_of("4");
    bool ok = spec_call(st, m, "R", -1, NULL, 2, DTR_F32);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_bad_dtype) {
    dtr_mesh_t *m = mesh_of("4");
    int64_t sh[1] = {8};
    bool ok = spec_call(st, m, "R", -1, sh, 1, (dtr_dtype_t)99);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_negative_dim) {
    dtr_mesh_t *m = mesh_of("4");
    int64_t sh[2] = {8, -2};
    bool ok = spec_call(st, m, "R", -1, sh, 2, DTR_F32);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_bytes_overflow) {
    dtr_mesh_t *m = mesh_of("4");
    int64_t sh[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    bool ok = spec_call(st, m, "S(0)", -1, sh, 2, DTR_F64);
    dtr_mesh_destroy(m);
    return ok;
}
CASE(spec_bad_partial_op) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_placement_t p = dtr_partial(DTR_REDUCE_SUM);
    p.op = (dtr_reduce_op_t)77;
    int64_t sh[1] = {8};
    dtr_spec_t s, k;
    memset(&s, 0x33, sizeof s), k = s;
    *st = dtr_spec_init(&s, m, &p, 1, sh, 1, DTR_F32);
    dtr_mesh_destroy(m);
    return SAME(s, k);
}
CASE(layout_rank_outside) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t s;
    spec_of(&s, m, "S(0)", "8", DTR_F32);
    dtr_layout_t l, k;
    memset(&l, 0x44, sizeof l), k = l;
    *st = dtr_spec_layout(&s, 4, &l);
    dtr_mesh_destroy(m);
    return SAME(l, k);
}
CASE(layout_null_out) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t s;
    spec_of(&s, m, "S(0)", "8", DTR_F32);
    *st = dtr_spec_layout(&s, 0, NULL);
    dtr_mesh_destroy(m);
    return true;
}
CASE(layout_coord_out_of_range) {
    dtr_mesh_t *m = mesh_of("2x2");
    dtr_spec_t s;
    spec_of(&s, m, "S(0),R", "8", DTR_F32);
    int64_t c[2] = {0, -1};
    dtr_layout_t l, k;
    memset(&l, 0x44, sizeof l), k = l;
    *st = dtr_spec_layout_at(&s, c, &l);
    dtr_mesh_destroy(m);
    return SAME(l, k);
}
CASE(chunk_zero_pieces) {
    int64_t size = -9, off = -9;
    *st = dtr_chunk(8, 0, 0, &size, &off);
    return size == -9 && off == -9;
}
CASE(chunk_index_past_end) {
    int64_t size = -9, off = -9;
    *st = dtr_chunk(8, 4, 4, &size, &off);
    return size == -9 && off == -9;
}
CASE(chunk_negative_length) {
    int64_t size = -9, off = -9;
    *st = dtr_chunk(-8, 4, 0, &size, &off);
    return size == -9 && off == -9;
}

/* ---- planning ------------------------------------------------------------------------- */

static bool plan_call(dtr_status_t *st, const char *mesh_a, const char *mesh_b, const char *from,
                      const char *to, const char *shape_a, const char *shape_b, dtr_dtype_t da,
                      dtr_dtype_t db, const dtr_plan_options_t *opts) {
    dtr_mesh_t *ma = mesh_of(mesh_a), *mb = mesh_of(mesh_b);
    dtr_spec_t a, b, ka, kb;
    spec_of(&a, ma, from, shape_a, da);
    spec_of(&b, mb, to, shape_b, db);
    ka = a, kb = b;
    static dtr_plan_t plan, keep;
    memset(&plan, 0x55, sizeof plan), keep = plan;
    *st = dtr_plan_create(&a, &b, opts, &plan);
    bool ok = SAME(plan, keep) && SAME(a, ka) && SAME(b, kb);
    dtr_mesh_destroy(ma), dtr_mesh_destroy(mb);
    return ok;
}
CASE(plan_null_src) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t b;
    spec_of(&b, m, "R", "8", DTR_F32);
    static dtr_plan_t plan, keep;
    memset(&plan, 0x55, sizeof plan), keep = plan;
    *st = dtr_plan_create(NULL, &b, NULL, &plan);
    dtr_mesh_destroy(m);
    return SAME(plan, keep);
}
CASE(plan_null_out) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t a;
    spec_of(&a, m, "R", "8", DTR_F32);
    *st = dtr_plan_create(&a, &a, NULL, NULL);
    dtr_mesh_destroy(m);
    return true;
}
CASE(plan_different_meshes) {
    return plan_call(st, "4", "2x2", "S(0)", "R,R", "8", "8", DTR_F32, DTR_F32, NULL);
}
CASE(plan_different_shapes) {
    return plan_call(st, "4", "4", "S(0)", "R", "8", "9", DTR_F32, DTR_F32, NULL);
}
CASE(plan_different_dtypes) {
    return plan_call(st, "4", "4", "S(0)", "R", "8", "8", DTR_F32, DTR_I32, NULL);
}
CASE(plan_partial_op_change) {
    return plan_call(st, "4", "4", "P(sum)", "P(max)", "8", "8", DTR_F32, DTR_F32, NULL);
}
CASE(plan_shard_to_partial) {
    return plan_call(st, "4", "4", "S(0)", "P(max)", "8", "8", DTR_F32, DTR_F32, NULL);
}
CASE(plan_replicate_to_product) {
    return plan_call(st, "4", "4", "R", "P(product)", "8", "8", DTR_F32, DTR_F32, NULL);
}
CASE(plan_reduce_fp8) {
    return plan_call(st, "4", "4", "P", "R", "8", "8", DTR_F8E4M3, DTR_F8E4M3, NULL);
}
CASE(plan_bad_strategy) {
    dtr_plan_options_t o = {.strategy = (dtr_strategy_t)9};
    return plan_call(st, "4", "4", "S(0)", "R", "8", "8", DTR_F32, DTR_F32, &o);
}
CASE(plan_bad_cost_model) {
    dtr_cost_model_t c;
    dtr_cost_model_default(&c);
    c.alpha_us[0] = NAN;
    dtr_plan_options_t o = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &c};
    return plan_call(st, "4", "4", "S(0)", "R", "8", "8", DTR_F32, DTR_F32, &o);
}
CASE(plan_step_bytes_bad_step) {
    dtr_mesh_t *m = mesh_of("4");
    static dtr_plan_t p;
    plan_of(&p, m, "S(0)", "R", "8", DTR_F32);
    int64_t s = -9, r = -9;
    *st = dtr_plan_step_bytes(&p, 5, 0, &s, &r);
    dtr_mesh_destroy(m);
    return s == -9 && r == -9;
}
CASE(plan_step_bytes_rank_outside) {
    dtr_mesh_t *m = mesh_of("4");
    static dtr_plan_t p;
    plan_of(&p, m, "S(0)", "R", "8", DTR_F32);
    int64_t s = -9, r = -9;
    *st = dtr_plan_step_bytes(&p, 0, 17, &s, &r);
    dtr_mesh_destroy(m);
    return s == -9 && r == -9;
}
CASE(plan_lower_bound_null) {
    int64_t b = -9;
    *st = dtr_plan_lower_bound(NULL, NULL, &b);
    return b == -9;
}
CASE(plan_print_null_file) {
    dtr_mesh_t *m = mesh_of("4");
    static dtr_plan_t p, k;
    plan_of(&p, m, "S(0)", "R", "8", DTR_F32);
    k = p;
    *st = dtr_plan_print(&p, NULL);
    dtr_mesh_destroy(m);
    return SAME(p, k);
}
CASE(cache_zero_capacity) {
    dtr_plan_cache_t *c = (dtr_plan_cache_t *)(uintptr_t)0x5e;
    *st = dtr_plan_cache_create(0, &c);
    return c == (dtr_plan_cache_t *)(uintptr_t)0x5e;
}
CASE(cache_get_null_cache) {
    dtr_mesh_t *m = mesh_of("4");
    dtr_spec_t a;
    spec_of(&a, m, "R", "8", DTR_F32);
    static dtr_plan_t p, k;
    memset(&p, 0x55, sizeof p), k = p;
    *st = dtr_plan_cache_get(NULL, &a, &a, NULL, &p, NULL);
    dtr_mesh_destroy(m);
    return SAME(p, k);
}

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

/* ---- the table ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    dtr_status_t want;
    const char *fragment; /* in the detail: names the argument */
    bool (*call)(dtr_status_t *st);
} row_t;

#define ROW(fn, status, fragment) {#fn, status, fragment, fn}
static const row_t rows[] = {
#include "tests/reliability/hostile_rows.inc"
};

#define NROWS (sizeof rows / sizeof rows[0])

/* Parameters are row indices: Criterion re-executes the binary for each test, so pointers
 * into it (names, functions) would not survive address randomisation. */
ParameterizedTestParameters(hostile, table) {
    static int index[NROWS];
    for (size_t k = 0; k < NROWS; k++) index[k] = (int)k;
    return cr_make_param_array(int, index, NROWS);
}

ParameterizedTest(int *k, hostile, table) {
    const row_t *row = &rows[*k];
    dtr_status_t st = DTR_OK;
    bool untouched = row->call(&st);
    const char *detail = dtr_last_error();
    cr_expect_eq(st, row->want, "%s: status %s, want %s (detail: %s)", row->name,
                 dtr_status_name(st), dtr_status_name(row->want), detail);
    cr_expect(strstr(detail, row->fragment) != NULL, "%s: detail '%s' lacks '%s'", row->name,
              detail, row->fragment);
    cr_expect(strncmp(detail, "dtr_", 4) == 0 && strchr(detail, '\n') == NULL,
              "%s: detail '%s' does not start with the function's name", row->name, detail);
    cr_expect(untouched, "%s: an output or the input was written", row->name);
    /* HOSTILE_DUMP=1 prints each row as it is now, to review when adding rows */
    if (getenv("HOSTILE_DUMP") != NULL)
        fprintf(stderr, "ROW %s | %s | %s\n", row->name, dtr_status_name(st), detail);
}

Test(hostile, table_has_at_least_60_rows) {
    cr_expect_geq(NROWS, 60u);
}
