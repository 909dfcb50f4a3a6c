/* The test pattern of pattern.h: fill a source block, check a target block. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "dtensor/internal.h"
#include "tools/pattern/pattern.h"

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

static double dtr__reduce2(dtr_reduce_op_t op, double a, double b) {
    switch (op) {
    case DTR_REDUCE_MAX: return a > b ? a : b;
    case DTR_REDUCE_MIN: return a < b ? a : b;
    case DTR_REDUCE_PRODUCT: return a * b;
    default: return a + b;
    }
}

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
static dtr_status_t dtr__again_as(dtr_status_t st, const char *func) {
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

/* Global row-major index of local element k, stepping idx (local coordinates). */
static int64_t dtr__global(const dtr_spec_t *spec, const dtr_layout_t *l, const int64_t *idx) {
    int64_t e = 0;
    for (int d = 0; d < spec->ndim; d++) e = e * spec->shape[d] + l->global_offset[d] + idx[d];
    return e;
}

static void dtr__next(const dtr_layout_t *l, int64_t *idx) {
    for (int d = l->ndim - 1; d >= 0; d--) {
        if (++idx[d] < l->local_shape[d]) break;
        idx[d] = 0;
    }
}

dtr_status_t dtr_pattern_fill(const dtr_spec_t *spec, int rank, void *buf, size_t bytes) {
    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_layout_t l;
    DTR_CHECK(dtr__block(spec, rank, bytes, coord, &l, __func__));
    if (buf == NULL && bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "buf: must not be NULL");
    bool partial[DTR_MAX_MESH_DIMS];
    dtr_reduce_op_t op;
    int64_t count;
    DTR_CHECK(dtr__partials(spec, partial, &op, &count, __func__));
    int64_t q = 0;
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++)
        if (partial[i]) q = q * dtr_mesh_size(spec->mesh, i) + coord[i];
    bool bytewise = dtr_dtype_info(spec->dtype)->storage_only;
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < l.numel; k++, dtr__next(&l, idx)) {
        int64_t e = dtr__global(spec, &l, idx);
        if (bytewise)
            ((uint8_t *)buf)[k] = dtr__code(e);
        else
            dtr__store(spec->dtype, buf, k, dtr__contribution(op, spec->dtype, e, q, count));
    }
    return DTR_OK;
}

/* Units in the last place, relative: 2^-(mantissa bits + 1). */
static double dtr__ulp(dtr_dtype_t dtype) {
    switch (dtype) {
    case DTR_F64: return 0x1p-52;
    case DTR_F16: return 0x1p-10;
    case DTR_BF16: return 0x1p-7;
    default: return 0x1p-23;
    }
}

dtr_status_t dtr_pattern_check(const dtr_spec_t *src, const dtr_spec_t *dst, int rank,
                               const void *buf, size_t bytes, dtr_pattern_report_t *report) {
    DTR_CHECK_PTR(report, __func__);
    DTR_CHECK_PTR(src, __func__);
    int64_t coord[DTR_MAX_MESH_DIMS];
    dtr_layout_t l;
    DTR_CHECK(dtr__block(dst, rank, bytes, coord, &l, __func__));
    if (buf == NULL && bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "buf: must not be NULL");
    if (src->mesh == NULL || !dtr_mesh_equal(src->mesh, dst->mesh) || src->dtype != dst->dtype ||
        src->ndim != dst->ndim || memcmp(src->shape, dst->shape, (size_t)src->ndim * 8) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "src, dst: must share the mesh, shape and dtype");
    bool partial[DTR_MAX_MESH_DIMS];
    dtr_reduce_op_t op;
    int64_t count;
    DTR_CHECK(dtr__partials(src, partial, &op, &count, __func__));
    int mdims = dtr_mesh_ndims(src->mesh);
    /* Mesh dims reduced (Partial in src only) are enumerated; the ones Partial in both keep
     * this rank's coordinate; R -> P(sum) dims divide. */
    bool reduced[DTR_MAX_MESH_DIMS] = {false};
    int64_t divisor = 1, divisions = 0, nreduced = 1;
    for (int i = 0; i < mdims; i++) {
        dtr_placement_t t = dst->placements[i];
        if (partial[i] && t.kind != DTR_PARTIAL) {
            reduced[i] = true;
            nreduced *= dtr_mesh_size(src->mesh, i);
        }
        if (!partial[i] && t.kind == DTR_PARTIAL && t.op == DTR_REDUCE_SUM &&
            dtr_mesh_size(src->mesh, i) > 1) {
            divisor *= dtr_mesh_size(src->mesh, i);
            divisions++;
        }
    }
    bool bytewise = dtr_dtype_info(src->dtype)->storage_only;
    dtr_pattern_report_t rep = {0};
    rep.first = -1;
    rep.tolerance = divisions > 0 && !bytewise ? (double)(count + divisions + 1) * dtr__ulp(src->dtype) : 0;
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < l.numel; k++, dtr__next(&l, idx)) {
        int64_t e = dtr__global(dst, &l, idx);
        double want, got;
        if (bytewise) {
            want = dtr__code(e);
            got = ((const uint8_t *)buf)[k];
        } else {
            int64_t c[DTR_MAX_MESH_DIMS];
            memcpy(c, coord, sizeof c);
            for (int i = 0; i < mdims; i++)
                if (reduced[i]) c[i] = 0;
            double acc = 0;
            bool first = true;
            for (;;) {
                int64_t q = 0;
                for (int i = 0; i < mdims; i++)
                    if (partial[i]) q = q * dtr_mesh_size(src->mesh, i) + c[i];
                double v = dtr__contribution(op, src->dtype, e, q, count);
                acc = first ? v : dtr__reduce2(op, acc, v);
                first = false;
                int i = mdims - 1;
                for (; i >= 0; i--) {
                    if (!reduced[i]) continue;
                    if (++c[i] < dtr_mesh_size(src->mesh, i)) break;
                    c[i] = 0;
                }
                if (i < 0) break;
            }
            if (op == DTR_REDUCE_AVG) acc /= (double)nreduced;
            want = acc / (double)divisor;
            got = dtr__load(src->dtype, buf, k);
        }
        rep.checked++;
        bool bad = rep.tolerance > 0 ? !(fabs(got - want) <= rep.tolerance * fabs(want))
                                     : !(got == want);
        if (bad) {
            if (rep.mismatches == 0) {
                rep.first = k;
                for (int d = 0; d < dst->ndim; d++) rep.first_global[d] = l.global_offset[d] + idx[d];
                rep.got = got;
                rep.want = want;
            }
            rep.mismatches++;
        }
    }
    *report = rep;
    return DTR_OK;
}
