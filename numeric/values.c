/* Element values of every dtype: half-type conversions, loads and stores as doubles, and
 * the divide, convert and combine loops built on them. Pure functions with no state, so the
 * tools that fill and check test data (pattern) link this file alone. */
#include <stdbool.h>
#include <string.h>

#include "numeric/numeric.h"

#include "numeric/bf16_avx2.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define DTR__X86 1
#endif

/* ---- element values ---------------------------------------------------------------- */

float dtr__bf16_to_f32(uint16_t h) { return dtr__bits_f32((uint32_t)h << 16); }

uint16_t dtr__f32_to_bf16(float f) {
    uint32_t u = dtr__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float dtr__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return dtr__bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return dtr__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t dtr__f32_to_f16(float f) {
    uint32_t u = dtr__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00; /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: infinity */
    if (a < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
        /* The value in units of 2^-24, rounded to nearest even: add the magic 0.5 (2^-1) so
         * the FPU rounds at the right bit. */
        float v = dtr__bits_f32(a) + 0.5f;
        return sign | (uint16_t)(dtr__f32_bits(v) - dtr__f32_bits(0.5f));
    }
    uint32_t mant_odd = (a >> 13) & 1;
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + mant_odd;
    return sign | (uint16_t)(a >> 13);
}

double dtr__load(dtr_dtype_t dtype, const void *buf, int64_t k) {
    switch (dtype) {
    case DTR_F32: return ((const float *)buf)[k];
    case DTR_F64: return ((const double *)buf)[k];
    case DTR_F16: return dtr__f16_to_f32(((const uint16_t *)buf)[k]);
    case DTR_BF16: return dtr__bf16_to_f32(((const uint16_t *)buf)[k]);
    case DTR_I32: return ((const int32_t *)buf)[k];
    case DTR_I64: return (double)((const int64_t *)buf)[k];
    default: return ((const uint8_t *)buf)[k]; /* u8; fp8 as its raw byte */
    }
}

void dtr__store(dtr_dtype_t dtype, void *buf, int64_t k, double v) {
    switch (dtype) {
    case DTR_F32: ((float *)buf)[k] = (float)v; break;
    case DTR_F64: ((double *)buf)[k] = v; break;
    case DTR_F16: ((uint16_t *)buf)[k] = dtr__f32_to_f16((float)v); break;
    case DTR_BF16: ((uint16_t *)buf)[k] = dtr__f32_to_bf16((float)v); break;
    case DTR_I32: ((int32_t *)buf)[k] = (int32_t)v; break;
    case DTR_I64: ((int64_t *)buf)[k] = (int64_t)v; break;
    default: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    }
}

int dtr__simd_level(void) {
#ifdef DTR__X86
    static int level = -1; /* -1: not yet asked */
    int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        __builtin_cpu_init();
        bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
        v = __builtin_cpu_supports("avx2") ? (f16c ? 2 : 1) : 0;
        __atomic_store_n(&level, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

#ifdef DTR__X86
static bool dtr__cast_avx2(void) { return dtr__simd_level() >= 1; }

/* f16 with F16C, the same bits as dtr__f16_to_f32 and dtr__f32_to_f16 (which this file's
 * tests check against the compiler's _Float16 for every value): the hardware widens and
 * rounds to nearest even; only NaNs need mending, since F16C keeps their payloads (and
 * quiets a signalling one when widening) where the scalar functions give sign | 0x7e00
 * narrowing and keep the payload as it is widening. */
__attribute__((target("avx2,f16c"))) static __m256 dtr__f16_widen8(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    __m256i w = _mm256_cvtepu16_epi32(h);
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7fff)),
                                        _mm256_set1_epi32(0x7c00));
    __m256i keep = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
        _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                        _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13)));
    __m256i f = _mm256_castps_si256(_mm256_cvtph_ps(h));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(f, keep, is_nan));
}

__attribute__((target("avx2,f16c"))) static __m128i dtr__f16_round8(__m256 f) {
    __m256i u = _mm256_castps_si256(f);
    __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* both sides are below 2^31, so the signed compare is the unsigned one */
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                        _mm256_set1_epi32(0x7f800000));
    __m256i nan = _mm256_or_si256(
        _mm256_srli_epi32(_mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)), 16),
        _mm256_set1_epi32(0x7e00));
    __m128i mask = _mm_packs_epi32(_mm256_castsi256_si128(is_nan),
                                   _mm256_extracti128_si256(is_nan, 1));
    __m128i with = _mm_packus_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    return _mm_blendv_epi8(h, with, mask);
}

