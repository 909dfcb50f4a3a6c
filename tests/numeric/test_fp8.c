/* Block-scaled fp8 (numeric/fp8.c): the conversions against the reference that searches all
 * 256 codes for the nearest (ties to the even code; pattern.h's dtr_fp8_nearest), the codes'
 * values against their definition, and the block loops over random boxes against an
 * element-by-element reference. Seeded; a failure prints the seed and the case. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "pattern/pattern.h"

static uint64_t rng_state;
static uint32_t rng32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of a code, from the format's definition (ldexp of the mantissa). */
static double decode(dtr_dtype_t t, int q) {
    int man = t == DTR_F8E4M3 ? 3 : 2, bias = t == DTR_F8E4M3 ? 7 : 15;
    int e = (q & 0x7f) >> man, m = q & ((1 << man) - 1);
    double s = q & 0x80 ? -1 : 1;
    if (t == DTR_F8E4M3 && (q & 0x7f) == 0x7f) return NAN;
    if (t == DTR_F8E5M2 && e == 31) return m == 0 ? s * INFINITY : NAN;
    if (e == 0) return s * ldexp(m, 1 - bias - man);
    return s * ldexp((1 << man) + m, e - bias - man);
}

static const dtr_dtype_t types[2] = {DTR_F8E4M3, DTR_F8E5M2};

Test(fp8, every_code_decodes_to_its_value) {
    for (int t = 0; t < 2; t++)
        for (int q = 0; q < 256; q++) {
            double want = decode(types[t], q);
            float got = dtr__f8_to_f32(types[t], (uint8_t)q);
            if (isnan(want)) cr_expect(isnan(got), "type %d code 0x%02x: %a", t, q, got);
            else cr_expect_eq((double)got, want, "type %d code 0x%02x: %a, not %a", t, q,
                              got, want);
        }
    cr_expect_eq(dtr__f8_max(DTR_F8E4M3), 448.0f);
    cr_expect_eq(dtr__f8_max(DTR_F8E5M2), 57344.0f);
}

/* Every code, the midpoints between neighbours (the ties) and one f32 step either side. */
Test(fp8, codes_midpoints_and_their_neighbours_round_as_the_reference) {
    for (int t = 0; t < 2; t++)
        for (int q = 0; q < 0x7f; q++) {
            double lo = decode(types[t], q), hi = decode(types[t], q + 1);
            if (!isfinite(hi)) continue;
            float mid = (float)((lo + hi) / 2), pts[5] = {(float)lo, mid, nextafterf(mid, 0),
                                                          nextafterf(mid, INFINITY), (float)hi};
            for (int k = 0; k < 5; k++)
                for (int s = 0; s < 2; s++) {
                    float v = s ? -pts[k] : pts[k];
                    cr_assert_eq(dtr__f32_to_f8(types[t], v), dtr_fp8_nearest(types[t], v),
                                 "type %d: %a gives 0x%02x, the reference 0x%02x", t, v,
                                 dtr__f32_to_f8(types[t], v), dtr_fp8_nearest(types[t], v));
                }
        }
}

Test(fp8, specials_saturate_and_nan_stays_nan) {
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, INFINITY), 0x7e);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, -INFINITY), 0xfe);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, 479.99f), 0x7e);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, 1e30f), 0x7e);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, NAN), 0x7f);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, -NAN), 0xff);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, -0.0f), 0x80);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, 0x1p-10f), 0x00); /* half the least: tie to 0 */
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, 0x1.8p-9f), 0x02); /* 1.5 units: tie to even 2 */
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E5M2, INFINITY), 0x7b);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E5M2, 61440.0f), 0x7b);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E5M2, NAN), 0x7e);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E5M2, 1.0f), 0x3c);
    cr_expect_eq(dtr__f32_to_f8(DTR_F8E4M3, 1.0f), 0x38);
}

Test(fp8, random_f32_round_as_the_reference) {
    rng_state = 20261130;
    fprintf(stderr, "fp8 random_f32: seed %llu\n", (unsigned long long)rng_state);
    for (int i = 0; i < 200000; i++) {
        /* exponents around fp8's range, where the rounding happens, and any bits */
        uint32_t u = rng32();
        if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + rng32() % 50) << 23);
        float v = from_bits(u);
        for (int t = 0; t < 2; t++)
            cr_assert_eq(dtr__f32_to_f8(types[t], v), dtr_fp8_nearest(types[t], v),
                         "seed 20261130 case %d type %d: %a (bits 0x%08x) gives 0x%02x, the "
                         "reference 0x%02x", i, t, v, u, dtr__f32_to_f8(types[t], v),
                         dtr_fp8_nearest(types[t], v));
    }
}

