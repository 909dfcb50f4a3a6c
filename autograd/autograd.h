/*
 * Autograd rules for redistributions: the backward plan of a redistribution.
 *
 * The backward of a redistribution src -> dst takes the gradient, which arrives in some
 * placements `grad` (usually dst's), back to src's placements, with two exceptions that
 * PyTorch DTensor also makes:
 *   - where src is Partial and the gradient is not, the target is Replicate: a Partial
 *     gradient would only force a reduction later (the gradient of a sum is the same
 *     everywhere);
 *   - R -> P in a backward plan is a pass-through: the values are kept, not divided by the
 *     mesh dim's size (dtr_plan_options_t.backward).
 * A backward plan is an ordinary dtr_plan_t: it can be printed, costed, cached and run by
 * the executor.
 */
#ifndef DTR_AUTOGRAD_AUTOGRAD_H
#define DTR_AUTOGRAD_AUTOGRAD_H

#include "core/api.h"
#include "core/status.h"
#include "placement/placement.h"
#include "redistribute/planner/planner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The placements the gradient is redistributed to: src's, with Partial replaced by
 * Replicate wherever grad is not Partial. n placements (1..DTR_MAX_MESH_DIMS) each; out
 * written only on success. */
DTR_API dtr_status_t dtr_backward_placements(const dtr_placement_t *src,
                                             const dtr_placement_t *grad, int n,
                                             dtr_placement_t *out);

/*
 * The backward plan of a forward redistribution from `forward_src`: the gradient `grad`
 * (its spec: the mesh and shape of forward_src, its own placements and dtype) goes to
 * dtr_backward_placements(forward_src, grad), in forward_src's dtype: a gradient of another
 * dtype (the forward cast) is cast to it first and reduced in it, as PyTorch's backward
 * does without a backward_dtype. opts as for dtr_plan_create (NULL: optimal);
 * its `backward` field is set for you. The target spec is the plan's dst (it borrows the
 * mesh). *out written only on success.
 */
DTR_API dtr_status_t dtr_plan_backward(const dtr_spec_t *forward_src, const dtr_spec_t *grad,
                                       const dtr_plan_options_t *opts, dtr_plan_t *out);

/*
 * As dtr_plan_backward, with PyTorch's backward_dtype: the gradient is cast to
 * backward_dtype first, its steps (the backward collectives) run in it, and the result is
 * cast to forward_src's dtype last (dtr_plan_create_in). backward_dtype equal to
 * forward_src's dtype is dtr_plan_backward. The gradient's, backward_dtype and forward_src's
 * dtypes are float (f32 f64 f16 bf16) or complex (c64 c128), one family, where they differ.
 */
DTR_API dtr_status_t dtr_plan_backward_in(const dtr_spec_t *forward_src, const dtr_spec_t *grad,
                                          dtr_dtype_t backward_dtype,
                                          const dtr_plan_options_t *opts, dtr_plan_t *out);

/*
 * Gradient reduction's pre/post divide factors for n workers (docs/design.md): f = 1; while
 * n % f == 0 and n / f > f: f *= 2. pre = f, post = n / f, so pre * post = n and neither
 * factor alone overflows fp16 as dividing by n after the sum could. n = 12 gives 4 and 3;
 * n = 6 gives 4 and 1.5 (post may be fractional). n >= 1; outputs written on success.
 */
DTR_API dtr_status_t dtr_divide_factors(int64_t n, double *pre, double *post);

#ifdef __cplusplus
}
#endif

#endif
