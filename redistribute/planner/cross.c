/*
 * Changes between two meshes (dtr_cross_plan_create): a source spec on mesh A (its ranks
 * RA) to a destination spec on mesh B (RB), the same global shape, both within one
 * communicator. The plan is two parts:
 *
 *   1. where the source has Partial mesh dims (or another dtype than the destination), a
 *      single-mesh plan on A turns it into `mid`, a layout without Partial dims in the
 *      destination's dtype: the reduction runs among the source ranks, before anything
 *      crosses meshes (each candidate of mid is costed, below);
 *   2. messages: for every destination rank r and every distinct block C of mid that meets
 *      r's target block T_r, the box T_r ∩ C goes from one holder of C to r. Where r itself
 *      holds C (a rank in both meshes) the box stays (a local copy); otherwise the holder is
 *      the least loaded of C's replicas so far, the largest boxes placed first.
 *
 * The blocks of a layout without Partial dims are the products of per-tensor-dim intervals
 * (each mesh dim shards one tensor dim at most), so the distinct blocks of mid are found
 * from A's ranks once, and a target block meets the blocks whose intervals meet its own on
 * every dim (binary searches): the cost grows with the ranks and the messages, not with the
 * elements. docs/cross-mesh.md has the rules and the bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"

/* The per-dim intervals of a layout's blocks and, per distinct block, its holders. */
typedef struct {
    int ndim;
    int64_t n[DTR_MAX_TENSOR_DIMS];            /* intervals along each dim */
    int64_t *lo[DTR_MAX_TENSOR_DIMS], *len[DTR_MAX_TENSOR_DIMS]; /* sorted by lo */
    int64_t nclasses;                          /* product of n[] */
    int64_t *first;                            /* per class: its holders' start in holder[] */
    int *holder;                               /* ranks, grouped by class, ascending */
} dtr__blocks_t;

static void dtr__blocks_free(dtr__blocks_t *b) {
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++) {
        free(b->lo[d]);
        free(b->len[d]);
    }
    free(b->first);
    free(b->holder);
    memset(b, 0, sizeof *b);
}

/* Steps coord through the mesh row-major; false after the last. */
static bool dtr__coord_next(const dtr_mesh_t *mesh, int64_t *coord) {
    for (int i = dtr_mesh_ndims(mesh) - 1; i >= 0; i--) {
        if (++coord[i] < dtr_mesh_size(mesh, i)) return true;
        coord[i] = 0;
    }
    return false;
}

