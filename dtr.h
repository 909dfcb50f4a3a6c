/*
 * dtr: DTensor placement and redistribution.
 *
 * The one header a framework includes. Modules, in data-flow order:
 *   core/status.h        status codes, dtr_last_error()
 *   placement/placement.h  Shard(d), Replicate, Partial(op); text form
 *   dtensor/dtensor.h      meshes, dtypes, specs, per-rank layouts
 *   redistribute/planner/planner.h    plans: steps, strategies, cost model, cache
 *   runtime/runtime.h      contexts over a backend, the table of backends by name, group
 *                          collectives (backend.h: the backend interface; memory.h: memory
 *                          spaces)
 *   redistribute/executor/executor.h  the executor: dtr_redistribute and its forms on a
 *                                     context
 *   autograd/autograd.h          backward plans of redistributions
 *   grad/grad.h                  gradient reduction: DDP hooks, FSDP/HSDP reducer, fused
 *   grad/param_group.h           parameter groups: foreach reduce-scatter / all-gather, HSDP pipeline
 *   autograd/tape.h              from_local / to_local backward, the tape
 * Beside it, each included where it is used: the backends (backends/: mpi/dtr_mpi.h,
 * gloo/dtr_gloo.h, nccl/dtr_nccl.h, and cuda/dtr_cuda.h, the CUDA memory space) and
 * checkpoint/dtr_checkpoint.h (safetensors checkpoints). docs/design.md has the module
 * table; tests/tools/module_map.py checks this list, that table, the layout rules and the
 * libraries' Bazel targets against each other.
 * Installed (tools/install.sh), these are one file, <dtr/dtr.h>, beside <dtr/dtr_mpi.h>,
 * <dtr/dtr_gloo.h>, <dtr/dtr_cuda.h>, <dtr/dtr_nccl.h> and <dtr/dtr_checkpoint.h>.
 *
 * Conventions: a function that can fail returns dtr_status_t (DTR_OK, or a negative code
 * with one line in dtr_last_error() naming the function, the argument and the value). A
 * pure call (parsing, specs, layouts, planning, the tape's bookkeeping) writes none of its
 * outputs on failure. A collective call moves data as it runs, so on failure its output
 * buffers hold unspecified contents; what it reads only (dtr_redistribute's `in`) is never
 * written, and each declaration says which buffers it may have touched. Queries that cannot
 * fail return their value (a name, a size, a flag; NULL, -1 or false for a NULL handle or an
 * index out of range, as each says); destroy functions accept NULL. The caller owns what it
 * passes in, and what a *_create hands out until the matching *_destroy.
 */
#ifndef DTR_H
#define DTR_H

#include <stddef.h>

#include "autograd/autograd.h"
#include "grad/grad.h"
#include "grad/param_group.h"
#include "autograd/tape.h"
#include "core/status.h"
#include "core/version.h"
#include "dtensor/dtensor.h"
#include "placement/placement.h"
#include "redistribute/executor/executor.h"
#include "redistribute/planner/planner.h"
#include "runtime/runtime.h"
#include "dtr_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the library's identity -------------------------------------------------------- */

/*
 * Checks that a caller compiled against headers of version header_code, in which the
 * public structs had the sizes sizes[0..count) (in the order of DTR_ABI_STRUCTS), can use
 * the loaded library. DTR_OK when the major versions agree (and, while the major version is
 * 0, the minor versions too), the library is at least as new as the headers and every
 * listed size matches; otherwise DTR_ERR_MISMATCH with a detail naming the versions or the
 * struct whose size differs. DTR_ERR_INVALID_ARGUMENT for sizes NULL, count < 1 or a
 * negative header_code. Call it through dtr_check_headers.
 */
DTR_API dtr_status_t dtr_abi_check(int header_code, const size_t *sizes, int count);

/* X(type) for every public struct whose layout a caller's compiler bakes in (it allocates,
 * embeds or reads it), in the order dtr_abi_check compares them. Append only: an entry
 * never moves or goes while its major version lasts. The MPI backend's own struct is in
 * dtr_mpi.h (DTR_MPI_ABI_STRUCTS, dtr_mpi_check_headers). */
#define DTR_ABI_STRUCTS(X)                                                                  \
    X(dtr_placement_t) X(dtr_dtype_info_t) X(dtr_spec_t) X(dtr_layout_t)                    \
    X(dtr_step_kind_info_t) X(dtr_cost_model_t) X(dtr_step_t) X(dtr_plan_t)                 \
    X(dtr_plan_options_t) X(dtr_backend_req_t) X(dtr_backend_ops_t) X(dtr_memory_ops_t)     \
    X(dtr_compress_wrapper_t) X(dtr_grad_factors_t) X(dtr_reducer_desc_t)                   \
    X(dtr_fused_entry_t) X(dtr_batch_item_t) X(dtr_batch_round_t) X(dtr_batch_plan_t)       \
    X(dtr_span_t) X(dtr_spans_op_t) X(dtr_param_desc_t) X(dtr_param_group_desc_t)         \
    X(dtr_cross_options_t) X(dtr_cross_figures_t) X(dtr_backend_info_t)                    \
    X(dtr_change_options_t)
#define DTR__ABI_SIZEOF(type) sizeof(type),

/* dtr_abi_check for the headers this translation unit includes: call it once at start-up,
 * before any other dtr call, to refuse a library the program was not built for rather than
 * corrupt memory. */
static inline dtr_status_t dtr_check_headers(void) {
    const size_t sizes[] = {DTR_ABI_STRUCTS(DTR__ABI_SIZEOF)};
    return dtr_abi_check(DTR_VERSION_CODE, sizes, (int)(sizeof sizes / sizeof sizes[0]));
}

#ifdef __cplusplus
}
#endif

#endif
