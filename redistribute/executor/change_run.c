/* A change of any form run (dtr_change_run, dtr_change_start): the form's own call, and
 * before it, for a block-scaled change, the source side (the blocks' amax all-reduced on the
 * source mesh, the scales, the quantized blocks). */
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "redistribute/executor/internal.h"

/* The arrays, checked; an error naming them under func. */
static dtr_status_t dtr__change_arrays(const dtr_change_t *change, const void *const *in,
                                       const size_t *in_bytes, void *const *out,
                                       const size_t *out_bytes, const char *func) {
    DTR_CHECK_PTR(change, func);
    if (in == NULL || in_bytes == NULL || out == NULL || out_bytes == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s: must not be NULL (one entry per "
                          "tensor; an entry may be NULL)",
                          in == NULL ? "in" : in_bytes == NULL ? "in_bytes"
                          : out == NULL ? "out" : "out_bytes");
    return DTR_OK;
}

/* The form's own call: blocking where req is NULL, else its _start form. */
static dtr_status_t dtr__change_form_call(dtr_context_t *ctx, const dtr_change_t *change,
                                          const void *const *in, const size_t *in_bytes,
                                          void *const *out, const size_t *out_bytes,
                                          dtr_request_t **req) {
    switch (dtr_change_form(change)) {
    case DTR_CHANGE_ONE: {
        const dtr_plan_t *p = dtr_change_plan(change);
        return req == NULL ? dtr_redistribute(ctx, p, in[0], in_bytes[0], out[0], out_bytes[0])
                           : dtr_redistribute_start(ctx, p, in[0], in_bytes[0], out[0],
                                                    out_bytes[0], req);
    }
    case DTR_CHANGE_BATCH: {
        const dtr_batch_plan_t *p = dtr_change_batch_plan(change);
        return req == NULL ? dtr_redistribute_batch(ctx, p, in, in_bytes, out, out_bytes)
                           : dtr_redistribute_batch_start(ctx, p, in, in_bytes, out, out_bytes,
                                                          req);
    }
    case DTR_CHANGE_CROSS: {
        const dtr_cross_plan_t *p = dtr_change_cross_plan(change);
        return req == NULL ? dtr_redistribute_cross(ctx, p, in[0], in_bytes[0], out[0],
                                                    out_bytes[0])
                           : dtr_redistribute_cross_start(ctx, p, in[0], in_bytes[0], out[0],
                                                          out_bytes[0], req);
    }
    default: {
        const dtr_cross_plan_t *p = dtr_change_cross_plan(change);
        return req == NULL ? dtr_redistribute_cross_batch(ctx, p, in, in_bytes, out, out_bytes)
                           : dtr_redistribute_cross_batch_start(ctx, p, in, in_bytes, out,
                                                                out_bytes, req);
    }
    }
}

/* Where tensor i's parts lie in the scratch of a block-scaled run on this rank. */
typedef struct {
    int32_t *amax, *amax_all;
    float *scales;
    uint8_t *q;
    int64_t nscales;
    dtr_layout_t box;
} dtr__fp8_part_t;

static size_t dtr__up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The scratch for every tensor's parts on a rank of the source mesh; parts[i] set. */
static dtr_status_t dtr__fp8_scratch(dtr__change_fp8_t *f, int rank, dtr__fp8_part_t *parts,
                                     const char *func) {
    size_t need = 0;
    for (int i = 0; i < f->n; i++) {
        DTR_CHECK(dtr_spec_layout(&f->src[i], rank, &parts[i].box));
        int64_t ns = 1;
        for (int k = 0; k < f->amax_src[i].ndim; k++) ns *= f->amax_src[i].shape[k];
        parts[i].nscales = ns;
        need += 3 * dtr__up64((size_t)ns * 4) + dtr__up64((size_t)parts[i].box.numel);
    }
    if (need == 0) need = 64; /* (empty tensors: still an address, never NULL plus 0) */
    if (need > f->scratch_bytes) {
        void *p = realloc(f->scratch, need);
        if (p == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%zu bytes of block-scaling "
                              "scratch", need);
        f->scratch = p;
        f->scratch_bytes = need;
    }
    char *at = f->scratch;
    for (int i = 0; i < f->n; i++) {
        size_t s = dtr__up64((size_t)parts[i].nscales * 4);
        parts[i].amax = (int32_t *)at;
        parts[i].amax_all = (int32_t *)(at + s);
        parts[i].scales = (float *)(at + 2 * s);
        parts[i].q = (uint8_t *)(at + 3 * s);
        at += 3 * s + dtr__up64((size_t)parts[i].box.numel);
    }
    return DTR_OK;
}

/* This rank's inputs checked: host memory, each in_bytes[i] its source block's size. */
static dtr_status_t dtr__fp8_inputs(dtr_context_t *ctx, const dtr__change_fp8_t *f,
                                    const dtr__fp8_part_t *parts, const void *const *in,
                                    const size_t *in_bytes, const char *func) {
    if (strcmp(dtr_context_memory(ctx), "host") != 0)
        return dtr__error(DTR_ERR_UNSUPPORTED, func, "ctx moves %s memory; block-scaled fp8 "
                          "quantizes in host memory", dtr_context_memory(ctx));
    for (int i = 0; i < f->n; i++) {
        int64_t want = parts[i].box.bytes;
        if ((int64_t)in_bytes[i] != want || (want > 0 && in[i] == NULL))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "in_bytes[%d]: %zu%s, but this "
                              "rank's block of src[%d] holds %lld", i, in_bytes[i],
                              in[i] == NULL ? " (in[i] NULL)" : "", i, (long long)want);
    }
    return DTR_OK;
}

