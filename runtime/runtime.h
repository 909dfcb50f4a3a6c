/*
 * The runtime: contexts over a communication backend, the backends by name, memory spaces,
 * deadlines, and the collectives on a mesh's groups. The executor
 * (redistribute/executor/executor.h) runs plans on a context; the gradient reduction
 * (grad/) runs on its group collectives.
 *
 * A backend is a const table of operations (dtr_backend_ops_t, backend.h) plus its state; the
 * MPI backend (backends/mpi/dtr_mpi.h) is the embedded default. A context binds a backend
 * to the scratch memory and the per-mesh communicators that calls reuse.
 *
 * Deadlines: every backend operation a call starts must complete within the context's
 * timeout (DTR_TIMEOUT_S when the context is created, default 600 s; 0 waits forever;
 * dtr_context_set_timeout changes it), counted from the operation's start. Otherwise the call
 * returns DTR_ERR_TIMEOUT and the context is aborted (executor.h says what that means for a
 * call's buffers): every later call on it returns DTR_ERR_ABORTED and dtr_context_destroy
 * keeps its memory (reachable, never freed).
 *
 * Threads: a context is used by one thread at a time (calls on one context are not
 * synchronised); different contexts may be used from different threads as far as the
 * backend allows (MPI needs MPI_THREAD_MULTIPLE for that).
 */
#ifndef DTR_RUNTIME_RUNTIME_H
#define DTR_RUNTIME_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/backend.h"
#include "runtime/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtr_context dtr_context_t;

/*
 * Creates a context over a backend. The context takes ownership of `state` (freed through
 * ops->destroy when the context is destroyed, also when this call fails). One context runs
 * one redistribution at a time; use several to overlap several. *out written on success.
 */
DTR_API dtr_status_t dtr_context_create(const dtr_backend_ops_t *ops, void *state,
                                        dtr_context_t **out);

/* Frees the context, its communicators and scratch memory. NULL is a no-op. Must not be
 * called while a request is in flight. */
DTR_API void dtr_context_destroy(dtr_context_t *ctx);

/* The backend's name ("mpi"). */
DTR_API const char *dtr_context_backend(const dtr_context_t *ctx);

/* The state the context's backend was created with, where `ops` is that backend's table;
 * NULL otherwise (or for NULL arguments). For a backend's own calls on its contexts
 * (dtr_nccl_split_mesh, dtr_nccl_set_stream); the context keeps owning the state. */
DTR_API void *dtr_context_backend_state(const dtr_context_t *ctx, const dtr_backend_ops_t *ops);

/* This process's rank in the backend's world; -1 for a NULL context. */
DTR_API int dtr_context_rank(const dtr_context_t *ctx);

/*
 * ---- backends by name (registry.c) ----------------------------------------------------
 *
 * One table of the backends a context can be made on from the job's environment. The
 * built-in ones register themselves as their code loads: "mpi" (libdtr.so), "gloo"
 * (libdtr_gloo.so) and "nccl" (libdtr_nccl.so). A name not in the table is looked for as
 * libdtr_NAME.so.MAJOR (dlopen, the loader's search path: the installed lib/ beside
 * libdtr.so through the caller's RUNPATH or LD_LIBRARY_PATH), which registers it as it
 * loads. A caller adds its own ops table the same way, with dtr_backend_register.
 */
#define DTR_BACKEND_NAME_MAX 31
typedef struct dtr_backend_info {
    /* 1 to DTR_BACKEND_NAME_MAX of a-z, 0-9 and _ (it names a file) */
    const char *name;
    /* DTR_BACKEND_CAP_* of its operations: what it does natively; the library (the
     * executor, the group collectives) does the rest (P(avg) as SUM then a divide, packing where it takes no span lists, one
     * operation at a time per group) */
    unsigned caps;
    /* the memory space of its contexts' buffers: "host" (NULL) or "cuda" */
    const char *memory;
    /* what create_env needs of the job, one line ("RANK, WORLD_SIZE, DTR_GLOO_STORE") */
    const char *launch;
    /* a context over every rank of the job the environment describes (collective over
     * them); *out written on success */
    dtr_status_t (*create_env)(dtr_context_t **out);
} dtr_backend_info_t;

