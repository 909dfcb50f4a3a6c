/*
 * The shared-memory path's state and segment layout, for its three files: shm_segment.c
 * (mapping the segment, the state, what every start does first), shm_reduce.c (the
 * reductions and the agreement) and shm.c (the all-to-all, the gather, span lists, progress).
 */
#ifndef DTR_BACKENDS_SHM_SHM_STATE_H
#define DTR_BACKENDS_SHM_SHM_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/shm/shm.h"
#include "backends/shm/span.h"

#define DTR__LINE 64

/* Ring memory per member across its peers; a pair gets 2 to 8 chunks of it. */
#define DTR__SHM_RING_BYTES (1 << 20)
/* A member's gather ring (read by every other member): 2 to 64 chunks of about this much. */
#define DTR__SHM_GATHER_BYTES (1 << 20)
#define DTR__SHM_GATHER_SLOTS_MAX 64
/* A member's reduction ring: `ring` bytes in 2 to this many slots of about a chunk. */
#define DTR__SHM_REDUCE_SLOTS_MAX 1024
/* A tiny all-reduce's slot: its sequence number, then up to DTR__SHM_TINY_MAX bytes. */
#define DTR__SHM_TINY_SLOT (((int64_t)8 + DTR__SHM_TINY_MAX + DTR__LINE - 1) & ~(int64_t)(DTR__LINE - 1))

/*
 * The segment holds one region per member, the sender's. For the all-to-all: 2n cache
 * lines of counters (for each receiver `to`: ready, the chunks the sender has written, and
 * done, the chunks the receiver has read), and for each receiver a ring of `slots` chunks;
 * chunk q of a pair lives in slot q % slots. For the gather, whose chunks every other
 * member reads: one line `gready`, one line `gdone` per reader, and one ring of `gslots`
 * chunks; chunk q lives in slot q % gslots. For the reductions: one line `rready` (chunks
 * whose inputs are written), one line `rout` (chunks whose all-reduce result is written),
 * one line `rdone` per reader, and one ring of `rslots` slots of n sub-pieces of `rsub`
 * bytes: sub-piece k of slot q holds the sender's contribution to member k's piece, and
 * for an all-reduce sub-piece `from` holds the sender's reduced result. For the tiny
 * all-reduce: two slots, used by the parity of the operation's number t, each its number
 * then the member's input (dtr__tslot). For the argument agreement: two lines, used by the
 * parity of the agreement's number a, each a then three int64 (dtr__aslot). Counters only grow, and the kinds keep apart
 * (counters and rings), so that an operation of one kind never waits on another's.
 */
typedef enum { DTR__SHM_A2A, DTR__SHM_GATHER, DTR__SHM_REDUCE, DTR__SHM_TINY } dtr__shm_mode_t;

struct dtr__shm {
    char *base;
    size_t size;
    int64_t region, chunk, rsub;
    int n, me, slots, gslots, rslots;
    uint64_t gearlier, rearlier; /* chunks of earlier gathers and reductions */
    /* the all-to-alls' pairs count apart (their pieces may differ): [n] each, chunks of
     * earlier all-to-alls sent to / received from member k, and the running one's */
    int64_t *asent, *agot, *scnt, *rcnt;
    uint64_t tiny;                        /* tiny all-reduces started, this one included */
    uint64_t agreed;                      /* agreements started, likewise */
    uint64_t gfree, rfree; /* lowest gdone / rdone over the readers, as last seen */
    dtr__shm_mode_t mode;  /* the running (or last) operation's kind */
    bool stream; /* a large gather or all-reduce writes its output with streaming stores */
    int64_t *sent, *got;  /* [n]: chunks of the running operation sent to / received from */
    int left;                     /* pieces of the running operation still moving */
    /* the running operation's send and receive streams, on this state's own span arrays
     * (room for cap spans): an all-to-all's piece for member k in span k of each,
     * a gather's and a reduction's pieces as below */
    dtr__spans_t in, out;
    dtr_span_t *ispan, *ospan;
    int64_t *istart, *ostart;
    int cap;
    int64_t count; /* a gather's or reduction's chunks (an all-to-all's pairs: scnt, rcnt) */
    /* the running gather or reduction: each member's piece (bytes), where it sits in the
     * send and receive streams */
    int64_t *rlen, *soff, *roff;
    void *tiny_out; /* the running tiny all-reduce's output */
    char *scratch; /* two sub-pieces of rsub bytes: a reduction's input or output in one run */
    int64_t reduced; /* chunks of this member's piece reduced */
    bool all;        /* an all-reduce: results go back to every member */
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    int64_t esize;
    double post; /* a reduction over spans: its results divided by this (0: none) */
    /* the reductions that read the members' buffers where they are (shm_direct.c) */
    int direct;           /* DTR__DIRECT_OFF, _WAIT (places posted, the others' unread), _RUN */
    bool dposted;         /* the running reduction posted its places (cancel takes them back) */
    bool dfinished;       /* it is done reading the others' buffers, and said so */
    uint64_t dseq;        /* reductions that posted places, the running one included */
    dtr__shm_shared_t dshared;
    const char *din[DTR__SHM_MAX_MEMBERS]; /* member k's send buffer, in this process */
    const char *dres[DTR__SHM_MAX_MEMBERS]; /* member k's receive buffer (all-reduce) */
    int64_t dchunk, dreduced;
    int64_t direct_ops; /* operations that took the direct form (atomic: dtr_mpi_groups) */
    /* the running direct all-to-all (shm_a2a.c): its receive side, and its start's
     * arguments for the ring form where the members' lines refuse the direct one */
    const char *asend;
    char *arecv;
    int64_t asblock, asrow, arblock, arrow, abytes;
};

enum { DTR__DIRECT_OFF = 0, DTR__DIRECT_WAIT, DTR__DIRECT_RUN };

