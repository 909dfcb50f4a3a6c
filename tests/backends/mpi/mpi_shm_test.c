/*
 * The MPI backend's strided all-to-all and all-gather, called directly through its ops
 * table: random pieces (rows of 1 byte to 20 KB, row gaps, an all-to-all's receive side cut
 * into other rows than its send side) over two groups of the same ranks in opposite orders,
 * blocking and non-blocking, the two operations mixed case after case on the same groups (so
 * the shared-memory rings' counters carry over and wrap, each kind's apart from the other's).
 * Every byte of the receive buffer is checked: the pieces moved, and that the gaps, the bytes
 * past the buffer and (all-to-all) the own piece are not written; and that the send buffer
 * is intact. One gather is large enough to be written with streaming stores. Where the
 * shared-memory path is on (DTR_MPI_SHM unset), also: mismatched piece sizes give
 * DTR_ERR_INVALID_ARGUMENT and leave the group usable; an operation issued over one not yet
 * completed gives DTR_ERR_BACKEND (the first still completes right), for each pairing of the
 * two kinds; strided_in_place says the groups gather in place (unless DTR_MPI_SHM_GATHER=0);
 * bad DTR_MPI_SHM_CHUNK values are refused by name. Run it with DTR_MPI_SHM_CHUNK small to
 * move each piece in many chunks, with DTR_MPI_SHM_GATHER=0 for MPI's strided gather, and
 * with DTR_MPI_SHM=0 for MPI_Alltoallw and that gather. With --shared, the send buffers lie
 * in a shared allocation (mem_alloc) at offsets that differ between ranks, one member's on
 * the heap now and then: the all-to-alls then read the others' send buffers where they are
 * (shm_a2a.c) where every member's is in it, the ring form otherwise, and the test
 * counts that each took the form it should.
 *
 * Usage: mpirun -n N mpi_shm_test [--cases N] [--seed S] [--shared]
 * Prints one line per failing case (seed and case number to rerun it) and a summary;
 * exits non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/mpi_paths.h"

#define GUARD 64
#define FILL_GAP 0xA5
#define FILL_RECV 0x5A
#define GATHER (-7) /* the `to` of a gathered piece's bytes: every member gets the same */
#define ARENA ((int64_t)12 << 20) /* --shared: each rank's part of the allocation */

static uint64_t rng_state;

