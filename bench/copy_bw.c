/*
 * The machine's copy bandwidth with as many processes as ranks (bench/copy_probe.h says how
 * it is measured), for bench/limit_bench.sh and grad_bench.sh. Rank 0 prints
 *   {"ranks": N, "bytes": B, "slots": S, "median_us": T, "rank_gbps": G,
 *    "rank_gbps_worst": W, "repeats": R, "spread": F}
 * G the best median's bandwidth per rank (the limit), W the worst's, F = 1 - W / G.
 *
 * Usage: mpirun -n N copy_bw [BYTES] [ITERS] [REPEATS] [SLOTS]   (default 64 MiB, 10, 5, 0;
 *        SLOTS 0: past the caches, 2: two buffers back and forth, as the probe was)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench/copy_probe.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long long bytes = argc > 1 ? atoll(argv[1]) : 64ll << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    int slots = argc > 4 ? atoi(argv[4]) : 0;
    if (bytes <= 0 || bytes > (1ll << 40) || iters <= 0 || iters > 1000 || repeats <= 0 ||
        repeats > 100 || slots < 0 || slots == 1 || slots > 4096) {
        if (rank == 0)
            fprintf(stderr, "copy_bw: BYTES (1 .. 2^40), ITERS (1..1000), REPEATS (1..100) and "
                            "SLOTS (0, 2..4096) must be in range\n");
        MPI_Finalize();
        return 2;
    }
    copy_probe_t p;
    if (!copy_probe(bytes, iters, repeats, slots, &p)) {
        if (rank == 0)
            fprintf(stderr, "copy_bw: out of memory for the arena of %lld-byte slots\n", bytes);
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        printf("{\"ranks\": %d, \"bytes\": %lld, \"slots\": %d, \"median_us\": %.1f, "
               "\"rank_gbps\": %.3f, \"rank_gbps_worst\": %.3f, \"repeats\": %d, "
               "\"spread\": %.3f}\n",
               n, bytes, p.slots, p.best_us, p.gbps, p.worst_gbps, repeats,
               1.0 - p.worst_gbps / p.gbps);
    MPI_Finalize();
    return 0;
}
