/*
 * dtr__reduce_n: the n-way reduction loop of the shared-memory reductions (see
 * numeric/numeric.h). Its order is fixed: out = ((in[0] op in[1]) op in[2]) ... op in[n-1],
 * element by element, so that a result never depends on which member's piece arrived first.
 * Halves are widened to f32, combined there in that order and rounded once at the end.
 *
 * Each input is read once, in tiles of DTR__TILE elements held in an f32 (or the dtype's)
 * accumulator that stays in L1. The loops are written for the vectoriser (this library is
 * built with -O3); on a CPU with AVX2 and F16C the same loops run compiled for it, f16
 * converts with F16C and bf16 has its own AVX2 loop (the vectoriser left its rounding
 * scalar: 2.0 against 5.1 G elements a second for four inputs in L2 on this machine's EPYC),
 * and on a CPU with AVX-512 (F, BW, VL) every loop runs sixteen f32 lanes wide (bf16 9.1
 * against 4.8, f16 11.0 against 5.7 G elements a second in L2 on this machine's EPYC: the
 * private path reduces ring chunks that sit in L2), picked once at run time. Every build
 * gives the same bits: no contraction into FMA (-std=c11 keeps -ffp-contract=off) and the
 * same rounding (the software rounding of bf16, not AVX512_BF16's conversion, which
 * flushes subnormals).
 */
#include <stdbool.h>
#include <string.h>

#include "numeric/bf16_avx2.h"
#include "numeric/numeric.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DTR__X86 1
#endif

#define DTR__TILE 1024

#define DTR__OP(a, b, op)                                                                  \
    ((op) == DTR_REDUCE_MAX   ? ((a) > (b) ? (a) : (b))                                     \
     : (op) == DTR_REDUCE_MIN ? ((a) < (b) ? (a) : (b))                                     \
     : (op) == DTR_REDUCE_PRODUCT ? (a) * (b)                                               \
                                  : (a) + (b))

/* acc[i] = acc[i] op x[i] over a tile, with the op's branch outside the loop. */
#define DTR__TILE_STEP(acc, x, len, op, T)                                                 \
    do {                                                                                   \
        switch (op) {                                                                      \
        case DTR_REDUCE_MAX:                                                               \
            for (int64_t i = 0; i < (len); i++) {                                          \
                T dtr__x = (T)(x)[i];                                                           \
                (acc)[i] = (acc)[i] > dtr__x ? (acc)[i] : dtr__x;                                    \
            }                                                                              \
            break;                                                                         \
        case DTR_REDUCE_MIN:                                                               \
            for (int64_t i = 0; i < (len); i++) {                                          \
                T dtr__x = (T)(x)[i];                                                           \
                (acc)[i] = (acc)[i] < dtr__x ? (acc)[i] : dtr__x;                                    \
            }                                                                              \
            break;                                                                         \
        case DTR_REDUCE_PRODUCT:                                                           \
            for (int64_t i = 0; i < (len); i++) (acc)[i] = (T)((acc)[i] * (T)(x)[i]);      \
            break;                                                                         \
        default:                                                                           \
            for (int64_t i = 0; i < (len); i++) (acc)[i] = (T)((acc)[i] + (T)(x)[i]);      \
            break;                                                                         \
        }                                                                                  \
    } while (0)

/*
 * A dtype whose elements combine in their own type T (integers through the unsigned type U,
 * which wraps as MPI and NCCL do, without signed overflow in C; max and min compare as T;
 * floats pass T as U).
 */