/* The source side on a rank of the source mesh: each block's amax over the mesh, the
 * scales and the quantized block; qin and qin_bytes (2n) the move's inputs. */
static dtr_status_t dtr__fp8_source(dtr_context_t *ctx, dtr__change_fp8_t *f,
                                    const void *const *in, const size_t *in_bytes,
                                    const void **qin, size_t *qin_bytes, const char *func) {
    int n = f->n;
    dtr__fp8_part_t *parts = calloc((size_t)n, sizeof *parts);
    const void **ain = calloc((size_t)n, sizeof *ain);
    void **aout = calloc((size_t)n, sizeof *aout);
    size_t *abytes = calloc((size_t)n, sizeof *abytes);
    dtr_status_t st = parts == NULL || ain == NULL || aout == NULL || abytes == NULL
                          ? dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "block-scaling arrays")
                          : dtr__fp8_scratch(f, ctx->rank, parts, func);
    if (st == DTR_OK) st = dtr__fp8_inputs(ctx, f, parts, in, in_bytes, func);
    if (st != DTR_OK) { /* the amax's other ranks fail at once */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", dtr__last_detail());
        dtr_refuse(ctx, f->src[0].mesh, DTR_DIMS_MESH, NULL, st, msg);
        st = dtr__error(st, func, "%s", msg);
    }
    for (int i = 0; st == DTR_OK && i < n; i++) {
        memset(parts[i].amax, 0, (size_t)parts[i].nscales * 4);
        dtr__block_amax(f->src[i].dtype, in[i], &parts[i].box, f->src[i].shape, f->block,
                        parts[i].amax);
        ain[i] = parts[i].amax;
        aout[i] = parts[i].amax_all;
        abytes[i] = (size_t)parts[i].nscales * 4;
    }
    if (st == DTR_OK)
        st = dtr_redistribute_batch(ctx, f->amax, ain, abytes, aout, abytes);
    for (int i = 0; st == DTR_OK && i < n; i++) {
        dtr__block_scales(f->to[i], parts[i].amax_all, parts[i].nscales, parts[i].scales);
        dtr__block_quantize(f->src[i].dtype, in[i], &parts[i].box, f->src[i].shape, f->block,
                            f->to[i], parts[i].scales, parts[i].q);
        qin[i] = parts[i].q;
        qin_bytes[i] = (size_t)parts[i].box.numel;
        qin[n + i] = parts[i].scales;
        qin_bytes[n + i] = (size_t)parts[i].nscales * 4;
    }
    free(parts);
    free(ain);
    free(aout);
    free(abytes);
    return st;
}

/* A block-scaled change: the source side on the source mesh's ranks, then the move of the
 * quantized tensors and their scales (the form's own call); a source rank that failed makes
 * the move's agreement fail on every rank of both meshes. */
