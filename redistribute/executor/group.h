/*
 * What the executor offers the layers above it (autograd/) beyond its public API: the group
 * collectives with the argument agreement apart, and the check that a context works on host
 * memory.
 */
#ifndef DTR_REDISTRIBUTE_EXECUTOR_GROUP_H
#define DTR_REDISTRIBUTE_EXECUTOR_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "redistribute/executor/executor.h"

/*
 * Group collectives for a layer above the executor that checks its arguments once over a
 * wider group (autograd/grad.c): dtr__group_agree runs the agreement of dtr_all_reduce over
 * the group of `dims` on `hash` (what the members must share) and this rank's verdict
 * (`local`, with `msg` for its error); dtr__group_reduce is dtr_all_reduce (scatter false) or
 * dtr_reduce_scatter, with the agreement left out when `agree` is false.
 */
dtr_status_t dtr__group_agree(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                              const char *func, uint64_t hash, dtr_status_t local,
                              const char *msg);
dtr_status_t dtr__group_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                               const void *send, void *recv, int64_t count, dtr_dtype_t dtype,
                               dtr_reduce_op_t op, bool scatter, bool agree);

/* INVALID_ARGUMENT naming func unless ctx works on host memory (the gradient hooks and the
 * tape convert, scale and stage gradients on the host). */
dtr_status_t dtr__host_only(const dtr_context_t *ctx, const char *func);

#endif
