/* Element value helpers: half-type conversions (checked against the compiler's _Float16 and
 * an independent round-to-nearest-even for bf16), division and pairwise reduction. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng_state = 20261121;
static uint32_t rng32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

Test(dtype_values, f16_every_pattern_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dtr__f16_to_f32((uint16_t)h);
        _Float16 ref;
        uint16_t rb = (uint16_t)h;
        memcpy(&ref, &rb, 2);
        if (isnan(f)) {
            cr_expect(isnan((float)ref), "0x%04x", h);
            cr_expect(isnan(dtr__f16_to_f32(dtr__f32_to_f16(f))), "NaN 0x%04x stays NaN", h);
            continue;
        }
        cr_expect_eq(bits(f), bits((float)ref), "f16 0x%04x widens to %a, compiler %a", h, f,
                     (float)ref);
        cr_expect_eq(dtr__f32_to_f16(f), h, "f16 0x%04x round trip gives 0x%04x", h,
                     dtr__f32_to_f16(f));
    }
}

Test(dtype_values, f32_to_f16_matches_the_compiler) {
    /* random floats of every exponent, plus the edges: ties, overflow, subnormals */
    float edges[] = {65504.0f, 65519.99f, 65520.0f, 1e9f, -65520.0f, 0x1p-24f, 0x1p-25f,
                     0x1.8p-25f, 0x1p-26f, 0x1p-14f, 0x1.ffcp-15f, 2049.0f, 2051.0f,
                     -0.0f, 0.0f, INFINITY, -INFINITY, 1.0009765625f, 1.00048828125f};
    uint32_t n = 1000000;
    for (uint32_t k = 0; k < n + sizeof edges / sizeof edges[0]; k++) {
        float f = k < n ? from_bits(rng32()) : edges[k - n];
        if (isnan(f)) continue;
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        uint16_t got = dtr__f32_to_f16(f);
        if (got != rb) {
            cr_expect_fail("f32 %a (0x%08x): dtr 0x%04x, compiler 0x%04x (seed 20261121, draw %u)", f,
                           bits(f), got, rb, k);
            return;
        }
    }
}

/* bf16 by a different route: the two neighbours, compared in double, ties to even. */
static uint16_t bf16_reference(float f) {
    uint32_t u = bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double x = f, a = dtr__bf16_to_f32(lo), b = isinf(dtr__bf16_to_f32(hi)) && !isinf(f)
                                                   ? (double)(signbit(f) ? -0x1p128 : 0x1p128)
                                                   : dtr__bf16_to_f32(hi);
    double da = fabs(x - a), db = fabs(x - b);
    if (da < db) return lo;
    if (db < da) return hi;
    return (lo & 1) ? hi : lo;
}

Test(dtype_values, bf16_rounds_to_nearest_even) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dtr__bf16_to_f32((uint16_t)h);
        if (isnan(f)) {
            cr_expect(isnan(dtr__bf16_to_f32(dtr__f32_to_bf16(f))));
            continue;
        }
        cr_expect_eq(dtr__f32_to_bf16(f), h, "bf16 0x%04x round trip", h);
    }
    for (uint32_t k = 0; k < 1000000; k++) {
        float f = from_bits(rng32());
        if (isnan(f) || isinf(f)) continue;
        uint16_t got = dtr__f32_to_bf16(f), want = bf16_reference(f);
        if (got != want) {
            cr_expect_fail("f32 %a: dtr 0x%04x, reference 0x%04x (seed 20261121, draw %u)", f, got,
                           want, k);
            return;
        }
    }
}

/* The array casts (dtr__convert; AVX2 where the CPU has it) give dtr__f32_to_bf16's bits
 * for every bf16 top half with the low halves that decide the rounding (0, 1, just under,
 * at and just over the tie, the most), NaNs and infinities included; from offsets 0..16 so
 * that the vector loop and its scalar tail both run. And bf16 -> f32 for all 65536. */
