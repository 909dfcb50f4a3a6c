/* What group.c and pipeline.c share: the parameter group's state and its stages. */
#ifndef DTR_AUTOGRAD_GROUP_INTERNAL_H
#define DTR_AUTOGRAD_GROUP_INTERNAL_H

#include "grad/param_group.h"
#include "grad/internal.h"


struct dtr_param_group {
    dtr_context_t *ctx;
    const dtr_mesh_t *mesh;
    unsigned shard_dims, replicate_dims;
    int n;
    dtr_param_desc_t *params;
    dtr__gparam_t *m;
    dtr_dtype_t reduce_dtype;
    bool force_sum;
    int64_t rs, ar, index;      /* the groups' sizes; this rank's place in the shard group */
    dtr_grad_factors_t f;
    dtr_reduce_op_t rs_op, ar_op; /* what the backend runs */
    double post;                /* the one divide at the end (f.post, times D for SUM-for-AVG) */
    bool premul;                /* f.pre is the reduce-scatter's pre-multiply (NCCL), not the pack's */
    bool direct;                /* host memory, one param dtype, no pre-divide (or the
                                 * backend's span lists divide): the reduce-scatter may read the
                                 * gradients where they lie (span lists, cast on reading where
                                 * the dtypes differ), no pack */
    bool scale;                 /* direct, and the span lists divide and cast as they write
                                 * (group_spans.c): the last collective writes the outputs */
    bool written;               /* the reduction in progress writes the outputs itself */
    char *trash;                /* where a receive list writes padding (group_spans.c) */
    int64_t fused_bytes, gather_bytes;
    void *fused;                /* the reduce-scatter's output, 512-byte aligned views */
    void *result;               /* the all-reduce's output (fused itself with no replicate group) */
    void *acc;                  /* accumulated microbatches (made by the first one) */
    bool have_acc;
    uint64_t hash;
    /* the reduction in progress */
    bool pending, sync;
    void **outs;
};

/* The stages of one reduction, in order: begin (agree, pack, start the reduce-scatter),
 * rs_done (wait; accumulate, or add the accumulator in), ar_start and ar_done (wait, divide
 * once, cast into the outputs) for a synced one. Each clears `pending` on an error. */
dtr_status_t dtr__group_begin(dtr_param_group_t *g, const void *const *grads,
                              const size_t *grad_bytes, bool sync, void *const *outs,
                              const size_t *out_bytes, const char *func);
dtr_status_t dtr__group_rs_done(dtr_param_group_t *g);
dtr_status_t dtr__group_ar_start(dtr_param_group_t *g);
dtr_status_t dtr__group_ar_done(dtr_param_group_t *g);

/* The collectives over span lists (group_spans.c), each started in its slot: the reduce-
 * scatter reading the gradients where they lie, into the fused buffer or (to_outs: a synced
 * reduction's last stage) straight into the outputs; DDP's all-reduce from the gradients
 * into the outputs (no reduce-scatter group); HSDP's all-reduce from the fused buffer into
 * the outputs. The outputs are divided by the post factor and cast as they are written. */
dtr_status_t dtr__rs_spans(dtr_param_group_t *g, const void *const *grads, bool to_outs);
dtr_status_t dtr__ar_spans(dtr_param_group_t *g, const void *const *grads);
dtr_status_t dtr__ar_spans_fused(dtr_param_group_t *g);

#endif
