/*
 * Host copies for large outputs, shared by the executor and the backends that copy on the
 * host themselves (the MPI backend's shared-memory path).
 *
 * memcpy with streaming (non-temporal) stores where the CPU has them (stream.c), for large
 * outputs written once and not read back soon: they would not stay in cache anyway, and the
 * stores skip reading the lines first. dtr__stream_init picks the widest stores once (every
 * context creation calls it; so does any other user before its first copy). A run of copies
 * ends with dtr__stream_fence, which orders them before whatever comes next.
 */
#ifndef DTR_RUNTIME_STREAM_H
#define DTR_RUNTIME_STREAM_H

#include <stdint.h>
#include <string.h>

void dtr__stream_init(void);
void dtr__stream_copy(void *dst, const void *src, int64_t n);
void dtr__stream_fence(void);

/* Outputs at least this large are written with streaming stores. (Measured on 2 and 4
 * ranks, docs/executor.md: streaming a 4 MiB output made the sliced gather slower, a 16 MiB
 * one faster.) */
#define DTR__STREAM_MIN_BYTES (8 << 20)

/* Copies of runs of at most this many bytes fetch the run about this far ahead in software:
 * short runs far apart defeat the hardware prefetcher, which stops at each gap (2 KiB runs
 * 4 KiB apart copied 1.4-1.7x faster out of memory, docs/executor.md). */
#define DTR__PREFETCH_RUN_MAX 8192

/* memcpy for the short runs of strided copies, inline: a call to the library's memcpy
 * costs about what copying 128 bytes does, and a piece along a tensor's last dim is
 * thousands of such rows. Fixed-size memcpys compile to plain vector moves. */
#define DTR__SHORT_COPY_MAX 256
static inline void dtr__copy_run(char *d, const char *s, int64_t n) {
    if (n > DTR__SHORT_COPY_MAX) {
        memcpy(d, s, (size_t)n);
        return;
    }
    for (; n >= 32; n -= 32, d += 32, s += 32) memcpy(d, s, 32);
    if (n >= 16) {
        memcpy(d, s, 16);
        n -= 16, d += 16, s += 16;
    }
    if (n >= 8) {
        memcpy(d, s, 8);
        n -= 8, d += 8, s += 8;
    }
    for (; n > 0; n--) *d++ = *s++;
}

#endif
