/*
 * The CUDA memory space's kernels against the GPU's memory bandwidth: pack (a piece of a
 * non-leading dim out of a block, as before a gather or reduce-scatter), unpack (back into
 * place), a leading-dim copy, the range copy (the balanced reduce_exchange's parts: elements
 * [u, v) of the same box, row-major), the divide, the casts f32 -> bf16 and bf16 -> f32
 * (gradient compression, mixed-precision reduction) and the add (accumulation), each timed with CUDA events (median of 20
 * after 3 warm-ups) and reported as bytes read + written per second, as a fraction of the
 * peak (memory clock x bus width, from the device attributes) and of cudaMemcpy's own
 * device-to-device rate measured in the same run. Then a second table: range, divide, the
 * casts and add per dtype (f32, bf16, f16) and size (1 to 256 MiB) beside memcpy on as many
 * bytes, and the lowest of those ratios (the target is 0.8). Prints Markdown tables; prints
 * why and exits 0 where no GPU is visible.
 *
 * First it checks the divide, cast and add kernels against the host's own functions
 * (numeric/numeric.h) bit for bit, on 2^22 random bit patterns per case (every exponent:
 * subnormals, infinities and NaN among them; NaN matches NaN), divisors up to past 2^24:
 * exit 1 on any difference.
 *
 * Run: bazel run -c opt //bench:cuda_bench   (built only where CUDA is found)
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "dtr.h"
#include "backends/cuda/dtr_cuda.h"

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

/* The whole piece as one range (u = 0, v = its elements) into the flat b. */
static dtr_status_t range(void *arg) {
    job_t *j = arg;
    int64_t bs[2] = {j->rows, j->cols}, lo[2] = {0, j->piece}, ext[2] = {j->rows, j->piece};
    return j->m->copy_range(j->st, 2, 4, j->a, bs, lo, ext, 0, j->rows * j->piece, j->b, false);
}

static dtr_status_t cast_down(void *arg) { /* b's elements as f32 -> a's first half as bf16 */
    job_t *j = arg;
    return j->m->cast(j->st, DTR_F32, j->b, DTR_BF16, j->a, j->rows * j->piece);
}

static dtr_status_t cast_up(void *arg) { /* a's bf16 -> b as f32 */
    job_t *j = arg;
    return j->m->cast(j->st, DTR_BF16, j->a, DTR_F32, j->b, j->rows * j->piece);
}

static dtr_status_t add(void *arg) { /* b += the first piece of a, f32 */
    job_t *j = arg;
    return j->m->add(j->st, DTR_F32, j->a, j->b, j->rows * j->piece);
}

