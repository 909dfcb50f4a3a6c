/*
 * The blocks of a seed plan that holds other lengths than the canonical layout on the way
 * (plan->seed_blocks; compat.c). Such a plan puts every element right (seed_follow.c), but
 * a step's blocks are not what the layout of its placements says: on 3x3x2 with 9 rows,
 * `S(0),S(0),S(0) -> ...` can gather 6 rows where the layout of `R,R,S(0)` has 5. The seed
 * (PyTorch 2.1) sized nothing by layouts: an all-gather concatenates the members' blocks,
 * a chunk keeps the positional chunk of the rank's block. So here a block's shape is
 * followed step by step from the source layout, exactly as the seed runs it; the executor
 * sizes every step with it, and the plan's figures count what it moves.
 *
 * Only the steps the seed emits appear (the kinds whose row says `seed`: gathers, chunks,
 * reduce-scatters, all-reduces, scales, relabels); a plan marked so with another kind is
 * refused by the executor. What a kind does to a block (gathers, chunks) and moves
 * (seed_moved) is its row's (kinds.h).
 */
#include <string.h>

#include "redistribute/planner/internal.h"

/* Beyond this many coordinates the figures are not followed and compat refuses the plan. */
#define DTR__SEED_COORDS_MAX 65536

bool dtr__seed_kind_ok(dtr_step_kind_t kind) {
    return (unsigned)kind < DTR_STEP_KIND_LAST && dtr__kinds[kind]->seed;
}

void dtr__seed_block(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int j, const int64_t *coord,
                     int64_t *shape) {
    if (j == 0) {
        int64_t off[DTR_MAX_TENSOR_DIMS];
        dtr__layout(ctx, plan->src.placements, coord, shape, off);
        return;
    }
    const dtr_step_t *s = &plan->steps[j - 1];
    dtr__seed_block(ctx, plan, j - 1, coord, shape);
    int i = s->mesh_dim, d = s->tensor_dim;
    if (i < 0 || d < 0) return;
    int64_t n = ctx->msize[i];
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (kind->gathers) {
        int64_t member[DTR_MAX_MESH_DIMS], ms[DTR_MAX_TENSOR_DIMS], len = 0;
        memcpy(member, coord, (size_t)ctx->mdims * sizeof *member);
        for (int64_t m = 0; m < n; m++) {
            member[i] = m;
            dtr__seed_block(ctx, plan, j - 1, member, ms);
            len += ms[d];
        }
        shape[d] = len;
    } else if (kind->chunks) {
        int64_t size, off;
        dtr_chunk(shape[d], n, coord[i], &size, &off);
        shape[d] = size;
    }
}

void dtr__seed_pieces(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k, const int64_t *coord,
                      int64_t *len) {
    const dtr_step_t *s = &plan->steps[k];
    int64_t member[DTR_MAX_MESH_DIMS], ms[DTR_MAX_TENSOR_DIMS];
    memcpy(member, coord, (size_t)ctx->mdims * sizeof *member);
    for (int64_t m = 0; m < ctx->msize[s->mesh_dim]; m++) {
        member[s->mesh_dim] = m;
        dtr__seed_block(ctx, plan, k, member, ms);
        len[m] = ms[s->tensor_dim];
    }
}

/* One rank's side of step k: the elements it sends and receives (what the executor moves:
 * gathers and reduce-scatters padded to the largest piece, as for canonical blocks). */
static __int128 dtr__seed_moved(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                                const int64_t *coord, const int64_t *bs) {
    const dtr_step_t *s = &plan->steps[k];
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (s->mesh_dim < 0 || ctx->msize[s->mesh_dim] == 1 || kind->seed_moved == NULL) return 0;
    return kind->seed_moved(ctx, plan, k, coord, bs);
}

void dtr__seed_step_bytes(const dtr__ctx_t *ctx, const dtr_plan_t *plan, int k,
                          const int64_t *coord, int64_t *send, int64_t *recv) {
    int64_t bs[DTR_MAX_TENSOR_DIMS];
    dtr__seed_block(ctx, plan, k, coord, bs);
    *send = *recv = dtr__sat(dtr__seed_moved(ctx, plan, k, coord, bs) * ctx->item);
}

/* The mesh dims a seed plan's blocks depend on: those that shard in some state. */
static int64_t dtr__seed_vary(const dtr__ctx_t *ctx, const dtr_plan_t *plan, bool *vary) {
    int64_t coords = 1;
    for (int i = 0; i < ctx->mdims; i++) {
        vary[i] = plan->src.placements[i].kind == DTR_SHARD;
        for (int k = 0; k < plan->nsteps; k++)
            vary[i] = vary[i] || plan->steps[k].after[i].kind == DTR_SHARD;
        if (vary[i]) coords *= ctx->msize[i];
        if (coords > DTR__SEED_COORDS_MAX) return -1;
    }
    return coords;
}

bool dtr__seed_figures(const dtr__ctx_t *ctx, dtr_plan_t *plan) {
    bool vary[DTR_MAX_MESH_DIMS];
    if (dtr__seed_vary(ctx, plan, vary) < 0) return false;
    __int128 largest[2][DTR_MAX_PLAN_STEPS];
    for (int k = 0; k < plan->nsteps; k++) {
        dtr_step_t *s = &plan->steps[k];
        s->recv_bytes_max = s->send_bytes_max = s->extra_bytes_max = 0;
        s->peers_max = 0;
        largest[0][k] = largest[1][k] = -1;
    }
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    __int128 best = 0;
    do {
        __int128 total = 0;
        for (int k = 0; k < plan->nsteps; k++) {
            dtr_step_t *s = &plan->steps[k];
            int64_t bs[DTR_MAX_TENSOR_DIMS], as[DTR_MAX_TENSOR_DIMS];
            dtr__seed_block(ctx, plan, k, coord, bs);
            dtr__seed_block(ctx, plan, k + 1, coord, as);
            __int128 in = dtr__numel(ctx, bs), out = dtr__numel(ctx, as);
            int64_t bytes = dtr__sat(dtr__seed_moved(ctx, plan, k, coord, bs) * ctx->item);
            int64_t outb = dtr__kind_of(s)->keeps_block ? 0 : dtr__sat(out * ctx->item);
            int64_t extra = dtr__sat((__int128)outb + bytes);
            if (bytes > s->recv_bytes_max) s->recv_bytes_max = s->send_bytes_max = bytes;
            if (extra > s->extra_bytes_max) s->extra_bytes_max = extra;
            if (in > largest[0][k]) {
                largest[0][k] = in;
                memcpy(s->shape_before, bs, (size_t)ctx->ndim * sizeof *bs);
            }
            if (out > largest[1][k]) {
                largest[1][k] = out;
                memcpy(s->shape_after, as, (size_t)ctx->ndim * sizeof *as);
            }
            total += bytes;
        }
        if (total > best) best = total;
    } while (dtr__next_coord(ctx, vary, coord));
    for (int k = 0; k < plan->nsteps; k++) dtr__step_time(ctx, &plan->steps[k]);
    plan->seed_blocks = true;
    plan->recv_bytes_max = dtr__sat(best);
    return true;
}
