/* The plan builder: per-rank byte counts of each step kind, step validity, costing and
 * totals (layouts at a coordinate: layout.c; the lower bound: bound.c). */
#include <math.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

/* Bytes sent and received by one rank in a step, the peers it hears from and its receive
 * staging (its kind's moves). member: NULL, or the rank's group in a balanced reduction.
 * out (may be NULL): the elements of the rank's block after the step. */
static void dtr__step_rank_in(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                              const dtr__balance_member_t *member, int64_t *send, int64_t *recv,
                              int *peers_out, int64_t *stage_out, __int128 *out) {
    int64_t bs[DTR_MAX_TENSOR_DIMS], bo[DTR_MAX_TENSOR_DIMS], as[DTR_MAX_TENSOR_DIMS],
        ao[DTR_MAX_TENSOR_DIMS];
    if (member != NULL) { /* (the group's block, and the member's target from member 0's) */
        memcpy(bs, member->bal->cs, sizeof bs);
        memcpy(bo, member->bal->co, sizeof bo);
        dtr__balance_target(member->bal, coord[s->mesh_dim], as, ao);
    } else {
        dtr__layout(ctx, s->before, coord, bs, bo);
        dtr__layout(ctx, s->after, coord, as, ao);
    }
    dtr__rank_view_t v = {.coord = coord, .bs = bs, .bo = bo, .as = as, .ao = ao,
                          .n = s->mesh_dim >= 0 ? ctx->msize[s->mesh_dim] : 1, .member = member};
    dtr__rank_moves_t m = {.recv = 0, .send = 0, .stage = -1, .peers = 0};
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (kind->moves != NULL) kind->moves(ctx, s, &v, &m);
    *recv = dtr__sat(m.recv * ctx->item);
    *send = dtr__sat(m.send * ctx->item);
    *peers_out = m.peers;
    *stage_out = m.stage < 0 ? *recv : dtr__sat(m.stage * ctx->item);
    if (out != NULL) *out = dtr__numel(ctx, as);
}

static void dtr__step_rank(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                           int64_t *send, int64_t *recv, int *peers_out, int64_t *stage_out) {
    dtr__step_rank_in(ctx, s, coord, NULL, send, recv, peers_out, stage_out, NULL);
}

void dtr__step_rank_bytes(const dtr__ctx_t *ctx, const dtr_step_t *s, const int64_t *coord,
                          int64_t *send, int64_t *recv) {
    int peers;
    int64_t stage;
    dtr__step_rank(ctx, s, coord, send, recv, &peers, &stage);
}

/* Only what one rank receives (the kind's recv where it has one: an exchange's needs two
 * layouts and an overlap, not the sums over peers that sending needs). */
static int64_t dtr__step_rank_recv(const dtr__ctx_t *ctx, const dtr_step_t *s,
                                   const int64_t *coord) {
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (kind->recv != NULL) return dtr__sat(kind->recv(ctx, s, coord) * ctx->item);
    int64_t send, recv;
    dtr__step_rank_bytes(ctx, s, coord, &send, &recv);
    return recv;
}

/* Mesh dims whose coordinate changes what a rank holds before or after a step. */
static void dtr__relevant_dims(const dtr__ctx_t *ctx, const dtr_step_t *s, bool *vary) {
    for (int i = 0; i < ctx->mdims; i++)
        vary[i] = s->before[i].kind == DTR_SHARD || s->after[i].kind == DTR_SHARD ||
                  i == s->mesh_dim;
}

void dtr__step_figures_at(const dtr__ctx_t *ctx, dtr_step_t *s, const int64_t *coord,
                          const dtr__balance_member_t *member) {
    int64_t send, recv, stage;
    int peers;
    __int128 elems;
    dtr__step_rank_in(ctx, s, coord, member, &send, &recv, &peers, &stage, &elems);
    int64_t out = dtr__kind_of(s)->keeps_block ? 0 : dtr__sat(elems * ctx->item);
    int64_t extra = dtr__sat((__int128)out + stage);
    if (recv > s->recv_bytes_max) s->recv_bytes_max = recv;
    if (send > s->send_bytes_max) s->send_bytes_max = send;
    if (extra > s->extra_bytes_max) s->extra_bytes_max = extra;
    if (peers > s->peers_max) s->peers_max = peers;
}

