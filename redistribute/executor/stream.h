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
#ifndef DTR_REDISTRIBUTE_EXECUTOR_STREAM_H
#define DTR_REDISTRIBUTE_EXECUTOR_STREAM_H

#include <stdint.h>

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

#endif
