/* The shared-memory path (shm.h): the gather, span lists and progress (the all-to-all is in
 * shm_a2a.c, the reductions in shm_reduce.c and shm_direct.c). */
#define _GNU_SOURCE
#include "backends/shm/shm.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "runtime/stream.h"
#include "backends/shm/shm_state.h"

/* A start writes this member's first chunks (below): the others read them only in their
 * progress, after their agreement (dtr__shm_cancel). */
static bool dtr__gather_send(dtr__shm_t *s);

/* Starts a gather on the state's streams: member k's piece is rlen[k] bytes, at roff[k] of
 * the receive stream; this member's is the whole send stream. The chunk count is the
 * largest piece's, so that every member counts alike; a shorter piece's last chunks are
 * empty. */
void dtr__shm_gather_begin(dtr__shm_t *s) {
    int64_t total = 0;
    for (int k = 0; k < s->n; k++) total += s->rlen[k];
    s->gfree = 0;
    /* Streaming stores pay for the gather's large outputs (S(1)->R on 4 ranks at 16 and
     * 64 MiB: 0.58-0.85 of the bare gather's time, 0.93-1.00 with ordinary stores), not for
     * the all-to-all's (no gain, docs/executor.md). */
    s->stream = total >= DTR__STREAM_MIN_BYTES;
    /* this member's writes (its own piece placed on the way), then one piece per sender */
    s->left = s->count > 0 ? s->n : 0;
    dtr__gather_send(s);
}

dtr_status_t dtr__shm_gather_start(dtr__shm_t *s, const void *send, int64_t bytes, void *recv,
                                   int64_t block, int64_t row) {
    DTR_CHECK(dtr__shm_begin(s, DTR__SHM_GATHER, bytes));
    s->ispan[0] = dtr__shm_span(send, bytes, bytes, bytes);
    for (int k = 0; k < s->n; k++) {
        s->ospan[k] = dtr__shm_span((char *)recv + k * block, bytes, block, row);
        s->rlen[k] = bytes;
        s->roff[k] = k * bytes;
    }
    dtr__shm_streams(s, 1, s->n);
    dtr__shm_gather_begin(s);
    return DTR_OK;
}

/* The bytes of member k's gather piece in the chunk at byte `at` of it (0 past its end). */
static int64_t dtr__glen(const dtr__shm_t *s, int k, int64_t at) {
    int64_t left = s->rlen[k] - at;
    return left <= 0 ? 0 : left < s->chunk ? left : s->chunk;
}

/* Writes this member's chunks into its ring while it has room (placing its own piece). */
static bool dtr__gather_send(dtr__shm_t *s) {
    int me = s->me;
    bool any = false;
    while (s->sent[me] < s->count) {
        uint64_t q = s->gearlier + (uint64_t)s->sent[me];
        /* slot q % gslots is free once every reader has read chunk q - gslots */
        if (q >= s->gfree + (uint64_t)s->gslots) {
            s->gfree = dtr__shm_ring_read(s, dtr__gdone);
            if (q >= s->gfree + (uint64_t)s->gslots) break;
        }
        int64_t at = s->sent[me] * s->chunk, len = dtr__glen(s, me, at);
        char *slot = dtr__gslot(s, me, q);
        dtr__spans_read(&s->in, at, len, slot);
        /* this member's own piece, from the same bytes while they are in cache */
        dtr__spans_write(&s->out, s->roff[me] + at, len, slot, s->stream);
        __atomic_store_n(dtr__gready(s, me), q + 1, __ATOMIC_RELEASE);
        any = true;
        if (++s->sent[me] == s->count) s->left--;
    }
    return any;
}

static bool dtr__gather_progress(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = dtr__gather_send(s);
    for (int step = 1; step < n; step++) {
        int from = (me + n - step) % n;
        while (s->got[from] < s->count) {
            uint64_t q = s->gearlier + (uint64_t)s->got[from];
            if (__atomic_load_n(dtr__gready(s, from), __ATOMIC_ACQUIRE) <= q) break;
            int64_t at = s->got[from] * s->chunk, len = dtr__glen(s, from, at);
            dtr__spans_write(&s->out, s->roff[from] + at, len, dtr__gslot(s, from, q),
                             s->stream);
            __atomic_store_n(dtr__gdone(s, from, me), q + 1, __ATOMIC_RELEASE);
            any = true;
            if (++s->got[from] == s->count) s->left--;
        }
    }
    return any;
}

