/*
 * Loading a safetensors checkpoint into a layout with dtr, and the limit beside it
 * (bench/checkpoint_bench.sh runs it with the peers). Under mpirun, every rank:
 *   1. the limit: reads as many bytes as its blocks hold, as one sequential run of the file
 *      (rank r from r / N of the way in): what the file system gives N readers of those
 *      bytes, measured here and now; through one 16 MiB buffer (limit: the buffer stays in
 *      the caches), or into memory as large as the blocks, written before the clock
 *      (limit-touched) or fresh (limit-fresh: its first-touch faults on the clock, as a
 *      load into new buffers has them); limit-file: rank 0 alone reads the whole file once
 *      (with the page cache cold, every byte of it must come off the disk once: the bound
 *      of a load on one machine, whose ranks share the page cache);
 *   2. dtr: dtr_checkpoint_open, then every tensor's block under the rules file
 *      (dtr_checkpoint_rules_spec) read by dtr_checkpoint_read_block into its own buffer,
 *      all kept, as a load keeps them;
 * each timed between barriers (the slowest rank's), with the peak resident memory (ru_maxrss)
 * beside the bytes of the rank's blocks. Rank 0 prints one RESULT line per measurement.
 *
 * dtr-touched: the same with the buffers allocated and written before the clock starts (a
 * framework's preallocated parameters), so that the first-touch page faults are left out.
 *
 * Usage: mpirun -n N checkpoint_bench FILE RULES MESH
 *            [limit|limit-touched|limit-fresh|limit-file|dtr|dtr-touched|both]
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "checkpoint/dtr_checkpoint.h"
#include "dtr.h"

static double peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static void die(const char *what) {
    fprintf(stderr, "checkpoint_bench: %s: %s\n", what, dtr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Every block of this rank under the rules: the bytes (and, with `read`, read and kept). */
