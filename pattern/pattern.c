/* The fills of pattern.h: fill a source block, check a target block against a reference. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "pattern/internal.h"
#include "pattern/pattern.h"

/* One contribution of one element: its value as the dtype holds it. */
typedef struct {
    long double f; /* floats (and integers, as a number) */
    int64_t i;     /* integers, exactly */
    uint8_t byte;  /* storage-only dtypes */
} dtr__value_t;

/* Where the values come from, for one source spec. */
typedef struct {
    const dtr_fill_t *fill; /* never NULL */
    dtr_dtype_t dtype;  /* of one value: a complex dtype's part */
    int lanes;          /* values per element: 2 for complex (real, imag), else 1 */
    dtr_reduce_op_t op; /* the source's Partial op (sum where it has none) */
    int64_t count;      /* contributions per element */
    int emax;           /* random floats: the largest exponent */
    int64_t ilim;       /* random integers: the largest magnitude */
    dtr_dtype_t out;    /* checks: the target's part dtype; a cast rounds values to it */
    dtr_dtype_t via;    /* checks: the steps' part dtype (out's but for a plan's op_dtype);
                         * a value is rounded to it first */
} dtr__source_t;

static bool dtr__is_int(dtr_dtype_t t) { return t == DTR_I32 || t == DTR_I64 || t == DTR_U8; }

static int64_t dtr__iwrap(dtr_dtype_t t, uint64_t v) {
    switch (t) {
    case DTR_I32: return (int32_t)(uint32_t)v;
    case DTR_U8: return (uint8_t)v;
    default: return (int64_t)v;
    }
}

static int64_t dtr__iload(dtr_dtype_t t, const void *b, int64_t k) {
    switch (t) {
    case DTR_I32: return ((const int32_t *)b)[k];
    case DTR_U8: return ((const uint8_t *)b)[k];
    default: return ((const int64_t *)b)[k];
    }
}

static void dtr__istore(dtr_dtype_t t, void *b, int64_t k, int64_t v) {
    switch (t) {
    case DTR_I32: ((int32_t *)b)[k] = (int32_t)dtr__iwrap(t, (uint64_t)v); break;
    case DTR_U8: ((uint8_t *)b)[k] = (uint8_t)v; break;
    default: ((int64_t *)b)[k] = v; break;
    }
}

static int64_t dtr__imax(dtr_dtype_t t) {
    return t == DTR_I32 ? INT32_MAX : t == DTR_U8 ? UINT8_MAX : INT64_MAX;
}

/* ---- the pattern ---------------------------------------------------------------------- */

static double dtr__t(int64_t e) { return 8.0 + (double)(e % 13); }

static uint8_t dtr__code(int64_t e) { return (uint8_t)(0x11 + (e * 7) % 91); }

/* Contribution of partial index q (of count) to element e. */
static double dtr__contribution(dtr_reduce_op_t op, dtr_dtype_t dtype, int64_t e, int64_t q,
                                int64_t count) {
    double t = dtr__t(e);
    if (count <= 1) return t;
    int64_t q0 = e % count;
    switch (op) {
    case DTR_REDUCE_SUM: {
        if (q < count - 1) return (double)((e + q) % 2);
        double rest = t;
        for (int64_t k = 0; k < count - 1; k++) rest -= (double)((e + k) % 2);
        return rest;
    }
    case DTR_REDUCE_AVG: return t;
    case DTR_REDUCE_MAX: return q == q0 ? t : t - 1.0 - (double)((e + q) % 5);
    case DTR_REDUCE_MIN: return q == q0 ? t : t + 1.0 + (double)((e + q) % 5);
    default: {
        if (q == q0) return t;
        bool is_float = dtr_dtype_info(dtype)->is_float;
        if (count >= 3 && (q == (q0 + 1) % count || q == (q0 + 2) % count)) {
            if (is_float) return q == (q0 + 1) % count ? 2.0 : 0.5;
            if (dtype != DTR_U8) return -1.0;
        }
        return 1.0;
    }
    }
}

/* ---- random values -------------------------------------------------------------------- */

