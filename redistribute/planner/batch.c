/*
 * Batched plans: the members' plans, their collective steps grouped into rounds (one
 * coalesced collective each), and the batch's totals. planner.h says what a round is and
 * why the order is right; docs/planner.md, "Batches", how the totals are counted.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

/* What a round shares: kind, mesh dim, and for reductions dtype and op. */
typedef struct {
    int kind, mesh_dim, dtype, op;
} dtr__round_key_t;

/* Does the step move data between ranks of this mesh? (Not a local kind, not over one
 * rank, not a kind that runs locally where nobody receives, as an exchange: those the
 * executor runs locally.) */
static bool dtr__step_communicates(const dtr__ctx_t *c, const dtr_step_t *s) {
    const dtr__kind_t *kind = dtr__kind_of(s);
    if (!kind->info.collective) return false;
    int64_t n = s->mesh_dim >= 0 ? c->msize[s->mesh_dim] : dtr_mesh_nranks(c->mesh);
    if (n < 2) return false;
    return !(kind->quiet_local && s->peers_max == 0 && s->recv_bytes_max == 0);
}

static dtr__round_key_t dtr__key(const dtr_plan_t *p, const dtr_step_t *s) {
    dtr__round_key_t k = {(int)s->kind, s->mesh_dim, -1, -1};
    if (dtr__kind_of(s)->reduces) {
        k.dtype = (int)p->src.dtype;
        k.op = (int)s->op;
    }
    return k;
}

static int dtr__key_cmp(dtr__round_key_t a, dtr__round_key_t b) {
    if (a.kind != b.kind) return a.kind < b.kind ? -1 : 1;
    if (a.mesh_dim != b.mesh_dim) return a.mesh_dim < b.mesh_dim ? -1 : 1;
    if (a.dtype != b.dtype) return a.dtype < b.dtype ? -1 : 1;
    if (a.op != b.op) return a.op < b.op ? -1 : 1;
    return 0;
}

static dtr_status_t dtr__batch_check(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                     dtr_batch_plan_t **out, const char *func) {
    DTR_CHECK_PTR(out, func);
    if (n <= 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "n: %d (a batch needs at least one tensor)", n);
    DTR_CHECK_PTR(src, func);
    DTR_CHECK_PTR(dst, func);
    for (int t = 0; t < n; t++) {
        const dtr_spec_t *sp[2] = {&src[t], &dst[t]};
        for (int k = 0; k < 2; k++) {
            if (sp[k]->mesh == NULL)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "%s[%d].mesh: must not be NULL",
                                  k ? "dst" : "src", t);
            if (!dtr_mesh_equal(sp[k]->mesh, src[0].mesh))
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                                  "%s[%d].mesh: not the mesh of src[0] (a batch runs on one "
                                  "mesh)",
                                  k ? "dst" : "src", t);
        }
    }
    return DTR_OK;
}

