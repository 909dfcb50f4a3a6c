/*
 * The HSDP pipeline (param_group.h), seed 004's order: pushing group k waits for group k-1's
 * reduce-scatter, completes the all-reduce before it (group k-2's), starts group k's
 * reduce-scatter, then starts group k-1's all-reduce. So group k's reduce-scatter and group
 * k-1's all-reduce are in flight together while the caller computes group k+1's gradients;
 * every rank issues the same operations in the same order. (A context that stages a host
 * backend for a memory space holds one operation at a time; its group operations complete
 * one before the next starts: runtime/group.h.)
 */
#include <stdlib.h>

#include "grad/param_group_internal.h"
#include "core/common.h"

struct dtr_grad_pipeline {
    dtr_context_t *ctx;
    dtr_param_group_t *rs; /* the group whose reduce-scatter is in flight */
    dtr_param_group_t *ar; /* the group whose all-reduce is in flight */
};

dtr_status_t dtr_grad_pipeline_create(dtr_context_t *ctx, dtr_grad_pipeline_t **out) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(out, __func__);
    dtr_grad_pipeline_t *p = calloc(1, sizeof *p);
    if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "pipeline");
    p->ctx = ctx;
    *out = p;
    return DTR_OK;
}

/* Completes the reduce-scatter in flight and the all-reduce in flight; the group whose
 * reduce-scatter it was (when it synced, its all-reduce is still to start) in *prev. */
static dtr_status_t dtr__drain_two(dtr_grad_pipeline_t *p, dtr_param_group_t **prev) {
    dtr_status_t st = DTR_OK;
    *prev = NULL;
    if (p->rs != NULL) {
        st = dtr__group_rs_done(p->rs);
        if (st == DTR_OK && p->rs->sync) *prev = p->rs;
        p->rs = NULL;
    }
    if (p->ar != NULL) {
        dtr_status_t s2 = dtr__group_ar_done(p->ar);
        if (st == DTR_OK) st = s2;
        p->ar = NULL;
    }
    if (st != DTR_OK && *prev != NULL) {
        (*prev)->pending = false;
        *prev = NULL;
    }
    return st;
}

dtr_status_t dtr_grad_pipeline_push(dtr_grad_pipeline_t *p, dtr_param_group_t *g,
                                    const void *const *grads, const size_t *grad_bytes,
                                    bool sync, void *const *outs, const size_t *out_bytes) {
    static const char func[] = "dtr_grad_pipeline_push";
    DTR_CHECK_PTR(p, func);
    DTR_CHECK_PTR(g, func);
    if (g->ctx != p->ctx)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "g: made on another context than the pipeline's");
    dtr_param_group_t *prev;
    DTR_CHECK(dtr__drain_two(p, &prev));
    dtr_status_t st = dtr__group_begin(g, grads, grad_bytes, sync, outs, out_bytes, func);
    if (st == DTR_OK) p->rs = g;
    /* The previous group's all-reduce runs whether or not g could start: every rank got the
     * same verdict on g from the agreement. */
    if (prev != NULL) {
        dtr_status_t s2 = dtr__group_ar_start(prev);
        if (s2 == DTR_OK) p->ar = prev;
        if (st == DTR_OK) st = s2;
    }
    return st;
}

dtr_status_t dtr_grad_pipeline_finish(dtr_grad_pipeline_t *p) {
    DTR_CHECK_PTR(p, __func__);
    dtr_param_group_t *prev;
    dtr_status_t st = dtr__drain_two(p, &prev);
    if (prev != NULL) {
        st = dtr__group_ar_start(prev);
        if (st == DTR_OK) st = dtr__group_ar_done(prev);
    }
    return st;
}

void dtr_grad_pipeline_destroy(dtr_grad_pipeline_t *p) {
    if (p == NULL) return;
    (void)dtr_grad_pipeline_finish(p);
    free(p);
}
