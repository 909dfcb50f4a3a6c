/*
 * Block-scaled fp8 (DeepSeek-V3's weight format): the fp8 conversions and the loops over one
 * rank's box that a block-scaled change runs (redistribute/executor/change_run.c). Every
 * value goes through f32: x32 = the element rounded to f32 (exact for f16 and bf16), amax =
 * the largest |x32| of its block, scale = amax / the fp8 type's largest finite value (448 for
 * f8e4m3, 57344 for f8e5m2) in one f32 division, q = fp8(x32 / scale) in one f32 division
 * and one rounding to nearest even that saturates at the largest finite value. A block of
 * zeros has scale 0 and keeps its zeros (their signs too); a block holding a NaN has a NaN
 * scale and NaN elements. docs/cross-mesh.md, "Block-scaled fp8", states the same.
 */
#include <string.h>

#include "numeric/numeric.h"

#if defined(__x86_64__)
#include "numeric/fp8_avx2.h"
#endif

/* Each format: mantissa bits, exponent bias, its largest finite code and its NaN. */
typedef struct {
    int man;
    int bias;
    uint8_t max_code, nan_code;
    float max;
} dtr__f8_format_t;

static const dtr__f8_format_t dtr__e4m3 = {3, 7, 0x7e, 0x7f, 448.0f};
static const dtr__f8_format_t dtr__e5m2 = {2, 15, 0x7b, 0x7e, 57344.0f};

static inline const dtr__f8_format_t *dtr__f8_format(dtr_dtype_t fp8) {
    return fp8 == DTR_F8E5M2 ? &dtr__e5m2 : &dtr__e4m3;
}

/* Round to nearest even, saturating, written without branches so that the loops below
 * vectorize (each format's constants known where it is inlined): below the smallest normal
 * the magic add rounds at the subnormal unit (as dtr__f32_to_f16 does); above it the
 * mantissa is rounded at its last kept bit and the exponent rebiased; both are computed and
 * one kept. */
static inline __attribute__((always_inline)) uint8_t dtr__to_f8_as(float v, int man, int bias,
                                                                    uint32_t max_code,
                                                                    uint32_t nan_code) {
    uint32_t u = dtr__f32_bits(v), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
    uint32_t min_normal = (uint32_t)(1 - bias + 127) << 23;
    /* magic 2^(1 - bias - man + 23): its f32 unit is fp8's subnormal unit */
    float magic = dtr__bits_f32((uint32_t)(1 - bias - man + 23 + 127) << 23);
    uint32_t sub = dtr__f32_bits(dtr__bits_f32(a & 0x3fffffffu) + magic) - dtr__f32_bits(magic);
    uint32_t drop = (uint32_t)(23 - man);
    uint32_t r = a + (1u << (drop - 1)) - 1 + ((a >> drop) & 1);
    uint32_t normal = (r >> drop) - ((uint32_t)(127 - bias) << man);
    /* the choices as masks, not branches (which would keep the loops from vectorizing) */
    uint32_t is_sub = 0u - (uint32_t)(a < min_normal), big = 0u - (uint32_t)(normal > max_code),
             nan = 0u - (uint32_t)(a > 0x7f800000u);
    normal = (normal & ~big) | (max_code & big); /* saturated (infinity too) */
    uint32_t code = (sub & is_sub) | (normal & ~is_sub);
    code = (code & ~nan) | (nan_code & nan);
    return (uint8_t)(sign | code);
}

static inline uint8_t dtr__to_e4m3(float v) { return dtr__to_f8_as(v, 3, 7, 0x7e, 0x7f); }
static inline uint8_t dtr__to_e5m2(float v) { return dtr__to_f8_as(v, 2, 15, 0x7b, 0x7e); }

static inline uint8_t dtr__to_f8(const dtr__f8_format_t *f, float v) {
    return f == &dtr__e5m2 ? dtr__to_e5m2(v) : dtr__to_e4m3(v);
}

uint8_t dtr__f32_to_f8(dtr_dtype_t fp8, float v) { return dtr__to_f8(dtr__f8_format(fp8), v); }

float dtr__f8_to_f32(dtr_dtype_t fp8, uint8_t q) {
    const dtr__f8_format_t *f = dtr__f8_format(fp8);
    uint32_t sign = (uint32_t)(q & 0x80) << 24, e = (q & 0x7fu) >> f->man,
             m = q & ((1u << f->man) - 1);
    if ((q & 0x7f) > f->max_code) /* e4m3: 0x7f is NaN; e5m2: 0x7c infinity, above NaN */
        return dtr__bits_f32(sign | 0x7f800000u | (fp8 == DTR_F8E5M2 && m == 0 ? 0 : 0x400000u));
    if (e == 0) { /* subnormal: m units of 2^(1 - bias - man) */
        float x = (float)m * dtr__bits_f32((uint32_t)(1 - f->bias - f->man + 127) << 23);
        return dtr__bits_f32(sign | dtr__f32_bits(x));
    }
    return dtr__bits_f32(sign | ((e - (uint32_t)f->bias + 127) << 23) | (m << (23 - f->man)));
}

