/* Ragged shards within one mesh (redistribute/planner/ragged.c): a change that keeps its
 * ragged shards is planned as steps on the mesh, with exact step lists and figures; one that
 * moves them is refused by name (and goes between meshes through dtr_change_create). Seeded
 * random pairs print their seed and case. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/rand_cases.h"

static dtr_mesh_t *mesh_2d(int64_t a, int64_t b) {
    int64_t sizes[2] = {a, b};
    dtr_mesh_t *m = NULL;
    cr_assert_eq(dtr_mesh_create(b > 0 ? 2 : 1, sizes, NULL, 0, &m), DTR_OK, "%s",
                 dtr_last_error());
    return m;
}

static void spec(dtr_mesh_t *m, const char *text, int64_t rows, int64_t cols, dtr_spec_t *s) {
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    int n = 0;
    cr_assert_eq(dtr_placements_parse(text, pl, DTR_MAX_MESH_DIMS, &n), DTR_OK, "%s: %s", text,
                 dtr_last_error());
    int64_t shape[2] = {rows, cols};
    cr_assert_eq(dtr_spec_init(s, m, pl, n, shape, 2, DTR_F32), DTR_OK, "%s: %s", text,
                 dtr_last_error());
}

/* The plan's steps as "kind@mesh_dim" words. */
static void steps_text(const dtr_plan_t *p, char *buf, size_t len) {
    buf[0] = 0;
    for (int k = 0; k < p->nsteps; k++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s@%d", k ? " " : "",
                 dtr_step_kind_info(p->steps[k].kind)->name, p->steps[k].mesh_dim);
}

/* The most bytes one rank receives over the plan, rank by rank (dtr_plan_step_bytes reads
 * the real ragged blocks). */
static int64_t most_received(const dtr_plan_t *p) {
    int64_t most = 0;
    for (int r = 0; r < dtr_mesh_nranks(p->src.mesh); r++) {
        int64_t sum = 0, send, recv;
        for (int k = 0; k < p->nsteps; k++) {
            cr_assert_eq(dtr_plan_step_bytes(p, k, r, &send, &recv), DTR_OK, "%s",
                         dtr_last_error());
            sum += recv;
        }
        if (sum > most) most = sum;
    }
    return most;
}

Test(ragged_plan, a_kept_shard_reduces_within_its_slices) {
    dtr_mesh_t *m = mesh_2d(2, 2);
    dtr_spec_t src, dst;
    dtr_plan_t p;
    char text[256];
    struct {
        const char *from, *to, *steps;
        int64_t recv, bound; /* bytes: the longest slice is 5 rows of 6 f32 */
    } rows[] = {
        {"S(0){3,5},P", "S(0){3,5},R", "all_reduce@1", 120, 120},
        {"S(0){3,5},P", "S(0){3,5},S(1)", "reduce_scatter@1", 60, 60},
        {"S(0){3,5},S(1)", "S(0){3,5},R", "all_gather@1", 60, 60},
        {"S(0){8,0},R", "S(0){8,0},S(1)", "local_chunk@1", 0, 0},
        {"R,S(0){3,5}", "S(1),S(0){3,5}", "local_chunk@0", 0, 0},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        spec(m, rows[k].from, 8, 6, &src);
        spec(m, rows[k].to, 8, 6, &dst);
        cr_assert_eq(dtr_plan_create(&src, &dst, NULL, &p), DTR_OK, "%s -> %s: %s",
                     rows[k].from, rows[k].to, dtr_last_error());
        steps_text(&p, text, sizeof text);
        cr_expect_str_eq(text, rows[k].steps, "%s -> %s", rows[k].from, rows[k].to);
        cr_expect_eq(p.recv_bytes_max, rows[k].recv, "%s -> %s: %lld", rows[k].from, rows[k].to,
                     (long long)p.recv_bytes_max);
        cr_expect_eq(p.lower_bound_recv_bytes, rows[k].bound, "%s -> %s: %lld", rows[k].from,
                     rows[k].to, (long long)p.lower_bound_recv_bytes);
        cr_expect_eq(most_received(&p), p.recv_bytes_max, "%s -> %s", rows[k].from, rows[k].to);
        cr_expect(dtr_placement_equal(p.src.placements[rows[k].from[0] == 'R'],
                                      src.placements[rows[k].from[0] == 'R']));
        for (int s = 0; s < p.nsteps; s++) /* the ragged shard in every step, as given */
            cr_expect_eq(p.steps[s].before[rows[k].from[0] == 'R'].nsizes, 2, "%s", rows[k].from);
        int64_t bound = -1;
        cr_expect_eq(dtr_plan_lower_bound(&src, &dst, &bound), DTR_OK);
        cr_expect_eq(bound, rows[k].bound, "%s -> %s", rows[k].from, rows[k].to);
    }
    dtr_mesh_destroy(m);
}