Test(fp8, scale_shape_blocks_the_last_two_dims) {
    int64_t s3[3] = {3, 300, 129}, o3[3], s1[1] = {257}, o1[1], s2[2] = {0, 5}, o2[2];
    dtr__scale_shape(3, s3, 128, o3);
    cr_expect(o3[0] == 3 && o3[1] == 3 && o3[2] == 2, "%lld %lld %lld", (long long)o3[0],
              (long long)o3[1], (long long)o3[2]);
    dtr__scale_shape(1, s1, 128, o1);
    cr_expect_eq(o1[0], 3);
    dtr__scale_shape(2, s2, 4, o2);
    cr_expect(o2[0] == 0 && o2[1] == 2);
}

/* The element's block index in the scales, from its global coordinates. */
static int64_t block_of(int nd, const int64_t *shape, int64_t block, const int64_t *g) {
    int64_t ss[DTR_MAX_TENSOR_DIMS], s = 0;
    dtr__scale_shape(nd, shape, block, ss);
    for (int k = 0; k < nd; k++) s = s * ss[k] + (k < nd - 2 ? g[k] : g[k] / block);
    return s;
}

static float value_at(dtr_dtype_t dt, const void *buf, int64_t k) {
    return (float)dtr__load(dt, buf, k);
}

/* A random box of a random tensor (0-4 dims, blocks of 1-40), random values of a random
 * source dtype with zeros, NaN and big values mixed in: amax and quantize against the
 * element-by-element reference. */
Test(fp8, block_loops_match_the_reference_on_random_boxes) {
    static const dtr_dtype_t srcs[4] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16};
    rng_state = 77;
    fprintf(stderr, "fp8 block_loops: seed 77\n");
    for (int c = 0; c < 400; c++) {
        /* (every other case blocks of 8-40 and rows up to 70: runs the AVX2 loops take) */
        bool long_runs = c % 2;
        int nd = (int)(rng32() % 5);
        int64_t block = long_runs ? 8 + rng32() % 33 : 1 + rng32() % 9, shape[4], ss[4];
        dtr_layout_t box = {.ndim = nd, .numel = 1};
        for (int k = 0; k < nd; k++) {
            shape[k] = rng32() % (!long_runs ? 20 : k == nd - 1 ? 70 : 6);
            box.global_offset[k] = shape[k] ? rng32() % shape[k] : 0;
            box.local_shape[k] = rng32() % (shape[k] - box.global_offset[k] + 1);
            box.numel *= box.local_shape[k];
        }
        dtr__scale_shape(nd, shape, block, ss);
        int64_t ns = 1;
        for (int k = 0; k < nd; k++) ns *= ss[k];
        dtr_dtype_t dt = srcs[rng32() % 4], f8 = types[rng32() % 2];
        int size = dtr_dtype_info(dt)->size;
        dtr__fp8_simd_cap(c % 3); /* (each case one of the loops: none, AVX2, AVX-512) */
        char *x = malloc((size_t)(box.numel * size + 1));
        for (int64_t k = 0; k < box.numel; k++) {
            uint32_t r = rng32() % 100;
            double v = r < 10 ? 0 : r < 11 ? NAN : r < 13 ? 1e6 : ((int)(rng32() % 20001) - 10000) / 997.0;
            if (r < 5 && (rng32() & 1)) v = -0.0;
            dtr__store(dt, x, k, v);
        }
        int32_t *amax = calloc((size_t)ns + 1, 4), *want = calloc((size_t)ns + 1, 4);
        dtr__block_amax(dt, x, &box, shape, block, amax);
        int64_t idx[4] = {0}, g[4];
        for (int64_t k = 0; k < box.numel; k++) { /* the reference amax */
            for (int d = 0; d < nd; d++) g[d] = box.global_offset[d] + idx[d];
            float a = fabsf(value_at(dt, x, k));
            uint32_t b;
            memcpy(&b, &a, 4);
            int64_t s = block_of(nd, shape, block, g);
            if ((int32_t)b > want[s]) want[s] = (int32_t)b;
            for (int d = nd - 1; d >= 0 && ++idx[d] == box.local_shape[d]; d--) idx[d] = 0;
        }
        for (int64_t s = 0; s < ns; s++)
            cr_assert_eq(amax[s], want[s], "seed 77 case %d: block %lld amax bits 0x%x, want "
                         "0x%x (nd %d block %lld)", c, (long long)s, amax[s], want[s], nd,
                         (long long)block);
        float *scales = malloc((size_t)(ns + 1) * 4);
        dtr__block_scales(f8, amax, ns, scales);
        uint8_t *q = malloc((size_t)box.numel + 1);
        dtr__block_quantize(dt, x, &box, shape, block, f8, scales, q);
        memset(idx, 0, sizeof idx);
        for (int64_t k = 0; k < box.numel; k++) {
            for (int d = 0; d < nd; d++) g[d] = box.global_offset[d] + idx[d];
            int64_t s = block_of(nd, shape, block, g);
            float am;
            memcpy(&am, &want[s], 4);
            float sc = am / dtr__f8_max(f8), v = value_at(dt, x, k);
            cr_assert(memcmp(&sc, &scales[s], 4) == 0, "seed 77 case %d: scale %lld", c,
                      (long long)s);
            uint8_t r = dtr_fp8_nearest(f8, sc == 0 ? v : v / sc);
            cr_assert_eq(q[k], r, "seed 77 case %d element %lld: 0x%02x, want 0x%02x (x %a, "
                         "scale %a)", c, (long long)k, q[k], r, v, sc);
            for (int d = nd - 1; d >= 0 && ++idx[d] == box.local_shape[d]; d--) idx[d] = 0;
        }
        free(x), free(amax), free(want), free(scales), free(q);
    }
    dtr__fp8_simd_cap(2);
}

