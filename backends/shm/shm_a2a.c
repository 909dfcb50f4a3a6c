/*
 * The shared-memory path's all-to-all (shm.h): the ring form, every piece through the
 * sender's ring of each pair (two copies of each byte), and the direct form, which reads
 * the members' send buffers where they are.
 *
 * The direct form (dtr__shm_start_direct): where every member's send buffer lies in one
 * shared allocation, member k copies its piece of every other member's send buffer straight
 * into its receive buffer: one copy of each byte, where the ring form makes two (into the
 * sender's ring, out of it) and Open MPI's MPI_Alltoallw two or more (its pack and the
 * transport).
 *
 * The decision is made from posted facts only, as for the direct reductions (shm_direct.c,
 * whose lines, numbers and `ddone` line this shares): at the start every member posts its
 * send buffer's place (allocation number, offset, the bytes its pieces span) and the
 * pieces' geometry; once all lines are posted each member checks them all (one allocation,
 * the same geometry, in bounds) and all take the same form. A member whose own send buffer
 * cannot be read where it is posts -1 and starts the ring form at once; the others see it
 * and join. A member returns only when every member has finished reading (`ddone`): until
 * then another may still read its send buffer, which the caller owns again on return.
 */
#include <string.h>

#include "core/common.h"
#include "backends/shm/shm_state.h"

static bool dtr__all_to_all_send(dtr__shm_t *s, int to);

/* Starts an all-to-all on the state's streams (indexed by the caller, piece k of each the
 * k-th span): each pair moves its piece's chunks, as many as that piece's bytes make, which
 * its sender and its receiver both know. */
static void dtr__all_to_all_begin(dtr__shm_t *s) {
    s->left = 0;
    for (int k = 0; k < s->n; k++) {
        if (k == s->me) continue;
        s->scnt[k] = (s->istart[k + 1] - s->istart[k] + s->chunk - 1) / s->chunk;
        s->rcnt[k] = (s->ostart[k + 1] - s->ostart[k] + s->chunk - 1) / s->chunk;
        s->left += (s->scnt[k] > 0) + (s->rcnt[k] > 0);
    }
    for (int to = 0; to < s->n; to++)
        if (to != s->me) dtr__all_to_all_send(s, to);
}

/* The ring form's streams and counters for dtr__shm_start's arguments, the operation
 * already begun. */
static void dtr__a2a_ring(dtr__shm_t *s, const void *send, int64_t sblock, int64_t srow,
                          void *recv, int64_t rblock, int64_t rrow, int64_t bytes) {
    s->count = (bytes + s->chunk - 1) / s->chunk;
    for (int k = 0; k < s->n; k++) {
        int64_t b = k == s->me ? 0 : bytes; /* (this member's own piece is not moved) */
        s->ispan[k] = dtr__shm_span((const char *)send + k * sblock, b, sblock, srow);
        s->ospan[k] = dtr__shm_span((char *)recv + k * rblock, b, rblock, rrow);
    }
    dtr__shm_streams(s, s->n, s->n);
    dtr__all_to_all_begin(s);
}

dtr_status_t dtr__shm_start(dtr__shm_t *s, const void *send, int64_t sblock, int64_t srow,
                            void *recv, int64_t rblock, int64_t rrow, int64_t bytes) {
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_A2A, bytes));
    dtr__a2a_ring(s, send, sblock, srow, recv, rblock, rrow, bytes);
    return DTR_OK;
}

dtr_status_t dtr__shm_start_v(dtr__shm_t *s, const void *send, const int64_t *scounts,
                              const int64_t *sdispls, void *recv, const int64_t *rcounts,
                              const int64_t *rdispls) {
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_A2A, 0));
    for (int k = 0; k < s->n; k++) {
        int64_t sb = k == s->me ? 0 : scounts[k], rb = k == s->me ? 0 : rcounts[k];
        s->ispan[k] = dtr__shm_span((const char *)send + sdispls[k], sb, sb, sb);
        s->ospan[k] = dtr__shm_span((char *)recv + rdispls[k], rb, rb, rb);
    }
    dtr__shm_streams(s, s->n, s->n);
    dtr__all_to_all_begin(s);
    return DTR_OK;
}

/* The bytes of chunk c of a piece at [first, end) of a stream. */
static int64_t dtr__alen(int64_t first, int64_t end, int64_t c, int64_t chunk) {
    int64_t left = end - first - c * chunk;
    return left < chunk ? left : chunk;
}