__attribute__((target("avx2,f16c"))) static int64_t dtr__f16_divide_f16c(const uint16_t *src,
                                                                         uint16_t *dst,
                                                                         int64_t count, float d) {
    const __m256 by = _mm256_set1_ps(d);
    int64_t k = 0;
    for (; k + 8 <= count; k += 8)
        _mm_storeu_si128((__m128i *)(dst + k),
                         dtr__f16_round8(_mm256_div_ps(dtr__f16_widen8(src + k), by)));
    return k;
}

__attribute__((target("avx2,f16c"))) static int64_t dtr__f32_to_f16_f16c(const float *src,
                                                                         uint16_t *dst,
                                                                         int64_t count) {
    int64_t k = 0;
    for (; k + 8 <= count; k += 8)
        _mm_storeu_si128((__m128i *)(dst + k), dtr__f16_round8(_mm256_loadu_ps(src + k)));
    return k;
}

__attribute__((target("avx2,f16c"))) static int64_t dtr__f16_to_f32_f16c(const uint16_t *src,
                                                                         float *dst,
                                                                         int64_t count) {
    int64_t k = 0;
    for (; k + 8 <= count; k += 8) _mm256_storeu_ps(dst + k, dtr__f16_widen8(src + k));
    return k;
}

/* bf16 elements src[k] / d into dst[k] (dst may be src), sixteen a step: widened, divided in
 * f32 and rounded once, the same bits as the scalar loops below. Returns the elements done. */
__attribute__((target("avx2"))) static int64_t dtr__bf16_divide_avx2(const uint16_t *src,
                                                                     uint16_t *dst,
                                                                     int64_t count, float d) {
    const __m256 by = _mm256_set1_ps(d);
    int64_t k = 0;
    for (; k + 16 <= count; k += 16) {
        __m256 a = _mm256_div_ps(_mm256_castsi256_ps(dtr__bf16_widen8(src + k)), by);
        __m256 b = _mm256_div_ps(_mm256_castsi256_ps(dtr__bf16_widen8(src + k + 8)), by);
        dtr__bf16_store16(dst + k, dtr__bf16_round8(_mm256_castps_si256(a)),
                          dtr__bf16_round8(_mm256_castps_si256(b)));
    }
    return k;
}
#endif

/* The leading half (bf16 or f16) elements the vector loops above divide where this CPU has
 * them; the scalar loops do the rest. */
static int64_t dtr__half_divide_fast(dtr_dtype_t dtype, const uint16_t *src, uint16_t *dst,
                                     int64_t count, float d) {
#ifdef DTR__X86
    int path = dtr__simd_level();
    if (dtype == DTR_BF16 && path >= 1) return dtr__bf16_divide_avx2(src, dst, count, d);
    if (dtype == DTR_F16 && path == 2) return dtr__f16_divide_f16c(src, dst, count, d);
#endif
    (void)dtype, (void)src, (void)dst, (void)count, (void)d;
    return 0;
}

void dtr__divide(dtr_dtype_t dtype, const void *src, void *dst, int64_t count, int64_t n) {
    int64_t k;
    dtype = dtr__parts(dtype, &count);
    switch (dtype) {
    case DTR_F32: {
        const float *s = src;
        float *d = dst, fn = (float)n;
        for (k = 0; k < count; k++) d[k] = s[k] / fn;
        break;
    }
    case DTR_F64: {
        const double *s = src;
        double *d = dst, dn = (double)n;
        for (k = 0; k < count; k++) d[k] = s[k] / dn;
        break;
    }
    case DTR_F16:
        for (k = dtr__half_divide_fast(dtype, src, dst, count, (float)n); k < count; k++)
            ((uint16_t *)dst)[k] =
                dtr__f32_to_f16(dtr__f16_to_f32(((const uint16_t *)src)[k]) / (float)n);
        break;
    case DTR_BF16:
        for (k = dtr__half_divide_fast(dtype, src, dst, count, (float)n); k < count; k++)
            ((uint16_t *)dst)[k] =
                dtr__f32_to_bf16(dtr__bf16_to_f32(((const uint16_t *)src)[k]) / (float)n);
        break;
    case DTR_I32:
        for (k = 0; k < count; k++) ((int32_t *)dst)[k] = ((const int32_t *)src)[k] / (int32_t)n;
        break;
    case DTR_I64:
        for (k = 0; k < count; k++) ((int64_t *)dst)[k] = ((const int64_t *)src)[k] / n;
        break;
    default:
        for (k = 0; k < count; k++) ((uint8_t *)dst)[k] = (uint8_t)(((const uint8_t *)src)[k] / n);
        break;
    }
}

