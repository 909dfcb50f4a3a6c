/*
 * Reductions that read the members' buffers where they are (shm.h, dtr__shm_shared_t).
 *
 * Where every member's send buffer lies in one shared allocation (and, for an all-reduce,
 * every receive buffer in one), no member copies its contributions into its ring: member k
 * reduces its piece straight from every member's send buffer, in member order as the ring
 * form does (so the bits are the same), into its receive buffer; for an all-reduce the
 * others then copy that result out of k's receive buffer, chunk by chunk as k finishes them.
 * Each element is read once from its owner's buffer and written once: about half the memory
 * traffic of the ring form, and no copy at all for a reduce-scatter's inputs.
 *
 * The decision is made from posted facts only. At the start every member posts a line: the
 * operation's number t and its places (allocation number, offset and bytes of send and
 * receive; -1 where a buffer is not in an allocation or may not be read where it is). Once
 * all t lines are posted, each member checks them all: one allocation for every send
 * buffer, the same bytes, in bounds (and likewise for the receive buffers of an
 * all-reduce). Every member reads the same lines, so all take the same form. A member whose
 * own buffers cannot take part starts the ring form at once without reading the lines: the
 * others will see its -1 and join it.
 *
 * A member returns only when every member has finished reading for t (the line `ddone`):
 * until then another may still read its send buffer, which the caller owns again on return.
 * Lines alternate by the parity of t: a member posts t + 2 only after completing t + 1,
 * which needed every member's t + 1 places or ring chunks, posted after they completed t.
 */
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"
#include "runtime/stream.h"
#include "backends/shm/shm_state.h"

/* Chunks of a piece are published as (t << 24) + chunks done: at most 2^24 - 1 chunks. */
#define DTR__DIRECT_CHUNK ((int64_t)128 << 10)
#define DTR__DIRECT_SHIFT 24

/* The line's words after t. */
enum { DTR__L_SSERIAL = 1, DTR__L_SOFF, DTR__L_SBYTES, DTR__L_RSERIAL, DTR__L_ROFF, DTR__L_RBYTES };

/* Whether this member's buffers can be read where they are: both in allocations (the
 * receive buffer only for an all-reduce), and no other member's piece of the send buffer
 * written by this member before that member has read it. */
static bool dtr__direct_own(dtr__shm_t *s, const dtr__shm_shared_t *sh, int64_t total) {
    if (sh->serial[0] < 0 || sh->off[0] + total > sh->part_bytes[0]) return false;
    const char *send = s->ispan[0].base, *recv = s->ospan[0].base;
    if (!s->all) { /* a reduce-scatter writes only its own piece: in place there is safe */
        int64_t rlen = s->rlen[s->me];
        const char *own = send + s->soff[s->me];
        return recv == own || !dtr__bytes_overlap(recv, (size_t)rlen, send, (size_t)total);
    }
    if (sh->serial[1] < 0 || sh->off[1] + total > sh->part_bytes[1]) return false;
    /* an all-reduce writes piece k only after its owner finished reading it */
    return recv == send || !dtr__bytes_overlap(recv, (size_t)total, send, (size_t)total);
}

dtr_status_t dtr__shm_direct_start(dtr__shm_t *s, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                   int64_t esize, bool all, const dtr__shm_shared_t *shared) {
    int64_t total = 0;
    for (int k = 0; k < s->n; k++) total += s->rlen[k];
    s->all = all;
    /* only single contiguous streams, and only work every member has: an empty reduction
     * completes without the others, so it must not take a line */
    if (shared == NULL || total == 0 || s->in.n != 1 || s->out.n != 1 ||
        s->ispan[0].rows > 1 || s->ospan[0].rows > 1)
        return dtr__shm_reduce_start(s, dtype, op, esize, all);
    bool own = dtr__direct_own(s, shared, total);
    uint64_t t = ++s->dseq;
    uint64_t *line = dtr__dline(s, s->me, t);
    line[DTR__L_SSERIAL] = (uint64_t)(own ? shared->serial[0] : -1);
    line[DTR__L_SOFF] = (uint64_t)shared->off[0];
    line[DTR__L_SBYTES] = (uint64_t)total;
    line[DTR__L_RSERIAL] = (uint64_t)(own && all ? shared->serial[1] : -1);
    line[DTR__L_ROFF] = (uint64_t)(all ? shared->off[1] : 0);
    line[DTR__L_RBYTES] = (uint64_t)(all ? total : 0); /* a reduce-scatter's stays private */
    __atomic_store_n(line, t, __ATOMIC_RELEASE);
    s->dposted = true;
    if (!own) return dtr__shm_reduce_start(s, dtype, op, esize, all);
    s->dshared = *shared;
    s->dtype = dtype;
    s->op = op;
    s->esize = esize;
    s->count = 0; /* no ring chunks */
    s->direct = DTR__DIRECT_WAIT;
    s->left = 1;
    return DTR_OK;
}

