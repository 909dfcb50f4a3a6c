/*
 * The executor: runs a plan on this rank's local buffer, through a communication backend.
 *
 * A backend is a const table of operations (dtr_backend_ops_t, backend.h) plus its state; the MPI
 * backend (backends/mpi/dtr_mpi.h) is the embedded default. A context binds a backend to
 * the scratch memory and the per-mesh communicators the executor reuses across calls.
 *
 * Every call is collective over the plan's mesh: each rank of the mesh calls it with the
 * same plan (the same specs and strategy) and its own buffers. Before any rank reads
 * another's data the ranks agree, in one small all-reduce, that their plans match and that
 * every rank's arguments are good, so a rank with a wrong buffer size or a different spec
 * makes every rank return an error instead of hanging (DTR_ERR_MISMATCH / DTR_ERR_REMOTE on
 * the others), and the context stays usable. On a backend that can cancel (the MPI
 * backend), a rank with good arguments starts its first operation beside the agreement and
 * cancels it if the agreement fails (docs/reliability.md, "The argument agreement").
 * A rank outside the mesh takes part in nothing: it copies `in` to `out` and returns.
 *
 * Buffers: `in` holds this rank's block of the source spec (dtr_spec_layout: local_shape,
 * row-major, `bytes` long); `out` receives its block of the target spec. They must not
 * overlap. `in` is never written. On error `out` may hold partial results (its contents are
 * unspecified) and `in` is intact; scratch memory stays with the context for reuse.
 *
 * Deadlines: every backend operation a call starts must complete within the context's
 * timeout (DTR_TIMEOUT_S when the context is created, default 600 s; 0 waits forever;
 * dtr_context_set_timeout changes it), counted from the operation's start. Otherwise the call
 * returns DTR_ERR_TIMEOUT naming the step and mesh dim (or the argument agreement), and the
 * context is aborted: the operation may still be pending in the backend, which can write
 * into `out` and the context's memory when a late peer joins, so every later call on the
 * context returns DTR_ERR_ABORTED and dtr_context_destroy keeps its memory (reachable, never
 * freed). After a timeout, stop using `out`, destroy the context, and end or rebuild the job,
 * as after ncclCommAbort. `in` is never a receive target, so it stays intact.
 *
 * Threads: a context is used by one thread at a time (calls on one context are not
 * synchronised); different contexts may be used from different threads as far as the
 * backend allows (MPI needs MPI_THREAD_MULTIPLE for that).
 */
#ifndef DTR_REDISTRIBUTE_EXECUTOR_EXECUTOR_H
#define DTR_REDISTRIBUTE_EXECUTOR_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "redistribute/executor/backend.h"
#include "redistribute/executor/memory.h"
#include "redistribute/planner/planner.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtr_context dtr_context_t;
typedef struct dtr_request dtr_request_t;

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
    /* DTR_BACKEND_CAP_* of its operations: what it does natively; the executor does the
     * rest (P(avg) as SUM then a divide, packing where it takes no span lists, one
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
 * Puts the context's buffers in another memory space (redistribute/executor/memory.h): from then on
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

/* Runs plan on this rank: reads in_bytes from `in`, writes out_bytes to `out` (the exact
 * sizes of this rank's source and target blocks). Blocks until done. */
DTR_API dtr_status_t dtr_redistribute(dtr_context_t *ctx, const dtr_plan_t *plan,
                                      const void *in, size_t in_bytes, void *out,
                                      size_t out_bytes);

/*
 * The non-blocking form: starts the redistribution and returns a request owned by the
 * context. The plan and both buffers must stay valid and untouched until the request
 * completes. Progress is made inside dtr_request_test and dtr_request_wait, which also
 * release the request when it completes (its status is their return value). DTR_ERR_BUSY
 * if the context's request is still in flight.
 */
DTR_API dtr_status_t dtr_redistribute_start(dtr_context_t *ctx, const dtr_plan_t *plan,
                                            const void *in, size_t in_bytes, void *out,
                                            size_t out_bytes, dtr_request_t **req);

/* Makes progress; *done tells whether the request completed (then it is released and the
 * return value is its status). */
DTR_API dtr_status_t dtr_request_test(dtr_request_t *req, bool *done);

/* Completes the request and releases it; returns its status. */
DTR_API dtr_status_t dtr_request_wait(dtr_request_t *req);