float dtr__f8_max(dtr_dtype_t fp8) { return dtr__f8_format(fp8)->max; }

/* ---- the loops over one rank's box ----------------------------------------------------- */

enum { DTR__F8_RUN = 256 }; /* elements converted to f32 at a time */

/* count elements of src (dtype) from element k, as f32. */
static void dtr__f32_run(dtr_dtype_t dtype, const void *src, int64_t k, int n, float *out) {
    switch (dtype) {
    case DTR_F32: memcpy(out, (const float *)src + k, (size_t)n * sizeof *out); break;
    case DTR_F64:
        for (int i = 0; i < n; i++) out[i] = (float)((const double *)src)[k + i];
        break;
    case DTR_BF16:
        for (int i = 0; i < n; i++)
            out[i] = dtr__bits_f32((uint32_t)((const uint16_t *)src)[k + i] << 16);
        break;
    default: /* f16 */
        for (int i = 0; i < n; i++) out[i] = dtr__f16_to_f32(((const uint16_t *)src)[k + i]);
        break;
    }
}

/* Walks the box row by row (its last dim), calling fn on each run of one row that lies in
 * one block: the run's first element in the box (row-major), its length and the block's
 * index in the scales (row-major). */
typedef void (*dtr__run_fn)(void *arg, int64_t first, int64_t len, int64_t block_index);

static void dtr__block_runs(const dtr_layout_t *box, const int64_t *shape, int64_t block,
                            dtr__run_fn fn, void *arg) {
    int nd = box->ndim;
    if (box->numel == 0) return;
    if (nd == 0) {
        fn(arg, 0, 1, 0);
        return;
    }
    int64_t sshape[DTR_MAX_TENSOR_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0};
    dtr__scale_shape(nd, shape, block, sshape);
    int64_t row_len = box->local_shape[nd - 1], rows = box->numel / row_len;
    int64_t col0 = box->global_offset[nd - 1];
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = 0; /* the scales' index of the row's leading coordinates */
        for (int k = 0; k < nd - 1; k++) {
            int64_t g = box->global_offset[k] + idx[k];
            base = base * sshape[k] + (k < nd - 2 ? g : g / block);
        }
        for (int64_t c = 0; c < row_len;) {
            int64_t b = (col0 + c) / block, end = (b + 1) * block - col0;
            int64_t len = (end < row_len ? end : row_len) - c;
            fn(arg, r * row_len + c, len, base * sshape[nd - 1] + b);
            c += len;
        }
        for (int k = nd - 2; k >= 0 && ++idx[k] == box->local_shape[k]; k--) idx[k] = 0;
    }
}

typedef void (*dtr__quantize_fn)(const float *restrict, int, float, uint8_t *restrict);

typedef struct {
    dtr_dtype_t dtype;
    const void *src;
    int32_t *amax;
    const float *scales;
    const dtr__f8_format_t *f8;
    dtr__quantize_fn loop;
    uint8_t *q;
#if defined(__x86_64__)
    dtr__fp8_amax8_fn amax8;   /* f32 and bf16 with AVX2 (fp8_avx2.h); else NULL */
    dtr__fp8_quantize8_fn q8;
#endif
} dtr__block_args_t;

static int dtr__fp8_cap = 2; /* dtr__fp8_simd_cap */

void dtr__fp8_simd_cap(int cap) { dtr__fp8_cap = cap; }

/* The vector loops for a's dtype and format where the CPU has AVX2 (NULL elsewhere); the
 * quantization's AVX-512 one where it has that. */
static void dtr__block_loops(dtr__block_args_t *a) {
#if defined(__x86_64__)
    bool f32 = a->dtype == DTR_F32, bf16 = a->dtype == DTR_BF16;
    if (dtr__fp8_cap < 1 || dtr__simd_level() < 1 || (!f32 && !bf16)) return;
    a->amax8 = f32 ? dtr__fp8_amax8_f32 : dtr__fp8_amax8_bf16;
    bool e5m2 = a->f8 == &dtr__e5m2;
    if (dtr__fp8_cap >= 2 && dtr__fp8_avx512())
        a->q8 = e5m2 ? (f32 ? dtr__fp8_q16_f32_e5m2 : dtr__fp8_q16_bf16_e5m2)
                     : (f32 ? dtr__fp8_q16_f32_e4m3 : dtr__fp8_q16_bf16_e4m3);
    else
        a->q8 = e5m2 ? (f32 ? dtr__fp8_q8_f32_e5m2 : dtr__fp8_q8_bf16_e5m2)
                     : (f32 ? dtr__fp8_q8_f32_e4m3 : dtr__fp8_q8_bf16_e4m3);
#else
    (void)a;
#endif
}

