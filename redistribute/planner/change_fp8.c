/*
 * A block-scaled change (dtr_change_options_t.block_scale, change.c): each source tensor of
 * a real float dtype goes to an fp8 destination with one f32 scale per block (numeric/fp8.c
 * has the arithmetic). Planned as two changes: the blocks' amax, an i32 MAX all-reduce of
 * each tensor's scales' shape over the source mesh (P(max) -> R: every rank holding part of
 * a block gives its part's amax), and the move of 2n tensors, the n quantized tensors from
 * their source placements to dst and their n scales from Replicate on the source mesh to
 * dst's placements on the scales' shape ("laid out like the weight"). The move is the
 * change's own plan (a batch, or rounds between meshes); the executor quantizes between the
 * two (redistribute/executor/change_run.c).
 */
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"
#include "redistribute/planner/internal.h"

static const char *const C = "dtr_change_create";

/* Tensor i's specs checked for a block-scaled change; an error naming the first wrong. */
static dtr_status_t dtr__fp8_check(int i, const dtr_spec_t *src, const dtr_spec_t *dst,
                                   int64_t block) {
    if (block < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "opts->block_scale: %lld (a block edge "
                          "of 1 or more elements; 0: no block scaling)", (long long)block);
    if (dst->dtype != DTR_F8E4M3 && dst->dtype != DTR_F8E5M2)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "dst[%d]: dtype %s: opts->block_scale "
                          "scales into f8e4m3 or f8e5m2", i, dtr_dtype_name(dst->dtype));
    const dtr_dtype_info_t *s = dtr_dtype_info(src->dtype);
    if (s == NULL || !s->is_float || s->is_complex || s->storage_only)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "src[%d]: dtype %s: block-scaled fp8 "
                          "quantizes f32, f64, f16 or bf16 values", i,
                          s != NULL ? s->name : "?");
    if (src->ndim != dst->ndim || memcmp(src->shape, dst->shape, sizeof(int64_t) *
                                         (size_t)src->ndim) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "dst[%d]: its shape is not src[%d]'s", i,
                          i);
    int na = dtr_mesh_ndims(src->mesh), nb = dtr_mesh_ndims(dst->mesh);
    for (int k = 0; k < na; k++)
        if (src->placements[k].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_UNSUPPORTED, C, "src[%d]: Partial on mesh dim %d: "
                              "block-scaled fp8 quantizes values, and a Partial source holds "
                              "sums still to be reduced (reduce it first)", i, k);
    for (int k = 0; k < nb; k++)
        if (dst->placements[k].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, C, "dst[%d]: Partial on mesh dim %d: "
                              "an fp8 destination holds values, not partial sums", i, k);
    return DTR_OK;
}

/* The specs of tensor i's amax (i32, P(max) -> R on the source mesh) and of its part of the
 * move: q = src as fp8, the scales from R on the source mesh to dst's placements. */
static dtr_status_t dtr__fp8_specs(int i, int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                   int64_t block, dtr__change_fp8_t *f, dtr_spec_t *qsrc,
                                   dtr_spec_t *qdst) {
    int64_t sshape[DTR_MAX_TENSOR_DIMS];
    dtr__scale_shape(src->ndim, src->shape, block, sshape);
    int na = dtr_mesh_ndims(src->mesh);
    dtr_placement_t maxes[DTR_MAX_MESH_DIMS], reps[DTR_MAX_MESH_DIMS];
    for (int k = 0; k < na; k++) {
        maxes[k] = dtr_partial(DTR_REDUCE_MAX);
        reps[k] = dtr_replicate();
    }
    DTR_CHECK(dtr_spec_init(&f->amax_src[i], src->mesh, maxes, na, sshape, src->ndim, DTR_I32));
    DTR_CHECK(dtr_spec_init(&f->amax_dst[i], src->mesh, reps, na, sshape, src->ndim, DTR_I32));
    qsrc[i] = *src;
    qsrc[i].dtype = dst->dtype;
    qdst[i] = *dst;
    DTR_CHECK(dtr_spec_init(&qsrc[n + i], src->mesh, reps, na, sshape, src->ndim, DTR_F32));
    dtr_status_t st = dtr_spec_init(&qdst[n + i], dst->mesh, dst->placements,
                                    dtr_mesh_ndims(dst->mesh), sshape, src->ndim, DTR_F32);
    if (st != DTR_OK)
        return dtr__error(st, C, "dst[%d]: its placements do not lay out the scales' shape "
                          "(%s)", i, dtr_last_error());
    f->src[i] = *src;
    f->to[i] = dst->dtype;
    return DTR_OK;
}

void dtr__change_fp8_destroy(dtr__change_fp8_t *f) {
    if (f == NULL) return;
    dtr_batch_plan_destroy(f->amax);
    free(f->src);
    free(f->to);
    free(f->qin);
    free(f->qin_bytes);
    free(f->amax_src);
    free(f->amax_dst);
    free(f->scratch);
    free(f);
}

dtr_status_t dtr__change_fp8_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                    const dtr_change_options_t *o, dtr__change_fp8_t **out,
                                    dtr_spec_t **qsrc, dtr_spec_t **qdst) {
    if (o->backward)
        return dtr__error(DTR_ERR_UNSUPPORTED, C, "opts->backward: a block-scaled change has "
                          "no backward plan");
    for (int i = 0; i < n; i++) {
        dtr_status_t st = dtr__fp8_check(i, &src[i], &dst[i], o->block_scale);
        if (st != DTR_OK) return st;
    }
    dtr__change_fp8_t *f = calloc(1, sizeof *f);
    dtr_spec_t *qs = calloc(2 * (size_t)n, sizeof *qs), *qd = calloc(2 * (size_t)n, sizeof *qd);
    dtr_status_t st = DTR_OK;
    if (f == NULL || qs == NULL || qd == NULL ||
        (f->src = calloc((size_t)n, sizeof *f->src)) == NULL ||
        (f->to = calloc((size_t)n, sizeof *f->to)) == NULL ||
        (f->qin = calloc(2 * (size_t)n, sizeof *f->qin)) == NULL ||
        (f->qin_bytes = calloc(2 * (size_t)n, sizeof *f->qin_bytes)) == NULL ||
        (f->amax_src = calloc((size_t)n, sizeof *f->amax_src)) == NULL ||
        (f->amax_dst = calloc((size_t)n, sizeof *f->amax_dst)) == NULL)
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, C, "the block-scaled change");
    if (f != NULL) {
        f->n = n;
        f->block = o->block_scale;
    }
    for (int i = 0; st == DTR_OK && i < n; i++)
        st = dtr__fp8_specs(i, n, &src[i], &dst[i], o->block_scale, f, qs, qd);
    if (st == DTR_OK) {
        dtr_plan_options_t a = {.cost = o->cost};
        st = dtr_batch_plan_create(n, f->amax_src, f->amax_dst, &a, NULL, &f->amax);
    }
    if (st != DTR_OK) {
        dtr__change_fp8_destroy(f);
        free(qs);
        free(qd);
        return st;
    }
    *out = f;
    *qsrc = qs;
    *qdst = qd;
    return DTR_OK;
}
