/*
 * The communicator cache: a context keeps every group (ordered rank list) it created, and per
 * mesh this rank's coordinate and its groups along each mesh dim and over the whole mesh.
 * Groups are created collectively the first time a call needs them and kept until the
 * context is destroyed.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "runtime/context.h"

/* A copy of the mesh the context can keep after the caller frees theirs. */
static dtr_status_t dtr__mesh_clone(const dtr_mesh_t *mesh, dtr_mesh_t **out) {
    int nd = dtr_mesh_ndims(mesh);
    int64_t sizes[DTR_MAX_MESH_DIMS], coord[DTR_MAX_MESH_DIMS] = {0}, n = dtr_mesh_nranks(mesh);
    for (int i = 0; i < nd; i++) sizes[i] = dtr_mesh_size(mesh, i);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "mesh copy of %lld ranks",
                          (long long)n);
    for (int64_t p = 0; p < n; p++) {
        dtr_mesh_rank_at(mesh, coord, &ranks[p]);
        for (int i = nd - 1; i >= 0; i--) {
            if (++coord[i] < sizes[i]) break;
            coord[i] = 0;
        }
    }
    dtr_status_t st = dtr_mesh_create(nd, sizes, ranks, n, out);
    free(ranks);
    return st;
}

/* A group's communicator, created the first time any mesh needs that ordered rank list and
 * kept until the context is destroyed. Never evicted: every member of a group first needs
 * it in the same collective call (each member's group along that mesh dim is this very
 * list), so creation stays matched across ranks only if no rank ever drops and re-creates
 * one on its own schedule (a bystander's calls would otherwise skew the ranks' caches). */
dtr_status_t dtr__group(dtr_context_t *ctx, const int *ranks, int n, int tag,
                        void **out) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++) h = dtr__fnv(h, ranks[k]);
    for (dtr__group_t *g = ctx->groups; g != NULL; g = g->next)
        if (g->hash == h && g->n == n && memcmp(g->ranks, ranks, (size_t)n * sizeof *ranks) == 0) {
            *out = g->handle;
            return DTR_OK;
        }
    dtr__group_t *g = calloc(1, sizeof *g + (size_t)n * sizeof *ranks);
    if (g == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "group of %d ranks", n);
    g->hash = h;
    g->n = n;
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    dtr_status_t st = ctx->ops->group_create(ctx->state, ranks, n, tag, &g->handle);
    if (st != DTR_OK) {
        free(g);
        return st;
    }
    g->next = ctx->groups;
    ctx->groups = g;
    *out = g->handle;
    return DTR_OK;
}

/* This rank's groups on a mesh (collective over each group the first time). */
dtr_status_t dtr__mesh_entry(dtr_context_t *ctx, const dtr_mesh_t *mesh,
                             const int64_t *coord, dtr__mesh_entry_t **out) {
    uint64_t h = dtr__mesh_hash(mesh);
    dtr__mesh_entry_t *victim = &ctx->meshes[0];
    for (int k = 0; k < DTR__MESH_SLOTS; k++) {
        dtr__mesh_entry_t *e = &ctx->meshes[k];
        if (e->mesh != NULL && e->hash == h && dtr_mesh_equal(e->mesh, mesh)) {
            e->used = ++ctx->clock;
            *out = e;
            return DTR_OK;
        }
        if (e->mesh == NULL || (victim->mesh != NULL && e->used < victim->used)) victim = e;
    }
    dtr__mesh_entry_t e = {0};
    dtr_status_t st = DTR_OK;
    int nd = dtr_mesh_ndims(mesh);
    int64_t n = dtr_mesh_nranks(mesh);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ranks == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_redistribute", "rank list of %lld",
                          (long long)n);
    DTR_CHECK_GOTO(dtr__mesh_clone(mesh, &e.mesh), st, done);
    e.hash = h;
    memcpy(e.coord, coord, (size_t)nd * sizeof *coord);
    if (n > 1) {
        int64_t c[DTR_MAX_MESH_DIMS] = {0};
        for (int64_t p = 0; p < n; p++) {
            dtr_mesh_rank_at(mesh, c, &ranks[p]);
            for (int i = nd - 1; i >= 0; i--) {
                if (++c[i] < dtr_mesh_size(mesh, i)) break;
                c[i] = 0;
            }
        }
        DTR_CHECK_GOTO(dtr__group(ctx, ranks, (int)n, DTR__TAG_GROUP, &e.all), st, done);
    }
    for (int i = 0; i < nd; i++) {
        int64_t count = 0;
        if (dtr_mesh_size(mesh, i) == 1) continue;
        dtr_mesh_group(mesh, ctx->rank, i, ranks, n, &count);
        DTR_CHECK_GOTO(dtr__group(ctx, ranks, (int)count, DTR__TAG_GROUP, &e.dim_group[i]), st,
                       done);
    }
    dtr_mesh_destroy(victim->mesh);
    e.used = ++ctx->clock;
    *victim = e;
    *out = victim;
    e.mesh = NULL;
done:
    free(ranks);
    dtr_mesh_destroy(e.mesh);
    return st;
}


void dtr__comms_destroy(dtr_context_t *ctx) {
    for (int k = 0; k < DTR__MESH_SLOTS; k++) dtr_mesh_destroy(ctx->meshes[k].mesh);
    while (ctx->groups != NULL) {
        dtr__group_t *g = ctx->groups;
        ctx->groups = g->next;
        ctx->ops->group_destroy(ctx->state, g->handle);
        free(g);
    }
}