void dtr__step_figures_each(const dtr__ctx_t *ctx, dtr_step_t *s, unsigned positional,
                            bool tables) {
    bool vary[DTR_MAX_MESH_DIMS];
    dtr__relevant_dims(ctx, s, vary);
    const dtr_placement_t *layouts[2] = {s->before, s->after};
    dtr__reps_t reps;
    dtr__reps_init(ctx, layouts, 2, positional, &reps);
    if (tables && dtr__exchange_figures_tables(ctx, s, &reps, vary)) return;
    int64_t coord[DTR_MAX_MESH_DIMS], at[DTR_MAX_MESH_DIMS] = {0};
    dtr__reps_first(ctx, &reps, coord);
    do dtr__step_figures_at(ctx, s, coord, NULL);
    while (dtr__reps_next(ctx, &reps, vary, coord, at));
}

/* Byte, memory and time figures of a step: the most over ranks, as its kind finds them
 * (kinds.h: figures). For gathers, scatters, reductions and local steps the largest block
 * is at coordinate 0 (chunk 0 is never smaller, at every nesting level), so that rank is
 * the worst; the kinds whose figures depend on which chunks meet look further, unless
 * `one` asks for coordinate 0's alone (dtr__costly_figures' bound). */
static void dtr__step_figures_in(const dtr__ctx_t *ctx, dtr_step_t *s, bool one) {
    int64_t zero[DTR_MAX_MESH_DIMS] = {0}, zero_off[DTR_MAX_TENSOR_DIMS];
    dtr__layout(ctx, s->before, zero, s->shape_before, zero_off);
    dtr__layout(ctx, s->after, zero, s->shape_after, zero_off);
    s->recv_bytes_max = s->send_bytes_max = s->extra_bytes_max = 0;
    s->peers_max = 0;
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (kind->figures != NULL && !one)
        kind->figures(ctx, s);
    else
        dtr__step_figures_at(ctx, s, zero, NULL);
    dtr__step_time(ctx, s);
}

static void dtr__step_figures(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__step_figures_in(ctx, s, false);
}

void dtr__step_time(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__step_node_bytes(ctx, s);
    unsigned links = dtr__step_links(s, ctx->mdims, ctx->msize);
    const dtr__kind_t *kind = dtr__kind_of(s);
    s->time_us = kind->time != NULL ? kind->time(ctx, s, links) : 0;
}

/* A step that changes placements only on mesh dims of one rank keeps every rank's block and
 * every value (a chunk of one piece is the whole, a reduction over one rank is the value):
 * it is a local relabel, whatever it was built as, and moves and costs nothing. PyTorch
 * 2.6+ counts no collective for such changes. */
static void dtr__one_rank_relabel(const dtr__ctx_t *ctx, dtr_step_t *s) {
    for (int i = 0; i < ctx->mdims; i++)
        if (ctx->msize[i] > 1 && !dtr_placement_equal(s->before[i], s->after[i])) return;
    s->kind = DTR_STEP_LOCAL_RELABEL;
    s->tensor_dim = s->tensor_dim2 = -1;
    s->scale = 1.0;
}

void dtr__builder_init(dtr__builder_t *b, const dtr__ctx_t *ctx, const dtr_placement_t *start,
                       dtr_plan_t *plan) {
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    memcpy(b->cur, start, (size_t)ctx->mdims * sizeof *start);
    b->plan = plan;
    b->valid = true;
    plan->nsteps = 0;
    plan->seed_blocks = false;
}

