/*
 * The kinds of a change between meshes (cross.c): tensors whose boxes are alike (equal src,
 * mid and dst specs, summed in the same place: a model's layers of one shape) share one set
 * of boxes, planned once on the kind's first tensor. Each box of a target block T_r comes
 * from one holder of the source block C it meets: the target itself where it holds C (kept),
 * else the least loaded of C's holders so far over the kind's boxes, the largest first (ties
 * to the lowest rank); that holder's slot among C's holders is the box's slot. Tensor t of
 * the kind sends box i from holder (slot_i + turn_t * m_C) mod |holders|, turn_t its
 * instance within the kind plus the kind's index and m_C the boxes C sends per tensor, so
 * a kind's tensors, and the first ones of different kinds, take the replicas in turn: the
 * next tensor's boxes of C start where the last one's ended. One tensor alone is the greedy
 * plan itself (turn 0).
 *
 * So every rank finds its own boxes of any tensor without the others': the messages are made
 * on demand (dtr__xensure), every rank's for dtr plan, or one rank's for a run (its receives
 * by its position, its sends by its holder entry and the turn); the rounds, figures and
 * hash come from the kinds (cross_rounds.c, cross.c) without making them.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"

/* Per block, a heap of its holders by (load, rank): the least loaded on top. Loads only
 * grow, and a rank's load may grow through another block it holds (an addend's), so an
 * entry is checked when it comes to the top and pushed down again where stale. */
typedef struct {
    int64_t load;
    int rank, slot;
} dtr__hent_t;

static bool dtr__hless(const dtr__hent_t *a, const dtr__hent_t *b) {
    return a->load != b->load ? a->load < b->load : a->rank < b->rank;
}

static void dtr__hdown(dtr__hent_t *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, m = i;
        if (l < n && dtr__hless(&h[l], &h[m])) m = l;
        if (l + 1 < n && dtr__hless(&h[l + 1], &h[m])) m = l + 1;
        if (m == i) return;
        dtr__hent_t t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
}

/* The least loaded holder of a block's heap h (n entries), its load brought up to date. */
static const dtr__hent_t *dtr__hpick(dtr__hent_t *h, int64_t n, const dtr_cross_plan_t *p,
                                     const int64_t *load) {
    for (;;) {
        int64_t now = load[dtr__xpos(p, h[0].rank)];
        if (now == h[0].load) return &h[0];
        h[0].load = now;
        dtr__hdown(h, n, 0);
    }
}

/* A box's key for the greedy: larger first; then block and target, alike on every rank. */
typedef struct {
    int64_t numel, cls;
    int to;
    int64_t i;
} dtr__size_key_t;

