/*
 * The job a running command (run, grad, reshard) is one rank of, and the command's own
 * collectives over it (agreeing on failures, timing, gathering reports): MPI's where the
 * backend runs over MPI (mpi, nccl: mpirun starts the job), otherwise dtr's own over a
 * context of the named backend (gloo: tools/dtr_launch.sh or torchrun start the job, RANK
 * and WORLD_SIZE name this rank). A failure of these collectives ends the process: the
 * launcher then stops the others.
 */
#define _DEFAULT_SOURCE /* gethostname, clock_gettime */
#include <fcntl.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"

static struct {
    const char *cmd, *backend;
    bool mpi;
    int rank, world;
    dtr_context_t *ctx; /* without MPI: the context the collectives run on */
    dtr_mesh_t *mesh;   /* ... over every rank of the job */
} dtr__job = {.backend = "mpi", .mpi = true, .world = 1};

/* Argument errors are the same on every rank: only rank 0 prints them. */
static int dtr__saved_stderr = -1;

void dtr_cli_quiet_stderr(void) {
    fflush(stderr);
    dtr__saved_stderr = dup(2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
}

void dtr_cli_restore_stderr(void) {
    if (dtr__saved_stderr < 0) return;
    fflush(stderr);
    dup2(dtr__saved_stderr, 2);
    close(dtr__saved_stderr);
    dtr__saved_stderr = -1;
}

/* --backend's value in argv (the last one given), NULL where absent. */
static const char *dtr__backend_arg(int argc, char **argv) {
    const char *found = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) found = argv[++i];
        else if (strncmp(argv[i], "--backend=", 10) == 0) found = argv[i] + 10;
    }
    return found;
}

bool dtr_cli_job_mpi(void) { return dtr__job.mpi; }
int dtr_cli_job_world(void) { return dtr__job.world; }
const char *dtr_cli_job_backend(void) { return dtr__job.backend; }

/* Ends the process where a collective of the job failed (without MPI). */
static void dtr__job_check(dtr_status_t st, const char *what) {
    if (st == DTR_OK) return;
    dtr_cli_restore_stderr();
    dtr_cli_say("dtr %s: rank %d: the job's %s over backend %s failed: %s", dtr__job.cmd,
                dtr__job.rank, what, dtr__job.backend, dtr_last_error());
    exit(DTR_EXIT_FAIL);
}

/* A job without MPI: this rank and the job's size from RANK and WORLD_SIZE, and the
 * context of its collectives. An exit code. */
static int dtr__job_join(const char *cmd) {
    dtr_status_t st = dtr_context_create_named(dtr__job.backend, &dtr__job.ctx);
    if (st != DTR_OK) {
        int code = dtr_error_class_exit_code(dtr_status_class(st));
        dtr_cli_say("dtr %s: --backend %s: %s", cmd, dtr__job.backend, dtr_last_error());
        return code != DTR_EXIT_OK ? code : DTR_EXIT_FAIL;
    }
    dtr__job.rank = dtr_context_rank(dtr__job.ctx);
    const char *ws = getenv("WORLD_SIZE");
    dtr__job.world = ws != NULL ? atoi(ws) : 1;
    int64_t n = dtr__job.world;
    st = dtr_mesh_create(1, &n, NULL, 0, &dtr__job.mesh);
    if (st == DTR_OK) return DTR_EXIT_OK;
    dtr_cli_say("dtr %s: --backend %s: the job's mesh: %s", cmd, dtr__job.backend,
                dtr_last_error());
    return DTR_EXIT_FAIL;
}

/* "rank 3" or "ranks 0-2, 5" for the ranks k with msgs[k] equal to msgs[first]. */
static void dtr__rank_list(const char *msgs, size_t len, int world, int first, char *out,
                           size_t cap) {
    const char *m = msgs + (size_t)first * len;
    int count = 0;
    for (int k = first; k < world; k++) count += strcmp(msgs + (size_t)k * len, m) == 0;
    int n = snprintf(out, cap, "%s ", count > 1 ? "ranks" : "rank");
    size_t pos = n > 0 ? (size_t)n : 0;
    for (int k = first, runs = 0; k < world && pos < cap; k++) {
        if (strcmp(msgs + (size_t)k * len, m) != 0) continue;
        int end = k;
        while (end + 1 < world && strcmp(msgs + (size_t)(end + 1) * len, m) == 0) end++;
        n = end > k ? snprintf(out + pos, cap - pos, "%s%d-%d", runs ? ", " : "", k, end)
                    : snprintf(out + pos, cap - pos, "%s%d", runs ? ", " : "", k);
        pos += n > 0 ? (size_t)n : 0;
        runs++;
        k = end;
    }
}