static dtr_step_t *dtr__new_step(dtr__builder_t *b) {
    if (b->plan->nsteps == DTR_MAX_PLAN_STEPS) {
        if (b->valid || b->misaligned_only)
            snprintf(b->why, sizeof b->why, "more than %d steps", DTR_MAX_PLAN_STEPS);
        b->valid = b->misaligned_only = false;
        return NULL;
    }
    dtr_step_t *s = &b->plan->steps[b->plan->nsteps++];
    memset(s, 0, sizeof *s);
    s->nplacements = b->ctx->mdims;
    memcpy(s->before, b->cur, (size_t)b->ctx->mdims * sizeof *s->before);
    memcpy(s->after, b->cur, (size_t)b->ctx->mdims * sizeof *s->after);
    s->tensor_dim = s->tensor_dim2 = -1;
    s->scale = 1.0;
    return s;
}

/* Marks the builder invalid with the first reason. */
static void dtr__invalid(dtr__builder_t *b, const dtr_step_t *s, int i, int d) {
    if (!b->valid) return;
    b->valid = false;
    b->misaligned_only = true;
    char from[DTR_PLACEMENT_TEXT_MAX], to[DTR_PLACEMENT_TEXT_MAX];
    dtr_placement_format(s->from, from, sizeof from);
    dtr_placement_format(s->to, to, sizeof to);
    int j = i + 1;
    while (j < b->ctx->mdims &&
           !(b->cur[j].kind == DTR_SHARD && b->cur[j].dim == d && b->ctx->msize[j] > 1))
        j++;
    snprintf(b->why, sizeof b->why,
             "step %d (mesh dim %d: %s -> %s) works on tensor dim %d while mesh dim %d still "
             "shards it, so the pieces it moves are not the chunks it assumes",
             b->plan->nsteps, i, from, to, d, j);
}

/* The placements after mesh dim i becomes `to`: a new shard of d goes last in d's order
 * (it splits the rank's current piece), a kept one keeps its place; orders normalised. */
static void dtr__set_after(dtr__builder_t *b, dtr_step_t *s, int i, dtr_placement_t to) {
    int m = b->ctx->mdims;
    dtr_placement_t next[DTR_MAX_MESH_DIMS];
    memcpy(next, b->cur, (size_t)m * sizeof *next);
    to.order = 0;
    to.split_factor = 0;
    /* (Without shard orders in the change, every step is labelled in mesh-dim order, as
     * compat's seed plans are followed: seed_follow.c judges where their data lands.) */
    if (to.kind == DTR_SHARD && b->ctx->ordered) {
        if (next[i].kind == DTR_SHARD && next[i].dim == to.dim) {
            to.order = next[i].order;
        } else {
            for (int j = 0; j < m; j++)
                if (j != i && next[j].kind == DTR_SHARD && next[j].dim == to.dim &&
                    next[j].order >= to.order)
                    to.order = next[j].order + 1;
        }
    }
    next[i] = to;
    dtr__orders_normalize(next, m, b->ctx->msize);
    memcpy(b->cur, next, (size_t)m * sizeof *next);
    memcpy(s->after, next, (size_t)m * sizeof *next);
}

