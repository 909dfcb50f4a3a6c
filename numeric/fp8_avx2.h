/*
 * Block-scaled fp8's loops with AVX2 and AVX-512 (numeric/fp8.c includes this once): the
 * amax and the quantization of one run of f32 or bf16 elements, 8 or 16 at a time, straight
 * from the caller's block (no f32 copy in between). The same arithmetic as fp8.c's scalar dtr__to_f8_as, lane
 * for lane: the magic add below the smallest normal, the rounding at the last kept mantissa
 * bit above it, the saturation and the NaN code chosen by masks; so the codes are the same
 * bits (tests/numeric/test_fp8.c compares both loops' codes with the scalar conversion on
 * every run length and alignment it draws). Each returns how many leading elements it did
 * (a multiple of 8 or 16); the caller does the rest.
 */
#ifndef DTR_NUMERIC_FP8_AVX2_H
#define DTR_NUMERIC_FP8_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "numeric/numeric.h"

#define DTR__FP8_AVX2 __attribute__((target("avx2")))

/* 8 elements from element k of src as f32 bits: bf16 widened, f32 as they are. */
DTR__FP8_AVX2 static inline __attribute__((always_inline)) __m256i dtr__fp8_load8(
    const void *src, int64_t k, bool bf16) {
    if (bf16)
        return _mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + k))),
            16);
    return _mm256_loadu_si256((const __m256i *)((const float *)src + k));
}

/* The largest |x| of n elements as f32 bits (signed max: the sign is cleared; NaN above
 * infinity, as the scalar loop orders them), folded into most. */
DTR__FP8_AVX2 static inline __attribute__((always_inline)) int64_t dtr__fp8_amax8_as(
    const void *src, int64_t first, int64_t len, int32_t *most, bool bf16) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_set1_epi32(*most);
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
        m = _mm256_max_epi32(m, _mm256_and_si256(dtr__fp8_load8(src, first + i, bf16), abs));
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    *most = _mm_cvtsi128_si32(h);
    return i;
}

/* fp8 codes of 8 f32 lanes (dtr__to_f8_as's steps), in the low byte of each lane. */
DTR__FP8_AVX2 static inline __attribute__((always_inline)) __m256i dtr__fp8_codes8(
    __m256 v, int man, int bias, int max_code, int nan_code) {
    const int drop = 23 - man;
    __m256i u = _mm256_castps_si256(v), a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
    __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32((1 - bias - man + 23 + 127) << 23));
    __m256i sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(
            _mm256_castsi256_ps(_mm256_and_si256(a, _mm256_set1_epi32(0x3fffffff))), magic)),
        _mm256_castps_si256(magic));
    __m256i r = _mm256_add_epi32(
        _mm256_add_epi32(a, _mm256_set1_epi32((1 << (drop - 1)) - 1)),
        _mm256_and_si256(_mm256_srli_epi32(a, drop), _mm256_set1_epi32(1)));
    /* (where a is a normal, normal is positive: the signed min saturates as the unsigned
     * compare does; elsewhere the subnormal is kept) */
    __m256i normal = _mm256_min_epi32(
        _mm256_sub_epi32(_mm256_srli_epi32(r, drop), _mm256_set1_epi32((127 - bias) << man)),
        _mm256_set1_epi32(max_code));
    __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32((1 - bias + 127) << 23), a);
    __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    __m256i code = _mm256_blendv_epi8(normal, sub, is_sub);
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(nan_code), nan);
    return _mm256_or_si256(code, sign);
}

DTR__FP8_AVX2 static inline __attribute__((always_inline)) int64_t dtr__fp8_quantize8_as(
    const void *src, int64_t first, int64_t len, float scale, uint8_t *q, bool bf16, int man,
    int bias, int max_code, int nan_code) {
    const __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_castsi256_ps(dtr__fp8_load8(src, first + i, bf16)), s);
        __m256i c = dtr__fp8_codes8(v, man, bias, max_code, nan_code);
        __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packus_epi16(w, w));
    }
    return i;
}

/* The same with AVX-512 (16 lanes; the choices in mask registers, the codes narrowed by
 * vpmovdb): about 2x the AVX2 loop's rate where the CPU has it. */
#define DTR__FP8_AVX512 __attribute__((target("avx512f")))

DTR__FP8_AVX512 static inline __attribute__((always_inline)) __m512i dtr__fp8_load16(
    const void *src, int64_t k, bool bf16) {
    if (bf16)
        return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                     (const __m256i *)((const uint16_t *)src + k))),
                                 16);
    return _mm512_loadu_si512((const float *)src + k);
}