int dtr_cli_job_report(const char *cmd, int code, int rank, const char *msg, bool others) {
    int worst = code, world = 1;
    dtr_cli_job_reduce(&worst, 1, DTR_I32, DTR_REDUCE_MAX);
    if (worst == 0) return 0;
    /* rank 0 prints each distinct message once, with the ranks that failed so */
    enum { LEN = 384 };
    world = dtr_cli_job_world();
    char mine[LEN] = "";
    if (code != 0) snprintf(mine, sizeof mine, "%s", msg);
    char *all = rank == 0 ? calloc((size_t)world, LEN) : NULL;
    dtr_cli_job_gather(mine, LEN, all);
    for (int k = others; all != NULL && k < world; k++) {
        const char *m = all + (size_t)k * LEN;
        bool seen = *m == '\0' || (others && strcmp(all, m) == 0);
        for (int j = others; j < k && !seen; j++) seen = strcmp(all + (size_t)j * LEN, m) == 0;
        if (seen) continue;
        char ranks[256];
        dtr__rank_list(all, LEN, world, k, ranks, sizeof ranks);
        dtr_cli_say("dtr %s: %s: %s", cmd, ranks, m);
    }
    free(all);
    return worst;
}

static bool dtr__agreed;

bool dtr_cli_args_agreed(void) { return dtr__agreed; }

int dtr_cli_agree_args(const char *cmd, int rc, int rank) {
    dtr__agreed = true;
    return dtr_cli_report_said(cmd, rc, rank);
}

int dtr_cli_report_said(const char *cmd, int rc, int rank) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dtr %s: ", cmd);
    const char *said = dtr_cli_last_said();
    if (strncmp(said, prefix, strlen(prefix)) == 0) said += strlen(prefix);
    /* (rank 0 printed its own message already: the others' where they differ from it) */
    return dtr_cli_job_report(cmd, rc, rank, *said ? said : "its arguments were refused", true);
}

int dtr_cli_job_main(const char *cmd, int (*body)(int argc, char **argv, int rank, int world),
                     int argc, char **argv) {
    dtr__job.cmd = cmd;
    const char *b = dtr__backend_arg(argc, argv);
    if (b != NULL) dtr__job.backend = b;
    /* gloo joins without MPI; mpi and nccl need mpirun (and a name that is none of them
     * starts MPI too, for the flags' check to name it) */
    bool help = false;
    for (int i = 1; i < argc; i++) help = help || !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
    dtr__job.mpi = help || strcmp(dtr__job.backend, "gloo") != 0;
    int rc;
    if (dtr__job.mpi) {
        int provided;
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "dtr %s: MPI_Init failed\n", cmd);
            return DTR_EXIT_FAIL;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &dtr__job.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &dtr__job.world);
    } else if ((rc = dtr__job_join(cmd)) != DTR_EXIT_OK) {
        dtr_context_destroy(dtr__job.ctx);
        return rc;
    }
    if (dtr__job.rank != 0) dtr_cli_quiet_stderr();
    rc = body(argc, argv, dtr__job.rank, dtr__job.world);
    /* a rank that failed its arguments' checks returned before the verdict the others
     * reach before their first collective: it joins that verdict here */
    if (!dtr_cli_args_agreed()) rc = dtr_cli_agree_args(cmd, rc, dtr__job.rank);
    dtr_cli_restore_stderr();
    if (dtr__job.mpi) {
        MPI_Finalize();
    } else {
        dtr_cli_job_barrier(); /* (no rank leaves while another still needs it) */
        dtr_mesh_destroy(dtr__job.mesh);
        dtr_context_destroy(dtr__job.ctx);
    }
    return rc;
}

dtr_status_t dtr_cli_job_context(dtr_context_t **ctx) {
    if (dtr__job.mpi) return dtr_context_create_mpi(MPI_COMM_WORLD, ctx);
    return dtr_context_create_named(dtr__job.backend, ctx);
}

static MPI_Datatype dtr__mpi_type(dtr_dtype_t dtype) {
    switch (dtype) {
    case DTR_I32: return MPI_INT;
    case DTR_I64: return MPI_INT64_T;
    case DTR_F64: return MPI_DOUBLE;
    default: return MPI_UNSIGNED_CHAR;
    }
}

static MPI_Op dtr__mpi_op(dtr_reduce_op_t op) {
    return op == DTR_REDUCE_MAX ? MPI_MAX : op == DTR_REDUCE_MIN ? MPI_MIN : MPI_SUM;
}

void dtr_cli_job_reduce(void *buf, int count, dtr_dtype_t dtype, dtr_reduce_op_t op) {
    if (dtr__job.mpi) {
        MPI_Allreduce(MPI_IN_PLACE, buf, count, dtr__mpi_type(dtype), dtr__mpi_op(op),
                      MPI_COMM_WORLD);
        return;
    }
    dtr__job_check(dtr_all_reduce(dtr__job.ctx, dtr__job.mesh, 1u, buf, buf, count, dtype, op),
                   "all-reduce");
}

void dtr_cli_job_max(const double *mine, double *all, int count) {
    if (all != mine) memcpy(all, mine, (size_t)count * sizeof *all);
    dtr_cli_job_reduce(all, count, DTR_F64, DTR_REDUCE_MAX);
}