static int dtr__cmp_size(const void *a, const void *b) {
    const dtr__size_key_t *x = a, *y = b;
    if (x->numel != y->numel) return x->numel > y->numel ? -1 : 1;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Each of the kind's boxes' slot (dtr__xkind_t.slot), greedily; the block's lack. */
static dtr_status_t dtr__slots(const dtr_cross_plan_t *p, dtr__xkind_t *k, int *slot) {
    const dtr__xblocks_t *b = &k->b;
    int64_t holders = b->first[b->nclasses], n = k->n;
    dtr__hent_t *heap = malloc(sizeof *heap * (size_t)(holders > 0 ? holders : 1));
    dtr__size_key_t *key = malloc(sizeof *key * (size_t)(n > 0 ? n : 1));
    int64_t *load = calloc((size_t)p->nranks, sizeof *load);
    if (heap == NULL || key == NULL || load == NULL) {
        free(heap), free(key), free(load);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld boxes", (long long)n);
    }
    for (int64_t c = 0; c < b->nclasses; c++) /* (ascending ranks: a heap already) */
        for (int64_t h = b->first[c]; h < b->first[c + 1]; h++)
            heap[h] = (dtr__hent_t){0, b->holder[h], (int)(h - b->first[c])};
    for (int64_t i = 0; i < n; i++) key[i] = (dtr__size_key_t){k->v[i].numel, k->v[i].cls, k->v[i].to, i};
    qsort(key, (size_t)n, sizeof *key, dtr__cmp_size);
    for (int64_t j = 0; j < n; j++) {
        const dtr__xpiece_t *x = &k->v[key[j].i];
        if (dtr__xholds(b, x->cls, x->to)) {
            slot[key[j].i] = -1;
            continue;
        }
        k->lack[x->cls] += x->numel * k->item;
        const dtr__hent_t *e = dtr__hpick(heap + b->first[x->cls], b->first[x->cls + 1] - b->first[x->cls], p, load);
        slot[key[j].i] = e->slot;
        load[dtr__xpos(p, e->rank)] += x->numel * k->item;
    }
    free(heap), free(key), free(load);
    return DTR_OK;
}

/* The boxes of the kind's first tensor (its dst set), made per target; a replicated block's
 * shared among its holders where a piece pays for its message (min_bytes: what one moves
 * in a message's start-up time). */
static dtr_status_t dtr__boxes(const dtr_cross_plan_t *p, dtr__xkind_t *k, dtr__xpieces_t *ps,
                               int64_t min_bytes) {
    const dtr__xtensor_t *x = &p->t[k->rep];
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    if (k->b.nclasses == 0) return DTR_OK;
    do {
        dtr_layout_t l;
        int to;
        dtr_spec_layout_at(&x->dst, coord, &l);
        dtr_mesh_rank_at(x->dst.mesh, coord, &to);
        int64_t at = ps->n;
        if (l.numel > 0) DTR_CHECK(dtr__xtarget_pieces(&k->b, k->rep, to, &l, ps));
        if (x->at_receiver) DTR_CHECK(dtr__xsplit_parts(ps, at, x->parts));
    } while (dtr__xcoord_next(x->dst.mesh, coord));
    return x->at_receiver ? DTR_OK : dtr__xshare(&k->b, ps, k->item, min_bytes);
}

/* The kind's indexes: its boxes by receiver position (stable), their senders' holder
 * entries, and each rank's own holder entry. */
static dtr_status_t dtr__index_kind(const dtr_cross_plan_t *p, dtr__xkind_t *k,
                                    const dtr__xpiece_t *v, const int *slot) {
    int64_t n = k->n, nr = p->nranks, holders = k->b.first[k->b.nclasses];
    k->v = malloc(sizeof *k->v * (size_t)(n > 0 ? n : 1));
    k->slot = malloc(sizeof *k->slot * (size_t)(n > 0 ? n : 1));
    k->send = malloc(sizeof *k->send * (size_t)(n > 0 ? n : 1));
    k->recv_first = calloc((size_t)nr + 1, sizeof *k->recv_first);
    k->send_first = calloc((size_t)holders + 1, sizeof *k->send_first);
    k->hold = malloc(sizeof *k->hold * (size_t)(nr > 0 ? nr : 1));
    if (!k->v || !k->slot || !k->send || !k->recv_first || !k->send_first || !k->hold)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld boxes", (long long)n);
    for (int64_t i = 0; i < n; i++) k->recv_first[dtr__xpos(p, v[i].to) + 1]++;
    for (int64_t r = 0; r < nr; r++) k->recv_first[r + 1] += k->recv_first[r];
    int64_t *at = calloc((size_t)(nr > holders ? nr : holders) + 1, sizeof *at);
    if (at == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld boxes", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = k->recv_first[dtr__xpos(p, v[i].to)] + at[dtr__xpos(p, v[i].to)]++;
        k->v[j] = v[i];
        k->slot[j] = slot[i];
    }
    memset(at, 0, sizeof *at * ((size_t)(nr > holders ? nr : holders) + 1));
    for (int64_t i = 0; i < n; i++)
        if (k->slot[i] >= 0) k->send_first[k->b.first[k->v[i].cls] + k->slot[i] + 1]++;
    for (int64_t h = 0; h < holders; h++) k->send_first[h + 1] += k->send_first[h];
    for (int64_t i = 0; i < n; i++)
        if (k->slot[i] >= 0) {
            int64_t e = k->b.first[k->v[i].cls] + k->slot[i];
            k->send[k->send_first[e] + at[e]++] = i;
        }
    free(at);
    for (int64_t r = 0; r < nr; r++) k->hold[r] = -1;
    for (int64_t e = 0; e < holders; e++) k->hold[dtr__xpos(p, k->b.holder[e])] = e;
    return DTR_OK;
}

/* The kind's boxes, their slots and indexes (the plan's ranks and dsts set). */
static dtr_status_t dtr__kind_boxes(const dtr_cross_plan_t *p, dtr__xkind_t *k,
                                    int64_t min_bytes) {
    dtr__xpieces_t ps = {0};
    int *slot = NULL;
    k->lack = calloc((size_t)k->b.nclasses + 1, sizeof *k->lack);
    dtr_status_t st = k->lack != NULL ? dtr__boxes(p, k, &ps, min_bytes)
                                      : dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "a kind");
    k->n = ps.n;
    k->v = ps.v; /* (the slots index them as made) */
    if (st == DTR_OK && (slot = malloc(sizeof *slot * (size_t)(ps.n > 0 ? ps.n : 1))) == NULL)
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld boxes", (long long)ps.n);
    if (st == DTR_OK) st = dtr__slots(p, k, slot);
    k->v = NULL;
    if (st == DTR_OK) st = dtr__index_kind(p, k, ps.v, slot);
    free(ps.v);
    free(slot);
    return st;
}