static uint64_t dtr__mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t dtr__hash(uint64_t seed, int64_t e, int64_t q) {
    return dtr__mix(dtr__mix(dtr__mix(seed) ^ (uint64_t)e) ^ (uint64_t)q);
}

/* Values of dtype (as filled), checked in out (a cast's target; else dtype). */
static dtr__source_t dtr__source(const dtr_fill_t *fill, dtr_dtype_t dtype, dtr_dtype_t via,
                                 dtr_dtype_t out, dtr_reduce_op_t op, int64_t count) {
    int64_t lanes = 1, olanes = 1;
    dtype = dtr__parts(dtype, &lanes);
    via = dtr__parts(via, &olanes);
    out = dtr__parts(out, &olanes);
    dtr__source_t s = {.fill = fill, .dtype = dtype, .lanes = (int)lanes, .op = op,
                       .count = count, .emax = 6, .out = out, .via = via};
    int bits = 0;
    while (bits < 62 && (INT64_C(1) << bits) < count) bits++;
    if ((dtype == DTR_F16 || via == DTR_F16 || out == DTR_F16) && 13 - bits < s.emax)
        s.emax = 13 - bits;
    int64_t m = dtr__imax(dtype);
    if (op == DTR_REDUCE_PRODUCT) {
        /* the largest b with b^count <= m */
        int64_t b = count <= 1 ? (m < 1000000 ? m : 1000000) : (int64_t)pow((double)m, 1.0 / (double)count);
        for (;; b--) {
            __int128 p = 1;
            int64_t k = 0;
            for (; k < count && p <= m; k++) p *= b;
            if (p <= m || b <= 1) break;
        }
        s.ilim = b < 1 ? 1 : b;
    } else {
        s.ilim = m / count;
    }
    return s;
}

/* Random contribution q of element e, as stored in the dtype. */
static dtr__value_t dtr__random(const dtr__source_t *s, int64_t e, int64_t q) {
    uint64_t h = dtr__hash(s->fill->seed, e, q), h2 = dtr__mix(h);
    dtr__value_t v = {0};
    v.byte = (uint8_t)h;
    if (dtr__is_int(s->dtype)) {
        bool sign = s->dtype != DTR_U8 && (h2 & 1);
        uint64_t lim = (uint64_t)s->ilim;
        if (s->op == DTR_REDUCE_MAX || s->op == DTR_REDUCE_MIN)
            v.i = dtr__iwrap(s->dtype, h);
        else if (s->op == DTR_REDUCE_PRODUCT)
            v.i = (int64_t)(1 + h % lim) * (sign ? -1 : 1);
        else if (s->dtype == DTR_U8)
            v.i = (int64_t)(h % (lim + 1));
        else
            v.i = (int64_t)(h % (2 * lim + 1) - lim); /* in [-lim, lim], unsigned on the way */
        v.f = (long double)v.i;
        return v;
    }
    double f = (double)(h >> 11) * 0x1p-53, x;
    if (s->op == DTR_REDUCE_PRODUCT) {
        double a = s->count > 8 ? 8.0 / (double)s->count : 1.0;
        x = exp2((2 * f - 1) * a);
    } else {
        x = ldexp(1 + f, s->emax - (int)((h2 >> 1) % 13));
    }
    if (h2 & 1) x = -x;
    unsigned char tmp[8];
    dtr__store(s->dtype, tmp, 0, x);
    v.f = dtr__load(s->dtype, tmp, 0);
    return v;
}

static dtr__value_t dtr__value_filled(const dtr__source_t *s, int64_t e, int64_t q);

/* Contribution q of value e (element e / lanes, its part e % lanes), whichever the fill,
 * as the target holds it: a cast rounds it to the target's dtype (floats only). */
static dtr__value_t dtr__value(const dtr__source_t *s, int64_t e, int64_t q) {
    dtr__value_t v = dtr__value_filled(s, e, q);
    unsigned char tmp[8];
    if (s->via != s->dtype) { /* the first cast, before the steps */
        dtr__store(s->via, tmp, 0, (double)v.f);
        v.f = dtr__load(s->via, tmp, 0);
    }
    if (s->out != s->via) { /* the last one, after them */
        dtr__store(s->out, tmp, 0, (double)v.f);
        v.f = dtr__load(s->out, tmp, 0);
    }
    return v;
}

