/*
 * The CUDA memory space: contexts whose buffers are CUDA device memory (built only where the
 * CUDA toolkit was found; DTR_HAVE_CUDA is defined for the targets that link it).
 *
 * Every local operation of the executor (pack and unpack of pieces, zero padding, AVG's
 * divide) is a kernel enqueued on the space's stream, and so are the copies; nothing waits
 * for the GPU except copies to host memory and dtr_context_sync, which poll the stream under
 * the space's deadline (DTR_TIMEOUT_S, default 600 s). A context over the MPI backend on this
 * space stages each operation through host memory: the shared-GPU mode, in which several
 * ranks use one GPU (NCCL refuses that). The NCCL backend (backends/nccl/dtr_nccl.h)
 * creates its own space on its stream. The library registers the space as "cuda" when it
 * loads (dtr_memory_find, runtime/memory.h), which is how Python's Mesh(..., device="cuda")
 * finds it.
 */
#ifndef DTR_BACKENDS_CUDA_DTR_CUDA_H
#define DTR_BACKENDS_CUDA_DTR_CUDA_H

#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "runtime/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPUs visible to this process; 0 with the driver's reason in dtr_last_error() when there
 * are none (no device, no driver). */
DTR_API int dtr_cuda_device_count(void);

/* The space's table, and a new state on GPU `device` (cudaSetDevice'd by this call) and
 * `stream` (a cudaStream_t; NULL: the space creates a non-blocking stream of its own and
 * destroys it with the state). *state written on success; hand it to
 * dtr_context_set_memory, which owns it from then on. */
DTR_API const dtr_memory_ops_t *dtr_memory_cuda_ops(void);
DTR_API dtr_status_t dtr_memory_cuda_create(int device, void *stream, void **state);

/* Runs the space's later work on `stream` (a cudaStream_t the caller keeps alive; NULL: back
 * to the space's own stream, where it made one). Call it between operations, never while
 * one is in flight. */
DTR_API dtr_status_t dtr_memory_cuda_set_stream(void *state, void *stream);

/* The state's later work waits for the work issued so far on `stream` (a cudaStream_t: a
 * producer's, where the caller's arrays are complete): an event recorded there, waited for
 * on the state's stream; nothing waits on the host. NULL or the state's own stream: nothing
 * to do. */
DTR_API dtr_status_t dtr_memory_cuda_wait_stream(void *state, void *stream);

/* The state's stream (a cudaStream_t). */
DTR_API void *dtr_memory_cuda_stream(void *state);

/* While the space waits for its stream (copies to host, sync), it calls poll(arg) between
 * queries; a non-OK status ends the wait with that status (the NCCL backend checks its
 * communicators' asynchronous errors here). */
DTR_API void dtr_memory_cuda_set_poll(void *state, dtr_status_t (*poll)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif
