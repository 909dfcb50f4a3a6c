/*
 * The MPI backend's user reduction functions: f16 and bf16 (every op, widened to f32 and
 * rounded once per pair through dtr's vectorised loop), and u8 max and min for MPIs that
 * order MPI_UINT8_T as signed.
 */
#ifndef DTR_BACKENDS_MPI_USER_OPS_H
#define DTR_BACKENDS_MPI_USER_OPS_H

#include <mpi.h>

#include "dtensor/dtensor.h"

/* The function for dtype (f16, bf16: slot 0..3 = sum, max, min, product; u8: 1 max, 2 min);
 * NULL for any other. */
MPI_User_function *dtr__mpi_user_fn(dtr_dtype_t dtype, int slot);

#endif
