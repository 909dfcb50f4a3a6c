/*
 * Changes between two meshes (dtr_cross_plan_create, _create_batch): tensors from specs on
 * mesh A (its ranks RA) to specs on mesh B (RB), each with the same global shape on both
 * sides, all within one communicator. Per tensor the plan is two parts:
 *
 *   1. where the source has Partial mesh dims, a single-mesh plan on A turns it into `mid`,
 *      a layout without Partial dims in the destination's dtype: the reduction runs among
 *      the source ranks, before anything crosses meshes (each candidate of mid is costed,
 *      below). A cast alone (no Partial dims) has no such plan: mid is the source's
 *      placements in the destination's dtype, and each sender casts its boxes as it packs
 *      them (wire_cast), so the source is read once;
 *   2. messages: for every destination rank r and every distinct block C of mid that meets
 *      r's target block T_r, the box T_r ∩ C goes from one holder of C to r. Where r itself
 *      holds C (a rank in both meshes) the box stays (a local copy); otherwise the holder is
 *      the least loaded of C's replicas so far, the largest boxes placed first.
 *
 * Relabeling (cross_relabel.c) may first choose another order of B's ranks; a staging cap
 * (cross_rounds.c) splits the messages into chunks over rounds. The blocks come from
 * cross_blocks.c: the cost grows with the ranks and the messages, not with the elements.
 * docs/cross-mesh.md has the rules and the bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "numeric/numeric.h"
#include "redistribute/planner/internal.h"

/* What a plan's creation carries: the call's name (for errors) and the cost model. */
typedef struct {
    const char *func;
    const dtr_cost_model_t *cost;
    bool batch;
    int64_t cap; /* the staging cap (a Partial is then reduced on the source mesh) */
} dtr__xctx_t;

/* The distinct pairs of ranks (positions) that exchange in one round, and what they make of
 * the model's latency term: the most peers one rank has in each round, summed over rounds.
 * Up to 16,384 ranks a bitmap of the pairs (cleared through the keys set), above the keys
 * sorted at the round's end. */
typedef struct {
    int64_t n, *keys, nkeys, cap, *peers, latency; /* peers: [n], zero between rounds */
    uint64_t *bits;
} dtr__pairs_t;

static dtr_status_t dtr__pair(dtr__pairs_t *ps, int64_t s, int64_t r) {
    int64_t key = s * ps->n + r;
    if (ps->bits != NULL) {
        uint64_t bit = 1ull << (key & 63);
        if (ps->bits[key >> 6] & bit) return DTR_OK;
        ps->bits[key >> 6] |= bit;
    }
    if (ps->nkeys == ps->cap) {
        int64_t cap = ps->cap ? 2 * ps->cap : 1024, *keys = realloc(ps->keys, sizeof *keys * (size_t)cap);
        if (keys == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "peers");
        ps->keys = keys, ps->cap = cap;
    }
    ps->keys[ps->nkeys++] = key;
    return DTR_OK;
}

