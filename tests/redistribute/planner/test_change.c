/* One change, any form (redistribute/planner/change.c): the form the specs make, the same
 * plan, print, JSON and bytes as the form's own planner (byte for byte), and the options a
 * form does not take refused by name. Seeded random cases print their seed and case. */
#define _GNU_SOURCE /* open_memstream */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/rand_cases.h"

/* What a printer wrote, as a malloc'd string. */
static char *printed(dtr_status_t (*print)(const void *, FILE *), const void *what) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(print(what, f), DTR_OK, "%s", dtr_last_error());
    fclose(f);
    return buf;
}

static dtr_status_t change_text(const void *c, FILE *f) { return dtr_change_print(c, 64, f); }
static dtr_status_t change_json(const void *c, FILE *f) { return dtr_change_print_json(c, f); }
static dtr_status_t plan_text(const void *p, FILE *f) { return dtr_plan_print(p, f); }
static dtr_status_t plan_json(const void *p, FILE *f) { return dtr_plan_print_json(p, f); }
static dtr_status_t batch_text(const void *p, FILE *f) { return dtr_batch_plan_print(p, f); }
static dtr_status_t batch_json(const void *p, FILE *f) { return dtr_batch_plan_print_json(p, f); }
static dtr_status_t cross_text(const void *p, FILE *f) { return dtr_cross_plan_print(p, 64, f); }
static dtr_status_t cross_json(const void *p, FILE *f) { return dtr_cross_plan_print_json(p, f); }
static dtr_status_t change_svg(const void *c, FILE *f) { return dtr_change_print_svg(c, f); }

/* How many times needle occurs in text. */
static int64_t occurs(const char *text, const char *needle) {
    int64_t n = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) n++;
    return n;
}

/* The change's picture: one <svg> element, every number finite, every <rect> closed; between
 * meshes one mark per message (its JSON's messages and local copies) up to 4096. */
static void check_svg(const dtr_change_t *c, const char *what) {
    char *svg = printed(change_svg, c), *json = printed(change_json, c);
    size_t len = strlen(svg);
    cr_assert(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0 && len > 7 &&
              strcmp(svg + len - 7, "</svg>\n") == 0, "%s: not one <svg> element", what);
    cr_assert(occurs(svg, "nan") == 0 && occurs(svg, "inf\"") == 0, "%s: a number not finite", what);
    cr_assert_eq(occurs(svg, "<rect"), occurs(svg, "</rect>") + occurs(svg, "\"/>"), "%s", what);
    if (dtr_change_cross_plan(c) != NULL) {
        const char *m = strstr(json, "\"messages\":"), *k = strstr(json, "\"local_copies\":");
        cr_assert(m != NULL && k != NULL, "%s", what);
        long long messages = atoll(m + 11), kept = atoll(k + 15);
        if (messages + kept <= 4096)
            cr_assert_eq(occurs(svg, "class=\"msg\""), messages + kept, "%s: marks", what);
    } else {
        cr_assert_gt(occurs(svg, "class=\"rank\""), 0, "%s: no mesh drawn", what);
    }
    free(svg);
    free(json);
}

static void same_text(char *a, char *b, const char *what) {
    cr_assert_str_eq(a, b, "%s", what);
    free(a);
    free(b);
}

/* A mesh of `n` ranks from `first`, 1 or 2 dims. */
static dtr_mesh_t *mesh_of(int n, int first) {
    int ranks[16];
    for (int i = 0; i < n; i++) ranks[i] = first + i;
    int64_t sizes[2] = {n, 1};
    if (n % 2 == 0 && n > 2 && pick(2)) sizes[0] = 2, sizes[1] = n / 2;
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_create(sizes[1] > 1 ? 2 : 1, sizes, ranks, n, &m), DTR_OK);
    return m;
}

