/*
 * The rounds of a change between meshes (cross.c): without a staging cap every message goes
 * in one round. Under a cap C, a message between distinct ranks larger than the chunk size
 * (C/2 where that holds one element, so a rank can send and receive in the same round; else
 * C) is split into boxes of at most that many bytes: rows of its leading dims, each cut
 * along the first dim whose rows fit. The chunks then go into rounds greedily in message
 * order: a chunk joins the first round in which neither its sender nor its receiver would
 * stage more than C bytes (sent and received together). Every chunk fits a round alone, so
 * each round places at least one. Kept boxes (from == to) stay in round 0, unsplit.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"

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

static int dtr__union_pos(const dtr_cross_plan_t *p, int r) {
    const int *at = bsearch(&r, p->ranks, (size_t)p->nranks, sizeof *p->ranks, dtr__xcmp_int);
    return (int)(at - p->ranks);
}

/* Each chunk's round, greedily under the cap (the chunks in message order). The most any
 * rank stages in a round into p->fig.staging_bytes_max. */
static dtr_status_t dtr__assign_rounds(dtr_cross_plan_t *p, dtr__xmsgs_t *a) {
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
            int s = dtr__union_pos(p, m->from), r = dtr__union_pos(p, m->to);
            if (p->cap > 0 && (load[s] + m->bytes > p->cap || load[r] + m->bytes > p->cap)) {
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

/* The messages sorted, by_to, and where each round starts. */
static dtr_status_t dtr__index(dtr_cross_plan_t *p) {
    int64_t n = p->nmsgs;
    qsort(p->msgs, (size_t)n, sizeof *p->msgs, dtr__cmp_msg);
    p->by_to = malloc(sizeof *p->by_to * (size_t)(n > 0 ? n : 1));
    p->round_first = calloc((size_t)p->nrounds + 1, sizeof *p->round_first);
    dtr__to_key_t *key = malloc(sizeof *key * (size_t)(n > 0 ? n : 1));
    if (p->by_to == NULL || p->round_first == NULL || key == NULL) {
        free(key);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)n);
    }
    for (int64_t k = 0; k < n; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        key[k] = (dtr__to_key_t){m->round, m->to, m->from, k};
        p->round_first[m->round + 1]++;
    }
    for (int r = 0; r < p->nrounds; r++) p->round_first[r + 1] += p->round_first[r];
    qsort(key, (size_t)n, sizeof *key, dtr__cmp_to_key);
    for (int64_t k = 0; k < n; k++) p->by_to[k] = key[k].k;
    free(key);
    return DTR_OK;
}

dtr_status_t dtr__xrounds(dtr_cross_plan_t *p) {
    dtr__xmsgs_t a = {0};
    for (int64_t k = 0; k < p->nmsgs; k++) {
        const dtr__xmsg_t *m = &p->msgs[k];
        int64_t item = dtr_dtype_info(p->t[m->tensor].dst.dtype)->size;
        int64_t limit = p->cap / 2 >= item ? p->cap / 2 : p->cap;
        dtr_status_t st = p->cap > 0 && m->from != m->to
                              ? dtr__xsplit(m, p->t[m->tensor].dst.ndim, item, limit, &a)
                              : dtr__push(&a, m);
        if (st != DTR_OK) {
            free(a.v);
            return st;
        }
    }
    free(p->msgs);
    p->msgs = a.v;
    p->nmsgs = a.n;
    if (p->msgs == NULL && (p->msgs = malloc(sizeof *p->msgs)) == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "messages");
    DTR_CHECK(dtr__assign_rounds(p, &a));
    p->fig.rounds = p->nrounds;
    return dtr__index(p);
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
