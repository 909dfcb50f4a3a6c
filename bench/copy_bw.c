/*
 * The machine's copy bandwidth with as many processes as ranks, for bench/limit_bench.sh:
 * every rank copies BYTES between two buffers of its own (memcpy, each page touched first),
 * all at once between barriers, ITERS times; rank 0 prints the median over the iterations
 * of the time from the first rank's start to the last rank's end (MPI_Wtime is one clock on
 * one machine; with more ranks than cores the copies share the cores, and this span counts
 * that), and the bandwidth that makes per rank, counting each copied byte twice (read and
 * written):
 *   {"ranks": N, "bytes": B, "median_us": T, "rank_gbps": G}
 *
 * Usage: mpirun -n N copy_bw [BYTES] [ITERS]   (default 64 MiB, 10)
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long long bytes = argc > 1 ? atoll(argv[1]) : 64ll << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    if (bytes <= 0 || iters <= 0 || iters > 1000) {
        if (rank == 0) fprintf(stderr, "copy_bw: BYTES and ITERS (1..1000) must be positive\n");
        MPI_Finalize();
        return 2;
    }
    char *a = malloc((size_t)bytes), *b = malloc((size_t)bytes);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (a == NULL || b == NULL || t == NULL) {
        fprintf(stderr, "copy_bw: rank %d: out of memory for 2 x %lld bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(a, 1, (size_t)bytes);
    memset(b, 2, (size_t)bytes);
    for (int i = -2; i < iters; i++) { /* two warm-up rounds */
        MPI_Barrier(MPI_COMM_WORLD);
        /* from the first rank's start to the last rank's end: with more ranks than cores
         * the copies take turns, and each rank's own time would leave out its wait */
        double span[2] = {-MPI_Wtime(), 0}, all[2];
        memcpy(i % 2 ? a : b, i % 2 ? b : a, (size_t)bytes);
        span[1] = MPI_Wtime();
        MPI_Allreduce(span, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 0) t[i] = all[1] + all[0];
    }
    qsort(t, (size_t)iters, sizeof *t, by_value);
    double med = t[iters / 2];
    if (rank == 0)
        printf("{\"ranks\": %d, \"bytes\": %lld, \"median_us\": %.1f, \"rank_gbps\": %.3f}\n", n,
               bytes, med * 1e6, 2.0 * (double)bytes / med / 1e9);
    free(a);
    free(b);
    free(t);
    MPI_Finalize();
    return 0;
}