#define DTR__REDUCE_PLAIN(name, T, U)                                                       \
    static inline __attribute__((always_inline)) void name(                                 \
        dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {      \
        for (int64_t base = 0; base < count; base += DTR__TILE) {                          \
            int64_t len = count - base < DTR__TILE ? count - base : DTR__TILE;             \
            T acc[DTR__TILE];                                                              \
            memcpy(acc, (const T *)in[0] + base, (size_t)len * sizeof(T));                 \
            for (int j = 1; j < n; j++) {                                                  \
                const T *x = (const T *)in[j] + base;                                      \
                if (op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN) {                        \
                    DTR__TILE_STEP(acc, x, len, op, T);                                    \
                } else {                                                                   \
                    U *a = (U *)acc;                                                       \
                    const U *y = (const U *)x;                                             \
                    DTR__TILE_STEP(a, y, len, op, U);                                      \
                }                                                                          \
            }                                                                              \
            memcpy((T *)out + base, acc, (size_t)len * sizeof(T));                         \
        }                                                                                  \
    }

DTR__REDUCE_PLAIN(dtr__reduce_f32, float, float)
DTR__REDUCE_PLAIN(dtr__reduce_f64, double, double)
DTR__REDUCE_PLAIN(dtr__reduce_i32, int32_t, uint32_t)
DTR__REDUCE_PLAIN(dtr__reduce_i64, int64_t, uint64_t)
DTR__REDUCE_PLAIN(dtr__reduce_u8, uint8_t, uint8_t)

/* bf16: the high half of an f32, so widening is a shift and rounding integer arithmetic,
 * both of which vectorise; the same rounding as dtr__f32_to_bf16 (NaN stays a quiet NaN). */
static inline __attribute__((always_inline)) void dtr__reduce_bf16(
    dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {
    for (int64_t base = 0; base < count; base += DTR__TILE) {
        int64_t len = count - base < DTR__TILE ? count - base : DTR__TILE;
        uint32_t bits[DTR__TILE];
        float acc[DTR__TILE];
        const uint16_t *x0 = (const uint16_t *)in[0] + base;
        for (int64_t i = 0; i < len; i++) bits[i] = (uint32_t)x0[i] << 16;
        memcpy(acc, bits, (size_t)len * sizeof(float));
        for (int j = 1; j < n; j++) {
            const uint16_t *x = (const uint16_t *)in[j] + base;
            float v[DTR__TILE];
            for (int64_t i = 0; i < len; i++) bits[i] = (uint32_t)x[i] << 16;
            memcpy(v, bits, (size_t)len * sizeof(float));
            DTR__TILE_STEP(acc, v, len, op, float);
        }
        memcpy(bits, acc, (size_t)len * sizeof(float));
        uint16_t *o = (uint16_t *)out + base;
        for (int64_t i = 0; i < len; i++) {
            uint32_t u = bits[i];
            uint32_t nan = (u >> 16) | 0x40, r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
            o[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
        }
    }
}

/* f16 without F16C: the library's own conversions, one element at a time. */
static void dtr__reduce_f16_soft(dtr_reduce_op_t op, const void *const *in, int n, void *out,
                                 int64_t count) {
    for (int64_t base = 0; base < count; base += DTR__TILE) {
        int64_t len = count - base < DTR__TILE ? count - base : DTR__TILE;
        float acc[DTR__TILE];
        const uint16_t *x0 = (const uint16_t *)in[0] + base;
        for (int64_t i = 0; i < len; i++) acc[i] = dtr__f16_to_f32(x0[i]);
        for (int j = 1; j < n; j++) {
            const uint16_t *x = (const uint16_t *)in[j] + base;
            float v[DTR__TILE];
            for (int64_t i = 0; i < len; i++) v[i] = dtr__f16_to_f32(x[i]);
            DTR__TILE_STEP(acc, v, len, op, float);
        }
        uint16_t *o = (uint16_t *)out + base;
        for (int64_t i = 0; i < len; i++) o[i] = dtr__f32_to_f16(acc[i]);
    }
}

static inline __attribute__((always_inline)) void dtr__reduce_body(
    dtr_dtype_t dtype, dtr_reduce_op_t op, const void *const *in, int n, void *out,
    int64_t count) {
    switch (dtype) {
    case DTR_F32: dtr__reduce_f32(op, in, n, out, count); break;
    case DTR_F64: dtr__reduce_f64(op, in, n, out, count); break;
    case DTR_BF16: dtr__reduce_bf16(op, in, n, out, count); break;
    case DTR_I32: dtr__reduce_i32(op, in, n, out, count); break;
    case DTR_I64: dtr__reduce_i64(op, in, n, out, count); break;
    default: dtr__reduce_u8(op, in, n, out, count); break;
    }
}

static void dtr__reduce_generic(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *const *in,
                                int n, void *out, int64_t count) {
    if (dtype == DTR_F16)
        dtr__reduce_f16_soft(op, in, n, out, count);
    else
        dtr__reduce_body(dtype, op, in, n, out, count);
}

#ifdef DTR__X86
/* acc op v for eight f32 lanes, as DTR__OP (maxps(a, b) is a > b ? a : b, minps alike). */
__attribute__((target("avx2"))) static inline __m256 dtr__op8(dtr_reduce_op_t op, __m256 acc,
                                                              __m256 v) {
    switch (op) {
    case DTR_REDUCE_MAX: return _mm256_max_ps(acc, v);
    case DTR_REDUCE_MIN: return _mm256_min_ps(acc, v);
    case DTR_REDUCE_PRODUCT: return _mm256_mul_ps(acc, v);
    default: return _mm256_add_ps(acc, v);
    }
}

/* f16 with F16C: 8 elements a step, widened and rounded by the hardware (round to nearest
 * even, as dtr__f32_to_f16; a NaN keeps more of its payload, still a NaN). */
__attribute__((target("avx2,f16c"))) static void dtr__reduce_f16_f16c(
    dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {
    int64_t k = 0;
    for (; k + 8 <= count; k += 8) {
        __m256 acc = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)in[0] + k)));
        for (int j = 1; j < n; j++) {
            __m256 v =
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)in[j] + k)));
            acc = dtr__op8(op, acc, v);
        }
        _mm_storeu_si128((__m128i *)((uint16_t *)out + k),
                         _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (k < count) {
        const void *rest[n];
        for (int j = 0; j < n; j++) rest[j] = (const uint16_t *)in[j] + k;
        dtr__reduce_f16_soft(op, rest, n, (uint16_t *)out + k, count - k);
    }
}

