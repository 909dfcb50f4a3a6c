/*
 * The copy-bandwidth probe that every "x the limit" figure divides by (bench/copy_bw.c
 * prints it; bench/cross_mesh_bench.c runs it in its own job). Every rank copies `bytes` at
 * once with the others, between barriers, as a move does: each source byte read once and
 * each destination byte written once, from and to memory. So the copies walk an arena of
 * their own, `slots` slots of `bytes` (at least 4 and at least 4x the last-level cache),
 * each copy from one slot into the next: the source was last touched slots - 1 copies ago
 * and the destination slots - 2, both long evicted, so no figure is a cache's (a 64 MiB copy
 * back and forth between two buffers read 21 GB/s a rank in one run and 43 in the next, as
 * more or less of it stayed in a 32 MiB L3).
 *
 * One measurement is the median over `iters` copies of the time from the first rank's start
 * to the last rank's end (MPI_Wtime is one clock on one machine; with more ranks than cores
 * the copies share the cores, and the span counts that). `repeats` measurements are taken;
 * the best (the fastest median) is the limit, since a slow phase of a shared machine only
 * lowers the others, and the worst says how still the figure was. Bandwidths count each
 * copied byte twice (read and written), per rank. Collective over MPI_COMM_WORLD.
 */
#ifndef DTR_BENCH_COPY_PROBE_H
#define DTR_BENCH_COPY_PROBE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int slots;            /* the arena's slots of `bytes` */
    double best_us;       /* the fastest median */
    double gbps, worst_gbps; /* per rank: the best and the worst median's bandwidth */
} copy_probe_t;

/* The last-level cache in bytes: the kernel's figure for cpu0's highest cache level, else
 * sysconf's, else 32 MiB. */
static inline long long copy_probe_llc(void) {
    long long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        long long v = 0;
        if (fscanf(f, "%lld%c", &v, &unit) >= 1) {
            if (unit == 'K') v <<= 10;
            else if (unit == 'M') v <<= 20;
            if (v > best) best = v;
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best <= 0) best = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return best > 0 ? best : 32ll << 20;
}

static inline int copy_probe_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One measurement: the median span of iters copies, each from the slot after the last one
 * written into the next. */
static inline double copy_probe_measure(char *arena, long long bytes, int slots, int iters,
                                        int *at, double *t) {
    for (int i = 0; i < iters; i++) {
        char *src = arena + (long long)(*at % slots) * bytes;
        char *dst = arena + (long long)((*at + 1) % slots) * bytes;
        *at += 1;
        MPI_Barrier(MPI_COMM_WORLD);
        double span[2] = {-MPI_Wtime(), 0}, all[2];
        memcpy(dst, src, (size_t)bytes);
        span[1] = MPI_Wtime();
        MPI_Allreduce(span, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[i] = all[1] + all[0];
    }
    qsort(t, (size_t)iters, sizeof *t, copy_probe_cmp);
    return t[iters / 2];
}

/* Runs the probe; false (with nothing measured) where the arena cannot be had. slots 0: as
 * many as keep the copies out of the caches (above); 2: the old probe's two buffers copied
 * back and forth, for comparison (bench/copy_probe_bench.sh). */
static inline bool copy_probe(long long bytes, int iters, int repeats, int slots,
                              copy_probe_t *out) {
    long long llc = copy_probe_llc();
    if (slots <= 0) {
        slots = 4;
        while ((long long)slots * bytes < 4 * llc && slots < 4096) slots++;
    }
    char *arena = malloc((size_t)(slots * bytes));
    double *t = malloc(sizeof(double) * (size_t)iters);
    int ok = arena != NULL && t != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(arena);
        free(t);
        return false;
    }
    memset(arena, 1, (size_t)(slots * bytes)); /* every page touched before the first copy */
    int at = 0;
    copy_probe_measure(arena, bytes, slots, iters < 2 ? iters : 2, &at, t); /* warm-up */
    double best = 0, worst = 0;
    for (int k = 0; k < repeats; k++) {
        double med = copy_probe_measure(arena, bytes, slots, iters, &at, t);
        if (k == 0 || med < best) best = med;
        if (k == 0 || med > worst) worst = med;
    }
    free(arena);
    free(t);
    *out = (copy_probe_t){.slots = slots, .best_us = best * 1e6,
                          .gbps = 2.0 * (double)bytes / best / 1e9,
                          .worst_gbps = 2.0 * (double)bytes / worst / 1e9};
    return true;
}

#endif
