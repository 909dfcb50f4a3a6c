/*
 * Gradient reduction: DDP-style communication hooks, the FSDP/HSDP reducer with
 * its runtime divide factors and gradient accumulation, and the fused all-reduce. All run on
 * the runtime's collectives (dtr_all_reduce / dtr_reduce_scatter in runtime/runtime.h),
 * so on any backend, and are collective over their group: every
 * member calls with the same arguments. The semantics are docs/design.md's "Gradient
 * reduction";
 * autograd/README.md walks through them with the numbers.
 *
 * Groups are named by a mask of mesh dims (bit i = mesh dim i), as for dtr_all_reduce: on a
 * 2x4 HSDP mesh, mesh dim 0 (mask 0x1) is the replicate group and mesh dim 1 (0x2) the
 * shard group.
 *
 * Any memory space: on a context with one (dtr_context_set_memory), every buffer passed in
 * is of the space, the library's own (the low-precision copy, the reducer's pieces and
 * accumulator, the fused buffer) are allocated there, and every cast, divide, copy and
 * accumulation goes through the space's table (memory.h). Its divide takes whole numbers,
 * so a reducer whose factors are fractional (a user factor of 2.5; f16 on 6 ranks: pre 4,
 * post 1.5) is UNSUPPORTED there at create, naming desc->factor; accumulation (sync false)
 * needs the space's optional add and is UNSUPPORTED without it, naming sync. A space that
 * refuses a buffer (a host address on a device context) fails the call on every rank that
 * passed one.
 */
#ifndef DTR_AUTOGRAD_GRAD_H
#define DTR_AUTOGRAD_GRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/api.h"
#include "core/status.h"
#include "dtensor/dtensor.h"
#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- DDP-style hooks ------------------------------------------------------------------
 * A hook reduces `count` elements of `buf` (its dtype) in place to their mean over the
 * group `dims` of `mesh`. It is called with the hook's own `arg`. */
typedef dtr_status_t (*dtr_grad_hook_fn)(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                         unsigned dims, void *buf, int64_t count,
                                         dtr_dtype_t dtype);

/* Divides by the group size N, then a SUM all-reduce (PyTorch's allreduce_hook). Float
 * dtypes. arg unused. */
DTR_API dtr_status_t dtr_hook_all_reduce(void *arg, dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                         unsigned dims, void *buf, int64_t count,
                                         dtr_dtype_t dtype);

/* Casts buf down to f16 (bf16), divides by N, SUM all-reduces the low-precision copy and
 * casts the result back into buf (its dtype: f32 or f64; buf in f16 itself is reduced as
 * is). arg unused. */
DTR_API dtr_status_t dtr_hook_fp16_compress(void *arg, dtr_context_t *ctx,
                                            const dtr_mesh_t *mesh, unsigned dims, void *buf,
                                            int64_t count, dtr_dtype_t dtype);
DTR_API dtr_status_t dtr_hook_bf16_compress(void *arg, dtr_context_t *ctx,
                                            const dtr_mesh_t *mesh, unsigned dims, void *buf,
                                            int64_t count, dtr_dtype_t dtype);

/* The compress wrapper around any hook: arg is a dtr_compress_wrapper_t. Casts buf to
 * `low`, runs the inner hook on the low-precision copy, and casts its result back. */
typedef struct {
    dtr_dtype_t low; /* DTR_F16 or DTR_BF16 */
    dtr_grad_hook_fn hook;
    void *hook_arg;
} dtr_compress_wrapper_t;

DTR_API dtr_status_t dtr_hook_compress_wrapper(void *arg, dtr_context_t *ctx,
                                               const dtr_mesh_t *mesh, unsigned dims, void *buf,
                                               int64_t count, dtr_dtype_t dtype);

/* ---- runtime divide factors (FSDP2 style) -------------------------------------------- */

typedef struct {
    int64_t rs_size, ar_size; /* the reduce-scatter and all-reduce groups' sizes */
    int64_t world;            /* D = rs_size x ar_size */
    double factor;            /* what the result is divided by in all: D or the user's */
    double pre, post;         /* divide before and after the collectives; 1 = none */
    dtr_reduce_op_t rs_op;    /* the reduce-scatter's op: AVG or SUM */
    dtr_reduce_op_t ar_op;    /* the all-reduce's op */
} dtr_grad_factors_t;

