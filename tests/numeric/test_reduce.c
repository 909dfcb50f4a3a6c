/*
 * dtr__reduce_n, the n-way reduction loop of the shared-memory reductions: its result is
 * ((in[0] op in[1]) op in[2]) ... op in[n-1] element by element, halves combined in f32 and
 * rounded once, integers wrapping, bit for bit the same in the AVX2 build and the generic
 * one. The data are chosen so that another order or a rounding per step gives other bits
 * (the fixed cases below show each such mutation changing the answer), and random cases
 * compare against a one-element-at-a-time reference written from that definition.
 */
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void reduce_f32(dtr_reduce_op_t op, const float *const *in, int n, float *out, int64_t c) {
    dtr__reduce_n(DTR_F32, op, (const void *const *)in, n, out, c);
}

/* Absorption and cancellation: left to right, 1e8 + 1 is 1e8 in f32, so the answer is 1;
 * right to left, or pairwise, it is 0 or 2. */
Test(reduce, f32_sum_goes_left_to_right) {
    float a[1] = {1e8f}, b[1] = {1.0f}, c[1] = {-1e8f}, d[1] = {1.0f}, out[1];
    const float *in[4] = {a, b, c, d};
    for (int simd = 0; simd <= dtr__reduce_levels(); simd++) {
        dtr__reduce_simd(simd);
        reduce_f32(DTR_REDUCE_SUM, in, 4, out, 1);
        cr_expect_eq(out[0], 1.0f, "((1e8 + 1) - 1e8) + 1 = 1 in f32, got %g (simd %d)",
                     out[0], simd);
        const float *rev[4] = {d, c, b, a};
        reduce_f32(DTR_REDUCE_SUM, rev, 4, out, 1);
        cr_expect_eq(out[0], 1e8f - 1e8f + 0.0f + 0.0f, "((1 - 1e8) + 1) + 1e8 = 0, got %g",
                     out[0]);
    }
    dtr__reduce_simd(-1);
}

/* Halves round once: 2048 + 1 + 1 is 2050 in f16 when summed in f32 (2048 + 1 alone would
 * round back to 2048 at each step, ending at 2048). */
Test(reduce, halves_round_once) {
    uint16_t a[1] = {dtr__f32_to_f16(2048.0f)}, b[1] = {dtr__f32_to_f16(1.0f)}, out[1];
    const void *in[3] = {a, b, b};
    uint16_t x[1] = {dtr__f32_to_bf16(256.0f)}, y[1] = {dtr__f32_to_bf16(1.0f)}, o2[1];
    const void *in2[3] = {x, y, y};
    for (int simd = 0; simd <= dtr__reduce_levels(); simd++) {
        dtr__reduce_simd(simd);
        dtr__reduce_n(DTR_F16, DTR_REDUCE_SUM, in, 3, out, 1);
        cr_expect_eq(dtr__f16_to_f32(out[0]), 2050.0f, "f16 2048 + 1 + 1, got %g (simd %d)",
                     dtr__f16_to_f32(out[0]), simd);
        dtr__reduce_n(DTR_BF16, DTR_REDUCE_SUM, in2, 3, o2, 1);
        cr_expect_eq(dtr__bf16_to_f32(o2[0]), 258.0f, "bf16 256 + 1 + 1, got %g (simd %d)",
                     dtr__bf16_to_f32(o2[0]), simd);
    }
    dtr__reduce_simd(-1);
}

Test(reduce, integers_wrap_and_compare_signed) {
    int32_t a[3] = {INT32_MAX, -5, 7}, b[3] = {1, -9, -3}, out[3];
    const void *in[2] = {a, b};
    dtr__reduce_n(DTR_I32, DTR_REDUCE_SUM, in, 2, out, 1);
    cr_expect_eq(out[0], INT32_MIN, "sum wraps");
    dtr__reduce_n(DTR_I32, DTR_REDUCE_MAX, in, 2, out, 3);
    cr_expect(out[0] == INT32_MAX && out[1] == -5 && out[2] == 7, "signed max");
    uint8_t u[1] = {200}, v[1] = {100}, w[1];
    const void *in8[2] = {u, v};
    dtr__reduce_n(DTR_U8, DTR_REDUCE_SUM, in8, 2, w, 1);
    cr_expect_eq(w[0], 44, "u8 wraps");
    dtr__reduce_n(DTR_U8, DTR_REDUCE_PRODUCT, in8, 2, w, 1);
    cr_expect_eq(w[0], (uint8_t)(200 * 100), "u8 product wraps");
    int64_t p[1] = {INT64_MAX}, q[1] = {2}, r[1];
    const void *in64[2] = {p, q};
    dtr__reduce_n(DTR_I64, DTR_REDUCE_PRODUCT, in64, 2, r, 1);
    cr_expect_eq(r[0], -2, "i64 product wraps");
}

/* ---- random cases against a reference -------------------------------------------- */

static uint64_t state;

static uint64_t rng(void) {
    uint64_t x = (state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A value whose sums depend on their order: a random sign, mantissa and exponent. */
static double value(dtr_dtype_t dtype) {
    double m = (double)(rng() >> 11) * 0x1p-52, e = (double)((int)(rng() % 17) - 8);
    double v = (rng() & 1 ? -1 : 1) * m * pow(2.0, dtype == DTR_F32 || dtype == DTR_F64 ? 3 * e : e);
    switch (dtype) {
    case DTR_I32: return (double)(int32_t)rng();
    case DTR_I64: return (double)(int64_t)(rng() >> 12) * (rng() & 1 ? -1 : 1);
    case DTR_U8: return (double)(rng() % 256);
    default: return v;
    }
}

#define OP(a, b)                                                                           \
    (op == DTR_REDUCE_MAX   ? ((a) > (b) ? (a) : (b))                                       \
     : op == DTR_REDUCE_MIN ? ((a) < (b) ? (a) : (b))                                       \
     : op == DTR_REDUCE_PRODUCT ? (a) * (b)                                                 \
                                : (a) + (b))

/* Element k by the definition: left to right, one element at a time. */
static void reference(dtr_dtype_t dtype, dtr_reduce_op_t op, void *const *in, int n, void *out,
                      int64_t k) {
    if (dtype == DTR_F32 || dtype == DTR_F16 || dtype == DTR_BF16) {
        float acc = 0;
        for (int j = 0; j < n; j++) {
            float x = (float)dtr__load(dtype, in[j], k);
            acc = j == 0 ? x : OP(acc, x);
        }
        dtr__store(dtype, out, k, acc); /* f32 -> the dtype, rounded once */
    } else if (dtype == DTR_F64) {
        double acc = 0;
        for (int j = 0; j < n; j++) {
            double x = ((double *)in[j])[k];
            acc = j == 0 ? x : OP(acc, x);
        }
        ((double *)out)[k] = acc;
    } else if (dtype == DTR_I64) {
        int64_t acc = 0;
        for (int j = 0; j < n; j++) {
            int64_t x = ((int64_t *)in[j])[k];
            if (j == 0 || op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN)
                acc = j == 0 ? x : OP(acc, x);
            else
                acc = (int64_t)(op == DTR_REDUCE_PRODUCT ? (uint64_t)acc * (uint64_t)x
                                                         : (uint64_t)acc + (uint64_t)x);
        }
        ((int64_t *)out)[k] = acc;
    } else if (dtype == DTR_I32) {
        int32_t acc = 0;
        for (int j = 0; j < n; j++) {
            int32_t x = ((int32_t *)in[j])[k];
            if (j == 0 || op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN)
                acc = j == 0 ? x : OP(acc, x);
            else
                acc = (int32_t)(op == DTR_REDUCE_PRODUCT ? (uint32_t)acc * (uint32_t)x
                                                         : (uint32_t)acc + (uint32_t)x);
        }
        ((int32_t *)out)[k] = acc;
    } else {
        unsigned acc = 0;
        for (int j = 0; j < n; j++) {
            unsigned x = ((uint8_t *)in[j])[k];
            acc = j == 0 ? x : (uint8_t)OP(acc, x);
        }
        ((uint8_t *)out)[k] = (uint8_t)acc;
    }
}

Test(reduce, random_against_reference) {
    static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16,
                                         DTR_I32, DTR_I64, DTR_U8};
    static const dtr_reduce_op_t ops[] = {DTR_REDUCE_SUM, DTR_REDUCE_MAX, DTR_REDUCE_MIN,
                                          DTR_REDUCE_PRODUCT};
    static const int64_t counts[] = {1, 7, 8, 9, 1023, 1024, 1025, 3001};
    uint64_t seed = 20261123;
    state = seed;
    int bad = 0, cases = 0, sum_changed = 0, sums = 0;
    /* every loop this CPU has runs each case: 0 generic, 1 AVX2, 2 AVX-512 */
    printf("reduce: loops 0 to %d on this CPU\n", dtr__reduce_levels());
    for (int c = 0; c < 300; c++) {
        dtr_dtype_t dtype = dtypes[rng() % 7];
        dtr_reduce_op_t op = ops[rng() % 4];
        int n = 1 + (int)(rng() % 16);
        int64_t count = counts[rng() % 8];
        int64_t es = dtr_dtype_info(dtype)->size;
        void *in[16];
        for (int j = 0; j < n; j++) {
            in[j] = malloc((size_t)(count * es));
            for (int64_t k = 0; k < count; k++) dtr__store(dtype, in[j], k, value(dtype));
        }
        char *want = malloc((size_t)(count * es)), *got = malloc((size_t)(count * es));
        char *rev = malloc((size_t)(count * es));
        for (int64_t k = 0; k < count; k++) reference(dtype, op, in, n, want, k);
        /* The mutations the data must catch: the same inputs in reverse order (f32, f64),
         * and a rounding to the half type after every step (f16, bf16). */
        if (op == DTR_REDUCE_SUM && n >= 3 && count >= 8 && dtype != DTR_I32 &&
            dtype != DTR_I64 && dtype != DTR_U8) {
            if (dtype == DTR_F16 || dtype == DTR_BF16) {
                memcpy(rev, in[0], (size_t)(count * es));
                for (int j = 1; j < n; j++) dtr__combine(dtype, op, in[j], rev, count);
            } else {
                void *back[16];
                for (int j = 0; j < n; j++) back[j] = in[n - 1 - j];
                for (int64_t k = 0; k < count; k++) reference(dtype, op, back, n, rev, k);
            }
            sums++;
            sum_changed += memcmp(want, rev, (size_t)(count * es)) != 0;
        }
        for (int simd = 0; simd <= dtr__reduce_levels(); simd++) {
            dtr__reduce_simd(simd);
            memset(got, 0xA5, (size_t)(count * es));
            dtr__reduce_n(dtype, op, (const void *const *)in, n, got, count);
            for (int64_t k = 0; k < count; k++)
                if (memcmp(got + k * es, want + k * es, (size_t)es) != 0) {
                    if (bad++ < 10)
                        printf("FAIL seed %llu case %d: %s %s n %d count %lld simd %d: "
                               "element %lld is %.17g, want %.17g\n",
                               (unsigned long long)seed, c, dtr_dtype_name(dtype),
                               dtr_reduce_op_name(op), n, (long long)count, simd, (long long)k,
                               dtr__load(dtype, got, k), dtr__load(dtype, want, k));
                    break;
                }
            /* in place: out is the first input */
            if (simd >= 1) {
                char *first = malloc((size_t)(count * es));
                memcpy(first, in[0], (size_t)(count * es));
                void *saved = in[0];
                in[0] = first;
                dtr__reduce_n(dtype, op, (const void *const *)in, n, first, count);
                if (memcmp(first, want, (size_t)(count * es)) != 0 && bad++ < 10)
                    printf("FAIL seed %llu case %d: in place differs\n",
                           (unsigned long long)seed, c);
                in[0] = saved;
                free(first);
            }
        }
        cases++;
        for (int j = 0; j < n; j++) free(in[j]);
        free(want);
        free(got);
        free(rev);
    }
    dtr__reduce_simd(-1);
    cr_expect_eq(bad, 0, "%d of %d cases differ from the reference (seed %llu)", bad, cases,
                 (unsigned long long)seed);
    cr_expect(sums >= 5 && sum_changed == sums,
              "%d of %d float sums of 3 or more change with the order (or, for halves, "
              "with a rounding per step): the data would not catch that mutation", sum_changed, sums);
}

/* bf16's edge values through the AVX2 kernel and the generic loop, bit for bit against each
 * other and against the reference: quiet, signalling and negative NaNs with payloads (max
 * and min take the other operand when one is NaN, as maxps/minps do; which payload a sum
 * or product of two NaNs keeps is the hardware's and the compiler's operand order, so there
 * the reference asks only for a quiet NaN), infinities,
 * the largest finite value (two of them round up to infinity), subnormals, signed zeros,
 * and ties (1 + 2^-8 is half an ulp: rounds to even, down from 1, up from 1 + 2^-7). The
 * counts cover a whole vector step, the tail and both. */
Test(reduce, bf16_edges_bit_for_bit) {
    static const uint16_t edge[] = {0x7fc0, 0x7f81, 0xffc1, 0x7f80, 0xff80, 0x7f7f, 0xff7f,
                                    0x0001, 0x8001, 0x8000, 0x0000, 0x3f80, 0x3b80, 0x3f81,
                                    0xbb80, 0x4000, 0x0080};
    static const dtr_reduce_op_t ops[] = {DTR_REDUCE_SUM, DTR_REDUCE_MAX, DTR_REDUCE_MIN,
                                          DTR_REDUCE_PRODUCT};
    static const int64_t counts[] = {16, 5, 53};
    uint64_t seed = 20261126;
    state = seed;
    int bad = 0, nan_out = 0, inf_out = 0;
    for (int c = 0; c < 240; c++) {
        dtr_reduce_op_t op = ops[c % 4];
        int n = 1 + (int)(rng() % 5);
        int64_t count = counts[(c / 4) % 3];
        uint16_t in[5][53], want[53], got[53];
        void *inp[5];
        for (int j = 0; j < n; j++) {
            for (int64_t k = 0; k < count; k++)
                in[j][k] = edge[rng() % (sizeof edge / sizeof edge[0])];
            inp[j] = in[j];
        }
        for (int64_t k = 0; k < count; k++) reference(DTR_BF16, op, inp, n, want, k);
        for (int64_t k = 0; k < count; k++) {
            nan_out += (want[k] & 0x7fff) > 0x7f80;
            inf_out += (want[k] & 0x7fff) == 0x7f80;
        }
        uint16_t generic[53];
        for (int simd = 0; simd <= dtr__reduce_levels(); simd++) {
            dtr__reduce_simd(simd);
            memset(got, 0xA5, sizeof got);
            dtr__reduce_n(DTR_BF16, op, (const void *const *)inp, n, got, count);
            if (simd == 0) memcpy(generic, got, sizeof got);
            for (int64_t k = 0; k < count; k++) {
                bool arith = op == DTR_REDUCE_SUM || op == DTR_REDUCE_PRODUCT;
                bool ok = arith && (want[k] & 0x7fff) > 0x7f80
                              ? (got[k] & 0x7fc0) == 0x7fc0 /* a quiet NaN */
                              : got[k] == want[k];
                if ((!ok || got[k] != generic[k]) && bad++ < 10) {
                    printf("FAIL seed %llu case %d: bf16 %s n %d count %lld simd %d: element "
                           "%lld is 0x%04x, want 0x%04x; inputs",
                           (unsigned long long)seed, c, dtr_reduce_op_name(op), n,
                           (long long)count, simd, (long long)k, got[k], want[k]);
                    for (int j = 0; j < n; j++) printf(" 0x%04x", in[j][k]);
                    printf("; the generic loop gave 0x%04x\n", generic[k]);
                }
            }
        }
    }
    dtr__reduce_simd(-1);
    cr_expect_eq(bad, 0, "%d bf16 elements differ from the reference (seed %llu)", bad,
                 (unsigned long long)seed);
    cr_expect(nan_out > 50 && inf_out > 50, "the cases reach NaN (%d) and infinite (%d) results",
              nan_out, inf_out);
    /* the ties and the overflow by rounding, as fixed cases */
    uint16_t one[16], tie[16], up[16], big[16], out[16];
    for (int k = 0; k < 16; k++) one[k] = 0x3f80, tie[k] = 0x3b80, up[k] = 0x3f81, big[k] = 0x7f7f;
    const void *a[2] = {one, tie}, *b[2] = {up, tie}, *c[2] = {big, big};
    dtr__reduce_n(DTR_BF16, DTR_REDUCE_SUM, a, 2, out, 16);
    cr_expect_eq(out[15], 0x3f80, "1 + 2^-8 rounds to even: 1 (0x3f80), got 0x%04x", out[15]);
    dtr__reduce_n(DTR_BF16, DTR_REDUCE_SUM, b, 2, out, 16);
    cr_expect_eq(out[15], 0x3f82, "(1 + 2^-7) + 2^-8 rounds to even: 0x3f82, got 0x%04x",
                 out[15]);
    dtr__reduce_n(DTR_BF16, DTR_REDUCE_SUM, c, 2, out, 16);
    cr_expect_eq(out[15], 0x7f80, "max + max is +inf, got 0x%04x", out[15]);
}

/* Complex sums, avg's divide and the pairwise add against C's own complex arithmetic (its +
 * adds the parts, its / by a real divides them): c64 as f32 pairs, c128 as f64 pairs, left
 * to right, in both builds. The parts are drawn so another order gives other bits. */
Test(reduce, complex_is_its_parts) {
    uint64_t seed = 20261124;
    state = seed;
    int bad = 0, changed = 0;
    for (int c = 0; c < 200; c++) {
        bool wide = rng() & 1;
        dtr_dtype_t dtype = wide ? DTR_C128 : DTR_C64, part = wide ? DTR_F64 : DTR_F32;
        int n = 2 + (int)(rng() % 6);
        int64_t count = 1 + (int64_t)(rng() % 40), es = dtr_dtype_info(dtype)->size;
        void *in[8];
        for (int j = 0; j < n; j++) {
            in[j] = malloc((size_t)(count * es));
            for (int64_t k = 0; k < 2 * count; k++) dtr__store(part, in[j], k, value(part));
        }
        char *got = malloc((size_t)(count * es)), *avg = malloc((size_t)(count * es));
        char *pair = malloc((size_t)(count * es));
        memcpy(pair, in[0], (size_t)(count * es));
        for (int j = 1; j < n; j++) dtr__combine(dtype, DTR_REDUCE_SUM, in[j], pair, count);
        for (int simd = 0; simd <= dtr__reduce_levels(); simd++) {
            dtr__reduce_simd(simd);
            dtr__reduce_n(dtype, DTR_REDUCE_SUM, (const void *const *)in, n, got, count);
            dtr__divide(dtype, got, avg, count, n);
            for (int64_t k = 0; k < count; k++) {
                double _Complex want, back, mean;
                if (wide) {
                    double _Complex acc = ((double _Complex *)in[0])[k], rev = 0;
                    for (int j = 1; j < n; j++) acc += ((double _Complex *)in[j])[k];
                    for (int j = n - 1; j >= 0; j--) rev += ((double _Complex *)in[j])[k];
                    want = acc, back = rev, mean = acc / (double)n;
                } else {
                    float _Complex acc = ((float _Complex *)in[0])[k], rev = 0;
                    for (int j = 1; j < n; j++) acc += ((float _Complex *)in[j])[k];
                    for (int j = n - 1; j >= 0; j--) rev += ((float _Complex *)in[j])[k];
                    want = acc, back = rev, mean = acc / (float)n;
                }
                double parts[3][2] = {{creal(want), cimag(want)}, {creal(mean), cimag(mean)},
                                      {creal(want), cimag(want)}};
                const char *bufs[3] = {got, avg, pair}, *what[3] = {"sum", "avg", "pairwise"};
                for (int b = 0; b < 3; b++)
                    for (int r = 0; r < 2; r++) {
                        double g = dtr__load(part, bufs[b], 2 * k + r);
                        if (g != parts[b][r] && bad++ < 10)
                            printf("FAIL seed %llu case %d: %s n %d count %lld simd %d: %s of "
                                   "element %lld part %d is %.17g, want %.17g\n",
                                   (unsigned long long)seed, c, dtr_dtype_name(dtype), n,
                                   (long long)count, simd, what[b], (long long)k, r, g,
                                   parts[b][r]);
                    }
                if (simd == 0) changed += want != back;
            }
        }
        dtr__reduce_simd(-1);
        for (int j = 0; j < n; j++) free(in[j]);
        free(got);
        free(avg);
        free(pair);
    }
    printf("complex: 200 cases, seed %llu; %d elements whose sum changes right to left\n",
           (unsigned long long)seed, changed);
    cr_expect_eq(bad, 0, "%d complex mismatches (seed %llu)", bad, (unsigned long long)seed);
    cr_expect_gt(changed, 100, "the data must make the order matter");
}
