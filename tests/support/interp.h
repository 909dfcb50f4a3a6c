/*
 * A reference interpreter for plans (a test tool, not a backend): N virtual ranks hold
 * plain double buffers; each step is applied with the plain meaning of its collective
 * (concatenate along a dim in coordinate order, reduce elementwise, take a chunk, ...),
 * without trusting the planner's shapes or byte counts; the result is compared with the
 * target layout of a known tensor.
 *
 * The tensor: T[e] = K * (1 + row-major index of e), K = 2^8 * 3^4, so that dividing by any
 * product of up to four mesh sizes 1..4 stays exact in double. Partial sources get
 * rank-dependent contributions whose reduction is T exactly, in any order, where the Partial
 * ops commute (one op, or sum with avg). Where they do not ([P(sum),P(max)]), contributions
 * are small integers and the tensor is their reduction innermost mesh dim first
 * (docs/semantics.md), computed exactly as the plans reduce (members in coordinate order,
 * avg divided once per mesh dim): exact for mesh dims of 1, 2 and 4 ranks.
 */
#ifndef DTR_TESTS_INTERP_H
#define DTR_TESTS_INTERP_H

#include <stddef.h>
#include <stdint.h>

#include "dtr.h"

typedef struct interp interp_t;

/* Virtual ranks holding src's layout of T (contributions for Partial dims; seed picks
 * them). NULL on allocation failure. */
interp_t *interp_create(const dtr_spec_t *src, uint64_t seed);
void interp_destroy(interp_t *in);

/* Applies every step; 0, or -1 with the reason in err (a step whose inputs do not fit it). */
int interp_run(interp_t *in, const dtr_plan_t *plan, char *err, size_t len);

/* Compares with dst's layout of T: shapes, then values (Partial dims of dst reduced first,
 * innermost mesh dim first).
 * 0, or -1 with the first mismatch in err. */
int interp_check(const interp_t *in, const dtr_spec_t *dst, char *err, size_t len);

/* Runs plan on a fresh interpreter of src's layout (seed as for interp_create) and compares
 * with dst's: 0 when the target results; -1 when a step does not fit its inputs, -2 when the
 * result differs (or allocation failed), with the reason in err. */
int interp_plan(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_plan_t *plan,
                uint64_t seed, char *err, size_t len);

#endif