static int dtr__cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int dtr__cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Index of the interval starting at lo along dim d (it exists). */
static int64_t dtr__interval(const dtr__blocks_t *b, int d, int64_t lo) {
    int64_t a = 0, z = b->n[d] - 1;
    while (a < z) {
        int64_t m = (a + z) / 2;
        if (b->lo[d][m] < lo)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

/* The class (mixed-radix index of its intervals) of a non-empty block. */
static int64_t dtr__class_of(const dtr__blocks_t *b, const dtr_layout_t *l) {
    int64_t c = 0;
    for (int d = 0; d < b->ndim; d++) c = c * b->n[d] + dtr__interval(b, d, l->global_offset[d]);
    return c;
}

/* The distinct non-empty intervals along each dim of spec's blocks, over every rank. */
static dtr_status_t dtr__intervals(const dtr_spec_t *spec, dtr__blocks_t *b) {
    int64_t nranks = dtr_mesh_nranks(spec->mesh), coord[DTR_MAX_MESH_DIMS] = {0};
    b->ndim = spec->ndim;
    int64_t *starts = malloc(sizeof *starts * (size_t)(nranks > 0 ? nranks : 1));
    if (starts == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld ranks", (long long)nranks);
    dtr_status_t st = DTR_OK;
    for (int d = 0; d < spec->ndim && st == DTR_OK; d++) {
        int64_t k = 0;
        memset(coord, 0, sizeof coord);
        do {
            dtr_layout_t l;
            dtr_spec_layout_at(spec, coord, &l);
            if (l.numel > 0) starts[k++] = l.global_offset[d];
        } while (dtr__coord_next(spec->mesh, coord));
        qsort(starts, (size_t)k, sizeof *starts, dtr__cmp_i64);
        int64_t m = 0;
        for (int64_t j = 0; j < k; j++)
            if (m == 0 || starts[j] != starts[m - 1]) starts[m++] = starts[j];
        b->n[d] = m;
        b->lo[d] = malloc(sizeof *b->lo[d] * (size_t)(m > 0 ? m : 1));
        b->len[d] = malloc(sizeof *b->len[d] * (size_t)(m > 0 ? m : 1));
        if (b->lo[d] == NULL || b->len[d] == NULL) {
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "intervals of dim %d", d);
            break;
        }
        /* the intervals of a layout tile the dim: each ends where the next starts */
        for (int64_t j = 0; j < m; j++) {
            b->lo[d][j] = starts[j];
            b->len[d][j] = (j + 1 < m ? starts[j + 1] : spec->shape[d]) - starts[j];
        }
    }
    free(starts);
    return st;
}

/* Every distinct block of spec and its holders (ranks of its mesh, ascending). */
static dtr_status_t dtr__blocks(const dtr_spec_t *spec, dtr__blocks_t *b) {
    memset(b, 0, sizeof *b);
    DTR_CHECK(dtr__intervals(spec, b));
    int64_t nranks = dtr_mesh_nranks(spec->mesh), coord[DTR_MAX_MESH_DIMS] = {0};
    b->nclasses = 1;
    for (int d = 0; d < spec->ndim; d++) b->nclasses *= b->n[d];
    b->first = calloc((size_t)b->nclasses + 1, sizeof *b->first);
    b->holder = malloc(sizeof *b->holder * (size_t)(nranks > 0 ? nranks : 1));
    int64_t *cls = malloc(sizeof *cls * (size_t)(nranks > 0 ? nranks : 1));
    if (b->first == NULL || b->holder == NULL || cls == NULL) {
        free(cls);
        dtr__blocks_free(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "blocks of %lld ranks", (long long)nranks);
    }
    /* counting sort of the ranks by class: counts, starts, then each rank in its place */
    int64_t p = 0;
    do {
        dtr_layout_t l;
        dtr_spec_layout_at(spec, coord, &l);
        cls[p] = l.numel > 0 ? dtr__class_of(b, &l) : -1;
        if (cls[p] >= 0) b->first[cls[p] + 1]++;
        p++;
    } while (dtr__coord_next(spec->mesh, coord));
    for (int64_t c = 0; c < b->nclasses; c++) b->first[c + 1] += b->first[c];
    int64_t *at = calloc((size_t)b->nclasses + 1, sizeof *at);
    if (at == NULL) {
        free(cls);
        dtr__blocks_free(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "blocks of %lld ranks", (long long)nranks);
    }
    memset(coord, 0, sizeof coord);
    p = 0;
    do {
        if (cls[p] >= 0) dtr_mesh_rank_at(spec->mesh, coord, &b->holder[b->first[cls[p]] + at[cls[p]]++]);
        p++;
    } while (dtr__coord_next(spec->mesh, coord));
    for (int64_t c = 0; c < b->nclasses; c++) /* ascending ranks: the same order everywhere */
        qsort(b->holder + b->first[c], (size_t)(b->first[c + 1] - b->first[c]), sizeof *b->holder,
              dtr__cmp_int);
    free(at);
    free(cls);
    return DTR_OK;
}

/* A box of a target block that one holder sends (or, from = to, keeps). */
typedef struct {
    int from, to;
    int64_t cls; /* the source block it comes from */
    int64_t numel;
    int64_t lo[DTR_MAX_TENSOR_DIMS], ext[DTR_MAX_TENSOR_DIMS];
} dtr__piece_t;

typedef struct {
    dtr__piece_t *v;
    int64_t n, cap;
} dtr__pieces_t;

static dtr_status_t dtr__piece_push(dtr__pieces_t *p, const dtr__piece_t *x) {
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        dtr__piece_t *v = realloc(p->v, sizeof *v * (size_t)cap);
        if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)cap);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = *x;
    return DTR_OK;
}

