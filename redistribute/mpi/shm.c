/* The shared-memory path of the MPI backend's strided all-to-all (see shm.h). */
#define _GNU_SOURCE
#include "redistribute/mpi/shm.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "dtensor/internal.h"
#include "redistribute/executor/stream.h"
#include "redistribute/mpi/internal.h"

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
    uint64_t earlier, gearlier, rearlier; /* chunks of earlier operations of each kind */
    uint64_t tiny;                        /* tiny all-reduces started, this one included */
    uint64_t agreed;                      /* agreements started, likewise */
    uint64_t gfree, rfree; /* lowest gdone / rdone over the readers, as last seen */
    dtr__shm_mode_t mode;  /* the running (or last) operation's kind */
    bool stream; /* a large gather or all-reduce writes its output with streaming stores */
    int64_t *sent, *got;  /* [n]: chunks of the running operation sent to / received from */
    int left;                     /* pieces of the running operation still moving */
    const char *send;
    char *recv;
    int64_t sblock, srow, rblock, rrow, bytes, count;
    /* the running reduction: each member's piece (bytes), where it sits in send and recv */
    int64_t *rlen, *soff, *roff;
    int64_t reduced; /* chunks of this member's piece reduced */
    bool all;        /* an all-reduce: results go back to every member */
    dtr_dtype_t dtype;
    dtr_reduce_op_t op;
    int64_t esize;
};

static uint64_t *dtr__ready(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * to) * DTR__LINE);
}

static uint64_t *dtr__done(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * to + 1) * DTR__LINE);
}

/* The all-to-all rings follow the 3n + 1 counter lines; the gather ring follows them. */
static char *dtr__slot(dtr__shm_t *s, int from, int to, uint64_t q) {
    int64_t slot = (int64_t)(q % (uint64_t)s->slots);
    int64_t at = (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)to * s->slots + slot) * s->chunk;
    return s->base + from * s->region + at;
}

static uint64_t *dtr__gready(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + 2 * (int64_t)s->n * DTR__LINE);
}

static uint64_t *dtr__gdone(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + (2 * (int64_t)s->n + 1 + to) * DTR__LINE);
}

static char *dtr__gslot(dtr__shm_t *s, int from, uint64_t q) {
    int64_t slot = (int64_t)(q % (uint64_t)s->gslots);
    int64_t at = (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)s->n * s->slots + slot) * s->chunk;
    return s->base + from * s->region + at;
}

/* The reductions' counters follow the gather ring, and their ring follows them. */
static int64_t dtr__rbase(dtr__shm_t *s) {
    return (3 * (int64_t)s->n + 1) * DTR__LINE + ((int64_t)s->n * s->slots + s->gslots) * s->chunk;
}

static uint64_t *dtr__rready(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s));
}

static uint64_t *dtr__rout(dtr__shm_t *s, int from) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s) + DTR__LINE);
}

static uint64_t *dtr__rdone(dtr__shm_t *s, int from, int to) {
    return (uint64_t *)(s->base + from * s->region + dtr__rbase(s) + (2 + (int64_t)to) * DTR__LINE);
}

/* Sub-piece k of slot q % rslots of member from's reduction ring. */
static char *dtr__rslot(dtr__shm_t *s, int from, uint64_t q, int k) {
    int64_t slot = (int64_t)(q % (uint64_t)s->rslots);
    int64_t at = dtr__rbase(s) + (2 + (int64_t)s->n) * DTR__LINE + (slot * s->n + k) * s->rsub;
    return s->base + from * s->region + at;
}

/* Tiny all-reduce t's slot of member `from`: 8 bytes of t, then the member's input. */
static char *dtr__tslot(dtr__shm_t *s, int from, uint64_t t) {
    int64_t at = dtr__rbase(s) + (2 + (int64_t)s->n) * DTR__LINE +
                 (int64_t)s->rslots * s->n * s->rsub + (int64_t)(t % 2) * DTR__SHM_TINY_SLOT;
    return s->base + from * s->region + at;
}