/*
 * The baseline for overhead measurements: issues the plan's collectives with the same
 * groups, byte counts and element counts as dtr_redistribute, on the context's scratch
 * buffers, with no packing, unpacking, local steps or argument agreement. What it computes
 * is meaningless; how long it takes is the bare cost of the plan's communication.
 */
DTR_API dtr_status_t dtr_redistribute_baseline(dtr_context_t *ctx, const dtr_plan_t *plan);

/* ---- batches: many tensors at once (dtr_batch_plan_t, planner.h) ----------------------
 *
 * Runs a batched plan: in[t] holds this rank's block of tensor t's source (in_bytes[t], its
 * exact size), out[t] receives its block of the target (out_bytes[t] at least). Every
 * array has one entry per tensor; no output may overlap an input or another output. As
 * for dtr_redistribute: collective over the mesh (every rank with the same batch), one
 * argument agreement for the whole batch (a rank's bad buffer or different batch is an
 * error on every rank, naming the tensor), inputs never written, deadlines per operation.
 * A coalesced round moves all its member steps in one backend operation; the context's
 * scratch then holds that round's packed pieces, and each member two step buffers as large
 * as its largest intermediate block.
 */
DTR_API dtr_status_t dtr_redistribute_batch(dtr_context_t *ctx, const dtr_batch_plan_t *plan,
                                            const void *const *in, const size_t *in_bytes,
                                            void *const *out, const size_t *out_bytes);

/* The non-blocking form (dtr_request_test / dtr_request_wait complete it). The plan and
 * every buffer and array must stay valid and untouched until then. */
DTR_API dtr_status_t dtr_redistribute_batch_start(dtr_context_t *ctx,
                                                  const dtr_batch_plan_t *plan,
                                                  const void *const *in, const size_t *in_bytes,
                                                  void *const *out, const size_t *out_bytes,
                                                  dtr_request_t **req);

/* The batch's collectives alone (as dtr_redistribute_baseline): the same operations with the
 * same counts on scratch, without packing, local steps or agreement. */
DTR_API dtr_status_t dtr_redistribute_batch_baseline(dtr_context_t *ctx,
                                                     const dtr_batch_plan_t *plan);

/* ---- collectives on a mesh's groups (the gradient-reduction hooks run on these) -------
 *
 * The group: the ranks of `mesh` that share this rank's coordinate on every mesh dim not in
 * `dims` (a bit mask, bit i = mesh dim i), in row-major order over the dims in `dims`. So on
 * a 2x4 mesh, dims 0x2 is this rank's row of 4, 0x1 its column of 2, 0x3 all 8. A group of
 * one copies. Every member calls with the same mesh, dims, count, dtype and op; as in
 * dtr_redistribute, one small all-reduce first checks that (DTR_ERR_MISMATCH) and every
 * member's arguments (DTR_ERR_REMOTE on the others), unless DTR_AGREE=0. AVG on a backend
 * without it is SUM, then a divide by the group size. Float and integer dtypes; fp8 types
 * are storage only. The group's communicator is cached in the context as the executor's.
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

/*
 * Proof of delivery: a 64-bit digest of the whole tensor `spec` describes that does not
 * depend on its layout, so the same tensor placed any way on any mesh gives the same digest
 * (a change that delivered gives its source's). It is the sum mod 2^64, over the tensor's
 * elements, of dtr_digest_mix(the element's flat row-major index, the low and high 8-byte
 * words of its bytes, little-endian, zero-extended): each element once, a Replicate mesh
 * dim's copies counted by the member at coordinate 0 only. No gather: each rank reads its
 * own block where it lies (docs/cross-mesh.md, "Proof of delivery", has the cost).
 * dtr_digest_local: this rank's share (pure; the shares of a mesh's ranks add up to the
 * digest); dtr_digest: collective over spec's mesh (one small all-reduce), *out written on
 * its ranks only (a rank outside the mesh returns DTR_OK at once). Refused on every rank
 * alike (INVALID_ARGUMENT): a Partial placement (no values until reduced), bytes not this
 * rank's block; on a context of device memory, UNSUPPORTED.
 */
DTR_API uint64_t dtr_digest_mix(uint64_t index, uint64_t lo, uint64_t hi);
DTR_API dtr_status_t dtr_digest_local(const dtr_spec_t *spec, int rank, const void *local,
                                      int64_t bytes, uint64_t *partial);
