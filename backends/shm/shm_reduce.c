/* The shared-memory path's reductions and argument agreement (shm.h). */
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "runtime/stream.h"
#include "backends/shm/shm_state.h"

/*
 * Starts a reduction of n pieces on the state's streams (begun and indexed by the caller):
 * member k's piece is rlen[k] bytes at soff[k] of every member's send stream, reduced into
 * roff[k] of member k's receive stream (all: of every member's).
 */
dtr_status_t dtr__shm_reduce_start(dtr__shm_t *s, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                   int64_t esize, bool all) {
    int64_t most = 0;
    for (int k = 0; k < s->n; k++)
        if (s->rlen[k] > most) most = s->rlen[k];
    s->dtype = dtype;
    s->op = op;
    s->esize = esize;
    s->all = all;
    s->reduced = 0;
    s->rfree = 0;
    s->count = (most + s->rsub - 1) / s->rsub; /* the same on every member */
    int64_t total = 0;
    for (int k = 0; k < s->n; k++) total += s->rlen[k];
    /* an all-reduce's large result is copied out of the rings with streaming stores, as
     * the gather's is (P -> R of 16 MiB on 4 ranks: medians of 6 runs 10.9 ms against
     * 12.2 ms with memcpy, on a machine noisy enough that runs ranged over 1.6x) */
    s->stream = all && total >= DTR__STREAM_MIN_BYTES;
    s->left = s->count > 0;
    dtr__shm_reduce_send(s);
    return DTR_OK;
}

/* An all-reduce's n near-equal pieces of count elements. */
void dtr__shm_all_reduce_pieces(dtr__shm_t *s, int64_t count, int64_t esize) {
    int64_t piece = (count + s->n - 1) / s->n;
    for (int k = 0; k < s->n; k++) {
        int64_t first = k * piece, end = first + piece < count ? first + piece : count;
        s->rlen[k] = (end > first ? end - first : 0) * esize;
        s->soff[k] = s->roff[k] = (first < count ? first : count) * esize;
    }
}

/*
 * A tiny all-reduce in one exchange: each member writes its input and then the operation's
 * number t into its slot t % 2, waits for every member's number and reduces all inputs
 * itself in member order, so every member computes the same bits. A member reuses slot
 * t % 2 only for operation t + 2, which it starts after completing t + 1, which needed every
 * member's input t + 1, which each wrote after completing t: no slot is overwritten while
 * read, and no counter of readers is needed.
 */
dtr_status_t dtr__shm_tiny_all_reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                            int64_t count, dtr_dtype_t dtype,
                                            dtr_reduce_op_t op, int64_t esize) {
    if (count * esize > DTR__SHM_TINY_MAX)
        return dtr__error(DTR_ERR_INTERNAL, "shm", "tiny all-reduce of %lld bytes",
                          (long long)(count * esize));
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_TINY, 0));
    uint64_t t = ++s->tiny;
    char *slot = dtr__tslot(s, s->me, t);
    if (count > 0) memcpy(slot + 8, send, (size_t)(count * esize)); /* (0: send may be NULL) */
    __atomic_store_n((uint64_t *)slot, t, __ATOMIC_RELEASE);
    s->tiny_out = recv;
    s->count = count;
    s->dtype = dtype;
    s->op = op;
    s->left = 1;
    return DTR_OK;
}

bool dtr__shm_tiny_progress(dtr__shm_t *s) {
    const void *in[DTR__SHM_MAX_MEMBERS];
    for (int k = 0; k < s->n; k++) {
        char *slot = dtr__tslot(s, k, s->tiny);
        if (__atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE) != s->tiny) return false;
        in[k] = slot + 8;
    }
    if (s->count > 0) dtr__reduce_n(s->dtype, s->op, in, s->n, s->tiny_out, s->count);
    s->count = 0; /* (no chunks to count as earlier ones) */
    s->left = 0;
    return true;
}

/* The bytes of member k's piece in chunk c: [*at, *at + return). */
static int64_t dtr__rpart(dtr__shm_t *s, int k, int64_t c, int64_t *at) {
    *at = c * s->rsub;
    int64_t left = s->rlen[k] - *at;
    return left <= 0 ? 0 : left < s->rsub ? left : s->rsub;
}

/* Tells member `from` how far this one is done with its ring: the chunks reduced (their
 * inputs read) and, for an all-reduce, also those of from's results copied. */
static void dtr__reduce_release(dtr__shm_t *s, int from) {
    int64_t d = s->reduced;
    if (s->all && s->got[from] < d) d = s->got[from];
    __atomic_store_n(dtr__rdone(s, from, s->me), s->rearlier + (uint64_t)d, __ATOMIC_RELEASE);
}

/*
 * A reduction's three moves, each as far as it can go: write this member's contributions
 * to the others' pieces into its ring; reduce its own piece from every member's ring in
 * member order (dtr__reduce_n: the order is fixed whoever arrives first); for an
 * all-reduce, publish the result and copy the other members' results out of their rings.
 * Every result is computed once, by its piece's owner, so the replicas agree bit for bit.
 */
/* Writes this member's contributions into its ring while it has room. */
bool dtr__shm_reduce_send(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = false;
    while (s->sent[me] < s->count) {
        int64_t c = s->sent[me], at;
        uint64_t q = s->rearlier + (uint64_t)c;
        if (q >= s->rfree + (uint64_t)s->rslots) {
            s->rfree = dtr__shm_ring_read(s, dtr__rdone);
            if (q >= s->rfree + (uint64_t)s->rslots) break;
        }
        for (int k = 0; k < n; k++) {
            if (k == me) continue;
            int64_t len = dtr__rpart(s, k, c, &at);
            if (len > 0) dtr__spans_read(&s->in, s->soff[k] + at, len, dtr__rslot(s, me, q, k));
        }
        __atomic_store_n(dtr__rready(s, me), q + 1, __ATOMIC_RELEASE);
        s->sent[me]++;
        any = true;
    }
    return any;
}