/* Agreement a's line of member `from`: a, then the member's three int64. */
static uint64_t *dtr__aslot(dtr__shm_t *s, int from, uint64_t a) {
    return (uint64_t *)(dtr__tslot(s, from, 0) + 2 * DTR__SHM_TINY_SLOT +
                        (int64_t)(a % 2) * DTR__LINE);
}

/* Maps the segment named `name` (created by member 0, which passes create). */
static char *dtr__map(const char *name, size_t size, bool create) {
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) return NULL;
    /* fallocate, not ftruncate: a full /dev/shm fails here instead of with SIGBUS later */
    if (create && posix_fallocate(fd, 0, (off_t)size) != 0) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (create) shm_unlink(name);
        return NULL;
    }
    return p;
}

dtr_status_t dtr__shm_create(MPI_Comm comm, int n, int me, int64_t chunk, int64_t ring,
                             dtr__shm_t **out) {
    *out = NULL;
    if (n < 2 || n > DTR__SHM_MAX_MEMBERS || chunk <= 0) return DTR_OK;
    dtr__stream_init(); /* the backend runs without a context in tests */
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return dtr__mpi_error(rc, "MPI_Comm_split_type");
    int on_node = 0;
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    if (on_node != n) return DTR_OK; /* every member sees the same: n only when all share it */

    int slots = (int)(DTR__SHM_RING_BYTES / ((int64_t)(n - 1) * chunk));
    slots = slots < 2 ? 2 : slots > 8 ? 8 : slots;
    int64_t gslots = DTR__SHM_GATHER_BYTES / chunk;
    if (gslots > DTR__SHM_GATHER_SLOTS_MAX) gslots = DTR__SHM_GATHER_SLOTS_MAX;
    if (gslots < 2) gslots = 2;
    /* a reduction slot holds n sub-pieces of whole cache lines, about a chunk in all */
    int64_t rsub = (chunk / n) & ~(int64_t)(DTR__LINE - 1);
    if (rsub < DTR__LINE) rsub = DTR__LINE;
    int64_t rslots = ring / (n * rsub);
    rslots = rslots < 2 ? 2 : rslots > DTR__SHM_REDUCE_SLOTS_MAX ? DTR__SHM_REDUCE_SLOTS_MAX : rslots;
    int64_t region = (3 * (int64_t)n + 1) * DTR__LINE + ((int64_t)n * slots + gslots) * chunk +
                     (2 + (int64_t)n) * DTR__LINE + rslots * n * rsub + 2 * DTR__SHM_TINY_SLOT +
                     2 * DTR__LINE;
    region = (region + 4095) & ~(int64_t)4095;
    size_t size = (size_t)(region * n);

    /* member 0 names and creates the segment, the others open it; then it is unlinked, so
     * that it goes away with the last mapping whatever happens to the processes */
    char name[64] = "";
    char *base = NULL;
    if (me == 0) {
        static unsigned serial;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        snprintf(name, sizeof name, "/dtr-%ld-%u-%ld", (long)getpid(), serial++, (long)t.tv_nsec);
        base = dtr__map(name, size, true);
        if (base == NULL) name[0] = '\0';
    }
    rc = MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, comm);
    if (rc != MPI_SUCCESS) {
        if (base != NULL) {
            munmap(base, size);
            shm_unlink(name);
        }
        return dtr__mpi_error(rc, "MPI_Bcast (shared-memory segment name)");
    }
    if (me != 0 && name[0] != '\0') base = dtr__map(name, size, false);
    int mapped = base != NULL, all = 0;
    rc = MPI_Allreduce(&mapped, &all, 1, MPI_INT, MPI_MIN, comm);
    if (me == 0 && name[0] != '\0') shm_unlink(name);
    if (rc != MPI_SUCCESS || !all) {
        if (base != NULL) munmap(base, size);
        return rc != MPI_SUCCESS ? dtr__mpi_error(rc, "MPI_Allreduce (shared-memory segment)")
                                 : DTR_OK;
    }

    dtr__shm_t *s = calloc(1, sizeof *s);
    int64_t *counts = calloc((size_t)n * 5, sizeof *counts);
    if (s == NULL || counts == NULL) {
        free(s);
        free(counts);
        munmap(base, size);
        /* the others keep theirs: this member's every later call fails on its own */
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "shared-memory group state");
    }
    s->base = base;
    s->size = size;
    s->region = region;
    s->chunk = chunk;
    s->n = n;
    s->me = me;
    s->slots = slots;
    s->gslots = (int)gslots;
    s->rsub = rsub;
    s->rslots = (int)rslots;
    s->sent = counts;
    s->got = counts + n;
    s->rlen = counts + 2 * n;
    s->soff = counts + 3 * n;
    s->roff = counts + 4 * n;
    *out = s;
    return DTR_OK;
}

