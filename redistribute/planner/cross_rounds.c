/*
 * The rounds of a change between meshes (cross.c), each one all-to-all-v.
 *
 * Without a staging cap, whole tensors in order: a round takes the next tensors while no
 * rank would stage more than DTR__ROUND_BYTES in it (a larger tensor has a round alone), so
 * a batch's small tensors share one exchange and a large one is packed, sent and unpacked
 * while its bytes are in cache.
 *
 * Under a cap C, a message between distinct ranks larger than the chunk size (C/2 where
 * that holds one element, so a rank can send and receive in the same round; else C) is
 * split into boxes of at most that many bytes: rows of its leading dims, each cut along the
 * first dim whose rows fit. The chunks then go into rounds greedily in tensor order: a
 * chunk joins the first round in which neither its sender nor its receiver would stage
 * more than C bytes (sent and received together). Every chunk fits a round alone, so each
 * round places at least one.
 *
 * Boxes a rank keeps (from == to) are never split and go in their tensor's first round,
 * before which its reduction on the source mesh runs.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"

/* Without a cap, the most a round stages on a rank before the next tensor opens another:
 * about what stays in a core's L2 cache with the blocks it is packed from and unpacked
 * into (bench/cross_mesh_bench.sh measured 256 KiB to 4 MiB; larger rounds ran slower). */
#ifndef DTR__ROUND_BYTES
#define DTR__ROUND_BYTES (1ll << 20)
#endif

typedef struct {
    dtr__xmsg_t *v;
    int64_t n, cap;
} dtr__xmsgs_t;

static dtr_status_t dtr__push(dtr__xmsgs_t *a, const dtr__xmsg_t *m) {
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 64;
        dtr__xmsg_t *v = realloc(a->v, sizeof *v * (size_t)cap);
        if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld chunks", (long long)cap);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = *m;
    return DTR_OK;
}

/* m's chunks of at most `limit` bytes (one element fits), appended to out. */
static dtr_status_t dtr__xsplit(const dtr__xmsg_t *m, int nd, int64_t item, int64_t limit,
                               dtr__xmsgs_t *out) {
    if (m->bytes <= limit) return dtr__push(out, m);
    int d = nd - 1; /* the first dim whose rows (ext of the dims after it) fit the limit */
    int64_t row = item;
    while (d > 0 && row * m->ext[d] <= limit) row *= m->ext[d--];
    int64_t per = limit / row; /* along d, >= 1 */
    int64_t at[DTR_MAX_TENSOR_DIMS] = {0};
    for (;;) {
        for (int64_t x = 0; x < m->ext[d]; x += per) {
            dtr__xmsg_t c = *m;
            for (int e = 0; e < d; e++) c.lo[e] = m->lo[e] + at[e], c.ext[e] = 1;
            c.lo[d] = m->lo[d] + x;
            c.ext[d] = x + per < m->ext[d] ? per : m->ext[d] - x;
            c.bytes = row * c.ext[d];
            DTR_CHECK(dtr__push(out, &c));
        }
        int e = d - 1;
        for (; e >= 0; e--) {
            if (++at[e] < m->ext[e]) break;
            at[e] = 0;
        }
        if (e < 0) return DTR_OK;
    }
}

/* Under a cap: each chunk's round, greedily (the chunks in tensor order). The most any
 * rank stages in a round into p->fig.staging_bytes_max. */