static int dtr__cmp_key(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The round's end: its busiest rank's peers added to the latency term; the pairs cleared. */
static void dtr__pairs_flush(dtr__pairs_t *ps) {
    int64_t m = 0, most = 0;
    if (ps->bits == NULL && ps->nkeys > 1) qsort(ps->keys, (size_t)ps->nkeys, sizeof *ps->keys, dtr__cmp_key);
    for (int64_t j = 0; j < ps->nkeys; j++)
        if (m == 0 || ps->keys[j] != ps->keys[m - 1]) ps->keys[m++] = ps->keys[j];
    for (int64_t j = 0; j < m; j++) ps->peers[ps->keys[j] / ps->n]++, ps->peers[ps->keys[j] % ps->n]++;
    for (int64_t j = 0; j < m; j++) {
        int64_t s = ps->keys[j] / ps->n, r = ps->keys[j] % ps->n;
        most = ps->peers[s] > most ? ps->peers[s] : most;
        most = ps->peers[r] > most ? ps->peers[r] : most;
    }
    for (int64_t j = 0; j < m; j++) {
        ps->peers[ps->keys[j] / ps->n] = ps->peers[ps->keys[j] % ps->n] = 0;
        if (ps->bits != NULL) ps->bits[ps->keys[j] >> 6] = 0;
    }
    ps->latency += most;
    ps->nkeys = 0;
}

/* Tensor t's pairs, added to the round's. */
static dtr_status_t dtr__tensor_pairs(const dtr_cross_plan_t *p, int t, dtr__pairs_t *ps) {
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    dtr_status_t st = DTR_OK;
    for (int64_t i = 0; i < k->n && st == DTR_OK; i++)
        if (k->slot[i] >= 0) st = dtr__pair(ps, dtr__xpos(p, dtr__xsender(p, t, i)), dtr__xpos(p, k->v[i].to));
    return st;
}

/* The pairs of each round, from the messages (made: under a cap, its chunks) or the kinds:
 * a round of one tensor (a large one) costs what every round of its variant costs. */
static dtr_status_t dtr__latency(const dtr_cross_plan_t *p, dtr__pairs_t *ps) {
    dtr_status_t st = DTR_OK;
    int round = -1, n = p->ntensors;
    for (int64_t j = 0; j < p->nmsgs && st == DTR_OK && p->msgs_for == -1; j++) {
        const dtr__xmsg_t *m = &p->msgs[j];
        if (m->round != round) dtr__pairs_flush(ps), round = m->round;
        if (m->from != m->to) st = dtr__pair(ps, dtr__xpos(p, m->from), dtr__xpos(p, m->to));
    }
    for (int t = 0; t < n && st == DTR_OK && p->msgs_for != -1; t++) {
        const dtr__xtensor_t *x = &p->t[t];
        dtr__xkind_t *k = &p->kinds[x->kind];
        if (x->round != round) dtr__pairs_flush(ps), round = x->round;
        bool alone = (t == 0 || p->t[t - 1].round != round) && (t + 1 == n || p->t[t + 1].round != round);
        int64_t *known = alone && k->period > 0 ? &k->vlatency[x->turn % k->period] : NULL;
        if (known != NULL && *known >= 0) {
            ps->latency += *known;
            continue;
        }
        st = dtr__tensor_pairs(p, t, ps);
        if (known == NULL || st != DTR_OK) continue;
        int64_t before = ps->latency;
        dtr__pairs_flush(ps);
        *known = ps->latency - before;
    }
    dtr__pairs_flush(ps);
    return st;
}

/* Tensor t's boxes' bytes, `times` over, into the per-position sums and the figures. */
static void dtr__tensor_moves(const dtr_cross_plan_t *p, int t, int64_t times, int64_t *v,
                              dtr_cross_figures_t *f) {
    int64_t n = p->nranks, *send = v, *recv = v + n, *sum = v + 2 * n;
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    for (int64_t i = 0; i < k->n; i++) {
        const dtr__xpiece_t *x = &k->v[i];
        int64_t bytes = x->numel * k->item * times, r = dtr__xpos(p, x->to);
        if (p->t[t].at_receiver) sum[r] += bytes; /* (summed there) */
        if (k->slot[i] < 0) continue;
        send[dtr__xpos(p, dtr__xsender(p, t, i))] += bytes, recv[r] += bytes;
        f->messages += times, f->moved_bytes += bytes;
    }
}

/* The per-rank bytes and messages of the moves, from the kinds (each variant once, its
 * tensors' count over): v holds send, recv and sum (bytes summed at the receivers) per
 * position; *latency: the most peers of a rank per round, summed over the rounds. */
static dtr_status_t dtr__moves(const dtr_cross_plan_t *p, int64_t *v, dtr_cross_figures_t *f,
                               int64_t *latency) {
    int64_t n = p->nranks;
    dtr__pairs_t pairs = {.n = n, .peers = v + 3 * n};
    if (n <= 16384 && (pairs.bits = calloc((size_t)(n * n / 64 + 1), sizeof *pairs.bits)) == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "peers of %lld ranks", (long long)n);
    for (int j = 0; j < p->nkinds; j++)
        for (int64_t r = 0; r < p->kinds[j].period; r++)
            if (p->kinds[j].vcount[r] > 0) dtr__tensor_moves(p, p->kinds[j].vrep[r], p->kinds[j].vcount[r], v, f);
    for (int t = 0; t < p->ntensors; t++)
        if (p->kinds[p->t[t].kind].period == 0) dtr__tensor_moves(p, t, 1, v, f);
    if (p->msgs_for == -1) { /* (made: under a cap, its chunks) */
        f->messages = 0;
        for (int64_t j = 0; j < p->nmsgs; j++) f->messages += p->msgs[j].from != p->msgs[j].to;
    }
    dtr_status_t st = dtr__latency(p, &pairs);
    *latency = pairs.latency;
    free(pairs.bits);
    free(pairs.keys);
    return st;
}

/* The per-rank figures of the moves and the bounds (cross_rounds.c set rounds and
 * staging), and the modeled time. */
static dtr_status_t dtr__figures(dtr_cross_plan_t *p, const dtr_cost_model_t *cost) {
    int64_t n = p->nranks, most_sum = 0, latency = 0, pre_peak = 0;
    int64_t *v = calloc((size_t)(5 * n + 1), sizeof *v);
    if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "figures of %lld ranks", (long long)n);
    int64_t *send = v, *recv = v + n, *sum = v + 2 * n, *forced = v + 4 * n;
    dtr_cross_figures_t f = p->fig; /* (rounds and staging from cross_rounds.c) */
    dtr_status_t st = dtr__moves(p, v, &f, &latency);
    for (int64_t r = 0; r < n; r++) {
        if (send[r] > f.send_bytes_max) f.send_bytes_max = send[r];
        if (recv[r] > f.recv_bytes_max) f.recv_bytes_max = recv[r];
        if (sum[r] > most_sum) most_sum = sum[r];
    }
    /* every element a target lacks comes from some holder of its block: the busiest of a
     * block's holders sends at least its share, and a sole holder all of it (per tensor) */
    for (int j = 0; j < p->nkinds; j++) {
        const dtr__xkind_t *k = &p->kinds[j];
        for (int64_t c = 0; c < k->b.nclasses; c++) {
            int64_t h = k->b.first[c + 1] - k->b.first[c], lack = k->lack[c];
            int64_t share = h > 0 ? (lack / k->item + h - 1) / h * k->item : 0;
            if (share > f.lower_bound_send_bytes) f.lower_bound_send_bytes = share;
            if (h == 1) forced[dtr__xpos(p, k->b.holder[k->b.first[c]])] += lack * k->count;
        }
    }
    for (int64_t r = 0; r < n; r++)
        if (forced[r] > f.lower_bound_send_bytes) f.lower_bound_send_bytes = forced[r];
    /* each target receives its blocks less the boxes it holds itself, whoever sends */
    f.lower_bound_recv_bytes = f.recv_bytes_max;
    for (int t = 0; t < p->ntensors; t++) {
        const dtr__xtensor_t *x = &p->t[t];
        if (!x->has_pre) continue;
        f.pre_steps += x->pre->nsteps;
        f.time_us += x->pre->time_us;
        if (x->pre->peak_extra_bytes > pre_peak) pre_peak = x->pre->peak_extra_bytes;
    }
    /* (the reduced blocks alive at once, cross_rounds.c) */
    f.peak_extra_bytes = p->mid_bytes + (f.staging_bytes_max > pre_peak ? f.staging_bytes_max : pre_peak);
    f.time_us += (double)latency * cost->alpha_us[0] +
                 (double)(f.send_bytes_max > f.recv_bytes_max ? f.send_bytes_max : f.recv_bytes_max) /
                     (cost->bandwidth_gbps[0] * 1e3) +
                 (double)f.staging_bytes_max * (double)f.rounds / (cost->local_gbps * 1e3) +
                 (double)most_sum / (cost->local_gbps * 1e3);
    f.permutation = f.messages == 0 && f.pre_steps == 0;
    for (int t = 0; t < p->ntensors; t++) f.permutation &= !p->t[t].has_pre && !p->t[t].wire_cast;
    p->fig = f;
    free(v);
    return st;
}

