/*
 * dtr's planning layer alone: meshes, placements, specs, every rank's exact block, and plans
 * (steps, bytes, the bound, the cost model, the plan cache, batches and changes between
 * meshes as data), with no executor and no MPI, CUDA or NCCL behind it. A framework that plans
 * in one place and moves the bytes with its own collectives links libdtr_core (pkg-config
 * dtr-core, CMake dtr::core) and includes <dtr/dtr_core.h>; libdtr holds the same functions
 * and the rest, so link one of the two, never both.
 *
 * Modules (each declaration's comment says who owns what and what happens on error):
 *   core/status.h                   status codes, dtr_last_error()
 *   core/version.h                  the loaded library's version
 *   placement/placement.h           Shard(d), Replicate, Partial(op); text form
 *   dtensor/dtensor.h               meshes, dtypes, specs, per-rank layouts
 *   redistribute/planner/planner.h  plans: steps, strategies, cost model, cache
 * Installed (tools/install.sh), these are one file, <dtr/dtr_core.h>.
 */
#ifndef DTR_CORE_H
#define DTR_CORE_H

#include "core/status.h"
#include "core/version.h"
#include "dtensor/dtensor.h"
#include "dtr_version.h"
#include "placement/placement.h"
#include "redistribute/planner/planner.h"

#endif