/* bf16 with AVX2: 16 elements a step, widened by a shift, combined in f32 in member order
 * and rounded once (bf16_avx2.h), the same bits as dtr__reduce_bf16, about three times its
 * speed (the vectoriser leaves that loop's rounding scalar). Every input of a step is read
 * before its output is written, so out may be in[0]. */
__attribute__((target("avx2"))) static void dtr__reduce_bf16_avx2(
    dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {
    int64_t k = 0;
    for (; k + 16 <= count; k += 16) {
        const uint16_t *x0 = (const uint16_t *)in[0] + k;
        __m256 a = _mm256_castsi256_ps(dtr__bf16_widen8(x0));
        __m256 b = _mm256_castsi256_ps(dtr__bf16_widen8(x0 + 8));
        for (int j = 1; j < n; j++) {
            const uint16_t *x = (const uint16_t *)in[j] + k;
            a = dtr__op8(op, a, _mm256_castsi256_ps(dtr__bf16_widen8(x)));
            b = dtr__op8(op, b, _mm256_castsi256_ps(dtr__bf16_widen8(x + 8)));
        }
        dtr__bf16_store16((uint16_t *)out + k, dtr__bf16_round8(_mm256_castps_si256(a)),
                          dtr__bf16_round8(_mm256_castps_si256(b)));
    }
    if (k < count) {
        const void *rest[n];
        for (int j = 0; j < n; j++) rest[j] = (const uint16_t *)in[j] + k;
        dtr__reduce_bf16(op, rest, n, (uint16_t *)out + k, count - k);
    }
}

__attribute__((target("avx2,f16c"))) static void dtr__reduce_avx2(
    dtr_dtype_t dtype, dtr_reduce_op_t op, const void *const *in, int n, void *out,
    int64_t count) {
    if (dtype == DTR_F16)
        dtr__reduce_f16_f16c(op, in, n, out, count);
    else if (dtype == DTR_BF16)
        dtr__reduce_bf16_avx2(op, in, n, out, count);
    else
        dtr__reduce_body(dtype, op, in, n, out, count);
}

/* AVX-512 F, BW and VL (the zmm state enabled by the OS: libgcc's check), with AVX2 and
 * F16C, which the 512-bit loops' tails and the f16 conversions use. GCC is told to prefer
 * 512-bit vectors for the generic loops there (clang takes no such target option). */
#if defined(__clang__)
#define DTR__AVX512 "avx512f,avx512bw,avx512vl,avx2,f16c"
#else
#define DTR__AVX512 "avx512f,avx512bw,avx512vl,avx2,f16c,prefer-vector-width=512"
#endif

__attribute__((target(DTR__AVX512))) static inline __m512
dtr__op16(dtr_reduce_op_t op, __m512 acc, __m512 v) {
    switch (op) {
    case DTR_REDUCE_MAX: return _mm512_max_ps(acc, v);
    case DTR_REDUCE_MIN: return _mm512_min_ps(acc, v);
    case DTR_REDUCE_PRODUCT: return _mm512_mul_ps(acc, v);
    default: return _mm512_add_ps(acc, v);
    }
}

/* Sixteen bf16 at p as sixteen f32. */
__attribute__((target(DTR__AVX512))) static inline __m512
dtr__bf16_widen16(const uint16_t *p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* Sixteen f32 rounded to bf16 as dtr__bf16_round8 does, stored at o. */
__attribute__((target(DTR__AVX512))) static inline void
dtr__bf16_store_round16(uint16_t *o, __m512 f) {
    __m512i u = _mm512_castps_si512(f);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                         _mm512_and_si512(hi, _mm512_set1_epi32(1))),
        16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    _mm256_storeu_si256((__m256i *)o, _mm512_cvtepi32_epi16(r));
}

/* bf16, 32 elements a step: dtr__reduce_bf16_avx2's order and rounding, twice as wide. */
__attribute__((target(DTR__AVX512))) static void dtr__reduce_bf16_avx512(
    dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {
    int64_t k = 0;
    for (; k + 32 <= count; k += 32) {
        const uint16_t *x0 = (const uint16_t *)in[0] + k;
        __m512 a = dtr__bf16_widen16(x0), b = dtr__bf16_widen16(x0 + 16);
        for (int j = 1; j < n; j++) {
            const uint16_t *x = (const uint16_t *)in[j] + k;
            a = dtr__op16(op, a, dtr__bf16_widen16(x));
            b = dtr__op16(op, b, dtr__bf16_widen16(x + 16));
        }
        dtr__bf16_store_round16((uint16_t *)out + k, a);
        dtr__bf16_store_round16((uint16_t *)out + k + 16, b);
    }
    if (k < count) {
        const void *rest[n];
        for (int j = 0; j < n; j++) rest[j] = (const uint16_t *)in[j] + k;
        dtr__reduce_bf16_avx2(op, rest, n, (uint16_t *)out + k, count - k);
    }
}

/* f16, 16 elements a step: dtr__reduce_f16_f16c's conversions, twice as wide. */
__attribute__((target(DTR__AVX512))) static void
dtr__reduce_f16_avx512(dtr_reduce_op_t op, const void *const *in, int n, void *out,
                       int64_t count) {
    int64_t k = 0;
    for (; k + 16 <= count; k += 16) {
        __m512 acc =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)in[0] + k)));
        for (int j = 1; j < n; j++) {
            __m512 v = _mm512_cvtph_ps(
                _mm256_loadu_si256((const __m256i *)((const uint16_t *)in[j] + k)));
            acc = dtr__op16(op, acc, v);
        }
        _mm256_storeu_si256((__m256i *)((uint16_t *)out + k),
                            _mm512_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (k < count) {
        const void *rest[n];
        for (int j = 0; j < n; j++) rest[j] = (const uint16_t *)in[j] + k;
        dtr__reduce_f16_f16c(op, rest, n, (uint16_t *)out + k, count - k);
    }
}

