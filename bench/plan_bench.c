/*
 * Planning time, uncached and cached, for meshes of 1 to 8 dims (a benchmark, not a test).
 *
 *   bazel run //bench:plan_bench            (or bazel-bin/bench/plan_bench [reps])
 *
 * For each mesh (every dim of size 2, so 2^M ranks) and each change below, it times
 * dtr_plan_create with the optimal and with the compat strategy, and dtr_plan_cache_get on
 * a warm cache, as the median of `reps` runs (default 201) in one process, side by side.
 *
 *   plan_bench --mesh 2x2 --shape 8192x1024 --from 'S(0),S(1)' --to 'S(1),S(0)' [--reps N]
 *
 * times one change instead and prints one JSON object: the medians (microseconds) of
 * dtr_plan_create with each strategy and of a cache hit (bench/pytorch/speed.py compares
 * them with PyTorch's planner).
 *
 *   plan_bench --sweep [--changes N] [--seed S] [--uneven] [--reps N] [--slow US]
 *
 * times uncached optimal planning of N random changes (default 200, seed 1) on each of
 * several meshes of 65,536 ranks (1 to 8 dims), 3-d tensors whose dims are multiples of
 * 65,536 (or, with --uneven, 65,536 * 3 + 1 and two other primes-ish), random Shard /
 * Replicate / Partial(sum) placements, shard orders on a quarter of them; per mesh the
 * median, 99th percentile and largest time, the share planned in under 1 ms and in under
 * 10 ms, and the slowest change; --slow US lists on stderr every change slower than US.
 *
 * Changes, on a 3-d tensor of 4096x4096x1024 f32:
 *   rotate  S(i%3) -> S((i+1)%3) on every mesh dim i (every dim changes, nested shards)
 *   reduce  P(sum) on even mesh dims, S(i%3) on odd ones -> S(i%3) everywhere
 *   gather  S(i%3) on every mesh dim -> R everywhere
 *   blocked P(sum) -> S(0) on mesh dim 0, S(0) kept on every later one (the balanced
 *           reduce_exchange; a plain reduce-scatter on one mesh dim)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtr.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void make_change(const char *name, int m, dtr_placement_t *src, dtr_placement_t *dst) {
    for (int i = 0; i < m; i++) {
        if (strcmp(name, "rotate") == 0) {
            src[i] = dtr_shard(i % 3);
            dst[i] = dtr_shard((i + 1) % 3);
        } else if (strcmp(name, "blocked") == 0) {
            src[i] = i == 0 ? dtr_partial(DTR_REDUCE_SUM) : dtr_shard(0);
            dst[i] = dtr_shard(0);
        } else if (strcmp(name, "reduce") == 0) {
            src[i] = i % 2 == 0 ? dtr_partial(DTR_REDUCE_SUM) : dtr_shard(i % 3);
            dst[i] = dtr_shard(i % 3);
        } else {
            src[i] = dtr_shard(i % 3);
            dst[i] = dtr_replicate();
        }
    }
}

/* The median time of `reps` calls (a cache hit when cache != NULL; the cache is warmed
 * first); -1 if a call failed. *plan holds the last call's plan. */
static double time_plan(const dtr_spec_t *src, const dtr_spec_t *dst, dtr_strategy_t strategy,
                        const dtr_cost_model_t *cost, dtr_plan_cache_t *cache, double *t,
                        int reps, dtr_plan_t *plan) {
    dtr_plan_options_t opts = {.strategy = strategy, .cost = cost};
    if (cache != NULL && dtr_plan_cache_get(cache, src, dst, &opts, plan, NULL) != DTR_OK)
        return -1;
    for (int r = 0; r < reps; r++) {
        double t0 = now_us();
        dtr_status_t st = cache != NULL ? dtr_plan_cache_get(cache, src, dst, &opts, plan, NULL)
                                        : dtr_plan_create(src, dst, &opts, plan);
        t[r] = now_us() - t0;
        if (st != DTR_OK) return -1;
    }
    return median(t, reps);
}