/* The first interval along d that ends after x (the one holding x). */
static int64_t dtr__interval_at(const dtr__blocks_t *b, int d, int64_t x) {
    int64_t a = 0, z = b->n[d];
    while (a < z) {
        int64_t m = (a + z) / 2;
        if (b->lo[d][m] + b->len[d][m] <= x)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

/* The boxes of target block t (on rank `to`) that the source blocks meet, one per block. */
static dtr_status_t dtr__target_pieces(const dtr__blocks_t *b, int to, const dtr_layout_t *t,
                                       dtr__pieces_t *out) {
    int nd = b->ndim;
    int64_t first[DTR_MAX_TENSOR_DIMS], last[DTR_MAX_TENSOR_DIMS], at[DTR_MAX_TENSOR_DIMS];
    for (int d = 0; d < nd; d++) {
        first[d] = at[d] = dtr__interval_at(b, d, t->global_offset[d]);
        last[d] = dtr__interval_at(b, d, t->global_offset[d] + t->local_shape[d] - 1);
    }
    for (;;) {
        dtr__piece_t x = {.from = -1, .to = to, .cls = 0, .numel = 1};
        for (int d = 0; d < nd; d++) {
            int64_t lo = b->lo[d][at[d]], hi = lo + b->len[d][at[d]];
            int64_t tlo = t->global_offset[d], thi = tlo + t->local_shape[d];
            x.lo[d] = lo > tlo ? lo : tlo;
            x.ext[d] = (hi < thi ? hi : thi) - x.lo[d];
            x.numel *= x.ext[d];
            x.cls = x.cls * b->n[d] + at[d];
        }
        DTR_CHECK(dtr__piece_push(out, &x));
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++at[d] <= last[d]) break;
            at[d] = first[d];
        }
        if (d < 0) return DTR_OK;
    }
}

static bool dtr__holds(const dtr__blocks_t *b, int64_t cls, int rank) {
    const int *h = b->holder + b->first[cls];
    return bsearch(&rank, h, (size_t)(b->first[cls + 1] - b->first[cls]), sizeof *h,
                   dtr__cmp_int) != NULL;
}