static double load(const dtr_checkpoint_t *ck, const dtr_checkpoint_rules_t *rules,
                   const dtr_mesh_t *mesh, int rank, bool read, int64_t *bytes, int64_t *reads,
                   int64_t *file_bytes, void ***keep, bool touched) {
    int64_t n = dtr_checkpoint_count(ck);
    *keep = calloc((size_t)n + 1, sizeof **keep);
    for (int64_t i = 0; touched && i < n; i++) { /* the buffers faulted in before the clock */
        dtr_spec_t spec;
        dtr_layout_t lay;
        if (dtr_checkpoint_rules_spec(rules, ck, i, mesh, &spec, NULL) != DTR_OK ||
            dtr_spec_layout(&spec, rank, &lay) != DTR_OK)
            die("rules");
        (*keep)[i] = malloc((size_t)lay.bytes + 1);
        memset((*keep)[i], 0, (size_t)lay.bytes + 1);
    }
    *bytes = *reads = *file_bytes = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int64_t i = 0; i < n; i++) {
        dtr_spec_t spec;
        dtr_layout_t lay;
        if (dtr_checkpoint_rules_spec(rules, ck, i, mesh, &spec, NULL) != DTR_OK ||
            dtr_spec_layout(&spec, rank, &lay) != DTR_OK)
            die("rules");
        *bytes += lay.bytes;
        if (!read) continue;
        if ((*keep)[i] == NULL) (*keep)[i] = malloc((size_t)lay.bytes + 1);
        dtr_checkpoint_read_stats_t st;
        if (dtr_checkpoint_read_block(ck, i, &spec, rank, (*keep)[i], (size_t)lay.bytes, &st) !=
            DTR_OK)
            die("read");
        *reads += st.reads;
        *file_bytes += st.file_bytes;
    }
    double t = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* `bytes` of the file from rank / world of the way in, sequentially: through one 16 MiB
 * buffer (dest 0: it stays in the caches), or into a destination as large as the bytes (a
 * load's footprint), touched before the clock (1) or fresh (2: its first-touch faults in). */
static double limit(const char *file, int rank, int world, int64_t bytes, int dest) {
    int fd = open(file, O_RDONLY);
    off_t size = lseek(fd, 0, SEEK_END);
    int64_t at = (int64_t)size / world * rank, chunk = 16 << 20, got = 0;
    char *buf = malloc((size_t)(dest == 0 ? chunk : bytes + 1));
    if (dest == 1) memset(buf, 0, (size_t)bytes + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    while (got < bytes) {
        int64_t want = bytes - got < chunk ? bytes - got : chunk;
        int64_t from = (at + got) % size, room = (int64_t)size - from;
        ssize_t r = pread(fd, buf + (dest == 0 ? 0 : got), (size_t)(want < room ? want : room),
                          (off_t)from);
        if (r <= 0) break;
        got += r;
    }
    double t = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(buf);
    close(fd);
    return slowest;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n N checkpoint_bench FILE RULES MESH [limit|limit-touched|limit-fresh|limit-file|dtr|dtr-touched|both]\n");
        MPI_Finalize();
        return 2;
    }
    const char *what = argc > 4 ? argv[4] : "both";
    dtr_checkpoint_t *ck;
    dtr_mesh_t *mesh;
    dtr_checkpoint_rules_t *rules;
    if (dtr_checkpoint_open(argv[1], &ck) != DTR_OK) die(argv[1]);
    if (dtr_mesh_parse(argv[3], NULL, 0, &mesh) != DTR_OK) die(argv[3]);
    if (dtr_checkpoint_rules_load(argv[2], dtr_mesh_ndims(mesh), &rules) != DTR_OK) die(argv[2]);
    int64_t bytes, reads, most, file_bytes;
    void **keep;
    load(ck, rules, mesh, rank, false, &bytes, &reads, &file_bytes, &keep, false);
    free(keep);
    MPI_Allreduce(&bytes, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    static const char *const limits[] = {"limit", "limit-touched", "limit-fresh"};
    for (int k = 0; k < 3; k++)
        if (strcmp(what, limits[k]) == 0 || strcmp(what, "both") == 0) {
            double t = limit(argv[1], rank, world, bytes, k);
            if (rank == 0)
                printf("RESULT %s %d %.4f %lld 0\n", limits[k], world, t, (long long)most);
        }
    if (strcmp(what, "limit-file") == 0) { /* the whole file once, by rank 0 alone */
        int64_t size = 0;
        if (rank == 0) {
            int fd = open(argv[1], O_RDONLY);
            size = (int64_t)lseek(fd, 0, SEEK_END);
            close(fd);
        }
        double t = limit(argv[1], 0, 1, rank == 0 ? size : 0, 0);
        if (rank == 0) printf("RESULT limit-file %d %.4f %lld 0\n", world, t, (long long)size);
    }
    if (strncmp(what, "limit", 5) != 0) {
        bool touched = strcmp(what, "dtr-touched") == 0;
        double base = peak_mb(), rss = 0;
        double t = load(ck, rules, mesh, rank, true, &bytes, &reads, &file_bytes, &keep, touched);
        double grown = peak_mb() - base;
        MPI_Allreduce(&grown, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int64_t r = 0, fb = 0;
        MPI_Allreduce(&reads, &r, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&file_bytes, &fb, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("RESULT %s %d %.4f %lld %.1f reads=%lld file_bytes=%lld blocks_mb=%.1f\n",
                   touched ? "dtr-touched" : "dtr", world, t, (long long)most, rss, (long long)r, (long long)fb,
                   (double)most / 1048576.0);
        for (int64_t i = 0; i < dtr_checkpoint_count(ck); i++) free(keep[i]);
        free(keep);
    }
    dtr_checkpoint_rules_destroy(rules);
    dtr_mesh_destroy(mesh);
    dtr_checkpoint_close(ck);
    MPI_Finalize();
    return 0;
}
