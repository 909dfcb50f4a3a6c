/*
 * The MPI library's own collectives on a tensor of f32, for bench/limit_bench.sh: what a user
 * could call instead of dtr, built against whichever MPI compiles it (Bazel: the project's
 * Open MPI or MPICH; the script: Intel MPI's mpigcc where it finds one). Every rank holds
 * BYTES of random f32 values (never zeros: this machine moves zeros faster than data), and
 * times a loop of blocking calls, a barrier before each, ITERS times after two warm-up calls:
 *   all_gather      MPI_Allgather of BYTES / n per rank into BYTES      (S(0) -> R)
 *   reduce_scatter  MPI_Reduce_scatter_block, sum, BYTES into BYTES / n (P -> S(0))
 *   all_reduce      MPI_Allreduce, sum, BYTES                          (P -> R)
 * Rank 0 prints the median over the iterations of the slowest rank's time, in us:
 *   {"library": "...", "ranks": N, "bytes": B, "all_gather_us": T, "reduce_scatter_us": T,
 *    "all_reduce_us": T}
 *
 * Usage: mpirun -n N coll_bench [BYTES] [ITERS]   (default 16 MiB, 10; BYTES a multiple of
 *        4 * N)
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, KINDS };

static void call(int kind, const float *in, float *out, int count, int n) {
    switch (kind) {
    case ALL_GATHER:
        MPI_Allgather(in, count / n, MPI_FLOAT, out, count / n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(in, out, count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    default:
        MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long long bytes = argc > 1 ? atoll(argv[1]) : 16ll << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    if (bytes <= 0 || bytes % (4ll * n) != 0 || bytes / 4 > INT32_MAX || iters <= 0 ||
        iters > 1000) {
        if (rank == 0)
            fprintf(stderr, "coll_bench: BYTES must be a positive multiple of 4 x ranks (%d) "
                            "below 8 GiB, ITERS 1..1000\n", n);
        MPI_Finalize();
        return 2;
    }
    int count = (int)(bytes / 4);
    float *in = malloc((size_t)bytes), *out = malloc((size_t)bytes);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (in == NULL || out == NULL || t == NULL) {
        fprintf(stderr, "coll_bench: rank %d: out of memory for 2 x %lld bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    for (int i = 0; i < count; i++) { /* xorshift64*, values in [-1, 1) */
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        in[i] = (float)((double)((x * 0x2545f4914f6cdd1dull) >> 11) / 4503599627370496.0 - 1.0);
    }
    memset(out, 0xa5, (size_t)bytes);
    double med[KINDS];
    for (int kind = 0; kind < KINDS; kind++) {
        for (int i = -2; i < iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            call(kind, in, out, count, n);
            double mine = MPI_Wtime() - t0, slowest = 0;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (i >= 0) t[i] = slowest;
        }
        qsort(t, (size_t)iters, sizeof *t, by_value);
        med[kind] = t[iters / 2] * 1e6;
    }
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    for (int i = 0; lib[i] != '\0'; i++) /* the first line, JSON-safe */
        if (lib[i] == '\n' || lib[i] == ',' || lib[i] == '"' || lib[i] == '\\') {
            lib[i] = '\0';
            break;
        }
    if (rank == 0)
        printf("{\"library\": \"%s\", \"ranks\": %d, \"bytes\": %lld, \"all_gather_us\": %.1f, "
               "\"reduce_scatter_us\": %.1f, \"all_reduce_us\": %.1f}\n",
               lib, n, bytes, med[ALL_GATHER], med[REDUCE_SCATTER], med[ALL_REDUCE]);
    free(in);
    free(out);
    free(t);
    MPI_Finalize();
    return 0;
}