static int64_t dtr__gcd(int64_t a, int64_t b) { return b == 0 ? a : dtr__gcd(b, a % b); }

/* The kind's period and room for its variants; no period where it is over DTR__XPERIOD_MAX
 * or the kind's tensors (the variants would not repeat: its tensors are walked one by one). */
static dtr_status_t dtr__period(dtr__xkind_t *k) {
    int64_t period = 1;
    for (int64_t c = 0; c < k->b.nclasses && period > 0; c++) {
        int64_t h = k->b.first[c + 1] - k->b.first[c];
        if (h > 0) period = period / dtr__gcd(period, h) * h;
        if (period > DTR__XPERIOD_MAX || period > k->count) period = 0;
    }
    k->period = period;
    if (period == 0) return DTR_OK;
    k->vrep = malloc(sizeof *k->vrep * (size_t)period);
    k->vcount = calloc((size_t)period, sizeof *k->vcount);
    k->vlatency = malloc(sizeof *k->vlatency * (size_t)period);
    k->vstage = calloc((size_t)period, sizeof *k->vstage);
    k->vnstage = calloc((size_t)period, sizeof *k->vnstage);
    if (k->vrep == NULL || k->vcount == NULL || k->vlatency == NULL || k->vstage == NULL || k->vnstage == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "a kind's variants");
    for (int64_t v = 0; v < period; v++) k->vrep[v] = -1, k->vlatency[v] = -1;
    return DTR_OK;
}

dtr_status_t dtr__xkind_boxes(dtr_cross_plan_t *p, const dtr_cost_model_t *cost) {
    /* (the bytes a message moves in its start-up time, the least a shared piece carries) */
    double bytes = cost->alpha_us[0] * cost->bandwidth_gbps[0] * 1e3;
    int64_t min_bytes = bytes < 1 ? 1 : bytes > 1e15 ? (int64_t)1e15 : (int64_t)bytes;
    for (int j = 0; j < p->nkinds; j++) {
        dtr__xkind_t *k = &p->kinds[j];
        dtr__xtensor_t *x = &p->t[k->rep];
        if (x->at_receiver) DTR_CHECK(dtr__xblocks_part(&x->src, &k->b, &x->parts));
        DTR_CHECK(dtr__kind_boxes(p, k, min_bytes));
        DTR_CHECK(dtr__period(k));
    }
    for (int t = 0; t < p->ntensors; t++) { /* (one pass: each tensor's addends and variant) */
        dtr__xkind_t *k = &p->kinds[p->t[t].kind];
        p->t[t].parts = p->t[k->rep].parts;
        if (k->period > 0 && k->vcount[p->t[t].turn % k->period]++ == 0) k->vrep[p->t[t].turn % k->period] = t;
    }
    return DTR_OK;
}

/* Two specs that plan alike: equal meshes, dtype, shape and placements. */
bool dtr__xspec_alike(const dtr_spec_t *a, const dtr_spec_t *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) != 0 ||
        (a->mesh != b->mesh && !dtr_mesh_equal(a->mesh, b->mesh)))
        return false;
    for (int k = 0; k < dtr_mesh_ndims(a->mesh); k++)
        if (!dtr_placement_equal(a->placements[k], b->placements[k])) return false;
    return true;
}

/* A spec's hash over what dtr__spec_alike compares (the mesh by its sizes). */
uint64_t dtr__xspec_key(const dtr_spec_t *a, uint64_t h) {
    int m = dtr_mesh_ndims(a->mesh);
    uint64_t v[2 + DTR_MAX_TENSOR_DIMS + 3 * DTR_MAX_MESH_DIMS];
    int k = 0;
    v[k++] = (uint64_t)a->dtype;
    v[k++] = (uint64_t)a->ndim;
    for (int d = 0; d < a->ndim; d++) v[k++] = (uint64_t)a->shape[d];
    for (int i = 0; i < m; i++) {
        const dtr_placement_t *q = &a->placements[i];
        v[k++] = (uint64_t)dtr_mesh_size(a->mesh, i);
        v[k++] = ((uint64_t)q->kind << 48) ^ ((uint64_t)(uint32_t)q->dim << 16) ^ (uint64_t)q->op;
        v[k++] = ((uint64_t)(uint32_t)q->order << 32) ^ (uint64_t)(uint32_t)q->split_factor;
    }
    for (int j = 0; j < k; j++) h = (h ^ v[j]) * 0x100000001b3ull;
    return h;
}

/* Tensors whose boxes are alike: equal src, mid and dst, summed in the same place. */
static bool dtr__alike(const dtr__xtensor_t *a, const dtr__xtensor_t *b) {
    return a->at_receiver == b->at_receiver && dtr__xspec_alike(&a->src, &b->src) &&
           dtr__xspec_alike(&a->mid, &b->mid) && dtr__xspec_alike(&a->dst, &b->dst);
}

dtr_status_t dtr__xkinds(dtr_cross_plan_t *p) {
    int n = p->ntensors;
    size_t slots = 2 * (size_t)n;
    int *slot = malloc(slots * sizeof *slot);
    p->kinds = calloc((size_t)n, sizeof *p->kinds);
    if (slot == NULL || p->kinds == NULL) {
        free(slot);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "the kinds of %d tensors", n);
    }
    for (size_t s = 0; s < slots; s++) slot[s] = -1;
    for (int t = 0; t < n; t++) { /* open addressing over the three specs */
        dtr__xtensor_t *x = &p->t[t];
        uint64_t key = dtr__xspec_key(&x->src, dtr__xspec_key(&x->mid, dtr__xspec_key(&x->dst, 0xcbf29ce484222325ull)));
        size_t s = (key ^ (uint64_t)x->at_receiver) % slots;
        while (slot[s] >= 0 && !dtr__alike(&p->t[p->kinds[slot[s]].rep], x)) s = (s + 1) % slots;
        if (slot[s] < 0) {
            slot[s] = p->nkinds;
            p->kinds[p->nkinds++] = (dtr__xkind_t){.rep = t, .item = dtr_dtype_info(x->dst.dtype)->size};
        }
        dtr__xkind_t *k = &p->kinds[slot[s]];
        x->kind = slot[s];
        x->turn = k->count++ + slot[s];
    }
    free(slot);
    for (int j = 0; j < p->nkinds; j++) DTR_CHECK(dtr__xblocks(&p->t[p->kinds[j].rep].mid, &p->kinds[j].b));
    return DTR_OK;
}

void dtr__xkinds_free(dtr_cross_plan_t *p) {
    for (int j = 0; p->kinds != NULL && j < p->nkinds; j++) {
        dtr__xkind_t *k = &p->kinds[j];
        dtr__xblocks_free(&k->b);
        free(k->v), free(k->slot), free(k->recv_first), free(k->send), free(k->send_first);
        free(k->hold), free(k->lack), free(k->vrep), free(k->vcount), free(k->vlatency);
        for (int64_t v = 0; k->vstage != NULL && v < k->period; v++) free(k->vstage[v]);
        free(k->vstage), free(k->vnstage);
    }
    free(p->kinds);
    p->kinds = NULL;
    p->nkinds = 0;
}

/* Where rank (at position q) sends from for tensor t: its boxes [*a, *z) in the kind's send[]. */
static void dtr__sends_of(const dtr_cross_plan_t *p, int t, int q, int64_t *a, int64_t *z) {
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    int64_t e = k->hold[q];
    *a = *z = 0;
    if (e < 0) return;
    int64_t lo = 0, hi = k->b.nclasses; /* the block of entry e: first[c] <= e < first[c + 1] */
    while (lo + 1 < hi) {
        int64_t m = (lo + hi) / 2;
        if (k->b.first[m] <= e) lo = m;
        else hi = m;
    }
    int64_t f = k->b.first[lo], h = k->b.first[lo + 1] - f;
    int64_t s = ((e - f) - dtr__xshift(k, lo, p->t[t].turn) + h) % h;
    *a = k->send_first[f + s];
    *z = k->send_first[f + s + 1];
}

void dtr__xrank_bytes(const dtr_cross_plan_t *p, int rank, int64_t *send, int64_t *recv) {
    *send = *recv = 0;
    if (rank < 0 || p->nranks == 0 || rank > p->ranks[p->nranks - 1] || p->pos[rank] < 0) return;
    int q = p->pos[rank];
    for (int t = 0; t < p->ntensors; t++) {
        const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
        int64_t a, z;
        for (int64_t i = k->recv_first[q]; i < k->recv_first[q + 1]; i++)
            if (k->slot[i] >= 0) *recv += k->v[i].numel * k->item;
        dtr__sends_of(p, t, q, &a, &z);
        for (int64_t j = a; j < z; j++) *send += k->v[k->send[j]].numel * k->item;
    }
}

static void dtr__xemit(const dtr_cross_plan_t *p, int t, int64_t i, dtr__xmsg_t *m) {
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    const dtr__xpiece_t *x = &k->v[i];
    *m = (dtr__xmsg_t){.tensor = t, .round = p->t[t].round, .from = dtr__xsender(p, t, i),
                       .to = x->to, .part = x->part, .bytes = x->numel * k->item};
    memcpy(m->lo, x->lo, sizeof m->lo);
    memcpy(m->ext, x->ext, sizeof m->ext);
}

/* The messages of every rank (rank < 0) or of one (its receives and kept boxes, then its
 * sends), each in its tensor's round; not indexed. */
static dtr_status_t dtr__make(dtr_cross_plan_t *p, int rank) {
    int q = rank < 0 || p->nranks == 0 || rank > p->ranks[p->nranks - 1] ? -1 : p->pos[rank];
    int64_t n = 0, a, z;
    for (int t = 0; t < p->ntensors; t++) {
        const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
        if (rank < 0) {
            n += k->n;
        } else if (q >= 0) {
            dtr__sends_of(p, t, q, &a, &z);
            n += k->recv_first[q + 1] - k->recv_first[q] + z - a;
        }
    }
    p->msgs = malloc(sizeof *p->msgs * (size_t)(n > 0 ? n : 1));
    if (p->msgs == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)n);
    p->nmsgs = n;
    n = 0;
    for (int t = 0; t < p->ntensors; t++) {
        const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
        if (rank < 0) {
            for (int64_t i = 0; i < k->n; i++) dtr__xemit(p, t, i, &p->msgs[n++]);
        } else if (q >= 0) {
            for (int64_t i = k->recv_first[q]; i < k->recv_first[q + 1]; i++) dtr__xemit(p, t, i, &p->msgs[n++]);
            dtr__sends_of(p, t, q, &a, &z);
            for (int64_t j = a; j < z; j++) dtr__xemit(p, t, k->send[j], &p->msgs[n++]);
        }
    }
    return DTR_OK;
}

