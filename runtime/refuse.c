/*
 * dtr_refuse (runtime.h): a rank whose arguments to a collective call are too wrong to make
 * it joins the call's argument agreement (agree.c) over the group the call would have used,
 * so that the other ranks fail at once and stay in step.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dtensor/mesh.h"
#include "runtime/context.h"

/* The group the call that `mesh`, `dims` and `to_mesh` name agrees over (NULL: none, a group
 * of one or a rank the call leaves out). */
static dtr_status_t dtr__refuse_group(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                                      const dtr_mesh_t *to_mesh, void **group) {
    *group = NULL;
    int64_t coord[DTR_MAX_MESH_DIMS];
    bool on_mesh = dtr_mesh_coord(mesh, ctx->rank, coord) == DTR_OK;
    if (to_mesh != NULL) {
        int *ranks = NULL, n = 0;
        DTR_CHECK(dtr__mesh_union(mesh, to_mesh, "dtr_refuse", &ranks, &n));
        bool in = bsearch(&ctx->rank, ranks, (size_t)n, sizeof *ranks, dtr__int_cmp) != NULL;
        dtr_status_t st = in && n > 1 ? dtr__group(ctx, ranks, n, DTR__TAG_GROUP, group) : DTR_OK;
        free(ranks);
        return st;
    }
    if (!on_mesh) return DTR_OK;
    if (dims == DTR_DIMS_MESH) {
        dtr__mesh_entry_t *m;
        DTR_CHECK(dtr__mesh_entry(ctx, mesh, coord, &m));
        *group = m->all;
        return DTR_OK;
    }
    return dtr__group_of_dims(ctx, mesh, dims, "dtr_refuse", group);
}

dtr_status_t dtr_refuse(dtr_context_t *ctx, const dtr_mesh_t *mesh, unsigned dims,
                        const dtr_mesh_t *to_mesh, dtr_status_t status, const char *msg) {
    char what[512];
    snprintf(what, sizeof what, "%s", msg != NULL ? msg : "this rank's arguments were refused");
    if (status == DTR_OK) status = DTR_ERR_INVALID_ARGUMENT;
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(mesh, __func__);
    if (to_mesh == NULL && dims != DTR_DIMS_MESH && (dims >> dtr_mesh_ndims(mesh)) != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "dims: 0x%x names a mesh dim past the %d of this mesh", dims,
                          dtr_mesh_ndims(mesh));
    void *group = NULL;
    DTR_CHECK(dtr__refuse_group(ctx, mesh, dims, to_mesh, &group));
    return dtr__agree_on(ctx, group, __func__, 0, status, what);
}
