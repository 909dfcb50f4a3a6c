/*
 * Planning a model-sized change between meshes on one rank, as a run plans it (a benchmark,
 * not a test): the plan of every tensor (dtr_cross_plan_create_batch), then one rank's own
 * messages (dtr_cross_plan_rank_messages); with --all, every rank's too (what dtr plan's
 * table makes). Prints one JSON object: the times (seconds, one run each, in one process),
 * the process's peak memory (getrusage), the rank's messages and the plan's.
 *
 *   bazel-bin/bench/cross_plan_bench --model deepseek-v3 --tensors 50000 [--rank R] [--all]
 *   bazel-bin/bench/cross_plan_bench --model refit --tensors 2000
 *
 * From 256 ranks as a 16x16 mesh (0..255) to 128 as 8x16 (256..383), bf16.
 *   deepseek-v3  DeepSeek-V3's matrices (61 layers: attention q_a 1536x7168, q_b 24576x1536,
 *                kv_a 576x7168, kv_b 32768x512, o 7168x16384; 3 dense MLPs 18432x7168,
 *                18432x7168, 7168x18432; 58 MoE layers of 256 experts and a shared one,
 *                gate and up 2048x7168, down 7168x2048; the embedding and head 129280x7168),
 *                the experts' layers repeated until --tensors: experts S(0),R on the
 *                trainer (sharded by expert rows over the first mesh dim) -> R,S(1) on
 *                inference (by column), the others S(0),S(1) -> S(1),S(0) and S(1),R ->
 *                S(0),S(1) in turn
 *   refit        bench/refit_list.py's 6 shapes and 3 placement pairs, in turn (not drawn)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dtr.h"

typedef struct {
    int64_t rows, cols;
    const char *from, *to;
} dtr__mat_t;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "cross_plan_bench: %s: %s\n", what, dtr_last_error());
    exit(1);
}

/* The n matrices of the model, in its order. */
static dtr__mat_t *model(const char *name, int n) {
    dtr__mat_t *m = malloc(sizeof *m * (size_t)n);
    static const char *pf[] = {"S(0),S(1)", "S(1),R", "R,S(0)"}, *pt[] = {"S(1),S(0)", "S(0),S(1)", "S(1),R"};
    if (m == NULL) return NULL;
    if (strcmp(name, "refit") == 0) {
        static const int64_t sh[6][2] = {{7168, 18432}, {18432, 7168}, {7168, 7168},
                                         {1536, 7168}, {7168, 2048}, {2048, 7168}};
        for (int i = 0; i < n; i++)
            m[i] = (dtr__mat_t){sh[i % 6][0], sh[i % 6][1], pf[i % 3], pt[i % 3]};
        return m;
    }
    static const int64_t attn[5][2] = {{1536, 7168}, {24576, 1536}, {576, 7168}, {32768, 512}, {7168, 16384}};
    static const int64_t dense[3][2] = {{18432, 7168}, {18432, 7168}, {7168, 18432}};
    static const int64_t expert[3][2] = {{2048, 7168}, {2048, 7168}, {7168, 2048}};
    int k = 0, other = 0;
#define PUT(r, c, f, t) do { if (k < n) m[k++] = (dtr__mat_t){(r), (c), (f), (t)}; } while (0)
#define OTHER(r, c) do { PUT(r, c, pf[other % 2], pt[other % 2]); other++; } while (0)
    OTHER(129280, 7168);
    for (int layer = 0; k < n; layer++) {
        for (int j = 0; j < 5; j++) OTHER(attn[j][0], attn[j][1]);
        if (layer % 61 < 3) {
            for (int j = 0; j < 3; j++) OTHER(dense[j][0], dense[j][1]);
            continue;
        }
        for (int e = 0; e < 257; e++) /* (256 routed experts and the shared one) */
            for (int j = 0; j < 3; j++) PUT(expert[j][0], expert[j][1], "S(0),R", "R,S(1)");
    }
    return m;
}

