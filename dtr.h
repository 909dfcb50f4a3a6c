/*
 * dtr: DTensor placement and redistribution.
 *
 * The one header a framework includes. Modules, in data-flow order:
 *   core/status.h        status codes, dtr_last_error()
 *   placement/placement.h  Shard(d), Replicate, Partial(op); text form
 *   dtensor/dtensor.h      meshes, dtypes, specs, per-rank layouts
 *   redistribute/redistribute.h  plans: steps, strategies, cost model, cache
 *   redistribute/execute.h       the executor: backends, contexts, dtr_redistribute
 *   (redistribute/mpi/dtr_mpi.h  the MPI backend; include it where MPI is used)
 *   autograd/autograd.h          backward plans of redistributions
 *   autograd/grad.h              gradient reduction: DDP hooks, FSDP/HSDP reducer, fused
 *   autograd/tape.h              from_local / to_local backward, the tape
 *
 * Conventions for every function: it returns dtr_status_t (DTR_OK or a negative code);
 * on failure no output is written and dtr_last_error() names the argument; the caller owns
 * what it passes in, and what a *_create hands out until the matching *_destroy.
 */
#ifndef DTR_H
#define DTR_H

#include "autograd/autograd.h"
#include "autograd/grad.h"
#include "autograd/tape.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "placement/placement.h"
#include "redistribute/execute.h"
#include "redistribute/pattern.h"
#include "redistribute/redistribute.h"

#define DTR_VERSION_MAJOR 0
#define DTR_VERSION_MINOR 1
#define DTR_VERSION_PATCH 0
#define DTR_VERSION_STRING "0.1.0"

#endif