void dtr__shm_destroy(dtr__shm_t *s) {
    if (s == NULL) return;
    munmap(s->base, s->size);
    free(s->sent);
    free(s);
}

/* A start writes this member's first chunks (below): the others read them only in their
 * progress, after their agreement (dtr__shm_cancel). */
static bool dtr__all_to_all_send(dtr__shm_t *s, int to);
static bool dtr__gather_send(dtr__shm_t *s);
static bool dtr__reduce_send(dtr__shm_t *s);

/* DTR_ERR_BACKEND while the group's previous operation is not complete. */
static dtr_status_t dtr__busy(dtr__shm_t *s, dtr__shm_mode_t mode) {
    static const char *const names[] = {"all-to-all", "gather", "reduction", "tiny all-reduce"};
    if (s->left > 0)
        return dtr__error(DTR_ERR_BACKEND, "mpi",
                          "shared-memory %s: the group's previous operation never completed "
                          "(its chunks would be taken for this one's)",
                          names[mode]);
    return DTR_OK;
}

/* Refuses a start over an unfinished operation, then counts the last one's chunks as
 * earlier ones of its kind. */
static dtr_status_t dtr__begin(dtr__shm_t *s, dtr__shm_mode_t mode, int64_t bytes) {
    DTR_CHECK(dtr__busy(s, mode));
    /* every operation moves `count` chunks each way between every pair */
    if (s->mode == DTR__SHM_GATHER)
        s->gearlier += (uint64_t)s->count;
    else if (s->mode == DTR__SHM_REDUCE)
        s->rearlier += (uint64_t)s->count;
    else if (s->mode == DTR__SHM_A2A)
        s->earlier += (uint64_t)s->count;
    s->mode = mode;
    s->stream = false;
    s->bytes = bytes;
    s->count = mode == DTR__SHM_REDUCE ? 0 : (bytes + s->chunk - 1) / s->chunk;
    memset(s->sent, 0, sizeof(int64_t) * (size_t)s->n);
    memset(s->got, 0, sizeof(int64_t) * (size_t)s->n);
    return DTR_OK;
}

dtr_status_t dtr__shm_start(dtr__shm_t *s, const void *send, int64_t sblock, int64_t srow,
                            void *recv, int64_t rblock, int64_t rrow, int64_t bytes) {
    DTR_CHECK(dtr__begin(s, DTR__SHM_A2A, bytes));
    s->send = send;
    s->recv = recv;
    s->sblock = sblock;
    s->srow = srow;
    s->rblock = rblock;
    s->rrow = rrow;
    s->left = s->count > 0 ? 2 * (s->n - 1) : 0;
    for (int to = 0; to < s->n; to++)
        if (to != s->me) dtr__all_to_all_send(s, to);
    return DTR_OK;
}

dtr_status_t dtr__shm_gather_start(dtr__shm_t *s, const void *send, int64_t bytes, void *recv,
                                   int64_t block, int64_t row) {
    DTR_CHECK(dtr__begin(s, DTR__SHM_GATHER, bytes));
    s->send = send;
    s->recv = recv;
    s->rblock = block;
    s->rrow = row;
    s->gfree = 0;
    /* Streaming stores pay for the gather's large outputs (S(1)->R on 4 ranks at 16 and
     * 64 MiB: 0.58-0.85 of the bare gather's time, 0.93-1.00 with ordinary stores), not for
     * the all-to-all's (no gain, docs/executor.md). */
    s->stream = bytes * s->n >= DTR__STREAM_MIN_BYTES;
    /* this member's writes (its own piece placed on the way), then one piece per sender */
    s->left = s->count > 0 ? s->n : 0;
    dtr__gather_send(s);
    return DTR_OK;
}

