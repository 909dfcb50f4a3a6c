/*
 * bf16 in AVX2 registers, for the loops of values.c (casts) and reduce.c (reductions): eight
 * elements widened to f32 (bf16 is an f32's high half, so a shift), and eight f32 rounded to
 * bf16 as dtr__f32_to_bf16 does (to nearest even; a NaN stays a NaN, made quiet), then
 * packed. Both files pick these at run time where the CPU has AVX2, and give the same bits
 * as their scalar loops.
 */
#ifndef DTR_DTENSOR_BF16_AVX2_H
#define DTR_DTENSOR_BF16_AVX2_H

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

/* Eight bf16 at p as eight f32 bit patterns. */
__attribute__((target("avx2"))) static inline __m256i dtr__bf16_widen8(const uint16_t *p) {
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16);
}

/* Eight f32 bit patterns rounded to bf16, each in the low half of its 32-bit lane. */
__attribute__((target("avx2"))) static inline __m256i dtr__bf16_round8(__m256i u) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    __m256i nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    /* both sides are below 2^31, so the signed compare is the unsigned one */
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
    return _mm256_blendv_epi8(r, nan, is_nan);
}

/* Sixteen rounded lanes (a: elements 0-7, b: 8-15) stored as sixteen bf16 at o. */
__attribute__((target("avx2"))) static inline void dtr__bf16_store16(uint16_t *o, __m256i a,
                                                                     __m256i b) {
    /* packus works per 128-bit lane: a0-3 b0-3 a4-7 b4-7, put back in order */
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)o, p);
}
#endif

#endif