DTR_API dtr_status_t dtr_digest(dtr_context_t *ctx, const dtr_spec_t *spec, const void *local,
                                int64_t bytes, uint64_t *out);

/*
 * Runs a change between meshes (dtr_cross_plan_create): collective over the ranks of both
 * meshes (RA and RB), in the same order with the same plan; a rank in neither returns at
 * once. A rank of the source mesh passes its source block as `in` (in_bytes its exact
 * size); a rank of the destination mesh receives its target block in `out` (out_bytes at
 * least its size; the block of dtr_cross_plan_dst's spec, which a relabeled plan changed);
 * a rank in both passes both (they must not overlap); `in` of a rank only in the
 * destination, and `out` of one only in the source, are not read (NULL is fine). The
 * source ranks first run the plan's reduction on their mesh (dtr_redistribute, on this
 * context), then every rank of both meshes takes part in the exchanges of boxes (one, or
 * one per round under a staging cap). Blocks until done. Errors: as dtr_redistribute's
 * (the argument agreement covers both meshes; a rank whose arguments are wrong makes every
 * rank return an error); on error `out` holds unspecified contents, `in` is intact. Uses the
 * context's scratch memory: this rank's reduced source blocks and its staging (the plan's
 * staging_bytes_max at most).
 */
DTR_API dtr_status_t dtr_redistribute_cross(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                                            const void *in, size_t in_bytes, void *out,
                                            size_t out_bytes);
/* The same, returning once the first round's exchange has started (after the agreement and
 * that round's reductions on the source mesh): dtr_request_test makes progress (each
 * round's boxes placed as its exchange completes, the next round started, its reductions
 * blocking), dtr_request_wait completes it. The buffers must stay untouched until then;
 * the context runs nothing else meanwhile. *req written on success. */
DTR_API dtr_status_t dtr_redistribute_cross_start(dtr_context_t *ctx,
                                                  const dtr_cross_plan_t *plan, const void *in,
                                                  size_t in_bytes, void *out, size_t out_bytes,
                                                  dtr_request_t **req);
/* The same for a plan of many tensors (dtr_cross_plan_create_batch): in[i], in_bytes[i],
 * out[i], out_bytes[i] for tensor i, each as above; the arrays themselves must not be NULL
 * (their entries may be where the rank holds no block of that side). One agreement, the
 * reductions on the source mesh tensor by tensor, then the rounds of all tensors' boxes. */
DTR_API dtr_status_t dtr_redistribute_cross_batch(dtr_context_t *ctx,
                                                  const dtr_cross_plan_t *plan,
                                                  const void *const *in, const size_t *in_bytes,
                                                  void *const *out, const size_t *out_bytes);
/* The same, non-blocking as dtr_redistribute_cross_start (the arrays are read by the call;
 * the buffers they name must stay untouched until the request completes). */
DTR_API dtr_status_t dtr_redistribute_cross_batch_start(
    dtr_context_t *ctx, const dtr_cross_plan_t *plan, const void *const *in,
    const size_t *in_bytes, void *const *out, const size_t *out_bytes, dtr_request_t **req);

/* ---- one change, any form (dtr_change_t, planner.h; change_run.c) --------------------
 *
 * Runs a change: in[i] (in_bytes[i]) this rank's source block of tensor i, out[i]
 * (out_bytes[i]) where its destination block goes (dtr_change_dst's spec), i < the change's
 * tensors; as the form's own call says (dtr_redistribute, _batch, _cross, _cross_batch):
 * collective over the ranks of its mesh or meshes, a rank in neither returning at once. The
 * arrays must not be NULL; their entries may be where a rank holds no block. */
DTR_API dtr_status_t dtr_change_run(dtr_context_t *ctx, const dtr_change_t *change,
                                    const void *const *in, const size_t *in_bytes,
                                    void *const *out, const size_t *out_bytes);
/* The non-blocking form, as the form's _start call: dtr_request_test / _wait complete it;
 * the change and the buffers stay valid and untouched until then. */
DTR_API dtr_status_t dtr_change_start(dtr_context_t *ctx, const dtr_change_t *change,
                                      const void *const *in, const size_t *in_bytes,
                                      void *const *out, const size_t *out_bytes,
                                      dtr_request_t **req);

#ifdef __cplusplus
}
#endif

#endif
