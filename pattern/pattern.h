/*
 * Test data for checking redistributions end to end (what `dtr run --verify` and the
 * multi-rank tests use; frameworks can use it to check their own wiring). Three fills:
 *
 * The pattern (DTR_FILL_PATTERN). Element e (row-major index in the global tensor) has the
 * value t(e) = 8 + e mod 13, small integers every dtype holds exactly. Storage-only dtypes
 * (fp8) hold the byte 0x11 + (7e mod 91) instead and are compared bytewise. A source with
 * Partial mesh dims (all with one reduce op) holds rank-dependent contributions whose
 * reduction is t(e), exact in every dtype and in any order of reduction: sum splits t into
 * 0/1 parts and a remainder; avg gives every rank t; max and min give t to one rank and
 * smaller (larger) values to the rest; product gives t to one rank, 2 and 0.5 (floats) or
 * -1 and -1 (signed integers) to two others and 1 elsewhere. It catches a misplaced or
 * missing element, not a wrong order or precision of a reduction.
 *
 * Random values (DTR_FILL_RANDOM, a seed). Every contribution of every element is drawn
 * from (seed, e, contribution index) by a counter-based generator, so any rank can compute
 * any other rank's values and the check needs no communication. Floats: +-(1 + f) 2^E with
 * E uniform in [Emax - 12, Emax], Emax = 6 or less where n contributions would otherwise
 * overflow the dtype (f16: 13 - ceil(log2 n)); products draw magnitudes 2^s, |s| <=
 * min(1, 8/n), so a product of n stays within 2^-8..2^8. Integers: sums and averages draw
 * from [-M/n, M/n] ([0, M/n] for u8, M the dtype's largest value) so that no sum overflows;
 * max and min from the whole range; products magnitudes up to the n-th root of M. fp8:
 * random bytes. Values are rounded to the dtype once, when stored.
 *
 * Given values (DTR_FILL_GIVEN): every rank's source block as files (dtr_fill_load), for
 * checking a run on a user's own data.
 *
 * The check computes what each rank of the target must hold: contributions reduced over
 * the Partial mesh dims the target no longer has, kept on those it still has, and divided
 * by the mesh dim's size where the target turns Replicate into P(sum); avg divides by the
 * number of contributions. The reference reduces floats in long double (64-bit mantissa)
 * and integers exactly, wrapped at the dtype's width as the dtype's
 * own arithmetic does (averages truncate). Integers, max, min and moves are then compared
 * exactly. Other float results are compared with a tolerance derived from the dtype and
 * the number of contributions:
 *
 *     |got - want| <= (n + d + 1) u scale + (n + d + 1) tiny
 *
 * u the dtype's unit roundoff (f64 2^-53, f32 2^-24, f16 2^-11, bf16 2^-8), n the
 * contributions reduced, d the divisions (one per R -> P(sum) mesh dim, one for avg's
 * divide), tiny the dtype's smallest subnormal; scale is
 * the sum of the contributions' magnitudes (divided as want is) for sum and avg, |want|
 * for product and divisions. That is the classic bound for summing n values in any order
 * and any tree, (n - 1) u sum|x|, with one rounding more for each divide and one to spare:
 * it holds for the shared-memory kernels (halves widened to f32 and rounded once) as for a
 * backend that rounds halves at every step. The pattern's values are exact, so its check
 * is exact except after a division, where it allows (n + d + 1) ulp relative.
 *
 * A target in another dtype (a cast plan, float to float or complex to complex): each
 * contribution is first rounded to the target's dtype, as the executor casts it before any
 * step; u and tiny are then the target's. Shard -> P(sum) targets hold zeros (exactly +0)
 * outside the elements they keep (docs/semantics.md).
 */
#ifndef DTR_PATTERN_H
#define DTR_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the values come from. */
typedef enum {
    DTR_FILL_PATTERN = 0, /* the exact pattern */
    DTR_FILL_RANDOM,      /* random values from seed */
    DTR_FILL_GIVEN        /* every rank's block, loaded by dtr_fill_load */
} dtr_fill_kind_t;

typedef struct dtr_fill_blocks dtr_fill_blocks_t;

typedef struct {
    dtr_fill_kind_t kind;
    uint64_t seed;                  /* DTR_FILL_RANDOM */
    const dtr_fill_blocks_t *given; /* DTR_FILL_GIVEN */
} dtr_fill_t;

