/*
 * The executor: runs a plan on this rank's local buffer, on a context (runtime/runtime.h: a
 * context binds a communication backend, runtime/backend.h, to the scratch memory and the
 * per-mesh communicators that calls reuse; the MPI backend, backends/mpi/dtr_mpi.h, is the
 * embedded default).
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
#include "redistribute/planner/planner.h"
#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtr_request dtr_request_t;

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
 * rank's block, ranks that gave different specs (shape, dtype or placements: a second small
 * all-reduce checks); on a context of device memory, UNSUPPORTED.
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
/* The same, returning at once with the argument agreement over both meshes' ranks in flight
 * (it does not wait for the other ranks to call; the first call between two meshes makes
 * their group, which each rank waits in): dtr_request_test makes progress (after the
 * verdict, the first round's reductions on the source mesh, blocking, and its exchange
 * started; each round's boxes placed as its exchange completes, the next round started),
 * dtr_request_wait completes it. An argument error is returned by the test or wait that
 * completes the agreement, on every rank alike. The buffers must stay untouched until then;
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

/* What a block-scaled change's last call sent from this rank, for proof of delivery:
 * i < n tensor i as the source ranks quantized it (src[i]'s placements, dst[i]'s fp8
 * dtype), n <= i < 2n its scales (f32, Replicate over the source mesh); *spec its spec, *buf
 * and *bytes this rank's block of it (NULL and 0 on a rank outside the source mesh). The
 * block lies in the change's scratch: valid until the change is called again or destroyed
 * (after dtr_change_start, as soon as it returns). dtr_digest of it over the source mesh
 * equals dtr_digest of tensor i's result (i >= n: of dtr_change_scales's) over the
 * destination's where the move delivered (docs/cross-mesh.md, "Block-scaled fp8").
 * INVALID_ARGUMENT: another change, i outside 0..2n-1, no call of the change yet, or the
 * last one failed on this rank (dtr_change_run: anywhere in it; dtr_change_start: before its
 * move was started). */
DTR_API dtr_status_t dtr_change_sent(const dtr_change_t *change, int i, dtr_spec_t *spec,
                                     const void **buf, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