/* Contribution q of value e as filled, in the source's dtype. */
static dtr__value_t dtr__value_filled(const dtr__source_t *s, int64_t e, int64_t q) {
    dtr__value_t v = {0};
    switch (s->fill->kind) {
    case DTR_FILL_RANDOM: return dtr__random(s, e, q);
    case DTR_FILL_GIVEN: {
        const dtr_fill_blocks_t *b = s->fill->given;
        size_t part = (size_t)b->esize / (size_t)s->lanes;
        const unsigned char *p = b->data + ((size_t)(q * b->numel * s->lanes + e)) * part;
        v.byte = p[0];
        if (dtr_dtype_info(s->dtype)->storage_only) return v;
        if (dtr__is_int(s->dtype)) {
            v.i = dtr__iload(s->dtype, p, 0);
            v.f = (long double)v.i;
        } else {
            v.f = dtr__load(s->dtype, p, 0);
        }
        return v;
    }
    default:
        v.byte = dtr__code(e);
        v.f = dtr__contribution(s->op, s->dtype, e, q, s->count);
        v.i = (int64_t)v.f;
        return v;
    }
}

/* ---- fill and check ------------------------------------------------------------------- */

/* The source's Partial mesh dims and their common op. */
static dtr_status_t dtr__partials(const dtr_spec_t *spec, bool *partial, dtr_reduce_op_t *op,
                                  int64_t *count, const char *func) {
    int mdims = dtr_mesh_ndims(spec->mesh), first = -1;
    *count = 1;
    *op = DTR_REDUCE_SUM;
    for (int i = 0; i < mdims; i++) {
        partial[i] = spec->placements[i].kind == DTR_PARTIAL;
        if (!partial[i]) continue;
        if (first >= 0 && spec->placements[i].op != *op)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "spec: mesh dims %d and %d are Partial with different ops; the "
                              "pattern needs one op",
                              first, i);
        if (first < 0) first = i;
        *op = spec->placements[i].op;
        *count *= dtr_mesh_size(spec->mesh, i);
    }
    return DTR_OK;
}

/* Records the last error again under `func` (what DTR_CHECK_AS does inside the library,
 * through the public dtr_last_error: this file links over libdtr.so). */
dtr_status_t dtr__again_as(dtr_status_t st, const char *func) {
    char detail[512];
    const char *rest = dtr_last_error();
    const char *colon = strstr(rest, ": ");
    if (strncmp(rest, "dtr_", 4) == 0 && colon != NULL) rest = colon + 2;
    snprintf(detail, sizeof detail, "%s", rest);
    return dtr__error(st, func, "%s", detail);
}

static dtr_status_t dtr__block(const dtr_spec_t *spec, int rank, size_t bytes, int64_t *coord,
                               dtr_layout_t *l, const char *func) {
    if (spec == NULL || spec->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "spec: must not be NULL");
    dtr_status_t st = dtr_mesh_coord(spec->mesh, rank, coord);
    if (st != DTR_OK) return dtr__again_as(st, __func__);
    DTR_CHECK(dtr_spec_layout_at(spec, coord, l));
    if ((int64_t)bytes != l->bytes)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "bytes: %zu, but rank %d's block is %lld bytes", bytes, rank,
                          (long long)l->bytes);
    return DTR_OK;
}

static const dtr_fill_t dtr__the_pattern = {.kind = DTR_FILL_PATTERN};

/* fill (NULL: the pattern) checked against spec. */
static dtr_status_t dtr__fill_arg(const dtr_fill_t **fill, const dtr_spec_t *spec,
                                  const char *func) {
    if (*fill == NULL) *fill = &dtr__the_pattern;
    const dtr_fill_t *f = *fill;
    if (f->kind != DTR_FILL_PATTERN && f->kind != DTR_FILL_RANDOM && f->kind != DTR_FILL_GIVEN)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "fill: kind %d is not a fill",
                          (int)f->kind);
    if (f->kind != DTR_FILL_GIVEN) return DTR_OK;
    const dtr_fill_blocks_t *b = f->given;
    if (b == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "fill: given blocks are NULL");
    if (b->dtype != spec->dtype || b->ndim != spec->ndim ||
        memcmp(b->shape, spec->shape, (size_t)spec->ndim * sizeof *b->shape) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "fill: the given blocks were loaded for another shape or dtype");
    return DTR_OK;
}