/* f32, 32 elements a step in two registers: the generic loop's order and ops, without its
 * accumulator tile's extra passes through L1. */
__attribute__((target(DTR__AVX512))) static void dtr__reduce_f32_avx512(
    dtr_reduce_op_t op, const void *const *in, int n, void *out, int64_t count) {
    int64_t k = 0;
    for (; k + 32 <= count; k += 32) {
        const float *x0 = (const float *)in[0] + k;
        __m512 a = _mm512_loadu_ps(x0), b = _mm512_loadu_ps(x0 + 16);
        for (int j = 1; j < n; j++) {
            const float *x = (const float *)in[j] + k;
            a = dtr__op16(op, a, _mm512_loadu_ps(x));
            b = dtr__op16(op, b, _mm512_loadu_ps(x + 16));
        }
        _mm512_storeu_ps((float *)out + k, a);
        _mm512_storeu_ps((float *)out + k + 16, b);
    }
    if (k < count) {
        const void *rest[n];
        for (int j = 0; j < n; j++) rest[j] = (const float *)in[j] + k;
        dtr__reduce_f32(op, rest, n, (float *)out + k, count - k);
    }
}

/* The other dtypes: the generic loops, vectorised sixteen f32 lanes wide. */
__attribute__((target(DTR__AVX512))) static void
dtr__reduce_avx512(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *const *in, int n,
                   void *out, int64_t count) {
    if (dtype == DTR_F16)
        dtr__reduce_f16_avx512(op, in, n, out, count);
    else if (dtype == DTR_BF16)
        dtr__reduce_bf16_avx512(op, in, n, out, count);
    else if (dtype == DTR_F32)
        dtr__reduce_f32_avx512(op, in, n, out, count);
    else
        dtr__reduce_body(dtype, op, in, n, out, count);
}