bool dtr__emit(dtr__builder_t *b, int i, dtr_placement_t to) {
    dtr_placement_t from = b->cur[i];
    if (dtr_placement_equal(from, to) ||
        (from.kind == DTR_SHARD && to.kind == DTR_SHARD && from.dim == to.dim))
        return true; /* (a Shard keeps its place in the order; an exchange reorders) */
    dtr_step_t *s = dtr__new_step(b);
    if (s == NULL) return false;
    const dtr__ctx_t *ctx = b->ctx;
    s->mesh_dim = i;
    s->from = from;
    s->to = to;
    s->op = from.kind == DTR_PARTIAL ? from.op : to.op;
    int check1 = -1, check2 = -1;
    if (from.kind == DTR_SHARD && to.kind == DTR_REPLICATE) {
        s->kind = DTR_STEP_ALL_GATHER;
        s->tensor_dim = check1 = from.dim;
    } else if (from.kind == DTR_SHARD && to.kind == DTR_SHARD) {
        s->kind = DTR_STEP_ALL_TO_ALL;
        s->tensor_dim = check1 = from.dim;
        s->tensor_dim2 = check2 = to.dim;
    } else if (from.kind == DTR_REPLICATE && to.kind == DTR_SHARD) {
        s->kind = DTR_STEP_LOCAL_CHUNK;
        s->tensor_dim = check1 = to.dim;
    } else if (from.kind == DTR_PARTIAL && to.kind == DTR_SHARD) {
        s->kind = DTR_STEP_REDUCE_SCATTER;
        s->tensor_dim = check1 = to.dim;
    } else if (from.kind == DTR_PARTIAL && to.kind == DTR_REPLICATE) {
        s->kind = DTR_STEP_ALL_REDUCE;
    } else if (from.kind == DTR_REPLICATE && to.kind == DTR_PARTIAL) {
        s->kind = to.op == DTR_REDUCE_SUM ? DTR_STEP_LOCAL_SCALE : DTR_STEP_LOCAL_RELABEL;
        if (to.op == DTR_REDUCE_SUM) s->scale = 1.0 / (double)ctx->msize[i];
    } else if (from.kind == DTR_SHARD && to.kind == DTR_PARTIAL && to.op == DTR_REDUCE_SUM) {
        s->kind = DTR_STEP_LOCAL_ZERO_FILL; /* zero_fill.c plans these */
        s->tensor_dim = check1 = from.dim;
    } else {
        /* S -> P(not sum) and P(a) -> P(b) are refused before planning. */
        b->valid = b->misaligned_only = false;
        snprintf(b->why, sizeof b->why, "internal: no step for mesh dim %d", i);
        return false;
    }
    /* A new shard goes last in its tensor dim's order (dtr__set_after); where shard orders
     * are in play that is a layout of its own, not a misplaced one. */
    bool adds1 = to.kind == DTR_SHARD && check1 == to.dim && from.kind != DTR_SHARD;
    bool adds2 = check2 >= 0;
    if (check1 >= 0 && !(adds1 && ctx->ordered) && !dtr__innermost(ctx, b->cur, i, check1))
        dtr__invalid(b, s, i, check1);
    if (check2 >= 0 && !(adds2 && ctx->ordered) && !dtr__innermost(ctx, b->cur, i, check2))
        dtr__invalid(b, s, i, check2);
    /* A product over n ranks of values already scaled by 1/m carries 1/m^n, not 1/m: a
     * P(product) reduction must come before any R -> P(sum) scale of the same plan. (SUM,
     * AVG, MAX and MIN commute with a positive scale.) */
    if (from.kind == DTR_PARTIAL && from.op == DTR_REDUCE_PRODUCT && b->scaled_at > 0 &&
        (b->valid || b->misaligned_only)) {
        b->valid = b->misaligned_only = false;
        snprintf(b->why, sizeof b->why,
                 "step %d reduces P(product) on mesh dim %d after step %d's R -> P(sum) scale: "
                 "each factor of the product would carry the 1/n, so the result is off by a "
                 "power of n",
                 b->plan->nsteps, i, b->scaled_at);
    }
    dtr__set_after(b, s, i, to);
    dtr__one_rank_relabel(ctx, s);
    if (s->kind == DTR_STEP_LOCAL_SCALE && b->scaled_at == 0) b->scaled_at = b->plan->nsteps;
    dtr__step_figures(ctx, s);
    return true;
}

/* Exchange and balanced steps cost O(ranks): the figures of the same step (kind, mesh dim,
 * layouts) are kept for the rest of the planning call. */
static bool dtr__memo_find(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__plan_memo_t *memo = ctx->memo;
    for (int k = 0; memo != NULL && k < memo->n; k++)
        if (memo->steps[k].kind == s->kind && memo->steps[k].mesh_dim == s->mesh_dim &&
            memcmp(memo->steps[k].before, s->before, sizeof s->before) == 0 &&
            memcmp(memo->steps[k].after, s->after, sizeof s->after) == 0) {
            *s = memo->steps[k];
            return true;
        }
    return false;
}