/* plan_bench --mesh M --shape S --from A --to B [--reps N]: one change, one JSON line. */
static int one_change(int argc, char **argv) {
    const char *mesh_text = NULL, *shape_text = NULL, *from = NULL, *to = NULL;
    int reps = 201;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--mesh") == 0) mesh_text = argv[k + 1];
        else if (strcmp(argv[k], "--shape") == 0) shape_text = argv[k + 1];
        else if (strcmp(argv[k], "--from") == 0) from = argv[k + 1];
        else if (strcmp(argv[k], "--to") == 0) to = argv[k + 1];
        else if (strcmp(argv[k], "--reps") == 0) reps = atoi(argv[k + 1]);
        else {
            fprintf(stderr, "plan_bench: unknown option %s\n", argv[k]);
            return 2;
        }
    }
    if (argc % 2 == 0 || !mesh_text || !shape_text || !from || !to || reps < 1) {
        fprintf(stderr, "usage: plan_bench --mesh M --shape S --from A --to B [--reps N]\n");
        return 2;
    }
    dtr_mesh_t *mesh = NULL;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    dtr_placement_t ps[DTR_MAX_MESH_DIMS], pd[DTR_MAX_MESH_DIMS];
    int ndim, np, nq;
    dtr_spec_t src, dst;
    if (dtr_mesh_parse(mesh_text, NULL, 0, &mesh) != DTR_OK ||
        dtr_shape_parse(shape_text, shape, DTR_MAX_TENSOR_DIMS, &ndim) != DTR_OK ||
        dtr_placements_parse(from, ps, DTR_MAX_MESH_DIMS, &np) != DTR_OK ||
        dtr_placements_parse(to, pd, DTR_MAX_MESH_DIMS, &nq) != DTR_OK ||
        dtr_spec_init(&src, mesh, ps, np, shape, ndim, DTR_F32) != DTR_OK ||
        dtr_spec_init(&dst, mesh, pd, nq, shape, ndim, DTR_F32) != DTR_OK) {
        fprintf(stderr, "plan_bench: %s\n", dtr_last_error());
        dtr_mesh_destroy(mesh);
        return 2;
    }
    double *t = malloc((size_t)reps * sizeof *t);
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_cache_t *cache = NULL;
    if (t == NULL || dtr_plan_cache_create(64, &cache) != DTR_OK) return 1;
    dtr_plan_t plan;
    double opt = time_plan(&src, &dst, DTR_STRATEGY_OPTIMAL, &cost, NULL, t, reps, &plan);
    double compat = time_plan(&src, &dst, DTR_STRATEGY_COMPAT, &cost, NULL, t, reps, &plan);
    double hit = time_plan(&src, &dst, DTR_STRATEGY_OPTIMAL, &cost, cache, t, reps, &plan);
    printf("{\"reps\":%d,\"optimal_us\":%.3f,\"compat_us\":%.3f,\"cached_us\":%.3f}\n", reps,
           opt, compat, hit);
    dtr_plan_cache_destroy(cache);
    dtr_mesh_destroy(mesh);
    free(t);
    return opt < 0 ? 1 : 0;
}

static uint64_t sweep_state;