static dtr_status_t dtr__capped_rounds(dtr_cross_plan_t *p, dtr__xmsgs_t *a) {
    int64_t *load = calloc((size_t)p->nranks, sizeof *load), left = 0;
    int64_t *todo = malloc(sizeof *todo * (size_t)(a->n > 0 ? a->n : 1));
    if (load == NULL || todo == NULL) {
        free(load);
        free(todo);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "rounds of %lld chunks", (long long)a->n);
    }
    for (int64_t k = 0; k < a->n; k++)
        if (a->v[k].from != a->v[k].to) todo[left++] = k;
    int round = 0;
    while (left > 0) {
        memset(load, 0, sizeof *load * (size_t)p->nranks);
        int64_t kept = 0;
        for (int64_t j = 0; j < left; j++) {
            dtr__xmsg_t *m = &a->v[todo[j]];
            int s = dtr__xpos(p, m->from), r = dtr__xpos(p, m->to);
            if (load[s] + m->bytes > p->cap || load[r] + m->bytes > p->cap) {
                todo[kept++] = todo[j];
                continue;
            }
            m->round = round;
            load[s] += m->bytes;
            load[r] += m->bytes;
        }
        for (int k = 0; k < p->nranks; k++)
            if (load[k] > p->fig.staging_bytes_max) p->fig.staging_bytes_max = load[k];
        left = kept;
        round++;
    }
    p->nrounds = round > 0 ? round : 1;
    free(load);
    free(todo);
    return DTR_OK;
}

/* Tensor t's bytes staged per rank (sent and received) into a new array *out (*n entries);
 * mine: zeros, [nranks], left zero. */
static dtr_status_t dtr__staged(const dtr_cross_plan_t *p, int t, int64_t *mine,
                                dtr__xstage_t **out, int64_t *n) {
    const dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    int64_t m = 0, cap = 64;
    dtr__xstage_t *v = malloc(sizeof *v * (size_t)cap);
    for (int64_t i = 0; v != NULL && i < k->n; i++) {
        if (k->slot[i] < 0) continue;
        int ends[2] = {dtr__xpos(p, dtr__xsender(p, t, i)), dtr__xpos(p, k->v[i].to)};
        for (int e = 0; e < 2 && v != NULL; e++) {
            if (mine[ends[e]] == 0) {
                if (m == cap) {
                    dtr__xstage_t *w = realloc(v, sizeof *v * (size_t)(cap *= 2));
                    if (w == NULL) free(v);
                    v = w;
                    if (v == NULL) break;
                }
                v[m++] = (dtr__xstage_t){ends[e], 0};
            }
            mine[ends[e]] += k->v[i].numel * k->item;
        }
    }
    if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "a tensor's staging");
    for (int64_t j = 0; j < m; j++) v[j].bytes = mine[v[j].pos], mine[v[j].pos] = 0;
    *out = v;
    *n = m;
    return DTR_OK;
}

/* Tensor t's staging: its variant's, made once (else its own, into *own to free). */
static dtr_status_t dtr__staging_of(const dtr_cross_plan_t *p, int t, int64_t *mine,
                                    const dtr__xstage_t **v, int64_t *n, dtr__xstage_t **own) {
    dtr__xkind_t *k = &p->kinds[p->t[t].kind];
    *own = NULL;
    if (k->period == 0) {
        DTR_CHECK(dtr__staged(p, t, mine, own, n));
        *v = *own;
        return DTR_OK;
    }
    int64_t r = p->t[t].turn % k->period;
    if (k->vstage[r] == NULL) DTR_CHECK(dtr__staged(p, t, mine, &k->vstage[r], &k->vnstage[r]));
    *v = k->vstage[r];
    *n = k->vnstage[r];
    return DTR_OK;
}

/* Without a cap: whole tensors, in order, a round holding the next ones while no rank would
 * stage more than DTR__ROUND_BYTES in it (a larger tensor takes a round alone). Many small
 * tensors then share one all-to-all-v, and a large one is packed, sent and unpacked while
 * its bytes are still in cache; its reduction on the source mesh runs just before its
 * round. From the kinds' boxes (no messages made; each variant's staging once): each
 * tensor's round. */
static dtr_status_t dtr__grouped_rounds(dtr_cross_plan_t *p) {
    int64_t n = p->nranks, *v = calloc((size_t)(2 * n), sizeof *v);
    int *round_ranks = malloc(sizeof *round_ranks * (size_t)(n > 0 ? n : 1)), nr = 0, round = 0;
    if (v == NULL || round_ranks == NULL) {
        free(v);
        free(round_ranks);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "rounds of %lld ranks", (long long)n);
    }
    int64_t *load = v, *mine = v + n, used = 0; /* the round's loads; scratch */
    dtr_status_t st = DTR_OK;
    for (int t = 0; t < p->ntensors && st == DTR_OK; t++) {
        const dtr__xstage_t *s;
        dtr__xstage_t *own;
        int64_t ns, most = 0;
        st = dtr__staging_of(p, t, mine, &s, &ns, &own);
        if (st != DTR_OK) break;
        for (int64_t j = 0; j < ns; j++)
            if (load[s[j].pos] + s[j].bytes > most) most = load[s[j].pos] + s[j].bytes;
        if (used > 0 && most > DTR__ROUND_BYTES) { /* a new round */
            for (int j = 0; j < nr; j++) load[round_ranks[j]] = 0;
            nr = 0, used = 0, round++;
        }
        for (int64_t j = 0; j < ns; j++) {
            int r = s[j].pos;
            if (load[r] == 0) round_ranks[nr++] = r;
            load[r] += s[j].bytes;
            if (load[r] > p->fig.staging_bytes_max) p->fig.staging_bytes_max = load[r];
        }
        used += ns;
        free(own);
        p->t[t].round = p->t[t].last = round;
    }
    p->nrounds = round + 1;
    free(v);
    free(round_ranks);
    return st;
}

/* By tensor, sender, receiver, then the box's corner: the order rounds are filled in. */
static int dtr__cmp_tensor(const void *a, const void *b) {
    const dtr__xmsg_t *x = a, *y = b;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++)
        if (x->lo[d] != y->lo[d]) return x->lo[d] < y->lo[d] ? -1 : 1;
    return 0;
}

/* Each tensor's first and last rounds (its boxes kept in place go in the first, and its
 * reduction on the source mesh runs before it); a tensor that sends nothing takes the round
 * before it. */
static void dtr__tensor_rounds(dtr_cross_plan_t *p, dtr__xmsgs_t *a) {
    for (int t = 0; t < p->ntensors; t++) p->t[t].round = p->t[t].last = -1;
    for (int64_t k = 0; k < a->n; k++) {
        const dtr__xmsg_t *m = &a->v[k];
        dtr__xtensor_t *x = &p->t[m->tensor];
        if (m->from == m->to) continue;
        if (x->round < 0 || m->round < x->round) x->round = m->round;
        if (m->round > x->last) x->last = m->round;
    }
    for (int t = 0; t < p->ntensors; t++) {
        dtr__xtensor_t *x = &p->t[t];
        if (x->round < 0) x->round = x->last = t > 0 ? p->t[t - 1].round : 0;
    }
    for (int64_t k = 0; k < a->n; k++)
        if (a->v[k].from == a->v[k].to) a->v[k].round = p->t[a->v[k].tensor].round;
}

/* The bytes a tensor's reduced block takes in the mids' scratch: its layout's largest
 * block (coordinate 0's; with a ragged shard, the largest over the coordinates), in 64-byte
 * units. */
static int64_t dtr__mid_size(const dtr__xtensor_t *x) {
    dtr_layout_t l;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, most = 0;
    do {
        dtr_spec_layout_at(&x->mid, coord, &l);
        if (l.bytes > most) most = l.bytes;
    } while (dtr_spec_ragged(&x->mid) && dtr__xcoord_next(x->mid.mesh, coord));
    return (most + 63) / 64 * 64;
}

/* Where each reduced block lies in the mids' scratch: a block lives from its tensor's first
 * round to its last, and a freed one's room is reused (first fit, the tensors by first
 * round). p->mid_bytes: the most at once. */
