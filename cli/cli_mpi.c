/* What the commands that run as a job of ranks (run, grad, reshard) share: agreeing on
 * failures, the mesh against the job, the cost model from where the ranks run. */
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "backends/mpi/dtr_mpi.h"
#include "cli/cli.h"

int dtr_cli_all_ok_msg(const char *cmd, int bad, int rank, const char *msg) {
    return dtr_cli_job_report(cmd, bad ? DTR_EXIT_FAIL : DTR_EXIT_OK, rank, msg, false) == 0;
}

int dtr_cli_all_code(const char *cmd, dtr_status_t st, int rank, const char *what) {
    char msg[384] = "";
    if (st != DTR_OK) snprintf(msg, sizeof msg, "%s: %s", what, dtr_last_error());
    int code = st == DTR_OK ? DTR_EXIT_OK : dtr_error_class_exit_code(dtr_status_class(st));
    if (st != DTR_OK && code == DTR_EXIT_OK) code = DTR_EXIT_FAIL;
    return dtr_cli_job_report(cmd, code, rank, msg, false);
}

int dtr_cli_fill_code(const char *cmd, dtr_status_t st, int rank, size_t oom_bytes) {
    char msg[384] = "";
    if (st == DTR_ERR_OUT_OF_MEMORY && oom_bytes > 0)
        snprintf(msg, sizeof msg, "buffers: out of memory for %zu bytes (a tensor's source block "
                 "twice, its target block once)", oom_bytes);
    else if (st != DTR_OK)
        snprintf(msg, sizeof msg, "fill: %s", dtr_last_error());
    int code = st == DTR_OK ? DTR_EXIT_OK : dtr_error_class_exit_code(dtr_status_class(st));
    if (st != DTR_OK && code == DTR_EXIT_OK) code = DTR_EXIT_FAIL;
    return dtr_cli_job_report(cmd, code, rank, msg, false);
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
