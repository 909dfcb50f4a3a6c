/*
 * from_local / to_local backward, and a small tape that records a forward chain of
 * redistributions and runs their backward plans in reverse order.
 *
 * The tape is a chain: each recorded operation consumes the previous one's output. It
 * starts with dtr_tape_from_local (local tensors become a DTensor of a spec) or with a first
 * redistribution, and may end with dtr_tape_to_local. dtr_tape_backward takes the gradient
 * of the chain's output and returns the gradient of its input, with its spec:
 *   - to_local's backward: no communication; the local gradient is a DTensor with the
 *     grad_placements given at record time, or the forward DTensor's placements (PyTorch's
 *     to_local(grad_placements=...));
 *   - a redistribution's backward: its backward plan (dtr_plan_backward), run by the
 *     executor;
 *   - from_local's backward: the gradient goes to the forward placements by the same rule
 *     (Partial becomes Replicate unless the gradient is Partial there), then it is local.
 *
 * The tape records specs only; the context given to dtr_tape_backward says where the
 * gradients live: on one with a memory space, grad and out are of the space and the
 * intermediate gradients are allocated there for the call.
 */
#ifndef DTR_AUTOGRAD_TAPE_H
#define DTR_AUTOGRAD_TAPE_H

#include <stddef.h>

#include "autograd/autograd.h"
#include "core/api.h"
#include "core/status.h"
#include "redistribute/executor/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* to_local's backward: the gradient spec of the local gradient of `forward` (no data
 * moves). grad_placements NULL: forward's placements. *out written on success; it borrows
 * forward's mesh. */
DTR_API dtr_status_t dtr_to_local_backward(const dtr_spec_t *forward,
                                           const dtr_placement_t *grad_placements,
                                           dtr_spec_t *out);

/* from_local's backward: the plan that takes a gradient `grad` of the DTensor made by
 * from_local(forward) to the local gradient's placements (the backward rule). The same as
 * dtr_plan_backward(forward, grad, opts, out). */
DTR_API dtr_status_t dtr_from_local_backward(const dtr_spec_t *forward, const dtr_spec_t *grad,
                                             const dtr_plan_options_t *opts, dtr_plan_t *out);

typedef struct dtr_tape dtr_tape_t;

/* An empty tape; opts (NULL: optimal) plan the backward redistributions. */
DTR_API dtr_status_t dtr_tape_create(const dtr_plan_options_t *opts, dtr_tape_t **out);
DTR_API void dtr_tape_destroy(dtr_tape_t *tape);

/* Number of recorded operations. */
DTR_API int dtr_tape_length(const dtr_tape_t *tape);

/* Records from_local: local tensors become the DTensor `spec` (must be the first record;
 * the spec's mesh must outlive the tape). */
DTR_API dtr_status_t dtr_tape_from_local(dtr_tape_t *tape, const dtr_spec_t *spec);

/* Runs plan forward (dtr_redistribute) and records it. Its source must be the previous
 * record's output (same mesh, shape, placements, dtype). */
DTR_API dtr_status_t dtr_tape_redistribute(dtr_tape_t *tape, dtr_context_t *ctx,
                                           const dtr_plan_t *plan, const void *in,
                                           size_t in_bytes, void *out, size_t out_bytes);

/* Records to_local of the previous record's output; grad_placements (one per mesh dim) or
 * NULL. Nothing can be recorded after it. */
DTR_API dtr_status_t dtr_tape_to_local(dtr_tape_t *tape, const dtr_placement_t *grad_placements);

/*
 * Runs the backward of the chain, collective over the mesh like dtr_redistribute: `grad`
 * is this rank's block of the gradient of the chain's output (grad_bytes its exact size, in
 * the output's placements, or to_local's gradient placements); `out` receives the input's
 * gradient, whose spec goes to *out_spec (may be NULL). grad is never written. The tape can
 * run backward again.
 */
DTR_API dtr_status_t dtr_tape_backward(dtr_tape_t *tape, dtr_context_t *ctx, const void *grad,
                                       size_t grad_bytes, void *out, size_t out_bytes,
                                       dtr_spec_t *out_spec);

#ifdef __cplusplus
}
#endif

#endif