/* Adds info's row, or replaces the row of that name (the strings are copied: name, and
 * memory and launch must be static). INVALID_ARGUMENT for a NULL name or create_env, a bad
 * name, or a full table (16 rows). */
DTR_API dtr_status_t dtr_backend_register(const dtr_backend_info_t *info);

/* The row of `name` into *out, loading libdtr_NAME.so.MAJOR where it is not yet registered.
 * INVALID_ARGUMENT naming the registered backends and the loader's reason where none is
 * found. */
DTR_API dtr_status_t dtr_backend_find(const char *name, dtr_backend_info_t *out);

/* dtr_backend_find, then its create_env: a context over the job on the backend `name`
 * (collective over the job's ranks). "mpi": MPI_COMM_WORLD (MPI initialised by the
 * caller); "gloo": dtr_context_create_gloo_env (RANK, WORLD_SIZE, DTR_GLOO_STORE, as
 * tools/dtr_launch.sh sets them); "nccl": MPI_COMM_WORLD, GPU LOCAL_RANK mod the visible
 * GPUs, the default stream. Errors: dtr_backend_find's, then create_env's. */
DTR_API dtr_status_t dtr_context_create_named(const char *name, dtr_context_t **out);

/* The deadline of each backend operation, in seconds; 0 waits forever. INVALID_ARGUMENT for a
 * negative, NaN or infinite value. Takes effect for the next operation started. */
DTR_API dtr_status_t dtr_context_set_timeout(dtr_context_t *ctx, double seconds);

/* The context's timeout in seconds (0 for a NULL context). */
DTR_API double dtr_context_timeout(const dtr_context_t *ctx);

/*
 * Gathers along a dim that is not the block's leading one are done in slices of about
 * `bytes` gathered bytes each: every slice lands in a small staging buffer (still in cache)
 * and is placed into the output before the next starts, so the interleaving costs a pass
 * over cache instead of one over memory. The default is DTR_SLICE_BYTES when the context is
 * created, else 1 MiB; 0 turns slicing off (the backend's strided form, or one staged pass).
 * Outputs smaller than 8 slices are gathered in one operation either way.
 * Every rank of a mesh must use the same value: the argument agreement checks it.
 * INVALID_ARGUMENT for a negative value.
 */
DTR_API dtr_status_t dtr_context_set_slice_bytes(dtr_context_t *ctx, int64_t bytes);

/* The context's slice size in bytes (0 for a NULL context or slicing off). */
DTR_API int64_t dtr_context_slice_bytes(const dtr_context_t *ctx);

/*
 * Puts the context's buffers in another memory space (runtime/memory.h): from then on
 * `in`, `out` and the group collectives' buffers are buffers of that space, and so is the
 * context's scratch memory. The context takes ownership of `state` (freed through
 * ops->destroy with the context, also when this call fails). A backend without
 * DTR_BACKEND_CAP_DEVICE is wrapped so that each operation stages through host memory.
 * Only before the context's first call; once per context. Every slot of ops is required.
 */
DTR_API dtr_status_t dtr_context_set_memory(dtr_context_t *ctx, const dtr_memory_ops_t *ops,
                                            void *state);

/* The memory space's name: "host", or the name of the one set ("cuda"). */
DTR_API const char *dtr_context_memory(const dtr_context_t *ctx);

/* Waits until the work a completed call issued on the memory space (and the backend's
 * stream) is done: with an asynchronous space (CUDA), dtr_redistribute returns once every
 * operation is issued, and the output is ready after this (or after the caller synchronises
 * the stream). DTR_OK at once on host memory. */
DTR_API dtr_status_t dtr_context_sync(dtr_context_t *ctx);

/*
 * bytes (>= 1) of the memory the context's operations move fastest, in *p (written only on
 * success), 64-byte aligned. Collective: every rank of the context calls it, in the same
 * order with its other allocations (bytes may differ between ranks). On the MPI backend it
 * is a part of a segment every rank of the node maps: a reduction (P -> S, P -> R, the
 * group collectives) whose every member's buffers lie in one such allocation reads them
 * where they are, without copying them through the shared-memory rings (docs/executor.md,
 * "Reductions on shared allocations"). A context on a memory space returns the space's
 * memory; a backend without its own allocator, plain host memory. Free it with
 * dtr_context_free on the same context, before destroying the context.
 */
