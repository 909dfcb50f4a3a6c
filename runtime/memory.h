/*
 * Memory spaces: where a context's buffers live.
 *
 * A context starts on host memory, which the executor reads and writes itself. A context
 * given another space (dtr_context_set_memory: CUDA device memory, backends/cuda/)
 * never dereferences a buffer of it: every local operation the executor performs (packing
 * and unpacking pieces, zero padding, AVG's divide, copies) goes through the space's table,
 * its scratch memory comes from the space, and the backend's operations receive buffers of
 * the space. A backend that cannot read the space (no DTR_BACKEND_CAP_DEVICE, e.g. Open MPI)
 * is wrapped by the context so each operation stages through host memory (the shared-GPU
 * mode: several ranks on one GPU, which NCCL refuses).
 *
 * Operations of a space may be asynchronous (a CUDA stream): each one is ordered after the
 * ones issued before it, and after the backend's operations on the same stream. Copies to
 * and from host memory are complete with respect to the host buffer when they return.
 */
#ifndef DTR_RUNTIME_MEMORY_H
#define DTR_RUNTIME_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DTR_COPY_WITHIN = 0, /* both buffers in the space */
    DTR_COPY_TO_HOST,    /* dst is host memory; complete when the call returns */
    DTR_COPY_FROM_HOST,  /* src is host memory; src may be reused when the call returns */
} dtr_copy_kind_t;

/*
 * A memory space. Shapes are row-major, in elements of `item` bytes; a box is `ext` elements
 * per dim starting at the corner `lo` of its block. Every slot is required but `add`.
 */
typedef struct dtr_memory_ops {
    const char *name; /* "cuda", ... */
    /* bytes >= 1; contents unspecified; *p written on success */
    dtr_status_t (*alloc)(void *state, int64_t bytes, void **p);
    void (*free)(void *state, void *p); /* NULL is a no-op */
    dtr_status_t (*copy)(void *state, void *dst, const void *src, int64_t bytes,
                         dtr_copy_kind_t kind);
    dtr_status_t (*zero)(void *state, void *dst, int64_t bytes);
    /* the box ext of src (shape sshape, corner slo) to dst (shape dshape, corner dlo) */
    dtr_status_t (*copy_box)(void *state, int nd, int64_t item, const void *src,
                             const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                             void *dst, const int64_t *dshape, const int64_t *dlo);
    /* elements [u, v) of the box ext (row-major order) of block (shape bshape, corner blo),
     * to the contiguous flat (to_block false) or from it (to_block true) */
    dtr_status_t (*copy_range)(void *state, int nd, int64_t item, void *block,
                               const int64_t *bshape, const int64_t *blo, const int64_t *ext,
                               int64_t u, int64_t v, void *flat, bool to_block);
    /* dst[k] = src[k] / n, k < count, in the dtype's arithmetic (halves through f32,
     * integers truncate); src may equal dst */
    dtr_status_t (*divide)(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                           int64_t count, int64_t n);
    /* dst[k] = src[k] converted (f32, f64, f16, bf16; halves round to nearest even) */
    dtr_status_t (*cast)(void *state, dtr_dtype_t src_dtype, const void *src,
                         dtr_dtype_t dst_dtype, void *dst, int64_t count);
    /* optional: dst[k] += src[k] for the float dtypes (halves through f32, rounded once);
     * parameter groups accumulate microbatches with it (grad/param_group.h), and refuse
     * accumulation on a space without it */
    dtr_status_t (*add)(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                        int64_t count);
    /* waits until every operation issued so far completed; its error if one failed */
    dtr_status_t (*sync)(void *state);
    void (*destroy)(void *state); /* frees the state (with the context) */
} dtr_memory_ops_t;

/*
 * ---- memory spaces by name (registry.c) -----------------------------------------------
 *
 * One table of the spaces a front end can put a context on by name (Python's
 * `Mesh(..., device="cuda")`), as backends have theirs (runtime.h). A space's code registers
 * its row as it loads: "cuda" from libdtr_cuda.so. A name not in the table is looked for as
 * libdtr_NAME.so.MAJOR (dlopen: beside libdtr.so, then the loader's search path), which
 * registers it as it loads. A caller (a test's space) adds its own row the same way.
 */
typedef struct dtr_memory_info {
    /* 1 to DTR_BACKEND_NAME_MAX of a-z, 0-9 and _ (it names a file) */
    const char *name;
    const dtr_memory_ops_t *ops;
    /* a new state on the space's device `device` (0 .. device_count() - 1) and `stream`
     * (NULL: one of the space's own); *state written on success, to hand to
     * dtr_context_set_memory (which owns it) or to free with ops->destroy */
    dtr_status_t (*create)(int device, void *stream, void **state);
    /* optional: the devices this process sees (0 with the reason in dtr_last_error());
     * NULL: one */
    int (*device_count)(void);
    /* optional: the state's later work on `stream` (NULL: back to its own), between calls */
    dtr_status_t (*set_stream)(void *state, void *stream);
    /* optional: the state's later work waits for the work issued so far on `stream` (a
     * producer's stream: the caller's arrays are complete there) */
    dtr_status_t (*wait_stream)(void *state, void *stream);
} dtr_memory_info_t;

/* Adds info's row, or replaces the row of that name (the name is copied; ops must be
 * static). INVALID_ARGUMENT for a NULL name, ops or create, a bad name, or a full table (16
 * rows). */
DTR_API dtr_status_t dtr_memory_register(const dtr_memory_info_t *info);

/* The row of `name` into *out ("host" is not a row: it is every context's default), loading
 * libdtr_NAME.so.MAJOR where it is not yet registered. INVALID_ARGUMENT naming the
 * registered spaces and the loader's reason where none is found. */
DTR_API dtr_status_t dtr_memory_find(const char *name, dtr_memory_info_t *out);

#ifdef __cplusplus
}
#endif

#endif
