/* What autograd's files share (grad.c defines these). */
#ifndef DTR_AUTOGRAD_INTERNAL_H
#define DTR_AUTOGRAD_INTERNAL_H

#include <stdint.h>

#include "core/status.h"
#include "dtensor/dtensor.h"
#include "redistribute/executor/executor.h"

/* INVALID_ARGUMENT from func naming `name` unless t is f32, f64, f16 or bf16. */
dtr_status_t dtr__float_arg(dtr_dtype_t t, const char *func, const char *name);

/* UNSUPPORTED from func naming desc->factor when ctx has a memory space and pre or post is
 * not a whole number (a space's divide takes an integer: memory.h). */
dtr_status_t dtr__space_factors(const dtr_context_t *ctx, double factor, double pre,
                                double post, const char *func);

/* bytes rounded up to DTR_FUSED_ALIGN: the slices of a fused buffer. */
int64_t dtr__fused_align(int64_t bytes);

#endif
