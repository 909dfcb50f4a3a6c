/* The hostile-input table's cases for the pure calls: parsers and formatters, specs and
 * layouts, planning (hostile.h; the table is test_hostile.c's). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reliability/hostile.h"

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