Test(dtype_values, array_casts_match_the_scalar_ones) {
    static const uint32_t lows[] = {0x0000, 0x0001, 0x4000, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
    enum { N = 65536 * 8 };
    uint32_t *in = malloc((N + 16) * sizeof *in);
    uint16_t *out = malloc((N + 16) * sizeof *out);
    for (uint32_t h = 0; h < 65536; h++)
        for (int l = 0; l < 8; l++) in[h * 8 + l] = h << 16 | lows[l];
    for (int off = 0; off <= 16; off++) {
        memset(out, 0, (N + 16) * sizeof *out);
        dtr__convert(DTR_F32, in + off, DTR_BF16, out, N - off);
        for (int64_t k = 0; k < N - off; k++) {
            uint16_t want = dtr__f32_to_bf16(from_bits(in[k + off]));
            if (out[k] != want) {
                cr_expect_fail("f32 0x%08x (offset %d): array cast 0x%04x, scalar 0x%04x",
                               in[k + off], off, out[k], want);
                free(in);
                free(out);
                return;
            }
        }
    }
    uint16_t *h16 = malloc(65536 * sizeof *h16);
    float *f = malloc(65536 * sizeof *f);
    for (uint32_t h = 0; h < 65536; h++) h16[h] = (uint16_t)h;
    dtr__convert(DTR_BF16, h16, DTR_F32, f, 65536);
    for (uint32_t h = 0; h < 65536; h++)
        cr_expect_eq(bits(f[h]), h << 16, "bf16 0x%04x widened to 0x%08x", h, bits(f[h]));
    free(in);
    free(out);
    free(h16);
    free(f);
}

Test(dtype_values, divide_in_the_dtype) {
    uint16_t h[2] = {dtr__f32_to_f16(10.0f), dtr__f32_to_f16(1.0f)};
    dtr__divide(DTR_F16, h, h, 2, 4);
    cr_expect_eq(dtr__f16_to_f32(h[0]), 2.5f);
    cr_expect_eq(dtr__f16_to_f32(h[1]), 0.25f);
    int32_t i[3] = {7, -7, 8}, o[3];
    dtr__divide(DTR_I32, i, o, 3, 2);
    cr_expect(o[0] == 3 && o[1] == -3 && o[2] == 4, "C truncation: %d %d %d", o[0], o[1], o[2]);
    cr_expect(i[0] == 7 && i[1] == -7, "the source is not written when apart");
    float f[1] = {1.0f};
    dtr__divide(DTR_F32, f, f, 1, 3);
    cr_expect_eq(bits(f[0]), bits(1.0f / 3.0f), "one correctly rounded division");
}

/* dtr__divide_by on f32 multiplies by the inverse where the divisor is a power of two
 * whose inverse is normal: the same bits as the division, for every 4099th f32 pattern
 * (subnormals, infinities and NaNs with payloads among them) and the ones next to the
 * subnormal boundary, by powers of two from 2^-125 to 2^126, at both ends of that range and
 * past it (2^127, 2^-126: divided), and by 3. */
Test(dtype_values, f32_divide_by_a_power_of_two_is_the_division) {
    enum { N = (1 << 20) + 64 };
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    for (uint32_t k = 0; k < N - 64; k++) {
        uint32_t u = k * 4099u;
        memcpy(&in[k], &u, sizeof u);
    }
    for (uint32_t k = 0; k < 64; k++) {
        uint32_t u = 0x00800000u - 32 + k + (k & 1u) * 0x80000000u;
        memcpy(&in[N - 64 + k], &u, sizeof u);
    }
    static const float by[] = {2, 4, 0.5f, 0x1p-125f, 0x1p126f, 0x1p127f, 0x1p-126f, 1024, 3};
    for (int d = 0; d < 9; d++) {
        memcpy(out, in, N * sizeof *in);
        dtr__divide_by(DTR_F32, out, N, by[d]);
        int bad = 0;
        for (int k = 0; k < N; k++) {
            volatile float q = in[k] / by[d];
            float want = q;
            if (bits(out[k]) != bits(want) && bad++ < 5)
                cr_expect_fail("0x%08x / %a: 0x%08x, division 0x%08x", bits(in[k]), by[d],
                               bits(out[k]), bits(want));
        }
        cr_expect_eq(bad, 0, "f32 / %a: %d quotients differ", by[d], bad);
    }
    free(in);
    free(out);
}

/* The half types' divides (dtr__divide, and dtr__divide_by in place; AVX2, and F16C for f16,
 * where the CPU has them) give the scalar bits, f32(x) / f32(d) rounded once, for all 65536
 * values of each (NaNs with payloads, infinities and subnormals included), by divisors whose
 * quotients round (3, 6, 1.5) and powers of two (2, 0.25, 1024),
 * from offsets 0..16 so that the vector loop and its scalar tail both run; the source is not
 * written. */
static uint16_t half_quotient(dtr_dtype_t dtype, uint16_t x, float d) {
    return dtype == DTR_BF16 ? dtr__f32_to_bf16(dtr__bf16_to_f32(x) / d)
                             : dtr__f32_to_f16(dtr__f16_to_f32(x) / d);
}

Test(dtype_values, half_divides_match_the_scalar_ones) {
    enum { N = 65536 };
    uint16_t *in = malloc((N + 16) * sizeof *in), *out = malloc((N + 16) * sizeof *out);
    for (uint32_t h = 0; h < N + 16; h++) in[h] = (uint16_t)(h * 40503u);
    static const dtr_dtype_t halves[] = {DTR_BF16, DTR_F16};
    /* and powers of two, the gradient reductions' usual factors */
    static const double by[] = {3, 6, 1.5, 2, 0.25, 1024};
    for (int hv = 0; hv < 2; hv++) {
        dtr_dtype_t dtype = halves[hv];
        int bad = 0, changed = 0;
        for (int off = 0; off <= 16 && bad == 0; off++)
            for (int d = 0; d < 6; d++) {
                int64_t count = N - off;
                if (by[d] == (double)(int64_t)by[d]) {
                    dtr__divide(dtype, in + off, out, count, (int64_t)by[d]);
                } else {
                    memcpy(out, in + off, (size_t)count * sizeof *out);
                    dtr__divide_by(dtype, out, count, by[d]);
                }
                for (int64_t k = 0; k < count; k++) {
                    uint16_t want = half_quotient(dtype, in[k + off], (float)by[d]);
                    changed += want != in[k + off];
                    if (out[k] != want && bad++ < 5)
                        cr_expect_fail("%s 0x%04x / %g (offset %d): 0x%04x, scalar 0x%04x",
                                       dtr_dtype_name(dtype), in[k + off], by[d], off, out[k],
                                       want);
                }
            }
        cr_expect_eq(bad, 0, "%s: %d quotients differ", dtr_dtype_name(dtype), bad);
        cr_expect(changed > 3 * N, "%s: the divides change most values (%d)",
                  dtr_dtype_name(dtype), changed);
    }
    for (uint32_t h = 0; h < N + 16; h++)
        if (in[h] != (uint16_t)(h * 40503u)) {
            cr_expect_fail("dtr__divide wrote its source at %u", h);
            break;
        }
    free(in);
    free(out);
}

/* The f16 array casts (dtr__convert; F16C where the CPU has it) give dtr__f32_to_f16's and
 * dtr__f16_to_f32's bits: f32 -> f16 for every f32 top half with the low halves that decide
 * the rounding (as the bf16 test above), NaNs included, from offsets 0..8; f16 -> f32 for
 * all 65536, signalling NaNs' payloads included. */
Test(dtype_values, f16_array_casts_match_the_scalar_ones) {
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x4000, 0xe000, 0xffff};
    enum { N = 65536 * 8 };
    uint32_t *in = malloc((N + 8) * sizeof *in);
    uint16_t *out = malloc((N + 8) * sizeof *out);
    for (uint32_t h = 0; h < 65536; h++)
        for (int l = 0; l < 8; l++) in[h * 8 + l] = h << 16 | lows[l];
    int bad = 0;
    for (int off = 0; off <= 8 && bad == 0; off++) {
        dtr__convert(DTR_F32, in + off, DTR_F16, out, N - off);
        for (int64_t k = 0; k < N - off; k++) {
            uint16_t want = dtr__f32_to_f16(from_bits(in[k + off]));
            if (out[k] != want && bad++ < 5)
                cr_expect_fail("f32 0x%08x (offset %d): array cast 0x%04x, scalar 0x%04x",
                               in[k + off], off, out[k], want);
        }
    }
    uint16_t *h16 = malloc(65536 * sizeof *h16);
    float *f = malloc(65536 * sizeof *f);
    for (uint32_t h = 0; h < 65536; h++) h16[h] = (uint16_t)h;
    dtr__convert(DTR_F16, h16, DTR_F32, f, 65536);
    for (uint32_t h = 0; h < 65536; h++)
        if (bits(f[h]) != bits(dtr__f16_to_f32((uint16_t)h)) && bad++ < 10)
            cr_expect_fail("f16 0x%04x widened to 0x%08x, scalar 0x%08x", h, bits(f[h]),
                           bits(dtr__f16_to_f32((uint16_t)h)));
    cr_expect_eq(bad, 0, "%d casts differ", bad);
    free(in);
    free(out);
    free(h16);
    free(f);
}