/* The block loops (the AVX2 and AVX-512 ones where the CPU has them: runs of 8 and 16, each
 * case through each) against the scalar conversion, on any bits: random f32 (exponents
 * around fp8's range, and any), random bf16, each run at every offset 0-15 and length 0-304,
 * random scales; and the amax against a scalar max of the bits. */
Test(fp8, block_loops_give_the_scalar_codes_for_any_bits) {
    static const dtr_dtype_t srcs[2] = {DTR_F32, DTR_BF16};
    rng_state = 20261201;
    fprintf(stderr, "fp8 any_bits: seed 20261201\n");
    enum { N = 320 };
    for (int c = 0; c < 2000; c++) {
        dtr_dtype_t dt = srcs[c % 2], f8 = types[(c / 2) % 2];
        uint32_t bits[N];
        char x[N * 4];
        for (int k = 0; k < N; k++) {
            uint32_t u = rng32();
            if (rng32() % 2) u = (u & 0x807fffffu) | ((uint32_t)(100 + rng32() % 50) << 23);
            if (dt == DTR_BF16) u &= 0xffff0000u;
            bits[k] = u;
            if (dt == DTR_BF16) {
                uint16_t h = (uint16_t)(u >> 16);
                memcpy(x + 2 * k, &h, 2);
            } else {
                memcpy(x + 4 * k, &u, 4);
            }
        }
        int64_t off = rng32() % 16, len = rng32() % (N - 16 + 1), shape[1] = {N};
        dtr_layout_t box = {.ndim = 1, .numel = len, .local_shape = {len}, .global_offset = {off}};
        const char *at = x + off * dtr_dtype_info(dt)->size;
        int32_t want = 0;
        for (int64_t k = 0; k < len; k++)
            if ((int32_t)(bits[off + k] & 0x7fffffffu) > want) want = (int32_t)(bits[off + k] & 0x7fffffffu);
        float scale = (c % 5 == 0) ? 1.0f : from_bits(0x3a000000u + rng32() % 0x0a000000u);
        for (int cap = 0; cap < 3; cap++) {
            dtr__fp8_simd_cap(cap);
            int32_t amax = 0;
            dtr__block_amax(dt, at, &box, shape, N, &amax);
            cr_assert_eq(amax, want, "seed 20261201 case %d loops %d: amax 0x%x, want 0x%x", c,
                         cap, amax, want);
            uint8_t q[N];
            dtr__block_quantize(dt, at, &box, shape, N, f8, &scale, q);
            for (int64_t k = 0; k < len; k++) {
                float v = from_bits(bits[off + k]);
                uint8_t r = dtr__f32_to_f8(f8, v / scale);
                cr_assert_eq(q[k], r, "seed 20261201 case %d loops %d (%s to %s, offset %lld, "
                             "length %lld) element %lld: 0x%02x, want 0x%02x (x %a, scale %a)",
                             c, cap, dtr_dtype_info(dt)->name, dtr_dtype_info(f8)->name,
                             (long long)off, (long long)len, (long long)k, q[k], r, v, scale);
            }
        }
        dtr__fp8_simd_cap(2);
    }
}
