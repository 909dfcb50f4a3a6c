/* The MPI backend's row in the table of backends by name (registry.c): "mpi", a context
 * over MPI_COMM_WORLD of a job that mpirun (or srun) started. */
#include <mpi.h>

#include "core/common.h"
#include "backends/mpi/dtr_mpi.h"

static dtr_status_t dtr__mpi_create_env(dtr_context_t **out) {
    int init = 0, done = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&done);
    if (!init || done)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_context_create_named",
                          "backend mpi: MPI is %s (start the job under mpirun or srun and call "
                          "MPI_Init first; without MPI, backend gloo)",
                          done ? "finalised" : "not initialised");
    return dtr_context_create_mpi(MPI_COMM_WORLD, out);
}

__attribute__((constructor)) static void dtr__mpi_register(void) {
    dtr_backend_info_t row = {
        .name = "mpi",
        .caps = dtr_backend_mpi_ops()->caps,
        .memory = "host",
        .launch = "mpirun or srun (MPI_COMM_WORLD, MPI initialised by the caller)",
        .create_env = dtr__mpi_create_env,
    };
    (void)dtr_backend_register(&row);
}