static int dtr__reduce_cpu(void) {
    if (dtr__simd_level() < 2) return 0;
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl");
    return avx512 ? 2 : 1;
}
#endif

/* The CPU's best level (-1: not yet asked) and the most the tests allow. */
static int dtr__reduce_best = -1;
static int dtr__reduce_cap = 2;

int dtr__reduce_levels(void) {
    int best = __atomic_load_n(&dtr__reduce_best, __ATOMIC_RELAXED);
    if (best < 0) {
#ifdef DTR__X86
        best = dtr__reduce_cpu();
#else
        best = 0;
#endif
        __atomic_store_n(&dtr__reduce_best, best, __ATOMIC_RELAXED);
    }
    return best;
}

void dtr__reduce_simd(int most) {
    __atomic_store_n(&dtr__reduce_cap, most < 0 || most > 2 ? 2 : most, __ATOMIC_RELAXED);
}

void dtr__reduce_n(dtr_dtype_t dtype, dtr_reduce_op_t op, const void *const *in, int n,
                   void *out, int64_t count) {
    if (n <= 0 || count <= 0) return;
    dtype = dtr__parts(dtype, &count);
#ifdef DTR__X86
    int path = dtr__reduce_levels(), cap = __atomic_load_n(&dtr__reduce_cap, __ATOMIC_RELAXED);
    if (path > cap) path = cap;
    if (path == 2) {
        dtr__reduce_avx512(dtype, op, in, n, out, count);
        return;
    }
    if (path == 1) {
        dtr__reduce_avx2(dtype, op, in, n, out, count);
        return;
    }
#endif
    dtr__reduce_generic(dtype, op, in, n, out, count);
}