/* The rounds, greedily (planner.h): *rounds and *items allocated here. */
static dtr_status_t dtr__batch_rounds(dtr_batch_plan_t *b, const dtr__ctx_t *ctxs) {
    int n = b->ntensors, total = 0;
    int *next = calloc((size_t)n, sizeof *next); /* each member's next step */
    for (int t = 0; t < n; t++)
        for (int k = 0; k < b->plans[t].nsteps; k++)
            total += dtr__step_communicates(&ctxs[t], &b->plans[t].steps[k]);
    b->items = malloc(sizeof *b->items * (size_t)(total > 0 ? total : 1));
    b->rounds = malloc(sizeof *b->rounds * (size_t)(total > 0 ? total : 1));
    dtr__round_key_t *front = malloc(sizeof *front * (size_t)n);
    if (next == NULL || b->items == NULL || b->rounds == NULL || front == NULL) {
        free(next);
        free(front);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_batch_plan_create", "rounds of %d steps",
                          total);
    }
    for (int done = 0; done < total;) {
        /* each member's next communicating step, and its key */
        for (int t = 0; t < n; t++) {
            const dtr_plan_t *p = &b->plans[t];
            while (next[t] < p->nsteps && !dtr__step_communicates(&ctxs[t], &p->steps[next[t]]))
                next[t]++;
            front[t] = next[t] < p->nsteps ? dtr__key(p, &p->steps[next[t]])
                                           : (dtr__round_key_t){-1, 0, 0, 0};
        }
        int best = -1, best_front = 0, best_left = 0;
        for (int t = 0; t < n; t++) {
            if (front[t].kind < 0) continue;
            bool seen = false; /* each key once */
            for (int u = 0; u < t && !seen; u++)
                seen = front[u].kind >= 0 && dtr__key_cmp(front[u], front[t]) == 0;
            if (seen) continue;
            int nf = 0, left = 0;
            for (int u = 0; u < n; u++) {
                if (front[u].kind >= 0 && dtr__key_cmp(front[u], front[t]) == 0) nf++;
                const dtr_plan_t *p = &b->plans[u];
                for (int k = next[u]; k < p->nsteps; k++)
                    if (dtr__step_communicates(&ctxs[u], &p->steps[k]) &&
                        dtr__key_cmp(dtr__key(p, &p->steps[k]), front[t]) == 0)
                        left++;
            }
            if (best < 0 || nf > best_front || (nf == best_front && left > best_left) ||
                (nf == best_front && left == best_left && dtr__key_cmp(front[t], front[best]) < 0)) {
                best = t;
                best_front = nf;
                best_left = left;
            }
        }
        dtr__round_key_t key = front[best];
        dtr_batch_round_t *r = &b->rounds[b->nrounds++];
        memset(r, 0, sizeof *r);
        r->kind = (dtr_step_kind_t)key.kind;
        r->mesh_dim = key.mesh_dim;
        const dtr__kind_t *kind = dtr__kinds[r->kind];
        r->reduces = kind->reduces;
        r->dtype = r->reduces ? (dtr_dtype_t)key.dtype : b->plans[best].src.dtype;
        r->op = r->reduces ? (dtr_reduce_op_t)key.op : DTR_REDUCE_SUM;
        r->coalesced = kind->coalesces;
        r->first = b->nitems;
        double alpha = 0;
        for (int t = 0; t < n; t++) {
            if (front[t].kind < 0 || dtr__key_cmp(front[t], key) != 0) continue;
            const dtr_step_t *s = &b->plans[t].steps[next[t]];
            b->items[b->nitems++] = (dtr_batch_item_t){t, next[t]};
            r->count++;
            r->recv_bytes_max += s->recv_bytes_max;
            /* the latency part of its time, which a coalesced round pays once */
            double a = kind->alpha != NULL ? kind->alpha(&ctxs[t], s) : 0;
            r->time_us += r->coalesced ? s->time_us - a : s->time_us;
            if (a > alpha) alpha = a;
            next[t]++;
            done++;
        }
        if (r->coalesced) r->time_us += alpha;
        b->count[r->kind] += r->coalesced ? 1 : r->count;
    }
    free(next);
    free(front);
    return DTR_OK;
}

/* The totals: bytes per rank summed over members, the bound, memory, time. */
static void dtr__batch_totals(dtr_batch_plan_t *b, const dtr__ctx_t *ctxs) {
    int n = b->ntensors;
    bool per_coord = false;
    __int128 sum_max = 0;
    int64_t bound = 0, largest_round = 0;
    for (int t = 0; t < n; t++) {
        const dtr_plan_t *p = &b->plans[t];
        per_coord = per_coord || dtr__plan_per_coord(p) || dtr_spec_ragged(&p->src);
        sum_max += p->recv_bytes_max;
        if (p->lower_bound_recv_bytes > bound) bound = p->lower_bound_recv_bytes;
        b->peak_extra_bytes += p->peak_extra_bytes;
        b->one_by_one_time_us += p->time_us;
        for (int k = 0; k < p->nsteps; k++) {
            const dtr_step_t *s = &p->steps[k];
            if (dtr__step_communicates(&ctxs[t], s)) b->member_count[s->kind]++;
            else if (!dtr_step_kind_info(s->kind)->collective) b->time_us += s->time_us;
        }
    }
    for (int r = 0; r < b->nrounds; r++) {
        const dtr_batch_round_t *rd = &b->rounds[r];
        b->time_us += rd->time_us;
        int64_t packed = 0;
        for (int j = rd->first; j < rd->first + rd->count; j++) {
            const dtr_step_t *s = &b->plans[b->items[j].tensor].steps[b->items[j].step];
            packed += s->send_bytes_max + s->recv_bytes_max;
        }
        if (packed > largest_round) largest_round = packed;
    }
    b->peak_extra_bytes += largest_round;
    /* Per rank: the sum of the members' receives, and of what each must receive (a bound
     * per tensor, so their sum is one for the batch). Without all-to-all or exchange steps
     * or ragged shards coordinate 0 is every member's busiest rank. */
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    bool vary[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < DTR_MAX_MESH_DIMS; i++) vary[i] = true;
    __int128 best_recv = 0, best_need = 0;
    do {
        __int128 recv = 0, need = 0;
        for (int t = 0; t < n; t++) {
            if (per_coord) recv += dtr__plan_rank_recv(&ctxs[t], &b->plans[t], coord);
            need += dtr__need_bytes_at(&ctxs[t], b->plans[t].src.placements,
                                       b->plans[t].dst.placements, coord);
        }
        if (recv > best_recv) best_recv = recv;
        if (need > best_need) best_need = need;
    } while (dtr__next_coord(&ctxs[0], vary, coord));
    if (!per_coord) best_recv = sum_max;
    b->recv_bytes_max = best_recv > INT64_MAX ? INT64_MAX : (int64_t)best_recv;
    if (best_need > bound) bound = best_need > INT64_MAX ? INT64_MAX : (int64_t)best_need;
    b->lower_bound_recv_bytes = bound;
}