/* Copies bytes [at, at + len) of a piece (rows of `block` bytes, `row` apart, from `piece`)
 * to the contiguous `flat`, or from it (pack false; with streaming stores where `stream`).
 * Short runs far apart are fetched ahead: the hardware prefetcher stops at each gap. */
static void dtr__range(char *piece, int64_t block, int64_t row, int64_t at, int64_t len,
                       char *flat, bool pack, bool stream) {
    int64_t i = at / block, c = at % block;
    int64_t ahead = 0;
    /* (streaming stores bypass the cache: nothing to fetch for them) */
    if (row != block && block <= DTR__PREFETCH_RUN_MAX && !stream)
        ahead = (DTR__PREFETCH_RUN_MAX + block - 1) / block;
    while (len > 0) {
        int64_t run = block - c < len ? block - c : len;
        char *p = piece + i * row + c;
        if (ahead > 0) {
            const char *next = p + ahead * row;
            for (int64_t b = 0; b < run; b += DTR__LINE) {
                if (pack)
                    __builtin_prefetch(next + b, 0, 3);
                else
                    __builtin_prefetch(next + b, 1, 3);
            }
        }
        if (pack)
            memcpy(flat, p, (size_t)run);
        else if (stream)
            dtr__stream_copy(p, flat, run);
        else
            memcpy(p, flat, (size_t)run);
        flat += run;
        len -= run;
        i++;
        c = 0;
    }
}

/* Writes this member's chunks for `to` while the pair's ring has room. */
static bool dtr__all_to_all_send(dtr__shm_t *s, int to) {
    int me = s->me;
    bool any = false;
    while (s->sent[to] < s->count) {
        uint64_t q = s->earlier + (uint64_t)s->sent[to];
        /* slot q % slots is free once the receiver has read chunk q - slots */
        if (q >= __atomic_load_n(dtr__done(s, me, to), __ATOMIC_ACQUIRE) + (uint64_t)s->slots)
            break;
        int64_t at = s->sent[to] * s->chunk;
        int64_t len = s->bytes - at < s->chunk ? s->bytes - at : s->chunk;
        dtr__range((char *)s->send + to * s->sblock, s->sblock, s->srow, at, len,
                   dtr__slot(s, me, to, q), true, false);
        __atomic_store_n(dtr__ready(s, me, to), q + 1, __ATOMIC_RELEASE);
        any = true;
        if (++s->sent[to] == s->count) s->left--;
    }
    return any;
}

static bool dtr__all_to_all_progress(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = false;
    for (int step = 1; step < n && s->left > 0; step++) {
        int to = (me + step) % n, from = (me + n - step) % n;
        any |= dtr__all_to_all_send(s, to);
        while (s->got[from] < s->count) {
            uint64_t q = s->earlier + (uint64_t)s->got[from];
            if (__atomic_load_n(dtr__ready(s, from, me), __ATOMIC_ACQUIRE) <= q) break;
            int64_t at = s->got[from] * s->chunk;
            int64_t len = s->bytes - at < s->chunk ? s->bytes - at : s->chunk;
            dtr__range(s->recv + from * s->rblock, s->rblock, s->rrow, at, len,
                       dtr__slot(s, from, me, q), false, false);
            __atomic_store_n(dtr__done(s, from, me), q + 1, __ATOMIC_RELEASE);
            any = true;
            if (++s->got[from] == s->count) s->left--;
        }
    }
    return any;
}

/* The lowest chunk count every reader of this member's ring is done with, by the readers'
 * counters `done` (dtr__gdone for the gather ring, dtr__rdone for the reduction ring). */
static uint64_t dtr__ring_read(dtr__shm_t *s, uint64_t *(*done)(dtr__shm_t *, int, int)) {
    uint64_t low = UINT64_MAX;
    for (int to = 0; to < s->n; to++) {
        if (to == s->me) continue;
        uint64_t d = __atomic_load_n(done(s, s->me, to), __ATOMIC_ACQUIRE);
        if (d < low) low = d;
    }
    return low;
}

