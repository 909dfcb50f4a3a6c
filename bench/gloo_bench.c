/*
 * One redistribution on the Gloo backend, timed as `dtr run` times it (bench/gloo_bench.sh
 * puts it beside the MPI backend's figure): launched by tools/dtr_launch.sh (no MPI), every
 * rank fills its block with the test pattern, runs the plan `warmup` times, then `iters`
 * times, each between two barriers (a tiny all-reduce of the backend); rank 0 prints the
 * slowest rank's median and whether the last result was exact on every rank:
 *   {"backend":"gloo","ranks":N,"mesh":M,"shape":S,"from":A,"to":B,"median_us":T,
 *    "recv_bytes_per_rank_max":R,"verified":true}
 *
 * Usage: dtr_launch.sh -n N gloo_bench MESH SHAPE FROM TO [ITERS] [WARMUP]   (f32)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtr.h"
#include "backends/gloo/dtr_gloo.h"
#include "pattern/pattern.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The largest of every rank's v (P(max) -> R of one f64 over all ranks): also a barrier. */
static double all_max(dtr_context_t *ctx, const dtr_plan_t *plan, double v) {
    double out = 0;
    if (dtr_redistribute(ctx, plan, &v, sizeof v, &out, sizeof out) != DTR_OK) {
        fprintf(stderr, "gloo_bench: all_max: %s\n", dtr_last_error());
        exit(1);
    }
    return out;
}

static void need(dtr_status_t st, const char *what) {
    if (st == DTR_OK) return;
    fprintf(stderr, "gloo_bench: %s: %s\n", what, dtr_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: dtr_launch.sh -n N gloo_bench MESH SHAPE FROM TO [ITERS] [WARMUP]\n");
        return 2;
    }
    int iters = argc > 5 ? atoi(argv[5]) : 10, warmup = argc > 6 ? atoi(argv[6]) : 2;
    dtr_context_t *ctx = NULL;
    need(dtr_context_create_gloo_env(&ctx), "context");
    int rank = dtr_context_rank(ctx), world = atoi(getenv("WORLD_SIZE"));
    dtr_mesh_t *mesh = NULL, *all = NULL;
    int64_t shape[DTR_MAX_TENSOR_DIMS], one = 1, n = world;
    int ndim = 0;
    dtr_placement_t from[DTR_MAX_MESH_DIMS], to[DTR_MAX_MESH_DIMS], pmax = dtr_partial(DTR_REDUCE_MAX),
                                                                rep = dtr_replicate();
    int nfrom = 0, nto = 0;
    need(dtr_mesh_parse(argv[1], NULL, 0, &mesh), "MESH");
    need(dtr_shape_parse(argv[2], shape, DTR_MAX_TENSOR_DIMS, &ndim), "SHAPE");
    need(dtr_placements_parse(argv[3], from, DTR_MAX_MESH_DIMS, &nfrom), "FROM");
    need(dtr_placements_parse(argv[4], to, DTR_MAX_MESH_DIMS, &nto), "TO");
    need(dtr_mesh_create(1, &n, NULL, 0, &all), "mesh of all ranks");
    dtr_spec_t src, dst, msrc, mdst;
    need(dtr_spec_init(&src, mesh, from, nfrom, shape, ndim, DTR_F32), "FROM spec");
    need(dtr_spec_init(&dst, mesh, to, nto, shape, ndim, DTR_F32), "TO spec");
    need(dtr_spec_init(&msrc, all, &pmax, 1, &one, 1, DTR_F64), "max spec");
    need(dtr_spec_init(&mdst, all, &rep, 1, &one, 1, DTR_F64), "max spec");
    dtr_plan_t plan, maxplan;
    need(dtr_plan_create(&src, &dst, NULL, &plan), "plan");
    need(dtr_plan_create(&msrc, &mdst, NULL, &maxplan), "max plan");
    dtr_layout_t sl, dl;
    need(dtr_spec_layout(&src, rank, &sl), "layout");
    need(dtr_spec_layout(&dst, rank, &dl), "layout");
    void *in = malloc((size_t)sl.bytes + 1), *out = malloc((size_t)dl.bytes + 1);
    dtr_fill_t fill = {.kind = DTR_FILL_PATTERN};
    need(dtr_fill(&src, &fill, rank, in, sl.bytes), "fill");
    memset(out, 0, (size_t)dl.bytes);
    double *t = calloc((size_t)iters + 1, sizeof *t);
    for (int k = 0; k < warmup + iters; k++) {
        all_max(ctx, &maxplan, 0);
        double t0 = now_us();
        need(dtr_redistribute(ctx, &plan, in, sl.bytes, out, dl.bytes), "redistribute");
        if (k >= warmup) t[k - warmup] = now_us() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, by_value);
    double median = all_max(ctx, &maxplan, t[iters / 2]);
    dtr_pattern_report_t rep_ = {0};
    need(dtr_fill_check(&src, &dst, &fill, rank, out, dl.bytes, &rep_), "check");
    double bad = all_max(ctx, &maxplan, (double)rep_.mismatches);
    if (rank == 0)
        printf("{\"backend\":\"gloo\",\"ranks\":%d,\"mesh\":\"%s\",\"shape\":\"%s\","
               "\"from\":\"%s\",\"to\":\"%s\",\"median_us\":%.1f,"
               "\"recv_bytes_per_rank_max\":%lld,\"verified\":%s}\n",
               world, argv[1], argv[2], argv[3], argv[4], median,
               (long long)plan.recv_bytes_max, bad == 0 ? "true" : "false");
    free(in);
    free(out);
    free(t);
    dtr_mesh_destroy(mesh);
    dtr_mesh_destroy(all);
    dtr_context_destroy(ctx);
    return bad == 0 ? 0 : 1;
}