void dtr__divide_by(dtr_dtype_t dtype, void *buf, int64_t count, double d) {
    int64_t k;
    dtype = dtr__parts(dtype, &count);
    float fd = (float)d;
    uint32_t bits;
    memcpy(&bits, &fd, sizeof bits);
    /* a power of two whose inverse is a normal f32: no mantissa, exponent field 2..253 */
    bool pow2 = (bits & 0x807fffffu) == 0 && (bits >> 23) >= 2 && (bits >> 23) <= 253;
    switch (dtype) {
    case DTR_F32:
        /* By a power of two the product with its (exact) inverse is the same correctly
         * rounded x / d, bit for bit, at the multiplier's rate: the gradient reductions' post
         * divide runs on every chunk while it is in cache, where the divider's throughput
         * showed (10% of DDP's all-reduce over span lists, perf). */
        if (pow2) {
            float inv = 1.0f / fd;
            for (k = 0; k < count; k++) ((float *)buf)[k] *= inv;
            break;
        }
        for (k = 0; k < count; k++) ((float *)buf)[k] /= fd;
        break;
    case DTR_F64:
        for (k = 0; k < count; k++) ((double *)buf)[k] /= d;
        break;
    case DTR_F16:
        for (k = dtr__half_divide_fast(dtype, buf, buf, count, fd); k < count; k++)
            ((uint16_t *)buf)[k] = dtr__f32_to_f16(dtr__f16_to_f32(((uint16_t *)buf)[k]) / fd);
        break;
    case DTR_BF16:
        for (k = dtr__half_divide_fast(dtype, buf, buf, count, fd); k < count; k++)
            ((uint16_t *)buf)[k] = dtr__f32_to_bf16(dtr__bf16_to_f32(((uint16_t *)buf)[k]) / fd);
        break;
    default:
        for (k = 0; k < count; k++) dtr__store(dtype, buf, k, dtr__load(dtype, buf, k) / d);
        break;
    }
}

/* f32 <-> bf16, the casts of every gradient reduced in bf16: scalar loops written for the
 * vectoriser (SSE2 in the generic build), and AVX2 versions picked at run time that give
 * the same bits (round to nearest even, the same quiet NaN). */
static void dtr__f32_to_bf16_n(const void *src, uint16_t *o, int64_t count) {
    const unsigned char *s8 = src;
    for (int64_t k = 0; k < count; k++) {
        uint32_t u;
        memcpy(&u, s8 + 4 * k, sizeof u);
        uint32_t nan = (u >> 16) | 0x40, r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
        o[k] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
    }
}

static void dtr__bf16_to_f32_n(const uint16_t *h, float *o, int64_t count) {
    for (int64_t k = 0; k < count; k++) o[k] = dtr__bf16_to_f32(h[k]);
}

#ifdef DTR__X86
__attribute__((target("avx2"))) static void dtr__f32_to_bf16_avx2(const void *src, uint16_t *o,
                                                                  int64_t count) {
    const char *s = src;
    int64_t k = 0;
    for (; k + 16 <= count; k += 16) {
        __m256i a = dtr__bf16_round8(_mm256_loadu_si256((const __m256i *)(s + 4 * k)));
        __m256i b = dtr__bf16_round8(_mm256_loadu_si256((const __m256i *)(s + 4 * k + 32)));
        dtr__bf16_store16(o + k, a, b);
    }
    dtr__f32_to_bf16_n(s + 4 * k, o + k, count - k);
}

__attribute__((target("avx2"))) static void dtr__bf16_to_f32_avx2(const uint16_t *h, float *o,
                                                                  int64_t count) {
    int64_t k = 0;
    for (; k + 8 <= count; k += 8) {
        _mm256_storeu_si256((__m256i *)(o + k), dtr__bf16_widen8(h + k));
    }
    dtr__bf16_to_f32_n(h + k, o + k, count - k);
}

#endif