/* n random specs on mesh a and b (no Partial on b). */
static bool draw_specs(int n, dtr_mesh_t *a, dtr_mesh_t *b, dtr_spec_t *src, dtr_spec_t *dst) {
    for (int t = 0; t < n; t++) {
        int ndim = 1 + pick(3);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = pick(4) == 0 ? pick(3) : 1 + pick(17);
        dtr_placement_t pa[2], pb[2];
        dtr_reduce_op_t op = pick(2) ? DTR_REDUCE_SUM : DTR_REDUCE_MAX;
        for (int i = 0; i < dtr_mesh_ndims(a); i++) {
            pa[i] = random_placement(ndim, op);
        }
        for (int i = 0; i < dtr_mesh_ndims(b); i++) {
            pb[i] = random_placement(ndim, op);
            if (pb[i].kind == DTR_PARTIAL && b != a) pb[i] = dtr_replicate();
        }
        dtr_dtype_t dt = pick(2) ? DTR_F32 : DTR_BF16;
        if (dtr_spec_init(&src[t], a, pa, dtr_mesh_ndims(a), shape, ndim, dt) != DTR_OK ||
            dtr_spec_init(&dst[t], b, pb, dtr_mesh_ndims(b), shape, ndim, dt) != DTR_OK)
            return false;
    }
    return true;
}

Test(change, every_form_is_its_own_planners_plan_byte_for_byte) {
    const uint64_t seed = 20261129;
    int forms[DTR_CHANGE_FORM_LAST] = {0};
    for (int k = 0; k < 300; k++) {
        rng_state = seed * 1000003u + (uint64_t)k;
        int n = pick(2) ? 1 : 2 + pick(4), na = 1 + pick(6);
        bool between = pick(2);
        dtr_mesh_t *a = mesh_of(na, 0), *b = between ? mesh_of(1 + pick(6), pick(4)) : a;
        between = !dtr_mesh_equal(a, b); /* (a second mesh may be drawn equal to the first) */
        dtr_spec_t src[6], dst[6];
        char what[160];
        snprintf(what, sizeof what, "seed %llu case %d: %d tensor(s), %s", (unsigned long long)seed,
                 k, n, between ? "between meshes" : "one mesh");
        dtr_change_t *c = NULL;
        if (!draw_specs(n, a, b, src, dst) || dtr_change_create(n, src, dst, NULL, &c) != DTR_OK) {
            if (b != a) dtr_mesh_destroy(b);
            dtr_mesh_destroy(a);
            continue;
        }
        check_svg(c, what);
        dtr_change_form_t form = dtr_change_form(c);
        cr_assert_eq(form, between ? (n == 1 ? DTR_CHANGE_CROSS : DTR_CHANGE_CROSS_BATCH)
                                   : (n == 1 ? DTR_CHANGE_ONE : DTR_CHANGE_BATCH), "%s", what);
        cr_assert_eq(dtr_change_tensors(c), n, "%s", what);
        forms[form]++;
        int64_t s1, r1, s2, r2;
        if (form == DTR_CHANGE_ONE) {
            dtr_plan_t *p = malloc(sizeof *p);
            cr_assert_eq(dtr_plan_create(&src[0], &dst[0], NULL, p), DTR_OK, "%s", what);
            cr_assert(p->nsteps == dtr_change_plan(c)->nsteps &&
                      p->time_us == dtr_change_plan(c)->time_us, "%s", what);
            same_text(printed(change_text, c), printed(plan_text, p), what);
            same_text(printed(change_json, c), printed(plan_json, p), what);
            free(p);
        } else if (form == DTR_CHANGE_BATCH) {
            dtr_batch_plan_t *p = NULL;
            cr_assert_eq(dtr_batch_plan_create(n, src, dst, NULL, NULL, &p), DTR_OK, "%s", what);
            cr_assert_eq(p->hash, dtr_change_batch_plan(c)->hash, "%s", what);
            same_text(printed(change_text, c), printed(batch_text, p), what);
            same_text(printed(change_json, c), printed(batch_json, p), what);
            dtr_batch_plan_destroy(p);
        } else {
            dtr_cross_plan_t *p = NULL;
            cr_assert_eq(n == 1 ? dtr_cross_plan_create(src, dst, NULL, &p)
                                : dtr_cross_plan_create_batch(n, src, dst, NULL, &p), DTR_OK, "%s", what);
            same_text(printed(change_text, c), printed(cross_text, p), what);
            same_text(printed(change_json, c), printed(cross_json, p), what);
            for (int r = 0; r < 10; r++) {
                cr_assert_eq(dtr_cross_plan_rank_bytes(p, r, &s1, &r1), DTR_OK);
                cr_assert_eq(dtr_change_rank_bytes(c, r, &s2, &r2), DTR_OK);
                cr_assert(s1 == s2 && r1 == r2, "%s: rank %d", what, r);
            }
            dtr_cross_plan_destroy(p);
        }
        for (int i = 0; i < n; i++) {
            dtr_spec_t d;
            cr_assert_eq(dtr_change_dst(c, i, &d), DTR_OK, "%s", what);
            cr_assert(dtr_mesh_equal(d.mesh, dst[i].mesh) && d.ndim == dst[i].ndim &&
                      d.dtype == dst[i].dtype, "%s: dst[%d]", what, i);
        }
        cr_assert_eq(dtr_change_dst(c, n, &(dtr_spec_t){0}), DTR_ERR_INVALID_ARGUMENT, "%s", what);
        dtr_change_destroy(c);
        if (b != a) dtr_mesh_destroy(b);
        dtr_mesh_destroy(a);
    }
    for (int f = 0; f < DTR_CHANGE_FORM_LAST; f++)
        cr_assert_gt(forms[f], 20, "form %d drawn %d times only", f, forms[f]);
}