/* The figures of an exchange or balanced step: from the memo, bounded (memo->defer), or
 * over every rank (then kept in the memo). */
static void dtr__costly_figures(const dtr__ctx_t *ctx, dtr_step_t *s) {
    dtr__plan_memo_t *memo = ctx->memo;
    if (dtr__memo_find(ctx, s)) return;
    if (memo != NULL && memo->defer) {
        /* coordinate 0's figures: each is a most over ranks and the time grows with each
         * (without node costs, which the optimal strategy then does not defer), so this
         * time is a lower bound of the step's */
        dtr__step_figures_in(ctx, s, true);
        return;
    }
    dtr__step_figures(ctx, s);
    if (memo != NULL && memo->n < DTR__MEMO_SIZE) memo->steps[memo->n++] = *s;
}

bool dtr__emit_reduce_exchange(dtr__builder_t *b, int i, dtr_placement_t to) {
    const dtr__ctx_t *ctx = b->ctx;
    dtr_placement_t after[DTR_MAX_MESH_DIMS];
    memcpy(after, b->cur, sizeof after);
    after[i] = to;
    if (!dtr__balance_applies(ctx, b->cur, after, i)) {
        if (b->valid)
            snprintf(b->why, sizeof b->why,
                     "internal: no balanced reduction for mesh dim %d (only P -> S(d) under a "
                     "later shard of d)",
                     i);
        b->valid = b->misaligned_only = false;
        return false;
    }
    dtr_step_t *s = dtr__new_step(b);
    if (s == NULL) return false;
    s->kind = DTR_STEP_REDUCE_EXCHANGE;
    s->mesh_dim = i;
    s->from = b->cur[i];
    s->to = to;
    s->op = s->from.op;
    s->tensor_dim = to.dim;
    memcpy(b->cur, after, sizeof after);
    dtr__orders_normalize(b->cur, ctx->mdims, ctx->msize);
    memcpy(s->after, b->cur, (size_t)ctx->mdims * sizeof *s->after);
    dtr__one_rank_relabel(ctx, s);
    if (s->kind == DTR_STEP_REDUCE_EXCHANGE)
        dtr__costly_figures(ctx, s);
    else
        dtr__step_figures(ctx, s);
    return true;
}

bool dtr__emit_exchange(dtr__builder_t *b, const dtr_placement_t *to) {
    const dtr__ctx_t *ctx = b->ctx;
    bool same = true;
    for (int i = 0; i < ctx->mdims; i++) same = same && dtr_placement_equal(b->cur[i], to[i]);
    if (same) return true;
    dtr_step_t *s = dtr__new_step(b);
    if (s == NULL) return false;
    s->kind = DTR_STEP_EXCHANGE;
    s->mesh_dim = -1;
    memcpy(s->after, to, (size_t)ctx->mdims * sizeof *to);
    memcpy(b->cur, to, (size_t)ctx->mdims * sizeof *to);
    dtr__one_rank_relabel(ctx, s);
    /* (Candidates often end in the same exchange.) */
    if (s->kind == DTR_STEP_EXCHANGE)
        dtr__costly_figures(ctx, s);
    else
        dtr__step_figures(ctx, s);
    return true;
}

bool dtr__plan_better(const dtr_plan_t *a, const dtr_plan_t *b) {
    double tol = 1e-9 * (a->time_us > b->time_us ? a->time_us : b->time_us);
    if (a->time_us < b->time_us - tol) return true;
    if (a->time_us > b->time_us + tol) return false;
    if (a->peak_extra_bytes != b->peak_extra_bytes) return a->peak_extra_bytes < b->peak_extra_bytes;
    return a->nsteps < b->nsteps;
}

