/*
 * The NCCL backend: the executor on CUDA device buffers across GPUs (built only where the
 * CUDA toolkit and nccl.h were found).
 *
 * One GPU per rank (NCCL refuses two ranks on one GPU: for that, use the MPI backend on the
 * CUDA memory space, redistribute/cuda/dtr_cuda.h). Each mesh dim's group, and the whole
 * mesh, gets its own NCCL communicator, bootstrapped over MPI the first time a context runs
 * a plan on the mesh: the group's first rank makes the ncclUniqueId, an MPI broadcast over
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
#ifndef DTR_REDISTRIBUTE_NCCL_DTR_NCCL_H
#define DTR_REDISTRIBUTE_NCCL_DTR_NCCL_H

#include <mpi.h>

#include "redistribute/executor/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A context over comm (duplicated: collective over comm) on GPU `device` and `stream` (a
 * cudaStream_t; NULL: a non-blocking stream of the context's own). Its memory space is CUDA
 * (dtr_context_memory says "cuda"): in, out and the group collectives' buffers are device
 * pointers. *out written only on success. */
DTR_API dtr_status_t dtr_context_create_nccl(MPI_Comm comm, int device, void *stream,
                                             dtr_context_t **out);

#ifdef __cplusplus
}
#endif

#endif
