#include <string.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "dtensor/internal.h"
#include "dtensor/order.h"

dtr_status_t dtr_spec_init(dtr_spec_t *out, const dtr_mesh_t *mesh,
                           const dtr_placement_t *placements, int nplacements,
                           const int64_t *shape, int ndim, dtr_dtype_t dtype) {
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_PTR(placements, __func__);
    int mesh_dims = dtr_mesh_ndims(mesh);
    if (nplacements != mesh_dims)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "nplacements: %d placements for a %d-d mesh (one per mesh dim)",
                          nplacements, mesh_dims);
    if (ndim < 0 || ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ndim: %d, must be 0..%d", ndim,
                          DTR_MAX_TENSOR_DIMS);
    if (ndim > 0) DTR_CHECK_PTR(shape, __func__);
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    if (info == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "dtype: %d is not a dtype",
                          (int)dtype);

    dtr_spec_t spec;
    memset(&spec, 0, sizeof spec);
    spec.mesh = mesh;
    spec.ndim = ndim;
    spec.dtype = dtype;
    int64_t bytes;
    DTR_CHECK(dtr__shape_bytes(shape, ndim, dtype, __func__, &bytes));
    for (int d = 0; d < ndim; d++) spec.shape[d] = shape[d];
    bool strided = false, ordered = false;
    for (int i = 0; i < mesh_dims; i++) {
        dtr_placement_t p = placements[i];
        if ((unsigned)p.kind >= DTR_PLACEMENT_KIND_LAST ||
            (p.kind == DTR_PARTIAL && (unsigned)p.op >= DTR_REDUCE_OP_LAST))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "placements[%d]: kind %d / op %d is not a valid placement", i,
                              (int)p.kind, (int)p.op);
        if (p.kind == DTR_SHARD) {
            int64_t d = p.dim < 0 ? (int64_t)p.dim + ndim : p.dim;
            if (d < 0 || d >= ndim)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                                  "placements[%d]: S(%d): shard dim out of range for a %d-d "
                                  "tensor",
                                  i, (int)p.dim, ndim);
            if (dtr_placement_validate(p) != DTR_OK)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "placements[%d]: %s", i,
                                  dtr_last_error());
            int32_t order = p.order, sf = p.split_factor;
            dtr_placement_t q = dtr_shard((int32_t)d);
            if (p.nsizes > 0) DTR_CHECK_AS(dtr_shard_sizes((int32_t)d, p.sizes, p.nsizes, &q),
                                           __func__);
            p = q;
            p.order = order;
            p.split_factor = sf;
            strided = strided || sf > 1;
            ordered = ordered || order != 0;
        } else if (dtr_placement_validate(p) != DTR_OK) {
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "placements[%d]: %s", i,
                              dtr_last_error());
        } else if (p.kind == DTR_REPLICATE) {
            p = dtr_replicate();
        } else {
            p = dtr_partial(p.op);
        }
        spec.placements[i] = p;
    }
    if (strided && ordered)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "placements: both _StridedShard and shard orders (S(d)[k]); write "
                          "one form");
    if (strided)
        DTR_CHECK(dtr__orders_from_strided(mesh, spec.placements, mesh_dims, spec.shape, ndim,
                                           __func__));
    else
        DTR_CHECK(dtr__orders_check(spec.placements, mesh_dims, __func__));
    int64_t msize[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < mesh_dims; i++) msize[i] = dtr_mesh_size(mesh, i);
    /* The sizes against the lengths they split in the order as written; then a ragged shard
     * of one rank, which holds the whole of what it splits, is the chunked S(d) it equals
     * (so that the normal form may move it in the order). */
    DTR_CHECK(dtr__ragged_check(&spec, __func__));
    for (int i = 0; i < mesh_dims; i++)
        if (msize[i] == 1) {
            spec.placements[i].nsizes = 0;
            spec.placements[i].sizes = NULL;
        }
    dtr__orders_normalize(spec.placements, mesh_dims, msize);
    *out = spec;
    return DTR_OK;
}

dtr_status_t dtr_spec_layout_at(const dtr_spec_t *spec, const int64_t *coord,
                                dtr_layout_t *out) {
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(spec->mesh, __func__);
    DTR_CHECK_PTR(coord, __func__);
    DTR_CHECK_PTR(out, __func__);
    const dtr_dtype_info_t *info = dtr_dtype_info(spec->dtype);
    if (info == NULL || spec->ndim < 0 || spec->ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "spec: not initialised by dtr_spec_init (ndim %d, dtype %d)",
                          spec->ndim, (int)spec->dtype);
    dtr_layout_t layout;
    memset(&layout, 0, sizeof layout);
    layout.ndim = spec->ndim;
    memcpy(layout.local_shape, spec->shape, sizeof layout.local_shape);
    int mesh_dims = dtr_mesh_ndims(spec->mesh);
    for (int i = 0; i < mesh_dims; i++) {
        int64_t n = dtr_mesh_size(spec->mesh, i);
        if (coord[i] < 0 || coord[i] >= n)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "coord[%d]: %lld, must be 0..%lld", i, (long long)coord[i],
                              (long long)n - 1);
    }
    bool sharded[DTR_MAX_TENSOR_DIMS] = {false};
    for (int i = 0; i < mesh_dims; i++) {
        dtr_placement_t p = spec->placements[i];
        if (p.kind == DTR_SHARD && (p.dim < 0 || p.dim >= spec->ndim))
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "spec: placements[%d] S(%d) not normalised by dtr_spec_init", i,
                              (int)p.dim);
    }
    /* Each tensor dim is split by its mesh dims in their order (mesh-dim order by default). */
    for (int d = 0; d < spec->ndim; d++) {
        int dims[DTR_MAX_MESH_DIMS];
        int n = dtr__shard_seq(spec->placements, mesh_dims, d, dims);
        for (int k = 0; k < n; k++) {
            int i = dims[k];
            int64_t size, offset;
            dtr__split_piece(spec->placements[i], layout.local_shape[d], dtr_mesh_size(spec->mesh, i),
                       coord[i], &size, &offset);
            layout.local_shape[d] = size;
            layout.global_offset[d] += offset;
            sharded[d] = true;
        }
    }
    /* An empty shard sits at the dim's global length, however deeply nested (DTensor's
     * compute_local_shape_and_global_offset): where its parent piece ends would depend on
     * the nesting, and no element is there either way. */
    for (int d = 0; d < spec->ndim; d++)
        if (sharded[d] && layout.local_shape[d] == 0) layout.global_offset[d] = spec->shape[d];
    layout.numel = 1;
    for (int d = 0; d < spec->ndim; d++) layout.numel *= layout.local_shape[d];
    layout.bytes = layout.numel * info->size;
    *out = layout;
    return DTR_OK;
}

dtr_status_t dtr_spec_layout(const dtr_spec_t *spec, int rank, dtr_layout_t *out) {
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(spec->mesh, __func__);
    DTR_CHECK_PTR(out, __func__);
    int64_t coord[DTR_MAX_MESH_DIMS];
    DTR_CHECK_AS(dtr_mesh_coord(spec->mesh, rank, coord), __func__);
    return dtr_spec_layout_at(spec, coord, out);
}