/* Every member's line for the running reduction read: the direct form if they all allow
 * it (the receive buffers' places set), else the ring form started. */
static bool dtr__direct_decide(dtr__shm_t *s) {
    uint64_t t = s->dseq;
    const uint64_t *mine = dtr__dline(s, s->me, t);
    bool direct = true;
    for (int k = 0; k < s->n; k++) {
        const uint64_t *l = dtr__dline(s, k, t);
        if (__atomic_load_n(l, __ATOMIC_ACQUIRE) != t) return false;
        for (int w = DTR__L_SSERIAL; w <= DTR__L_RBYTES; w++)
            if (w != DTR__L_SOFF && w != DTR__L_ROFF && l[w] != mine[w]) direct = false;
        if ((int64_t)l[DTR__L_SSERIAL] < 0 || (s->all && (int64_t)l[DTR__L_RSERIAL] < 0) ||
            (int64_t)l[DTR__L_SOFF] < 0 ||
            (int64_t)(l[DTR__L_SOFF] + l[DTR__L_SBYTES]) > s->dshared.part_bytes[0] ||
            (s->all && ((int64_t)l[DTR__L_ROFF] < 0 || (int64_t)(l[DTR__L_ROFF] + l[DTR__L_RBYTES]) >
                                                        s->dshared.part_bytes[1])))
            direct = false;
        if (direct) {
            s->din[k] = s->dshared.part[0][k] + l[DTR__L_SOFF];
            s->dres[k] = s->all ? s->dshared.part[1][k] + l[DTR__L_ROFF] : NULL;
        }
    }
    if (!direct) {
        s->direct = DTR__DIRECT_OFF;
        dtr__shm_reduce_start(s, s->dtype, s->op, s->esize, s->all);
        return true;
    }
    int64_t most = 0, total = 0;
    for (int k = 0; k < s->n; k++) {
        if (s->rlen[k] > most) most = s->rlen[k];
        total += s->rlen[k];
    }
    int64_t chunk = DTR__DIRECT_CHUNK;
    int64_t least = (most >> (DTR__DIRECT_SHIFT - 1)) + 1;
    if (chunk < least) chunk = (least + 63) & ~(int64_t)63;
    s->dchunk = chunk;
    s->dreduced = 0;
    s->dfinished = false;
    memset(s->got, 0, sizeof(int64_t) * (size_t)s->n);
    s->stream = s->all && total >= DTR__STREAM_MIN_BYTES; /* as the ring form decides */
    s->direct = DTR__DIRECT_RUN;
    __atomic_add_fetch(&s->direct_ops, 1, __ATOMIC_RELAXED);
    return true;
}

static int64_t dtr__dchunks(dtr__shm_t *s, int k) { return (s->rlen[k] + s->dchunk - 1) / s->dchunk; }