/* Fills this rank's block of spec (bytes must be its exact size). fill NULL is the pattern.
 * DTR_ERR_NOT_IN_MESH for a rank outside the mesh; DTR_ERR_UNSUPPORTED for Partial dims
 * with different ops. */
dtr_status_t dtr_fill(const dtr_spec_t *spec, const dtr_fill_t *fill, int rank, void *buf,
                      size_t bytes);

typedef struct {
    int64_t checked;    /* values compared (a complex element's two parts count apart) */
    int64_t mismatches; /* values out of tolerance (or different, where exact) */
    int64_t first;      /* local index of the first mismatch, -1 if none */
    int64_t first_global[DTR_MAX_TENSOR_DIMS]; /* its global coordinates */
    double got, want;   /* its values (the raw byte for storage-only dtypes) */
    double tolerance;   /* allowed |got - want| / scale, (n + d + 1) u; 0 means exact */
    double unit;        /* u of the dtype (0 for integers and storage-only dtypes) */
    double worst;       /* the largest |got - want| / scale seen, mismatches included */
    bool sum_scale;     /* scale is the sum of the contributions' magnitudes (else |want|) */
} dtr_pattern_report_t;

/* Checks this rank's block of dst after redistributing src filled with fill (NULL: the
 * pattern). A mismatch is not an error: the call succeeds and the report counts it. */
dtr_status_t dtr_fill_check(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_fill_t *fill,
                            int rank, const void *buf, size_t bytes,
                            dtr_pattern_report_t *report);

/* As dtr_fill_check, for a plan whose steps run in via (dtr_plan_create_in's op_dtype):
 * each source value is rounded to via, then to dst's dtype, and the tolerance is the
 * coarser dtype's. */
dtr_status_t dtr_fill_check_via(const dtr_spec_t *src, const dtr_spec_t *dst, dtr_dtype_t via,
                                const dtr_fill_t *fill, int rank, const void *buf, size_t bytes,
                                dtr_pattern_report_t *report);

/* The pattern's fill and check (fill NULL). */
dtr_status_t dtr_pattern_fill(const dtr_spec_t *spec, int rank, void *buf, size_t bytes);
dtr_status_t dtr_pattern_check(const dtr_spec_t *src, const dtr_spec_t *dst, int rank,
                               const void *buf, size_t bytes, dtr_pattern_report_t *report);

/* Block-scaled fp8 (dtr_change_options_t.block_scale): checks this rank's blocks of a
 * change's destination, q (dst, an fp8 dtype) and s (scales: dtr_change_scales's spec),
 * after src (no Partial dims) filled with fill (NULL: the pattern; random; not given blocks).
 * The reference computes each block's amax from all its elements, the scale amax / 448 (or
 * 57344) in f32, and each element's code by searching every fp8 code for the nearest to x /
 * scale (ties to the even code, saturating; x itself where the scale is 0). Exact: each
 * report counts the bytes (weights) and scales (bit for bit) that differ. */
dtr_status_t dtr_fill_check_fp8(const dtr_spec_t *src, const dtr_spec_t *dst,
                                const dtr_spec_t *scales, int64_t block, const dtr_fill_t *fill,
                                int rank, const void *q, size_t q_bytes, const void *s,
                                size_t s_bytes, dtr_pattern_report_t *weights,
                                dtr_pattern_report_t *scale_report);
/* The reference's rounding of one value: the nearest code of fp8 by search. */
uint8_t dtr_fp8_nearest(dtr_dtype_t fp8, float v);

/* Loads every block of spec from DIR/rank<R>.<suffix> (raw bytes in native order, as
 * `dtr run --dump` writes them), R each mesh rank. Errors name the file: missing, or not
 * the block's size; DTR_ERR_INVALID_ARGUMENT where two ranks hold different bytes for one
 * element and contribution (replicas must agree). Holds the whole tensor once per Partial
 * contribution: contributions x global bytes. */
dtr_status_t dtr_fill_load(const dtr_spec_t *spec, const char *dir, const char *suffix,
                           dtr_fill_blocks_t **out);
void dtr_fill_blocks_destroy(dtr_fill_blocks_t *blocks);

/* Reads this rank's block alone from DIR/rank<rank>.<suffix> (bytes must match the file's
 * size). */
dtr_status_t dtr_fill_read(const char *dir, const char *suffix, int rank, void *buf,
                           size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
