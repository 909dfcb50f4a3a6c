/*
 * A deterministic test tensor for checking redistributions end to end (what `dtr run
 * --verify` and the multi-rank tests use; frameworks can use it to check their own wiring).
 *
 * Element e (row-major index in the global tensor) has the value t(e) = 8 + e mod 13, small
 * integers every dtype holds exactly. Storage-only dtypes (fp8) hold the byte
 * 0x11 + (7e mod 91) instead and are compared bytewise. A source with Partial mesh dims
 * (all with one reduce op) holds rank-dependent contributions whose reduction is t(e), exact
 * in every dtype and in any order of reduction: sum splits t into 0/1 parts and a remainder;
 * avg gives every rank t; max and min give t to one rank and smaller (larger) values to the
 * rest; product gives t to one rank, 2 and 0.5 (floats) or -1 and -1 (signed integers) to
 * two others and 1 elsewhere.
 *
 * The check knows what each rank of the target must hold: contributions reduced over the
 * Partial mesh dims the target no longer has, kept on those it still has, and divided by
 * the mesh dim's size where the target turns Replicate into P(sum). That division is the only
 * inexact step (t/3 in binary floating point); there the check allows a relative error of
 * (contributions + divisions + 1) units in the last place of the dtype, and is exact
 * everywhere else.
 */
#ifndef DTR_TOOLS_PATTERN_H
#define DTR_TOOLS_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills this rank's block of spec (bytes must be its exact size). DTR_ERR_NOT_IN_MESH for a
 * rank outside the mesh; DTR_ERR_UNSUPPORTED for Partial dims with different ops. */
dtr_status_t dtr_pattern_fill(const dtr_spec_t *spec, int rank, void *buf,
                                      size_t bytes);

typedef struct {
    int64_t checked;    /* elements compared */
    int64_t mismatches; /* elements that differ */
    int64_t first;      /* local index of the first mismatch, -1 if none */
    int64_t first_global[DTR_MAX_TENSOR_DIMS]; /* its global coordinates */
    double got, want;   /* its values (the raw byte for storage-only dtypes) */
    double tolerance;   /* relative tolerance used; 0 means exact */
} dtr_pattern_report_t;

/* Checks this rank's block of dst after redistributing src's pattern. A mismatch is not an
 * error: the call succeeds and the report counts it. */
dtr_status_t dtr_pattern_check(const dtr_spec_t *src, const dtr_spec_t *dst, int rank,
                                       const void *buf, size_t bytes,
                                       dtr_pattern_report_t *report);

#ifdef __cplusplus
}
#endif

#endif