void dtr__plan_summarize(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                         dtr_plan_t *plan) {
    plan->src = *src;
    plan->dst = *dst;
    plan->cost = *ctx->cost;
    memset(plan->count, 0, sizeof plan->count);
    plan->peak_extra_bytes = 0;
    plan->time_us = 0;
    plan->recv_bytes_max = -1;
    plan->lower_bound_recv_bytes = -1;
    bool moves = false;
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        plan->count[s->kind]++;
        if (s->extra_bytes_max > plan->peak_extra_bytes) plan->peak_extra_bytes = s->extra_bytes_max;
        plan->time_us += s->time_us;
        moves |= !dtr__kind_of(s)->keeps_block;
    }
    if (src->dtype != dst->dtype) {
        /* A cast: one local pass over the source block (coordinate 0's is the largest),
         * into a buffer of dst's dtype the first step reads, or straight into the output. */
        int64_t shape[DTR_MAX_TENSOR_DIMS], off[DTR_MAX_TENSOR_DIMS];
        int64_t zero[DTR_MAX_MESH_DIMS] = {0};
        dtr__layout(ctx, src->placements, zero, shape, off);
        int64_t cast = dtr__sat(dtr__numel(ctx, shape) * ctx->item);
        if (moves) plan->peak_extra_bytes = dtr__sat((__int128)plan->peak_extra_bytes + cast);
        plan->time_us += (double)(cast + dtr__numel(ctx, shape) * dtr_dtype_info(src->dtype)->size) /
                         (ctx->cost->local_gbps * 1e3);
    }
}

int64_t dtr__plan_rank_recv(const dtr__ctx_t *ctx, const dtr_plan_t *plan, const int64_t *coord) {
    __int128 total = 0;
    for (int k = 0; k < plan->nsteps; k++) total += dtr__step_rank_recv(ctx, &plan->steps[k], coord);
    return dtr__sat(total);
}

bool dtr__plan_per_coord(const dtr_plan_t *plan) {
    for (int k = 0; k < plan->nsteps; k++)
        if (dtr__kind_of(&plan->steps[k])->per_rank) return true;
    return false;
}

void dtr__plan_finish(const dtr__ctx_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                      dtr_plan_t *plan) {
    dtr__plan_summarize(ctx, src, dst, plan);
    bool per_coord = false, vary[DTR_MAX_MESH_DIMS] = {false};
    __int128 sum_at_zero = 0;
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        sum_at_zero += s->recv_bytes_max;
        per_coord = per_coord || dtr__kind_of(s)->per_rank;
        bool v[DTR_MAX_MESH_DIMS];
        dtr__relevant_dims(ctx, s, v);
        for (int i = 0; i < ctx->mdims; i++) vary[i] = vary[i] || v[i];
    }
    /* Without all-to-all or exchange steps every step's worst rank is coordinate 0; a single
     * step's worst rank is its own maximum. */
    /* On even layouts only exchanges and balanced reductions differ between ranks: with one
     * of them, the sum of the steps' most is the most of the sums. */
    int varying = 0;
    bool even = !plan->seed_blocks;
    for (int k = 0; k < plan->nsteps && even; k++) {
        const dtr_step_t *s = &plan->steps[k];
        varying += dtr__kind_of(s)->varies_even;
        even = dtr__even(ctx, s->before) && dtr__even(ctx, s->after);
    }
    if (!per_coord || plan->nsteps == 1 || (even && varying <= 1)) {
        plan->recv_bytes_max = dtr__sat(sum_at_zero);
    } else {
        /* Over coordinates standing for every rank: each step's layouts, the offsets its
         * exchanges read (a balanced reduction's, every coordinate). */
        const dtr_placement_t *layouts[DTR_MAX_PLAN_STEPS + 1] = {plan->steps[0].before};
        unsigned positional = 0;
        for (int k = 0; k < plan->nsteps; k++) {
            const dtr_step_t *s = &plan->steps[k];
            layouts[k + 1] = s->after;
            if (dtr__kind_of(s)->positional != NULL)
                positional |= dtr__kind_of(s)->positional(ctx, s);
        }
        dtr__reps_t reps;
        dtr__reps_init(ctx, layouts, plan->nsteps + 1, positional, &reps);
        __int128 best = 0;
        if (!dtr__plan_recv_tables(ctx, plan, &reps, vary, &best)) { /* (a balanced step) */
            int64_t coord[DTR_MAX_MESH_DIMS], at[DTR_MAX_MESH_DIMS] = {0};
            dtr__reps_first(ctx, &reps, coord);
            do {
                __int128 total = 0;
                for (int k = 0; k < plan->nsteps; k++)
                    total += dtr__step_rank_recv(ctx, &plan->steps[k], coord);
                if (total > best) best = total;
            } while (dtr__reps_next(ctx, &reps, vary, coord, at));
        }
        plan->recv_bytes_max = dtr__sat(best);
    }
    plan->lower_bound_recv_bytes = dtr__lower_bound(ctx, src->placements, dst->placements);
    /* (a plan through the seed's own blocks: compat counts them with dtr__seed_figures) */
}