bool dtr__shm_direct_progress(dtr__shm_t *s) {
    if (s->direct == DTR__DIRECT_WAIT) {
        if (!dtr__direct_decide(s)) return false;
        if (s->direct == DTR__DIRECT_OFF) {
            dtr__shm_reduce_progress(s);
            return true;
        }
    }
    int n = s->n, me = s->me;
    uint64_t t = s->dseq, base = t << DTR__DIRECT_SHIFT;
    bool any = false;
    char *out = s->ospan[0].base;
    int64_t mine = dtr__dchunks(s, me);
    for (;;) {
        bool moved = false;
        if (s->dreduced < mine) { /* one chunk of this member's piece, in member order */
            int64_t at = s->dreduced * s->dchunk, len = s->rlen[me] - at;
            if (len > s->dchunk) len = s->dchunk;
            const void *in[DTR__SHM_MAX_MEMBERS];
            for (int k = 0; k < n; k++) in[k] = s->din[k] + s->soff[me] + at;
            dtr__reduce_n(s->dtype, s->op, in, n, out + s->roff[me] + at, len / s->esize);
            s->dreduced++;
            if (s->all) __atomic_store_n(dtr__dout(s, me), base + (uint64_t)s->dreduced, __ATOMIC_RELEASE);
            moved = true;
        }
        for (int step = 1; step < n && s->all; step++) { /* the others' results, as ready */
            int k = (me + step) % n;
            int64_t ready = (int64_t)(__atomic_load_n(dtr__dout(s, k), __ATOMIC_ACQUIRE) - base);
            int64_t theirs = dtr__dchunks(s, k);
            if (ready > theirs || ready < 0) ready = 0; /* an earlier operation's count */
            for (; s->got[k] < ready; s->got[k]++) {
                int64_t at = s->got[k] * s->dchunk, len = s->rlen[k] - at;
                if (len > s->dchunk) len = s->dchunk;
                const char *src = s->dres[k] + s->roff[k] + at;
                if (s->stream)
                    dtr__stream_copy(out + s->roff[k] + at, src, len);
                else
                    memcpy(out + s->roff[k] + at, src, (size_t)len);
                moved = true;
            }
        }
        any |= moved;
        if (!moved) break;
    }
    bool read_all = s->dreduced == mine;
    for (int k = 0; k < n && s->all; k++)
        if (k != me && s->got[k] < dtr__dchunks(s, k)) read_all = false;
    if (!read_all) return any;
    if (!s->dfinished) {
        __atomic_store_n(dtr__ddone(s, me), t, __ATOMIC_RELEASE);
        s->dfinished = true;
        any = true;
    }
    for (int k = 0; k < n; k++)
        if (__atomic_load_n(dtr__ddone(s, k), __ATOMIC_ACQUIRE) < t) return any;
    s->left = 0;
    return true;
}

/* The reductions' entry points (shm.h): their pieces and streams, then the form. */
dtr_status_t dtr__shm_reduce_scatter_start(dtr__shm_t *s, const void *send, void *recv,
                                           const int64_t *counts, dtr_dtype_t dtype,
                                           dtr_reduce_op_t op, int64_t esize,
                                           const dtr__shm_shared_t *shared) {
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_REDUCE, 0)); /* before the running one's pieces change */
    int64_t at = 0;
    for (int k = 0; k < s->n; k++) {
        s->rlen[k] = counts[k] * esize;
        s->soff[k] = at;
        s->roff[k] = 0;
        at += s->rlen[k];
    }
    s->ispan[0] = dtr__shm_span(send, at, at, at);
    s->ospan[0] = dtr__shm_span(recv, s->rlen[s->me], s->rlen[s->me], s->rlen[s->me]);
    dtr__shm_streams(s, 1, 1);
    return dtr__shm_direct_start(s, dtype, op, esize, false, shared);
}

dtr_status_t dtr__shm_all_reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                       int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       int64_t esize, const dtr__shm_shared_t *shared) {
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_REDUCE, 0));
    dtr__shm_all_reduce_pieces(s, count, esize);
    s->ispan[0] = dtr__shm_span(send, count * esize, count * esize, count * esize);
    s->ospan[0] = dtr__shm_span(recv, count * esize, count * esize, count * esize);
    dtr__shm_streams(s, 1, 1);
    return dtr__shm_direct_start(s, dtype, op, esize, true, shared);
}

int64_t dtr__shm_direct_ops(const dtr__shm_t *s) {
    return s == NULL ? 0 : __atomic_load_n(&s->direct_ops, __ATOMIC_RELAXED);
}

void dtr__shm_direct_cancel(dtr__shm_t *s) {
    if (!s->dposted) return;
    /* nobody read the line (the members read only after their agreement): t is reused */
    __atomic_store_n(dtr__dline(s, s->me, s->dseq), 0, __ATOMIC_RELEASE);
    s->dseq--;
    s->dposted = false;
    s->direct = DTR__DIRECT_OFF;
}