/*
 * Reduces bytes [at, at + len) of this member's piece: the others' contributions in[k], its
 * own from its send stream. The result (divided by the post factor where there is one: the
 * others copy it so) goes to its receive stream and, for an all-reduce,
 * to `slot` (where the others copy it from). Where the own input or the output is not one
 * run of a span, it goes through the scratch sub-pieces.
 */
static void dtr__reduce_own(dtr__shm_t *s, const void **in, char *slot, int64_t at,
                            int64_t len) {
    int me = s->me;
    int64_t src = s->soff[me] + at, dst = s->roff[me] + at;
    char *own = dtr__spans_ptr(&s->in, src, len);
    if (own == NULL) {
        own = s->scratch;
        dtr__spans_read(&s->in, src, len, own);
    }
    in[me] = own;
    /* in place where the output is one run and no slot needs the result */
    char *out = slot != NULL ? slot : dtr__spans_ptr(&s->out, dst, len);
    bool in_place = slot == NULL && out != NULL;
    if (out == NULL) out = s->scratch + s->rsub;
    dtr__reduce_n(s->dtype, s->op, (const void *const *)in, s->n, out, len / s->esize);
    if (s->post != 0 && s->post != 1) dtr__divide_by(s->dtype, out, len / s->esize, s->post);
    if (!in_place) dtr__spans_write(&s->out, dst, len, out, s->stream);
}

bool dtr__shm_reduce_progress(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = dtr__shm_reduce_send(s);
    while (s->reduced < s->sent[me]) {
        int64_t c = s->reduced, at;
        uint64_t q = s->rearlier + (uint64_t)c;
        const void *in[DTR__SHM_MAX_MEMBERS];
        int64_t len = dtr__rpart(s, me, c, &at);
        int k = 0;
        for (; k < n; k++) {
            if (k == me) continue;
            if (__atomic_load_n(dtr__rready(s, k), __ATOMIC_ACQUIRE) <= q) break;
            in[k] = dtr__rslot(s, k, q, me);
        }
        if (k < n) break;
        if (len > 0) dtr__reduce_own(s, in, s->all ? dtr__rslot(s, me, q, me) : NULL, at, len);
        if (s->all) __atomic_store_n(dtr__rout(s, me), q + 1, __ATOMIC_RELEASE);
        s->reduced++;
        for (k = 0; k < n; k++)
            if (k != me) dtr__reduce_release(s, k);
        any = true;
    }
    bool done = s->reduced == s->count;
    for (int step = 1; step < n && s->all; step++) {
        int from = (me + n - step) % n;
        bool moved = false;
        while (s->got[from] < s->count) {
            int64_t c = s->got[from], at;
            uint64_t q = s->rearlier + (uint64_t)c;
            if (__atomic_load_n(dtr__rout(s, from), __ATOMIC_ACQUIRE) <= q) break;
            int64_t len = dtr__rpart(s, from, c, &at);
            dtr__spans_write(&s->out, s->roff[from] + at, len, dtr__rslot(s, from, q, from),
                             s->stream);
            s->got[from]++;
            moved = true;
        }
        if (moved) dtr__reduce_release(s, from);
        any |= moved;
        done &= s->got[from] == s->count;
    }
    if (done && s->sent[me] == s->count) s->left = 0;
    return any;
}

uint64_t dtr__shm_agree_start(dtr__shm_t *s, const int64_t *send) {
    uint64_t a = ++s->agreed;
    uint64_t *line = dtr__aslot(s, s->me, a);
    memcpy(line + 1, send, 3 * sizeof(int64_t));
    __atomic_store_n(line, a, __ATOMIC_RELEASE);
    return a;
}

/*
 * Agreement a completes once every member's line holds a; a member starts a + 2 only after
 * completing a + 1, which needed every member's a + 1, written after completing a: the two
 * lines suffice, as for the tiny all-reduce.
 */
/* The line member k writes first for the running operation, which this member reads first
 * once the agreement completes. */
static const void *dtr__first_line(dtr__shm_t *s, int k) {
    switch (s->mode) {
    case DTR__SHM_GATHER: return dtr__gready(s, k);
    case DTR__SHM_REDUCE: return s->direct != DTR__DIRECT_OFF ? (const void *)dtr__dline(s, k, s->dseq)
                                                               : (const void *)dtr__rready(s, k);
    case DTR__SHM_TINY: return dtr__tslot(s, k, s->tiny);
    default:
        return s->direct != DTR__DIRECT_OFF ? (const void *)dtr__dline(s, k, s->dseq)
                                            : (const void *)dtr__ready(s, k, s->me);
    }
}

bool dtr__shm_agree_progress(dtr__shm_t *s, uint64_t a, int64_t *recv) {
    int64_t most[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
    /* the running operation's first lines fetched beside the agreement's: the fused call's
     * two waits on each peer overlap (issue 75, item 7) */
    if (s->left > 0)
        for (int k = 0; k < s->n; k++)
            if (k != s->me) __builtin_prefetch(dtr__first_line(s, k), 0, 3);
    for (int k = 0; k < s->n; k++) {
        uint64_t *line = dtr__aslot(s, k, a);
        if (__atomic_load_n(line, __ATOMIC_ACQUIRE) != a) return false;
        for (int j = 0; j < 3; j++) {
            int64_t v;
            memcpy(&v, line + 1 + j, sizeof v);
            if (v > most[j]) most[j] = v;
        }
    }
    memcpy(recv, most, sizeof most);
    return true;
}