DTR_API dtr_status_t dtr_context_alloc(dtr_context_t *ctx, int64_t bytes, void **p);

/* Frees what dtr_context_alloc returned (local: no other rank takes part; NULL is a no-op).
 * DTR_ERR_INVALID_ARGUMENT for a pointer the context did not allocate. */
DTR_API dtr_status_t dtr_context_free(dtr_context_t *ctx, void *p);

/* Whether a timeout aborted the context (every call on it then returns DTR_ERR_ABORTED). */
DTR_API bool dtr_context_aborted(const dtr_context_t *ctx);

/* Bytes of scratch memory the context holds now (it grows to the largest plan run). */
DTR_API int64_t dtr_context_scratch_bytes(const dtr_context_t *ctx);

/* ---- collectives on a mesh's groups (the gradient-reduction hooks run on these) -------
 *
 * The group: the ranks of `mesh` that share this rank's coordinate on every mesh dim not in
 * `dims` (a bit mask, bit i = mesh dim i), in row-major order over the dims in `dims`. So on
 * a 2x4 mesh, dims 0x2 is this rank's row of 4, 0x1 its column of 2, 0x3 all 8. A group of
 * one copies. Every member calls with the same mesh, dims, count, dtype and op; as in
 * dtr_redistribute, one small all-reduce first checks that (DTR_ERR_MISMATCH) and every
 * member's arguments (DTR_ERR_REMOTE on the others), unless DTR_AGREE=0. AVG on a backend
 * without it is SUM, then a divide by the group size. Float and integer dtypes; fp8 types
 * are storage only. The group's communicator is kept in the context's communicator cache,
 * shared with dtr_redistribute.
 */

/*
 * For a rank whose arguments to a collective call are too wrong to make the call at all (a
 * placement that does not parse, a missing buffer, a shape past the limits): joins the
 * argument agreement the call's other ranks start with, so that their call fails at once
 * with DTR_ERR_REMOTE instead of waiting for this rank, and every rank's next call pairs
 * with the next. The call is named by what it runs over:
 *   to_mesh NULL, dims DTR_DIMS_MESH  dtr_redistribute*, dtr_redistribute_batch* on mesh
 *   to_mesh NULL, dims a mask         dtr_all_reduce, dtr_reduce_scatter, the gradient hooks
 *                                     and parameter groups over mesh's group of `dims`
 *   to_mesh given                     dtr_redistribute_cross* from mesh to to_mesh (dims
 *                                     not used)
 * Returns `status` (DTR_ERR_INVALID_ARGUMENT for DTR_OK) with "dtr_refuse: msg" as this
 * rank's error; at once, without communicating, where the call leaves this rank out or has
 * no agreement (a group of one, DTR_AGREE=0). Collective as the call it stands for; the
 * bindings (Python) call it for every argument they refuse before the call.
 */
#define DTR_DIMS_MESH 0xffffffffu
DTR_API dtr_status_t dtr_refuse(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                const dtr_mesh_t *to_mesh, dtr_status_t status,
                                const char *msg);

/* The size of the group `dims` selects (1 for dims == 0); *n written on success. */
DTR_API dtr_status_t dtr_mesh_group_size(const dtr_mesh_t *mesh, unsigned dims, int64_t *n);

/* `rank`'s place in its group for `dims` (0 .. size - 1): the piece a reduce-scatter gives
 * it. INVALID_ARGUMENT if rank is not on the mesh; *index written on success. */
DTR_API dtr_status_t dtr_mesh_group_index(const dtr_mesh_t *mesh, unsigned dims, int rank,
                                          int64_t *index);

/* recv[k] = the reduction of every member's send[k], k < count. send == recv: in place;
 * otherwise they must not overlap. */
DTR_API dtr_status_t dtr_all_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                    const void *send, void *recv, int64_t count,
                                    dtr_dtype_t dtype, dtr_reduce_op_t op);

/* send holds n pieces of `count` elements (n = the group size), in member order; recv gets
 * the reduction of every member's piece k, where k is this rank's place in the group. recv
 * (count elements) must not overlap send. */
DTR_API dtr_status_t dtr_reduce_scatter(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                        unsigned dims, const void *send, void *recv,
                                        int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op);

#ifdef __cplusplus
}
#endif

#endif
