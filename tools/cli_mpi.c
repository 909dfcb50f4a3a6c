/* What the commands that run under mpirun (run, grad) share. */
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include "tools/cli.h"

/* Argument errors are the same on every rank: only rank 0 prints them. */
static int dtr__saved_stderr = -1;

static void dtr__quiet_stderr(void) {
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

int dtr_cli_mpi_main(const char *cmd, int (*body)(int argc, char **argv, int rank, int world),
                     int argc, char **argv) {
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dtr %s: MPI_Init failed\n", cmd);
        return DTR_EXIT_FAIL;
    }
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (rank != 0) dtr__quiet_stderr();
    int rc = body(argc, argv, rank, world);
    dtr_cli_restore_stderr();
    MPI_Finalize();
    return rc;
}

int dtr_cli_all_ok(const char *cmd, dtr_status_t st, int rank, const char *what) {
    int bad = st != DTR_OK, any = 0;
    if (bad) fprintf(stderr, "dtr %s: rank %d: %s: %s\n", cmd, rank, what, dtr_last_error());
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return !any;
}

int dtr_cli_mesh_fits(const char *cmd, const dtr_mesh_t *mesh, int world) {
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
                               "--mesh: the mesh uses ranks up to %d and the job has %d: run "
                               "under 'mpirun -n %d'",
                               top, world, top + 1);
}