/*
 * The factors for a reduction over rs_size x ar_size ranks in reduce_dtype:
 *   - f32, bf16, f64 (no overflow risk), factor unset or == D: AVG on both collectives (the
 *     backend's AVG, or SUM then divide by the group size); D == 1: SUM, nothing divided;
 *   - f32, bf16, f64 with a user factor F != D: SUM, pre-divide by F (NCCL's premul-sum);
 *   - f16 (overflow risk): SUM, pre/post = dtr_divide_factors(F) with F = D or the user's;
 *   - force_sum on a type without overflow risk: SUM, post-divide by F.
 * user_factor <= 0 means unset. *out written on success.
 */
DTR_API dtr_status_t dtr_grad_factors(int64_t rs_size, int64_t ar_size, dtr_dtype_t reduce_dtype,
                                      double user_factor, bool force_sum,
                                      dtr_grad_factors_t *out);

/* Names of the collectives these factors run ("reduce_scatter:sum", then "all_reduce:avg";
 * groups of one run none), for printing: writes up to cap names and returns how many there
 * are (0..2). */
DTR_API int dtr_grad_ops(const dtr_grad_factors_t *f, const char **names, int cap);

/* ---- the FSDP / HSDP reducer ------------------------------------------------------------ */

typedef struct {
    const dtr_mesh_t *mesh;  /* borrowed; must outlive the reducer */
    unsigned shard_dims;     /* the reduce-scatter group's mesh dims; 0: none (DDP-like) */
    unsigned replicate_dims; /* the all-reduce group's; 0: none (plain FSDP); disjoint */
    int ndim;                /* the gradient's full (unsharded) shape, 1..DTR_MAX_TENSOR_DIMS */
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int shard_dim;           /* the tensor dim the shard group splits (chunk semantics) */
    dtr_dtype_t param_dtype;  /* the gradient's and the result's dtype (float) */
    dtr_dtype_t reduce_dtype; /* on the wire: param_dtype or lower (f16, bf16) */
    double factor;            /* <= 0: unset (divide by D) */
    bool force_sum;
} dtr_reducer_desc_t;

typedef struct dtr_reducer dtr_reducer_t;

/* Checks desc and computes the factors and this rank's shard. Local (no communication).
 * ctx must stay alive while the reducer is used. *out written on success. */
DTR_API dtr_status_t dtr_reducer_create(dtr_context_t *ctx, const dtr_reducer_desc_t *desc,
                                        dtr_reducer_t **out);
DTR_API void dtr_reducer_destroy(dtr_reducer_t *r);

/* The factors in use, and this rank's shard of the gradient: its shape along shard_dim
 * (torch.chunk's: possibly 0 rows) and element count. Any out pointer may be NULL. */
DTR_API dtr_status_t dtr_reducer_info(const dtr_reducer_t *r, dtr_grad_factors_t *factors,
                                      int64_t *shard_numel, int64_t *shard_shape);

/*
 * Reduces one microbatch's full gradient `grad` (param dtype, the whole shape; never
 * written). The shard group reduce-scatters it (uneven shard dims padded to equal chunks;
 * any shard_dim), pre-divided and in the reduce dtype. With sync false the result is only
 * accumulated: the microbatch skips the all-reduce, as in HSDP gradient accumulation. With
 * sync true the accumulated outputs of earlier microbatches are added in, then the replicate
 * group all-reduces, the result is post-divided and cast to the param dtype into `out`
 * (shard_numel elements) and the accumulator is cleared. Accumulating before the all-reduce
 * is what makes every microbatch count 1/D: all-reducing each microbatch first would give
 * the skipped ones 1/|shard group| instead.
 */
DTR_API dtr_status_t dtr_reducer_reduce(dtr_reducer_t *r, const void *grad, size_t grad_bytes,
                                        bool sync, void *out, size_t out_bytes);

/* ---- the fused all-reduce -------------------------------------------------------------- */

typedef struct {
    void *buf;      /* reduced in place */
    int64_t count;  /* elements */
    unsigned dims;  /* its replicate group */
} dtr_fused_entry_t;

/*
 * All-reduces many gradients of one dtype with op (SUM or AVG): entries with the same group
 * are packed into one buffer, each slice starting on a 512-byte boundary, reduced by one SUM
 * collective per group and divided once (AVG), then copied back. Every member passes the
 * same entries of its group in the same order. *bytes_out (may be NULL): the bytes of the
 * largest fused buffer, padding included.
 */
DTR_API dtr_status_t dtr_fused_all_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                                          dtr_fused_entry_t *entries, int n, dtr_dtype_t dtype,
                                          dtr_reduce_op_t op, int64_t *bytes_out);

/* The alignment of each slice in the fused buffer. */
#define DTR_FUSED_ALIGN 512

#ifdef __cplusplus
}
#endif

#endif
