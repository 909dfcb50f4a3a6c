/* The reference quantizer for block-scaled fp8 (pattern.h, dtr_fill_check_fp8): each block's
 * amax from all its elements as the fill gives them, its scale, and each element by a search
 * of every fp8 code for the nearest value, ties to the even code; a check independent of the
 * library's blocks, loops and bit tricks (numeric/fp8.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "pattern/internal.h"
#include "pattern/pattern.h"

static const char *const F = "dtr_fill_check_fp8";

/* The value of an fp8 code from the format's definition. */
static double dtr__f8_value(dtr_dtype_t t, int q) {
    int man = t == DTR_F8E4M3 ? 3 : 2, bias = t == DTR_F8E4M3 ? 7 : 15;
    int e = (q & 0x7f) >> man, m = q & ((1 << man) - 1);
    double s = q & 0x80 ? -1 : 1;
    if (e == 0) return s * ldexp(m, 1 - bias - man);
    return s * ldexp((1 << man) + m, e - bias - man);
}

uint8_t dtr_fp8_nearest(dtr_dtype_t fp8, float v) {
    int sign = signbit(v) ? 0x80 : 0, top = fp8 == DTR_F8E4M3 ? 0x7e : 0x7b, best = 0;
    if (isnan(v)) return (uint8_t)(sign | (fp8 == DTR_F8E4M3 ? 0x7f : 0x7e));
    double a = fabs((double)v), best_d = INFINITY;
    if (a >= dtr__f8_value(fp8, top)) return (uint8_t)(sign | top);
    for (int q = 0; q <= top; q++) {
        double d = fabs(dtr__f8_value(fp8, q) - a);
        if (d < best_d || (d == best_d && (q & 1) == 0)) {
            best_d = d;
            best = q;
        }
    }
    return (uint8_t)(sign | best);
}

typedef struct {
    const dtr_spec_t *src;
    const dtr_fill_t *fill;
    int64_t block, sshape[DTR_MAX_TENSOR_DIMS], nscales;
    float *amax; /* [nscales], NaN bits 0xffffffff where not yet computed */
    bool *known;
} dtr__fp8_ref_t;

/* Block s's amax over all its elements (f32, NaN if one is). */
static float dtr__ref_amax(dtr__fp8_ref_t *r, int64_t s) {
    if (r->known[s]) return r->amax[s];
    int nd = r->src->ndim;
    int64_t lo[DTR_MAX_TENSOR_DIMS], hi[DTR_MAX_TENSOR_DIMS], g[DTR_MAX_TENSOR_DIMS], rest = s;
    for (int k = nd - 1; k >= 0; k--) {
        int64_t b = rest % r->sshape[k];
        rest /= r->sshape[k];
        lo[k] = k < nd - 2 ? b : b * r->block;
        hi[k] = k < nd - 2 ? b + 1 : fmin((double)(lo[k] + r->block), (double)r->src->shape[k]);
        g[k] = lo[k];
    }
    float most = 0;
    bool nan = false;
    for (;;) {
        int64_t e = 0;
        for (int k = 0; k < nd; k++) e = e * r->src->shape[k] + g[k];
        float x = (float)dtr__fill_element(r->fill, r->src->dtype, e);
        if (isnan(x)) nan = true;
        else if (fabsf(x) > most) most = fabsf(x);
        int k = nd - 1;
        for (; k >= 0 && ++g[k] == hi[k]; k--) g[k] = lo[k];
        if (k < 0) break;
    }
    r->amax[s] = nan ? NAN : most;
    r->known[s] = true;
    return r->amax[s];
}

static int64_t dtr__block_index(const dtr__fp8_ref_t *r, const int64_t *g) {
    int nd = r->src->ndim;
    int64_t s = 0;
    for (int k = 0; k < nd; k++) s = s * r->sshape[k] + (k < nd - 2 ? g[k] : g[k] / r->block);
    return s;
}

static void dtr__miss(dtr_pattern_report_t *rep, int64_t k, const dtr_layout_t *l,
                      const int64_t *idx, double got, double want) {
    if (rep->mismatches++ == 0) {
        rep->first = k;
        for (int d = 0; d < l->ndim; d++) rep->first_global[d] = l->global_offset[d] + idx[d];
        rep->got = got;
        rep->want = want;
    }
}