static inline uint64_t *dtr__ready(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * to) * DTR__LINE);
}

static inline uint64_t *dtr__done(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * to + 1) * DTR__LINE);
}

/* The all-to-all rings follow the 3n + 1 counter lines; the gather ring follows them. */
static inline char *dtr__slot(dtr__shm_t *s, int from, int to, uint64_t q) {
    int64_t slot = (int64_t)(q % (uint64_t)s->slots);
    int64_t at = (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)to * s->slots + slot) * s->chunk;
    return s->base + from * s->region + at;
}

static inline uint64_t *dtr__gready(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + 2 * (int64_t)s->n * DTR__LINE);
}

static inline uint64_t *dtr__gdone(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * (int64_t)s->n + 1 + to) * DTR__LINE);
}

static inline char *dtr__gslot(dtr__shm_t *s, int from, uint64_t q) {
    int64_t slot = (int64_t)(q % (uint64_t)s->gslots);
    int64_t at = (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)s->n * s->slots + slot) * s->chunk;
    return s->base + from * s->region + at;
}

/* The reductions' counters follow the gather ring, and their ring follows them. */
static inline int64_t dtr__rbase(dtr__shm_t *s) {
    return (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)s->n * s->slots + s->gslots) * s->chunk;
}

static inline uint64_t *dtr__rready(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s));
}

static inline uint64_t *dtr__rout(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s) + DTR__LINE);
}

static inline uint64_t *dtr__rdone(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s) + (2 + (int64_t)to) * DTR__LINE);
}

/* Sub-piece k of slot q % rslots of member from's reduction ring. */
static inline char *dtr__rslot(dtr__shm_t *s, int from, uint64_t q, int k) {
    int64_t slot = (int64_t)(q % (uint64_t)s->rslots);
    int64_t at = dtr__rbase(s) + (2 + (int64_t)s->n) * DTR__LINE + (slot * s->n + k) * s->rsub;
    return s->base + from * s->region + at;
}

/* Tiny all-reduce t's slot of member `from`: 8 bytes of t, then the member's input. */
static inline char *dtr__tslot(dtr__shm_t *s, int from, uint64_t t) {
    int64_t at = dtr__rbase(s) + (2 + (int64_t)s->n) * DTR__LINE +
                 (int64_t)s->rslots * s->n * s->rsub + (int64_t)(t % 2) * DTR__SHM_TINY_SLOT;
    return s->base + from * s->region + at;
}

/* Agreement a's line of member `from`: a, then the member's three int64. */
static inline uint64_t *dtr__aslot(dtr__shm_t *s, int from, uint64_t a) {
    return (uint64_t *)(dtr__tslot(s, from, 0) + 2 * DTR__SHM_TINY_SLOT +
                        (int64_t)(a % 2) * DTR__LINE);
}

/*
 * Direct reduction t's line of member `from` (after the agreement's two): t, then the places
 * it posted (shm_direct.c); then one line of its chunks reduced, (t << 24) + chunks, and one
 * of the direct reductions it finished reading for, t.
 */
static inline uint64_t *dtr__dline(dtr__shm_t *s, int from, uint64_t t) {
    return dtr__aslot(s, from, 0) + (2 + (int64_t)(t % 2)) * (DTR__LINE / 8);
}

static inline uint64_t *dtr__dout(dtr__shm_t *s, int from) {
    return dtr__aslot(s, from, 0) + 4 * (DTR__LINE / 8);
}

static inline uint64_t *dtr__ddone(dtr__shm_t *s, int from) {
    return dtr__aslot(s, from, 0) + 5 * (DTR__LINE / 8);
}

/* Shared by the three files (shm_segment.c the first six, shm.c the gather's start,
 * shm_reduce.c the rest). */
/* A POSIX shared-memory segment of `size` bytes named `name`, created (O_EXCL, its pages
 * reserved: a full /dev/shm fails here, not with SIGBUS later) or opened; NULL on failure. */
char *dtr__shm_map(const char *name, size_t size, bool create);
dtr_status_t dtr__shm_busy(dtr__shm_t *s, dtr__shm_mode_t mode);
dtr_status_t dtr__shm_begin(dtr__shm_t *s, dtr__shm_mode_t mode, int64_t bytes);
dtr_status_t dtr__shm_room(dtr__shm_t *s, int n);
void dtr__shm_streams(dtr__shm_t *s, int ni, int no);
dtr_span_t dtr__shm_span(const void *base, int64_t bytes, int64_t run, int64_t stride);
uint64_t dtr__shm_ring_read(dtr__shm_t *s, uint64_t *(*done)(dtr__shm_t *, int, int));
void dtr__shm_gather_begin(dtr__shm_t *s);
bool dtr__shm_reduce_send(dtr__shm_t *s);
dtr_status_t dtr__shm_reduce_start(dtr__shm_t *s, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                   int64_t esize, bool all);
void dtr__shm_all_reduce_pieces(dtr__shm_t *s, int64_t count, int64_t esize);
bool dtr__shm_reduce_progress(dtr__shm_t *s);
bool dtr__shm_tiny_progress(dtr__shm_t *s);
/* shm_direct.c: posts this member's places for a reduction whose pieces and streams are
 * set (starting the ring form at once where this member's buffers cannot be read where
 * they are), progresses it, takes the places back */
dtr_status_t dtr__shm_direct_start(dtr__shm_t *s, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                   int64_t esize, bool all, const dtr__shm_shared_t *shared);
bool dtr__shm_direct_progress(dtr__shm_t *s);
void dtr__shm_direct_cancel(dtr__shm_t *s);
/* shm_a2a.c: the running all-to-all's progress, either form */
bool dtr__shm_a2a_progress(dtr__shm_t *s);

#endif
