/*
 * The executor's local work: the copies of boxes, ranges and rows a step packs and unpacks
 * with. On host memory they run here; on a memory space (dtr_context_set_memory) through its
 * table, so no step touches device memory itself (scratch and plain copies:
 * runtime/memory.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "redistribute/executor/internal.h"

int64_t dtr__prod(const int64_t *shape, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= shape[d];
    return p;
}

/* Copies ext rows of a 3-d view: [outer, *, inner bytes] from src (dim length slen, from
 * row slo) to dst (length dlen, at row dlo). */
static void dtr__copy3(const void *src, int64_t slen, int64_t slo, void *dst, int64_t dlen,
                       int64_t dlo, int64_t outer, int64_t ext, int64_t inner) {
    if (ext == 0 || inner == 0 || outer == 0) return;
    const char *s = src;
    char *d = dst;
    if (outer == 1 || (slen == ext && dlen == ext)) {
        memcpy(d + dlo * inner, s + slo * inner, (size_t)(outer * ext * inner));
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        memcpy(d + (o * dlen + dlo) * inner, s + (o * slen + slo) * inner,
               (size_t)(ext * inner));
}

void dtr__copy(void *dst, const void *src, int64_t n) { memcpy(dst, src, (size_t)n); }

/* Where the run at idx (over the outer dims [0, inner)) starts in the source (*so) and the
 * destination (*doff), in the strides' units: the corners plus idx. */
static void dtr__box_at(int nd, int inner, const int64_t *idx, const int64_t *slo,
                        const int64_t *sst, const int64_t *dlo, const int64_t *dst_st,
                        int64_t *so, int64_t *doff) {
    int64_t a = 0, b = 0;
    for (int d = 0; d < nd; d++) {
        int64_t extra = d < inner ? idx[d] : 0;
        a += (slo[d] + extra) * sst[d];
        b += (dlo[d] + extra) * dst_st[d];
    }
    *so = a;
    *doff = b;
}

/* The next run of a box: idx over its outer dims [0, inner) in row-major order; false past
 * the last. */
static bool dtr__box_next(int64_t *idx, const int64_t *ext, int inner) {
    for (int d = inner - 1; d >= 0; d--) {
        if (++idx[d] < ext[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Copies the box [lo, lo+ext) of an N-d row-major block src (shape sshape, item bytes) to
 * dst (shape dshape) at dlo, each run with `copy` (dtr__copy or dtr__stream_copy, whose
 * caller fences). Trailing dims the box spans whole are copied as one run. */
void dtr__box_copy(int nd, int64_t item, const void *src, const int64_t *sshape,
            const int64_t *slo, const int64_t *ext, void *dst,
            const int64_t *dshape, const int64_t *dlo,
            void (*copy)(void *, const void *, int64_t)) {
    for (int d = 0; d < nd; d++)
        if (ext[d] == 0) return;
    /* The run: the innermost dims where both blocks are spanned whole, plus one more. */
    int inner = nd;
    int64_t run = item;
    while (inner > 0 && ext[inner - 1] == sshape[inner - 1] && ext[inner - 1] == dshape[inner - 1]) {
        run *= ext[inner - 1];
        inner--;
    }
    if (inner > 0) run *= ext[--inner];
    int64_t sst[DTR_MAX_TENSOR_DIMS], dst_st[DTR_MAX_TENSOR_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0};
    int64_t s = item, t = item;
    for (int d = nd - 1; d >= 0; d--) {
        sst[d] = s;
        dst_st[d] = t;
        s *= sshape[d];
        t *= dshape[d];
    }
    /* Short runs far apart defeat the hardware prefetcher, which stops at each gap: fetch
     * the run about 8 KiB ahead along the innermost iterated dim while copying this one
     * (2 KiB runs 4 KiB apart copied 1.4-1.7x faster out of memory, docs/executor.md). */
    int64_t ahead = 0;
    if (inner > 0 && run <= DTR__PREFETCH_RUN_MAX) ahead = (DTR__PREFETCH_RUN_MAX + run - 1) / run;
    const char *sp = src;
    char *dp = dst;
    for (;;) {
        int64_t so, doff;
        dtr__box_at(nd, inner, idx, slo, sst, dlo, dst_st, &so, &doff);
        if (ahead > 0 && idx[inner - 1] + ahead < ext[inner - 1]) {
            const char *next = sp + so + ahead * sst[inner - 1];
            for (int64_t b = 0; b < run; b += 64) __builtin_prefetch(next + b, 0, 3);
        }
        copy(dp + doff, sp + so, run);
        if (!dtr__box_next(idx, ext, inner)) break;
    }
}

/* The box where block a (offset aoff, shape ash) meets block b: its corner relative to a
 * in lo, its extent in ext; returns its element count (0 when they do not meet). */
int64_t dtr__meet(int nd, const int64_t *aoff, const int64_t *ash, const int64_t *boff,
                  const int64_t *bsh, int64_t *lo, int64_t *ext) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) {
        int64_t b0 = aoff[d] > boff[d] ? aoff[d] : boff[d];
        int64_t b1 = aoff[d] + ash[d] < boff[d] + bsh[d] ? aoff[d] + ash[d] : boff[d] + bsh[d];
        ext[d] = b1 > b0 ? b1 - b0 : 0;
        lo[d] = b0 - aoff[d];
        count *= ext[d];
    }
    return count;
}

/* Copies elements [u, v) of a box (extent ext, row-major) between a block (shape bshape,
 * the box at corner blo) and the contiguous `flat`; to_block picks the direction. */
static void dtr__box_range(int nd, int64_t item, char *block, const int64_t *bshape,
                           const int64_t *blo, const int64_t *ext, int64_t u, int64_t v,
                           char *flat, bool to_block) {
    if (v <= u) return;
    /* Trailing dims the box spans whole merge into its innermost run. */
    int64_t sh[DTR_MAX_TENSOR_DIMS], lo[DTR_MAX_TENSOR_DIMS], ex[DTR_MAX_TENSOR_DIMS];
    int k = nd;
    int64_t merged = 1;
    while (k > 1 && ext[k - 1] == bshape[k - 1]) merged *= ext[--k];
    for (int d = 0; d < k; d++) {
        sh[d] = bshape[d];
        lo[d] = blo[d];
        ex[d] = ext[d];
    }
    sh[k - 1] *= merged;
    lo[k - 1] *= merged;
    ex[k - 1] *= merged;
    for (int64_t f = u; f < v;) {
        int64_t rem = f, idx[DTR_MAX_TENSOR_DIMS] = {0};
        for (int d = k - 1; d >= 0; d--) {
            idx[d] = rem % ex[d];
            rem /= ex[d];
        }
        int64_t run = ex[k - 1] - idx[k - 1];
        if (run > v - f) run = v - f;
        int64_t off = 0;
        for (int d = 0; d < k; d++) off = off * sh[d] + lo[d] + idx[d];
        char *b = block + off * item, *c = flat + (f - u) * item;
        memcpy(to_block ? b : c, to_block ? c : b, (size_t)(run * item));
        f += run;
    }
}

/* ---- local operations on the context's memory ---------------------------------------
 * Host memory is handled by the functions above; a memory space by its table. */

dtr_status_t dtr__m_box(dtr_context_t *ctx, int nd, int64_t item, const void *src,
                        const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                        void *dst, const int64_t *dshape, const int64_t *dlo) {
    if (ctx->mem == NULL) {
        dtr__box_copy(nd, item, src, sshape, slo, ext, dst, dshape, dlo, dtr__copy);
        return DTR_OK;
    }
    for (int d = 0; d < nd; d++)
        if (ext[d] == 0) return DTR_OK;
    dtr_status_t st = ctx->mem->copy_box(ctx->mem_state, nd, item, src, sshape, slo, ext, dst,
                                         dshape, dlo);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy_box");
}

/* The box of src (dtype sdt) into dst's box as ddt, host memory, run by run: a run is the
 * innermost dims both blocks span whole, plus one more. */
static void dtr__box_cast_host(int nd, dtr_dtype_t sdt, const char *src, const int64_t *sshape,
                               const int64_t *slo, const int64_t *ext, dtr_dtype_t ddt,
                               char *dst, const int64_t *dshape, const int64_t *dlo) {
    int64_t si = dtr_dtype_info(sdt)->size, di = dtr_dtype_info(ddt)->size, run = 1;
    int inner = nd;
    while (inner > 0 && ext[inner - 1] == sshape[inner - 1] && ext[inner - 1] == dshape[inner - 1])
        run *= ext[--inner];
    if (inner > 0) run *= ext[--inner];
    int64_t sst[DTR_MAX_TENSOR_DIMS], dst_st[DTR_MAX_TENSOR_DIMS], idx[DTR_MAX_TENSOR_DIMS] = {0};
    int64_t s = 1, t = 1;
    for (int d = nd - 1; d >= 0; d--) {
        sst[d] = s;
        dst_st[d] = t;
        s *= sshape[d];
        t *= dshape[d];
    }
    for (;;) {
        int64_t so, doff;
        dtr__box_at(nd, inner, idx, slo, sst, dlo, dst_st, &so, &doff);
        dtr__convert(sdt, src + so * si, ddt, dst + doff * di, run);
        if (!dtr__box_next(idx, ext, inner)) break;
    }
}

dtr_status_t dtr__m_box_cast(dtr_context_t *ctx, int nd, dtr_dtype_t sdt, const void *src,
                             const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                             dtr_dtype_t ddt, void *dst, const int64_t *dshape,
                             const int64_t *dlo) {
    int64_t n = 1, zero[DTR_MAX_TENSOR_DIMS] = {0};
    for (int d = 0; d < nd; d++) n *= ext[d];
    if (n == 0) return DTR_OK;
    if (ctx->mem == NULL) {
        dtr__box_cast_host(nd, sdt, src, sshape, slo, ext, ddt, dst, dshape, dlo);
        return DTR_OK;
    }
    int64_t si = dtr_dtype_info(sdt)->size, di = dtr_dtype_info(ddt)->size;
    bool whole = true; /* dst's box is all of dst (a packed message): cast straight into it */
    for (int d = 0; d < nd; d++) whole &= dlo[d] == 0 && dshape[d] == ext[d];
    int64_t at = (n * si + 15) / 16 * 16; /* b aligned for any dtype */
    DTR_CHECK(dtr__reserve(ctx, &ctx->cross_cast, &ctx->cross_cast_cap, at + (whole ? 0 : n * di),
                           "a box cast as it is packed"));
    char *a = ctx->cross_cast, *b = whole ? dst : a + at;
    DTR_CHECK(dtr__m_box(ctx, nd, si, src, sshape, slo, ext, a, ext, zero));
    dtr_status_t st = ctx->mem->cast(ctx->mem_state, sdt, a, ddt, b, n);
    if (st != DTR_OK) return dtr__m_fail(ctx, st, "cast");
    return whole ? DTR_OK : dtr__m_box(ctx, nd, di, b, ext, zero, ext, dst, dshape, dlo);
}

/* dtr__copy3 on the context's memory: a box of [outer, ext, inner bytes]. */
dtr_status_t dtr__m_copy3(dtr_context_t *ctx, const void *src, int64_t slen, int64_t slo,
                          void *dst, int64_t dlen, int64_t dlo, int64_t outer, int64_t ext,
                          int64_t inner) {
    if (ctx->mem == NULL) {
        dtr__copy3(src, slen, slo, dst, dlen, dlo, outer, ext, inner);
        return DTR_OK;
    }
    int64_t ss[3] = {outer, slen, inner}, sl[3] = {0, slo, 0}, ex[3] = {outer, ext, inner};
    int64_t ds[3] = {outer, dlen, inner}, dl[3] = {0, dlo, 0};
    return dtr__m_box(ctx, 3, 1, src, ss, sl, ex, dst, ds, dl);
}

dtr_status_t dtr__m_range(dtr_context_t *ctx, int nd, int64_t item, char *block,
                          const int64_t *bshape, const int64_t *blo, const int64_t *ext,
                          int64_t u, int64_t v, char *flat, bool to_block) {
    if (ctx->mem == NULL) {
        dtr__box_range(nd, item, block, bshape, blo, ext, u, v, flat, to_block);
        return DTR_OK;
    }
    if (v <= u) return DTR_OK;
    dtr_status_t st = ctx->mem->copy_range(ctx->mem_state, nd, item, block, bshape, blo, ext, u,
                                           v, flat, to_block);
    return st == DTR_OK ? DTR_OK : dtr__m_fail(ctx, st, "copy_range");
}

void dtr__chunks(int64_t len, int64_t n, int64_t *size, int64_t *off) {
    for (int64_t k = 0; k < n; k++) dtr_chunk(len, n, k, &size[k], &off[k]);
}

bool dtr__all_equal(const int64_t *v, int64_t n) {
    for (int64_t k = 1; k < n; k++)
        if (v[k] != v[0]) return false;
    return true;
}