static dtr_status_t dtr__fp8_call(dtr_context_t *ctx, const dtr_change_t *change,
                                  dtr__change_fp8_t *f, const void *const *in,
                                  const size_t *in_bytes, void *const *out,
                                  const size_t *out_bytes, dtr_request_t **req,
                                  const char *func) {
    const void **qin = f->qin;
    size_t *qin_bytes = f->qin_bytes;
    f->sent = false;
    memset(qin, 0, 2 * (size_t)f->n * sizeof *qin);
    memset(qin_bytes, 0, 2 * (size_t)f->n * sizeof *qin_bytes);
    const dtr_mesh_t *a = f->src[0].mesh;
    dtr_spec_t d;
    dtr_status_t st = dtr_change_dst(change, 0, &d);
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (st == DTR_OK && dtr_mesh_coord(a, ctx->rank, coord) == DTR_OK)
        st = dtr__fp8_source(ctx, f, in, in_bytes, qin, qin_bytes, func);
    if (st != DTR_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", dtr__last_detail());
        bool cross = dtr_change_form(change) == DTR_CHANGE_CROSS_BATCH;
        dtr_refuse(ctx, a, DTR_DIMS_MESH, cross ? d.mesh : NULL, st, msg);
        st = dtr__error(st, func, "%s", msg);
    } else {
        st = dtr__change_form_call(ctx, change, qin, qin_bytes, out, out_bytes, req);
    }
    f->sent = st == DTR_OK; /* (the move done, or started: dtr_change_sent) */
    return st;
}

dtr_status_t dtr_change_run(dtr_context_t *ctx, const dtr_change_t *change,
                            const void *const *in, const size_t *in_bytes, void *const *out,
                            const size_t *out_bytes) {
    static const char *const F = "dtr_change_run";
    DTR_CHECK(dtr__change_arrays(change, in, in_bytes, out, out_bytes, F));
    dtr__change_fp8_t *f = dtr__change_fp8(change);
    if (f != NULL) return dtr__fp8_call(ctx, change, f, in, in_bytes, out, out_bytes, NULL, F);
    DTR_CHECK_AS(dtr__change_form_call(ctx, change, in, in_bytes, out, out_bytes, NULL), F);
    return DTR_OK;
}

dtr_status_t dtr_change_start(dtr_context_t *ctx, const dtr_change_t *change,
                              const void *const *in, const size_t *in_bytes, void *const *out,
                              const size_t *out_bytes, dtr_request_t **req) {
    static const char *const F = "dtr_change_start";
    DTR_CHECK(dtr__change_arrays(change, in, in_bytes, out, out_bytes, F));
    DTR_CHECK_PTR(req, F);
    dtr__change_fp8_t *f = dtr__change_fp8(change);
    if (f != NULL) return dtr__fp8_call(ctx, change, f, in, in_bytes, out, out_bytes, req, F);
    DTR_CHECK_AS(dtr__change_form_call(ctx, change, in, in_bytes, out, out_bytes, req), F);
    return DTR_OK;
}

dtr_status_t dtr_change_sent(const dtr_change_t *change, int i, dtr_spec_t *spec,
                             const void **buf, size_t *bytes) {
    static const char *const F = "dtr_change_sent";
    DTR_CHECK_PTR(change, F);
    DTR_CHECK_PTR(spec, F);
    DTR_CHECK_PTR(buf, F);
    DTR_CHECK_PTR(bytes, F);
    dtr__change_fp8_t *f = dtr__change_fp8(change);
    if (f == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "change: not block-scaled (it sends "
                          "the caller's own blocks)");
    if (i < 0 || i >= 2 * f->n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "i: %d, the change sends %d tensors "
                          "(its %d quantized ones, then their scales)", i, 2 * f->n, f->n);
    if (!f->sent)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, F, "change: no call of it has succeeded "
                          "on this rank yet (or the last one failed)");
    if (i < f->n) {
        *spec = f->src[i];
        spec->dtype = f->to[i];
    } else {
        *spec = f->amax_dst[i - f->n];
        spec->dtype = DTR_F32;
    }
    *buf = f->qin[i];
    *bytes = f->qin_bytes[i];
    return DTR_OK;
}
