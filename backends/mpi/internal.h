/* Internals of the MPI backend that the NCCL backend (bootstrapped over MPI) shares. */
#ifndef DTR_BACKENDS_MPI_INTERNAL_H
#define DTR_BACKENDS_MPI_INTERNAL_H

#include "core/status.h"

/* DTR_ERR_BACKEND with "<call>: <MPI's error text for rc>". */
DTR_INTERNAL_EXPORT dtr_status_t dtr__mpi_error(int rc, const char *call);

#endif