/* dtr_fill, its errors under func (the function the caller called). */
static dtr_status_t dtr__fill(const dtr_spec_t *spec, const dtr_fill_t *fill, int rank,
                              void *buf, size_t bytes, const char *func) {
    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_layout_t l;
    DTR_CHECK(dtr__block(spec, rank, bytes, coord, &l, func));
    if (buf == NULL && bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "buf: must not be NULL");
    DTR_CHECK(dtr__fill_arg(&fill, spec, func));
    bool partial[DTR_MAX_MESH_DIMS];
    dtr_reduce_op_t op;
    int64_t count;
    DTR_CHECK(dtr__partials(spec, partial, &op, &count, func));
    if (fill->kind == DTR_FILL_GIVEN && fill->given->count != count)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "fill: the given blocks have %lld contributions, spec %lld",
                          (long long)fill->given->count, (long long)count);
    int64_t q = dtr__contribution_index(spec, coord, NULL);
    dtr__source_t s = dtr__source(fill, spec->dtype, spec->dtype, spec->dtype, op, count);
    bool bytewise = dtr_dtype_info(spec->dtype)->storage_only, ints = dtr__is_int(spec->dtype);
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t j = 0; j < l.numel; j++, dtr__next(&l, idx)) {
        int64_t e = dtr__global(spec, &l, idx);
        for (int c = 0; c < s.lanes; c++) {
            int64_t k = j * s.lanes + c;
            dtr__value_t v = dtr__value(&s, e * s.lanes + c, q);
            if (bytewise)
                ((uint8_t *)buf)[k] = v.byte;
            else if (ints)
                dtr__istore(spec->dtype, buf, k, v.i);
            else
                dtr__store(s.dtype, buf, k, (double)v.f);
        }
    }
    return DTR_OK;
}

dtr_status_t dtr_fill(const dtr_spec_t *spec, const dtr_fill_t *fill, int rank, void *buf,
                      size_t bytes) {
    return dtr__fill(spec, fill, rank, buf, bytes, __func__);
}

dtr_status_t dtr_pattern_fill(const dtr_spec_t *spec, int rank, void *buf, size_t bytes) {
    return dtr__fill(spec, NULL, rank, buf, bytes, __func__);
}

/* Units in the last place at 1, relative: 2^-(mantissa bits) (the pattern's tolerance). */
static double dtr__ulp(dtr_dtype_t dtype) {
    switch (dtype) {
    case DTR_F64: return 0x1p-52;
    case DTR_F16: return 0x1p-10;
    case DTR_BF16: return 0x1p-7;
    default: return 0x1p-23;
    }
}

/* The smallest positive (subnormal) value of a float dtype. */
static double dtr__tiny(dtr_dtype_t dtype) {
    switch (dtype) {
    case DTR_F64: return 0x1p-1074;
    case DTR_F16: return 0x1p-24;
    case DTR_BF16: return 0x1p-133;
    default: return 0x1p-149;
    }
}

/* What the check compares one element with. */
typedef struct {
    const dtr__source_t *s;
    const dtr_spec_t *src;
    const bool *reduced;
    int64_t nreduced, divisor;
} dtr__reference_t;

typedef struct {
    long double f, abs; /* the reduction; the sum of the magnitudes */
    int64_t i;
} dtr__want_t;