static int sweep_pick(int n) {
    uint64_t x = (sweep_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (int)((x ^ (x >> 31)) % (uint64_t)n);
}

/* plan_bench --sweep: random changes on meshes of 65,536 ranks. */
static int sweep(int argc, char **argv) {
    int changes = 200, reps = 3;
    double slow = -1; /* --slow US: list every change planned slower than this */
    uint64_t seed = 1;
    bool uneven = false;
    for (int k = 2; k < argc; k++) {
        if (strcmp(argv[k], "--uneven") == 0) uneven = true;
        else if (strcmp(argv[k], "--changes") == 0 && k + 1 < argc) changes = atoi(argv[++k]);
        else if (strcmp(argv[k], "--seed") == 0 && k + 1 < argc) seed = strtoull(argv[++k], NULL, 0);
        else if (strcmp(argv[k], "--reps") == 0 && k + 1 < argc) reps = atoi(argv[++k]);
        else if (strcmp(argv[k], "--slow") == 0 && k + 1 < argc) slow = atof(argv[++k]);
        else {
            fprintf(stderr, "usage: plan_bench --sweep [--changes N] [--seed S] [--uneven] "
                            "[--reps N] [--slow US]\n");
            return 2;
        }
    }
    if (changes < 1 || reps < 1) {
        fprintf(stderr, "plan_bench: --changes and --reps must be positive\n");
        return 2;
    }
    const char *meshes[] = {"65536",   "256x256",     "32768x2",         "16x64x64",
                            "16x16x16x16", "8x8x8x8x16", "4x4x4x4x4x4x4x4", "2x4x2x8x4x4x4x4"};
    int64_t shape[3];
    if (uneven) {
        shape[0] = 65536 * 3 + 1;
        shape[1] = 131071;
        shape[2] = 65536 + 17;
    } else {
        shape[0] = 65536;
        shape[1] = 65536 * 2;
        shape[2] = 65536 * 3;
    }
    double *t = malloc((size_t)reps * sizeof *t), *all = malloc((size_t)changes * sizeof *all);
    if (t == NULL || all == NULL) return 1;
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    printf("uncached optimal planning, %s shapes, %d random changes per mesh (seed %llu), median "
           "of %d runs each, microseconds\n",
           uneven ? "uneven" : "even", changes, (unsigned long long)seed, reps);
    printf("%-18s %7s %10s %10s %10s %7s %7s  %s\n", "mesh", "planned", "median", "p99", "max",
           "<1ms", "<10ms", "slowest change");
    for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; m++) {
        dtr_mesh_t *mesh;
        if (dtr_mesh_parse(meshes[m], NULL, 0, &mesh) != DTR_OK) return 1;
        int md = dtr_mesh_ndims(mesh), planned = 0;
        double worst = -1;
        char worst_text[320] = "";
        sweep_state = seed * 1000003u + m;
        for (int c = 0; c < changes; c++) {
            dtr_placement_t ps[8], pd[8];
            for (int i = 0; i < md; i++) {
                int a = sweep_pick(6), b = sweep_pick(5);
                ps[i] = a < 3 ? dtr_shard(a) : a == 3 ? dtr_replicate() : dtr_partial(DTR_REDUCE_SUM);
                pd[i] = b < 3 ? dtr_shard(b) : dtr_replicate();
                if (ps[i].kind == DTR_PARTIAL && sweep_pick(3) == 0) pd[i] = ps[i];
            }
            for (int side = 0; side < 2 && sweep_pick(4) == 0; side++) { /* shard orders */
                dtr_placement_t *pl = side ? pd : ps;
                for (int d = 0; d < 3; d++) {
                    int dims[8], n = 0;
                    for (int i = 0; i < md; i++)
                        if (pl[i].kind == DTR_SHARD && pl[i].dim == d) dims[n++] = i;
                    for (int k = 0; k < n; k++) pl[dims[k]].order = n - 1 - k;
                }
            }
            dtr_spec_t src, dst;
            if (dtr_spec_init(&src, mesh, ps, md, shape, 3, DTR_F32) != DTR_OK ||
                dtr_spec_init(&dst, mesh, pd, md, shape, 3, DTR_F32) != DTR_OK)
                continue;
            dtr_plan_t plan;
            double us = time_plan(&src, &dst, DTR_STRATEGY_OPTIMAL, &cost, NULL, t, reps, &plan);
            if (us < 0) continue;
            all[planned++] = us;
            if (slow >= 0 && us > slow) {
                char a[150], b[150];
                dtr_placements_format(ps, md, a, sizeof a);
                dtr_placements_format(pd, md, b, sizeof b);
                fprintf(stderr, "slow: %s %.1f us %s -> %s (%s)\n", meshes[m], us, a, b,
                        plan.chosen_by ? plan.chosen_by : "?");
            }
            if (us > worst) {
                worst = us;
                char a[150], b[150];
                dtr_placements_format(ps, md, a, sizeof a);
                dtr_placements_format(pd, md, b, sizeof b);
                snprintf(worst_text, sizeof worst_text, "%s -> %s (%s)", a, b,
                         plan.chosen_by ? plan.chosen_by : "?");
            }
        }
        qsort(all, (size_t)planned, sizeof *all, cmp_double);
        int under1 = 0, under10 = 0;
        for (int k = 0; k < planned; k++) {
            under1 += all[k] < 1e3;
            under10 += all[k] < 1e4;
        }
        if (planned > 0)
            printf("%-18s %7d %10.1f %10.1f %10.1f %6.1f%% %6.1f%%  %s\n", meshes[m], planned,
                   all[planned / 2], all[(int)((planned - 1) * 0.99)], all[planned - 1],
                   100.0 * under1 / planned, 100.0 * under10 / planned, worst_text);
        fflush(stdout);
        dtr_mesh_destroy(mesh);
    }
    free(t);
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--sweep") == 0) return sweep(argc, argv);
    if (argc > 1 && strncmp(argv[1], "--", 2) == 0) return one_change(argc, argv);
    int reps = argc > 1 ? atoi(argv[1]) : 201;
    if (reps < 1) reps = 1;
    double *t = malloc((size_t)reps * sizeof *t);
    const char *changes[] = {"rotate", "reduce", "gather", "blocked"};
    dtr_cost_model_t cost;
    dtr_cost_model_default(&cost);
    dtr_plan_cache_t *cache;
    if (dtr_plan_cache_create(64, &cache) != DTR_OK) return 1;
    printf("planning time, median of %d runs, microseconds (mesh dims of size 2)\n", reps);
    printf("%-7s %-5s %6s  %12s %12s %12s  %-9s %s\n", "change", "dims", "ranks", "optimal",
           "compat", "cached", "candidate", "steps");
    for (size_t c = 0; c < sizeof changes / sizeof changes[0]; c++) {
        for (int m = 1; m <= 8; m++) {
            int64_t sizes[8] = {2, 2, 2, 2, 2, 2, 2, 2}, shape[3] = {4096, 4096, 1024};
            dtr_mesh_t *mesh;
            dtr_mesh_create(m, sizes, NULL, 0, &mesh);
            dtr_placement_t ps[8], pd[8];
            make_change(changes[c], m, ps, pd);
            dtr_spec_t src, dst;
            if (dtr_spec_init(&src, mesh, ps, m, shape, 3, DTR_F32) != DTR_OK ||
                dtr_spec_init(&dst, mesh, pd, m, shape, 3, DTR_F32) != DTR_OK) {
                fprintf(stderr, "%s\n", dtr_last_error());
                return 1;
            }
            dtr_plan_t plan, compat_plan;
            double result[3];
            result[0] = time_plan(&src, &dst, DTR_STRATEGY_OPTIMAL, &cost, NULL, t, reps, &plan);
            result[1] = time_plan(&src, &dst, DTR_STRATEGY_COMPAT, &cost, NULL, t, reps,
                                  &compat_plan);
            result[2] = time_plan(&src, &dst, DTR_STRATEGY_OPTIMAL, &cost, cache, t, reps,
                                  &compat_plan);
            const char *chosen = result[0] >= 0 ? plan.chosen_by : "";
            int nsteps = result[0] >= 0 ? plan.nsteps : 0;
            char compat[32];
            if (result[1] < 0)
                snprintf(compat, sizeof compat, "refused");
            else
                snprintf(compat, sizeof compat, "%.2f", result[1]);
            printf("%-7s %-5d %6lld  %12.2f %12s %12.2f  %-9s %d\n", changes[c], m,
                   (long long)dtr_mesh_nranks(mesh), result[0], compat, result[2], chosen, nsteps);
            dtr_mesh_destroy(mesh);
        }
    }
    dtr_plan_cache_destroy(cache);
    free(t);
    return 0;
}