/* The weight's block on rank: every byte against the reference quantizer. */
static void dtr__check_weight(dtr__fp8_ref_t *r, dtr_dtype_t fp8, const dtr_layout_t *l,
                              const uint8_t *q, dtr_pattern_report_t *rep) {
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0}, g[DTR_MAX_TENSOR_DIMS];
    float most = dtr__f8_max(fp8);
    for (int64_t k = 0; k < l->numel; k++, dtr__next(l, idx)) {
        int64_t e = 0;
        for (int d = 0; d < l->ndim; d++) {
            g[d] = l->global_offset[d] + idx[d];
            e = e * r->src->shape[d] + g[d];
        }
        float scale = dtr__ref_amax(r, dtr__block_index(r, g)) / most;
        float x = (float)dtr__fill_element(r->fill, r->src->dtype, e);
        uint8_t want = dtr_fp8_nearest(fp8, scale == 0 ? x : x / scale);
        rep->checked++;
        if (q[k] != want) dtr__miss(rep, k, l, idx, q[k], want);
    }
}

/* The scales' block on rank: every f32, bit for bit. */
static void dtr__check_scales(dtr__fp8_ref_t *r, dtr_dtype_t fp8, const dtr_layout_t *l,
                              const float *sc, dtr_pattern_report_t *rep) {
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    float most = dtr__f8_max(fp8);
    for (int64_t k = 0; k < l->numel; k++, dtr__next(l, idx)) {
        int64_t s = 0;
        for (int d = 0; d < l->ndim; d++) s = s * r->sshape[d] + l->global_offset[d] + idx[d];
        float want = dtr__ref_amax(r, s) / most;
        rep->checked++;
        if (memcmp(&want, &sc[k], sizeof want) != 0 && !(isnan(want) && isnan(sc[k])))
            dtr__miss(rep, k, l, idx, sc[k], want);
    }
}

dtr_status_t dtr_fill_check_fp8(const dtr_spec_t *src, const dtr_spec_t *dst,
                                const dtr_spec_t *scales, int64_t block, const dtr_fill_t *fill,
                                int rank, const void *q, size_t q_bytes, const void *s,
                                size_t s_bytes, dtr_pattern_report_t *weights,
                                dtr_pattern_report_t *scale_report) {
    DTR_CHECK_PTR(src, F);
    DTR_CHECK_PTR(dst, F);
    DTR_CHECK_PTR(scales, F);
    DTR_CHECK_PTR(weights, F);
    DTR_CHECK_PTR(scale_report, F);
    if (fill != NULL && fill->kind == DTR_FILL_GIVEN)
        return dtr__error(DTR_ERR_UNSUPPORTED, F, "fill: given blocks (the pattern or random "
                          "values only)");
    if (block < 1) return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "block: %lld", (long long)block);
    dtr_layout_t lw, ls;
    dtr_status_t st = dtr_spec_layout(dst, rank, &lw);
    if (st == DTR_OK) st = dtr_spec_layout(scales, rank, &ls);
    if (st != DTR_OK) return dtr__again_as(st, F);
    if ((int64_t)q_bytes != lw.bytes || (int64_t)s_bytes != ls.bytes)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "%s: %zu, but rank %d's block holds "
                          "%lld", (int64_t)q_bytes != lw.bytes ? "q_bytes" : "s_bytes",
                          (int64_t)q_bytes != lw.bytes ? q_bytes : s_bytes, rank,
                          (long long)((int64_t)q_bytes != lw.bytes ? lw.bytes : ls.bytes));
    dtr__fp8_ref_t r = {.src = src, .fill = fill, .block = block, .nscales = 1};
    dtr__scale_shape(src->ndim, src->shape, block, r.sshape);
    for (int k = 0; k < src->ndim; k++) r.nscales *= r.sshape[k];
    r.amax = calloc((size_t)r.nscales + 1, sizeof *r.amax);
    r.known = calloc((size_t)r.nscales + 1, sizeof *r.known);
    if (r.amax == NULL || r.known == NULL) {
        free(r.amax);
        free(r.known);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, F, "the blocks' amax");
    }
    dtr_pattern_report_t none = {.first = -1};
    *weights = none;
    *scale_report = none;
    dtr__check_weight(&r, dst->dtype, &lw, q, weights);
    dtr__check_scales(&r, dst->dtype, &ls, s, scale_report);
    free(r.amax);
    free(r.known);
    return DTR_OK;
}
