/*
 * Concurrency, as docs/reliability.md documents it: planning, layouts and parsing are pure
 * and may run from any number of threads at once on shared meshes and specs; error details
 * are per thread; contexts are per thread (each thread its own). Eight threads do each at
 * once and must get exactly what one thread gets alone.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/solo_backend.h"

#define THREADS 8
#define ROUNDS 300

static const char *const pls[] = {"S(0),R", "R,S(1)", "S(0),S(1)", "S(1),S(0)", "P,R", "R,P",
                                  "S(0),S(0)", "P,S(0)", "R,R", "S(1),P"};
#define NPL (int)(sizeof pls / sizeof pls[0])

static dtr_mesh_t *mesh;
static dtr_spec_t specs[NPL];
static char *want[NPL][NPL]; /* the plans as JSON (a struct's padding is not comparable) */
static dtr_status_t want_st[NPL][NPL];

static char *json(const dtr_plan_t *plan) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    dtr_plan_print_json(plan, f);
    fclose(f);
    return text;
}

static void setup(void) {
    cr_assert_eq(dtr_mesh_parse("2x3", NULL, 0, &mesh), DTR_OK);
    int64_t shape[2] = {7, 10};
    for (int k = 0; k < NPL; k++) {
        dtr_placement_t p[2];
        int n;
        cr_assert_eq(dtr_placements_parse(pls[k], p, 2, &n), DTR_OK);
        cr_assert_eq(dtr_spec_init(&specs[k], mesh, p, n, shape, 2, DTR_F32), DTR_OK);
    }
    for (int a = 0; a < NPL; a++)
        for (int b = 0; b < NPL; b++) {
            dtr_plan_t plan;
            want_st[a][b] = dtr_plan_create(&specs[a], &specs[b], NULL, &plan);
            want[a][b] = want_st[a][b] == DTR_OK ? json(&plan) : NULL;
        }
}

static void teardown(void) {
    for (int a = 0; a < NPL; a++)
        for (int b = 0; b < NPL; b++) free(want[a][b]);
    dtr_mesh_destroy(mesh);
}

typedef struct {
    int id;
    int mismatches;
    int wrong_errors;
} worker_t;

static void *planner(void *arg) {
    worker_t *w = arg;
    static dtr_plan_t plans[THREADS];
    dtr_plan_t *got = &plans[w->id];
    for (int r = 0; r < ROUNDS; r++) {
        int a = (r * 7 + w->id) % NPL, b = (r * 3 + w->id * 5) % NPL;
        memset(got, 0, sizeof *got);
        dtr_status_t st = dtr_plan_create(&specs[a], &specs[b], NULL, got);
        if (st != want_st[a][b]) {
            w->mismatches++;
        } else if (st == DTR_OK) {
            char *text = json(got);
            if (strcmp(text, want[a][b]) != 0) w->mismatches++;
            free(text);
        }
        dtr_layout_t l;
        if (dtr_spec_layout(&specs[a], (r + w->id) % 6, &l) != DTR_OK) w->mismatches++;
        /* this thread's own error, checked right after its own failing call */
        char text[32];
        snprintf(text, sizeof text, "Q(%d)", 100 + w->id);
        dtr_placement_t p[2];
        int n;
        char expect[96];
        snprintf(expect, sizeof expect, "text \"Q(%d)\"", 100 + w->id);
        if (dtr_placements_parse(text, p, 2, &n) == DTR_OK) w->wrong_errors++;
        else if (strstr(dtr_last_error(), expect) == NULL) w->wrong_errors++;
    }
    return NULL;
}

Test(threads, planning_from_eight_threads_matches_one, .init = setup, .fini = teardown) {
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker_t){.id = k};
        cr_assert_eq(pthread_create(&t[k], NULL, planner, &w[k]), 0);
    }
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    for (int k = 0; k < THREADS; k++) {
        cr_expect_eq(w[k].mismatches, 0, "thread %d: %d plans or layouts differ from one thread's",
                     k, w[k].mismatches);
        cr_expect_eq(w[k].wrong_errors, 0, "thread %d: %d error details were not its own", k,
                     w[k].wrong_errors);
    }
}

/* ---- one context per thread: a 1-rank mesh needs no communication ----------------- */

static void *runner(void *arg) {
    worker_t *w = arg;
    dtr_mesh_t *m = NULL;
    dtr_context_t *ctx = NULL;
    if (dtr_mesh_parse("1x1", NULL, 0, &m) != DTR_OK ||
        dtr_context_create(&solo_backend_ops, NULL, &ctx) != DTR_OK) {
        w->mismatches++;
        return NULL;
    }
    dtr_placement_t a[2] = {dtr_shard(0), dtr_replicate()}, b[2] = {dtr_replicate(), dtr_shard(1)};
    int64_t shape[2] = {5, 3 + w->id};
    dtr_spec_t src, dst;
    dtr_plan_t plan;
    float in[5 * 16], out[5 * 16];
    for (int r = 0; r < ROUNDS && w->mismatches == 0; r++) {
        if (dtr_spec_init(&src, m, a, 2, shape, 2, DTR_F32) != DTR_OK ||
            dtr_spec_init(&dst, m, b, 2, shape, 2, DTR_F32) != DTR_OK ||
            dtr_plan_create(&src, &dst, NULL, &plan) != DTR_OK) {
            w->mismatches++;
            break;
        }
        size_t bytes = (size_t)(5 * shape[1]) * sizeof(float);
        for (int k = 0; k < 5 * shape[1]; k++) in[k] = (float)(k + 1000 * w->id + r);
        memset(out, 0, sizeof out);
        if (dtr_redistribute(ctx, &plan, in, bytes, out, bytes) != DTR_OK ||
            memcmp(in, out, bytes) != 0)
            w->mismatches++;
    }
    dtr_context_destroy(ctx);
    dtr_mesh_destroy(m);
    return NULL;
}

Test(threads, a_context_per_thread) {
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker_t){.id = k};
        cr_assert_eq(pthread_create(&t[k], NULL, runner, &w[k]), 0);
    }
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    for (int k = 0; k < THREADS; k++)
        cr_expect_eq(w[k].mismatches, 0, "thread %d: its context gave a wrong result (%s)", k,
                     dtr_last_error());
}