/* Copies a span list into one of the state's arrays; its bytes into *bytes. */
static void dtr__take(dtr_span_t *to, const dtr_span_t *from, int n, int64_t *bytes) {
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        to[i] = from[i];
        *bytes += from[i].rows * from[i].run;
    }
}

/* A cast between a span list of `dtype` and the reduction's float dtype: the span list's element
 * size in *size, or an error when the cast is not one the reductions do or a span's run is not
 * whole elements. `side` names the list ("send", "recv"), `when` the moment ("reading"). */
static dtr_status_t dtr__shm_cast_size(const dtr_spans_op_t *op, const char *side,
                                       const char *when, dtr_dtype_t dtype,
                                       const dtr_span_t *spans, int n, int64_t *size) {
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    if (op->kind == DTR_SPANS_ALL_GATHER || info == NULL || !info->is_float ||
        info->storage_only || !dtr_dtype_info(op->dtype)->is_float)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "shm",
                          "shared-memory spans: a cast on %s is for reductions of float dtypes",
                          when);
    for (int i = 0; i < n; i++)
        if (spans[i].run % info->size != 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, "shm",
                              "shared-memory spans: %s span %d's run of %lld bytes is not "
                              "whole %s elements",
                              side, i, (long long)spans[i].run, dtr_dtype_name(dtype));
    *size = info->size;
    return DTR_OK;
}

dtr_status_t dtr__shm_spans_start(dtr__shm_t *s, const dtr_spans_op_t *op, int64_t esize) {
    static const char *const names[] = {"all-gather", "reduce-scatter", "all-reduce"};
    bool gather = op->kind == DTR_SPANS_ALL_GATHER;
    DTR_CHECK(dtr__shm_busy(s, gather ? DTR__SHM_GATHER : DTR__SHM_REDUCE));
    int most = op->nsend > op->nrecv ? op->nsend : op->nrecv;
    DTR_CHECK(dtr__shm_room(s, most > 0 ? most : 1));
    int64_t sbytes, rbytes, total = 0, largest = 0, unit = gather ? 1 : esize;
    int pieces = op->kind == DTR_SPANS_ALL_REDUCE ? 1 : s->n;
    for (int k = 0; k < pieces; k++) {
        total += op->counts[k] * unit;
        if (op->counts[k] * unit > largest) largest = op->counts[k] * unit;
    }
    dtr__take(s->ispan, op->send, op->nsend, &sbytes);
    dtr__take(s->ospan, op->recv, op->nrecv, &rbytes);
    int64_t fsize = 0, osize = 0; /* the element sizes of a cast on reading, on writing */
    if (op->cast && op->send_dtype != op->dtype)
        DTR_CHECK(dtr__shm_cast_size(op, "send", "reading", op->send_dtype, op->send, op->nsend,
                                     &fsize));
    if (op->recv_cast && op->recv_dtype != op->dtype)
        DTR_CHECK(dtr__shm_cast_size(op, "recv", "writing", op->recv_dtype, op->recv, op->nrecv,
                                     &osize));
    if (fsize > 0) sbytes = sbytes / fsize * esize;
    if (osize > 0) rbytes = rbytes / osize * esize;
    bool divides = (op->pre != 0 && op->pre != 1) || (op->post != 0 && op->post != 1);
    if (divides && (gather || !dtr_dtype_info(op->dtype)->is_float))
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "shm",
                          "shared-memory spans: divides are for reductions of float dtypes");
    int64_t want_s = op->kind == DTR_SPANS_ALL_GATHER ? op->counts[s->me] : total;
    int64_t want_r = op->kind == DTR_SPANS_REDUCE_SCATTER ? op->counts[s->me] * esize : total;
    if (sbytes != want_s || rbytes != want_r)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, "shm",
                          "shared-memory %s over spans: %lld bytes sent and %lld received "
                          "where the counts make %lld and %lld",
                          names[op->kind], (long long)sbytes, (long long)rbytes,
                          (long long)want_s, (long long)want_r);
    DTR_CHECK(dtr__shm_begin(s, gather ? DTR__SHM_GATHER : DTR__SHM_REDUCE, gather ? largest : 0));
    dtr__shm_streams(s, op->nsend, op->nrecv);
    if (fsize > 0) { /* the send stream counts bytes of dtype */
        for (int i = 0; i <= op->nsend; i++) s->istart[i] = s->istart[i] / fsize * esize;
        s->in.from = op->send_dtype;
        s->in.to = op->dtype;
        s->in.from_size = fsize;
        s->in.to_size = esize;
    }
    if (osize > 0) { /* the receive stream counts bytes of dtype too */
        for (int i = 0; i <= op->nrecv; i++) s->ostart[i] = s->ostart[i] / osize * esize;
        s->out.from = op->recv_dtype;
        s->out.to = op->dtype;
        s->out.from_size = osize;
        s->out.to_size = esize;
    }
    if (op->pre != 0 && op->pre != 1) {
        s->in.to = op->dtype;
        s->in.to_size = esize;
        s->in.scale = op->pre;
    }
    s->post = gather ? 0 : op->post;
    if (op->kind == DTR_SPANS_ALL_REDUCE) {
        dtr__shm_all_reduce_pieces(s, op->counts[0], esize);
        return dtr__shm_reduce_start(s, op->dtype, op->op, esize, true);
    }
    int64_t at = 0;
    for (int k = 0; k < s->n; k++) {
        s->rlen[k] = op->counts[k] * unit;
        s->soff[k] = gather ? 0 : at;
        s->roff[k] = gather ? at : 0;
        at += s->rlen[k];
    }
    if (!gather) return dtr__shm_reduce_start(s, op->dtype, op->op, esize, false);
    dtr__shm_gather_begin(s);
    return DTR_OK;
}

