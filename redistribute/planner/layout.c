/* The canonical layout of any placements at a mesh coordinate (PyTorch's chunk rule, mesh
 * dims nesting in order): what the builder (plan.c), the balanced reduction (balance.c) and
 * the executor compute every block from. */
#include <string.h>

#include "redistribute/planner/internal.h"

void dtr__ctx_init(dtr__ctx_t *ctx, const dtr_spec_t *spec, const dtr_cost_model_t *cost) {
    memset(ctx, 0, sizeof *ctx);
    ctx->mesh = spec->mesh;
    ctx->mdims = dtr_mesh_ndims(spec->mesh);
    for (int i = 0; i < ctx->mdims; i++) ctx->msize[i] = dtr_mesh_size(spec->mesh, i);
    ctx->ndim = spec->ndim;
    memcpy(ctx->shape, spec->shape, sizeof ctx->shape);
    ctx->item = dtr_dtype_info(spec->dtype)->size;
    ctx->cost = cost;
}

void dtr__layout(const dtr__ctx_t *ctx, const dtr_placement_t *pl, const int64_t *coord,
                 int64_t *shape, int64_t *offset) {
    memcpy(shape, ctx->shape, sizeof ctx->shape);
    memset(offset, 0, sizeof ctx->shape);
    for (int i = 0; i < ctx->mdims; i++) {
        if (pl[i].kind != DTR_SHARD) continue;
        int d = pl[i].dim;
        int64_t n = ctx->msize[i], len = shape[d];
        int64_t c = len / n + (len % n != 0), start = c * coord[i];
        int64_t end = start + c < len ? start + c : len;
        offset[d] += start < len ? start : len;
        shape[d] = end > start ? end - start : 0;
    }
}

bool dtr__innermost(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int i, int d) {
    for (int j = i + 1; j < ctx->mdims; j++)
        if (pl[j].kind == DTR_SHARD && pl[j].dim == d && ctx->msize[j] > 1) return false;
    return true;
}

bool dtr__next_coord(const dtr__ctx_t *ctx, const bool *vary, int64_t *coord) {
    for (int i = ctx->mdims - 1; i >= 0; i--) {
        if (!vary[i]) continue;
        if (++coord[i] < ctx->msize[i]) return true;
        coord[i] = 0;
    }
    return false;
}
