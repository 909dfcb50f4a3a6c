/* Internals of dtensor/, used by its own files only (shape.c, spec.c). */
#ifndef DTR_DTENSOR_INTERNAL_H
#define DTR_DTENSOR_INTERNAL_H

#include <stdint.h>

#include "dtensor/dtensor.h"

/* dtr_shape_bytes with errors naming `func` (shape.c; dtr_spec_init checks with it). */
dtr_status_t dtr__shape_bytes(const int64_t *shape, int ndim, dtr_dtype_t dtype,
                              const char *func, int64_t *bytes);

#endif