/* Writes this member's chunks for `to` while the pair's ring has room. */
static bool dtr__all_to_all_send(dtr__shm_t *s, int to) {
    int me = s->me;
    bool any = false;
    while (s->sent[to] < s->scnt[to]) {
        uint64_t q = (uint64_t)(s->asent[to] + s->sent[to]);
        /* slot q % slots is free once the receiver has read chunk q - slots */
        if (q >= __atomic_load_n(dtr__done(s, me, to), __ATOMIC_ACQUIRE) + (uint64_t)s->slots)
            break;
        int64_t at = s->sent[to] * s->chunk;
        int64_t len = dtr__alen(s->istart[to], s->istart[to + 1], s->sent[to], s->chunk);
        dtr__spans_read(&s->in, s->istart[to] + at, len, dtr__slot(s, me, to, q));
        __atomic_store_n(dtr__ready(s, me, to), q + 1, __ATOMIC_RELEASE);
        any = true;
        if (++s->sent[to] == s->scnt[to]) s->left--;
    }
    return any;
}

static bool dtr__all_to_all_progress(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = false;
    for (int step = 1; step < n && s->left > 0; step++) {
        int to = (me + step) % n, from = (me + n - step) % n;
        any |= dtr__all_to_all_send(s, to);
        while (s->got[from] < s->rcnt[from]) {
            uint64_t q = (uint64_t)(s->agot[from] + s->got[from]);
            if (__atomic_load_n(dtr__ready(s, from, me), __ATOMIC_ACQUIRE) <= q) break;
            int64_t at = s->got[from] * s->chunk;
            int64_t len = dtr__alen(s->ostart[from], s->ostart[from + 1], s->got[from], s->chunk);
            dtr__spans_write(&s->out, s->ostart[from] + at, len, dtr__slot(s, from, me, q),
                             false);
            __atomic_store_n(dtr__done(s, from, me), q + 1, __ATOMIC_RELEASE);
            any = true;
            if (++s->got[from] == s->rcnt[from]) s->left--;
        }
    }
    return any;
}

/* The line's words after t. */
enum { DTR__A_SERIAL = 1, DTR__A_OFF, DTR__A_SPAN, DTR__A_BLOCK, DTR__A_ROW, DTR__A_BYTES };

/* The bytes from the first to the last of a send buffer's pieces: n pieces sblock apart,
 * each `bytes` as rows of sblock, srow apart. */
static int64_t dtr__a2a_span(int n, int64_t sblock, int64_t srow, int64_t bytes) {
    int64_t rows = (bytes + sblock - 1) / sblock;
    return (int64_t)(n - 1) * sblock + (rows - 1) * srow + sblock;
}

dtr_status_t dtr__shm_start_direct(dtr__shm_t *s, const void *send, int64_t sblock, int64_t srow,
                                   void *recv, int64_t rblock, int64_t rrow, int64_t bytes,
                                   const dtr__shm_shared_t *shared) {
    /* only work every member has: an empty all-to-all completes without the others, so it
     * must not take a line */
    if (shared == NULL || bytes <= 0 || sblock <= 0 || s->n < 2)
        return dtr__shm_start(s, send, sblock, srow, recv, rblock, rrow, bytes);
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_A2A, 0));
    int64_t span = dtr__a2a_span(s->n, sblock, srow, bytes);
    /* readable where it is: in the allocation, and the receive buffer apart from it (this
     * member writes it while the others read the send buffer) */
    bool own = shared->serial[0] >= 0 && shared->off[0] + span <= shared->part_bytes[0] &&
               !dtr__bytes_overlap(recv, (size_t)dtr__a2a_span(s->n, rblock, rrow, bytes), send,
                                   (size_t)span);
    uint64_t t = ++s->dseq;
    uint64_t *line = dtr__dline(s, s->me, t);
    line[DTR__A_SERIAL] = (uint64_t)(own ? shared->serial[0] : -1);
    line[DTR__A_OFF] = (uint64_t)shared->off[0];
    line[DTR__A_SPAN] = (uint64_t)span;
    line[DTR__A_BLOCK] = (uint64_t)sblock;
    line[DTR__A_ROW] = (uint64_t)srow;
    line[DTR__A_BYTES] = (uint64_t)bytes;
    __atomic_store_n(line, t, __ATOMIC_RELEASE);
    s->dposted = true;
    if (!own) {
        dtr__a2a_ring(s, send, sblock, srow, recv, rblock, rrow, bytes);
        return DTR_OK;
    }
    s->dshared = *shared;
    s->asend = send;
    s->arecv = recv;
    s->asblock = sblock;
    s->asrow = srow;
    s->arblock = rblock;
    s->arrow = rrow;
    s->abytes = bytes;
    s->direct = DTR__DIRECT_WAIT;
    s->left = 1;
    return DTR_OK;
}