void dtr_batch_plan_destroy(dtr_batch_plan_t *plan) {
    if (plan == NULL) return;
    free(plan->plans);
    free(plan->rounds);
    free(plan->items);
    free(plan);
}

dtr_status_t dtr_batch_plan_create(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                   const dtr_plan_options_t *opts, dtr_plan_cache_t *cache,
                                   dtr_batch_plan_t **out) {
    DTR_CHECK(dtr__batch_check(n, src, dst, out, __func__));
    dtr_batch_plan_t *b = calloc(1, sizeof *b);
    dtr__ctx_t *ctxs = malloc(sizeof *ctxs * (size_t)n);
    if (b != NULL) b->plans = malloc(sizeof *b->plans * (size_t)n);
    if (b == NULL || b->plans == NULL || ctxs == NULL) {
        free(ctxs);
        dtr_batch_plan_destroy(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "a batch of %d plans", n);
    }
    b->ntensors = n;
    dtr_status_t st = DTR_OK;
    for (int t = 0; t < n && st == DTR_OK; t++) {
        st = cache != NULL ? dtr_plan_cache_get(cache, &src[t], &dst[t], opts, &b->plans[t], NULL)
                           : dtr_plan_create(&src[t], &dst[t], opts, &b->plans[t]);
        if (st == DTR_OK && src[t].dtype != dst[t].dtype)
            st = dtr__error(DTR_ERR_UNSUPPORTED, "dtr_plan_create",
                            "dst: dtype %s from src's %s: a batch does not cast yet (plan the "
                            "tensor alone)",
                            dtr_dtype_name(dst[t].dtype), dtr_dtype_name(src[t].dtype));
        if (st == DTR_OK && b->plans[t].seed_blocks)
            st = dtr__error(DTR_ERR_UNSUPPORTED, "dtr_plan_create",
                            "compat: the seed algorithm's plan holds blocks of other lengths "
                            "than the canonical layout on the way, which a batch cannot "
                            "coalesce (plan the tensor alone, or with the optimal strategy)");
        if (st != DTR_OK) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s", dtr_last_error());
            st = dtr__error(st, __func__, "tensor %d (src[%d] -> dst[%d]): %s", t, t, t, detail);
            break;
        }
        dtr__ctx_init(&ctxs[t], &b->plans[t].dst, &b->plans[t].cost);
    }
    if (st == DTR_OK) st = dtr__batch_rounds(b, ctxs);
    if (st == DTR_OK) dtr__batch_totals(b, ctxs);
    free(ctxs);
    if (st != DTR_OK) {
        dtr_batch_plan_destroy(b);
        return st;
    }
    b->hash = dtr__batch_plan_hash(b);
    *out = b;
    return DTR_OK;
}

dtr_status_t dtr_batch_plan_rank_bytes(const dtr_batch_plan_t *plan, int rank, int64_t *send,
                                       int64_t *recv) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(send, __func__);
    DTR_CHECK_PTR(recv, __func__);
    if (plan->ntensors <= 0 || plan->plans == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "plan: not a batch from dtr_batch_plan_create");
    int64_t coord[DTR_MAX_MESH_DIMS];
    DTR_CHECK_AS(dtr_mesh_coord(plan->plans[0].src.mesh, rank, coord), __func__);
    __int128 s = 0, r = 0;
    for (int t = 0; t < plan->ntensors; t++) {
        const dtr_plan_t *p = &plan->plans[t];
        dtr__ctx_t c;
        dtr__ctx_init(&c, &p->dst, &p->cost);
        for (int k = 0; k < p->nsteps; k++) {
            int64_t a, b;
            dtr__step_rank_bytes(&c, &p->steps[k], coord, &a, &b);
            s += a;
            r += b;
        }
    }
    *send = s > INT64_MAX ? INT64_MAX : (int64_t)s;
    *recv = r > INT64_MAX ? INT64_MAX : (int64_t)r;
    return DTR_OK;
}