static dtr_status_t memcpy_d2d(void *arg) {
    job_t *j = arg;
    cudaStream_t s = dtr_memory_cuda_stream(j->st);
    cudaError_t e = cudaMemcpyAsync(j->b, j->a, (size_t)(j->rows * j->piece * 4),
                                    cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? DTR_OK : DTR_ERR_BACKEND;
}

/* ---- the kernels against the host's functions ------------------------------------------ */

#define CHECK_N (1 << 22)

static uint64_t rng = 20261128;
static uint32_t next32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Element k of got and want (dtype t) are the same bits, or both NaN. */
static bool same(dtr_dtype_t t, const void *got, const void *want, int64_t k) {
    size_t w = (size_t)dtr_dtype_info(t)->size;
    if (memcmp((const char *)got + k * w, (const char *)want + k * w, w) == 0) return true;
    double a = dtr__load(t, got, k), b = dtr__load(t, want, k);
    return a != a && b != b;
}

/* The values that differ between the device's result (copied into got) and want. */
static int64_t differ(job_t *j, dtr_dtype_t t, void *dev, void *got, const void *want) {
    size_t bytes = (size_t)CHECK_N * (size_t)dtr_dtype_info(t)->size;
    if (j->m->copy(j->st, got, dev, (int64_t)bytes, DTR_COPY_TO_HOST) != DTR_OK) return -1;
    int64_t bad = 0;
    for (int64_t k = 0; k < CHECK_N; k++) bad += !same(t, got, want, k);
    return bad;
}

static int check_kernels(job_t *j) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_F16, DTR_BF16, DTR_F64};
    static const int64_t divisors[] = {2, 3, 5, 6, 7, 10, 24, 48, 100, 257, 1000, 4095, 65537,
                                       999983, 16777215, 16777216, 16777217, 1073741827};
    size_t cap = (size_t)CHECK_N * 8;
    char *x = malloc(cap), *y = malloc(cap), *want = malloc(cap), *got = malloc(cap);
    void *dx = NULL, *dy = NULL;
    if (!x || !y || !want || !got || j->m->alloc(j->st, (int64_t)cap, &dx) != DTR_OK ||
        j->m->alloc(j->st, (int64_t)cap, &dy) != DTR_OK)
        return 1;
    int64_t cases = 0, bad_total = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        dtr_dtype_t t = types[ti];
        size_t w = (size_t)dtr_dtype_info(t)->size, bytes = (size_t)CHECK_N * w;
        for (size_t b = 0; b < cap; b += 4) {
            uint32_t r = next32(), r2 = next32();
            memcpy(x + b, &r, 4);
            memcpy(y + b, &r2, 4);
        }
        j->m->copy(j->st, dy, y, (int64_t)bytes, DTR_COPY_FROM_HOST);
        for (size_t di = 0; di < sizeof divisors / sizeof divisors[0]; di++) {
            int64_t n = divisors[di];
            dtr__divide(t, x, want, CHECK_N, n);
            j->m->copy(j->st, dx, x, (int64_t)bytes, DTR_COPY_FROM_HOST);
            int64_t bad = j->m->divide(j->st, t, dx, dx, CHECK_N, n) == DTR_OK
                              ? differ(j, t, dx, got, want) : -1;
            if (bad != 0) printf("check: divide %s by %lld: %lld of %d differ\n",
                                 dtr_dtype_name(t), (long long)n, (long long)bad, CHECK_N);
            bad_total += bad != 0;
            cases++;
        }
        for (size_t di = 0; di < sizeof types / sizeof types[0]; di++) {
            dtr_dtype_t u = types[di];
            if (u == t) continue;
            dtr__convert(t, x, u, want, CHECK_N);
            j->m->copy(j->st, dx, x, (int64_t)bytes, DTR_COPY_FROM_HOST);
            int64_t bad = j->m->cast(j->st, t, dx, u, dy, CHECK_N) == DTR_OK
                              ? differ(j, u, dy, got, want) : -1;
            if (bad != 0) printf("check: cast %s -> %s: %lld of %d differ\n", dtr_dtype_name(t),
                                 dtr_dtype_name(u), (long long)bad, CHECK_N);
            bad_total += bad != 0;
            cases++;
        }
        /* add: want = y + x in the dtype (halves through f32, rounded once) */
        for (int64_t k = 0; k < CHECK_N; k++) {
            double a = dtr__load(t, y, k), c = dtr__load(t, x, k);
            dtr__store(t, want, k, t == DTR_F64 ? a + c : (double)((float)a + (float)c));
        }
        j->m->copy(j->st, dx, x, (int64_t)bytes, DTR_COPY_FROM_HOST);
        j->m->copy(j->st, dy, y, (int64_t)bytes, DTR_COPY_FROM_HOST);
        int64_t bad = j->m->add(j->st, t, dx, dy, CHECK_N) == DTR_OK
                          ? differ(j, t, dy, got, want) : -1;
        if (bad != 0) printf("check: add %s: %lld of %d differ\n", dtr_dtype_name(t),
                             (long long)bad, CHECK_N);
        bad_total += bad != 0;
        cases++;
    }
    printf("check: divide, cast and add against the host, %lld cases of %d values: %lld "
           "differ\n\n", (long long)cases, CHECK_N, (long long)bad_total);
    j->m->free(j->st, dx);
    j->m->free(j->st, dy);
    free(x);
    free(y);
    free(want);
    free(got);
    return bad_total != 0;
}