/* ---- hashes for the ranks' argument agreement (internal.h) ---- */

/* A placement into h: its kind, its dim or op, a shard's place in its dim's order and a
 * ragged shard's sizes (ranks whose orders or sizes differ hold different layouts). */
uint64_t dtr__placement_hash(uint64_t h, dtr_placement_t p) {
    int64_t detail = p.kind == DTR_SHARD ? (int64_t)p.dim : p.kind == DTR_PARTIAL ? (int64_t)p.op : 0;
    int64_t order = p.kind == DTR_SHARD ? (int64_t)p.order : 0;
    h = dtr__fnv(h, order * 1000000 + (int64_t)p.kind * 1000 + detail);
    if (p.kind != DTR_SHARD || p.nsizes == 0) return h;
    h = dtr__fnv(h, -(int64_t)p.nsizes);
    for (int k = 0; k < p.nsizes; k++) h = dtr__fnv(h, p.sizes[k]);
    return h;
}

uint64_t dtr__plan_hash(const dtr_plan_t *plan) {
    uint64_t h = dtr__mesh_hash(plan->src.mesh);
    const dtr_spec_t *sp[2] = {&plan->src, &plan->dst};
    int mdims = dtr_mesh_ndims(plan->src.mesh);
    for (int k = 0; k < 2; k++) {
        h = dtr__fnv(h, sp[k]->ndim);
        h = dtr__fnv(h, sp[k]->dtype);
        for (int d = 0; d < sp[k]->ndim; d++) h = dtr__fnv(h, sp[k]->shape[d]);
        for (int i = 0; i < mdims; i++) h = dtr__placement_hash(h, sp[k]->placements[i]);
    }
    h = dtr__fnv(h, plan->strategy);
    h = dtr__fnv(h, plan->seed_blocks);
    h = dtr__fnv(h, plan->op_dtype);
    h = dtr__fnv(h, plan->nsteps);
    for (int k = 0; k < plan->nsteps; k++) {
        const dtr_step_t *s = &plan->steps[k];
        h = dtr__fnv(h, s->kind);
        h = dtr__fnv(h, s->mesh_dim);
        h = dtr__fnv(h, s->tensor_dim);
        h = dtr__fnv(h, s->tensor_dim2);
        for (int i = 0; i < mdims; i++) h = dtr__placement_hash(h, s->after[i]);
    }
    return h;
}

uint64_t dtr__batch_plan_hash(const dtr_batch_plan_t *p) {
    uint64_t h = dtr__fnv(0x62617463ull, (uint64_t)p->ntensors);
    for (int t = 0; t < p->ntensors; t++) h = dtr__fnv(h, dtr__plan_hash(&p->plans[t]));
    h = dtr__fnv(h, (uint64_t)p->nrounds);
    for (int k = 0; k < p->nitems; k++)
        h = dtr__fnv(dtr__fnv(h, (uint64_t)p->items[k].tensor), (uint64_t)p->items[k].step);
    return h;
}
