/*
 * The n-way reduction loop alone (dtr__reduce_n, numeric/reduce.c): G elements a second for
 * each float dtype and op SUM, n inputs of BYTES each (default 4 inputs of 64 KiB: one ring
 * chunk's worth, in L2 as the shared-memory reductions find them), the AVX-512 and AVX2
 * loops (where the CPU has them) beside the generic build. One process, one core; the
 * memory is not the limit here, the loop is.
 *
 * Usage: bazel run -c opt //bench:reduce_loop_bench -- [N [BYTES [REPS]]]
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
    int n = argc > 1 ? atoi(argv[1]) : 4;
    int64_t bytes = argc > 2 ? atoll(argv[2]) : 65536;
    int reps = argc > 3 ? atoi(argv[3]) : 20000;
    if (n < 1 || n > 16 || bytes < 64 || reps < 1) {
        fprintf(stderr, "usage: reduce_loop_bench [N (1-16) [BYTES (>= 64) [REPS]]]\n");
        return 2;
    }
    void *in[16];
    for (int k = 0; k < n; k++) {
        in[k] = aligned_alloc(64, (size_t)bytes);
        for (int64_t i = 0; i < bytes / 4; i++) ((float *)in[k])[i] = (float)(i % 1000) * 0.37f + (float)k;
    }
    void *out = aligned_alloc(64, (size_t)bytes);
    static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_BF16, DTR_F16};
    printf("%d inputs of %lld bytes, SUM, %d calls each; G elements of output a second\n", n,
           (long long)bytes, reps);
    int best = dtr__reduce_levels();
    printf("| dtype | AVX-512 | AVX2 | generic |\n|---|---:|---:|---:|\n");
    for (int d = 0; d < 3; d++) {
        int64_t count = bytes / dtr_dtype_info(dtypes[d])->size;
        double rate[3] = {0, 0, 0};
        for (int simd = best; simd >= 0; simd--) {
            dtr__reduce_simd(simd);
            dtr__reduce_n(dtypes[d], DTR_REDUCE_SUM, (const void *const *)in, n, out, count);
            double t0 = now();
            for (int r = 0; r < reps; r++)
                dtr__reduce_n(dtypes[d], DTR_REDUCE_SUM, (const void *const *)in, n, out, count);
            rate[simd] = (double)reps * (double)count / (now() - t0) / 1e9;
        }
        printf("| %s |", dtr_dtype_name(dtypes[d]));
        for (int simd = 2; simd >= 0; simd--)
            printf(simd <= best ? " %.2f |" : " - |", rate[simd]);
        printf("\n");
    }
    dtr__reduce_simd(-1);
    for (int k = 0; k < n; k++) free(in[k]);
    free(out);
    return 0;
}