/*
 * Takes back what the start of the running operation wrote, before any member read it (the
 * members read only after their agreement, and a failed agreement cancels everywhere): this
 * member's ready counters go back, and the operation counts as a finished one of no chunks.
 */
void dtr__shm_cancel(dtr__shm_t *s) {
    /* (an all-to-all member with nothing to receive may have written all it sends at the
     * start, so it is done here while the receivers never read those chunks) */
    if (s->left == 0 && s->mode != DTR__SHM_TINY && s->mode != DTR__SHM_A2A) return;
    switch (s->mode) {
    case DTR__SHM_A2A:
        for (int to = 0; to < s->n; to++) {
            if (to != s->me)
                __atomic_store_n(dtr__ready(s, s->me, to), (uint64_t)s->asent[to],
                                 __ATOMIC_RELEASE);
            s->scnt[to] = s->rcnt[to] = 0;
        }
        dtr__shm_direct_cancel(s);
        break;
    case DTR__SHM_GATHER:
        __atomic_store_n(dtr__gready(s, s->me), s->gearlier, __ATOMIC_RELEASE);
        if (s->stream) dtr__stream_fence();
        break;
    case DTR__SHM_REDUCE:
        __atomic_store_n(dtr__rready(s, s->me), s->rearlier, __ATOMIC_RELEASE);
        dtr__shm_direct_cancel(s);
        break;
    case DTR__SHM_TINY:
        if (s->left == 0) return;
        /* the number is reused by the next one: no member may take these bytes for it */
        __atomic_store_n((uint64_t *)dtr__tslot(s, s->me, s->tiny), 0, __ATOMIC_RELEASE);
        s->tiny--;
        break;
    }
    s->count = 0;
    s->left = 0;
}

bool dtr__shm_progress(dtr__shm_t *s, bool *moved) {
    bool any = false;
    if (s->left > 0) {
        any = s->mode == DTR__SHM_GATHER   ? dtr__gather_progress(s)
              : s->mode == DTR__SHM_REDUCE
                  ? (s->direct != DTR__DIRECT_OFF ? dtr__shm_direct_progress(s)
                                                  : dtr__shm_reduce_progress(s))
              : s->mode == DTR__SHM_TINY   ? dtr__shm_tiny_progress(s)
                                           : dtr__shm_a2a_progress(s);
        if (s->left == 0 && s->stream) dtr__stream_fence();
    }
    if (moved != NULL) *moved = any;
    return s->left == 0;
}

void dtr__shm_wait(dtr__shm_t *s) {
    bool moved;
    while (!dtr__shm_progress(s, &moved))
        if (!moved) sched_yield(); /* ranks may share cores: let the peer run */
}
