/*
 * Block-scaled fp8's two passes alone (numeric/fp8.c, the loops a block-scaled change runs on
 * each source rank): ns an element for the amax and for the quantization of a ROWS x COLS
 * tensor in blocks of 128, from f32 and bf16 into f8e4m3, the best of REPS. One process, one
 * core; the tensor (64 MiB of f32 at the default 4096 x 4096) is past the caches, as a
 * model's weights are.
 *
 * Usage: bazel run -c opt //bench:fp8_loop_bench -- [ROWS [COLS [REPS]]]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numeric/numeric.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 4096, cols = argc > 2 ? atoll(argv[2]) : 4096;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (rows < 1 || cols < 1 || reps < 1) {
        fprintf(stderr, "usage: fp8_loop_bench [ROWS [COLS [REPS]]] (each at least 1)\n");
        return 2;
    }
    const int64_t block = 128, n = rows * cols, shape[2] = {rows, cols};
    const int64_t ns = ((rows + block - 1) / block) * ((cols + block - 1) / block);
    float *x = malloc((size_t)n * 4);
    uint8_t *q = malloc((size_t)n);
    int32_t *amax = calloc((size_t)ns, 4);
    float *scales = calloc((size_t)ns, 4);
    if (x == NULL || q == NULL || amax == NULL || scales == NULL) return 1;
    printf("fp8_loop_bench: %lld x %lld, blocks of %lld, best of %d (ns an element)\n",
           (long long)rows, (long long)cols, (long long)block, reps);
    static const dtr_dtype_t srcs[2] = {DTR_F32, DTR_BF16};
    for (int d = 0; d < 2; d++) {
        for (int64_t i = 0; i < n; i++) dtr__store(srcs[d], x, i, (double)((i * 13) % 11 - 5) * 0.37);
        dtr_layout_t box = {.ndim = 2, .numel = n, .local_shape = {rows, cols}};
        double best_a = 1e30, best_q = 1e30;
        for (int r = 0; r < reps; r++) {
            memset(amax, 0, (size_t)ns * 4);
            double t0 = now();
            dtr__block_amax(srcs[d], x, &box, shape, block, amax);
            double t1 = now();
            dtr__block_scales(DTR_F8E4M3, amax, ns, scales);
            double t2 = now();
            dtr__block_quantize(srcs[d], x, &box, shape, block, DTR_F8E4M3, scales, q);
            double t3 = now();
            if (t1 - t0 < best_a) best_a = t1 - t0;
            if (t3 - t2 < best_q) best_q = t3 - t2;
        }
        printf("  %-4s -> f8e4m3: amax %.2f, quantize %.2f (code of element 5: 0x%02x)\n",
               srcs[d] == DTR_F32 ? "f32" : "bf16", best_a * 1e9 / (double)n,
               best_q * 1e9 / (double)n, q[5 % n]);
    }
    free(x), free(q), free(amax), free(scales);
    return 0;
}