/* By round, sender, receiver, tensor, then the box's corner. */
static int dtr__cmp_msg(const void *a, const void *b) {
    const dtr__xmsg_t *x = a, *y = b;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++)
        if (x->lo[d] != y->lo[d]) return x->lo[d] < y->lo[d] ? -1 : 1;
    return 0;
}

typedef struct {
    int round, to, from;
    int64_t k;
} dtr__to_key_t;

static int dtr__cmp_to_key(const void *a, const void *b) {
    const dtr__to_key_t *x = a, *y = b;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* Sorts n items of `size` at v with cmp; where they are already in round order (rounds[i]:
 * item i's round, ascending), each round's run alone (less time, and a merge sort's scratch
 * of one round's size, not the whole plan's). */
static void dtr__sort_rounds(void *v, int64_t n, size_t size, int (*cmp)(const void *, const void *),
                             const int64_t *round_first, int nrounds, bool in_order) {
    if (!in_order) {
        qsort(v, (size_t)n, size, cmp);
        return;
    }
    for (int r = 0; r < nrounds; r++)
        qsort((char *)v + (size_t)round_first[r] * size, (size_t)(round_first[r + 1] - round_first[r]),
              size, cmp);
}

dtr_status_t dtr__xindex(dtr_cross_plan_t *p) {
    int64_t n = p->nmsgs;
    bool in_order = true;
    p->by_to = malloc(sizeof *p->by_to * (size_t)(n > 0 ? n : 1));
    p->round_first = calloc((size_t)p->nrounds + 1, sizeof *p->round_first);
    dtr__to_key_t *key = malloc(sizeof *key * (size_t)(n > 0 ? n : 1));
    if (p->by_to == NULL || p->round_first == NULL || key == NULL) {
        free(key);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)n);
    }
    for (int64_t k = 0; k < n; k++) {
        p->round_first[p->msgs[k].round + 1]++;
        in_order &= k == 0 || p->msgs[k - 1].round <= p->msgs[k].round;
    }
    for (int r = 0; r < p->nrounds; r++) p->round_first[r + 1] += p->round_first[r];
    dtr__sort_rounds(p->msgs, n, sizeof *p->msgs, dtr__cmp_msg, p->round_first, p->nrounds, in_order);
    for (int64_t k = 0; k < n; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        key[k] = (dtr__to_key_t){m->round, m->to, m->from, k};
    }
    dtr__sort_rounds(key, n, sizeof *key, dtr__cmp_to_key, p->round_first, p->nrounds, true);
    for (int64_t k = 0; k < n; k++) p->by_to[k] = key[k].k;
    free(key);
    return DTR_OK;
}

/* Makes the messages (and their indexes) anew for `rank`; the old ones freed. */
dtr_status_t dtr__xmake(dtr_cross_plan_t *p, int rank) {
    free(p->msgs), free(p->by_to), free(p->round_first);
    p->msgs = NULL, p->by_to = NULL, p->round_first = NULL, p->nmsgs = 0;
    p->msgs_for = -2;
    DTR_CHECK(dtr__make(p, rank));
    DTR_CHECK(dtr__xindex(p));
    p->msgs_for = rank < 0 ? -1 : rank;
    return DTR_OK;
}

/* (A plan whose messages are one rank's and that another rank then runs, threads of a
 * process sharing it as different ranks, gets every rank's instead: made while no call of
 * the first rank is in flight, as a plan is used by one rank per process.) */
dtr_status_t dtr__xensure(const dtr_cross_plan_t *plan, int rank) {
    dtr_cross_plan_t *p = (dtr_cross_plan_t *)plan;
    pthread_mutex_lock(&p->lock);
    dtr_status_t st = DTR_OK;
    if (p->msgs_for != -1 && (rank < 0 || p->msgs_for != rank))
        st = dtr__xmake(p, p->msgs_for == -2 ? rank : -1);
    pthread_mutex_unlock(&p->lock);
    return st;
}