static uint64_t rng(void) {
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int64_t pick(int64_t n) { return (int64_t)(rng() % (uint64_t)n); }

/* Byte j of the piece member `from` sends member `to` in case c. */
static unsigned char value(int from, int to, int64_t j, int c) {
    uint64_t x = (uint64_t)from * 1000003u + (uint64_t)to * 7919u + (uint64_t)j * 31u + (uint64_t)c;
    x ^= x >> 13;
    x *= 0x9e3779b97f4a7c15ull;
    return (unsigned char)(x >> 56);
}

typedef struct {
    int64_t rows, block, row;
} side_t;

static int64_t side_bytes(side_t s, int n) { return (s.rows - 1) * s.row + n * s.block; }

/* Byte j of piece k of a side lives at this offset. */
static int64_t side_at(side_t s, int k, int64_t j) {
    return (j / s.block) * s.row + k * s.block + j % s.block;
}

static int failures;
static int64_t direct_seen, direct_want; /* --shared: all-to-alls read where they are */

/* The operations of group g (its place in dtr_mpi_groups) that read shared buffers where
 * they are. */
static int64_t direct_ops(int g) {
    dtr_mpi_group_info_t info[2];
    int live = 0;
    if (dtr_mpi_groups(info, 2, &live) != DTR_OK || live <= g) return -1;
    return info[g].direct_ops;
}

static void fail(int rank, int c, uint64_t seed, const char *what) {
    if (failures++ < 10)
        printf("FAIL rank %d case %d (rerun: --seed %llu, case %d): %s\n", rank, c,
               (unsigned long long)seed, c, what);
}

/* One case: runs the op on `group` (this member is `me` of n) and checks the result. A
 * gather sends s.rows * s.block contiguous bytes and receives every piece (its own too) as
 * side r; an all-to-all sends side s and receives the other members' pieces as side r. */
static void run_case(const dtr_backend_ops_t *ops, void *group, int me, int n, int c,
                     uint64_t seed, side_t s, side_t r, bool gather, bool blocking, int rank,
                     unsigned char *arena) {
    int64_t bytes = s.rows * s.block;
    int64_t ssize = gather ? bytes : side_bytes(s, n), rsize = side_bytes(r, n);
    /* (in the arena: at an offset of this rank's, off the lines) */
    unsigned char *send = arena != NULL ? arena + 64 * (rank % 3) + rank % 2 : malloc((size_t)ssize);
    unsigned char *keep = malloc((size_t)ssize);
    unsigned char *recv = malloc((size_t)(rsize + GUARD));
    unsigned char *want = malloc((size_t)(rsize + GUARD));
    if (send == NULL || keep == NULL || recv == NULL || want == NULL) {
        fail(rank, c, seed, "out of memory");
        goto out;
    }
    memset(send, FILL_GAP, (size_t)ssize);
    if (gather)
        for (int64_t j = 0; j < bytes; j++) send[j] = value(me, GATHER, j, c);
    else
        for (int k = 0; k < n; k++)
            for (int64_t j = 0; j < bytes; j++) send[side_at(s, k, j)] = value(me, k, j, c);
    memcpy(keep, send, (size_t)ssize);
    memset(recv, FILL_RECV, (size_t)(rsize + GUARD));

    dtr_backend_req_t req;
    dtr_status_t st = gather ? ops->all_gather_strided(group, send, r.rows, r.block, r.row, recv,
                                                       &req)
                             : ops->all_to_all_strided(group, send, s.rows, s.block, s.row, recv,
                                                       r.rows, r.block, r.row, &req);
    if (st == DTR_OK && blocking) st = ops->wait(group, &req);
    for (bool done = false; st == DTR_OK && !blocking && !done;)
        st = ops->test(group, &req, &done);
    char what[256];
    if (st != DTR_OK) {
        snprintf(what, sizeof what, "%s: %s", dtr_status_name(st), dtr_last_error());
        fail(rank, c, seed, what);
        goto out;
    }
    /* every byte: the pieces moved, and FILL_RECV everywhere else */
    memset(want, FILL_RECV, (size_t)(rsize + GUARD));
    for (int k = 0; k < n; k++)
        if (gather || k != me)
            for (int64_t j = 0; j < bytes; j++)
                want[side_at(r, k, j)] = value(k, gather ? GATHER : me, j, c);
    for (int64_t b = 0; b < rsize + GUARD; b++)
        if (recv[b] != want[b]) {
            snprintf(what, sizeof what,
                     "%s: byte %lld of the receive buffer is %u, want %u (send %lldx%lld row "
                     "%lld, receive %lldx%lld row %lld, %s)",
                     gather ? "gather" : "all-to-all", (long long)b, recv[b], want[b],
                     (long long)s.rows, (long long)s.block, (long long)s.row, (long long)r.rows,
                     (long long)r.block, (long long)r.row, blocking ? "blocking" : "non-blocking");
            fail(rank, c, seed, what);
            break;
        }
    if (memcmp(send, keep, (size_t)ssize) != 0) fail(rank, c, seed, "the send buffer was written");
out:
    if (arena == NULL) free(send);
    free(keep);
    free(recv);
    free(want);
}

/* A random case's sides: the receive side cuts the same bytes into rows of another length. */
static void draw(int n, side_t *s, side_t *r) {
    s->rows = 1 + pick(40);
    s->block = 1 + (pick(4) == 0 ? pick(20000) : pick(700));
    int64_t bytes = s->rows * s->block;
    int64_t divs[256];
    int nd = 0;
    for (int64_t d = 1; d * d <= bytes && nd < 254; d++)
        if (bytes % d == 0) {
            divs[nd++] = d;
            divs[nd++] = bytes / d;
        }
    r->rows = divs[pick(nd)];
    r->block = bytes / r->rows;
    s->row = n * s->block + pick(3) * pick(64);
    r->row = n * r->block + pick(3) * pick(64);
}

/* An operation issued over one of the group not yet completed is refused with
 * DTR_ERR_BACKEND; the first then completes with the right bytes. */
static void expect_overlap_refused(const dtr_backend_ops_t *ops, void *group, int n, int rank,
                                   bool first_gather, bool second_gather) {
    int64_t bytes = 3000;
    side_t one = {3, bytes / 3, n * (bytes / 3)};
    unsigned char *in = malloc((size_t)side_bytes(one, n));
    unsigned char *out = calloc(1, (size_t)side_bytes(one, n));
    if (in == NULL || out == NULL) {
        fail(rank, -1, 0, "out of memory");
        free(in);
        free(out);
        return;
    }
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < bytes; j++)
            in[first_gather ? j : side_at(one, k, j)] =
                value(rank, first_gather ? GATHER : k, j, -1);
    dtr_backend_req_t first, second;
    dtr_status_t st = first_gather
                          ? ops->all_gather_strided(group, in, one.rows, one.block, one.row, out,
                                                    &first)
                          : ops->all_to_all_strided(group, in, one.rows, one.block, one.row, out,
                                                    one.rows, one.block, one.row, &first);
    dtr_status_t again = second_gather
                             ? ops->all_gather_strided(group, in, one.rows, one.block, one.row,
                                                       out, &second)
                             : ops->all_to_all_strided(group, in, one.rows, one.block, one.row,
                                                       out, one.rows, one.block, one.row, &second);
    bool refused = again == DTR_ERR_BACKEND && strstr(dtr_last_error(), "never completed");
    if (st == DTR_OK) st = ops->wait(group, &first);
    bool right = st == DTR_OK;
    for (int k = 0; k < n && right; k++)
        for (int64_t j = 0; j < bytes && right; j++)
            right = (!first_gather && k == rank) ||
                    out[side_at(one, k, j)] == value(k, first_gather ? GATHER : rank, j, -1);
    if (!refused || !right) {
        char what[256];
        snprintf(what, sizeof what,
                 "a%s over an unfinished %s: %s (want BACKEND, \"never completed\"); the "
                 "first %s",
                 second_gather ? " gather" : "n all-to-all", first_gather ? "gather" : "all-to-all",
                 dtr_status_name(again), right ? "completed right" : "went wrong");
        fail(rank, -1, 0, what);
    }
    free(in);
    free(out);
}