static dtr_status_t dtr__mid_offsets(dtr_cross_plan_t *p) {
    int n = p->ntensors, live = 0, nb = 0;
    int *by_round = malloc(sizeof *by_round * (size_t)(n > 0 ? n : 1));
    int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1)); /* live blocks by offset */
    if (by_round == NULL || order == NULL) {
        free(by_round);
        free(order);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%d tensors", n);
    }
    for (int t = 0; t < n; t++)
        if (p->t[t].has_pre) by_round[nb++] = t;
    for (int i = 1; i < nb; i++) /* insertion sort by first round (stable; mostly sorted) */
        for (int j = i; j > 0 && p->t[by_round[j - 1]].round > p->t[by_round[j]].round; j--) {
            int x = by_round[j];
            by_round[j] = by_round[j - 1], by_round[j - 1] = x;
        }
    p->mid_bytes = 0;
    for (int i = 0; i < nb; i++)
        p->t[by_round[i]].mid_size = dtr__mid_size(&p->t[by_round[i]]);
    for (int i = 0; i < nb; i++) {
        dtr__xtensor_t *x = &p->t[by_round[i]];
        int64_t size = x->mid_size, at = 0;
        int kept = 0, slot = 0;
        for (int j = 0; j < live; j++) /* drop the blocks whose last round is before this one */
            if (p->t[order[j]].last >= x->round) order[kept++] = order[j];
        live = kept;
        for (; slot < live; slot++) { /* the first gap that holds it */
            const dtr__xtensor_t *y = &p->t[order[slot]];
            if (y->mid_offset - at >= size) break;
            at = y->mid_offset + y->mid_size;
        }
        x->mid_offset = at;
        memmove(order + slot + 1, order + slot, sizeof *order * (size_t)(live - slot));
        order[slot] = by_round[i], live++;
        if (at + size > p->mid_bytes) p->mid_bytes = at + size;
    }
    free(by_round);
    free(order);
    return DTR_OK;
}

dtr_status_t dtr__xrounds(dtr_cross_plan_t *p) {
    if (p->cap == 0) {
        DTR_CHECK(dtr__grouped_rounds(p));
        DTR_CHECK(dtr__mid_offsets(p));
        p->fig.rounds = p->nrounds;
        return DTR_OK;
    }
    for (int t = 0; t < p->ntensors; t++) p->t[t].round = 0;
    p->nrounds = 1;
    DTR_CHECK(dtr__xmake(p, -1)); /* (every message, in round 0) */
    dtr__xmsgs_t a = {0};
    for (int64_t k = 0; k < p->nmsgs; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        int64_t item = dtr_dtype_info(p->t[m->tensor].dst.dtype)->size;
        int64_t limit = p->cap / 2 >= item ? p->cap / 2 : p->cap;
        dtr_status_t st = m->from != m->to ? dtr__xsplit(m, p->t[m->tensor].dst.ndim, item, limit, &a)
                                           : dtr__push(&a, m);
        if (st != DTR_OK) {
            free(a.v);
            return st;
        }
    }
    free(p->msgs), free(p->by_to), free(p->round_first);
    p->by_to = NULL, p->round_first = NULL;
    p->msgs = a.v;
    p->nmsgs = a.n;
    if (p->msgs == NULL && (p->msgs = malloc(sizeof *p->msgs)) == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "messages");
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof *a.v, dtr__cmp_tensor);
    DTR_CHECK(dtr__capped_rounds(p, &a));
    dtr__tensor_rounds(p, &a);
    DTR_CHECK(dtr__mid_offsets(p));
    p->fig.rounds = p->nrounds;
    return dtr__xindex(p);
}

/* The first index in [a, z) whose sender (or, by_to, receiver) is >= key; they ascend there. */
static int64_t dtr__lower(const dtr_cross_plan_t *p, int64_t a, int64_t z, int key, bool by_to) {
    while (a < z) {
        int64_t mid = (a + z) / 2;
        int at = by_to ? p->msgs[p->by_to[mid]].to : p->msgs[mid].from;
        if (at < key)
            a = mid + 1;
        else
            z = mid;
    }
    return a;
}

void dtr__cross_sends(const dtr_cross_plan_t *p, int round, int rank, int64_t *first, int64_t *n) {
    int64_t a = p->round_first[round], z = p->round_first[round + 1];
    *first = dtr__lower(p, a, z, rank, false);
    *n = dtr__lower(p, *first, z, rank + 1, false) - *first;
}

void dtr__cross_recvs(const dtr_cross_plan_t *p, int round, int rank, int64_t *first, int64_t *n) {
    int64_t a = p->round_first[round], z = p->round_first[round + 1];
    *first = dtr__lower(p, a, z, rank, true);
    *n = dtr__lower(p, *first, z, rank + 1, true) - *first;
}
