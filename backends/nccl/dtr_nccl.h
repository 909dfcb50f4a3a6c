/*
 * The NCCL backend: the executor on CUDA device buffers across GPUs (built only where the
 * CUDA toolkit and nccl.h were found).
 *
 * One GPU per rank (NCCL refuses two ranks on one GPU: for that, use the MPI backend on the
 * CUDA memory space, backends/cuda/dtr_cuda.h). Contexts come three ways: over an MPI
 * communicator (dtr_context_create_nccl), from an ncclUniqueId the caller exchanged
 * (dtr_context_create_nccl_id), or over the caller's ncclComm_t (dtr_context_create_nccl_comm);
 * the last two use no MPI (their groups come from dtr_nccl_split_mesh). Over MPI, each mesh
 * dim's group, and the whole mesh, gets its own NCCL communicator, bootstrapped over MPI the
 * first time a context runs a plan on the mesh: the group's first rank makes the ncclUniqueId, an MPI broadcast over
 * the group hands it round, ncclCommInitRank joins (collective over the group's ranks only,
 * so ranks outside a mesh take no part, as the executor requires).
 *
 * Operations enqueue on the context's stream and return: ncclAllGather, ncclReduceScatter,
 * ncclAllReduce, ncclAlltoAll for equal pieces, grouped ncclSend/ncclRecv for uneven ones.
 * P(avg) uses ncclAvg for integer dtypes (NCCL sums, then divides with truncation, as dtr
 * does) and SUM then the divide kernel for float dtypes (dtr divides the sum; ncclAvg
 * pre-multiplies, which rounds differently). dtr_redistribute returns once everything is
 * enqueued; dtr_context_sync (or a sync of the stream) waits for the result. Asynchronous
 * NCCL errors are checked by every completion test and while waiting on the stream, under
 * DTR_TIMEOUT_S; a fatal one aborts the communicator (ncclCommAbort) and comes back as
 * DTR_ERR_BACKEND with NCCL's message; the context's later calls fail the same way.
 */
#ifndef DTR_BACKENDS_NCCL_DTR_NCCL_H
#define DTR_BACKENDS_NCCL_DTR_NCCL_H

#include <mpi.h>

#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A context over comm (duplicated: collective over comm) on GPU `device` and `stream` (a
 * cudaStream_t; NULL: a non-blocking stream of the context's own). Its memory space is CUDA
 * (dtr_context_memory says "cuda"): in, out and the group collectives' buffers are device
 * pointers. *out written only on success. */
DTR_API dtr_status_t dtr_context_create_nccl(MPI_Comm comm, int device, void *stream,
                                             dtr_context_t **out);

/*
 * Without MPI (torchrun, Slurm, a framework's own launcher): a context over `size` ranks whose
 * NCCL communicator is made here from `unique_id` (an ncclUniqueId, id_bytes its size, 128,
 * which rank 0 made with ncclGetUniqueId and the caller handed to every rank by its own
 * means: a store, a CPU group's broadcast), this rank `rank`: collective over all of them
 * (ncclCommInitRank). The context owns that communicator. Memory space CUDA, on GPU
 * `device` and `stream` as above. *out written only on success.
 */
DTR_API dtr_status_t dtr_context_create_nccl_id(const void *unique_id, size_t id_bytes, int rank,
                                                int size, int device, void *stream,
                                                dtr_context_t **out);

/* A new ncclUniqueId (ncclGetUniqueId) into id, which has room for cap bytes (128 are
 * needed), *len its size: what rank 0 makes and hands to every rank for
 * dtr_context_create_nccl_id, without the caller including nccl.h. Needs no GPU. id and
 * *len written only on success. */
DTR_API dtr_status_t dtr_nccl_unique_id(void *id, size_t cap, size_t *len);

/* The same over a communicator the caller already has (an ncclComm_t, passed as void *):
 * adopted, not owned (the caller destroys it, after the context); mesh ranks are its ranks.
 * Not collective. */
DTR_API dtr_status_t dtr_context_create_nccl_comm(void *comm, int device, void *stream,
                                                  dtr_context_t **out);

/*
 * On a context made without MPI (the two calls above), the communicators of a mesh's
 * groups: one per mesh dim's groups and one for the whole mesh, split from the context's
 * communicator (ncclCommSplit). COLLECTIVE OVER EVERY RANK OF THAT COMMUNICATOR, in the same
 * order with the same mesh, members of the mesh or not. Call it once per mesh before the
 * first plan on it (a mesh of the same sizes and ranks split before is not split again: its
 * communicators serve it); a group with no communicator (a mesh not split, or a group over several
 * but not all mesh dims) fails with DTR_ERR_UNSUPPORTED naming this call. The whole
 * communicator in rank order needs no split. On a context over MPI it does nothing.
 */
DTR_API dtr_status_t dtr_nccl_split_mesh(dtr_context_t *ctx, const dtr_mesh_t *mesh);

/* Runs the context's later work on `stream` (a cudaStream_t; NULL: back to its own stream):
 * between calls, never while one is in flight. */
DTR_API dtr_status_t dtr_nccl_set_stream(dtr_context_t *ctx, void *stream);

/* The context's stream waits for the work enqueued so far on `stream` (a cudaStream_t, not
 * NULL), through an event: a producer on another stream is waited for without the host
 * waiting. */
DTR_API dtr_status_t dtr_nccl_wait_stream(dtr_context_t *ctx, void *stream);

#ifdef __cplusplus
}
#endif

#endif