static void dtr__amax_run(void *arg, int64_t first, int64_t len, int64_t s) {
    dtr__block_args_t *a = arg;
    float v[DTR__F8_RUN];
    int32_t most = a->amax[s];
#if defined(__x86_64__)
    if (a->amax8 != NULL) {
        int64_t done = a->amax8(a->src, first, len, &most);
        first += done, len -= done;
    }
#endif
    for (int64_t at = 0; at < len; at += DTR__F8_RUN) {
        int n = (int)(len - at < DTR__F8_RUN ? len - at : DTR__F8_RUN);
        dtr__f32_run(a->dtype, a->src, first + at, n, v);
        for (int i = 0; i < n; i++) { /* |v| as bits: ordered as the values, NaN above inf */
            int32_t b = (int32_t)(dtr__f32_bits(v[i]) & 0x7fffffffu);
            most = b > most ? b : most;
        }
    }
    a->amax[s] = most;
}

/* q[i] = fp8(v[i] / scale) for one format, n at a time (vectorized: kept out of line, so
 * that the loop the compiler vectorizes is the one that runs), and on x86-64 again for AVX2
 * (8 lanes), which dtr__simd_level() picks as values.c's casts do. */
#define DTR__QUANTIZE_LOOP(name, conv, target)                                              \
    static target __attribute__((noinline)) void name(const float *restrict v, int n,       \
                                                      float scale, uint8_t *restrict q) {   \
        for (int i = 0; i < n; i++) q[i] = conv(v[i] / scale);                              \
    }
DTR__QUANTIZE_LOOP(dtr__quantize_e4m3, dtr__to_e4m3, )
DTR__QUANTIZE_LOOP(dtr__quantize_e5m2, dtr__to_e5m2, )
#if defined(__x86_64__)
DTR__QUANTIZE_LOOP(dtr__quantize_e4m3_avx2, dtr__to_e4m3, __attribute__((target("avx2"))))
DTR__QUANTIZE_LOOP(dtr__quantize_e5m2_avx2, dtr__to_e5m2, __attribute__((target("avx2"))))
#else
#define dtr__quantize_e4m3_avx2 dtr__quantize_e4m3
#define dtr__quantize_e5m2_avx2 dtr__quantize_e5m2
#endif

/* The loop for fp8 on this CPU. */
static dtr__quantize_fn dtr__quantize_loop(const dtr__f8_format_t *f) {
    bool avx2 = dtr__simd_level() >= 1;
    if (f == &dtr__e5m2) return avx2 ? dtr__quantize_e5m2_avx2 : dtr__quantize_e5m2;
    return avx2 ? dtr__quantize_e4m3_avx2 : dtr__quantize_e4m3;
}

static void dtr__quantize_run(void *arg, int64_t first, int64_t len, int64_t s) {
    dtr__block_args_t *a = arg;
    float v[DTR__F8_RUN], scale = a->scales[s];
#if defined(__x86_64__)
    if (a->q8 != NULL && scale != 0.0f) {
        int64_t done = a->q8(a->src, first, len, scale, a->q + first);
        first += done, len -= done;
    }
#endif
    for (int64_t at = 0; at < len; at += DTR__F8_RUN) {
        int n = (int)(len - at < DTR__F8_RUN ? len - at : DTR__F8_RUN);
        dtr__f32_run(a->dtype, a->src, first + at, n, v);
        uint8_t *q = a->q + first + at;
        if (scale == 0.0f) /* a block of zeros keeps them */
            for (int i = 0; i < n; i++) q[i] = dtr__to_f8(a->f8, v[i]);
        else
            a->loop(v, n, scale, q);
    }
}

void dtr__block_amax(dtr_dtype_t dtype, const void *local, const dtr_layout_t *box,
                     const int64_t *shape, int64_t block, int32_t *amax_bits) {
    dtr__block_args_t a = {.dtype = dtype, .src = local, .amax = amax_bits};
    dtr__block_loops(&a);
    dtr__block_runs(box, shape, block, dtr__amax_run, &a);
}

void dtr__block_scales(dtr_dtype_t fp8, const int32_t *amax_bits, int64_t count,
                       float *scales) {
    float most = dtr__f8_format(fp8)->max;
    for (int64_t s = 0; s < count; s++) scales[s] = dtr__bits_f32((uint32_t)amax_bits[s]) / most;
}

void dtr__block_quantize(dtr_dtype_t dtype, const void *local, const dtr_layout_t *box,
                         const int64_t *shape, int64_t block, dtr_dtype_t fp8,
                         const float *scales, uint8_t *q) {
    dtr__block_args_t a = {.dtype = dtype, .src = local, .scales = scales,
                           .f8 = dtr__f8_format(fp8), .loop = dtr__quantize_loop(dtr__f8_format(fp8)),
                           .q = q};
    dtr__block_loops(&a);
    dtr__block_runs(box, shape, block, dtr__quantize_run, &a);
}
