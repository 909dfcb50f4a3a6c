/*
 * Ragged shards within one mesh (docs/semantics.md, "Ragged shards"). The steps plan a
 * change whose ragged shards stay as they are: each S(d){sizes} the same on the same mesh
 * dim in src and dst, and the only shard of tensor dim d (of more than one rank) in both.
 * Then no data crosses between the ranks that differ on that mesh dim, and each of its
 * coordinates c runs the same steps on its own slice of d (sizes[c] long).
 *
 * The planner plans a stand-in: each ragged shard made a chunked one of a tensor whose dim
 * d is ranks * max(sizes) long, so that every coordinate holds the longest slice. A step
 * that leaves d alone moves, on a rank at coordinate c, sizes[c] / max of what it moves on
 * the stand-in, so the stand-in's figures (most bytes on one rank, peak memory, the lower
 * bound) are the change's own: its busiest rank is at the longest slice. Candidates whose
 * steps would change a ragged mesh dim or shard d elsewhere are not taken (optimal.c);
 * the steps found get the ragged placements back, and the executor, which computes every
 * block from the layout (layout.c), moves the real slices.
 *
 * A change that moves a ragged shard goes between meshes instead (dtr_change_create
 * routes it), box by box, even on one mesh.
 */
#include <stdio.h>
#include <string.h>

#include "redistribute/planner/internal.h"

bool dtr__ragged_pair(const dtr_spec_t *src, const dtr_spec_t *dst) {
    return dtr_spec_ragged(src) || dtr_spec_ragged(dst);
}

/* The placement's text for a message, cut to fit. */
static void dtr__text(dtr_placement_t p, char *buf, size_t len) {
    dtr_placements_describe(&p, 1, buf, len);
}

/* Does mesh dim j (not i, of more than one rank) shard tensor dim d in spec? */
static int dtr__other_shard(const dtr_spec_t *spec, int i, int d) {
    int m = dtr_mesh_ndims(spec->mesh);
    for (int j = 0; j < m; j++)
        if (j != i && dtr_mesh_size(spec->mesh, j) > 1 &&
            spec->placements[j].kind == DTR_SHARD && spec->placements[j].dim == d)
            return j;
    return -1;
}

bool dtr__ragged_kept(const dtr_spec_t *src, const dtr_spec_t *dst, char *why, size_t len) {
    int m = dtr_mesh_ndims(src->mesh);
    for (int w = 0; w < 2; w++) {
        const dtr_spec_t *s = w == 0 ? src : dst, *o = w == 0 ? dst : src;
        const char *name = w == 0 ? "src" : "dst", *other = w == 0 ? "dst" : "src";
        for (int i = 0; i < m; i++) {
            dtr_placement_t p = s->placements[i];
            if (p.kind != DTR_SHARD || p.nsizes == 0) continue;
            char a[160], b[160];
            dtr__text(p, a, sizeof a);
            dtr__text(o->placements[i], b, sizeof b);
            int j = dtr__other_shard(s, i, p.dim), k = dtr__other_shard(o, i, p.dim);
            if (!dtr_placement_equal(p, o->placements[i])) {
                if (why != NULL)
                    snprintf(why, len, "%s: placements[%d] %s becomes %s's %s: within one mesh "
                             "a ragged shard is planned where it stays as it is (the same "
                             "sizes on the same mesh dim in src and dst)",
                             name, i, a, other, b);
                return false;
            }
            int64_t most = 0;
            for (int q = 0; q < p.nsizes; q++)
                if (p.sizes[q] > most) most = p.sizes[q];
            if ((__int128)most * p.nsizes > DTR_MAX_DIM_SIZE) {
                if (why != NULL)
                    snprintf(why, len, "%s: placements[%d] %s: its longest slice (%lld) times "
                             "its %d ranks exceeds 2^40, the longest dim the steps within one "
                             "mesh plan a ragged shard's stand-in of",
                             name, i, a, (long long)most, (int)p.nsizes);
                return false;
            }
            if (j >= 0 || k >= 0) {
                if (why != NULL)
                    snprintf(why, len, "%s: placements[%d] %s: mesh dim %d of %s shards tensor "
                             "dim %d too: within one mesh a ragged shard is planned where it is "
                             "the only shard of its tensor dim",
                             name, i, a, j >= 0 ? j : k, j >= 0 ? name : other, (int)p.dim);
                return false;
            }
        }
    }
    return true;
}

dtr_status_t dtr__ragged_stand_in(const dtr_spec_t *src, const dtr_spec_t *dst,
                                  dtr__ragged_t *r) {
    memset(r, 0, sizeof *r);
    r->src = *src;
    r->dst = *dst;
    int m = dtr_mesh_ndims(src->mesh);
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    memcpy(shape, src->shape, sizeof shape);
    dtr_placement_t ps[DTR_MAX_MESH_DIMS], pd[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < m; i++) {
        ps[i] = src->placements[i];
        pd[i] = dst->placements[i];
        dtr_placement_t p = ps[i];
        if (p.kind != DTR_SHARD || p.nsizes == 0) continue;
        int64_t most = 0;
        for (int k = 0; k < p.nsizes; k++)
            if (p.sizes[k] > most) most = p.sizes[k];
        shape[p.dim] = most * p.nsizes; /* (at most 2^16 sizes of at most 2^40) */
        r->mdims |= 1u << i;
        r->tdims |= 1u << p.dim;
        ps[i].nsizes = pd[i].nsizes = 0;
        ps[i].sizes = pd[i].sizes = NULL;
    }
    DTR_CHECK(dtr_spec_init(&r->proxy_src, src->mesh, ps, m, shape, src->ndim, src->dtype));
    return dtr_spec_init(&r->proxy_dst, dst->mesh, pd, m, shape, dst->ndim, dst->dtype);
}

bool dtr__ragged_respects(const dtr__ctx_t *ctx, const dtr_plan_t *plan) {
    if (ctx->ragged_mdims == 0) return true;
    if (plan->seed_blocks) return false;
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        if (s->mesh_dim >= 0 && (ctx->ragged_mdims >> s->mesh_dim & 1)) return false;
        for (int j = 0; j < ctx->mdims; j++) {
            const dtr_placement_t *p[2] = {&s->before[j], &s->after[j]};
            for (int w = 0; w < 2; w++) {
                bool shards = p[w]->kind == DTR_SHARD && (ctx->ragged_tdims >> p[w]->dim & 1);
                if (ctx->ragged_mdims >> j & 1 ? !shards : shards && ctx->msize[j] > 1)
                    return false;
            }
        }
    }
    return true;
}

void dtr__ragged_restore(const dtr__ragged_t *r, dtr_plan_t *plan) {
    int m = dtr_mesh_ndims(r->src.mesh);
    plan->src = r->src;
    plan->dst = r->dst;
    for (int k = 0; k < plan->nsteps; k++)
        for (int i = 0; i < m; i++)
            if (r->mdims >> i & 1)
                plan->steps[k].before[i] = plan->steps[k].after[i] = r->src.placements[i];
}

void dtr__ragged_largest(const dtr__ctx_t *ctx, const dtr_placement_t *pl, int64_t *shape) {
    for (int i = 0; i < ctx->mdims; i++) {
        if (pl[i].kind != DTR_SHARD || pl[i].nsizes == 0) continue;
        int64_t most = 0;
        for (int k = 0; k < pl[i].nsizes; k++)
            if (pl[i].sizes[k] > most) most = pl[i].sizes[k];
        shape[pl[i].dim] = most;
    }
}