/* Median seconds of one call of f(arg) on the stream of the memory space st. */
static double timed(void *st, op_fn f, void *arg) {
    cudaStream_t s = dtr_memory_cuda_stream(st);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms[REPS];
    for (int k = 0; k < 3; k++) f(arg);
    for (int k = 0; k < REPS; k++) {
        cudaEventRecord(e0, s);
        if (f(arg) != DTR_OK) {
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

/* ---- the kernels per dtype and size, beside memcpy on the same bytes -------------------- */

typedef struct {
    const dtr_memory_ops_t *m;
    void *st;
    dtr_dtype_t t, other;        /* the tensor's dtype; the one its casts go to and from */
    int64_t n, rows, cols;       /* elements; the range's block is [rows, cols], piece cols/4 */
    void *blk, *x, *y, *z;       /* block; x, y: n of t; z: n of other */
} dt_job_t;

static dtr_status_t dt_memcpy(void *arg) {
    dt_job_t *j = arg;
    size_t bytes = (size_t)j->n * (size_t)dtr_dtype_info(j->t)->size;
    cudaError_t e = cudaMemcpyAsync(j->y, j->x, bytes, cudaMemcpyDeviceToDevice,
                                    dtr_memory_cuda_stream(j->st));
    return e == cudaSuccess ? DTR_OK : DTR_ERR_BACKEND;
}
static dtr_status_t dt_range(void *arg) {
    dt_job_t *j = arg;
    int64_t bs[2] = {j->rows, j->cols}, lo[2] = {0, j->cols / 4}, ext[2] = {j->rows, j->cols / 4};
    return j->m->copy_range(j->st, 2, dtr_dtype_info(j->t)->size, j->blk, bs, lo, ext, 0, j->n,
                            j->y, false);
}
static dtr_status_t dt_divide(void *arg) {
    dt_job_t *j = arg;
    return j->m->divide(j->st, j->t, j->x, j->y, j->n, 6);
}
static dtr_status_t dt_cast_to(void *arg) {
    dt_job_t *j = arg;
    return j->m->cast(j->st, j->t, j->x, j->other, j->z, j->n);
}
static dtr_status_t dt_cast_from(void *arg) {
    dt_job_t *j = arg;
    return j->m->cast(j->st, j->other, j->z, j->t, j->y, j->n);
}
static dtr_status_t dt_add(void *arg) {
    dt_job_t *j = arg;
    return j->m->add(j->st, j->t, j->x, j->y, j->n);
}

/* One row per kernel, dtype (f32, bf16, f16) and size (1 to 256 MiB of the dtype): its rate
 * (bytes read + written per second) over memcpy's on as many bytes, in the same run. The
 * halves cast to and from f32, f32 to and from bf16. Returns the lowest ratio seen. */
static double dtype_table(const dtr_memory_ops_t *m, void *st) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16};
    double worst = 1e9;
    printf("\n| dtype | MiB | operation | moved (MiB) | us | GB/s | of memcpy |\n");
    printf("|---|---:|---|---:|---:|---:|---:|\n");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int64_t mib = 1; mib <= 256; mib *= 4) {
            dt_job_t j = {.m = m, .st = st, .t = types[ti]};
            j.other = j.t == DTR_F32 ? DTR_BF16 : DTR_F32;
            int64_t w = dtr_dtype_info(j.t)->size, wo = dtr_dtype_info(j.other)->size;
            int64_t bytes = mib << 20;
            j.n = bytes / w;
            j.cols = 4096;
            j.rows = j.n / (j.cols / 4);
            if (m->alloc(st, 4 * bytes, &j.blk) != DTR_OK || m->alloc(st, bytes, &j.x) != DTR_OK ||
                m->alloc(st, bytes, &j.y) != DTR_OK || m->alloc(st, j.n * wo, &j.z) != DTR_OK) {
                fprintf(stderr, "cuda_bench: %s\n", dtr_last_error());
                exit(1);
            }
            m->zero(st, j.blk, 4 * bytes);
            m->zero(st, j.x, bytes);
            m->zero(st, j.y, bytes);
            m->zero(st, j.z, j.n * wo);
            double ref = 2.0 * (double)bytes / timed(st, dt_memcpy, &j);
            char to[32], from[32];
            snprintf(to, sizeof to, "cast to %s", dtr_dtype_name(j.other));
            snprintf(from, sizeof from, "cast from %s", dtr_dtype_name(j.other));
            double cast_moved = (double)(bytes + j.n * wo);
            struct {
                const char *name;
                op_fn f;
                double moved;
            } ops[] = {{"memcpy D2D", dt_memcpy, 2.0 * bytes}, {"range (non-leading)", dt_range, 2.0 * bytes},
                       {"divide by 6", dt_divide, 2.0 * bytes},  {to, dt_cast_to, cast_moved},
                       {from, dt_cast_from, cast_moved},         {"add", dt_add, 3.0 * bytes}};
            for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
                double t = timed(st, ops[k].f, &j), bw = ops[k].moved / t;
                if (bw / ref < worst) worst = bw / ref;
                printf("| %s | %lld | %s | %.1f | %.1f | %.0f | %.2f |\n", dtr_dtype_name(j.t),
                       (long long)mib, ops[k].name, ops[k].moved / 1048576.0, t * 1e6, bw / 1e9,
                       bw / ref);
            }
            m->free(st, j.blk);
            m->free(st, j.x);
            m->free(st, j.y);
            m->free(st, j.z);
        }
    }
    return worst;
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
    int bad = check_kernels(&j);
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
        double ref = 2.0 * out / timed(j.st, memcpy_d2d, &j);
        /* bytes read + written per call, in units of the piece's f32 bytes (out) */
        struct {
            const char *name;
            op_fn f;
            double moved;
        } ops[] = {{"memcpy D2D", memcpy_d2d, 2},      {"pack (non-leading)", pack, 2},
                   {"unpack (non-leading)", unpack, 2}, {"leading-dim copy", leading, 2},
                   {"range (non-leading)", range, 2},   {"divide (in place)", divide, 2},
                   {"cast f32 -> bf16", cast_down, 1.5}, {"cast bf16 -> f32", cast_up, 1.5},
                   {"add f32", add, 3}};
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            double t = timed(j.st, ops[k].f, &j), bytes = ops[k].moved * (double)out, bw = bytes / t;
            printf("| %lldx%lld | [:, %lld:%lld] | %s | %.0f | %.1f | %.0f | %.2f | %.2f |\n",
                   (long long)j.rows, (long long)j.cols, (long long)j.piece,
                   (long long)(2 * j.piece), ops[k].name, bytes / 1048576.0, t * 1e6,
                   bw / 1e9, bw / peak, bw / ref);
        }
        j.m->free(j.st, j.a);
        j.m->free(j.st, j.b);
    }
    double worst = dtype_table(j.m, j.st);
    printf("\nlowest ratio to memcpy in the dtype table: %.2f (target 0.8)\n", worst);
    j.m->destroy(j.st);
    return bad;
}
