/* Streams of bytes over span lists (span.h). */
#include "backends/shm/span.h"

#include <string.h>

#include "numeric/numeric.h"
#include "runtime/stream.h"

#define DTR__LINE 64

int64_t dtr__spans_index(const dtr_span_t *span, int n, int64_t *start) {
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        start[i] = at;
        at += span[i].rows * span[i].run;
    }
    start[n] = at;
    return at;
}

/* The span holding byte `at`: the last one starting at or before it (so never an empty one
 * followed by the span that holds it). */
static int dtr__locate(const dtr__spans_t *st, int64_t at) {
    int lo = 0, hi = st->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (st->start[mid] <= at)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Copies bytes [at, at + len) of one span (rows of `run` bytes, `stride` apart, from
 * `base`) to the contiguous `flat`, or from it (pack false; with streaming stores where
 * `stream`). Short runs far apart are fetched ahead: the hardware prefetcher stops at each
 * gap. */
static void dtr__range(char *base, int64_t run, int64_t stride, int64_t at, int64_t len,
                       char *flat, bool pack, bool stream) {
    int64_t i = at / run, c = at % run;
    int64_t ahead = 0;
    /* (streaming stores bypass the cache: nothing to fetch for them) */
    if (stride != run && run <= DTR__PREFETCH_RUN_MAX && !stream)
        ahead = (DTR__PREFETCH_RUN_MAX + run - 1) / run;
    while (len > 0) {
        int64_t take = run - c < len ? run - c : len;
        char *p = base + i * stride + c;
        if (ahead > 0) {
            const char *next = p + ahead * stride;
            for (int64_t b = 0; b < take; b += DTR__LINE) {
                if (pack)
                    __builtin_prefetch(next + b, 0, 3);
                else
                    __builtin_prefetch(next + b, 1, 3);
            }
        }
        if (pack)
            dtr__copy_run(flat, p, take);
        else if (stream)
            dtr__stream_copy(p, flat, take);
        else
            dtr__copy_run(p, flat, take);
        flat += take;
        len -= take;
        i++;
        c = 0;
    }
}

/* A cast written with streaming stores: converted a block at a time in cache, then
 * streamed (a plain store would read every line of the output first). */
enum { DTR__CAST_BLOCK = 4096 };

static void dtr__cast_stream(const dtr__spans_t *st, const char *flat, char *out, int64_t n) {
    _Alignas(64) char buf[DTR__CAST_BLOCK];
    int64_t per = DTR__CAST_BLOCK / st->from_size;
    for (int64_t k = 0; k < n; k += per) {
        int64_t m = n - k < per ? n - k : per;
        dtr__convert(st->to, flat + k * st->to_size, st->from, buf, m);
        dtr__stream_copy(out + k * st->from_size, buf, m * st->from_size);
    }
}

/* Reads `len` bytes of `from` elements at byte `at` of one span into `flat` as `to`
 * elements (len / fs of them), or writes them there from `flat` (pack false; with
 * streaming stores where `stream`). */
static void dtr__range_cast(char *base, int64_t run, int64_t stride, int64_t at, int64_t len,
                            char *flat, const dtr__spans_t *st, bool pack, bool stream) {
    int64_t i = at / run, c = at % run;
    while (len > 0) {
        int64_t take = run - c < len ? run - c : len;
        if (pack)
            dtr__convert(st->from, base + i * stride + c, st->to, flat, take / st->from_size);
        else if (stream)
            dtr__cast_stream(st, flat, base + i * stride + c, take / st->from_size);
        else
            dtr__convert(st->to, flat, st->from, base + i * stride + c, take / st->from_size);
        flat += take / st->from_size * st->to_size;
        len -= take;
        i++;
        c = 0;
    }
}

static void dtr__move(const dtr__spans_t *st, int64_t at, int64_t len, char *flat, bool pack,
                      bool stream) {
    if (len <= 0) return;
    int i = dtr__locate(st, at);
    int64_t off = at - st->start[i];
    for (; len > 0 && i < st->n; i++, off = 0) {
        const dtr_span_t *sp = &st->span[i];
        int64_t room = st->start[i + 1] - st->start[i] - off;
        int64_t take = room < len ? room : len;
        if (take <= 0) continue;
        if (st->from_size > 0) /* stream bytes to span bytes: whole elements both ways */
            dtr__range_cast(sp->base, sp->run, sp->stride, off / st->to_size * st->from_size,
                            take / st->to_size * st->from_size, flat, st, pack, stream);
        else
            dtr__range(sp->base, sp->run, sp->stride, off, take, flat, pack, stream);
        flat += take;
        len -= take;
    }
}

void dtr__spans_read(const dtr__spans_t *st, int64_t at, int64_t len, char *flat) {
    dtr__move(st, at, len, flat, true, false);
    if (st->scale != 0 && st->scale != 1 && len > 0)
        dtr__divide_by(st->to, flat, len / st->to_size, st->scale);
}

void dtr__spans_write(const dtr__spans_t *st, int64_t at, int64_t len, const char *flat,
                      bool stream) {
    dtr__move(st, at, len, (char *)flat, false, stream);
}

char *dtr__spans_ptr(const dtr__spans_t *st, int64_t at, int64_t len) {
    if (st->n == 0 || st->from_size > 0 || (st->scale != 0 && st->scale != 1)) return NULL;
    int i = dtr__locate(st, at);
    const dtr_span_t *sp = &st->span[i];
    int64_t off = at - st->start[i];
    if (sp->run <= 0) return NULL;
    int64_t c = off % sp->run;
    if (off + len > st->start[i + 1] - st->start[i] || c + len > sp->run) return NULL;
    return sp->base + (off / sp->run) * sp->stride + c;
}
