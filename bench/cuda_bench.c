/*
 * The CUDA memory space's kernels against the GPU's memory bandwidth: pack (a piece of a
 * non-leading dim out of a block, as before a gather or reduce-scatter), unpack (back into
 * place), a leading-dim copy, and the divide, each timed with CUDA events (median of 20
 * after 3 warm-ups) and reported as bytes read + written per second, as a fraction of the
 * peak (memory clock x bus width, from the device attributes) and of cudaMemcpy's own
 * device-to-device rate measured in the same run. Prints a Markdown table; prints why and
 * exits 0 where no GPU is visible.
 *
 * Run: bazel run -c opt //bench:cuda_bench   (built only where CUDA is found)
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "redistribute/cuda/dtr_cuda.h"

#define REPS 20

static int cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef dtr_status_t (*op_fn)(void *arg);

typedef struct {
    const dtr_memory_ops_t *m;
    void *st;
    void *a, *b;
    int64_t rows, cols, piece; /* f32 block [rows, cols]; the piece is [rows, piece] */
    int64_t bytes;
} job_t;

static dtr_status_t pack(void *arg) {
    job_t *j = arg;
    int64_t ss[2] = {j->rows, j->cols}, lo[2] = {0, j->piece}, ext[2] = {j->rows, j->piece};
    int64_t ds[2] = {j->rows, j->piece}, zero[2] = {0, 0};
    return j->m->copy_box(j->st, 2, 4, j->a, ss, lo, ext, j->b, ds, zero);
}

static dtr_status_t unpack(void *arg) {
    job_t *j = arg;
    int64_t ss[2] = {j->rows, j->piece}, zero[2] = {0, 0}, ext[2] = {j->rows, j->piece};
    int64_t ds[2] = {j->rows, j->cols}, lo[2] = {0, j->piece};
    return j->m->copy_box(j->st, 2, 4, j->b, ss, zero, ext, j->a, ds, lo);
}

static dtr_status_t leading(void *arg) {
    job_t *j = arg;
    int64_t n = j->rows * j->piece;
    int64_t ss[1] = {j->rows * j->cols}, lo[1] = {n}, ext[1] = {n}, ds[1] = {n}, zero[1] = {0};
    return j->m->copy_box(j->st, 1, 4, j->a, ss, lo, ext, j->b, ds, zero);
}

static dtr_status_t divide(void *arg) {
    job_t *j = arg;
    return j->m->divide(j->st, DTR_F32, j->b, j->b, j->rows * j->piece, 4);
}

static dtr_status_t memcpy_d2d(void *arg) {
    job_t *j = arg;
    cudaStream_t s = dtr_memory_cuda_stream(j->st);
    cudaError_t e = cudaMemcpyAsync(j->b, j->a, (size_t)(j->rows * j->piece * 4),
                                    cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? DTR_OK : DTR_ERR_BACKEND;
}

/* Median seconds of one call. */
static double timed(job_t *j, op_fn f) {
    cudaStream_t s = dtr_memory_cuda_stream(j->st);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms[REPS];
    for (int k = 0; k < 3; k++) f(j);
    for (int k = 0; k < REPS; k++) {
        cudaEventRecord(e0, s);
        if (f(j) != DTR_OK) {
            fprintf(stderr, "cuda_bench: %s\n", dtr_last_error());
            exit(1);
        }
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms[k], e0, e1);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    qsort(ms, REPS, sizeof *ms, cmp);
    return ms[REPS / 2] * 1e-3;
}

int main(void) {
    if (dtr_cuda_device_count() < 1) {
        printf("cuda_bench: skipped: no GPU visible (%s)\n", dtr_last_error());
        return 0;
    }
    job_t j = {.m = dtr_memory_cuda_ops()};
    if (dtr_memory_cuda_create(0, NULL, &j.st) != DTR_OK) {
        fprintf(stderr, "cuda_bench: %s\n", dtr_last_error());
        return 1;
    }
    struct cudaDeviceProp prop;
    int clock_khz = 0, bus_bits = 0;
    cudaGetDeviceProperties(&prop, 0);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8; /* double data rate */
    printf("GPU: %s; peak memory bandwidth %.0f GB/s (memory clock %d kHz, bus %d bits)\n\n",
           prop.name, peak / 1e9, clock_khz, bus_bits);
    printf("| block (f32) | piece | operation | moved (MiB) | us | GB/s | of peak | of memcpy |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|\n");
    static const int64_t shapes[][2] = {{4096, 4096}, {8192, 8192}, {16384, 16384}, {65536, 1024},
                                        {1 << 20, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        j.rows = shapes[s][0];
        j.cols = shapes[s][1];
        j.piece = j.cols / 4;
        int64_t block = j.rows * j.cols * 4, out = j.rows * j.piece * 4;
        if (j.m->alloc(j.st, block, &j.a) != DTR_OK || j.m->alloc(j.st, out, &j.b) != DTR_OK) {
            fprintf(stderr, "cuda_bench: %s\n", dtr_last_error());
            return 1;
        }
        j.m->zero(j.st, j.a, block);
        double ref = 2.0 * out / timed(&j, memcpy_d2d);
        struct {
            const char *name;
            op_fn f;
        } ops[] = {{"memcpy D2D", memcpy_d2d}, {"pack (non-leading)", pack},
                   {"unpack (non-leading)", unpack}, {"leading-dim copy", leading},
                   {"divide (in place)", divide}};
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            double t = timed(&j, ops[k].f), bw = 2.0 * out / t;
            printf("| %lldx%lld | [:, %lld:%lld] | %s | %.0f | %.1f | %.0f | %.2f | %.2f |\n",
                   (long long)j.rows, (long long)j.cols, (long long)j.piece,
                   (long long)(2 * j.piece), ops[k].name, 2.0 * out / 1048576.0, t * 1e6,
                   bw / 1e9, bw / peak, bw / ref);
        }
        j.m->free(j.st, j.a);
        j.m->free(j.st, j.b);
    }
    j.m->destroy(j.st);
    return 0;
}