/* Reduces element e's contributions over the reduced mesh dims (the others at coord). */
static dtr__want_t dtr__want(const dtr__reference_t *r, int64_t e, const int64_t *coord) {
    const dtr_spec_t *src = r->src;
    int mdims = dtr_mesh_ndims(src->mesh);
    dtr_reduce_op_t op = r->s->op;
    dtr_dtype_t t = src->dtype;
    int64_t c[DTR_MAX_MESH_DIMS];
    memcpy(c, coord, sizeof c);
    for (int i = 0; i < mdims; i++)
        if (r->reduced[i]) c[i] = 0;
    dtr__want_t w = {0};
    bool first = true;
    for (;;) {
        dtr__value_t v = dtr__value(r->s, e, dtr__contribution_index(src, c, NULL));
        w.abs += fabsl(v.f);
        if (first) {
            w.f = v.f;
            w.i = v.i;
        } else if (op == DTR_REDUCE_MAX) {
            w.f = v.f > w.f ? v.f : w.f;
            w.i = v.i > w.i ? v.i : w.i;
        } else if (op == DTR_REDUCE_MIN) {
            w.f = v.f < w.f ? v.f : w.f;
            w.i = v.i < w.i ? v.i : w.i;
        } else if (op == DTR_REDUCE_PRODUCT) {
            w.f *= v.f;
            w.i = dtr__iwrap(t, (uint64_t)w.i * (uint64_t)v.i);
        } else {
            w.f += v.f;
            w.i = dtr__iwrap(t, (uint64_t)w.i + (uint64_t)v.i);
        }
        first = false;
        int i = mdims - 1;
        for (; i >= 0; i--) {
            if (!r->reduced[i]) continue;
            if (++c[i] < dtr_mesh_size(src->mesh, i)) break;
            c[i] = 0;
        }
        if (i < 0) break;
    }
    if (op == DTR_REDUCE_AVG) {
        w.f /= (long double)r->nreduced;
        w.abs /= (long double)r->nreduced;
        w.i = dtr__iwrap(t, (uint64_t)(w.i / r->nreduced));
    }
    w.f /= (long double)r->divisor;
    w.abs /= (long double)r->divisor;
    return w;
}

static dtr_status_t dtr__check_args(const dtr_spec_t *src, const dtr_spec_t *dst,
                                    dtr_dtype_t via, const dtr_fill_t **fill, const void *buf,
                                    size_t bytes, const char *func) {
    if (buf == NULL && bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "buf: must not be NULL");
    /* a change between meshes (dst on another mesh) ends in Shard or Replicate: every target
     * element is then the whole reduction, whatever the meshes */
    bool other_mesh = src->mesh != NULL && dst->mesh != NULL && !dtr_mesh_equal(src->mesh, dst->mesh);
    for (int i = 0; other_mesh && i < dtr_mesh_ndims(dst->mesh); i++)
        if (dst->placements[i].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "dst: placements[%d] is Partial on another mesh than src's", i);
    if (src->mesh == NULL || dst->mesh == NULL || !dtr__castable(src->dtype, via) ||
        !dtr__castable(via, dst->dtype) || src->ndim != dst->ndim ||
        memcmp(src->shape, dst->shape, (size_t)src->ndim * 8) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "src, dst: must share the shape, and the dtype but for a cast between "
                          "float (or between complex) dtypes (through %s)",
                          dtr_dtype_name(via) != NULL ? dtr_dtype_name(via) : "no dtype");
    return dtr__fill_arg(fill, src, func);
}

/* Shard -> P(sum): does the rank at coord keep the element at idx of its block l (else it
 * holds a zero)? It keeps the elements whose source holders share its coordinates on the
 * mesh dims that become Partial (docs/semantics.md). */
static bool dtr__kept(const dtr_spec_t *src, const dtr_spec_t *dst, const int64_t *coord,
                      const dtr_layout_t *l, const int64_t *idx) {
    int64_t lo[DTR_MAX_TENSOR_DIMS] = {0}, len[DTR_MAX_TENSOR_DIMS];
    memcpy(len, src->shape, (size_t)src->ndim * sizeof *len);
    for (int k = 0; k < DTR_MAX_MESH_DIMS; k++) /* (each tensor dim in its shard order) */
        for (int i = 0; i < dtr_mesh_ndims(src->mesh); i++) {
            dtr_placement_t p = src->placements[i];
            if (p.kind != DTR_SHARD || p.order != k) continue;
            int d = p.dim;
            int64_t n = dtr_mesh_size(src->mesh, i), g = l->global_offset[d] + idx[d];
            int64_t c = (g - lo[d]) / ((len[d] + n - 1) / n), size, off;
            dtr_chunk(len[d], n, c, &size, &off);
            if (dst->placements[i].kind == DTR_PARTIAL && c != coord[i]) return false;
            lo[d] += off;
            len[d] = size;
        }
    return true;
}