/* The options a form does not take, each refused by name; nothing written to *out. */
Test(change, options_a_form_does_not_take_are_refused_by_name) {
    dtr_mesh_t *a = NULL, *b = NULL;
    int rb[2] = {2, 3};
    cr_assert_eq(dtr_mesh_parse("2", NULL, 0, &a), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2", rb, 2, &b), DTR_OK);
    int64_t shape[1] = {8};
    dtr_placement_t s0 = dtr_shard(0), r = dtr_replicate();
    dtr_spec_t sa, ra, rbs;
    dtr_spec_init(&sa, a, &s0, 1, shape, 1, DTR_F32);
    dtr_spec_init(&ra, a, &r, 1, shape, 1, DTR_F32);
    dtr_spec_init(&rbs, b, &r, 1, shape, 1, DTR_F32);
    dtr_change_t *sentinel = (dtr_change_t *)&sentinel, *c = sentinel;
    struct {
        const dtr_spec_t *dst;
        dtr_change_options_t o;
        dtr_status_t st;
        const char *detail;
    } rows[] = {
        {&ra, {.relabel = true}, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: opts->relabel: relabels the destination mesh of a change between meshes"},
        {&ra, {.staging_cap_bytes = 64}, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: opts->staging_cap_bytes: caps the staging of a change between meshes"},
        {&rbs, {.strategy = DTR_STRATEGY_COMPAT}, DTR_ERR_UNSUPPORTED,
         "dtr_change_create: opts->strategy: compat plans within one mesh only"},
        {&rbs, {.backward = true}, DTR_ERR_UNSUPPORTED,
         "dtr_change_create: opts->backward: a change between meshes has no backward plan"},
        {&rbs, {.staging_cap_bytes = -1}, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: opts->staging_cap_bytes: -1 (0: no cap, or a byte count)"},
        {&ra, {.strategy = (dtr_strategy_t)7}, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: opts->strategy: 7 is not a strategy"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        cr_assert_eq(dtr_change_create(1, &sa, rows[k].dst, &rows[k].o, &c), rows[k].st, "row %zu", k);
        cr_assert(strncmp(dtr_last_error(), rows[k].detail, strlen(rows[k].detail)) == 0,
                  "row %zu: %s", k, dtr_last_error());
        cr_assert_eq(c, sentinel, "row %zu: *out written on failure", k);
    }
    /* the options each form takes */
    dtr_change_options_t cap = {.staging_cap_bytes = 64, .relabel = true};
    cr_assert_eq(dtr_change_create(1, &sa, &rbs, &cap, &c), DTR_OK, "%s", dtr_last_error());
    dtr_change_destroy(c);
    dtr_change_options_t compat = {.strategy = DTR_STRATEGY_COMPAT};
    cr_assert_eq(dtr_change_create(1, &sa, &ra, &compat, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_plan(c)->strategy, DTR_STRATEGY_COMPAT);
    dtr_change_destroy(c);
    /* one mesh planned as a change between meshes where the caller asks for it */
    dtr_change_options_t both = {.between_meshes = true, .relabel = true};
    cr_assert_eq(dtr_change_create(1, &sa, &ra, &both, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_form(c), DTR_CHANGE_CROSS);
    dtr_change_destroy(c);
    /* the form of many tensors for one where the caller asks for it */
    dtr_change_options_t many = {.many = true};
    cr_assert_eq(dtr_change_create(1, &sa, &ra, &many, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_form(c), DTR_CHANGE_BATCH);
    dtr_change_destroy(c);
    many.between_meshes = true;
    cr_assert_eq(dtr_change_create(1, &sa, &rbs, &many, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_form(c), DTR_CHANGE_CROSS_BATCH);
    dtr_change_destroy(c);
    /* a refusal of the form's planner comes back under the change's name */
    dtr_spec_t pa;
    dtr_placement_t p = dtr_partial(DTR_REDUCE_SUM);
    dtr_spec_init(&pa, b, &p, 1, shape, 1, DTR_F32);
    c = sentinel;
    cr_assert_neq(dtr_change_create(1, &sa, &pa, NULL, &c), DTR_OK);
    cr_assert(strncmp(dtr_last_error(), "dtr_change_create: ", 19) == 0, "%s", dtr_last_error());
    cr_assert_eq(c, sentinel);
    cr_assert_eq(dtr_change_create(0, &sa, &ra, NULL, &c), DTR_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(dtr_last_error(), "dtr_change_create: n: 0 (1 or more tensors)");
    cr_assert_eq(dtr_change_create(1, NULL, &ra, NULL, &c), DTR_ERR_INVALID_ARGUMENT);
    dtr_change_destroy(NULL);
    cr_assert_eq(dtr_change_form(NULL), DTR_CHANGE_FORM_LAST);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

Test(change, pictures_refuse_bad_arguments_by_name) {
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    cr_expect_eq(dtr_change_print_svg(NULL, f), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "change") != NULL, "%s", dtr_last_error());
    cr_expect_eq(dtr_layout_print_svg(NULL, f), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "spec") != NULL, "%s", dtr_last_error());
    dtr_spec_t junk;
    memset(&junk, 0, sizeof junk);
    cr_expect_eq(dtr_layout_print_svg(&junk, f), DTR_ERR_INVALID_ARGUMENT, "%s", dtr_last_error());
    cr_expect(strstr(dtr_last_error(), "spec") != NULL, "%s", dtr_last_error());
    cr_expect_eq(ftell(f), 0, "written on failure");
    int64_t sizes[1] = {3};
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_create(1, sizes, NULL, 3, &m), DTR_OK);
    dtr_spec_t s;
    int64_t shape[1] = {7};
    dtr_placement_t pl[1] = {dtr_shard(0)};
    cr_assert_eq(dtr_spec_init(&s, m, pl, 1, shape, 1, DTR_F32), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(dtr_layout_print_svg(&s, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_layout_print_svg(&s, f), DTR_OK, "%s", dtr_last_error());
    cr_expect_gt(ftell(f), 100);
    fclose(f);
    dtr_mesh_destroy(m);
}

/* A block-scaled change: its form, the scales' specs (the blocks' shape, dst's placements),
 * the move of 2n tensors, and every refusal by name with nothing written. */
Test(change, block_scaled_fp8_specs_form_and_refusals) {
    int ra_ranks[2] = {0, 1}, rb_ranks[4] = {2, 3, 4, 5};
    int64_t two = 2, four = 4, shape[2] = {300, 129};
    dtr_mesh_t *a = NULL, *b = NULL;
    cr_assert_eq(dtr_mesh_create(1, &two, ra_ranks, 2, &a), DTR_OK);
    cr_assert_eq(dtr_mesh_create(1, &four, rb_ranks, 4, &b), DTR_OK);
    dtr_placement_t s0 = dtr_shard(0), s1 = dtr_shard(1), r = dtr_replicate(),
                    p = dtr_partial(DTR_REDUCE_SUM);
    dtr_spec_t src, dst, dst_bf16, src_i32, src_p, dst_p, sc;
    dtr_spec_init(&src, a, &s0, 1, shape, 2, DTR_BF16);
    dtr_spec_init(&dst, b, &s1, 1, shape, 2, DTR_F8E4M3);
    dtr_spec_init(&dst_bf16, b, &s1, 1, shape, 2, DTR_BF16);
    dtr_spec_init(&src_i32, a, &s0, 1, shape, 2, DTR_I32);
    dtr_spec_init(&src_p, a, &p, 1, shape, 2, DTR_F32);
    dtr_spec_init(&dst_p, b, &p, 1, shape, 2, DTR_F8E5M2);
    dtr_change_options_t o = {.block_scale = 128};
    dtr_change_t *c = NULL;
    cr_assert_eq(dtr_change_create(1, &src, &dst, &o, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_form(c), DTR_CHANGE_CROSS_BATCH);
    cr_assert_eq(dtr_change_tensors(c), 1);
    cr_assert_eq(dtr_change_block_scale(c), 128);
    cr_assert_eq(dtr_change_scales(c, 0, &sc), DTR_OK, "%s", dtr_last_error());
    cr_assert(sc.ndim == 2 && sc.shape[0] == 3 && sc.shape[1] == 2 && sc.dtype == DTR_F32 &&
              sc.mesh == b && sc.placements[0].kind == DTR_SHARD && sc.placements[0].dim == 1);
    cr_assert_eq(dtr_cross_plan_tensors(dtr_change_cross_plan(c)), 2);
    cr_assert_eq(dtr_change_scales(c, 1, &sc), DTR_ERR_INVALID_ARGUMENT);
    /* rank 0 sends its 150 x 129 bytes and half of the 6 scales, which both source ranks
     * hold (the sends spread over the replicas) */
    int64_t send = 0, recv = 0;
    cr_assert_eq(dtr_change_rank_bytes(c, 0, &send, &recv), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(send, 150 * 129 + 3 * 4, "%lld", (long long)send);
    dtr_change_destroy(c);
    /* within one mesh: a batch of the quantized tensor and its scales */
    dtr_spec_t dst_a;
    dtr_spec_init(&dst_a, a, &r, 1, shape, 2, DTR_F8E4M3);
    cr_assert_eq(dtr_change_create(1, &src, &dst_a, &o, &c), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_change_form(c), DTR_CHANGE_BATCH);
    cr_assert_eq(dtr_change_batch_plan(c)->ntensors, 2);
    dtr_change_destroy(c);
    c = NULL;
    cr_assert_eq(dtr_change_create(1, &src, &dst_a, NULL, &c), DTR_ERR_UNSUPPORTED);
    cr_assert(strstr(dtr_last_error(), "block-scaled (dtr_change_options_t.block_scale") != NULL,
              "a cast into fp8 points at block scaling: %s", dtr_last_error());
    cr_assert_eq(dtr_change_scales(c, 0, &sc), DTR_ERR_INVALID_ARGUMENT); /* c NULL, no crash */
    struct {
        const dtr_spec_t *src, *dst;
        int64_t block;
        bool backward;
        dtr_status_t st;
        const char *detail;
    } rows[] = {
        {&src, &dst, -1, false, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: opts->block_scale: -1 (a block edge of 1 or more elements"},
        {&src, &dst_bf16, 128, false, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: dst[0]: dtype bf16: opts->block_scale scales into f8e4m3 or f8e5m2"},
        {&src_i32, &dst, 128, false, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: src[0]: dtype i32: block-scaled fp8 quantizes f32, f64, f16 or bf16"},
        {&src_p, &dst, 128, false, DTR_ERR_UNSUPPORTED,
         "dtr_change_create: src[0]: Partial on mesh dim 0: block-scaled fp8 quantizes values"},
        {&src, &dst_p, 128, false, DTR_ERR_INVALID_ARGUMENT,
         "dtr_change_create: dst[0]: Partial on mesh dim 0: an fp8 destination holds values"},
        {&src, &dst_a, 128, true, DTR_ERR_UNSUPPORTED,
         "dtr_change_create: opts->backward: a block-scaled change has no backward plan"},
    };
    dtr_change_t *sentinel = (dtr_change_t *)&sentinel;
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        dtr_change_options_t ro = {.block_scale = rows[k].block, .backward = rows[k].backward};
        c = sentinel;
        cr_assert_eq(dtr_change_create(1, rows[k].src, rows[k].dst, &ro, &c), rows[k].st,
                     "row %zu: %s", k, dtr_last_error());
        cr_assert(strncmp(dtr_last_error(), rows[k].detail, strlen(rows[k].detail)) == 0,
                  "row %zu: %s", k, dtr_last_error());
        cr_assert_eq(c, sentinel, "row %zu: *out written on failure", k);
    }
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}
