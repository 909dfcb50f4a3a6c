/*
 * The numeric kernels: element values of every dtype (half and bfloat16 conversions, loads
 * and stores as doubles), casts, divides and the reductions that the runtime, the executor,
 * the backends, checkpoint loads, autograd and the test fills all compute with. Pure functions
 * with no state (values.c, reduce.c), so pattern links them beside libdtr.so, which
 * keeps them hidden. Not installed.
 */
#ifndef DTR_NUMERIC_NUMERIC_H
#define DTR_NUMERIC_NUMERIC_H

#include <stdbool.h>
#include <stdint.h>

#include "dtensor/dtensor.h"

/* ---- element values (values.c) ---------------------------------------------------------
 * Half types are converted with round-to-nearest-even, NaN kept NaN; fp8 types are storage
 * only and have no value helpers. */
float dtr__f16_to_f32(uint16_t h);
uint16_t dtr__f32_to_f16(float f);
float dtr__bf16_to_f32(uint16_t h);
uint16_t dtr__f32_to_bf16(float f);

/* A complex dtype as its parts (c64: f32, c128: f64) with *count doubled; any other dtype
 * as it is. Sum, avg and divides of complex values are those of their parts, so every loop
 * below (and every engine) reduces complex buffers as twice as many real ones. */
static inline dtr_dtype_t dtr__parts(dtr_dtype_t dtype, int64_t *count) {
    if (dtype != DTR_C64 && dtype != DTR_C128) return dtype;
    *count *= 2;
    return dtype == DTR_C64 ? DTR_F32 : DTR_F64;
}

/* Can a redistribution cast a into b? Float to float or complex to complex; not integers
 * (their casts truncate and wrap), not the storage-only fp8 types, not complex to real. */
static inline bool dtr__castable(dtr_dtype_t a, dtr_dtype_t b) {
    const dtr_dtype_info_t *x = dtr_dtype_info(a), *y = dtr_dtype_info(b);
    return x != NULL && y != NULL &&
           (a == b || (x->is_float && y->is_float && !x->storage_only && !y->storage_only &&
                       x->is_complex == y->is_complex));
}

/* Element k of a buffer of dtype as a double (integers and halves exactly), and back
 * (rounded to the dtype; integers are truncated toward zero and wrapped as C casts do). */
double dtr__load(dtr_dtype_t dtype, const void *buf, int64_t k); /* not complex: see parts */
/* exported for libdtr_nccl.so (NCCL's pre-multiply scalar in the collective's dtype) */
DTR_INTERNAL_EXPORT void dtr__store(dtr_dtype_t dtype, void *buf, int64_t k, double v);

/* dst[k] = src[k] / n for count elements, in the dtype's own arithmetic (halves through
 * f32; integers truncate, as C division does). src may equal dst. */
void dtr__divide(dtr_dtype_t dtype, const void *src, void *dst, int64_t count, int64_t n);

/* buf[k] /= d for count elements of a float dtype (d may be fractional: 1.5), in the
 * dtype's own arithmetic as dtr__divide: f32 and halves divide in f32 and round once. */
void dtr__divide_by(dtr_dtype_t dtype, void *buf, int64_t count, double d);

/* dst[k] = src[k] converted between dtypes (float dtypes; halves rounded to nearest even). src and dst must not overlap, unless the
 * dtypes are equal. */
void dtr__convert(dtr_dtype_t src_dtype, const void *src, dtr_dtype_t dst_dtype, void *dst,
                  int64_t count);

/* inout[k] = inout[k] op in[k], the way a backend without native half types reduces:
 * halves combine in f32 and round once per combination. */
void dtr__combine(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *in, void *inout,
                  int64_t count);

/*
 * out[k] = ((in[0][k] op in[1][k]) op in[2][k]) ... op in[n-1][k] for count elements, in
 * exactly that order whatever the CPU (reduce.c): the kernel of the shared-memory
 * reductions. Halves are widened to f32, combined there and rounded once; integers wrap.
 * AVG is not an op here (callers sum, then divide). out may be one of the inputs.
 */
DTR_INTERNAL_EXPORT void dtr__reduce_n(dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       const void *const *in, int n,
                                       void *out, int64_t count);

/* The vector forms of the element loops (values.c, reduce.c) this CPU runs, asked once:
 * 0 none (or not x86-64), 1 AVX2, 2 AVX2 and F16C. */
int dtr__simd_level(void);

/* The loops dtr__reduce_n can run on this CPU: 0 the generic build, 1 also AVX2 (with
 * F16C), 2 also AVX-512 (F, BW, VL). It runs the best one, up to what dtr__reduce_simd
 * allows. */
int dtr__reduce_levels(void);

/* Tests and benchmarks: the most dtr__reduce_n may use (0 generic, 1 AVX2, 2 AVX-512);
 * a negative level returns to the CPU's best. */
void dtr__reduce_simd(int most);

#endif
