/* MPI's error codes as dtr statuses: below both the backend (mpi.c) and its shared-memory
 * path (shm.c), and used by the NCCL backend's bootstrap. */
#include <mpi.h>
#include <stdio.h>

#include "core/common.h"
#include "backends/mpi/error.h"

dtr_status_t dtr__mpi_error(int rc, const char *call) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return dtr__error(DTR_ERR_BACKEND, "mpi", "%s: %s", call, text);
}