void dtr_cli_job_barrier(void) {
    if (dtr__job.mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    int one = 1;
    dtr_cli_job_reduce(&one, 1, DTR_I32, DTR_REDUCE_SUM);
}

double dtr_cli_job_now(void) {
    if (dtr__job.mpi) return MPI_Wtime();
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Without MPI: every rank's len bytes into all (world * len), on every rank, as a sum of
 * zeros and each rank's own piece. */
static void dtr__job_all_gather(const void *mine, size_t len, unsigned char *all) {
    memset(all, 0, (size_t)dtr__job.world * len);
    memcpy(all + (size_t)dtr__job.rank * len, mine, len);
    dtr__job_check(dtr_all_reduce(dtr__job.ctx, dtr__job.mesh, 1u, all, all,
                                  (int64_t)((size_t)dtr__job.world * len), DTR_U8,
                                  DTR_REDUCE_SUM),
                   "gather");
}

void dtr_cli_job_gather(const void *mine, size_t len, void *all) {
    if (dtr__job.mpi) {
        MPI_Gather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
        return;
    }
    unsigned char *tmp = all;
    if (dtr__job.rank != 0) tmp = malloc((size_t)dtr__job.world * len);
    if (tmp == NULL) dtr__job_check(DTR_ERR_OUT_OF_MEMORY, "gather");
    dtr__job_all_gather(mine, len, tmp);
    if (tmp != all) free(tmp);
}

void dtr_cli_job_gatherv(const void *mine, int len, void *all, const int *lens, const int *at) {
    if (dtr__job.mpi) {
        MPI_Gatherv(mine, len, MPI_CHAR, all, lens, at, MPI_CHAR, 0, MPI_COMM_WORLD);
        return;
    }
    int world = dtr__job.world;
    int *each = calloc((size_t)world, sizeof *each);
    if (each == NULL) dtr__job_check(DTR_ERR_OUT_OF_MEMORY, "gather");
    each[dtr__job.rank] = len;
    dtr_cli_job_reduce(each, world, DTR_I32, DTR_REDUCE_SUM);
    int64_t total = 0, mine_at = 0;
    for (int r = 0; r < world; r++) {
        if (r == dtr__job.rank) mine_at = total;
        total += each[r];
    }
    unsigned char *tmp = calloc((size_t)total + 1, 1);
    if (tmp == NULL) dtr__job_check(DTR_ERR_OUT_OF_MEMORY, "gather");
    if (len > 0) memcpy(tmp + mine_at, mine, (size_t)len);
    dtr__job_check(dtr_all_reduce(dtr__job.ctx, dtr__job.mesh, 1u, tmp, tmp, total, DTR_U8,
                                  DTR_REDUCE_SUM),
                   "gather");
    /* rank 0's pieces where its at[] puts them (the same offsets: lens are each[]) */
    for (int r = 0, off = 0; dtr__job.rank == 0 && r < world; off += each[r], r++)
        memcpy((char *)all + at[r], tmp + off, (size_t)each[r]);
    free(tmp);
    free(each);
}

void dtr_cli_job_bcast(void *buf, size_t len, int root) {
    if (dtr__job.mpi) {
        MPI_Bcast(buf, (int)len, MPI_BYTE, root, MPI_COMM_WORLD);
        return;
    }
    unsigned char *tmp = malloc((size_t)dtr__job.world * len);
    if (tmp == NULL) dtr__job_check(DTR_ERR_OUT_OF_MEMORY, "broadcast");
    dtr__job_all_gather(buf, len, tmp);
    memcpy(buf, tmp + (size_t)root * len, len);
    free(tmp);
}

/* A hash of this machine's name: which ranks share a node, without MPI. */
static int64_t dtr__node_id(void) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

dtr_status_t dtr_cli_job_across_nodes(const dtr_mesh_t *mesh, uint32_t *across) {
    if (dtr__job.mpi) return dtr_mpi_mesh_across_nodes(MPI_COMM_WORLD, mesh, across);
    int64_t *node = calloc((size_t)dtr__job.world, sizeof *node);
    if (node == NULL) dtr__job_check(DTR_ERR_OUT_OF_MEMORY, "node names");
    node[dtr__job.rank] = dtr__node_id();
    dtr_cli_job_reduce(node, dtr__job.world, DTR_I64, DTR_REDUCE_SUM);
    /* a dim crosses nodes where a rank's node differs from that of the rank at coordinate
     * 0 along it, the other coordinates the same */
    uint32_t bits = 0;
    int nd = dtr_mesh_ndims(mesh);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t p = 0; p < dtr_mesh_nranks(mesh); p++) {
        int r = 0, r0 = 0;
        dtr_mesh_rank_at(mesh, coord, &r);
        for (int i = 0; i < nd; i++) {
            int64_t keep = coord[i];
            coord[i] = 0;
            dtr_mesh_rank_at(mesh, coord, &r0);
            coord[i] = keep;
            if (r < dtr__job.world && r0 < dtr__job.world && node[r] != node[r0]) bits |= 1u << i;
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
    free(node);
    *across = bits;
    return DTR_OK;
}