static int64_t peak_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (int64_t)u.ru_maxrss / 1024;
}

int main(int argc, char **argv) {
    const char *name = "deepseek-v3";
    int n = 50000, rank = 0;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) name = argv[++i];
        else if (strcmp(argv[i], "--tensors") == 0 && i + 1 < argc) n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc) rank = atoi(argv[++i]);
        else if (strcmp(argv[i], "--all") == 0) all = true;
        else {
            fprintf(stderr, "usage: cross_plan_bench [--model deepseek-v3|refit] [--tensors N] "
                            "[--rank R] [--all]\n");
            return 2;
        }
    }
    if (n < 1 || (strcmp(name, "refit") != 0 && strcmp(name, "deepseek-v3") != 0)) {
        fprintf(stderr, "cross_plan_bench: --model deepseek-v3 or refit, --tensors >= 1\n");
        return 2;
    }
    int ra[256], rb[128];
    for (int r = 0; r < 256; r++) ra[r] = r;
    for (int r = 0; r < 128; r++) rb[r] = 256 + r;
    dtr_mesh_t *a, *b;
    if (dtr_mesh_parse("16x16", ra, 256, &a) != DTR_OK || dtr_mesh_parse("8x16", rb, 128, &b) != DTR_OK)
        die("the meshes");
    dtr__mat_t *m = model(name, n);
    dtr_spec_t *src = malloc(sizeof *src * (size_t)n), *dst = malloc(sizeof *dst * (size_t)n);
    if (m == NULL || src == NULL || dst == NULL) die("memory");
    for (int i = 0; i < n; i++) {
        dtr_placement_t pa[2], pb[2];
        int na, nb;
        int64_t shape[2] = {m[i].rows, m[i].cols};
        if (dtr_placements_parse(m[i].from, pa, 2, &na) != DTR_OK ||
            dtr_placements_parse(m[i].to, pb, 2, &nb) != DTR_OK ||
            dtr_spec_init(&src[i], a, pa, na, shape, 2, DTR_BF16) != DTR_OK ||
            dtr_spec_init(&dst[i], b, pb, nb, shape, 2, DTR_BF16) != DTR_OK)
            die("a spec");
    }
    int64_t before = peak_mb();
    double t0 = now();
    dtr_cross_plan_t *p = NULL;
    if (dtr_cross_plan_create_batch(n, src, dst, NULL, &p) != DTR_OK) die("the plan");
    double t1 = now();
    int64_t mine = 0, every = 0;
    if (dtr_cross_plan_rank_messages(p, rank, &mine) != DTR_OK) die("the rank's messages");
    double t2 = now();
    int64_t mid = peak_mb();
    dtr_cross_figures_t f;
    dtr_cross_plan_figures(p, &f);
    double t3 = t2;
    if (all) { /* (every rank's, as dtr plan's table makes them) */
        if (dtr_cross_plan_rank_messages(p, rank == 0 ? 1 : 0, &every) != DTR_OK) die("every rank's");
        t3 = now();
    }
    printf("{\"model\":\"%s\",\"tensors\":%d,\"rank\":%d,\"plan_s\":%.3f,\"rank_messages_s\":%.3f,"
           "\"one_rank_s\":%.3f,\"peak_mb\":%lld,\"specs_mb\":%lld,\"rank_messages\":%lld,"
           "\"messages\":%lld,\"rounds\":%lld",
           name, n, rank, t1 - t0, t2 - t1, t2 - t0, (long long)mid, (long long)before,
           (long long)mine, (long long)f.messages, (long long)f.rounds);
    if (all) printf(",\"every_rank_s\":%.3f,\"peak_mb_every_rank\":%lld", t3 - t2, (long long)peak_mb());
    printf("}\n");
    dtr_cross_plan_destroy(p);
    free(src), free(dst), free(m);
    dtr_mesh_destroy(a), dtr_mesh_destroy(b);
    return 0;
}