/* name=value refused by name when the backend's state is made; name's own value restored. */
/* Piece sizes that differ are refused on every member and the group goes on; so are
 * overlapping buffers. */
static void refusals(const dtr_backend_ops_t *ops, void *group, int n, int rank, int c,
                     uint64_t seed, bool shm_gather) {
    dtr_backend_req_t req;
    char buf[64];
    dtr_status_t st = ops->all_to_all_strided(group, buf, 1, 3, 3 * n, buf, 1, 2, 2 * n, &req);
    if (st != DTR_ERR_INVALID_ARGUMENT ||
        strstr(dtr_last_error(), "pieces of 3 bytes sent, 2 received") == NULL) {
        char what[256];
        snprintf(what, sizeof what, "mismatched pieces gave %s: %s", dtr_status_name(st),
                 st == DTR_OK ? "(accepted)" : dtr_last_error());
        fail(rank, c, seed, what);
    }
    expect_overlap_refused(ops, group, n, rank, false, false);
    if (shm_gather) {
        expect_overlap_refused(ops, group, n, rank, true, true);
        expect_overlap_refused(ops, group, n, rank, true, false);
        expect_overlap_refused(ops, group, n, rank, false, true);
    }
}

static void expect_env_refused(const char *name, const char *value, int rank) {
    const char *was = getenv(name);
    char *old = was != NULL ? strdup(was) : NULL;
    setenv(name, value, 1);
    void *state = NULL;
    dtr_status_t st = dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state);
    if (st != DTR_ERR_INVALID_ARGUMENT || strstr(dtr_last_error(), name) == NULL) {
        char what[256];
        snprintf(what, sizeof what, "%s=%s gave %s: %s", name, value, dtr_status_name(st),
                 st == DTR_OK ? "(accepted)" : dtr_last_error());
        fail(rank, -1, 0, what);
        if (st == DTR_OK) dtr_backend_mpi_ops()->destroy(state);
    }
    if (old != NULL) setenv(name, old, 1);
    else unsetenv(name);
    free(old);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int cases = 200;
    uint64_t seed = 20261121;
    bool shared = false;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--shared") == 0) shared = true;
        else if (a + 1 < argc && strcmp(argv[a], "--cases") == 0) cases = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "--seed") == 0) seed = strtoull(argv[++a], NULL, 10);
    }
    const char *env = getenv("DTR_MPI_SHM"), *genv = getenv("DTR_MPI_SHM_GATHER");
    /* a group spanning (simulated) nodes runs through MPI whatever the variables say */
    bool shm = (env == NULL || strcmp(env, "0") != 0) && mpi_paths_one_node();
    bool shm_gather = shm && (genv == NULL || strcmp(genv, "0") != 0);
    const char *chunk = getenv("DTR_MPI_SHM_CHUNK");
    if (rank == 0)
        printf("mpi_shm_test: %d ranks, %d cases, seed %llu, %s, %s%s%s\n", n, cases,
               (unsigned long long)seed, shm ? "shared-memory all-to-all" : "MPI_Alltoallw",
               shm_gather ? "shared-memory gather" : "MPI's strided gather",
               shm && chunk != NULL ? ", chunks of " : "", shm && chunk != NULL ? chunk : "");

    const dtr_backend_ops_t *ops = dtr_backend_mpi_ops();
    void *state = NULL, *groups[2] = {NULL, NULL};
    int *ranks = malloc(sizeof(int) * (size_t)n * 2);
    dtr_status_t st = dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state);
    for (int k = 0; k < n; k++) {
        ranks[k] = k;
        ranks[n + k] = n - 1 - k;
    }
    for (int g = 0; g < 2 && st == DTR_OK; g++)
        st = ops->group_create(state, ranks + g * n, n, 100 + g, &groups[g]);
    unsigned char *arena = NULL;
    if (st == DTR_OK && shared) st = ops->mem_alloc(state, ARENA, (void **)&arena);
    if (st != DTR_OK) {
        printf("rank %d: setup failed: %s: %s\n", rank, dtr_status_name(st), dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* the executor gathers in place where the shared-memory gather beats its slices */
    bool in_place = ops->strided_in_place(groups[0]);
    if (in_place != shm_gather) {
        char what[128];
        snprintf(what, sizeof what, "strided_in_place is %s on %d members, want %s",
                 in_place ? "true" : "false", n, shm_gather ? "true" : "false");
        fail(rank, -1, seed, what);
    }

    int passed = 0, failed = 0;
    for (int c = 0; c < cases; c++) {
        int before = failures;
        rng_state = seed * 1000003u + (uint64_t)c;
        side_t s, r;
        draw(n, &s, &r);
        int g = (int)pick(2);
        bool blocking = pick(2) == 0, gather = pick(2) == 0;
        if (c == cases / 3) {
            /* a gather whose output is written with streaming stores (8 MiB or more), in
             * rows that start and end off the 64-byte lines */
            gather = true;
            s.block = 4099;
            s.rows = ((8 << 20) / n + s.block - 1) / s.block + 1;
        }
        if (gather) {
            r.rows = s.rows;
            r.block = s.block;
            r.row = n * s.block + pick(3) * pick(64);
        }
        int me = g == 0 ? rank : n - 1 - rank;
        /* --shared: one member's send buffer on the heap now and then (the ring form) */
        int heap = pick(5) == 0 ? (int)pick(n) : -1;
        int64_t ssize = gather ? s.rows * s.block : side_bytes(s, n);
        bool in_arena = arena != NULL && ssize + 128 <= ARENA;
        int64_t before_direct = direct_ops(g);
        run_case(ops, groups[g], me, n, c, seed, s, r, gather, blocking, rank,
                 in_arena && rank != heap ? arena : NULL);
        direct_seen += direct_ops(g) - before_direct;
        direct_want += in_arena && heap < 0 && shm && !gather && n > 1;
        int mine = failures > before, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) failed++;
        else passed++;
        if (shm && c == cases / 2) refusals(ops, groups[0], n, rank, c, seed, shm_gather);
    }
    if (shm) {
        expect_env_refused("DTR_MPI_SHM_CHUNK", "0", rank);
        expect_env_refused("DTR_MPI_SHM_CHUNK", "abc", rank);
        expect_env_refused("DTR_MPI_SHM_CHUNK", "99999999", rank);
        expect_env_refused("DTR_MPI_SHM_CHUNK", "12k", rank);
        expect_env_refused("DTR_MPI_SHM", "off", rank);
        expect_env_refused("DTR_MPI_SHM_GATHER", "false", rank);
    }

    if (shared && direct_seen != direct_want) {
        char what[128];
        snprintf(what, sizeof what, "%lld all-to-alls read the send buffers where they are, "
                 "want %lld", (long long)direct_seen, (long long)direct_want);
        fail(rank, -1, seed, what);
    } else if (shared && rank == 0) {
        printf("  all-to-alls reading the send buffers where they are: %lld\n",
               (long long)direct_seen);
    }
    if (arena != NULL) ops->mem_free(state, arena);
    if (mpi_paths_check("strided all-to-all and gather") > 0) failures++;
    for (int g = 0; g < 2; g++) ops->group_destroy(state, groups[g]);
    ops->destroy(state);
    free(ranks);
    /* the error checks count as one more case */
    int bad = failures > 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad && failed == 0) failed++;
    else if (!anybad) passed++;
    if (rank == 0)
        printf("strided all-to-all and gather on %d ranks: %d passed, %d failed\n", n, passed,
               failed);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