/* Larger boxes first; then by block and target, so every rank orders them alike. */
static int dtr__cmp_piece_size(const void *a, const void *b) {
    const dtr__piece_t *x = a, *y = b;
    if (x->numel != y->numel) return x->numel > y->numel ? -1 : 1;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* By sender, then receiver, then box: the order the plan keeps its messages in. */
static int dtr__cmp_piece_from(const void *a, const void *b) {
    const dtr__piece_t *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return x->cls < y->cls ? -1 : x->cls > y->cls;
}

/* The position of rank r in the sorted union (it is there). */
static int dtr__union_at(const dtr_cross_plan_t *p, int r) {
    const int *at = bsearch(&r, p->ranks, (size_t)p->nranks, sizeof *p->ranks, dtr__cmp_int);
    return (int)(at - p->ranks);
}

/* Each piece's sender: the target itself where it holds the block, else the least loaded of
 * the block's holders so far (the largest pieces first, ties to the lowest rank). */
static void dtr__assign(const dtr__blocks_t *b, dtr__pieces_t *ps, const dtr_cross_plan_t *p,
                        int64_t *load) {
    if (ps->n == 0) return;
    qsort(ps->v, (size_t)ps->n, sizeof *ps->v, dtr__cmp_piece_size);
    for (int64_t k = 0; k < ps->n; k++) {
        dtr__piece_t *x = &ps->v[k];
        if (dtr__holds(b, x->cls, x->to)) {
            x->from = x->to;
            continue;
        }
        for (int64_t h = b->first[x->cls]; h < b->first[x->cls + 1]; h++) {
            int r = b->holder[h];
            if (x->from < 0 || load[dtr__union_at(p, r)] < load[dtr__union_at(p, x->from)])
                x->from = r;
        }
        load[dtr__union_at(p, x->from)] += x->numel;
    }
    qsort(ps->v, (size_t)ps->n, sizeof *ps->v, dtr__cmp_piece_from);
}

/* RA and RB together, ascending, into p->ranks. */
static dtr_status_t dtr__union(dtr_cross_plan_t *p) {
    int64_t na = dtr_mesh_nranks(p->src.mesh), nb = dtr_mesh_nranks(p->dst.mesh);
    int *r = malloc(sizeof *r * (size_t)(na + nb));
    if (r == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld ranks", (long long)(na + nb));
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, n = 0;
    do dtr_mesh_rank_at(p->src.mesh, coord, &r[n++]);
    while (dtr__coord_next(p->src.mesh, coord));
    memset(coord, 0, sizeof coord);
    do dtr_mesh_rank_at(p->dst.mesh, coord, &r[n++]);
    while (dtr__coord_next(p->dst.mesh, coord));
    qsort(r, (size_t)n, sizeof *r, dtr__cmp_int);
    int m = 0;
    for (int64_t k = 0; k < n; k++)
        if (m == 0 || r[k] != r[m - 1]) r[m++] = r[k];
    p->ranks = r;
    p->nranks = m;
    return DTR_OK;
}

typedef struct {
    int to, from;
    int64_t k;
} dtr__to_key_t;

static int dtr__cmp_to_key(const void *a, const void *b) {
    const dtr__to_key_t *x = a, *y = b;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* p->by_to: the messages by receiver, then sender (then their place by sender). */
static dtr_status_t dtr__cross_sort_by_to(dtr_cross_plan_t *p) {
    dtr__to_key_t *key = malloc(sizeof *key * (size_t)(p->nmsgs > 0 ? p->nmsgs : 1));
    if (key == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)p->nmsgs);
    for (int64_t k = 0; k < p->nmsgs; k++) key[k] = (dtr__to_key_t){p->msgs[k].to, p->msgs[k].from, k};
    qsort(key, (size_t)p->nmsgs, sizeof *key, dtr__cmp_to_key);
    for (int64_t k = 0; k < p->nmsgs; k++) p->by_to[k] = key[k].k;
    free(key);
    return DTR_OK;
}

/* The figures of the messages (per rank bytes and peers, the bounds) and the modeled time. */
static dtr_status_t dtr__cross_figures(dtr_cross_plan_t *p, const dtr__blocks_t *b,
                                       const dtr__pieces_t *ps, const dtr_cost_model_t *cost) {
    int64_t item = dtr_dtype_info(p->dst.dtype)->size, n = p->nranks;
    int64_t *v = calloc((size_t)(4 * n + b->nclasses + 1), sizeof *v);
    if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "figures of %lld ranks", (long long)n);
    int64_t *send = v, *recv = v + n, *speers = v + 2 * n, *rpeers = v + 3 * n, *need = v + 4 * n;
    dtr_cross_figures_t f = {0};
    for (int64_t k = 0; k < ps->n; k++) {
        const dtr__piece_t *x = &ps->v[k];
        if (x->from == x->to) continue;
        int a = dtr__union_at(p, x->from), z = dtr__union_at(p, x->to);
        send[a] += x->numel * item;
        recv[z] += x->numel * item;
        need[x->cls] += x->numel * item;
        f.messages++;
        f.moved_bytes += x->numel * item;
        /* (sorted by sender, then receiver: a new receiver of this sender is a new peer) */
        if (k == 0 || ps->v[k - 1].from != x->from || ps->v[k - 1].to != x->to) speers[a]++;
    }
    for (int64_t k = 0; k < p->nmsgs; k++) { /* peers that send to a rank, through by_to */
        const dtr__xmsg_t *m = &p->msgs[p->by_to[k]], *prev = k ? &p->msgs[p->by_to[k - 1]] : NULL;
        if (m->from != m->to && (prev == NULL || prev->to != m->to || prev->from != m->from))
            rpeers[dtr__union_at(p, m->to)]++;
    }
    int64_t peers = 0;
    for (int64_t r = 0; r < n; r++) {
        if (send[r] > f.send_bytes_max) f.send_bytes_max = send[r];
        if (recv[r] > f.recv_bytes_max) f.recv_bytes_max = recv[r];
        if (send[r] + recv[r] > f.peak_extra_bytes) f.peak_extra_bytes = send[r] + recv[r];
        if (speers[r] > peers) peers = speers[r];
        if (rpeers[r] > peers) peers = rpeers[r];
    }
    /* every element a target lacks comes from some holder of its block: the busiest of a
     * block's holders sends at least its share of what the block's targets lack */
    for (int64_t c = 0; c < b->nclasses; c++) {
        int64_t h = b->first[c + 1] - b->first[c], share = h > 0 ? (need[c] / item + h - 1) / h * item : 0;
        if (share > f.lower_bound_send_bytes) f.lower_bound_send_bytes = share;
    }
    /* each target receives its block less the box it holds itself, whoever sends */
    f.lower_bound_recv_bytes = f.recv_bytes_max;
    f.time_us = (double)peers * cost->alpha_us[0] +
                (double)(f.send_bytes_max > f.recv_bytes_max ? f.send_bytes_max : f.recv_bytes_max) /
                    (cost->bandwidth_gbps[0] * 1e3) +
                (double)f.peak_extra_bytes / (cost->local_gbps * 1e3);
    if (p->has_pre) {
        dtr_layout_t l;
        int64_t zero[DTR_MAX_MESH_DIMS] = {0};
        dtr_spec_layout_at(&p->mid, zero, &l); /* (coordinate 0's block is the largest) */
        f.pre_steps = p->pre.nsteps;
        f.time_us += p->pre.time_us;
        int64_t pre_peak = p->pre.peak_extra_bytes + l.bytes;
        if (pre_peak > f.peak_extra_bytes) f.peak_extra_bytes = pre_peak;
    }
    p->fig = f;
    free(v);
    return DTR_OK;
}

/* The messages from mid's blocks (p->mid set) to dst's: pieces, senders, figures. */
static dtr_status_t dtr__cross_moves(dtr_cross_plan_t *p, const dtr_cost_model_t *cost) {
    dtr__blocks_t b;
    DTR_CHECK(dtr__blocks(&p->mid, &b));
    dtr__pieces_t ps = {0};
    int64_t *load = calloc((size_t)p->nranks, sizeof *load);
    dtr_status_t st = load != NULL ? DTR_OK : dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "loads");
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    if (b.nclasses > 0)
        do {
            dtr_layout_t t;
            int to;
            dtr_spec_layout_at(&p->dst, coord, &t);
            dtr_mesh_rank_at(p->dst.mesh, coord, &to);
            if (st == DTR_OK && t.numel > 0) st = dtr__target_pieces(&b, to, &t, &ps);
        } while (dtr__coord_next(p->dst.mesh, coord));
    if (st == DTR_OK) {
        dtr__assign(&b, &ps, p, load);
        p->msgs = malloc(sizeof *p->msgs * (size_t)(ps.n > 0 ? ps.n : 1));
        p->by_to = malloc(sizeof *p->by_to * (size_t)(ps.n > 0 ? ps.n : 1));
        if (p->msgs == NULL || p->by_to == NULL)
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)ps.n);
    }
    if (st == DTR_OK) {
        int64_t item = dtr_dtype_info(p->dst.dtype)->size;
        p->nmsgs = ps.n;
        for (int64_t k = 0; k < ps.n; k++) {
            dtr__xmsg_t *m = &p->msgs[k];
            memset(m, 0, sizeof *m);
            m->from = ps.v[k].from;
            m->to = ps.v[k].to;
            memcpy(m->lo, ps.v[k].lo, sizeof m->lo);
            memcpy(m->ext, ps.v[k].ext, sizeof m->ext);
            m->bytes = ps.v[k].numel * item;
            p->by_to[k] = k;
        }
        st = dtr__cross_sort_by_to(p);
        if (st == DTR_OK) st = dtr__cross_figures(p, &b, &ps, cost);
    }
    free(load);
    free(ps.v);
    dtr__blocks_free(&b);
    return st;
}