Test(dtype_values, combine_pairs) {
    int64_t a[3] = {-5, INT64_MAX, 3}, b[3] = {-9, 1, -4};
    dtr__combine(DTR_I64, DTR_REDUCE_MAX, a, b, 1);
    cr_expect_eq(b[0], -5, "signed max of negatives");
    dtr__combine(DTR_I64, DTR_REDUCE_SUM, a + 1, b + 1, 1);
    cr_expect_eq(b[1], INT64_MIN, "sum wraps");
    dtr__combine(DTR_I64, DTR_REDUCE_MIN, a + 2, b + 2, 1);
    cr_expect_eq(b[2], -4);
    uint16_t x[2] = {dtr__f32_to_bf16(3.0f), dtr__f32_to_bf16(0.5f)};
    uint16_t y[2] = {dtr__f32_to_bf16(4.0f), dtr__f32_to_bf16(8.0f)};
    dtr__combine(DTR_BF16, DTR_REDUCE_PRODUCT, x, y, 2);
    cr_expect(dtr__bf16_to_f32(y[0]) == 12.0f && dtr__bf16_to_f32(y[1]) == 4.0f);
    uint16_t p[1] = {dtr__f32_to_f16(2048.0f)}, q[1] = {dtr__f32_to_f16(1.0f)};
    dtr__combine(DTR_F16, DTR_REDUCE_SUM, p, q, 1);
    cr_expect_eq(dtr__f16_to_f32(q[0]), 2048.0f, "2049 rounds to even in f16, once");
    uint8_t u[1] = {200}, v[1] = {100};
    dtr__combine(DTR_U8, DTR_REDUCE_SUM, u, v, 1);
    cr_expect_eq(v[0], 44, "u8 wraps");
}