DTR__FP8_AVX512 static inline __attribute__((always_inline)) int64_t dtr__fp8_quantize16_as(
    const void *src, int64_t first, int64_t len, float scale, uint8_t *q, bool bf16, int man,
    int bias, int max_code, int nan_code) {
    const int drop = 23 - man;
    const __m512 s = _mm512_set1_ps(scale);
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32((1 - bias - man + 23 + 127) << 23));
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m512i u = _mm512_castps_si512(
            _mm512_div_ps(_mm512_castsi512_ps(dtr__fp8_load16(src, first + i, bf16)), s));
        __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
        __m512i sub = _mm512_sub_epi32(
            _mm512_castps_si512(_mm512_add_ps(
                _mm512_castsi512_ps(_mm512_and_si512(a, _mm512_set1_epi32(0x3fffffff))), magic)),
            _mm512_castps_si512(magic));
        __m512i r = _mm512_add_epi32(
            _mm512_add_epi32(a, _mm512_set1_epi32((1 << (drop - 1)) - 1)),
            _mm512_and_si512(_mm512_srli_epi32(a, drop), _mm512_set1_epi32(1)));
        __m512i code = _mm512_min_epi32(
            _mm512_sub_epi32(_mm512_srli_epi32(r, drop), _mm512_set1_epi32((127 - bias) << man)),
            _mm512_set1_epi32(max_code));
        code = _mm512_mask_blend_epi32(
            _mm512_cmpgt_epi32_mask(_mm512_set1_epi32((1 - bias + 127) << 23), a), code, sub);
        code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000)),
                                       code, _mm512_set1_epi32(nan_code));
        code = _mm512_or_si512(
            code, _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80)));
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(code));
    }
    return i;
}

/* The loops (f32 or bf16 into e4m3 or e5m2, AVX2 and AVX-512) and the two amax loops, out
 * of line. */
typedef int64_t (*dtr__fp8_quantize8_fn)(const void *, int64_t, int64_t, float, uint8_t *);
#define DTR__FP8_Q8(name, bf16, man, bias, max_code, nan_code)                                \
    DTR__FP8_AVX2 static int64_t name(const void *src, int64_t first, int64_t len,          \
                                      float scale, uint8_t *q) {                             \
        return dtr__fp8_quantize8_as(src, first, len, scale, q, bf16, man, bias, max_code,  \
                                     nan_code);                                              \
    }
DTR__FP8_Q8(dtr__fp8_q8_f32_e4m3, false, 3, 7, 0x7e, 0x7f)
DTR__FP8_Q8(dtr__fp8_q8_bf16_e4m3, true, 3, 7, 0x7e, 0x7f)
DTR__FP8_Q8(dtr__fp8_q8_f32_e5m2, false, 2, 15, 0x7b, 0x7e)
DTR__FP8_Q8(dtr__fp8_q8_bf16_e5m2, true, 2, 15, 0x7b, 0x7e)
#undef DTR__FP8_Q8
#define DTR__FP8_Q16(name, bf16, man, bias, max_code, nan_code)                               \
    DTR__FP8_AVX512 static int64_t name(const void *src, int64_t first, int64_t len,        \
                                        float scale, uint8_t *q) {                           \
        return dtr__fp8_quantize16_as(src, first, len, scale, q, bf16, man, bias, max_code, \
                                      nan_code);                                             \
    }
DTR__FP8_Q16(dtr__fp8_q16_f32_e4m3, false, 3, 7, 0x7e, 0x7f)
DTR__FP8_Q16(dtr__fp8_q16_bf16_e4m3, true, 3, 7, 0x7e, 0x7f)
DTR__FP8_Q16(dtr__fp8_q16_f32_e5m2, false, 2, 15, 0x7b, 0x7e)
DTR__FP8_Q16(dtr__fp8_q16_bf16_e5m2, true, 2, 15, 0x7b, 0x7e)
#undef DTR__FP8_Q16

/* Whether the CPU has AVX-512F (asked once). */
static inline bool dtr__fp8_avx512(void) {
    static int has = -1;
    int v = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") != 0;
        __atomic_store_n(&has, v, __ATOMIC_RELAXED);
    }
    return v != 0;
}

typedef int64_t (*dtr__fp8_amax8_fn)(const void *, int64_t, int64_t, int32_t *);
DTR__FP8_AVX2 static int64_t dtr__fp8_amax8_f32(const void *src, int64_t first, int64_t len,
                                                int32_t *most) {
    return dtr__fp8_amax8_as(src, first, len, most, false);
}
DTR__FP8_AVX2 static int64_t dtr__fp8_amax8_bf16(const void *src, int64_t first, int64_t len,
                                                 int32_t *most) {
    return dtr__fp8_amax8_as(src, first, len, most, true);
}

#endif