void dtr_cross_plan_destroy(dtr_cross_plan_t *plan) {
    if (plan == NULL) return;
    free(plan->msgs);
    free(plan->by_to);
    free(plan->ranks);
    free(plan);
}

static uint64_t dtr__spec_hash(uint64_t h, const dtr_spec_t *s) {
    h = dtr__fnv(h, (int64_t)dtr__mesh_hash(s->mesh));
    h = dtr__fnv(dtr__fnv(h, s->ndim), s->dtype);
    for (int d = 0; d < s->ndim; d++) h = dtr__fnv(h, s->shape[d]);
    for (int i = 0; i < dtr_mesh_ndims(s->mesh); i++) {
        dtr_placement_t q = s->placements[i];
        int64_t detail = q.kind == DTR_SHARD ? (int64_t)q.dim : (int64_t)q.op;
        h = dtr__fnv(dtr__fnv(dtr__fnv(h, q.kind), detail), q.order);
    }
    return h;
}

/* A plan for one choice of mid (src itself, or src reduced on its mesh to mid's
 * placements in dst's dtype): *out, or an error (the pre plan's refusal). */
static dtr_status_t dtr__cross_with(const dtr_spec_t *src, const dtr_spec_t *mid,
                                    const dtr_spec_t *dst, const dtr_cost_model_t *cost,
                                    dtr_cross_plan_t **out) {
    dtr_cross_plan_t *p = calloc(1, sizeof *p);
    if (p == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "a plan");
    p->src = *src;
    p->mid = *mid;
    p->dst = *dst;
    dtr_status_t st = DTR_OK;
    p->has_pre = mid != src;
    if (p->has_pre) {
        dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = cost};
        st = dtr_plan_create(src, mid, &opts, &p->pre);
    }
    if (st == DTR_OK) st = dtr__union(p);
    if (st == DTR_OK) st = dtr__cross_moves(p, cost);
    if (st != DTR_OK) {
        dtr_cross_plan_destroy(p);
        return st;
    }
    uint64_t h = dtr__spec_hash(dtr__spec_hash(0x63726f7373ull, src), dst);
    h = dtr__fnv(h, p->has_pre ? (int64_t)dtr__plan_hash(&p->pre) : 0);
    h = dtr__fnv(h, p->nmsgs);
    for (int64_t k = 0; k < p->nmsgs; k++)
        h = dtr__fnv(dtr__fnv(dtr__fnv(h, p->msgs[k].from), p->msgs[k].to), p->msgs[k].bytes);
    p->hash = h;
    *out = p;
    return DTR_OK;
}