/* dtr_fill_check, its errors under func; via: the steps' dtype. */
static dtr_status_t dtr__check(const dtr_spec_t *src, const dtr_spec_t *dst, dtr_dtype_t via,
                               const dtr_fill_t *fill, int rank, const void *buf, size_t bytes,
                               dtr_pattern_report_t *report, const char *func) {
    DTR_CHECK_PTR(report, func);
    DTR_CHECK_PTR(src, func);
    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_layout_t l;
    DTR_CHECK(dtr__block(dst, rank, bytes, coord, &l, func));
    DTR_CHECK(dtr__check_args(src, dst, via, &fill, buf, bytes, func));
    bool partial[DTR_MAX_MESH_DIMS];
    dtr_reduce_op_t op;
    int64_t count;
    DTR_CHECK(dtr__partials(src, partial, &op, &count, func));
    if (fill->kind == DTR_FILL_GIVEN && fill->given->count != count)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "fill: the given blocks have %lld contributions, src %lld",
                          (long long)fill->given->count, (long long)count);
    int mdims = dtr_mesh_ndims(src->mesh);
    /* Mesh dims reduced (Partial in src only) are enumerated; the ones Partial in both keep
     * this rank's coordinate; R -> P(sum) dims divide. */
    bool reduced[DTR_MAX_MESH_DIMS] = {false}, zero_fill = false;
    int64_t divisor = 1, divisions = 0, nreduced = 1;
    bool same_mesh = dtr_mesh_equal(src->mesh, dst->mesh);
    for (int i = 0; i < mdims; i++) {
        /* (on another mesh every Partial of src is reduced: dst has none) */
        dtr_placement_t t = same_mesh ? dst->placements[i] : dtr_replicate();
        if (partial[i] && t.kind != DTR_PARTIAL) {
            reduced[i] = true;
            nreduced *= dtr_mesh_size(src->mesh, i);
        }
        zero_fill |= src->placements[i].kind == DTR_SHARD && t.kind == DTR_PARTIAL;
        if (src->placements[i].kind == DTR_REPLICATE && t.kind == DTR_PARTIAL &&
            t.op == DTR_REDUCE_SUM && dtr_mesh_size(src->mesh, i) > 1) {
            divisor *= dtr_mesh_size(src->mesh, i);
            divisions++;
        }
    }
    if (op == DTR_REDUCE_AVG && nreduced > 1) divisions++;
    dtr__source_t s = dtr__source(fill, src->dtype, via, dst->dtype, op, count);
    dtr__reference_t ref = {&s, src, reduced, nreduced, divisor};
    dtr_dtype_t t = s.out; /* the target's, which the buffer holds */
    bool bytewise = dtr_dtype_info(t)->storage_only, ints = dtr__is_int(t);
    /* the coarser of the steps' and the target's dtype bounds the rounding */
    dtr_dtype_t u = !bytewise && !ints && dtr__ulp(s.via) > dtr__ulp(t) ? s.via : t;
    bool pattern = fill->kind == DTR_FILL_PATTERN;
    bool selects = op == DTR_REDUCE_MAX || op == DTR_REDUCE_MIN;
    dtr_pattern_report_t rep = {0};
    rep.first = -1;
    double k = (double)(nreduced + divisions + 1), tiny = 0;
    if (pattern) {
        /* exact but for the divisions (the pattern's sum splits are exact) */
        rep.tolerance = divisor > 1 && !bytewise ? (double)(count + divisions + 1) * dtr__ulp(u) : 0;
        rep.unit = dtr__ulp(u) / 2;
    } else if (!bytewise && !ints) {
        rep.unit = dtr__ulp(u) / 2;
        bool exact = (nreduced == 1 || selects) && divisor == 1;
        rep.tolerance = exact ? 0 : k * rep.unit;
        rep.sum_scale = !exact && (op == DTR_REDUCE_SUM || op == DTR_REDUCE_AVG);
        tiny = exact ? 0 : k * dtr__tiny(u);
    }
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    bool zero = false;
    for (int64_t jv = 0; jv < l.numel * s.lanes; jv++) {
        /* value jv: element j, its part jv % lanes */
        int64_t j = jv / s.lanes, e = dtr__global(dst, &l, idx) * s.lanes + jv % s.lanes;
        double want, got;
        bool bad;
        if (zero_fill && jv % s.lanes == 0) zero = !dtr__kept(src, dst, coord, &l, idx);
        if (zero) {
            want = 0;
            got = bytewise ? ((const uint8_t *)buf)[jv]
                  : ints   ? (double)dtr__iload(t, buf, jv)
                           : dtr__load(t, buf, jv);
            bad = got != 0; /* -0.0 is no zero fill either */
            if (!bytewise && !ints && signbit(got)) bad = true;
        } else if (bytewise) {
            /* storage-only dtypes are never reduced: Partial dims are kept */
            want = dtr__value(&s, e, dtr__contribution_index(src, coord, NULL)).byte;
            got = ((const uint8_t *)buf)[jv];
            bad = got != want;
        } else if (ints && !pattern) {
            dtr__want_t w = dtr__want(&ref, e, coord);
            int64_t g = dtr__iload(t, buf, jv);
            want = (double)w.i;
            got = (double)g;
            bad = g != w.i;
        } else {
            dtr__want_t w = dtr__want(&ref, e, coord);
            want = (double)w.f;
            got = dtr__load(t, buf, jv);
            if (rep.tolerance == 0) {
                bad = !(got == want) && !(isnan(got) && isnan(want));
            } else {
                long double scale = rep.sum_scale ? w.abs : fabsl(w.f);
                long double err = fabsl((long double)got - w.f);
                bad = !(err <= rep.tolerance * scale + tiny) && !(got == want);
                double ratio = scale > 0 ? (double)(err / scale) : (err > 0 ? INFINITY : 0);
                if (ratio > rep.worst || isnan(ratio)) rep.worst = ratio;
            }
        }
        rep.checked++;
        if (bad) {
            if (rep.mismatches == 0) {
                rep.first = j;
                for (int d = 0; d < dst->ndim; d++) rep.first_global[d] = l.global_offset[d] + idx[d];
                rep.got = got;
                rep.want = want;
            }
            rep.mismatches++;
        }
        if (jv % s.lanes == s.lanes - 1) dtr__next(&l, idx);
    }
    *report = rep;
    return DTR_OK;
}