/* Writes this member's chunks into its ring while it has room (placing its own piece). */
static bool dtr__gather_send(dtr__shm_t *s) {
    int me = s->me;
    bool any = false;
    char *own = s->recv + me * s->rblock;
    while (s->sent[me] < s->count) {
        uint64_t q = s->gearlier + (uint64_t)s->sent[me];
        /* slot q % gslots is free once every reader has read chunk q - gslots */
        if (q >= s->gfree + (uint64_t)s->gslots) {
            s->gfree = dtr__ring_read(s, dtr__gdone);
            if (q >= s->gfree + (uint64_t)s->gslots) break;
        }
        int64_t at = s->sent[me] * s->chunk;
        int64_t len = s->bytes - at < s->chunk ? s->bytes - at : s->chunk;
        memcpy(dtr__gslot(s, me, q), s->send + at, (size_t)len);
        /* this member's own piece, from the same bytes while they are in cache */
        dtr__range(own, s->rblock, s->rrow, at, len, (char *)s->send + at, false, s->stream);
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
            int64_t at = s->got[from] * s->chunk;
            int64_t len = s->bytes - at < s->chunk ? s->bytes - at : s->chunk;
            dtr__range(s->recv + from * s->rblock, s->rblock, s->rrow, at, len,
                       dtr__gslot(s, from, q), false, s->stream);
            __atomic_store_n(dtr__gdone(s, from, me), q + 1, __ATOMIC_RELEASE);
            any = true;
            if (++s->got[from] == s->count) s->left--;
        }
    }
    return any;
}

/*
 * Starts a reduction of n pieces: member k's piece is len[k] bytes at send + soff[k] on
 * every member, reduced into recv + roff[k] on member k (all: on every member).
 */
static dtr_status_t dtr__reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                      dtr_dtype_t dtype, dtr_reduce_op_t op, int64_t esize,
                                      bool all) {
    DTR_CHECK(dtr__begin(s, DTR__SHM_REDUCE, 0));
    int64_t most = 0;
    for (int k = 0; k < s->n; k++)
        if (s->rlen[k] > most) most = s->rlen[k];
    s->send = send;
    s->recv = recv;
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
    dtr__reduce_send(s);
    return DTR_OK;
}

dtr_status_t dtr__shm_reduce_scatter_start(dtr__shm_t *s, const void *send, void *recv,
                                           const int64_t *counts, dtr_dtype_t dtype,
                                           dtr_reduce_op_t op, int64_t esize) {
    DTR_CHECK(dtr__busy(s, DTR__SHM_REDUCE)); /* before the running one's pieces change */
    int64_t at = 0;
    for (int k = 0; k < s->n; k++) {
        s->rlen[k] = counts[k] * esize;
        s->soff[k] = at;
        s->roff[k] = 0;
        at += s->rlen[k];
    }
    return dtr__reduce_start(s, send, recv, dtype, op, esize, false);
}

dtr_status_t dtr__shm_all_reduce_start(dtr__shm_t *s, const void *send, void *recv,
                                       int64_t count, dtr_dtype_t dtype, dtr_reduce_op_t op,
                                       int64_t esize) {
    DTR_CHECK(dtr__busy(s, DTR__SHM_REDUCE));
    int64_t piece = (count + s->n - 1) / s->n;
    for (int k = 0; k < s->n; k++) {
        int64_t first = k * piece, end = first + piece < count ? first + piece : count;
        s->rlen[k] = (end > first ? end - first : 0) * esize;
        s->soff[k] = s->roff[k] = (first < count ? first : count) * esize;
    }
    return dtr__reduce_start(s, send, recv, dtype, op, esize, true);
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
        return dtr__error(DTR_ERR_INTERNAL, "mpi", "tiny all-reduce of %lld bytes",
                          (long long)(count * esize));
    DTR_CHECK(dtr__begin(s, DTR__SHM_TINY, 0));
    uint64_t t = ++s->tiny;
    char *slot = dtr__tslot(s, s->me, t);
    memcpy(slot + 8, send, (size_t)(count * esize));
    __atomic_store_n((uint64_t *)slot, t, __ATOMIC_RELEASE);
    s->recv = recv;
    s->count = count;
    s->dtype = dtype;
    s->op = op;
    s->left = 1;
    return DTR_OK;
}

