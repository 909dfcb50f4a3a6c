/* The plan cache: hits, keys that must miss, eviction, and several threads at once. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tests/support/plan_util.h"

Test(cache, hits_return_the_same_plan_with_the_callers_mesh) {
    dtr_plan_cache_t *cache;
    cr_assert_eq(dtr_plan_cache_create(4, &cache), DTR_OK);
    dtr_mesh_t *m1, *m2;
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &m1), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &m2), DTR_OK);
    dtr_spec_t a1, b1, a2, b2;
    cr_assert_eq(spec_from(m1, "8x8", "S(0),S(1)", DTR_F32, &a1), DTR_OK);
    cr_assert_eq(spec_from(m1, "8x8", "S(1),S(0)", DTR_F32, &b1), DTR_OK);
    cr_assert_eq(spec_from(m2, "8x8", "S(0),S(1)", DTR_F32, &a2), DTR_OK);
    cr_assert_eq(spec_from(m2, "8x8", "S(1),S(0)", DTR_F32, &b2), DTR_OK);
    dtr_plan_t p1, p2, direct;
    bool hit = true;
    cr_assert_eq(dtr_plan_cache_get(cache, &a1, &b1, NULL, &p1, &hit), DTR_OK);
    cr_expect_not(hit);
    cr_assert_eq(dtr_plan_cache_get(cache, &a2, &b2, NULL, &p2, &hit), DTR_OK);
    cr_expect(hit, "an equal mesh object must hit");
    cr_expect_eq(p2.src.mesh, m2, "the copy borrows the caller's mesh");
    cr_assert_eq(dtr_plan_create(&a1, &b1, NULL, &direct), DTR_OK);
    cr_expect_eq(p2.nsteps, direct.nsteps);
    cr_expect_eq(p2.recv_bytes_max, direct.recv_bytes_max);
    cr_expect_eq(memcmp(p2.steps, direct.steps, (size_t)direct.nsteps * sizeof direct.steps[0]), 0);
    dtr_mesh_destroy(m1);
    dtr_mesh_destroy(m2);
    dtr_plan_cache_destroy(cache);
}

Test(cache, every_key_field_matters) {
    dtr_plan_cache_t *cache;
    cr_assert_eq(dtr_plan_cache_create(64, &cache), DTR_OK);
    dtr_mesh_t *mesh, *reordered;
    int ranks[] = {3, 2, 1, 0};
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &mesh), DTR_OK);
    cr_assert_eq(dtr_mesh_parse("2x2", ranks, 4, &reordered), DTR_OK);
    dtr_spec_t a, b;
    dtr_plan_t p;
    bool hit;
    cr_assert_eq(spec_from(mesh, "8x8", "S(0),R", DTR_F32, &a), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x8", "R,S(1)", DTR_F32, &b), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &a, &b, NULL, &p, &hit), DTR_OK);
    cr_expect_not(hit);
    /* other shape, dtype, placements, mesh ranks, strategy, cost: all miss */
    dtr_spec_t a2, b2;
    cr_assert_eq(spec_from(mesh, "8x16", "S(0),R", DTR_F32, &a2), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x16", "R,S(1)", DTR_F32, &b2), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &a2, &b2, NULL, &p, &hit), DTR_OK);
    cr_expect_not(hit, "shape");
    cr_assert_eq(spec_from(mesh, "8x8", "S(0),R", DTR_BF16, &a2), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x8", "R,S(1)", DTR_BF16, &b2), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &a2, &b2, NULL, &p, &hit), DTR_OK);
    cr_expect_not(hit, "dtype");
    cr_assert_eq(spec_from(mesh, "8x8", "R,S(0)", DTR_F32, &b2), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &a, &b2, NULL, &p, &hit), DTR_OK);
    cr_expect_not(hit, "placements");
    cr_assert_eq(spec_from(reordered, "8x8", "S(0),R", DTR_F32, &a2), DTR_OK);
    cr_assert_eq(spec_from(reordered, "8x8", "R,S(1)", DTR_F32, &b2), DTR_OK);
    cr_assert_eq(dtr_plan_cache_get(cache, &a2, &b2, NULL, &p, &hit), DTR_OK);
    cr_expect_not(hit, "mesh rank list");
    dtr_plan_options_t compat = {.strategy = DTR_STRATEGY_COMPAT, .cost = NULL};
    cr_assert_eq(dtr_plan_cache_get(cache, &a, &b, &compat, &p, &hit), DTR_OK);
    cr_expect_not(hit, "strategy");
    cr_expect_eq(p.strategy, DTR_STRATEGY_COMPAT);
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    cost.alpha_us[1] = 50;
    dtr_plan_options_t slow = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
    cr_assert_eq(dtr_plan_cache_get(cache, &a, &b, &slow, &p, &hit), DTR_OK);
    cr_expect_not(hit, "cost model");
    cr_assert_eq(dtr_plan_cache_get(cache, &a, &b, NULL, &p, &hit), DTR_OK);
    cr_expect(hit, "the first key again");
    /* Errors are not cached and are reported as by dtr_plan_create. */
    cr_assert_eq(spec_from(mesh, "8x8", "P(sum),R", DTR_F32, &a2), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x8", "P(avg),R", DTR_F32, &b2), DTR_OK);
    cr_expect_eq(dtr_plan_cache_get(cache, &a2, &b2, NULL, &p, &hit), DTR_ERR_UNSUPPORTED);
    cr_expect_str_eq(dtr_last_error(),
                     "dtr_plan_create: mesh dim 0: P(sum) -> P(avg): a Partial cannot change its "
                     "reduce op (reduce to R first)");
    cr_expect_eq(dtr_plan_cache_get(NULL, &a, &b, NULL, &p, &hit), DTR_ERR_INVALID_ARGUMENT);
    dtr_plan_cache_t *none = (dtr_plan_cache_t *)(uintptr_t)1;
    cr_expect_eq(dtr_plan_cache_create(0, &none), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(dtr_last_error(), "dtr_plan_cache_create: capacity: 0, must be 1..1048576");
    cr_expect_eq(none, (dtr_plan_cache_t *)(uintptr_t)1);
    dtr_mesh_destroy(mesh);
    dtr_mesh_destroy(reordered);
    dtr_plan_cache_destroy(cache);
}

Test(cache, least_recently_used_is_evicted) {
    dtr_plan_cache_t *cache;
    cr_assert_eq(dtr_plan_cache_create(2, &cache), DTR_OK);
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("4", NULL, 0, &mesh), DTR_OK);
    dtr_spec_t r, s0, s1;
    cr_assert_eq(spec_from(mesh, "8x8", "R", DTR_F32, &r), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x8", "S(0)", DTR_F32, &s0), DTR_OK);
    cr_assert_eq(spec_from(mesh, "8x8", "S(1)", DTR_F32, &s1), DTR_OK);
    dtr_plan_t p;
    bool hit;
    dtr_plan_cache_get(cache, &s0, &r, NULL, &p, &hit);  /* A */
    dtr_plan_cache_get(cache, &s1, &r, NULL, &p, &hit);  /* B */
    dtr_plan_cache_get(cache, &s0, &r, NULL, &p, &hit);  /* A used again */
    cr_expect(hit);
    dtr_plan_cache_get(cache, &s0, &s1, NULL, &p, &hit); /* C evicts B */
    cr_expect_not(hit);
    dtr_plan_cache_get(cache, &s0, &r, NULL, &p, &hit);
    cr_expect(hit, "A stays");
    dtr_plan_cache_get(cache, &s1, &r, NULL, &p, &hit);
    cr_expect_not(hit, "B was evicted");
    dtr_mesh_destroy(mesh);
    dtr_plan_cache_destroy(cache);
}

typedef struct {
    dtr_plan_cache_t *cache;
    const dtr_mesh_t *mesh;
    int thread;
    int wrong;
} worker_t;

static void *worker(void *arg) {
    worker_t *w = arg;
    const char *lists[] = {"S(0),S(1)", "S(1),S(0)", "R,S(0)", "P(sum),R", "S(0),S(0)", "R,R"};
    for (int it = 0; it < 300; it++) {
        int a = (it + w->thread) % 6, b = (it * 7 + w->thread * 3) % 6;
        if (a == 3 && b != 3 && b != 5 && b != 2) b = 5; /* keep changes valid */
        dtr_spec_t src, dst;
        if (spec_from(w->mesh, "12x8", lists[a], DTR_F32, &src) != DTR_OK ||
            spec_from(w->mesh, "12x8", lists[b], DTR_F32, &dst) != DTR_OK) {
            w->wrong++;
            continue;
        }
        if (dst.placements[0].kind == DTR_PARTIAL && src.placements[0].kind != DTR_PARTIAL) continue;
        dtr_plan_t cached, direct;
        if (dtr_plan_cache_get(w->cache, &src, &dst, NULL, &cached, NULL) != DTR_OK ||
            dtr_plan_create(&src, &dst, NULL, &direct) != DTR_OK) {
            w->wrong++;
            continue;
        }
        if (cached.nsteps != direct.nsteps || cached.recv_bytes_max != direct.recv_bytes_max ||
            memcmp(cached.steps, direct.steps, (size_t)direct.nsteps * sizeof direct.steps[0]) != 0)
            w->wrong++;
    }
    return NULL;
}

/* Eight threads share one small cache (constant eviction) and must always get the plan that
 * dtr_plan_create gives. */
Test(cache, threads_share_one_cache) {
    dtr_plan_cache_t *cache;
    cr_assert_eq(dtr_plan_cache_create(5, &cache), DTR_OK);
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_parse("2x2", NULL, 0, &mesh), DTR_OK);
    pthread_t threads[8];
    worker_t w[8];
    for (int t = 0; t < 8; t++) {
        w[t] = (worker_t){cache, mesh, t, 0};
        cr_assert_eq(pthread_create(&threads[t], NULL, worker, &w[t]), 0);
    }
    int wrong = 0;
    for (int t = 0; t < 8; t++) {
        pthread_join(threads[t], NULL);
        wrong += w[t].wrong;
    }
    cr_expect_eq(wrong, 0, "%d plans differed or failed", wrong);
    dtr_mesh_destroy(mesh);
    dtr_plan_cache_destroy(cache);
}
