/*
 * Planning time, uncached and cached, for meshes of 1 to 8 dims (a benchmark, not a test).
 *
 *   bazel run //bench:plan_bench            (or bazel-bin/bench/plan_bench [reps])
 *
 * For each mesh (every dim of size 2, so 2^M ranks) and each change below, it times
 * dtr_plan_create with the optimal and with the compat strategy, and dtr_plan_cache_get on
 * a warm cache, as the median of `reps` runs (default 201) in one process, side by side.
 * Changes, on a 3-d tensor of 4096x4096x1024 f32:
 *   rotate  S(i%3) -> S((i+1)%3) on every mesh dim i (every dim changes, nested shards)
 *   reduce  P(sum) on even mesh dims, S(i%3) on odd ones -> S(i%3) everywhere
 *   gather  S(i%3) on every mesh dim -> R everywhere
 */
#define _POSIX_C_SOURCE 200809L
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
        } else if (strcmp(name, "reduce") == 0) {
            src[i] = i % 2 == 0 ? dtr_partial(DTR_REDUCE_SUM) : dtr_shard(i % 3);
            dst[i] = dtr_shard(i % 3);
        } else {
            src[i] = dtr_shard(i % 3);
            dst[i] = dtr_replicate();
        }
    }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 201;
    if (reps < 1) reps = 1;
    double *t = malloc((size_t)reps * sizeof *t);
    const char *changes[] = {"rotate", "reduce", "gather"};
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
            dtr_plan_t plan;
            double result[3];
            const char *chosen = "";
            int nsteps = 0;
            for (int which = 0; which < 3; which++) {
                dtr_plan_options_t opts = {
                    .strategy = which == 1 ? DTR_STRATEGY_COMPAT : DTR_STRATEGY_OPTIMAL,
                    .cost = &cost};
                if (which == 2) dtr_plan_cache_get(cache, &src, &dst, &opts, &plan, NULL);
                bool ok = true;
                for (int r = 0; r < reps; r++) {
                    double t0 = now_us();
                    dtr_status_t st = which == 2
                                          ? dtr_plan_cache_get(cache, &src, &dst, &opts, &plan, NULL)
                                          : dtr_plan_create(&src, &dst, &opts, &plan);
                    t[r] = now_us() - t0;
                    ok = ok && st == DTR_OK;
                }
                result[which] = ok ? median(t, reps) : -1;
                if (which == 0) {
                    chosen = plan.chosen_by;
                    nsteps = plan.nsteps;
                }
            }
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
