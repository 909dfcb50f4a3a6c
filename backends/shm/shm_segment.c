/* The shared-memory path's segment: mapping it, the state, and what every operation's start
 * does first (shm_state.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "runtime/stream.h"
#include "backends/shm/shm_state.h"

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
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "shm", "shared-memory span lists of %d", n);
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

/* The segment's geometry for n members: ring slots of each kind and a member's region. */
typedef struct {
    int slots, gslots, rslots;
    int64_t rsub, region;
} dtr__shm_geometry_t;

static dtr__shm_geometry_t dtr__shm_geometry(int n, int64_t chunk, int64_t ring) {
    dtr__shm_geometry_t g;
    g.slots = (int)(DTR__SHM_RING_BYTES / ((int64_t)(n - 1) * chunk));
    g.slots = g.slots < 2 ? 2 : g.slots > 8 ? 8 : g.slots;
    int64_t gslots = DTR__SHM_GATHER_BYTES / chunk;
    if (gslots > DTR__SHM_GATHER_SLOTS_MAX) gslots = DTR__SHM_GATHER_SLOTS_MAX;
    g.gslots = gslots < 2 ? 2 : (int)gslots;
    /* a reduction slot holds n sub-pieces of whole cache lines, about a chunk in all */
    g.rsub = (chunk / n) & ~(int64_t)(DTR__LINE - 1);
    if (g.rsub < DTR__LINE) g.rsub = DTR__LINE;
    int64_t rslots = ring / (n * g.rsub);
    g.rslots = (int)(rslots < 2 ? 2 : rslots > DTR__SHM_REDUCE_SLOTS_MAX ? DTR__SHM_REDUCE_SLOTS_MAX
                                                                         : rslots);
    int64_t region = (3 * (int64_t)n + 1) * DTR__LINE + ((int64_t)n * g.slots + g.gslots) * chunk +
                     (2 + (int64_t)n) * DTR__LINE + g.rslots * n * g.rsub +
                     2 * DTR__SHM_TINY_SLOT + 6 * DTR__LINE; /* the agreement's lines, the direct
                                                              * reductions' */
    g.region = (region + 4095) & ~(int64_t)4095;
    return g;
}

/* The segment's name from member 0 (every member gets it, "" where member 0 could not make
 * it), the segment mapped by the others, and whether every member mapped it. member 0
 * unlinks it once all have met, so it goes away with the last mapping whatever happens to
 * the processes. */
static dtr_status_t dtr__shm_meet(dtr__shm_exchange_fn exchange, void *arg, int n, int me,
                                  size_t size, char **out) {
    enum { NAME = 64 };
    char *names = calloc((size_t)n, NAME), name[NAME] = "";
    int *mapped = calloc((size_t)n, sizeof *mapped);
    char *base = NULL;
    if (names == NULL || mapped == NULL) {
        free(names);
        free(mapped);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "shm", "names of %d members", n);
    }
    if (me == 0) {
        static unsigned serial;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        snprintf(name, sizeof name, "/dtr-%ld-%u-%ld", (long)getpid(), serial++, (long)t.tv_nsec);
        base = dtr__shm_map(name, size, true);
        if (base == NULL) name[0] = '\0';
    }
    dtr_status_t st = exchange(arg, name, NAME, names);
    if (st == DTR_OK && me != 0 && names[0] != '\0') {
        memcpy(name, names, NAME);
        name[NAME - 1] = '\0';
        base = dtr__shm_map(name, size, false);
    }
    int mine = base != NULL;
    if (st == DTR_OK) st = exchange(arg, &mine, sizeof mine, mapped);
    if (me == 0 && name[0] != '\0') shm_unlink(name);
    bool all = st == DTR_OK;
    for (int k = 0; k < n && all; k++) all = mapped[k] != 0;
    free(names);
    free(mapped);
    if (!all && base != NULL) munmap(base, size);
    *out = all ? base : NULL;
    return st;
}

dtr_status_t dtr__shm_create(dtr__shm_exchange_fn exchange, void *arg, int n, int me,
                             int64_t chunk, int64_t ring, dtr__shm_t **out) {
    *out = NULL;
    if (n < 2 || n > DTR__SHM_MAX_MEMBERS || chunk <= 0) return DTR_OK;
    dtr__stream_init(); /* the backend runs without a context in tests */
    dtr__shm_geometry_t geo = dtr__shm_geometry(n, chunk, ring);
    size_t size = (size_t)(geo.region * n);
    char *base = NULL;
    DTR_CHECK(dtr__shm_meet(exchange, arg, n, me, size, &base));
    if (base == NULL) return DTR_OK;

    dtr__shm_t *s = calloc(1, sizeof *s);
    int64_t *counts = calloc((size_t)n * 9, sizeof *counts);
    char *scratch = malloc((size_t)(2 * geo.rsub));
    if (s == NULL || counts == NULL || scratch == NULL || dtr__shm_room(s, n) != DTR_OK) {
        if (s != NULL) dtr__free_spans(s);
        free(s);
        free(counts);
        free(scratch);
        munmap(base, size);
        /* the others keep theirs: this member's every later call fails on its own */
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, "shm", "shared-memory group state");
    }
    s->base = base;
    s->size = size;
    s->region = geo.region;
    s->chunk = chunk;
    s->n = n;
    s->me = me;
    s->slots = geo.slots;
    s->gslots = geo.gslots;
    s->rsub = geo.rsub;
    s->rslots = geo.rslots;
    s->sent = counts;
    s->got = counts + n;
    s->rlen = counts + 2 * n;
    s->soff = counts + 3 * n;
    s->roff = counts + 4 * n;
    s->asent = counts + 5 * n;
    s->agot = counts + 6 * n;
    s->scnt = counts + 7 * n;
    s->rcnt = counts + 8 * n;
    s->scratch = scratch;
    *out = s;
    return DTR_OK;
}

void dtr__shm_node_key(char key[256]) {
    char host[128] = "", boot[64] = "";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    struct stat st;
    memset(&st, 0, sizeof st);
    stat("/dev/shm", &st);
    memset(key, 0, 256);
    snprintf(key, 256, "%s|%s|%llx:%llx", host, boot, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
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
        return dtr__error(DTR_ERR_BACKEND, "shm",
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
        for (int k = 0; k < s->n; k++) {
            s->asent[k] += s->scnt[k];
            s->agot[k] += s->rcnt[k];
            s->scnt[k] = s->rcnt[k] = 0;
        }
    s->mode = mode;
    s->stream = false;
    s->direct = DTR__DIRECT_OFF;
    s->dposted = false;
    s->post = 0;
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
