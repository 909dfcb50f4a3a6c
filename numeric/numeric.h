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
#include <string.h>

#include "dtensor/dtensor.h"

/* An f32's bits and back (values.c, fp8.c). */
static inline uint32_t dtr__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float dtr__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

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

/* What the refusal of a cast a -> b adds: where b is fp8 and a a real float, the way there. */
static inline const char *dtr__cast_hint(dtr_dtype_t a, dtr_dtype_t b) {
    const dtr_dtype_info_t *x = dtr_dtype_info(a);
    bool f8 = b == DTR_F8E4M3 || b == DTR_F8E5M2;
    return f8 && x != NULL && x->is_float && !x->is_complex && !x->storage_only
               ? "; to fp8 with one scale per block, block-scaled (dtr_change_options_t."
                 "block_scale, dtr --block-scale, Python block_scale=)"
               : "";
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

/* ---- block-scaled fp8 (fp8.c) ------------------------------------------------------------
 * Round to nearest even, saturating at the largest finite value (infinities too); NaN stays
 * NaN (f8e4m3 0x7f, f8e5m2 0x7e, the sign kept). fp8: DTR_F8E4M3 or DTR_F8E5M2. */
uint8_t dtr__f32_to_f8(dtr_dtype_t fp8, float v);
float dtr__f8_to_f32(dtr_dtype_t fp8, uint8_t q);
float dtr__f8_max(dtr_dtype_t fp8); /* 448, 57344 */

/* The scales' shape of a tensor in blocks of `block`: its last two dims (the one dim of a
 * 1-D tensor) divided by block, rounded up; the leading dims kept (a block of one there). */
static inline void dtr__scale_shape(int ndim, const int64_t *shape, int64_t block,
                                    int64_t *out) {
    for (int k = 0; k < ndim; k++)
        out[k] = k < ndim - 2 ? shape[k] : (shape[k] + block - 1) / block;
}

/* amax_bits[s] = max(amax_bits[s], |x| as f32 bits) over the box's elements x (local, of a
 * real float dtype: f32, f64, f16, bf16) in block s (the scales' row-major index). The bits
 * of non-negative floats order as their values and a NaN above infinity, so an integer MAX
 * over the ranks holding parts of a block gives the block's amax. shape: the whole
 * tensor's. */
void dtr__block_amax(dtr_dtype_t dtype, const void *local, const dtr_layout_t *box,
                     const int64_t *shape, int64_t block, int32_t *amax_bits);
/* scales[s] = amax(s) / dtr__f8_max(fp8), in f32. */
void dtr__block_scales(dtr_dtype_t fp8, const int32_t *amax_bits, int64_t count, float *scales);
/* q[k] = fp8(f32(x_k) / scales[x_k's block]) over the box (a block of scale 0: fp8(x_k)). */
void dtr__block_quantize(dtr_dtype_t dtype, const void *local, const dtr_layout_t *box,
                         const int64_t *shape, int64_t block, dtr_dtype_t fp8,
                         const float *scales, uint8_t *q);
/* The widest vector loops the block loops may take: 0 none, 1 AVX2, 2 AVX-512 (the CPU's
 * best is the default, as is any value above it); for tests that check each. Not thread
 * safe: set it before the loops run. */
void dtr__fp8_simd_cap(int cap);

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