dtr_status_t dtr_fill_check(const dtr_spec_t *src, const dtr_spec_t *dst, const dtr_fill_t *fill,
                            int rank, const void *buf, size_t bytes,
                            dtr_pattern_report_t *report) {
    return dtr__check(src, dst, dst->dtype, fill, rank, buf, bytes, report, __func__);
}

dtr_status_t dtr_fill_check_via(const dtr_spec_t *src, const dtr_spec_t *dst, dtr_dtype_t via,
                                const dtr_fill_t *fill, int rank, const void *buf, size_t bytes,
                                dtr_pattern_report_t *report) {
    return dtr__check(src, dst, via, fill, rank, buf, bytes, report, __func__);
}

dtr_status_t dtr_pattern_check(const dtr_spec_t *src, const dtr_spec_t *dst, int rank,
                               const void *buf, size_t bytes, dtr_pattern_report_t *report) {
    return dtr__check(src, dst, dst->dtype, NULL, rank, buf, bytes, report, __func__);
}

double dtr__fill_element(const dtr_fill_t *fill, dtr_dtype_t dtype, int64_t e) {
    dtr__source_t s = dtr__source(fill != NULL ? fill : &dtr__the_pattern, dtype, dtype, dtype,
                                  DTR_REDUCE_SUM, 1);
    return (double)dtr__value_filled(&s, e, 0).f;
}