Test(ragged_plan, a_moved_shard_is_refused_by_name) {
    dtr_mesh_t *m = mesh_2d(2, 2);
    dtr_spec_t src, dst;
    dtr_plan_t p, before;
    memset(&p, 0x5a, sizeof p);
    before = p;
    struct {
        const char *from, *to, *error;
    } rows[] = {
        {"S(0){3,5},R", "R,R",
         "dtr_plan_create: src: placements[0] S(0){3,5} becomes dst's R: within one mesh a "
         "ragged shard is planned where it stays as it is (the same sizes on the same mesh dim "
         "in src and dst); a change between meshes moves it (dtr_change_create does so by "
         "itself, dtr_cross_plan_create, dtr run --to-mesh)"},
        {"S(0){3,5},R", "S(0){5,3},R", "src: placements[0] S(0){3,5} becomes dst's S(0){5,3}"},
        {"R,R", "R,S(1){2,4}", "dst: placements[1] S(1){2,4} becomes src's R"},
        {"S(0){3,5},S(0)", "S(0){3,5},R",
         "src: placements[0] S(0){3,5}: mesh dim 1 of src shards tensor dim 0 too: within one "
         "mesh a ragged shard is planned where it is the only shard of its tensor dim"},
        {"S(0){3,5},R", "S(0){3,5},S(0)", "mesh dim 1 of dst shards tensor dim 0 too"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        spec(m, rows[k].from, 8, 6, &src);
        spec(m, rows[k].to, 8, 6, &dst);
        cr_assert_eq(dtr_plan_create(&src, &dst, NULL, &p), DTR_ERR_UNSUPPORTED, "%s -> %s",
                     rows[k].from, rows[k].to);
        cr_expect(strstr(dtr_last_error(), rows[k].error) != NULL, "%s -> %s: %s", rows[k].from,
                  rows[k].to, dtr_last_error());
        cr_expect(memcmp(&p, &before, sizeof p) == 0, "%s: *out written", rows[k].from);
        /* the change object moves it between meshes instead, onto the same one */
        dtr_change_t *c = NULL;
        cr_assert_eq(dtr_change_create(1, &src, &dst, NULL, &c), DTR_OK, "%s", dtr_last_error());
        cr_expect_eq(dtr_change_form(c), DTR_CHANGE_CROSS, "%s -> %s", rows[k].from, rows[k].to);
        dtr_change_destroy(c);
    }
    spec(m, "S(0){3,5},P", 8, 6, &src);
    spec(m, "S(0){3,5},R", 8, 6, &dst);
    dtr_plan_options_t compat = {.strategy = DTR_STRATEGY_COMPAT};
    cr_expect_eq(dtr_plan_create(&src, &dst, &compat, &p), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_plan_create: compat: the seed algorithm knows only the chunk rule, not "
                     "the ragged shard of src; the optimal strategy handles this change");
    dtr_change_t *c = NULL;
    cr_assert_eq(dtr_change_create(1, &src, &dst, NULL, &c), DTR_OK, "%s", dtr_last_error());
    cr_expect_eq(dtr_change_form(c), DTR_CHANGE_ONE);
    dtr_change_destroy(c);
    dtr_mesh_destroy(m);
}

/* The elements the rank holds in dst but not in src (no Partial anywhere): what it must
 * receive in any plan. */
static int64_t need(const dtr_spec_t *src, const dtr_spec_t *dst, int r) {
    dtr_layout_t a, b;
    cr_assert_eq(dtr_spec_layout(src, r, &a), DTR_OK);
    cr_assert_eq(dtr_spec_layout(dst, r, &b), DTR_OK);
    int64_t both = 1;
    for (int d = 0; d < a.ndim; d++) {
        int64_t lo = a.global_offset[d] > b.global_offset[d] ? a.global_offset[d] : b.global_offset[d];
        int64_t ha = a.global_offset[d] + a.local_shape[d], hb = b.global_offset[d] + b.local_shape[d];
        int64_t hi = ha < hb ? ha : hb;
        both *= hi > lo ? hi - lo : 0;
    }
    return b.numel - both;
}

/* A random case as text for its failure message. */
static void case_text(int k, const int64_t *sizes, const dtr_placement_t *a,
                      const dtr_placement_t *b, int mdims, const int64_t *shape, char *text,
                      size_t len) {
    char pa[160], pb[160];
    dtr_placements_format(a, mdims, pa, sizeof pa);
    dtr_placements_format(b, mdims, pb, sizeof pb);
    snprintf(text, len, "case %d: mesh %lldx%lldx%lld, %s -> %s, shape %lldx%lldx%lld", k,
             (long long)sizes[0], (long long)sizes[1], (long long)sizes[2], pa, pb,
             (long long)shape[0], (long long)shape[1], (long long)shape[2]);
}

/* Random kept pairs on 1-3 dim meshes of 2-8 ranks, random placements (Partial too), random
 * sizes with empty shards: planned, the ragged shard in every step, the figures the real
 * blocks give rank by rank, and without Partial on either side the bound every rank's own
 * need gives. */
Test(ragged_plan, random_kept_pairs) {
    rng_state = 20261201;
    printf("ragged_plan.random_kept_pairs: seed 20261201\n");
    int planned = 0, partial = 0, at_bound = 0;
    for (int k = 0; k < 1500; k++) {
        int64_t sizes[3] = {1, 1, 1};
        int mdims = 1 + pick(3), ranks = 1;
        for (int i = 0; i < mdims; i++) {
            sizes[i] = 1 + pick(4);
            if (ranks * sizes[i] > 8) sizes[i] = 1;
            ranks *= (int)sizes[i];
        }
        int i = pick(mdims), ndim = 1 + pick(3), d = pick(ndim);
        if (sizes[i] < 2) continue;
        int64_t shape[3];
        for (int q = 0; q < ndim; q++) shape[q] = pick(6) == 0 ? 0 : 1 + pick(12);
        dtr_placement_t a[3], b[3];
        dtr_reduce_op_t op = pick(2) ? DTR_REDUCE_SUM : DTR_REDUCE_MAX;
        for (int q = 0; q < mdims; q++) {
            a[q] = random_placement(ndim, op);
            b[q] = random_placement(ndim, op);
            if (a[q].kind == DTR_SHARD && a[q].dim == d) a[q] = dtr_replicate();
            if (b[q].kind == DTR_SHARD && b[q].dim == d) b[q] = dtr_replicate();
            a[q].order = b[q].order = 0;
        }
        int64_t rs[4] = {0};
        for (int64_t x = 0; x < shape[d]; x++) rs[pick((int)sizes[i])]++;
        a[i] = b[i] = dtr_shard(d);
        a[i].nsizes = b[i].nsizes = (int32_t)sizes[i];
        a[i].sizes = b[i].sizes = rs;
        dtr_mesh_t *m = NULL;
        cr_assert_eq(dtr_mesh_create(mdims, sizes, NULL, 0, &m), DTR_OK);
        dtr_spec_t src, dst;
        char text[512];
        case_text(k, sizes, a, b, mdims, shape, text, sizeof text);
        if (dtr_spec_init(&src, m, a, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&dst, m, b, mdims, shape, ndim, DTR_F32) != DTR_OK) {
            dtr_mesh_destroy(m);
            continue;
        }
        dtr_plan_t p;
        dtr_status_t st = dtr_plan_create(&src, &dst, NULL, &p);
        if (st == DTR_ERR_UNSUPPORTED && strstr(dtr_last_error(), "ragged") == NULL) {
            dtr_mesh_destroy(m); /* (a change refused for its ops, as without ragged shards) */
            continue;
        }
        cr_assert_eq(st, DTR_OK, "%s: %s", text, dtr_last_error());
        planned++;
        bool any_partial = false;
        for (int q = 0; q < mdims; q++)
            any_partial |= a[q].kind == DTR_PARTIAL || b[q].kind == DTR_PARTIAL;
        partial += any_partial;
        for (int s = 0; s < p.nsteps; s++) {
            cr_assert_neq(p.steps[s].mesh_dim, i, "%s: step %d on the ragged mesh dim", text, s);
            cr_assert(dtr_placement_equal(p.steps[s].before[i], a[i]) &&
                      dtr_placement_equal(p.steps[s].after[i], a[i]), "%s: step %d", text, s);
        }
        cr_assert_eq(most_received(&p), p.recv_bytes_max, "%s: %lld", text,
                     (long long)p.recv_bytes_max);
        cr_assert_leq(p.lower_bound_recv_bytes, p.recv_bytes_max, "%s", text);
        at_bound += p.lower_bound_recv_bytes == p.recv_bytes_max;
        if (!any_partial) {
            int64_t most = 0;
            for (int r = 0; r < ranks; r++)
                if (need(&src, &dst, r) > most) most = need(&src, &dst, r);
            cr_assert_eq(p.lower_bound_recv_bytes, most * 4, "%s: bound %lld", text,
                         (long long)p.lower_bound_recv_bytes);
        }
        dtr_mesh_destroy(m);
    }
    printf("ragged_plan.random_kept_pairs: %d planned, %d from a Partial, %d at the lower "
           "bound\n", planned, partial, at_bound);
    cr_expect_gt(planned, 300);
    cr_expect_gt(partial, 50);
}

/* Random changes that move ragged shards on one mesh (1-3 dims, 2-8 ranks, ragged shards
 * drawn on either side, nested ones too, no Partial): the change object goes between
 * meshes, and its busiest rank receives what its own blocks say it must (the bound,
 * computed here from the layouts alone) and, planned with latency 0 (where cutting a box
 * among its holders always pays), sends no more than the plan's send bound. */
Test(ragged_plan, random_moved_pairs_at_the_bound) {
    rng_state = 20261202;
    printf("ragged_plan.random_moved_pairs_at_the_bound: seed 20261202\n");
    int moved = 0, at_bound = 0;
    for (int k = 0; k < 600; k++) {
        int64_t sizes[3] = {1, 1, 1};
        int mdims = 1 + pick(3), ranks = 1;
        for (int i = 0; i < mdims; i++) {
            sizes[i] = 1 + pick(4);
            if (ranks * sizes[i] > 8) sizes[i] = 1;
            ranks *= (int)sizes[i];
        }
        int ndim = 1 + pick(3);
        int64_t shape[3];
        for (int q = 0; q < ndim; q++) shape[q] = pick(6) == 0 ? 0 : 1 + pick(12);
        dtr_placement_t a[3], b[3];
        for (int q = 0; q < mdims; q++) {
            a[q] = random_placement(ndim, DTR_REDUCE_SUM);
            b[q] = random_placement(ndim, DTR_REDUCE_SUM);
            if (a[q].kind == DTR_PARTIAL) a[q] = dtr_replicate();
            if (b[q].kind == DTR_PARTIAL) b[q] = dtr_replicate();
            a[q].order = b[q].order = 0;
        }
        dtr_mesh_t *m = NULL;
        cr_assert_eq(dtr_mesh_create(mdims, sizes, NULL, 0, &m), DTR_OK);
        int64_t sa[3][64], sb[3][64];
        raggedize(m, a, shape, ndim, sa);
        raggedize(m, b, shape, ndim, sb);
        dtr_spec_t src, dst;
        char text[512];
        case_text(k, sizes, a, b, mdims, shape, text, sizeof text);
        if (dtr_spec_init(&src, m, a, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            dtr_spec_init(&dst, m, b, mdims, shape, ndim, DTR_F32) != DTR_OK ||
            !(dtr_spec_ragged(&src) || dtr_spec_ragged(&dst))) {
            dtr_mesh_destroy(m);
            continue;
        }
        dtr_change_t *c = NULL;
        dtr_cost_model_t bytes_only; /* (latency 0: every piece of a cut pays for itself) */
        dtr_cost_model_default(&bytes_only);
        for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) bytes_only.alpha_us[i] = 0;
        dtr_change_options_t opts = {.cost = &bytes_only};
        cr_assert_eq(dtr_change_create(1, &src, &dst, &opts, &c), DTR_OK, "%s: %s", text,
                     dtr_last_error());
        if (dtr_change_form(c) == DTR_CHANGE_CROSS) {
            moved++;
            dtr_cross_figures_t f;
            cr_assert_eq(dtr_cross_plan_figures(dtr_change_cross_plan(c), &f), DTR_OK);
            int64_t most = 0;
            for (int r = 0; r < ranks; r++)
                if (need(&src, &dst, r) > most) most = need(&src, &dst, r);
            cr_assert_eq(f.recv_bytes_max, most * 4, "%s: receives %lld, needs %lld", text,
                         (long long)f.recv_bytes_max, (long long)most * 4);
            cr_assert_geq(f.send_bytes_max, f.lower_bound_send_bytes, "%s", text);
            at_bound += f.send_bytes_max == f.lower_bound_send_bytes;
        } else { /* (kept: the steps plan it) */
            cr_assert_eq(dtr_change_form(c), DTR_CHANGE_ONE, "%s", text);
        }
        dtr_change_destroy(c);
        dtr_mesh_destroy(m);
    }
    printf("ragged_plan.random_moved_pairs_at_the_bound: %d moved, %d at the send bound\n",
           moved, at_bound);
    cr_expect_gt(moved, 150);
    /* (the rest: boxes cut in whole rows, 5 of 266 when this was written) */
    cr_expect_geq(at_bound * 50, moved * 49, "%d of %d", at_bound, moved);

    /* unequal boxes of a replicated block cut by their part of its lack (CHANGELOG.md): 252
     * bytes from one rank before, 168 the bound */
    dtr_mesh_t *m = mesh_2d(2, 3);
    dtr_placement_t a[2], b[2];
    int64_t half[2] = {3, 3}, thirds[3] = {2, 1, 3}, shape[3] = {7, 6, 6};
    cr_assert_eq(dtr_shard_sizes(1, half, 2, &a[0]), DTR_OK);
    cr_assert_eq(dtr_shard_sizes(2, thirds, 3, &b[1]), DTR_OK);
    a[1] = b[0] = dtr_replicate();
    dtr_spec_t src, dst;
    cr_assert_eq(dtr_spec_init(&src, m, a, 2, shape, 3, DTR_F32), DTR_OK, "%s", dtr_last_error());
    cr_assert_eq(dtr_spec_init(&dst, m, b, 2, shape, 3, DTR_F32), DTR_OK, "%s", dtr_last_error());
    dtr_cost_model_t bytes_only;
    dtr_cost_model_default(&bytes_only);
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) bytes_only.alpha_us[i] = 0;
    dtr_change_options_t opts = {.cost = &bytes_only};
    dtr_change_t *c = NULL;
    cr_assert_eq(dtr_change_create(1, &src, &dst, &opts, &c), DTR_OK, "%s", dtr_last_error());
    dtr_cross_figures_t f;
    cr_assert_eq(dtr_cross_plan_figures(dtr_change_cross_plan(c), &f), DTR_OK);
    cr_expect_eq(f.send_bytes_max, 192, "%lld", (long long)f.send_bytes_max);
    cr_expect_eq(f.lower_bound_send_bytes, 168, "%lld", (long long)f.lower_bound_send_bytes);
    dtr_change_destroy(c);
    dtr_mesh_destroy(m);
}