/* Every member's line read: the direct form if they all allow it (din[k] set to member k's
 * send buffer), else the ring form started. False while a line is missing. */
static bool dtr__a2a_decide(dtr__shm_t *s) {
    uint64_t t = s->dseq;
    const uint64_t *mine = dtr__dline(s, s->me, t);
    bool direct = true;
    for (int k = 0; k < s->n; k++) {
        const uint64_t *l = dtr__dline(s, k, t);
        if (__atomic_load_n(l, __ATOMIC_ACQUIRE) != t) return false;
        for (int w = DTR__A_SERIAL; w <= DTR__A_BYTES; w++)
            if (w != DTR__A_OFF && l[w] != mine[w]) direct = false;
        int64_t off = (int64_t)l[DTR__A_OFF], span = (int64_t)l[DTR__A_SPAN];
        if ((int64_t)l[DTR__A_SERIAL] < 0 || off < 0 || off + span > s->dshared.part_bytes[0])
            direct = false;
        if (direct) s->din[k] = s->dshared.part[0][k] + off;
    }
    if (!direct) {
        s->direct = DTR__DIRECT_OFF;
        dtr__a2a_ring(s, s->asend, s->asblock, s->asrow, s->arecv, s->arblock, s->arrow,
                          s->abytes);
        return true;
    }
    s->dfinished = false;
    s->direct = DTR__DIRECT_RUN;
    __atomic_add_fetch(&s->direct_ops, 1, __ATOMIC_RELAXED);
    return true;
}

/* bytes from rows of sblock bytes, srow apart, to rows of rblock bytes, rrow apart. */
static void dtr__rows_copy(char *dst, int64_t rblock, int64_t rrow, const char *src,
                           int64_t sblock, int64_t srow, int64_t bytes) {
    if (sblock == srow && rblock == rrow) { /* both contiguous */
        memcpy(dst, src, (size_t)bytes);
        return;
    }
    int64_t si = 0, ri = 0; /* bytes used of the current source and destination rows */
    while (bytes > 0) {
        int64_t len = sblock - si < rblock - ri ? sblock - si : rblock - ri;
        if (len > bytes) len = bytes;
        memcpy(dst + ri, src + si, (size_t)len);
        bytes -= len;
        si += len;
        ri += len;
        if (si == sblock) src += srow, si = 0;
        if (ri == rblock) dst += rrow, ri = 0;
    }
}

static bool dtr__direct_a2a_progress(dtr__shm_t *s) {
    if (s->direct == DTR__DIRECT_WAIT) {
        if (!dtr__a2a_decide(s)) return false;
        if (s->direct == DTR__DIRECT_OFF) return true; /* (the ring form runs from here) */
    }
    int n = s->n, me = s->me;
    uint64_t t = s->dseq;
    bool any = false;
    if (!s->dfinished) {
        /* member k's piece for this member, as this member's own piece for itself lies in
         * its send buffer (the geometry is the same everywhere: checked above) */
        for (int step = 1; step < n; step++) {
            int k = (me + step) % n;
            dtr__rows_copy(s->arecv + k * s->arblock, s->arblock, s->arrow,
                           s->din[k] + me * s->asblock, s->asblock, s->asrow, s->abytes);
        }
        __atomic_store_n(dtr__ddone(s, me), t, __ATOMIC_RELEASE);
        s->dfinished = true;
        any = true;
    }
    for (int k = 0; k < n; k++)
        if (__atomic_load_n(dtr__ddone(s, k), __ATOMIC_ACQUIRE) < t) return any;
    s->left = 0;
    return true;
}

bool dtr__shm_a2a_progress(dtr__shm_t *s) {
    return s->direct != DTR__DIRECT_OFF ? dtr__direct_a2a_progress(s)
                                        : dtr__all_to_all_progress(s);
}
