/* MPI error codes as dtr statuses (error.c), shared with the NCCL backend, which is
 * bootstrapped over MPI. */
#ifndef DTR_BACKENDS_MPI_ERROR_H
#define DTR_BACKENDS_MPI_ERROR_H

#include "core/status.h"

/* DTR_ERR_BACKEND with "<call>: <MPI's error text for rc>". */
DTR_INTERNAL_EXPORT dtr_status_t dtr__mpi_error(int rc, const char *call);

#endif
