/* A backend for a world of one rank, for tests that need a context and no MPI: the rank is
 * 0 and every operation refuses (DTR_ERR_UNSUPPORTED). A 1-rank mesh never reaches them. */
#ifndef DTR_TESTS_SOLO_BACKEND_H
#define DTR_TESTS_SOLO_BACKEND_H

#include "runtime/runtime.h"

extern const dtr_backend_ops_t solo_backend_ops;

#endif
