/*
 * Streams of bytes over span lists (dtr_span_t, backend.h): the shared-memory path reads
 * its pieces from them and writes its results into them, whether a piece is one contiguous
 * buffer, rows of a strided one, or a batch's members one after another.
 */
#ifndef DTR_BACKENDS_SHM_SPAN_H
#define DTR_BACKENDS_SHM_SPAN_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/backend.h"

typedef struct {
    const dtr_span_t *span;
    const int64_t *start; /* [n + 1]: each span's first byte in the stream, then the total */
    int n;
    /* A cast: the spans hold `from` elements of from_size bytes and the stream `to`
     * elements of to_size bytes (start[] counts stream bytes), converted as they are read
     * or written; from_size 0: the bytes as they are. */
    dtr_dtype_t from, to;
    int64_t from_size, to_size;
    /* A send stream's divide (0: none): what is read is divided by it in `to` (after the
     * cast), so to and to_size are set with it. */
    double scale;
} dtr__spans_t;

/* Fills start[0..n] for the n spans; returns the stream's bytes (start[n]). */
int64_t dtr__spans_index(const dtr_span_t *span, int n, int64_t *start);

/* Copies bytes [at, at + len) of the stream to the contiguous `flat` (the stream holds them),
 * whole elements where the stream casts or divides. */
void dtr__spans_read(const dtr__spans_t *st, int64_t at, int64_t len, char *flat);

/* Copies `flat` to bytes [at, at + len) of the stream, with streaming stores where `stream`
 * (the caller fences). */
void dtr__spans_write(const dtr__spans_t *st, int64_t at, int64_t len, const char *flat,
                      bool stream);

/* Where bytes [at, at + len) lie in one run of one span: their address; NULL otherwise
 * (always for a stream that casts or divides). */
char *dtr__spans_ptr(const dtr__spans_t *st, int64_t at, int64_t len);

#endif