static dtr_status_t dtr__cross_check(const dtr_spec_t *src, const dtr_spec_t *dst) {
    DTR_CHECK(dtr__check_spec(src, "src", DTR__FUNC));
    DTR_CHECK(dtr__check_spec(dst, "dst", DTR__FUNC));
    char a[256], b[256];
    if (src->ndim != dst->ndim ||
        memcmp(src->shape, dst->shape, (size_t)src->ndim * sizeof(int64_t)) != 0) {
        dtr_shape_format(src->shape, src->ndim, a, sizeof a);
        dtr_shape_format(dst->shape, dst->ndim, b, sizeof b);
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, DTR__FUNC, "dst: shape %s differs from src's %s",
                          b, a);
    }
    if (!dtr__castable(src->dtype, dst->dtype))
        return dtr__error(DTR_ERR_UNSUPPORTED, DTR__FUNC,
                          "dst: dtype %s from src's %s: a redistribution casts between float "
                          "dtypes (f32 f64 f16 bf16) or between complex ones (c64 c128)",
                          dtr_dtype_name(dst->dtype), dtr_dtype_name(src->dtype));
    for (int i = 0; i < dtr_mesh_ndims(dst->mesh); i++)
        if (dst->placements[i].kind == DTR_PARTIAL) {
            dtr_placement_format(dst->placements[i], a, sizeof a);
            return dtr__error(DTR_ERR_UNSUPPORTED, DTR__FUNC,
                              "dst: placements[%d] is %s: a change between meshes ends in Shard "
                              "or Replicate (make it Partial on the destination mesh afterwards)",
                              i, a);
        }
    return DTR_OK;
}

/* a better than b: less modeled time; then fewer bytes moved. */
static bool dtr__cross_better(const dtr_cross_plan_t *a, const dtr_cross_plan_t *b) {
    if (a->fig.time_us != b->fig.time_us) return a->fig.time_us < b->fig.time_us;
    return a->fig.moved_bytes < b->fig.moved_bytes;
}