static bool dtr__tiny_progress(dtr__shm_t *s) {
    const void *in[DTR__SHM_MAX_MEMBERS];
    for (int k = 0; k < s->n; k++) {
        char *slot = dtr__tslot(s, k, s->tiny);
        if (__atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE) != s->tiny) return false;
        in[k] = slot + 8;
    }
    if (s->count > 0) dtr__reduce_n(s->dtype, s->op, in, s->n, s->recv, s->count);
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
static bool dtr__reduce_send(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = false;
    while (s->sent[me] < s->count) {
        int64_t c = s->sent[me], at;
        uint64_t q = s->rearlier + (uint64_t)c;
        if (q >= s->rfree + (uint64_t)s->rslots) {
            s->rfree = dtr__ring_read(s, dtr__rdone);
            if (q >= s->rfree + (uint64_t)s->rslots) break;
        }
        for (int k = 0; k < n; k++) {
            if (k == me) continue;
            int64_t len = dtr__rpart(s, k, c, &at);
            if (len > 0) memcpy(dtr__rslot(s, me, q, k), s->send + s->soff[k] + at, (size_t)len);
        }
        __atomic_store_n(dtr__rready(s, me), q + 1, __ATOMIC_RELEASE);
        s->sent[me]++;
        any = true;
    }
    return any;
}

static bool dtr__reduce_progress(dtr__shm_t *s) {
    int n = s->n, me = s->me;
    bool any = dtr__reduce_send(s);
    while (s->reduced < s->sent[me]) {
        int64_t c = s->reduced, at;
        uint64_t q = s->rearlier + (uint64_t)c;
        const void *in[DTR__SHM_MAX_MEMBERS];
        int64_t len = dtr__rpart(s, me, c, &at);
        int k = 0;
        for (; k < n; k++) {
            if (k == me) {
                in[k] = s->send + s->soff[me] + at;
                continue;
            }
            if (__atomic_load_n(dtr__rready(s, k), __ATOMIC_ACQUIRE) <= q) break;
            in[k] = dtr__rslot(s, k, q, me);
        }
        if (k < n) break;
        char *out = s->recv + s->roff[me] + at;
        if (len > 0) dtr__reduce_n(s->dtype, s->op, in, n, out, len / s->esize);
        if (s->all) {
            if (len > 0) memcpy(dtr__rslot(s, me, q, me), out, (size_t)len);
            __atomic_store_n(dtr__rout(s, me), q + 1, __ATOMIC_RELEASE);
        }
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
            if (len > 0 && s->stream)
                dtr__stream_copy(s->recv + s->roff[from] + at, dtr__rslot(s, from, q, from), len);
            else if (len > 0)
                memcpy(s->recv + s->roff[from] + at, dtr__rslot(s, from, q, from), (size_t)len);
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
bool dtr__shm_agree_progress(dtr__shm_t *s, uint64_t a, int64_t *recv) {
    int64_t most[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
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

/*
 * Takes back what the start of the running operation wrote, before any member read it (the
 * members read only after their agreement, and a failed agreement cancels everywhere): this
 * member's ready counters go back, and the operation counts as a finished one of no chunks.
 */
void dtr__shm_cancel(dtr__shm_t *s) {
    if (s->left == 0 && s->mode != DTR__SHM_TINY) return;
    switch (s->mode) {
    case DTR__SHM_A2A:
        for (int to = 0; to < s->n; to++)
            if (to != s->me) __atomic_store_n(dtr__ready(s, s->me, to), s->earlier, __ATOMIC_RELEASE);
        break;
    case DTR__SHM_GATHER:
        __atomic_store_n(dtr__gready(s, s->me), s->gearlier, __ATOMIC_RELEASE);
        if (s->stream) dtr__stream_fence();
        break;
    case DTR__SHM_REDUCE:
        __atomic_store_n(dtr__rready(s, s->me), s->rearlier, __ATOMIC_RELEASE);
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
              : s->mode == DTR__SHM_REDUCE ? dtr__reduce_progress(s)
              : s->mode == DTR__SHM_TINY   ? dtr__tiny_progress(s)
                                           : dtr__all_to_all_progress(s);
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