void dtr__convert(dtr_dtype_t src_dtype, const void *src, dtr_dtype_t dst_dtype, void *dst,
                  int64_t count) {
    int64_t k;
    if (src_dtype == dst_dtype) {
        if (src != dst) memmove(dst, src, (size_t)count * (size_t)dtr_dtype_info(src_dtype)->size);
        return;
    }
    if (dtr_dtype_info(src_dtype)->is_complex && dtr_dtype_info(dst_dtype)->is_complex) {
        int64_t parts = count;
        src_dtype = dtr__parts(src_dtype, &parts);
        dst_dtype = dtr__parts(dst_dtype, &count);
    }
    if (src_dtype == DTR_F32 && dst_dtype == DTR_F16) {
        k = 0;
#ifdef DTR__X86
        if (dtr__simd_level() == 2) k = dtr__f32_to_f16_f16c(src, dst, count);
#endif
        for (; k < count; k++) ((uint16_t *)dst)[k] = dtr__f32_to_f16(((const float *)src)[k]);
    } else if (src_dtype == DTR_F32 && dst_dtype == DTR_BF16) {
#ifdef DTR__X86
        if (dtr__cast_avx2()) {
            dtr__f32_to_bf16_avx2(src, dst, count);
            return;
        }
#endif
        dtr__f32_to_bf16_n(src, dst, count);
    } else if (src_dtype == DTR_F16 && dst_dtype == DTR_F32) {
        k = 0;
#ifdef DTR__X86
        if (dtr__simd_level() == 2) k = dtr__f16_to_f32_f16c(src, dst, count);
#endif
        for (; k < count; k++) ((float *)dst)[k] = dtr__f16_to_f32(((const uint16_t *)src)[k]);
    } else if (src_dtype == DTR_BF16 && dst_dtype == DTR_F32) {
#ifdef DTR__X86
        if (dtr__cast_avx2()) {
            dtr__bf16_to_f32_avx2(src, dst, count);
            return;
        }
#endif
        dtr__bf16_to_f32_n(src, dst, count);
    } else {
        for (k = 0; k < count; k++) dtr__store(dst_dtype, dst, k, dtr__load(src_dtype, src, k));
    }
}

#define DTR__COMBINE(a, b, op)                                                            \
    ((op) == DTR_REDUCE_MAX   ? ((a) > (b) ? (a) : (b))                                   \
     : (op) == DTR_REDUCE_MIN ? ((a) < (b) ? (a) : (b))                                   \
     : (op) == DTR_REDUCE_PRODUCT ? (a) * (b)                                             \
                                  : (a) + (b))

void dtr__combine(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *in, void *inout,
                  int64_t count) {
    int64_t k;
    dtype = dtr__parts(dtype, &count);
    switch (dtype) {
    case DTR_F16: {
        const uint16_t *a = in;
        uint16_t *b = inout;
        for (k = 0; k < count; k++) {
            float x = dtr__f16_to_f32(a[k]), y = dtr__f16_to_f32(b[k]);
            b[k] = dtr__f32_to_f16(DTR__COMBINE(x, y, op));
        }
        break;
    }
    case DTR_BF16: {
        const uint16_t *a = in;
        uint16_t *b = inout;
        for (k = 0; k < count; k++) {
            float x = dtr__bf16_to_f32(a[k]), y = dtr__bf16_to_f32(b[k]);
            b[k] = dtr__f32_to_bf16(DTR__COMBINE(x, y, op));
        }
        break;
    }
    case DTR_F32:
        for (k = 0; k < count; k++) {
            float x = ((const float *)in)[k], y = ((float *)inout)[k];
            ((float *)inout)[k] = DTR__COMBINE(x, y, op);
        }
        break;
    case DTR_F64:
        for (k = 0; k < count; k++) {
            double x = ((const double *)in)[k], y = ((double *)inout)[k];
            ((double *)inout)[k] = DTR__COMBINE(x, y, op);
        }
        break;
    case DTR_I32:
        for (k = 0; k < count; k++) {
            int32_t x = ((const int32_t *)in)[k], y = ((int32_t *)inout)[k];
            ((int32_t *)inout)[k] = (int32_t)DTR__COMBINE((int64_t)x, (int64_t)y, op);
        }
        break;
    case DTR_I64:
        for (k = 0; k < count; k++) {
            int64_t x = ((const int64_t *)in)[k], y = ((int64_t *)inout)[k], r;
            if (op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN)
                r = DTR__COMBINE(x, y, op);
            else /* wrap on overflow, as MPI and NCCL do, without signed overflow in C */
                r = (int64_t)(op == DTR_REDUCE_PRODUCT ? (uint64_t)x * (uint64_t)y
                                                       : (uint64_t)x + (uint64_t)y);
            ((int64_t *)inout)[k] = r;
        }
        break;
    default:
        for (k = 0; k < count; k++) {
            unsigned x = ((const uint8_t *)in)[k], y = ((uint8_t *)inout)[k];
            ((uint8_t *)inout)[k] = (uint8_t)DTR__COMBINE(x, y, op);
        }
        break;
    }
}