dtr_status_t dtr_cross_plan_create(const dtr_spec_t *src, const dtr_spec_t *dst,
                                   const dtr_cross_options_t *opts, dtr_cross_plan_t **out) {
    DTR_CHECK_PTR(out, DTR__FUNC);
    DTR_CHECK(dtr__cross_check(src, dst));
    dtr_cost_model_t model;
    const dtr_cost_model_t *cost = opts != NULL ? opts->cost : NULL;
    if (cost == NULL) {
        DTR_CHECK(dtr_cost_model_from_env(&model));
        cost = &model;
    }
    int m = dtr_mesh_ndims(src->mesh);
    bool partial = false;
    for (int i = 0; i < m; i++) partial |= src->placements[i].kind == DTR_PARTIAL;
    if (!partial && src->dtype == dst->dtype) return dtr__cross_with(src, src, dst, cost, out);
    /* mid: the Partial dims reduced to R, or to S(d) for each tensor dim d (a
     * reduce-scatter moves less, and the shards then move less again); each costed */
    dtr_cross_plan_t *best = NULL;
    dtr_status_t first = DTR_OK;
    char why[512] = "";
    for (int d = -1; d < (partial ? src->ndim : 0); d++) {
        dtr_placement_t pl[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < m; i++)
            pl[i] = src->placements[i].kind != DTR_PARTIAL ? src->placements[i]
                    : d < 0                                 ? dtr_replicate()
                                                            : dtr_shard(d);
        dtr_spec_t mid;
        dtr_cross_plan_t *p = NULL;
        dtr_status_t st = dtr_spec_init(&mid, src->mesh, pl, m, src->shape, src->ndim, dst->dtype);
        if (st == DTR_OK) st = dtr__cross_with(src, &mid, dst, cost, &p);
        if (st != DTR_OK) {
            if (first == DTR_OK) {
                first = st;
                snprintf(why, sizeof why, "%s", dtr_last_error());
            }
            continue;
        }
        if (best == NULL || dtr__cross_better(p, best)) {
            dtr_cross_plan_destroy(best);
            best = p;
        } else {
            dtr_cross_plan_destroy(p);
        }
    }
    if (best == NULL)
        return dtr__error(first, DTR__FUNC, "the reduction on src's mesh: %s", why);
    *out = best;
    return DTR_OK;
}

dtr_status_t dtr_cross_plan_figures(const dtr_cross_plan_t *plan, dtr_cross_figures_t *out) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(out, __func__);
    *out = plan->fig;
    return DTR_OK;
}

void dtr__cross_sends(const dtr_cross_plan_t *p, int rank, int64_t *first, int64_t *n) {
    int64_t a = 0, z = p->nmsgs;
    while (a < z) { /* the first message from `rank` or a later sender */
        int64_t mid = (a + z) / 2;
        if (p->msgs[mid].from < rank)
            a = mid + 1;
        else
            z = mid;
    }
    *first = a;
    while (z < p->nmsgs && p->msgs[z].from == rank) z++;
    *n = z - a;
}

void dtr__cross_recvs(const dtr_cross_plan_t *p, int rank, int64_t *first, int64_t *n) {
    int64_t a = 0, z = p->nmsgs;
    while (a < z) {
        int64_t mid = (a + z) / 2;
        if (p->msgs[p->by_to[mid]].to < rank)
            a = mid + 1;
        else
            z = mid;
    }
    *first = a;
    while (z < p->nmsgs && p->msgs[p->by_to[z]].to == rank) z++;
    *n = z - a;
}

dtr_status_t dtr_cross_plan_rank_bytes(const dtr_cross_plan_t *plan, int rank, int64_t *send,
                                       int64_t *recv) {
    DTR_CHECK_PTR(plan, __func__);
    DTR_CHECK_PTR(send, __func__);
    DTR_CHECK_PTR(recv, __func__);
    int64_t first, n, s = 0, r = 0;
    dtr__cross_sends(plan, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++)
        if (plan->msgs[k].to != rank) s += plan->msgs[k].bytes;
    dtr__cross_recvs(plan, rank, &first, &n);
    for (int64_t k = first; k < first + n; k++) {
        const dtr__xmsg_t *m = &plan->msgs[plan->by_to[k]];
        if (m->from != rank) r += m->bytes;
    }
    *send = s;
    *recv = r;
    return DTR_OK;
}
