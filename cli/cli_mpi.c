/* What the commands that run as a job of ranks (run, grad, reshard) share: agreeing on
 * failures, the mesh against the job, the cost model from where the ranks run. */
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"

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

/* The collective behind dtr_cli_all_ok*: code is this rank's exit code (0: it did not
 * fail); returns the highest over the job, rank 0 having printed each distinct message. */
static int dtr__all_report(const char *cmd, int code, int rank, const char *msg) {
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
    for (int k = 0; all != NULL && k < world; k++) {
        const char *m = all + (size_t)k * LEN;
        bool seen = *m == '\0';
        for (int j = 0; j < k && !seen; j++) seen = strcmp(all + (size_t)j * LEN, m) == 0;
        if (seen) continue;
        char ranks[256];
        dtr__rank_list(all, LEN, world, k, ranks, sizeof ranks);
        dtr_cli_say("dtr %s: %s: %s", cmd, ranks, m);
    }
    free(all);
    return worst;
}

int dtr_cli_all_ok_msg(const char *cmd, int bad, int rank, const char *msg) {
    return dtr__all_report(cmd, bad ? DTR_EXIT_FAIL : DTR_EXIT_OK, rank, msg) == 0;
}

int dtr_cli_all_code(const char *cmd, dtr_status_t st, int rank, const char *what) {
    char msg[384] = "";
    if (st != DTR_OK) snprintf(msg, sizeof msg, "%s: %s", what, dtr_last_error());
    int code = st == DTR_OK ? DTR_EXIT_OK : dtr_error_class_exit_code(dtr_status_class(st));
    if (st != DTR_OK && code == DTR_EXIT_OK) code = DTR_EXIT_FAIL;
    return dtr__all_report(cmd, code, rank, msg);
}

int dtr_cli_all_ok(const char *cmd, dtr_status_t st, int rank, const char *what) {
    return dtr_cli_all_code(cmd, st, rank, what) == DTR_EXIT_OK;
}

int dtr_cli_mesh_fits(const char *cmd, const char *flag, const dtr_mesh_t *mesh, int world) {
    int top = -1, nd = dtr_mesh_ndims(mesh);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t p = 0; p < dtr_mesh_nranks(mesh); p++) {
        int r = 0;
        dtr_mesh_rank_at(mesh, coord, &r);
        if (r > top) top = r;
        for (int i = nd - 1; i >= 0; i--) {
            if (++coord[i] < dtr_mesh_size(mesh, i)) break;
            coord[i] = 0;
        }
    }
    if (top < world) return DTR_EXIT_OK;
    return dtr_cli_usage_error(cmd,
                               "%s: the mesh uses ranks up to %d and the job has %d: run "
                               "under '%s %d'",
                               flag, top, world,
                               dtr_cli_job_mpi() ? "mpirun -n" : "dtr_launch.sh -n", top + 1);
}

void dtr_cli_mpi_paths(long long sums[7]) {
    long long mine[7] = {0, 0, 0, 0, 0, 0, 0};
    int me = 0, count = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    dtr_mpi_group_info_t *g = NULL;
    if (dtr_mpi_groups(NULL, 0, &count) == DTR_OK && count > 0 &&
        (g = calloc((size_t)count, sizeof *g)) != NULL &&
        dtr_mpi_groups(g, count, &count) == DTR_OK) {
        for (int i = 0; i < count; i++) {
            if (g[i].members < 2 || g[i].ranks[0] != me) continue;
            int k = g[i].shared_memory ? 0 : 3;
            mine[k]++;
            if (g[i].shared_memory) {
                mine[1] += g[i].shm_ops;
                mine[2] += g[i].mpi_ops;
                mine[6] += g[i].direct_ops;
            } else {
                mine[4] += g[i].mpi_ops;
                mine[5] += g[i].hier_ops;
            }
        }
    }
    free(g);
    MPI_Allreduce(mine, sums, 7, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

int dtr_cli_node_cost(const char *cmd, const dtr_mesh_t *mesh, const char *nodes_of,
                      const dtr_cli_cost_flags_t *f, dtr_cost_model_t *cost, uint32_t *across,
                      uint32_t *planned) {
    *across = *planned = 0;
    int rc = dtr_cli_cost_flags(cmd, f, cost);
    if (rc != DTR_EXIT_OK) return rc;
    if (dtr_cli_job_across_nodes(mesh, across) != DTR_OK)
        return dtr_cli_lib_error(cmd, NULL);
    if (strcmp(nodes_of, "auto") == 0)
        *planned = *across;
    else if (dtr_mesh_dims_parse(nodes_of, dtr_mesh_ndims(mesh), planned) != DTR_OK)
        return dtr_cli_lib_error(cmd, "--nodes-of");
    return dtr_cli_inter_cost(cmd, *planned, f, cost);
}
