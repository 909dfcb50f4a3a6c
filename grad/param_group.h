/*
 * Parameter groups: FSDP2's foreach reduction and gather of many parameters at once, and an
 * HSDP pipeline that overlaps one layer's reduce-scatter with the previous layer's
 * all-reduce. A group is a list of parameters (full shape, shard
 * dim, dtype) reduced together:
 *
 *   - one reduce-scatter over the shard group for all of the group's gradients: rank k's
 *     pieces of every gradient lie together, each padded to torch.chunk's size along its
 *     shard dim (any dim) as FSDP2 pads, cast to the reduce dtype and pre-divided;
 *   - its output lands straight in one fused buffer, each parameter's piece starting on a
 *     DTR_FUSED_ALIGN (512-byte) boundary; microbatches with sync false add into an
 *     accumulator and stop there (HSDP gradient accumulation);
 *   - with sync, one all-reduce of the whole fused buffer over the replicate group, one
 *     divide for the whole group (the AVG of a backend without AVG, and the post factor),
 *     and each parameter's shard cast back to its dtype into the caller's output.
 *
 * The divide factors are dtr_grad_factors' for the groups the reduction uses (D = shard
 * group x replicate group; or the user's factor; SUM forced or AVG), computed once per
 * group. The same layout all-gathers a group's shards into their unsharded tensors.
 *
 * The pipeline runs groups in backward order, so a caller overlaps backward compute with
 * communication: pushing layer k waits for layer k-1's reduce-scatter, issues layer k's,
 * then issues layer k-1's all-reduce; finish drains it. At most one reduce-scatter and one
 * all-reduce are in flight. All calls are collective over the shard and replicate groups
 * together, with one argument agreement per call (errors name the parameter); inputs are
 * never written, outputs only on success.
 *
 * Any memory space: on a context with one (dtr_context_set_memory), every buffer is of the
 * space and the packing, casts, divides and accumulation go through its table (memory.h;
 * accumulation needs its optional `add`, divides take whole numbers, so a fractional
 * factor is UNSUPPORTED there). A context staging a host backend holds one operation at a
 * time, so there each operation completes before the next one starts.
 */
#ifndef DTR_AUTOGRAD_GROUP_H
#define DTR_AUTOGRAD_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grad/grad.h"
#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One parameter: its full (unsharded) shape, the dim the shard group splits (torch.chunk
 * semantics: uneven dims leave the last ranks fewer rows, maybe none), its dtype (float). */
typedef struct {
    int ndim; /* 1..DTR_MAX_TENSOR_DIMS */
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int shard_dim;
    dtr_dtype_t dtype;
} dtr_param_desc_t;

typedef struct {
    const dtr_mesh_t *mesh;  /* borrowed; must outlive the group */
    unsigned shard_dims;     /* the reduce-scatter group; 0: none (DDP: all-reduce only) */
    unsigned replicate_dims; /* the all-reduce group; 0: none (FSDP); disjoint */
    int nparams;             /* >= 1 */
    const dtr_param_desc_t *params; /* copied */
    dtr_dtype_t reduce_dtype; /* every gradient is reduced in it (float) */
    double factor;            /* <= 0: unset (divide by D) */
    bool force_sum;
} dtr_param_group_desc_t;

typedef struct dtr_param_group dtr_param_group_t;

/* Checks desc (errors name the field, e.g. "desc->params[3].shard_dim") and lays out the
 * fused buffer. Local. ctx must outlive the group. *out written on success. */
DTR_API dtr_status_t dtr_param_group_create(dtr_context_t *ctx,
                                            const dtr_param_group_desc_t *desc,
                                            dtr_param_group_t **out);
DTR_API void dtr_param_group_destroy(dtr_param_group_t *g);

/* The factors in use and the fused buffer's bytes (the all-reduce's size, padding
 * included). Either out pointer may be NULL. */
DTR_API dtr_status_t dtr_param_group_info(const dtr_param_group_t *g,
                                          dtr_grad_factors_t *factors, int64_t *fused_bytes);

/* Parameter i on this rank: its shard's element count and shape (shard dim: this rank's
 * rows, maybe 0) and its view's byte offset in the fused buffer (a multiple of 512). */
DTR_API dtr_status_t dtr_param_group_param(const dtr_param_group_t *g, int i,
                                           int64_t *shard_numel, int64_t *shard_shape,
                                           int64_t *view_offset);

/*
 * Reduces one microbatch's gradients: grads[i] is parameter i's full gradient (its dtype,
 * grad_bytes[i] bytes; never written). With sync false the reduce-scatter's output is only
 * accumulated; with sync true the accumulated microbatches are added, the replicate group
 * all-reduces, and outs[i] (out_bytes[i] >= shard bytes) receives parameter i's shard of
 * the mean. outs and out_bytes may be NULL when sync is false. Blocking: a pipeline of one.
 */
DTR_API dtr_status_t dtr_param_group_reduce(dtr_param_group_t *g, const void *const *grads,
                                            const size_t *grad_bytes, bool sync,
                                            void *const *outs, const size_t *out_bytes);

/* FSDP2's foreach all-gather: shards[i] (this rank's shard of parameter i, shard_bytes[i]
 * bytes, as dtr_param_group_param gives it) gathered over the shard group into fulls[i]
 * (full_bytes[i] >= the full tensor's bytes), with one all-gather for the whole group. */
DTR_API dtr_status_t dtr_param_group_all_gather(dtr_param_group_t *g,
                                                const void *const *shards,
                                                const size_t *shard_bytes, void *const *fulls,
                                                const size_t *full_bytes);

/* ---- the pipeline ---------------------------------------------------------------------- */

typedef struct dtr_grad_pipeline dtr_grad_pipeline_t;

DTR_API dtr_status_t dtr_grad_pipeline_create(dtr_context_t *ctx, dtr_grad_pipeline_t **out);
/* Drains what is in flight (as finish does) and frees the pipeline. */
DTR_API void dtr_grad_pipeline_destroy(dtr_grad_pipeline_t *p);

/*
 * Pushes group g's reduction (arguments as for dtr_param_group_reduce; the arrays are read
 * during the call, the buffers they point to used until the group completes): waits for the
 * previous push's reduce-scatter, and for the all-reduce before it; agrees on and starts
 * g's reduce-scatter; then starts the previous group's all-reduce (when it synced). The
 * outputs of a group are written when its all-reduce completes: by a later push or by
 * finish. A push that fails leaves the groups pushed before it to complete as usual. The
 * context takes no other call while the pipeline holds operations (until finish).
 */
DTR_API dtr_status_t dtr_grad_pipeline_push(dtr_grad_pipeline_t *p, dtr_param_group_t *g,
                                            const void *const *grads, const size_t *grad_bytes,
                                            bool sync, void *const *outs,
                                            const size_t *out_bytes);
/* Completes every pushed group; returns the first error met while draining. */
DTR_API dtr_status_t dtr_grad_pipeline_finish(dtr_grad_pipeline_t *p);

#ifdef __cplusplus
}
#endif

#endif
