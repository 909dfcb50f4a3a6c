/*
 * Scratch memory that only grows, and the plain local work on the context's memory (zero,
 * copy, to and from host, divide, free): on host memory here, on a memory space
 * (dtr_context_set_memory) through its table, so no caller touches device memory itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "runtime/context.h"

/* The byte new host scratch is filled with (not zero: see dtr__reserve). */
#define DTR__SCRATCH_FILL 0xa5

/* Grows a scratch buffer to `need` bytes. On a memory space the old contents are not kept
 * (no caller needs them: a buffer grows before it is filled). */
dtr_status_t dtr__reserve(dtr_context_t *ctx, void **p, int64_t *cap, int64_t need,
                          const char *what) {
    if (need <= *cap) return DTR_OK;
    if (ctx->mem != NULL) {
        void *q = NULL;
        dtr_status_t st = ctx->mem->alloc(ctx->mem_state, need > 0 ? need : 1, &q);
        if (st != DTR_OK)
            return dtr__error(st, "dtr_redistribute", "%s: cannot grow scratch to %lld bytes of "
                              "%s memory: %s", what, (long long)need, ctx->mem->name,
                              dtr_last_error());
        ctx->mem->free(ctx->mem_state, *p);
        *p = q;
        *cap = need;
        return DTR_OK;
    }
    void *q = realloc(*p, (size_t)(need > 0 ? need : 1));
    if (q == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute",
                          "%s: cannot grow scratch to %lld bytes", what, (long long)need);
    /* Touch the new pages now: the first run pays for the page faults, later runs do not.
     * With bytes that are not zero: the baseline (dtr_redistribute_baseline) moves what the
     * scratch holds, and on this project's machines zeros move faster than data (a 16 MiB
     * S(0) -> R on 4 ranks: 1.6 ms of zeros against 2.8 ms of 0xa5 or of a real tensor),
     * which made every large call look 1.7x slower than its collectives. */
    memset((char *)q + *cap, DTR__SCRATCH_FILL, (size_t)(need - *cap));
    *p = q;
    *cap = need;
    return DTR_OK;
}

/* ---- local operations on the context's memory ------------------------------------- */

dtr_status_t dtr__m_fail(const dtr_context_t *ctx, dtr_status_t st, const char *op) {
    char detail[400];
    snprintf(detail, sizeof detail, "%s", dtr_last_error());
    return dtr__error(st, "dtr_redistribute", "%s memory: %s failed: %s", ctx->mem->name, op,
                      detail);
}

dtr_status_t dtr__m_zero(dtr_context_t *ctx, void *p, int64_t bytes) {
    if (bytes <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        memset(p, 0, (size_t)bytes);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->zero(ctx->mem_state, p, bytes);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "zero");
}

/* memcpy within the context's memory */
dtr_status_t dtr__m_copy(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes) {
    if (bytes <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        memcpy(dst, src, (size_t)bytes);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->copy(ctx->mem_state, dst, src, bytes, DTR_COPY_WITHIN);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy");
}

/* between host memory and the context's (to_host: from the space into host) */
dtr_status_t dtr__m_host(dtr_context_t *ctx, void *dst, const void *src, int64_t bytes,
                         bool to_host) {
    if (ctx->mem == NULL) return dtr__m_copy(ctx, dst, src, bytes);
    dtr_status_t st = ctx->mem->copy(ctx->mem_state, dst, src, bytes,
                                     to_host ? DTR_COPY_TO_HOST : DTR_COPY_FROM_HOST);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, to_host ? "copy to host" : "copy from host");
}

dtr_status_t dtr__m_divide(dtr_context_t *ctx, dtr_dtype_t dtype, const void *src,
                           void *dst, int64_t count, int64_t n) {
    if (count <= 0) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__divide(dtype, src, dst, count, n);
        return DTR_OK;
    }
    dtr_status_t st = ctx->mem->divide(ctx->mem_state, dtype, src, dst, count, n);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "divide");
}

void dtr__m_free(dtr_context_t *ctx, void *p) {
    if (ctx->mem == NULL) free(p);
    else if (p != NULL) ctx->mem->free(ctx->mem_state, p);
}

/* int64 arrays from the context: 6 of n each. */
dtr_status_t dtr__arrays(dtr_context_t *ctx, int64_t n, int64_t **a) {
    if (n > ctx->arrays_cap) {
        int64_t *p = realloc(ctx->arrays, (size_t)n * 6 * sizeof *p);
        if (p == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "count arrays for %lld ranks",
                              (long long)n);
        ctx->arrays = p;
        ctx->arrays_cap = n;
    }
    for (int k = 0; k < 6; k++) a[k] = ctx->arrays + k * ctx->arrays_cap;
    return DTR_OK;
}
