/* The shared-memory path's segment: mapping it, the state, and what every operation's start
 * does first (shm_state.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "runtime/stream.h"
#include "backends/mpi/error.h"
#include "backends/mpi/shm_state.h"

/* Maps the segment named `name` (created by member 0, which passes create). */
char *dtr__shm_map(const char *name, size_t size, bool create) {
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

static void dtr__free_spans(dtr__shm_t *s) {
    free(s->ispan);
    free(s->ospan);
    free(s->istart);
    free(s->ostart);
}

/* Room for streams of up to n spans (the state unchanged where it fails). */
dtr_status_t dtr__shm_room(dtr__shm_t *s, int n) {
    if (n <= s->cap) return DTR_OK;
    dtr_span_t *is = malloc(sizeof *is * (size_t)n), *os = malloc(sizeof *os * (size_t)n);
    int64_t *ist = malloc(sizeof *ist * ((size_t)n + 1)), *ost = malloc(sizeof *ost * ((size_t)n + 1));
    if (is == NULL || os == NULL || ist == NULL || ost == NULL) {
        free(is);
        free(os);
        free(ist);
        free(ost);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "mpi", "shared-memory span lists of %d", n);
    }
    dtr__free_spans(s);
    s->ispan = is;
    s->ospan = os;
    s->istart = ist;
    s->ostart = ost;
    s->cap = n;
    return DTR_OK;
}

/* Indexes the first n spans of the state's send (ni) and receive (no) arrays as its streams. */
void dtr__shm_streams(dtr__shm_t *s, int ni, int no) {
    dtr__spans_index(s->ispan, ni, s->istart);
    dtr__spans_index(s->ospan, no, s->ostart);
    s->in = (dtr__spans_t){.span = s->ispan, .start = s->istart, .n = ni};
    s->out = (dtr__spans_t){.span = s->ospan, .start = s->ostart, .n = no};
}

/* A span of `bytes` bytes in rows of `run`, `stride` apart ((char *) of the caller's buffer). */
dtr_span_t dtr__shm_span(const void *base, int64_t bytes, int64_t run, int64_t stride) {
    return (dtr_span_t){.base = (char *)base, .rows = run > 0 ? bytes / run : 0, .run = run,
                        .stride = stride};
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
                     6 * DTR__LINE; /* the agreement's lines, the direct reductions' */
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
        base = dtr__shm_map(name, size, true);
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
    if (me != 0 && name[0] != '\0') base = dtr__shm_map(name, size, false);
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
    char *scratch = malloc((size_t)(2 * rsub));
    if (s == NULL || counts == NULL || scratch == NULL || dtr__shm_room(s, n) != DTR_OK) {
        if (s != NULL) dtr__free_spans(s);
        free(s);
        free(counts);
        free(scratch);
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
    s->scratch = scratch;
    *out = s;
    return DTR_OK;
}

void dtr__shm_destroy(dtr__shm_t *s) {
    if (s == NULL) return;
    munmap(s->base, s->size);
    free(s->sent);
    free(s->scratch);
    dtr__free_spans(s);
    free(s);
}

/* DTR_ERR_BACKEND while the group's previous operation is not complete. */
dtr_status_t dtr__shm_busy(dtr__shm_t *s, dtr__shm_mode_t mode) {
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
dtr_status_t dtr__shm_begin(dtr__shm_t *s, dtr__shm_mode_t mode, int64_t bytes) {
    DTR_CHECK(dtr__shm_busy(s, mode));
    /* every operation moves `count` chunks each way between every pair */
    if (s->mode == DTR__SHM_GATHER)
        s->gearlier += (uint64_t)s->count;
    else if (s->mode == DTR__SHM_REDUCE)
        s->rearlier += (uint64_t)s->count;
    else if (s->mode == DTR__SHM_A2A)
        s->earlier += (uint64_t)s->count;
    s->mode = mode;
    s->stream = false;
    s->direct = DTR__DIRECT_OFF;
    s->dposted = false;
    s->post = 0;
    s->bytes = bytes;
    s->count = mode == DTR__SHM_REDUCE ? 0 : (bytes + s->chunk - 1) / s->chunk;
    memset(s->sent, 0, sizeof(int64_t) * (size_t)s->n);
    memset(s->got, 0, sizeof(int64_t) * (size_t)s->n);
    return DTR_OK;
}

/* The lowest chunk count every reader of this member's ring is done with, by the readers'
 * counters `done` (dtr__gdone for the gather ring, dtr__rdone for the reduction ring). */
uint64_t dtr__shm_ring_read(dtr__shm_t *s, uint64_t *(*done)(dtr__shm_t *, int, int)) {
    uint64_t low = UINT64_MAX;
    for (int to = 0; to < s->n; to++) {
        if (to == s->me) continue;
        uint64_t d = __atomic_load_n(done(s, s->me, to), __ATOMIC_ACQUIRE);
        if (d < low) low = d;
    }
    return low;
}