/* Relabeling: B's ranks in the order that keeps the most where it is, as the plan's own
 * mesh, every tensor's dst moved onto it (nothing where the order is B's own). */
static dtr_status_t dtr__relabeled(dtr_cross_plan_t *p) {
    const dtr_mesh_t *mb = p->t[0].dst.mesh;
    int64_t nb = dtr_mesh_nranks(mb), sizes[DTR_MAX_MESH_DIMS], coord[DTR_MAX_MESH_DIMS] = {0};
    int *ranks = malloc(sizeof *ranks * (size_t)nb);
    dtr__xblocks_t *b = malloc(sizeof *b * (size_t)p->ntensors); /* (each its kind's, shared) */
    if (ranks == NULL || b == NULL) {
        free(ranks), free(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "%lld ranks", (long long)nb);
    }
    for (int t = 0; t < p->ntensors; t++) b[t] = p->kinds[p->t[t].kind].b;
    dtr_status_t st = dtr__xrelabel(p, b, ranks);
    free(b);
    bool same = true;
    for (int64_t k = 0; k < nb && st == DTR_OK; k++) {
        int r;
        dtr_mesh_rank_at(mb, coord, &r);
        same &= r == ranks[k];
        dtr__xcoord_next(mb, coord);
    }
    for (int i = 0; i < dtr_mesh_ndims(mb); i++) sizes[i] = dtr_mesh_size(mb, i);
    if (st == DTR_OK && !same) st = dtr_mesh_create(dtr_mesh_ndims(mb), sizes, ranks, nb, &p->relabeled);
    free(ranks);
    if (st != DTR_OK || same) return st;
    for (int t = 0; t < p->ntensors; t++) p->t[t].dst.mesh = p->relabeled;
    return DTR_OK;
}

static uint64_t dtr__spec_hash(uint64_t h, const dtr_spec_t *s) {
    h = dtr__fnv(h, (int64_t)dtr__mesh_hash(s->mesh));
    h = dtr__fnv(dtr__fnv(h, s->ndim), s->dtype);
    for (int d = 0; d < s->ndim; d++) h = dtr__fnv(h, s->shape[d]);
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++) h = dtr__placement_hash(h, s->placements[i]);
    return h;
}

/* Over what the ranks must share: the tensors (specs, reductions, kinds, turns, rounds),
 * each kind's boxes and their slots (which make every message), the rounds and the cap. */
static void dtr__hash(dtr_cross_plan_t *p) {
    uint64_t h = dtr__fnv(0x63726f7373ull, p->ntensors);
    for (int t = 0; t < p->ntensors; t++) {
        const dtr__xtensor_t *x = &p->t[t];
        h = dtr__spec_hash(dtr__spec_hash(h, &x->src), &x->dst);
        h = dtr__fnv(h, x->has_pre ? (int64_t)dtr__plan_hash(x->pre) : 0);
        h = dtr__fnv(dtr__fnv(h, x->wire_cast), x->at_receiver ? x->parts : 0);
        h = dtr__fnv(dtr__fnv(dtr__fnv(h, x->kind), x->turn), x->round);
    }
    for (int j = 0; j < p->nkinds; j++) {
        const dtr__xkind_t *k = &p->kinds[j];
        h = dtr__fnv(h, k->n);
        for (int64_t i = 0; i < k->n; i++) {
            const dtr__xpiece_t *x = &k->v[i];
            h = dtr__fnv(dtr__fnv(dtr__fnv(dtr__fnv(h, x->to), k->slot[i]), x->cls), x->part);
            for (int d = 0; d < k->b.ndim; d++) h = dtr__fnv(dtr__fnv(h, x->lo[d]), x->ext[d]);
        }
    }
    h = dtr__fnv(dtr__fnv(dtr__fnv(h, p->nrounds), p->cap), p->msgs_for == -1 ? p->nmsgs : 0);
    p->hash = h;
}

bool dtr__xcoalesced(const dtr_cross_plan_t *p, int t) {
    const dtr__xtensor_t *x = &p->t[t];
    return x->has_pre && x->src.dtype == x->mid.dtype && p->pre_batch != NULL &&
           p->pre_batch[x->round] != NULL;
}

/* Per round, the reductions of the tensors starting there (those that keep their dtype: a
 * batch does not cast) as one batch plan, where there are two or more: one collective per
 * kind of step for all of them instead of one per tensor. */
static dtr_status_t dtr__pre_batches(dtr_cross_plan_t *p, const dtr_cost_model_t *cost) {
    int n = p->ntensors;
    p->pre_batch = calloc((size_t)p->nrounds, sizeof *p->pre_batch);
    dtr_spec_t *src = malloc(sizeof *src * (size_t)(2 * (n > 0 ? n : 1)));
    int *count = calloc((size_t)p->nrounds, sizeof *count);
    dtr_status_t st = p->pre_batch != NULL && src != NULL && count != NULL
                          ? DTR_OK
                          : dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "batches");
    for (int t = 0; st == DTR_OK && t < n; t++)
        count[p->t[t].round] += p->t[t].has_pre && p->t[t].src.dtype == p->t[t].mid.dtype;
    dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = cost};
    for (int r = 0; st == DTR_OK && r < p->nrounds; r++) {
        if (count[r] < 2) continue;
        int m = 0;
        for (int t = 0; t < n; t++) {
            const dtr__xtensor_t *x = &p->t[t];
            if (x->round == r && x->has_pre && x->src.dtype == x->mid.dtype)
                src[m] = x->src, src[n + m] = x->mid, m++;
        }
        st = dtr_batch_plan_create(m, src, src + n, &opts, NULL, &p->pre_batch[r]);
    }
    free(src);
    free(count);
    return st;
}

/* p->pos from p->ranks (a relabeled plan's build may come again: the old map goes). */
static dtr_status_t dtr__positions(dtr_cross_plan_t *p) {
    free(p->pos);
    int top = p->nranks > 0 ? p->ranks[p->nranks - 1] : 0;
    p->pos = malloc(sizeof *p->pos * ((size_t)top + 1));
    if (p->pos == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "ranks");
    for (int r = 0; r <= top; r++) p->pos[r] = -1;
    for (int k = 0; k < p->nranks; k++) p->pos[p->ranks[k]] = k;
    return DTR_OK;
}

/* The moves of a plan whose tensors (src, mid, pre, dst) are set: the kinds and their
 * blocks, relabeling where asked, the boxes and their senders, the rounds, the figures and
 * the hash (the messages are made on demand: dtr__xensure). */
static dtr_status_t dtr__build(dtr_cross_plan_t *p, const dtr_cost_model_t *cost) {
    dtr_status_t st = dtr__xkinds(p);
    if (st == DTR_OK && p->relabel) st = dtr__relabeled(p);
    if (st == DTR_OK) /* the ranks of both meshes: the group the change agrees over */
        st = dtr__mesh_union(p->t[0].src.mesh, p->t[0].dst.mesh, "dtr_cross_plan_create",
                             &p->ranks, &p->nranks);
    if (st == DTR_OK) st = dtr__positions(p);
    if (st == DTR_OK) st = dtr__xkind_boxes(p, cost);
    if (st == DTR_OK) st = dtr__xrounds(p);
    if (st == DTR_OK) st = dtr__pre_batches(p, cost);
    if (st == DTR_OK) st = dtr__figures(p, cost);
    if (st == DTR_OK) dtr__hash(p);
    return st;
}

void dtr_cross_plan_destroy(dtr_cross_plan_t *plan) {
    if (plan == NULL) return;
    for (int r = 0; plan->pre_batch != NULL && r < plan->nrounds; r++)
        dtr_batch_plan_destroy(plan->pre_batch[r]);
    free(plan->pre_batch);
    for (int k = 0; k < plan->npres; k++) free(plan->pres[k]);
    free(plan->pres);
    dtr__xkinds_free(plan);
    free(plan->t);
    dtr_mesh_destroy(plan->relabeled);
    free(plan->msgs);
    free(plan->by_to);
    free(plan->round_first);
    free(plan->ranks);
    free(plan->pos);
    pthread_mutex_destroy(&plan->lock);
    free(plan);
}

static dtr_cross_plan_t *dtr__new_plan(int n) {
    dtr_cross_plan_t *p = calloc(1, sizeof *p);
    if (p != NULL && ((p->t = calloc((size_t)n, sizeof *p->t)) == NULL ||
                      (p->pres = calloc((size_t)n, sizeof *p->pres)) == NULL)) {
        free(p->t);
        free(p);
        return NULL;
    }
    if (p != NULL) p->ntensors = n, p->msgs_for = -2, pthread_mutex_init(&p->lock, NULL);
    return p;
}

/* Whether a spec has a Partial mesh dim (its reduction on the source mesh is to choose). */
static bool dtr__partial(const dtr_spec_t *s) {
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++)
        if (s->placements[i].kind == DTR_PARTIAL) return true;
    return false;
}

/* One tensor's plan for one choice of mid (src itself, or src reduced on its mesh to mid's
 * placements in dst's dtype): *out, or an error (the pre plan's refusal). */
static dtr_status_t dtr__with_mid(const dtr_spec_t *src, const dtr_spec_t *mid,
                                  const dtr_spec_t *dst, bool at_receiver,
                                  const dtr_cost_model_t *cost, dtr_cross_plan_t **out) {
    dtr_cross_plan_t *p = dtr__new_plan(1);
    if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "a plan");
    dtr__xtensor_t *x = &p->t[0];
    x->src = *src;
    x->mid = *mid;
    x->dst = *dst;
    x->at_receiver = at_receiver;
    x->wire_cast = !dtr__partial(src) && src->dtype != dst->dtype;
    x->has_pre = mid != src && !x->wire_cast && !at_receiver;
    dtr_status_t st = DTR_OK;
    if (x->has_pre) {
        dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = cost};
        p->pres[p->npres++] = x->pre = malloc(sizeof *x->pre);
        st = x->pre != NULL ? dtr_plan_create(src, mid, &opts, x->pre)
                            : dtr__error(DTR_ERR_OUT_OF_MEMORY, "dtr_cross_plan_create", "a plan");
    }
    if (st == DTR_OK) st = dtr__build(p, cost);
    if (st != DTR_OK) {
        dtr_cross_plan_destroy(p);
        return st;
    }
    *out = p;
    return DTR_OK;
}

/* The bytes on a one-tensor plan's busiest rank: what it receives on the source mesh
 * first, then the most it sends or receives between the meshes. */
static int64_t dtr__busiest(const dtr_cross_plan_t *p) {
    const dtr_cross_figures_t *f = &p->fig;
    return (p->t[0].has_pre ? p->t[0].pre->recv_bytes_max : 0) +
           (f->send_bytes_max > f->recv_bytes_max ? f->send_bytes_max : f->recv_bytes_max);
}

/* a better than b: less modeled time; then fewer bytes moved. */
static bool dtr__better(const dtr_cross_plan_t *a, const dtr_cross_plan_t *b) {
    if (a->fig.time_us != b->fig.time_us) return a->fig.time_us < b->fig.time_us;
    return a->fig.moved_bytes < b->fig.moved_bytes;
}

/* The addends of a Partial source: the product of its Partial mesh dims' sizes. */
static int64_t dtr__addends(const dtr_spec_t *src) {
    int64_t n = 1;
    for (int i = 0; i < dtr_mesh_ndims(src->mesh); i++)
        if (src->placements[i].kind == DTR_PARTIAL) n *= dtr_mesh_size(src->mesh, i);
    return n;
}

/* How many boxes dst's blocks are cut into by mid's (*count), without making them. */
static dtr_status_t dtr__count(const dtr_spec_t *mid, const dtr_spec_t *dst, int64_t *count) {
    dtr__xblocks_t b;
    DTR_CHECK(dtr__xblocks(mid, &b));
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = 0;
    if (b.nclasses > 0)
        do {
            dtr_layout_t l;
            dtr_spec_layout_at(dst, coord, &l);
            if (l.numel > 0) n += dtr__xcount_pieces(&b, &l);
        } while (dtr__xcoord_next(dst->mesh, coord));
    dtr__xblocks_free(&b);
    *count = n;
    return DTR_OK;
}

/* The candidates of mid for a source with Partial dims (or another dtype than dst's):
 * index -1, the Partial dims reduced to R; d >= 0, to S(d). */
static dtr_status_t dtr__candidate(const dtr_spec_t *src, const dtr_spec_t *dst, int d,
                                   dtr_spec_t *mid) {
    int m = dtr_mesh_ndims(src->mesh);
    dtr_placement_t pl[DTR_MAX_MESH_DIMS];
    for (int i = 0; i < m; i++)
        pl[i] = src->placements[i].kind != DTR_PARTIAL ? src->placements[i]
                : d < 0                                 ? dtr_replicate()
                                                        : dtr_shard(d);
    return dtr_spec_init(mid, src->mesh, pl, m, src->shape, src->ndim, dst->dtype);
}

/* Where a Partial source may be summed at the receivers (the first candidate, -2): two
 * addends or more, every Partial dim a SUM (or, for a source with a ragged shard, which the
 * steps on its mesh cannot reduce, every one the same MAX, MIN or PRODUCT, combined alike),
 * a real float dtype kept, no staging cap (a box's addends then arrive in one round), and
 * DTR_CROSS_REDUCE not "source". *only: it is "receiver". */
static void dtr__at_receiver_ok(const dtr__xctx_t *c, const dtr_spec_t *src,
                                const dtr_spec_t *dst, bool *ok, bool *only) {
    const char *env = getenv("DTR_CROSS_REDUCE"); /* (checked by dtr__check_args) */
    *only = env != NULL && strcmp(env, "receiver") == 0;
    const dtr_dtype_info_t *di = dtr_dtype_info(src->dtype);
    *ok = dtr__addends(src) > 1 && src->dtype == dst->dtype && di->is_float && !di->is_complex &&
          !di->storage_only && c->cap == 0 && !(env != NULL && strcmp(env, "source") == 0);
    dtr_reduce_op_t op = dtr__xpartial_op(src);
    bool combines = op == DTR_REDUCE_SUM || (dtr_spec_ragged(src) && op != DTR_REDUCE_AVG);
    for (int i = 0; *ok && i < dtr_mesh_ndims(src->mesh); i++)
        *ok = src->placements[i].kind != DTR_PARTIAL || (src->placements[i].op == op && combines);
    *only &= *ok;
}

/* One tensor's best plan without relabeling or cap: src as it is where it has no Partial
 * dims and dst's dtype; else the Partial dims reduced to R, or to S(d) for each tensor dim
 * d (a reduce-scatter moves less, and the shards then move less again), each costed, the
 * least modeled time winning; and where dtr__at_receiver_ok, the Partial dims summed at the
 * receivers instead where that puts fewer bytes on the busiest rank (dtr__busiest: the
 * source mesh's reductions run on shared memory, the moves between meshes do not, so at
 * equal bytes the reduction stays on the source; docs/cross-mesh.md). A
 * candidate cutting the targets into more than four times the boxes of the fewest (and
 * over 4,096) is not planned: its messages alone would cost more, and making them could
 * take gigabytes (a shard of columns sent to shards of rows on 4,096 ranks each). */
static dtr_status_t dtr__best_mid(const dtr__xctx_t *c, const char *name, const dtr_spec_t *src,
                                  const dtr_spec_t *dst, dtr_cross_plan_t **out) {
    bool partial = dtr__partial(src), recv_ok = false, recv_only = false;
    if (!partial && src->dtype == dst->dtype) return dtr__with_mid(src, src, dst, false, c->cost, out);
    dtr__at_receiver_ok(c, src, dst, &recv_ok, &recv_only);
    int last = partial && !recv_only ? src->ndim : 0, start = recv_ok ? -2 : -1;
    int64_t count[DTR_MAX_TENSOR_DIMS + 2], fewest = INT64_MAX;
    for (int d = start; d < last; d++) {
        dtr_spec_t mid;
        count[d + 2] = INT64_MAX;
        if (dtr__candidate(src, dst, d < -1 ? -1 : d, &mid) == DTR_OK)
            DTR_CHECK(dtr__count(&mid, dst, &count[d + 2]));
        if (d == -2 && count[0] < INT64_MAX) count[0] *= dtr__addends(src);
        if (count[d + 2] < fewest) fewest = count[d + 2];
    }
    dtr_cross_plan_t *best = NULL, *recv = NULL;
    dtr_status_t first = DTR_OK;
    char why[512] = "";
    for (int d = start; d < last; d++) {
        dtr_spec_t mid;
        dtr_cross_plan_t *p = NULL;
        if (d == -1 && recv_only) continue;
        if (fewest < INT64_MAX && count[d + 2] > 4 * fewest && count[d + 2] > 4096) continue;
        dtr_status_t st = dtr__candidate(src, dst, d < -1 ? -1 : d, &mid);
        if (st == DTR_OK) st = dtr__with_mid(src, &mid, dst, d == -2, c->cost, &p);
        if (st != DTR_OK) {
            if (first == DTR_OK) {
                first = st;
                snprintf(why, sizeof why, "%s", dtr_last_error());
            }
            continue;
        }
        if (d == -2) {
            recv = p;
            continue;
        }
        if (best == NULL || dtr__better(p, best)) {
            dtr_cross_plan_destroy(best);
            best = p;
        } else {
            dtr_cross_plan_destroy(p);
        }
    }
    if (recv != NULL && (best == NULL || dtr__busiest(recv) < dtr__busiest(best))) {
        dtr_cross_plan_destroy(best);
        best = recv;
    } else {
        dtr_cross_plan_destroy(recv);
    }
    if (best == NULL) return dtr__error(first, c->func, "the reduction on %s's mesh: %s", name, why);
    *out = best;
    return DTR_OK;
}

/* One pair's checks: specs made by dtr_spec_init, the same shape, a dtype that casts, no
 * Partial in dst. */
static dtr_status_t dtr__check_pair(const dtr__xctx_t *c, int i, const dtr_spec_t *src,
                                    const dtr_spec_t *dst) {
    char sn[32], dn[32], a[256], b[256];
    snprintf(sn, sizeof sn, c->batch ? "src[%d]" : "src", i);
    snprintf(dn, sizeof dn, c->batch ? "dst[%d]" : "dst", i);
    DTR_CHECK(dtr__check_spec(src, sn, c->func));
    DTR_CHECK(dtr__check_spec(dst, dn, c->func));
    if (src->ndim != dst->ndim ||
        memcmp(src->shape, dst->shape, (size_t)src->ndim * sizeof(int64_t)) != 0) {
        dtr_shape_format(src->shape, src->ndim, a, sizeof a);
        dtr_shape_format(dst->shape, dst->ndim, b, sizeof b);
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func, "%s: shape %s differs from %s's %s",
                          dn, b, sn, a);
    }
    if (!dtr__castable(src->dtype, dst->dtype))
        return dtr__error(DTR_ERR_UNSUPPORTED, c->func,
                          "%s: dtype %s from %s's %s: a redistribution casts between float "
                          "dtypes (f32 f64 f16 bf16) or between complex ones (c64 c128)%s",
                          dn, dtr_dtype_name(dst->dtype), sn, dtr_dtype_name(src->dtype),
                          dtr__cast_hint(src->dtype, dst->dtype));
    for (int k = 0; k < dtr_mesh_ndims(dst->mesh); k++)
        if (dst->placements[k].kind == DTR_PARTIAL) {
            dtr_placement_format(dst->placements[k], a, sizeof a);
            return dtr__error(DTR_ERR_UNSUPPORTED, c->func,
                              "%s: placements[%d] is %s: a change between meshes ends in Shard "
                              "or Replicate (make it Partial on the destination mesh afterwards)",
                              dn, k, a);
        }
    if (i > 0 && !dtr_mesh_equal(src->mesh, (src - i)->mesh))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func,
                          "%s: on another mesh than src[0]: a batch moves tensors between the "
                          "same two meshes", sn);
    if (i > 0 && !dtr_mesh_equal(dst->mesh, (dst - i)->mesh))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func,
                          "%s: on another mesh than dst[0]: a batch moves tensors between the "
                          "same two meshes", dn);
    return DTR_OK;
}

/* The arguments of a create call, checked; the cost model chosen into *model. */
static dtr_status_t dtr__check_args(dtr__xctx_t *c, int n, const dtr_spec_t *src,
                                    const dtr_spec_t *dst, const dtr_cross_options_t *opts,
                                    dtr_cost_model_t *model) {
    if (c->batch && (n < 1 || n > (1 << 24)))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func, "n: %d, must be 1..%d", n, 1 << 24);
    if (src == NULL || dst == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func, "%s: must not be NULL",
                          src == NULL ? "src" : "dst");
    int64_t most_item = 1;
    for (int i = 0; i < n; i++) {
        DTR_CHECK(dtr__check_pair(c, i, &src[i], &dst[i]));
        int64_t item = dtr_dtype_info(dst[i].dtype)->size;
        if (item > most_item) most_item = item;
    }
    int64_t cap = opts != NULL ? opts->staging_cap_bytes : 0;
    if (cap < 0 || (cap > 0 && cap < most_item))
        return dtr__error(cap < 0 ? DTR_ERR_INVALID_ARGUMENT : DTR_ERR_UNSUPPORTED, c->func,
                          "opts->staging_cap_bytes: %lld, %s", (long long)cap,
                          cap < 0 ? "must be >= 0 (0: no cap)"
                                  : "less than one element: nothing could move");
    const char *env = getenv("DTR_CROSS_REDUCE");
    if (env != NULL && *env != '\0' && strcmp(env, "receiver") != 0 && strcmp(env, "source") != 0 &&
        strcmp(env, "auto") != 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, c->func,
                          "DTR_CROSS_REDUCE: '%s', must be auto, source or receiver", env);
    c->cost = opts != NULL ? opts->cost : NULL;
    c->cap = cap;
    if (c->cost == NULL) {
        DTR_CHECK(dtr_cost_model_from_env(model));
        c->cost = model;
    }
    return DTR_OK;
}

/*
 * Each tensor's mid (dtr__best_mid), into p->t[i], and the bytes it moves alone in dst's
 * own order into *kept (the relabeling's reference). Tensors of the same shape, dtype and
 * placements on both sides (a model's layers) share the first one's choice: one open
 * addressing table of 2n slots keyed by both specs. A tensor with no choice (no Partial
 * dims, no cast) gets src as its mid at once where the plan is not relabeled.
 */
static dtr_status_t dtr__mids(const dtr__xctx_t *c, int n, const dtr_spec_t *src,
                              const dtr_spec_t *dst, bool relabel, dtr_cross_plan_t *p,
                              int64_t *kept) {
    size_t slots = 2 * (size_t)n;
    int *slot = malloc(slots * sizeof *slot);
    int64_t *moved = malloc((size_t)n * sizeof *moved);
    if (slot == NULL || moved == NULL) {
        free(slot);
        free(moved);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, c->func, "the mids of %d tensors", n);
    }
    for (size_t k = 0; k < slots; k++) slot[k] = -1;
    dtr_status_t st = DTR_OK;
    for (int i = 0; i < n && st == DTR_OK; i++) {
        size_t k = dtr__xspec_key(&dst[i], dtr__xspec_key(&src[i], 0xcbf29ce484222325ull)) % slots;
        while (slot[k] >= 0 && !(dtr__xspec_alike(&src[slot[k]], &src[i]) &&
                                 dtr__xspec_alike(&dst[slot[k]], &dst[i])))
            k = (k + 1) % slots;
        if (slot[k] >= 0) {
            int j = slot[k];
            p->t[i] = p->t[j];
            p->t[i].src = src[i], p->t[i].dst = dst[i];
            p->t[i].mid.mesh = src[i].mesh;
            *kept += moved[i] = moved[j];
            continue;
        }
        slot[k] = i;
        if (!dtr__partial(&src[i]) && src[i].dtype == dst[i].dtype && !relabel) {
            p->t[i] = (dtr__xtensor_t){.src = src[i], .mid = src[i], .dst = dst[i]};
            moved[i] = 0;
            continue;
        }
        dtr_cross_plan_t *one = NULL;
        char name[32];
        snprintf(name, sizeof name, c->batch ? "src[%d]" : "src", i);
        st = dtr__best_mid(c, name, &src[i], &dst[i], &one);
        if (st != DTR_OK) break;
        p->t[i] = one->t[0];
        if (one->t[0].has_pre) /* (the reduction's plan now p's) */
            p->pres[p->npres++] = one->t[0].pre, one->pres[0] = NULL;
        *kept += moved[i] = one->fig.moved_bytes;
        dtr_cross_plan_destroy(one);
    }
    free(slot);
    free(moved);
    return st;
}

/* The plan of n tensors: each one's mid chosen alone, then the moves of them all together. */
static dtr_status_t dtr__create(dtr__xctx_t *c, int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                const dtr_cross_options_t *opts, dtr_cross_plan_t **out) {
    dtr_cost_model_t model;
    DTR_CHECK(dtr__check_args(c, n, src, dst, opts, &model));
    dtr_cross_plan_t *p = dtr__new_plan(n);
    if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, c->func, "a plan of %d tensors", n);
    int64_t kept_moving = 0; /* bytes moved in dst's own order */
    p->relabel = opts != NULL && opts->relabel;
    p->cap = opts != NULL ? opts->staging_cap_bytes : 0;
    dtr_status_t st = dtr__mids(c, n, src, dst, p->relabel, p, &kept_moving);
    if (st == DTR_OK) st = dtr__build(p, c->cost);
    if (st == DTR_OK && p->relabel && p->fig.moved_bytes > kept_moving) {
        /* (a greedy order on a large mesh that moves more than dst's own: keep dst's) */
        dtr_cross_plan_t *q = dtr__new_plan(n);
        st = q != NULL ? DTR_OK : dtr__error(DTR_ERR_OUT_OF_MEMORY, c->func, "a plan");
        for (int i = 0; i < n && st == DTR_OK; i++) q->t[i] = p->t[i], q->t[i].dst.mesh = dst[i].mesh;
        if (q != NULL) { /* (the reductions' plans now q's) */
            q->cap = p->cap, q->relabel = false;
            memcpy(q->pres, p->pres, sizeof *p->pres * (size_t)p->npres);
            q->npres = p->npres, p->npres = 0;
        }
        if (st == DTR_OK) st = dtr__build(q, c->cost);
        dtr_cross_plan_destroy(p);
        p = q;
        if (p != NULL) p->relabel = true;
    }
    if (st != DTR_OK) {
        dtr_cross_plan_destroy(p);
        return st;
    }
    if (p->relabel) p->fig.relabel_saved_bytes = kept_moving - p->fig.moved_bytes;
    *out = p;
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_create(const dtr_spec_t *src, const dtr_spec_t *dst,
                                   const dtr_cross_options_t *opts, dtr_cross_plan_t **out) {
    DTR_CHECK_PTR(out, __func__);
    dtr__xctx_t c = {.func = __func__, .batch = false};
    return dtr__create(&c, 1, src, dst, opts, out);
}

dtr_status_t dtr_cross_plan_create_batch(int n, const dtr_spec_t *src, const dtr_spec_t *dst,
                                         const dtr_cross_options_t *opts,
                                         dtr_cross_plan_t **out) {
    DTR_CHECK_PTR(out, __func__);
    dtr__xctx_t c = {.func = __func__, .batch = true};
    return dtr__create(&c, n, src, dst, opts, out);
}
